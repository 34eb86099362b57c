"""apimw's three middlewares for ASGI 3 (Starlette, FastAPI, any ASGI server).

Each class takes the ASGI app first and the same keyword options as its WSGI twin
(:class:`apimw.microversion.MicroversionMiddleware`,
:class:`apimw.etag.ETagMiddleware`, :class:`apimw.idempotency.IdempotencyMiddleware`),
validated by the twin, and gives the same answers.  With FastAPI::

    app.add_middleware(ETagMiddleware, min_version="1.1")
    app.add_middleware(IdempotencyMiddleware, store="redis://127.0.0.1:6379/0", scope="shared")
    app.add_middleware(MicroversionMiddleware, service_type="baremetal",
                       min_version="1.1", max_version="1.9")

(the last added runs first).  What the middlewares hand the app is in the request's
scope under the environ keys of the WSGI middlewares: ``served_version(request.scope)``,
``if_match(request.scope)``, ``mark_enforced(request.scope)``, ``client_token(request.scope)``.
See ``docs/asgi.md``.

The rules are the WSGI classes': each ASGI middleware holds an instance of its WSGI twin
(``rules``, built with the same options) and asks its sans-IO decisions
(:meth:`~apimw.microversion.MicroversionMiddleware.negotiated`,
:meth:`~apimw.etag.ETagMiddleware.enter`,
:meth:`~apimw.idempotency.IdempotencyMiddleware.protect`...), moving ASGI messages to and
from them (:mod:`apimw.asgi._glue`); the store calls the idempotency rules yield are awaited
on an asyncio store.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, MutableMapping
from functools import partial
from typing import Any

from apimw import etag as _etag
from apimw import idempotency as _idempotency
from apimw import microversion as _microversion
from apimw._etag_conditions import IfMatch
from apimw._idempotency_body import read_body
from apimw._idempotency_capture import Exchange
from apimw._idempotency_metered import MeteredStore
from apimw._microversion_type import ENVIRON_VERSION, Version
from apimw._stores import Store
from apimw._stores.aio import AsyncStore, asyncio_twin, is_async_store, open_async_store
from apimw.asgi._glue import (
    ASGIApp,
    Buffered,
    Headers,
    Message,
    RawHeaders,
    Receive,
    Replay,
    Scope,
    Send,
    add_cgi_keys,
    await_ops,
    cgi_environ,
    header_values,
    path_info,
    raw_headers,
    receive_body,
    rereadable,
    send_text,
    set_request_headers,
    text_headers,
)
from apimw.errors import ENVIRON_PROFILE, ConfigError, HTTPProblem, problem_answer, status_line
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


_NO_APP: Any = None  # what the rules' WSGI instance "wraps": it is never called


def _is_coroutine_function(call: object) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


class MicroversionMiddleware:
    """:class:`apimw.microversion.MicroversionMiddleware` for ASGI: the same options and answers."""

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        self.app = app
        self.rules = rules = _microversion.MicroversionMiddleware(_NO_APP, **options)
        self._standard = _microversion.STANDARD_HEADER.lower().encode("latin-1")
        legacy = rules.legacy_header
        self._legacy = self._standard if legacy is None else legacy.lower().encode("latin-1")
        self._owned = frozenset(name.encode("latin-1") for name in rules.negotiator.owned)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rules = self.rules
        request_headers = scope.get("headers", ())
        standard, legacy = header_values(request_headers, self._standard, self._legacy)
        if self._legacy is self._standard:
            legacy = None
        version, _, _, ours, _, raw = rules.negotiated(standard, legacy)
        scope[ENVIRON_PROFILE] = rules.error_profile
        method = scope["method"]
        if version is None or raw is None:
            # No version was served: range headers and Vary only.
            status, headers, body = problem_answer(
                scope, ours, method=method, extra_headers=rules._refused_headers
            )
            await send_text(send, status, headers, body)
            return
        scope[ENVIRON_VERSION] = version
        # The request's version headers as the app should read them: an app that negotiates
        # by itself serves what we label.
        ours_raw, dropped, forwarded = raw
        if forwarded:
            set_request_headers(scope, dropped, forwarded)
        if rules.discovery:
            document = rules._discovery.answer(path_info(scope), method, cgi_environ(scope), version)
            if document is not None:
                await send_text(send, 200, rules.merge(document[0], ours), document[1])
                return

        started = False

        async def send_ours(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = rereadable(message)
                message = {**message, "headers": self._with_ours(message.get("headers", ()), ours, ours_raw)}
            await send(message)

        try:
            await self.app(scope, receive, send_ours)
        except HTTPProblem as problem:
            # App code raised a gate or another apimw problem before its answer started.
            if started:
                raise
            status, headers, body = problem_answer(scope, problem, method=method)
            await send_text(send, status, rules.merge(headers, ours), body)

    def _with_ours(
        self, headers: Iterable[tuple[bytes, bytes]], ours: list[tuple[str, str]], ours_raw: RawHeaders
    ) -> RawHeaders:
        """The app's headers with ours (:meth:`~apimw.microversion.MicroversionMiddleware.merge`
        when the app set one of them)."""
        owned = self._owned
        for name, _ in headers:
            if name.lower() in owned:
                return raw_headers(self.rules.merge(text_headers(headers), ours))
        return [*headers, *ours_raw]


class ETagMiddleware:
    """:class:`apimw.etag.ETagMiddleware` for ASGI: the same options and answers.

    ``current_etag`` may also be an ``async def`` of the scope (a database lookup).
    """

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        self.app = app
        self.rules = rules = _etag.ETagMiddleware(app, **options)  # type: ignore[arg-type]  # checked, never called
        lookup = rules.current_etag
        self._lookup_awaited = lookup is not None and _is_coroutine_function(lookup)
        #: the deployment's callables read the request's CGI keys (PATH_INFO...)
        self._callables = lookup is not None or rules._enforces_call is not None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rules = self.rules
        im_raw, inm_raw = header_values(scope.get("headers", ()), b"if-match", b"if-none-match")
        if self._callables and (im_raw is not None or inm_raw is not None):
            add_cgi_keys(scope)
        method = scope["method"]
        path = path_info(scope)
        entry = rules.enter(scope, method.upper(), im_raw, inm_raw, path)
        kind = entry.kind
        if kind == _etag.PLAIN or kind == _etag.DIRECT:
            await self._through(scope, receive, send, kind == _etag.PLAIN)
            return
        try:
            if entry.lookup:
                lookup: Any = rules.current_etag
                current = await lookup(scope) if self._lookup_awaited else lookup(scope)
                entry = rules.looked_up(entry, current)
            if entry.kind == _etag.CALL:
                buffered = Buffered()
                await self.app(scope, receive, buffered)
                if buffered.status is None:
                    raise RuntimeError("the ASGI app returned without sending http.response.start")
                entry = rules.conditional_answer(
                    scope, method, path, str(buffered.status), text_headers(buffered.headers), entry,
                    lambda: buffered.body,
                )  # fmt: skip
                if entry.kind == _etag.SEND:
                    await send_text(send, buffered.status, entry.headers, buffered.body)
                    return
            if entry.kind == _etag.NOT_MODIFIED:
                assert entry.etag is not None  # noqa: S101
                status, headers = rules.not_modified_answer(entry.etag)
                await send_text(send, status, headers, b"")
                return
        except HTTPProblem as problem:
            # Raised by the lookup, or by the app or its data layer (StaleEtag...) before its
            # answer went out (held until it is decided).
            entry = _etag.Entry(_etag.PROBLEM, problem)
        assert entry.problem is not None  # noqa: S101 - the one other kind
        await self._problem(scope, send, entry.problem)

    async def _problem(self, scope: Scope, send: Send, problem: HTTPProblem) -> None:
        status, headers, body = problem_answer(
            scope, self.rules.reported(problem), method=scope["method"], profile=self.rules.error_profile
        )
        await send_text(send, status, headers, body)

    async def _through(self, scope: Scope, receive: Receive, send: Send, plain: bool) -> None:
        """Run the app; on a ``PLAIN`` entry add the etag to a 2xx (held for its body when the
        etag is to be read from the JSON body)."""
        rules = self.rules
        held: Message | None = None
        held_headers: Headers = []
        chunks: list[bytes] = []
        started = False

        async def etag_send(message: Message) -> None:
            nonlocal held, held_headers, started
            kind = message["type"]
            if kind == "http.response.start":
                started = True
                message = rereadable(message)
                status = message["status"]
                if plain and 200 <= status < 300:
                    headers = text_headers(message.get("headers", ()))
                    decided = rules.plain_headers(scope, str(status), headers)
                    if decided is None:
                        held, held_headers = message, headers
                        return
                    if decided is not headers:
                        message = {**message, "headers": raw_headers(decided)}
            elif held is not None and kind == "http.response.body":
                if chunks or message.get("more_body", False):  # a body in several messages
                    chunks.append(message.get("body", b""))
                    if message.get("more_body", False):
                        return
                    message = {"type": "http.response.body", "body": b"".join(chunks), "more_body": False}
                # the usual answer, one body message: sent as the app sent it
                headers = rules.body_etag_headers(held_headers, message.get("body", b""))
                start = held if headers is held_headers else {**held, "headers": raw_headers(headers)}
                held = None
                await send(start)
            await send(message)

        try:
            await self.app(scope, receive, etag_send)
        except HTTPProblem as problem:
            # Raised by the app or its data layer before its answer started.
            if started and held is None:
                raise
            await self._problem(scope, send, problem)


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
