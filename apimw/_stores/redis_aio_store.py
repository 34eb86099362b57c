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
from collections.abc import Awaitable, Callable
from typing import Any, Final

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel

from apimw._stores.base import PREFIX_LEN, display_url
from apimw._stores.redis_store import (
    CLAIM_SCRIPT,
    COMPLETE_SCRIPT,
    ERRORS,
    EXTEND_SCRIPT,
    RELEASE_SCRIPT,
    Flavour,
    claim_reply,
    milliseconds,
    redis_client,
    refusing_pool_slots,
)
from apimw.errors import StoreError

ASYNC: Final = Flavour(
    redis.asyncio.Redis,
    redis.asyncio.BlockingConnectionPool,
    redis.asyncio.cluster.RedisCluster,
    redis.asyncio.cluster.ClusterNode,
    redis.asyncio.sentinel.Sentinel,
    redis.asyncio.retry.Retry,
)


class _Client:
    """One loop's client, its registered scripts, and the calls it may run at once.

    redis-py's asyncio ``RedisCluster`` and Sentinel pool refuse a command past
    ``max_connections`` (``MaxConnectionsError``) instead of waiting as the blocking pool of
    the other clients does, so their calls first wait for one of ``max_connections`` slots
    (a single-key call uses one node, so no node is ever asked for more).
    """

    def __init__(self, client: Any, slots: int | None) -> None:
        self.client = client
        self.slots = asyncio.Semaphore(slots) if slots is not None else None
        self.claim = client.register_script(CLAIM_SCRIPT)
        self.complete = client.register_script(COMPLETE_SCRIPT)
        self.release = client.register_script(RELEASE_SCRIPT)
        self.extend = client.register_script(EXTEND_SCRIPT)


class AsyncRedisStore:
    """Records in Redis through ``redis.asyncio`` (standalone, Sentinel-managed or Cluster).

    *url*: any URL of :mod:`apimw._stores.redis_store`, with the same options; *timeout*:
    their default timeouts (seconds), and the longest wait for a free connection.
    """

    def __init__(self, url: str, *, timeout: float = 0.5) -> None:
        self.name = display_url(url)
        self._url = url
        self._timeout = timeout
        redis_client(url, timeout=timeout, flavour=ASYNC)  # a malformed URL fails here, at construction
        self._slots = refusing_pool_slots(url, ASYNC)
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
                redis_client(self._url, timeout=self._timeout, flavour=ASYNC), self._slots
            )
        return found

    def _fail(self, what: str, exc: BaseException) -> StoreError:
        return StoreError(f"{self.name}: {what} failed: {type(exc).__name__}: {exc}")

    async def _run(self, what: str, call: Callable[[_Client], Awaitable[Any]]) -> Any:
        """``call(client)``, in a cluster slot if the client needs one; every failure a StoreError."""
        client = self._client()
        try:
            if client.slots is None:
                return await call(client)
            try:
                await asyncio.wait_for(client.slots.acquire(), self._timeout)
            except TimeoutError:
                raise StoreError(
                    f"{self.name}: {what}: all {self._slots} connections stayed busy for "
                    f"{self._timeout:g} s (max_connections)"
                ) from None
            try:
                return await call(client)
            finally:
                client.slots.release()
        except ERRORS as exc:
            raise self._fail(what, exc) from exc

    async def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        if self._set_get:
            # Redis >= 7.0: SET NX GET is the claim and the read of a taken key in one command.
            try:
                old = await self._run(
                    "claim", lambda c: c.client.set(key, value, nx=True, px=milliseconds(lease), get=True)
                )
            except StoreError as exc:
                if not isinstance(exc.__cause__, (redis.ResponseError, redis.DataError)):
                    raise
                self._set_get = False  # an older server: the Lua script from now on
            else:
                return None if old is None else bytes(old)
        result = await self._run("claim", lambda c: c.claim(keys=[key], args=[value, milliseconds(lease)]))
        return claim_reply(result, self.name)

    async def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        args = [expect[:PREFIX_LEN], value, milliseconds(ttl)]
        return bool(await self._run("complete", lambda c: c.complete(keys=[key], args=args)))

    async def release(self, key: str, expect: bytes) -> bool:
        return bool(await self._run("release", lambda c: c.release(keys=[key], args=[expect[:PREFIX_LEN]])))

    async def extend(self, key: str, expect: bytes, lease: float) -> bool:
        args = [expect[:PREFIX_LEN], milliseconds(lease)]
        return bool(await self._run("extend", lambda c: c.extend(keys=[key], args=args)))

    async def get(self, key: str) -> bytes | None:
        value = await self._run("get", lambda c: c.client.get(key))
        return None if value is None else bytes(value)

    async def ping(self) -> None:
        await self._run("ping", lambda c: c.client.ping())

    async def aclose(self) -> None:
        """Close the running loop's client (the store opens a new one if used again)."""
        found = self._clients.pop(asyncio.get_running_loop(), None)
        if found is not None:
            await found.client.aclose()
            # a Sentinel master's pool asks the Sentinels through clients of their own
            pool = getattr(found.client, "connection_pool", None)  # a RedisCluster has none
            manager = getattr(pool, "sentinel_manager", None)
            for sentinel in getattr(manager, "sentinels", ()):
                await sentinel.aclose()
