"""The idempotency middleware for ASGI (:class:`IdempotencyMiddleware`) and
:func:`open_replay_store`."""

from __future__ import annotations

from functools import partial
from typing import Any

from apimw import idempotency as _idempotency
from apimw._idempotency_body import read_body
from apimw._idempotency_capture import Exchange
from apimw._idempotency_metered import MeteredStore
from apimw._stores import Store
from apimw._stores.aio import AsyncStore, asyncio_twin, is_async_store, open_async_store
from apimw.asgi._glue import (
    ASGIApp,
    Buffered,
    Message,
    RawHeaders,
    Receive,
    Replay,
    Scope,
    Send,
    add_cgi_keys,
    await_ops,
    header_values,
    raw_headers,
    receive_body,
    send_text,
    set_request_headers,
    text_headers,
)
from apimw.errors import ConfigError, HTTPProblem, problem_answer, status_line

_NO_APP: Any = None  # what the rules' WSGI instance "wraps": it is never called


def open_replay_store(url: str, *, timeout: float = 0.5) -> AsyncStore:
    """The asyncio replay store of *url* (``memory://``, ``redis://...``, ``memcached://...``).

    Pass it as the middleware's ``store`` to close it yourself at shutdown (a lifespan
    handler: ``await store.aclose()``).  No connection is made here.
    """
    return open_async_store(url, timeout=timeout)


class _AsyncOnly:
    """The blocking store the rules hold when given an asyncio store: never called (the ASGI
    middleware awaits the asyncio one)."""

    def __init__(self, store: AsyncStore) -> None:
        self.name = store.name

    def close(self) -> None:
        """Closed by :meth:`IdempotencyMiddleware.aclose` (closing awaits)."""


class IdempotencyMiddleware:
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
        self.app = app
        self._blocking: Store | None = None
        if is_async_store(store):
            if options.get("renew_lease"):
                raise ConfigError(
                    "idempotency: renew_lease needs a store URL or a blocking store (it renews from a thread)"
                )
            self.store: AsyncStore = store  # type: ignore[assignment]
            self.rules = _idempotency.IdempotencyMiddleware(
                _NO_APP, store=_AsyncOnly(self.store), store_timeout=store_timeout, **options  # type: ignore[arg-type]
            )
        else:
            blocking: str | Store = store  # type: ignore[assignment]
            self.rules = _idempotency.IdempotencyMiddleware(
                _NO_APP, store=blocking, store_timeout=store_timeout, **options
            )
            url = store if isinstance(store, str) else None
            self.store = asyncio_twin(self.rules.store, url=url, timeout=store_timeout)
            self._blocking = self.rules.store
        metrics = self.rules.metrics
        #: what the middleware awaits: the store, or the store timed for ``metrics``
        self._calls: Any = self.store if metrics is None else MeteredStore(self.store, metrics)  # type: ignore[arg-type]
        self._token_header = _idempotency.CLIENT_TOKEN_HEADER.lower().encode("latin-1")
        key = _idempotency.IDEMPOTENCY_KEY_HEADER.lower().encode("latin-1")
        self._key_header = key if self.rules._accept_key else b"\0"  # never a header name

    async def aclose(self) -> None:
        """Close the store's connections (at shutdown; reconnects if used again)."""
        renewer = self.rules._renewer
        if renewer is not None:
            renewer.stop()
        await self.store.aclose()
        if self._blocking is not None and self._blocking is not getattr(self.store, "store", None):
            self._blocking.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rules = self.rules
        if scope["type"] != "http" or scope["method"].upper() not in rules._methods:
            await self.app(scope, receive, send)
            return
        headers = scope.get("headers", ())
        client_token, key_header = header_values(headers, self._token_header, self._key_header)
        if client_token is None and key_header is None and not rules._require_token:
            await self.app(scope, receive, send)
            return
        # the rules, and the deployment's scope function, read the request's CGI keys
        header_keys = add_cgi_keys(scope)
        if client_token is None and key_header is None:
            answer = rules.token_required(scope)
        else:
            answer = await await_ops(
                rules.protect(scope, client_token, key_header, header_keys),
                self._calls,
                partial(self._body, scope, receive),
            )
        if answer.kind == _idempotency.ANSWER:
            await send_text(send, answer.status, answer.headers, answer.body)
            return
        app_receive = Replay(scope["wsgi.input"].getvalue(), receive).receive
        if answer.kind == _idempotency.UNPROTECTED:
            marker = raw_headers([(_idempotency.UNPROTECTED_HEADER, "unprotected")])

            async def marked(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message = {**message, "headers": [*message.get("headers", ()), *marker]}
                await send(message)

            await self.app(scope, app_receive, marked)
            return
        await self._exchange(scope, app_receive, send, answer)

    async def _body(self, scope: Scope, receive: Receive) -> Any:
        """The request body for the rules (``read_body``'s answer); the app gets the same bytes."""
        rules = self.rules
        length, encoding = scope.get("CONTENT_LENGTH"), scope.get("HTTP_TRANSFER_ENCODING")
        scope["wsgi.input"] = await receive_body(receive, rules._max_request)
        body = read_body(scope, rules._max_request)
        # the request headers read_body rewrote (an exact Content-Length), as the app reads them
        dropped: list[bytes] = []
        added: RawHeaders = []
        exact = scope.get("CONTENT_LENGTH")
        if exact != length:
            dropped.append(b"content-length")
            if exact is not None:
                added.append((b"content-length", exact.encode("latin-1")))
        if encoding is not None and "HTTP_TRANSFER_ENCODING" not in scope:
            dropped.append(b"transfer-encoding")
        if dropped:
            set_request_headers(scope, dropped, added)
        return body

    async def _exchange(self, scope: Scope, receive: Receive, send: Send, answer: Any) -> None:
        """The app runs under the claim: its answer is stored (or the claim released), then sent."""
        rules = self.rules
        keeping = rules._keeping
        exchange = Exchange(
            _NO_APP, _NO_APP, rules._renewer, keeping, scope, _NO_APP, answer.claim, answer.token
        )
        exchange.begin()
        try:
            try:
                buffered = Buffered()
                await self.app(scope, receive, buffered)
                if buffered.status is None:  # the claim is released below
                    raise RuntimeError("the ASGI app returned without sending http.response.start")
                exchange.status = status_line(buffered.status)
                exchange.headers = text_headers(buffered.headers)
                exchange.add(buffered.body)
            except HTTPProblem as problem:
                # a deliberate error answer from the app: stored like any 4xx
                status, headers, body = problem_answer(
                    scope, problem, method=scope["method"], profile=keeping.profile
                )
                exchange.status, exchange.headers, exchange.chunks, exchange.size = status, headers, [], 0
                exchange.add(body)
            except BaseException:
                await await_ops(exchange.releasing(), self._calls)
                raise
            status, headers, body = await await_ops(exchange.finishing(), self._calls)
            await send_text(send, status, headers, body)
        finally:
            rules.exchanged(scope, exchange)
