"""The Redis replay store on redis-py's asyncio client (``redis.asyncio``), for the ASGI middleware.

The same records, keys, Lua scripts and claim as :mod:`apimw._stores.redis_store`
(``SET NX PX GET``, the Lua claim on servers before 7.0, the owner-fenced
complete/release/extend scripts), the same URLs (one :func:`redis_client` builds
both kinds of client), and the same error contract: every failure is a
:class:`~apimw.errors.StoreError`.

An asyncio connection belongs to the event loop that opened it, so the store keeps
one client per running loop (a server runs one loop per worker; a test may run several),
each over its own pool bounded by the URL's ``max_connections`` (see
:mod:`apimw._stores.redis_store` for the URL options).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any, Final

import redis
import redis.asyncio
import redis.asyncio.retry

from apimw._stores import PREFIX_LEN, display_url
from apimw._stores.redis_store import (
    _CLAIM,
    _COMPLETE,
    _ERRORS,
    _EXTEND,
    _RELEASE,
    Flavour,
    _ms,
    claim_reply,
    redis_client,
)
from apimw.errors import StoreError

ASYNC: Final = Flavour(
    redis.asyncio.Redis,
    redis.asyncio.BlockingConnectionPool,
    "redis.asyncio.cluster",
    "redis.asyncio.sentinel",
    redis.asyncio.retry.Retry,
)


class _Client:
    """One loop's client and its registered scripts."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.claim = client.register_script(_CLAIM)
        self.complete = client.register_script(_COMPLETE)
        self.release = client.register_script(_RELEASE)
        self.extend = client.register_script(_EXTEND)


class AsyncRedisStore:
    """Records in Redis through ``redis.asyncio`` (standalone, Sentinel-managed or Cluster)."""

    def __init__(self, url: str, *, timeout: float = 0.5) -> None:
        self.name = display_url(url)
        self._url = url
        self._timeout = timeout
        redis_client(url, timeout=timeout, flavour=ASYNC)  # a malformed URL fails here, at construction
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Client] = (
            weakref.WeakKeyDictionary()
        )
        self._set_get = True

    def __repr__(self) -> str:
        return f"<AsyncRedisStore {self.name}>"

    def _client(self) -> _Client:
        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is None:
            found = self._clients[loop] = _Client(
                redis_client(self._url, timeout=self._timeout, flavour=ASYNC)
            )
        return found

    def _fail(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.name}: {what} failed: {type(exc).__name__}: {exc}")

    async def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        client = self._client()
        if self._set_get:
            # Redis >= 7.0: SET NX GET is the claim and the read of a taken key in one command.
            try:
                old = await client.client.set(key, value, nx=True, px=_ms(lease), get=True)
            except (redis.ResponseError, redis.DataError):
                self._set_get = False  # an older server: the Lua script from now on
            except _ERRORS as exc:
                raise self._fail("claim", exc) from exc
            else:
                return None if old is None else bytes(old)
        try:
            result = await client.claim(keys=[key], args=[value, _ms(lease)])
        except _ERRORS as exc:
            raise self._fail("claim", exc) from exc
        return claim_reply(result, self.name)

    async def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        try:
            return bool(
                await self._client().complete(keys=[key], args=[expect[:PREFIX_LEN], value, _ms(ttl)])
            )
        except _ERRORS as exc:
            raise self._fail("complete", exc) from exc

    async def release(self, key: str, expect: bytes) -> bool:
        try:
            return bool(await self._client().release(keys=[key], args=[expect[:PREFIX_LEN]]))
        except _ERRORS as exc:
            raise self._fail("release", exc) from exc

    async def extend(self, key: str, expect: bytes, lease: float) -> bool:
        try:
            return bool(await self._client().extend(keys=[key], args=[expect[:PREFIX_LEN], _ms(lease)]))
        except _ERRORS as exc:
            raise self._fail("extend", exc) from exc

    async def get(self, key: str) -> bytes | None:
        try:
            value = await self._client().client.get(key)
        except _ERRORS as exc:
            raise self._fail("get", exc) from exc
        return None if value is None else bytes(value)

    async def ping(self) -> None:
        try:
            await self._client().client.ping()
        except _ERRORS as exc:
            raise self._fail("ping", exc) from exc

    async def aclose(self) -> None:
        """Close the running loop's client (the store opens a new one if used again)."""
        found = self._clients.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found.client.aclose()
