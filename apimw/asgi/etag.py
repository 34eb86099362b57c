"""The etag middleware for ASGI (:class:`ETagMiddleware`) and :func:`if_match`."""

from __future__ import annotations

import inspect
from collections.abc import MutableMapping
from typing import Any

from apimw import etag as _etag
from apimw._etag_conditions import IfMatch
from apimw.asgi._glue import (
    ASGIApp,
    Buffered,
    Headers,
    Message,
    Receive,
    Scope,
    Send,
    add_cgi_keys,
    header_values,
    path_info,
    raw_headers,
    rereadable,
    send_text,
    text_headers,
)
from apimw.errors import HTTPProblem, problem_answer
from apimw.etag import ENVIRON_IF_MATCH


def if_match(scope: MutableMapping[str, Any]) -> IfMatch | None:
    """The parsed If-Match of the write being served (``None`` without one)."""
    found = scope.get(ENVIRON_IF_MATCH)
    return found if isinstance(found, IfMatch) else None


def _is_coroutine_function(call: object) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


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
