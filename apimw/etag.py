"""Etag optimistic concurrency: keyed SHA-512 etags, preconditions evaluated or refused, fail-closed writes.

Three parts, usable separately:

* **Generation** (:class:`ETagGenerator`, :func:`canonical_json`, :func:`format_etag`):
  apps call it when they *save* a resource and store the result; the read path never
  hashes.  Canonical JSON (keys sorted at every depth, compact, UTF-8, datetimes in UTC,
  integral floats as integers, sets sorted, NaN/Infinity refused), hashed with
  HMAC-SHA-512 under a deployment secret (or plain SHA-512), sent as ``W/"<128 hex>"``.
* **Parsing** (:func:`parse_if_match`, :func:`parse_if_none_match`): sans-IO functions of
  the raw header value(s), strict RFC 9110 grammar, optionally tolerant of the Ironic
  spec's unquoted ``W/<hex>``.  A malformed header raises :class:`HTTPProblem` 400; it is
  never treated as absent.
* **Middleware** (:class:`ETagMiddleware`, WSGI; :class:`apimw.asgi.ETagMiddleware`, ASGI):
  thin glue around one sans-IO core, :class:`ETagRules` (``apimw._etag_rules``), which
  decides on request facts and on the app's answer.  Every RFC 9110 §13 precondition a
  request carries is evaluated or refused: on a write it is handed to the app where the app
  declares that it enforces it (``enforces``; it acknowledges with :func:`mark_enforced`,
  and a 2xx fails closed without that) and refused (400, before the app runs) elsewhere; on
  GET/HEAD it is evaluated on the app's answer (412, or 304 with ``not_modified``).  The
  middleware also refuses preconditions below the etag microversion (406), enforces a
  ``require_if_match`` policy (428) and adds the ``ETag`` response header.

Private sibling modules hold the sans-IO parts, one concern each, and their public names
are re-exported here: ``_canonical_json``, ``_etag_digest`` (:class:`ETagGenerator`),
``_etag_conditions`` (the wire form, the parsers, :class:`StaleEtag`), ``_etag_policy``
(route policies), ``_etag_response`` (which etag a response carries) and ``_etag_rules``
(the decisions).  The app-facing contract (environ keys, helpers) is in ``docs/etag.md``;
the RFC 9110 conformance table in ``docs/conformance/etag.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from apimw import _wsgi
from apimw._canonical_json import (
    CODE_CANONICALIZATION,
    CODE_UNSUPPORTED_TYPE,
    CanonicalizationError,
    canonical_json,
)
from apimw._config import integration
from apimw._etag_conditions import (
    IfMatch,
    IfNoneMatch,
    IfUnmodifiedSince,
    StaleEtag,
    format_etag,
    parse_if_match,
    parse_if_none_match,
    split_etag,
)
from apimw._etag_decisions import (
    Facts,
    NotModified,
    ReadBody,
    Refuse,
    Run,
    Send,
    Treatment,
)
from apimw._etag_digest import DEFAULT_IGNORED_FIELDS, ETagGenerator
from apimw._etag_options import GROUP, OPTION_DOCS, OPTIONS
from apimw._etag_response import ETAG_HEADER, check_wire
from apimw._etag_rules import (
    ENVIRON_ENABLED,
    ENVIRON_ENFORCED,
    ENVIRON_GENERATOR,
    ENVIRON_IF_MATCH,
    ENVIRON_IF_NONE_MATCH,
    ENVIRON_IF_UNMODIFIED_SINCE,
    ENVIRON_RESPONSE_ETAG,
    IF_MATCH_HEADER,
    IF_MODIFIED_SINCE_HEADER,
    IF_NONE_MATCH_HEADER,
    IF_UNMODIFIED_SINCE_HEADER,
    ETagRules,
    check_order,
)
from apimw._microversion_type import ENVIRON_VERSION
from apimw.errors import ConfigError, HTTPProblem, respond_with_problem

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from apimw._microversion_type import Version

__all__ = [
    "CODE_CANONICALIZATION",
    "CODE_UNSUPPORTED_TYPE",
    "DEFAULT_IGNORED_FIELDS",
    "ENVIRON_ENABLED",
    "ENVIRON_ENFORCED",
    "ENVIRON_GENERATOR",
    "ENVIRON_IF_MATCH",
    "ENVIRON_IF_NONE_MATCH",
    "ENVIRON_IF_UNMODIFIED_SINCE",
    "ENVIRON_RESPONSE_ETAG",
    "ETAG_HEADER",
    "GROUP",
    "IF_MATCH_HEADER",
    "IF_MODIFIED_SINCE_HEADER",
    "IF_NONE_MATCH_HEADER",
    "IF_UNMODIFIED_SINCE_HEADER",
    "OPTIONS",
    "CanonicalizationError",
    "ETagGenerator",
    "ETagMiddleware",
    "ETagRules",
    "IfMatch",
    "IfNoneMatch",
    "IfUnmodifiedSince",
    "StaleEtag",
    "canonical_json",
    "etags_enabled",
    "filter_factory",
    "format_etag",
    "generator_from_environ",
    "if_match",
    "if_none_match",
    "list_opts",
    "mark_enforced",
    "oslo_hook",
    "parse_if_match",
    "parse_if_none_match",
    "set_response_etag",
    "split_etag",
    "wrap_flask",
]

_CONDITION_KEYS: Final = (ENVIRON_IF_MATCH, ENVIRON_IF_NONE_MATCH, ENVIRON_IF_UNMODIFIED_SINCE)


# == app-facing helpers (the WSGI environ or the ASGI scope) ===================================


def mark_enforced(environ: WSGIEnvironment) -> None:
    """Acknowledge that the write was made conditional on the request's precondition
    (If-Match, or the If-None-Match / If-Unmodified-Since handed over): the fail-closed check.

    *environ* is the WSGI environ or the ASGI scope."""
    environ[ENVIRON_ENFORCED] = True
    for key in _CONDITION_KEYS:
        cond = environ.get(key)
        if cond is not None:
            cond.mark_enforced()


def set_response_etag(environ: WSGIEnvironment, etag: str | None) -> None:
    """Tell the middleware the wire-form etag of the resource this response represents.

    Checked here (``W/"..."`` or ``"..."``), so the middleware's hot path does not re-check it.
    """
    environ[ENVIRON_RESPONSE_ETAG] = None if etag is None else check_wire(etag)


def if_match(environ: Mapping[str, Any]) -> IfMatch | None:
    """The If-Match the middleware parsed for the write being served (``None`` without one).

    *environ* is the WSGI environ or the ASGI scope."""
    found = environ.get(ENVIRON_IF_MATCH)
    return found if isinstance(found, IfMatch) else None


def if_none_match(environ: Mapping[str, Any]) -> IfNoneMatch | None:
    """The If-None-Match of a write (only with ``if_none_match_on_writes``), ``None`` without one.

    *environ* is the WSGI environ or the ASGI scope."""
    found = environ.get(ENVIRON_IF_NONE_MATCH)
    return found if isinstance(found, IfNoneMatch) else None


def etags_enabled(environ: WSGIEnvironment) -> bool:
    """Whether this request's microversion serves etags (so include the body ``etag`` field)."""
    return bool(environ.get(ENVIRON_ENABLED, True))


