"""Replay stores for asyncio (the ASGI middlewares): the same records, claims and fencing.

:class:`AsyncStore` is :class:`~apimw._stores.Store` with awaitable methods.
:func:`open_async_store` opens one from the same URLs:

``memory://``
    The :class:`~apimw._stores.memory_store.MemoryStore` itself, called inline: each
    call holds a lock for microseconds and does no I/O, so it never blocks the loop.
    ``memory://<name>`` is the same store a WSGI middleware of the process names.
``memcached://``
    The :class:`~apimw._stores.memcached_store.MemcachedStore`, each call in a worker
    thread (``asyncio.to_thread``).  Chosen by measurement over ``aiomcache`` 0.8
    (``bench/bench_asgi.py --memcached``): the thread hop costs less than the extra
    round trip ``aiomcache`` needs (it cannot pipeline ``add`` with ``gets``), and the
    claim, cas and reply parsing stay written once.
``redis://`` and the other Redis schemes
    :class:`~apimw._stores.redis_aio_store.AsyncRedisStore` (``redis.asyncio``), on the
    same Lua scripts and URL parsing as the blocking store.

Every method raises :class:`~apimw.errors.StoreError` when the backend fails.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, Protocol
from urllib.parse import urlsplit

from apimw._stores import Store, open_store
from apimw._stores.memory_store import MemoryStore

__all__ = ["AsyncStore", "InlineStore", "ThreadedStore", "asyncio_twin", "is_async_store", "open_async_store"]

_REDIS_SCHEMES = frozenset(("redis", "rediss", "unix", "redis+cluster", "redis+sentinel"))


class AsyncStore(Protocol):
    """What the ASGI idempotency middleware needs from a backend (see :class:`~apimw._stores.Store`)."""

    name: str

    async def claim(self, key: str, value: bytes, lease: float) -> bytes | None: ...

    async def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool: ...

    async def release(self, key: str, expect: bytes) -> bool: ...

    async def extend(self, key: str, expect: bytes, lease: float) -> bool: ...

    async def get(self, key: str) -> bytes | None: ...

    async def aclose(self) -> None: ...


class InlineStore:
    """A blocking :class:`Store` whose calls never wait on I/O (``memory://``), awaited inline."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.name = store.name

    def __repr__(self) -> str:
        return f"<InlineStore {self.store!r}>"

    async def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        return self.store.claim(key, value, lease)

    async def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        return self.store.complete(key, expect, value, ttl)

    async def release(self, key: str, expect: bytes) -> bool:
        return self.store.release(key, expect)

    async def extend(self, key: str, expect: bytes, lease: float) -> bool:
        return self.store.extend(key, expect, lease)

    async def get(self, key: str) -> bytes | None:
        return self.store.get(key)

    async def aclose(self) -> None:
        self.store.close()


class ThreadedStore:
    """A blocking network :class:`Store` (``memcached://``), each call in a worker thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.name = store.name
        self.item_size_max: Any = getattr(store, "item_size_max", None)

    def __repr__(self) -> str:
        return f"<ThreadedStore {self.store!r}>"

    async def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        return await asyncio.to_thread(self.store.claim, key, value, lease)

    async def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        return await asyncio.to_thread(self.store.complete, key, expect, value, ttl)

    async def release(self, key: str, expect: bytes) -> bool:
        return await asyncio.to_thread(self.store.release, key, expect)

    async def extend(self, key: str, expect: bytes, lease: float) -> bool:
        return await asyncio.to_thread(self.store.extend, key, expect, lease)

    async def get(self, key: str) -> bytes | None:
        return await asyncio.to_thread(self.store.get, key)

    async def aclose(self) -> None:
        await asyncio.to_thread(self.store.close)


def open_async_store(url: str, *, timeout: float = 0.5) -> AsyncStore:
    """The asyncio store of *url*; the same URLs, errors and timeouts as :func:`~apimw._stores.open_store`.

    No connection is made here: the first request connects.
    """
    return asyncio_twin(open_store(url, timeout=timeout), url=url, timeout=timeout)


def is_async_store(store: object) -> bool:
    """Whether *store* is an :class:`AsyncStore` (its ``claim`` is a coroutine function)."""
    return inspect.iscoroutinefunction(getattr(store, "claim", None))


def asyncio_twin(store: Store, *, url: str | None, timeout: float = 0.5) -> AsyncStore:
    """The asyncio store over the same records as the blocking *store* (opened from *url*, if any).

    ``memory://`` is the same object, called inline; a Redis URL gets its
    :class:`~apimw._stores.redis_aio_store.AsyncRedisStore`; any other blocking store
    (memcached, a custom one) runs in worker threads.
    """
    if isinstance(store, MemoryStore):
        return InlineStore(store)
    if url is not None and urlsplit(url).scheme.lower() in _REDIS_SCHEMES:
        from apimw._stores.redis_aio_store import AsyncRedisStore

        return AsyncRedisStore(url, timeout=timeout)
    return ThreadedStore(store)
