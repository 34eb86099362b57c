"""Replay stores for asyncio (the ASGI middlewares): the same records, claims and fencing.

:class:`AsyncStore` is :class:`~apimw._stores.Store` with awaitable methods.
:func:`open_async_store` opens one from the same URLs:

``memory://``
    The :class:`~apimw._stores.memory_store.MemoryStore` itself, called inline: each
    call holds a lock for microseconds and does no I/O, so it never blocks the loop.
    ``memory://<name>`` is the same store a WSGI middleware of the process names.
``memcached://``
    The :class:`~apimw._stores.memcached_store.MemcachedStore`, each call in a worker
    thread of the store's own (:class:`ThreadedStore`), as many threads as the store has
    connections (``max_pool_size`` per server).  Chosen by measurement over ``aiomcache`` 0.8:
    the thread hop costs less than the extra
    round trip ``aiomcache`` needs (it cannot pipeline ``add`` with ``gets``), and the
    claim, cas and reply parsing stay written once.
``redis://`` and the other Redis schemes
    :class:`~apimw._stores.redis_aio_store.AsyncRedisStore` (``redis.asyncio``), on the
    same Lua scripts and URL parsing as the blocking store.

Every method raises :class:`~apimw.errors.StoreError` when the backend fails.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import urlsplit

from apimw._stores import Store, open_store
from apimw._stores.memory_store import MemoryStore
from apimw.errors import StoreError

__all__ = ["AsyncStore", "InlineStore", "ThreadedStore", "asyncio_twin", "is_async_store", "open_async_store"]

_T = TypeVar("_T")
#: threads of a :class:`ThreadedStore` (each waits on one store command at a time)
THREADS: Final = 32
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
    """A blocking network :class:`Store` (``memcached://``), each call in a worker thread.

    The threads are the store's own: *threads* of them (default: the store's
    ``max_connections`` when it has one -- a memcached store's ``max_pool_size`` per
    server -- else :data:`THREADS`), started as needed, so no more calls wait on the
    server at once than the store has connections for.  Not asyncio's default
    executor: a hung server then neither holds up the rest of the process's
    ``asyncio.to_thread`` work nor waits behind it.  A call before the app runs (``claim``,
    ``get``) that no thread has taken up within the store's timeout (*timeout*, or the
    store's own ``timeout``) is dropped unsent and raises :class:`StoreError`: the request
    gets its 503 in about the store timeout, as with a server that does not answer, instead
    of queueing behind calls that each wait out their socket timeouts.  Calls after the app
    ran (``complete``, ``release``, ``extend``) wait their turn.
    """

    def __init__(self, store: Store, *, timeout: float = 0.5, threads: int | None = None) -> None:
        self.store = store
        self.name = store.name
        self.item_size_max: Any = getattr(store, "item_size_max", None)
        own = getattr(store, "timeout", None)
        #: seconds a claim or get may wait for a free thread
        self.queue_timeout: float = own if isinstance(own, (int, float)) and own > 0 else timeout
        if threads is None:
            bound = getattr(store, "max_connections", None)
            threads = bound if isinstance(bound, int) and bound > 0 else THREADS
        #: worker threads (at most this many calls wait on the server at once)
        self.threads: int = threads
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0

    def __repr__(self) -> str:
        return f"<ThreadedStore {self.store!r}>"

    def _executor(self) -> ThreadPoolExecutor:
        pool = self._pool
        if pool is None or self._pid != os.getpid():  # a forked child has none of the threads
            pool = self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="apimw-store")
            self._pid = os.getpid()
        return pool

    async def _call(self, call: Callable[..., _T], *args: Any, queued: float | None = None) -> _T:
        """``call(*args)`` in one of the store's threads; dropped unsent if no thread took it
        up within *queued* seconds."""
        started = self._executor().submit(contextvars.copy_context().run, call, *args)
        result = asyncio.wrap_future(started)
        if queued is None:
            return await result
        try:
            return await asyncio.wait_for(asyncio.shield(result), queued)
        except TimeoutError:
            if started.cancel():  # never started: nothing reached the server
                raise StoreError(
                    f"{self.name}: {call.__name__} not started within {queued:g} s: the store's "
                    f"{self.threads} threads are all waiting on the server"
                ) from None
            return await result  # running: the store's own socket timeouts bound it
        except asyncio.CancelledError:
            started.cancel()
            raise

    async def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        return await self._call(self.store.claim, key, value, lease, queued=self.queue_timeout)

    async def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        return await self._call(self.store.complete, key, expect, value, ttl)

    async def release(self, key: str, expect: bytes) -> bool:
        return await self._call(self.store.release, key, expect)

    async def extend(self, key: str, expect: bytes, lease: float) -> bool:
        return await self._call(self.store.extend, key, expect, lease)

    async def get(self, key: str) -> bytes | None:
        return await self._call(self.store.get, key, queued=self.queue_timeout)

    async def aclose(self) -> None:
        await self._call(self.store.close)
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)


def open_async_store(url: str, *, timeout: float = 0.5) -> AsyncStore:
    """The asyncio replay store of *url*, for :class:`apimw.asgi.IdempotencyMiddleware`: the
    same URLs, errors and timeouts as :func:`apimw.idempotency.open_store` (which opens the
    blocking store of the WSGI door).

    Pass it as the middleware's ``store`` to close it yourself at shutdown (a lifespan
    handler: ``await store.aclose()``).  No connection is made here: the first request connects.
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
        from apimw._stores.redis_aio_store import AsyncRedisStore  # extra "redis": redis-py

        return AsyncRedisStore(url, timeout=timeout)
    return ThreadedStore(store, timeout=timeout)
