"""apimw's three middlewares for ASGI 3 (Starlette, FastAPI, any ASGI server).

Each class takes the ASGI app first and the same keyword options as its WSGI twin
(:class:`apimw.microversion.MicroversionMiddleware`,
:class:`apimw.etag.ETagMiddleware`, :class:`apimw.idempotency.IdempotencyMiddleware`),
validated by the twin, and gives the same answers: the twin runs each request (see
:mod:`apimw.asgi._bridge`), its waits awaited on the event loop.  With FastAPI::

    app.add_middleware(ETagMiddleware, min_version="1.1")
    app.add_middleware(IdempotencyMiddleware, store="redis://127.0.0.1:6379/0", scope="shared")
    app.add_middleware(MicroversionMiddleware, service_type="baremetal",
                       min_version="1.1", max_version="1.9")

(the last added runs first).  What the middlewares hand the app is in the request's
scope under the environ keys of the WSGI middlewares: ``served_version(request.scope)``,
``if_match(request.scope)``, ``mark_enforced(request.scope)``, ``client_token(request.scope)``.
See ``docs/asgi.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, MutableMapping
from typing import Any

from apimw import etag as _etag
from apimw import idempotency as _idempotency
from apimw import microversion as _microversion
from apimw._etag_conditions import IfMatch
from apimw._microversion_type import Version
from apimw._stores import Store
from apimw._stores.aio import AsyncStore, InlineStore, asyncio_twin, is_async_store, open_async_store
from apimw.errors import ConfigError, explain_missing

try:
    from apimw.asgi._bridge import ASGIApp, CallASGI, Receive, Scope, Send, await_only, serve
except ImportError as exc:
    explain_missing(exc, "apimw.asgi", module="greenlet", library="greenlet", extra="asgi")
    raise
from apimw.etag import ENVIRON_IF_MATCH, mark_enforced, set_response_etag
from apimw.idempotency import client_token
from apimw.microversion import served_version

__all__ = [
    "ETagMiddleware",
    "IdempotencyMiddleware",
    "MicroversionMiddleware",
    "Version",
    "client_token",
    "if_match",
    "mark_enforced",
    "open_replay_store",
    "served_version",
    "set_response_etag",
]


def open_replay_store(url: str, *, timeout: float = 0.5) -> AsyncStore:
    """The asyncio replay store of *url* (``memory://``, ``redis://...``, ``memcached://...``).

    Pass it as the middleware's ``store`` to close it yourself at shutdown (a lifespan
    handler: ``await store.aclose()``).  No connection is made here.
    """
    return open_async_store(url, timeout=timeout)


def if_match(scope: MutableMapping[str, Any]) -> IfMatch | None:
    """The parsed If-Match of the write being served (``None`` without one)."""
    found = scope.get(ENVIRON_IF_MATCH)
    return found if isinstance(found, IfMatch) else None


class _Twin:
    """An ASGI middleware whose requests its WSGI twin (``self.wsgi``) runs.

    Adjacent apimw middlewares run as one WSGI stack in one greenlet: an outer one wraps
    the inner one's twin directly (the WSGI stack of the same order, its answers exactly).
    """

    wsgi: Any

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def wsgi_app(self) -> Any:
        """What the WSGI twin wraps: the inner apimw middleware's twin, else the ASGI app."""
        return self.app.wsgi if isinstance(self.app, _Twin) else CallASGI(self.app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await serve(self.wsgi, self.app, scope, receive, send)


class MicroversionMiddleware(_Twin):
    """:class:`apimw.microversion.MicroversionMiddleware` for ASGI: the same options and answers."""

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        super().__init__(app)
        self.wsgi = _microversion.MicroversionMiddleware(self.wsgi_app(), **options)


def _awaited(call: Callable[..., Any] | str | None) -> Callable[..., Any] | str | None:
    """A coroutine function as the plain callable the WSGI twin calls (awaited on the loop)."""
    if call is None or isinstance(call, str) or not _is_coroutine_function(call):
        return call
    coroutine_function = call

    def awaited(environ: Any) -> Any:
        return await_only(coroutine_function(environ))

    return awaited


def _is_coroutine_function(call: object) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


class ETagMiddleware(_Twin):
    """:class:`apimw.etag.ETagMiddleware` for ASGI: the same options and answers.

    ``current_etag`` may also be an ``async def`` of the scope (a database lookup).
    """

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        super().__init__(app)
        if "current_etag" in options:
            options["current_etag"] = _awaited(options["current_etag"])
        self.wsgi = _etag.ETagMiddleware(self.wsgi_app(), **options)


class _AwaitedStore:
    """The blocking :class:`~apimw._stores.Store` the WSGI twin calls, over an :class:`AsyncStore`.

    Called only in a request's greenlet: each call is awaited on the loop.
    """

    def __init__(self, store: AsyncStore) -> None:
        self.aio = store
        self.name = store.name

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        return await_only(self.aio.claim(key, value, lease))

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        return await_only(self.aio.complete(key, expect, value, ttl))

    def release(self, key: str, expect: bytes) -> bool:
        return await_only(self.aio.release(key, expect))

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        return await_only(self.aio.extend(key, expect, lease))

    def get(self, key: str) -> bytes | None:
        return await_only(self.aio.get(key))

    def close(self) -> None:
        """Closed by :meth:`IdempotencyMiddleware.aclose` (closing awaits)."""


class IdempotencyMiddleware(_Twin):
    """:class:`apimw.idempotency.IdempotencyMiddleware` for ASGI: the same options and answers.

    ``store`` is a URL (the records of a WSGI service on the same store are shared), a
    blocking store, or an asyncio store.  Its calls are awaited: ``memory://`` inline,
    Redis through ``redis.asyncio``, memcached in worker threads.  ``renew_lease``
    renews from its thread through the blocking store of the same URL.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        store: str | Store | AsyncStore = "memory://",
        store_timeout: float = 0.5,
        **options: Any,
    ) -> None:
        super().__init__(app)
        self._blocking: Store | None = None
        if is_async_store(store):
            if options.get("renew_lease"):
                raise ConfigError(
                    "idempotency: renew_lease needs a store URL or a blocking store (it renews from a thread)"
                )
            self.store: AsyncStore = store  # type: ignore[assignment]
            self.wsgi = _idempotency.IdempotencyMiddleware(
                self.wsgi_app(), store=_AwaitedStore(self.store), store_timeout=store_timeout, **options
            )
        else:
            blocking: str | Store = store  # type: ignore[assignment]
            self.wsgi = _idempotency.IdempotencyMiddleware(
                self.wsgi_app(), store=blocking, store_timeout=store_timeout, **options
            )
            url = store if isinstance(store, str) else None
            self.store = asyncio_twin(self.wsgi.store, url=url, timeout=store_timeout)
            self._blocking = self.wsgi.store
            if not isinstance(self.store, InlineStore):  # memory:// never waits: called as it is
                self.wsgi.store = _AwaitedStore(self.store)  # the renewer keeps the blocking one

    async def aclose(self) -> None:
        """Close the store's connections (at shutdown; reconnects if used again)."""
        renewer = self.wsgi._renewer
        if renewer is not None:
            renewer.stop()
        await self.store.aclose()
        if self._blocking is not None and self._blocking is not getattr(self.store, "store", None):
            self._blocking.close()
