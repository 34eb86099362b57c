"""The etag middleware for ASGI (:class:`ETagMiddleware`).

Thin glue around the sans-IO rules of :class:`apimw.etag.ETagRules`, which the WSGI
middleware runs too: it reads the request's facts from the scope, hands the app what the
rules add (``apimw.etag.*`` keys in the scope, nothing else), and moves the app's messages
to the server as the rules treat its answer.  Streams stay streams: an answer is held only
while its JSON body may name its etag, and at most ``max_body_bytes`` of it; every other
message (``http.response.pathsend``, ``http.response.zerocopy``, ``http.response.trailers``,
any future one) passes through in order.
"""

from __future__ import annotations

import inspect
from typing import Any, Final

from apimw._etag_decisions import (
    Facts,
    NotModified,
    ReadBody,
    Refuse,
    Run,
    Send,
    Treatment,
)
from apimw._etag_options import OPTION_DOCS
from apimw._etag_rules import (
    ENVIRON_ENFORCED,
    ENVIRON_RESPONSE_ETAG,
    ETagRules,
    check_order,
)
from apimw._microversion_type import ENVIRON_VERSION
from apimw.asgi._glue import (
    ASGIApp,
    Message,
    Receive,
    Scope,
    header_values,
    path_info,
    raw_headers,
    rereadable,
    send_text,
    text_headers,
)
from apimw.asgi._glue import (
    Send as SendCallable,
)
from apimw.errors import HTTPProblem, problem_answer


def _is_coroutine_function(call: object) -> bool:
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


class AnswerReplaced(Exception):  # noqa: N818 - a signal, not an error of the app's
    """Raised from the app's ``send`` once the middleware answered in its place (a 412, a 304):
    the rest of its answer has nowhere to go, so an endless stream stops here."""


_PRECONDITION_HEADERS: Final = (b"if-match", b"if-none-match", b"if-modified-since", b"if-unmodified-since")

#: The states of one :class:`_Exchange`.
_WAITING: Final = 0  # no http.response.start yet
_SENT: Final = 1  # the app's answer goes to the server
_HELD: Final = 2  # held (at most max_body_bytes) until its body names its etag
_OURS: Final = 3  # replaced by our own answer


class _Exchange:
    """The app's ``send`` for one watched request: its start decided by the rules at once
    (sent on, replaced) or held with its body, up to the cap."""

    __slots__ = ("middleware", "run", "scope", "server_send", "state", "start", "headers", "held",
                 "size", "read")  # fmt: skip

    def __init__(self, middleware: ETagMiddleware, run: Run, scope: Scope, send: SendCallable) -> None:
        self.middleware = middleware
        self.run = run
        self.scope = scope
        self.server_send = send
        self.state = _WAITING
        self.start: Message = {}
        self.headers: list[tuple[str, str]] = []
        self.held: list[bytes] = []
        self.size = 0
        #: the rules' ReadBody while the answer is held
        self.read: ReadBody | None = None

    async def send(self, message: Message) -> None:
        state = self.state
        if state == _SENT:
            await self.server_send(message)
            return
        if state == _OURS:
            raise AnswerReplaced
        kind = message["type"]
        if state == _WAITING:
            if kind != "http.response.start":
                await self.server_send(message)  # not ours to judge: the server refuses it
                return
            self.start = rereadable(message)
            self.headers = text_headers(self.start.get("headers", ()))
            scope = self.scope
            treatment = self.middleware.rules.answer(
                self.run,
                int(self.start["status"]),
                self.headers,
                acknowledged=bool(scope.get(ENVIRON_ENFORCED)),
                response_etag=scope.get(ENVIRON_RESPONSE_ETAG),
            )
            await self._apply(treatment, self.start)
            return
        # held
        if kind == "http.response.body":
            chunk = bytes(message.get("body", b""))
            self.held.append(chunk)
            self.size += len(chunk)
            if not message.get("more_body", False):
                body = b"".join(self.held)
                self.held = [body]
                await self._apply(self._decide(body), self.start, done=True)
            elif self.size > self.middleware.rules.max_body_bytes:
                await self._apply(self._decide(None), self.start)
            return
        # pathsend, zerocopy, trailers...: the body cannot be read here, so it is not held
        await self._apply(self._decide(None), self.start)
        if self.state == _SENT:
            await self.server_send(message)

    def _decide(self, body: bytes | None) -> Treatment:
        """The held answer's treatment, once its *body* is read (``None``: not whole)."""
        assert self.read is not None  # noqa: S101 - held: the rules answered ReadBody
        return self.middleware.rules.answer_body(self.read, body)

    async def _apply(self, treatment: Treatment, start: Message, *, done: bool = False) -> None:
        if type(treatment) is ReadBody:
            self.state = _HELD
            self.read = treatment
            return
        if type(treatment) is Send:
            self.state = _SENT
            if treatment.headers is not self.headers:
                start = {**start, "headers": raw_headers(treatment.headers)}
            await self.server_send(start)
            held, self.held = self.held, []
            if held or done:
                body = held[0] if len(held) == 1 else b"".join(held)
                await self.server_send({"type": "http.response.body", "body": body, "more_body": not done})
            return
        self.state = _OURS
        self.held = []
        await self.middleware.answer(self.scope, self.server_send, treatment)  # type: ignore[arg-type]

    async def finish(self) -> None:
        """The app returned: an answer still held did not complete, so it goes on as it came
        (unfinished, without an etag), as if the middleware were not there."""
        if self.state == _HELD:
            await self._apply(self._decide(None), self.start)


