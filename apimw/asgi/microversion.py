"""The microversion middleware for ASGI (:class:`MicroversionMiddleware`).

The rules are :class:`apimw._microversion_core.MicroversionCore`'s, as for the WSGI
middleware; this class moves an ASGI request to them and their decision back.  What it hands
the app is in the scope under the ``apimw.`` keys the WSGI middleware sets in the environ:
``apimw.microversion`` (the served :class:`~apimw.Version`, read with
:func:`apimw.served_version`) and ``apimw.error_profile``.  The request's version header lines
are rewritten (in a new ``headers`` list) so that an app that negotiates by itself reads the
served version.  Header names are matched exactly (an underscore is not a hyphen); repeated
lines of a version header are read as one value joined with ``,``, as a WSGI server joins them
(RFC 9110 §5.3), so both doors decide alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Unpack

from apimw._microversion_core import (
    Discover,
    MicroversionCore,
    MicroversionOptions,
    Refuse,
    Serve,
)
from apimw._microversion_negotiation import STANDARD_HEADER
from apimw._microversion_options import OPTION_DOCS
from apimw._microversion_type import ENVIRON_VERSION
from apimw.asgi._glue import (
    ASGIApp,
    Message,
    RawHeaders,
    Receive,
    Scope,
    Send,
    header_values,
    path_info,
    raw_headers,
    rereadable,
    scope_base_url,
    send_text,
    set_request_headers,
    text_headers,
)
from apimw.errors import ENVIRON_PROFILE, HTTPProblem, problem_answer

_STANDARD = STANDARD_HEADER.lower().encode("latin-1")


class MicroversionMiddleware:
    """:class:`apimw.microversion.MicroversionMiddleware` for ASGI: the same options and answers.

    The rules are :class:`apimw._microversion_core.MicroversionCore`'s (``self.core``); this
    class moves an ASGI request to them and their decision back.
    """

    def __init__(self, app: ASGIApp, **options: Unpack[MicroversionOptions]) -> None:
        self.app = app
        self.core = core = MicroversionCore(**options)
        legacy = core.legacy_header
        self._legacy = None if legacy is None else legacy.lower().encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        core = self.core
        method = scope["method"]
        if self._legacy is None:
            standard, legacy = header_values(scope.get("headers", ()), _STANDARD)[0], None
        else:
            standard, legacy = header_values(scope.get("headers", ()), _STANDARD, self._legacy)
        decision = core.decide(method, path_info(scope), standard, legacy)
        scope[ENVIRON_PROFILE] = core.error_profile
        if type(decision) is Refuse:
            # No version was served: range headers and Vary only.
            status, headers, body = problem_answer(
                scope, decision.problem, method=method, extra_headers=decision.headers
            )
            await send_text(send, status, headers, body)
            return
        if type(decision) is Discover:
            scope[ENVIRON_VERSION] = decision.serve.version
            headers, body = core.document(decision, method, scope_base_url(scope))
            await send_text(send, 200, headers, body)
            return
        assert type(decision) is Serve  # noqa: S101 - the third kind of decision
        scope[ENVIRON_VERSION] = decision.version
        # The request's version headers as the app should read them: an app that negotiates
        # by itself serves what we label.
        if decision.raw_added:
            set_request_headers(scope, decision.raw_dropped, list(decision.raw_added))
        started = False

        async def send_ours(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = rereadable(message)
                message = {**message, "headers": self._with_ours(message.get("headers", ()), decision)}
            await send(message)

        try:
            await self.app(scope, receive, send_ours)
        except HTTPProblem as problem:
            # App code raised a gate or another apimw problem before its answer started.
            if started:
                raise
            status, headers, body = problem_answer(scope, problem, method=method)
            await send_text(send, status, core.response_headers(headers, decision), body)

    def _with_ours(self, headers: Iterable[tuple[bytes, bytes]], serve: Serve) -> RawHeaders:
        """The app's headers with ours (merged by the core when the app set one of them)."""
        owned = self.core.owned_raw
        for name, _ in headers:
            if name.lower() in owned:
                return raw_headers(self.core.response_headers(text_headers(headers), serve))
        return [*headers, *serve.raw_headers]


MicroversionMiddleware.__doc__ = f"{MicroversionMiddleware.__doc__}{OPTION_DOCS}"
