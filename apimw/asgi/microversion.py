"""The microversion middleware for ASGI (:class:`MicroversionMiddleware`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apimw import microversion as _microversion
from apimw._microversion_type import ENVIRON_VERSION
from apimw.asgi._glue import (
    ASGIApp,
    Message,
    RawHeaders,
    Receive,
    Scope,
    Send,
    cgi_environ,
    header_values,
    path_info,
    raw_headers,
    rereadable,
    send_text,
    set_request_headers,
    text_headers,
)
from apimw.errors import ENVIRON_PROFILE, HTTPProblem, problem_answer

_NO_APP: Any = None  # what the rules' WSGI instance "wraps": it is never called


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