def generator_from_environ(environ: WSGIEnvironment) -> ETagGenerator:
    """The middleware's configured :class:`ETagGenerator`; :class:`ConfigError` if none."""
    gen = environ.get(ENVIRON_GENERATOR)
    if gen is None:
        raise ConfigError("the etag middleware has no hmac_key (and algorithm is not sha512)")
    return gen  # type: ignore[no-any-return]


# == the WSGI glue ===============================================================================


#: The states of one :class:`_Exchange`.
_WAITING: Final = 0  # start_response not called yet
_SENT: Final = 1  # the app's answer went to the server's start_response
_HELD: Final = 2  # held (at most max_body_bytes) until its body names its etag
_OURS: Final = 3  # replaced by our own answer (412, 500, 304)


class _Exchange:
    """The app's answer to one watched request: its start_response decided by the rules at
    once (sent on, replaced) or held for its body, up to the cap."""

    __slots__ = ("rules", "run", "environ", "server_start", "state", "status", "headers",
                 "held", "size", "treatment", "server_write")  # fmt: skip

    def __init__(
        self, rules: ETagRules, run: Run, environ: WSGIEnvironment, start_response: StartResponse
    ) -> None:
        self.rules = rules
        self.run = run
        self.environ = environ
        self.server_start = start_response
        self.state = _WAITING
        self.status = ""
        self.headers: list[tuple[str, str]] = []
        self.held: list[bytes] = []
        self.size = 0
        self.treatment: Treatment | None = None
        self.server_write: Callable[[bytes], object] | None = None

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], object]:
        if self.state == _SENT:
            # PEP 3333: once the headers are sent, a start_response with exc_info re-raises
            # it; the server's start_response does that (or replaces what it has not sent).
            return self.server_start(status, headers, exc_info)
        # Nothing went to the server yet: a later call (with exc_info) replaces what we held.
        self.held, self.size = [], 0
        self.status, self.headers = status, headers
        environ = self.environ
        self.treatment = self.rules.answer(
            self.run,
            int(status[:3]),
            headers,
            acknowledged=bool(environ.get(ENVIRON_ENFORCED)),
            response_etag=environ.get(ENVIRON_RESPONSE_ETAG),
        )
        return self._apply(self.treatment)

    def exc_info(self) -> Any:
        """What to pass with an error answer rendered for an exception the app raised:
        ``sys.exc_info()`` once the app's answer went to the server (it replaces it), else ``None``."""
        return sys.exc_info() if self.state == _SENT else None

    def _apply(self, treatment: Treatment) -> Callable[[bytes], object]:
        if type(treatment) is Send:
            self.state = _SENT
            # no exc_info: this is the first answer our caller sees, nothing to replace
            self.server_write = self.server_start(self.status, treatment.headers)
            return self.write
        self.state = _HELD if type(treatment) is ReadBody else _OURS
        return self.write

    def write(self, chunk: bytes) -> None:
        """The app's ``write()`` (PEP 3333): sent, held, or dropped (replaced by ours)."""
        if self.state == _SENT:
            assert self.server_write is not None  # noqa: S101 - set when sent
            self.server_write(chunk)
        elif self.state == _HELD:
            for flushed in self.hold(chunk):
                assert self.server_write is not None  # noqa: S101 - set when sent
                self.server_write(flushed)

    def hold(self, chunk: bytes) -> list[bytes]:
        """Hold *chunk*; past the cap the answer is decided without its body etag, and the
        chunks held so far are returned to be sent first (when it is sent on)."""
        self.held.append(chunk)
        self.size += len(chunk)
        if self.size <= self.rules.max_body_bytes:
            return []
        held, self.held = self.held, []
        self._apply(self._decide(None))
        return held if self.state == _SENT else []

    def _decide(self, body: bytes | None) -> Treatment:
        assert type(self.treatment) is ReadBody  # noqa: S101 - held: decided at start_response
        self.treatment = self.rules.answer_body(self.treatment, body)
        return self.treatment

    def finish(self) -> Treatment:
        """The whole answer was held: decide on its body."""
        body = b"".join(self.held)
        self.held = [body]
        treatment = self._decide(body)
        self._apply(treatment)
        return treatment