class ETagMiddleware:
    """:class:`apimw.etag.ETagMiddleware` for ASGI: the same options (below) and the same
    rules (:class:`apimw.etag.ETagRules`).

    ``current_etag`` may also be an ``async def`` of the scope (a database lookup);
    ``current_etag`` and an ``enforces`` callable are given the ASGI scope.  What the
    middleware hands the app sits in the scope under ``apimw.etag.*`` (``docs/asgi.md``).

    :param app: the ASGI app to wrap.
    """

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        check_order(app)
        self.app = app
        self.rules = ETagRules(**options)
        lookup = self.rules.current_etag
        self._lookup_awaited = lookup is not None and _is_coroutine_function(lookup)

    async def __call__(self, scope: Scope, receive: Receive, send: SendCallable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rules = self.rules
        im, inm, ims, ius = header_values(scope.get("headers", ()), *_PRECONDITION_HEADERS)
        facts = Facts(
            scope["method"].upper(),
            path_info(scope),
            if_match=im,
            if_none_match=inm,
            if_modified_since=ims,
            if_unmodified_since=ius,
            served=scope.get(ENVIRON_VERSION),
        )
        decision = rules.decide(facts, scope)
        if type(decision) is Run:
            scope.update(decision.additions)
            if decision.lookup:
                lookup: Any = rules.current_etag
                try:
                    current = await lookup(scope) if self._lookup_awaited else lookup(scope)
                    decision = rules.prechecked(decision, current)
                except HTTPProblem as problem:
                    decision = Refuse(problem)
        if type(decision) is not Run:
            await self.answer(scope, send, decision)  # type: ignore[arg-type]
            return
        if not decision.watch:
            await self._direct(scope, receive, send)
            return
        exchange = _Exchange(self, decision, scope, send)
        try:
            await self.app(scope, receive, exchange.send)
        except AnswerReplaced:
            return
        except HTTPProblem as problem:
            # Raised by the app or its data layer (StaleEtag...) before its answer went out.
            if exchange.state == _SENT:
                raise
            if exchange.state != _OURS:
                await self.answer(scope, send, Refuse(problem))
            return
        await exchange.finish()

    async def answer(self, scope: Scope, send: SendCallable, answer: Refuse | NotModified) -> None:
        """Our own answer: a problem, rendered by the one renderer, or a 304."""
        rules = self.rules
        if type(answer) is NotModified:
            rules.report("etag.not-modified")
            await send_text(send, 304, answer.headers, b"")
            return
        problem = answer.problem  # type: ignore[union-attr]
        rules.report(problem.code)
        status, headers, body = problem_answer(
            scope, problem, method=scope["method"], profile=rules.error_profile
        )
        await send_text(send, status, headers, body)

    async def _direct(self, scope: Scope, receive: Receive, send: SendCallable) -> None:
        """Call the app with nothing to add; render an :class:`HTTPProblem` it raises first."""
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except HTTPProblem as problem:
            if started:
                raise
            await self.answer(scope, send, Refuse(problem))


ETagMiddleware.__doc__ = f"{ETagMiddleware.__doc__}{OPTION_DOCS}"