class ETagMiddleware:
    """Preconditions (RFC 9110 §13) and ETag response headers for a resource API (WSGI).

    Place it inside the microversion middleware (it reads the served version) and outside
    (or instead of) the app's own precondition handling.  The ASGI twin,
    :class:`apimw.asgi.ETagMiddleware`, takes the same options and runs the same rules
    (:class:`ETagRules`).  See ``docs/etag.md`` and ``docs/conformance/etag.md``.

    No option is required; the common case sets ``min_version``, ``enforces`` and ``hmac_key``
    (and ``compat="ironic"`` for a service speaking Ironic's wire).

    :param app: the WSGI app to wrap.
    """

    def __init__(self, app: WSGIApplication, **options: Any) -> None:
        check_order(app)
        self.rules = ETagRules(**options)
        self.app = app

    @property
    def min_version(self) -> Version | None:
        """The microversion from which etags are served (``None``: always)."""
        return self.rules.min_version

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        rules = self.rules
        # upper: Flask and pecan route ``patch`` as PATCH, and some servers pass it as sent
        facts = Facts(
            environ["REQUEST_METHOD"].upper(),
            environ.get("PATH_INFO", ""),
            if_match=environ.get("HTTP_IF_MATCH"),
            if_none_match=environ.get("HTTP_IF_NONE_MATCH"),
            if_modified_since=environ.get("HTTP_IF_MODIFIED_SINCE"),
            if_unmodified_since=environ.get("HTTP_IF_UNMODIFIED_SINCE"),
            served=environ.get(ENVIRON_VERSION),
        )
        decision = rules.decide(facts, environ)
        if type(decision) is Run:
            environ.update(decision.additions)
            if decision.lookup:
                assert rules.current_etag is not None  # noqa: S101 - a lookup needs one
                try:
                    decision = rules.prechecked(decision, rules.current_etag(environ))
                except HTTPProblem as problem:
                    decision = Refuse(problem)
        if type(decision) is Run:
            if decision.watch:
                return self._watched(environ, start_response, decision)
            return self._direct(environ, start_response)
        return self._ours(environ, start_response, decision)  # type: ignore[arg-type]

    def _ours(
        self, environ: WSGIEnvironment, start_response: StartResponse, answer: Refuse | NotModified,
        exc_info: Any = None,
    ) -> list[bytes]:  # fmt: skip
        """Our own answer: a problem, rendered by the one renderer, or a 304."""
        if type(answer) is NotModified:
            self.rules.report("etag.not-modified")
            start_response("304 Not Modified", answer.headers)
            return []
        problem = answer.problem  # type: ignore[union-attr]
        self.rules.report(problem.code)
        return respond_with_problem(
            environ, start_response, problem, profile=self.rules.error_profile, exc_info=exc_info
        )

    def _direct(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Call the app with nothing to add; render an :class:`HTTPProblem` it raises."""
        start = _wsgi.StartResponse(start_response)
        try:
            return self.app(environ, start)
        except HTTPProblem as problem:
            return self._ours(environ, start_response, Refuse(problem), start.exc_info())

    def _watched(self, environ: WSGIEnvironment, start_response: StartResponse, run: Run) -> Iterable[bytes]:
        """Call the app and treat its answer by the rules: sent on at its start_response when
        they can decide there (the usual case: nothing held), else held up to the cap."""
        exchange = _Exchange(self.rules, run, environ, start_response)
        try:
            app_iter = self.app(environ, exchange.start_response)
        except HTTPProblem as problem:
            # Raised by the app or its data layer (StaleEtag, ResourceGone...).
            return self._ours(environ, start_response, Refuse(problem), exchange.exc_info())
        if exchange.state == _SENT:
            return app_iter
        head: list[bytes] = []
        rest = iter(app_iter)
        try:
            while exchange.state in (_WAITING, _HELD):
                # start_response may come from the app's iterator (PEP 3333): run it up to there
                try:
                    chunk = next(rest)
                except StopIteration:
                    break
                if exchange.state == _HELD:
                    head = exchange.hold(chunk)
                elif exchange.state == _SENT:
                    head = [chunk]
                elif chunk:
                    raise RuntimeError("WSGI app yielded a body without calling start_response first")
            if exchange.state == _WAITING:
                raise RuntimeError("WSGI app returned without calling start_response")
            if exchange.state == _HELD:
                exchange.finish()  # the whole answer, within the cap
                if exchange.state == _SENT:
                    head = exchange.held
                    _wsgi.close(app_iter)
                    return head
        except HTTPProblem as problem:
            _wsgi.close(app_iter)
            return self._ours(environ, start_response, Refuse(problem), exchange.exc_info())
        except BaseException:
            _wsgi.close(app_iter)
            raise
        if exchange.state == _OURS:
            _wsgi.close(app_iter)
            return self._ours(environ, start_response, exchange.treatment)  # type: ignore[arg-type]
        return _wsgi.ClosingIterable(head, rest, app_iter)


ETagMiddleware.__doc__ = f"{ETagMiddleware.__doc__}{OPTION_DOCS}"

# == configuration: paste.deploy, oslo.config, Flask ==============================================

filter_factory, wrap_flask, list_opts, oslo_hook, __getattr__ = integration(ETagMiddleware, OPTIONS, GROUP)
