"""Etag optimistic concurrency: keyed SHA-512 etags, If-Match -> 412, fail-closed writes.

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
* **Middleware** (:class:`ETagMiddleware`): hands the parsed If-Match to the app in
  ``environ["apimw.etag.if_match"]``, optionally pre-checks it against a cheap lookup
  (412), refuses If-Match below the etag microversion (406), enforces a
  ``require_if_match`` policy (428), answers If-None-Match with 304 (opt-in), adds the
  ``ETag`` response header.  It refuses If-Match (400, before the app runs) on writes the
  app does not declare in ``enforces``, and fails closed on those it does: a write that
  carried If-Match does not get a 2xx unless the app acknowledged that its data layer
  enforced the condition.

This module holds the middleware, its environ keys, the app helpers, its options and its
paste/oslo/Flask integration.  Its sans-IO parts live in private sibling modules, one
concern each, and their public names are re-exported here: ``_canonical_json`` (the bytes
hashed, with the optional orjson fast path), ``_etag_digest`` (:class:`ETagGenerator`),
``_etag_conditions`` (the wire form, the If-Match/If-None-Match parsers, :class:`StaleEtag`),
``_etag_policy`` (the ``require_if_match`` / ``enforces`` route policies) and
``_etag_response`` (which etag a response carries).

The app-facing contract (environ keys, helpers) is documented in ``docs/etag.md``.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from apimw._canonical_json import (
    CODE_CANONICALIZATION,
    CODE_UNSUPPORTED_TYPE,
    CanonicalizationError,
    canonical_json,
)
from apimw._config import (
    Option,
    as_bool,
    as_list,
    as_optional_str,
    as_str,
    integration,
)
from apimw._etag_conditions import (
    IfMatch,
    IfNoneMatch,
    StaleEtag,
    _cache_for,
    _Malformed,
    _malformed,
    format_etag,
    parse_if_match,
    parse_if_none_match,
    precondition_failed,
    split_etag,
)
from apimw._etag_digest import ALGORITHMS, DEFAULT_IGNORED_FIELDS, ETagGenerator
from apimw._etag_policy import (
    if_match_unsupported,
    parse_policy,
    route_matches,
    star_holds_without_app,
    uncovered,
)
from apimw._etag_response import (
    ETAG_HEADER,
    body_etag_wanted,
    check_wire,
    etag_in_body,
    header_value,
    with_etag,
)
from apimw._microversion_type import ENVIRON_VERSION, Version
from apimw._wsgi import WrappedApp
from apimw.errors import (
    ConfigError,
    HTTPProblem,
    check_profile,
    respond_with_problem,
)
from apimw.metrics import Metrics, as_metrics, problem_outcome

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "CODE_CANONICALIZATION",
    "CODE_UNSUPPORTED_TYPE",
    "DEFAULT_IGNORED_FIELDS",
    "ENVIRON_ENABLED",
    "ENVIRON_ENFORCED",
    "ENVIRON_GENERATOR",
    "ENVIRON_IF_MATCH",
    "ENVIRON_IF_NONE_MATCH",
    "ENVIRON_RESPONSE_ETAG",
    "ETAG_HEADER",
    "GROUP",
    "IF_MATCH_HEADER",
    "IF_NONE_MATCH_HEADER",
    "OPTIONS",
    "CanonicalizationError",
    "ETagGenerator",
    "ETagMiddleware",
    "IfMatch",
    "IfNoneMatch",
    "StaleEtag",
    "canonical_json",
    "etags_enabled",
    "filter_factory",
    "format_etag",
    "generator_from_environ",
    "list_opts",
    "mark_enforced",
    "oslo_hook",
    "parse_if_match",
    "parse_if_none_match",
    "precondition_failed",
    "set_response_etag",
    "split_etag",
    "wrap_flask",
]

LOG = logging.getLogger("apimw.etag")

# -- environ keys (the app-facing contract) -------------------------------------------------

#: ``IfMatch | None``: the parsed If-Match of a write (PUT/PATCH/DELETE), ``None`` if absent.
ENVIRON_IF_MATCH: Final = "apimw.etag.if_match"
#: ``IfNoneMatch | None``: only on writes, and only with ``if_none_match_on_writes``.
ENVIRON_IF_NONE_MATCH: Final = "apimw.etag.if_none_match"
#: The app sets this to ``True`` once its data layer enforced the If-Match condition.
ENVIRON_ENFORCED: Final = "apimw.etag.enforced"
#: The app sets the wire-form etag (``W/"..."``) of the resource in the response body.
ENVIRON_RESPONSE_ETAG: Final = "apimw.etag.response"
#: ``bool``: etags are served at this request's microversion (include the body field).
ENVIRON_ENABLED: Final = "apimw.etag.enabled"
#: The configured :class:`ETagGenerator` (only when the middleware has a key or plain SHA-512).
ENVIRON_GENERATOR: Final = "apimw.etag.generator"

IF_MATCH_HEADER: Final = "If-Match"
IF_NONE_MATCH_HEADER: Final = "If-None-Match"
# the request headers' CGI environ keys (PEP 3333)
_ENVIRON_HTTP_IF_MATCH: Final = "HTTP_IF_MATCH"
_ENVIRON_HTTP_IF_NONE_MATCH: Final = "HTTP_IF_NONE_MATCH"


# == app-facing helpers =========================================================================


def mark_enforced(environ: WSGIEnvironment) -> None:
    """Acknowledge that the request's If-Match was enforced by the write (fail-closed check)."""
    environ[ENVIRON_ENFORCED] = True
    cond = environ.get(ENVIRON_IF_MATCH)
    if cond is not None:
        cond.enforced = True


def set_response_etag(environ: WSGIEnvironment, etag: str | None) -> None:
    """Tell the middleware the wire-form etag of the resource this response represents.

    Checked here (``W/"..."`` or ``"..."``), so the middleware's hot path does not re-check it.
    """
    environ[ENVIRON_RESPONSE_ETAG] = None if etag is None else check_wire(etag)


def etags_enabled(environ: WSGIEnvironment) -> bool:
    """Whether this request's microversion serves etags (so include the body ``etag`` field)."""
    return bool(environ.get(ENVIRON_ENABLED, True))


def generator_from_environ(environ: WSGIEnvironment) -> ETagGenerator:
    """The middleware's configured :class:`ETagGenerator`; :class:`ConfigError` if none."""
    gen = environ.get(ENVIRON_GENERATOR)
    if gen is None:
        raise ConfigError("the etag middleware has no hmac_key (and algorithm is not sha512)")
    return gen  # type: ignore[no-any-return]


# == middleware ================================================================================

_WRITE_METHODS: Final = frozenset({"PUT", "PATCH", "DELETE", "POST"})
_ETAG_RESPONSE_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PATCH", "PUT"})


def _as_callable(value: str | Callable[..., Any] | None) -> Callable[..., Any] | None:
    if value is None or callable(value):
        return value
    text = str(value).strip()
    if not text:
        return None
    module_name, _, attr = text.partition(":")
    if not attr:
        raise ConfigError(f"expected 'package.module:function', got {text!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import {text!r}: {exc}") from None
    if not callable(obj):
        raise ConfigError(f"{text!r} is not callable")
    return obj  # type: ignore[no-any-return]


def _as_enforces(
    value: str | Iterable[str] | Callable[..., Any],
) -> list[str] | Callable[..., Any]:
    """Policy entries, or one ``module:function`` (``f(environ) -> bool``) or a callable."""
    if callable(value):
        return value
    entries = as_list(value)
    if len(entries) == 1 and ":" in entries[0] and " " not in entries[0]:
        return _as_callable(entries[0])  # type: ignore[return-value]  # not None: non-empty
    return entries


def _as_ignored(value: str | Iterable[str] | Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    if isinstance(value, Mapping):
        return {str(k): frozenset(v) for k, v in value.items()}
    table: dict[str, set[str]] = {}
    for entry in as_list(value):
        rtype, sep, field = entry.partition(":")
        if not sep or not rtype.strip() or not field.strip():
            raise ConfigError(f"ignored_fields entries are 'type:field', got {entry!r}")
        table.setdefault(rtype.strip(), set()).add(field.strip())
    return {k: frozenset(v) for k, v in table.items()}


_DEFAULT_IGNORED_LIST: Final = [
    f"{rtype}:{field}" for rtype, fields in DEFAULT_IGNORED_FIELDS.items() for field in sorted(fields)
]

OPTIONS: Final = (
    Option("min_version", as_optional_str, None,
           "Microversion from which etags are served (ETag header, If-Match); If-Match below it "
           "-> 406. Unset: always on."),
    Option("methods", as_list, ["PUT", "PATCH", "DELETE"],
           "Write methods whose If-Match is parsed and enforced (add POST for conditional actions).",
           "list"),
    Option("require_if_match", as_list, [],
           "428 policy: entries 'METHOD' or 'METHOD /path/prefix' ('*' for every write method) "
           "that must carry If-Match.", "list"),
    Option("enforces", _as_enforces, [],
           "Where the app enforces If-Match itself and marks it: entries 'METHOD' or 'METHOD "
           "/path/prefix' ('*' for every write method), or one 'module:function' f(environ) -> bool. "
           "If-Match on any other write is refused (400) before the app runs.", "list"),
    Option("strict_rfc9110", as_bool, False,
           "Strong If-Match comparison as RFC 9110 13.1.1 says (then emit strong etags).", "bool"),
    Option("accept_unquoted", as_bool, False,
           "Tolerate the Ironic spec's unquoted W/<hex> and bare <hex> in If-Match.", "bool"),
    Option("ignore_suffixes", as_list, [],
           "Suffixes proxies append to etags (e.g. -gzip) that If-Match may carry.", "list"),
    Option("not_modified", as_bool, False,
           "Answer If-None-Match on GET/HEAD with 304 on a weak match (opt-in).", "bool"),
    Option("if_none_match_on_writes", as_bool, False,
           "Hand If-None-Match on writes to the app (environ) instead of answering 400.", "bool"),
    Option("etag_on_put", as_bool, True,
           "Send ETag on 2xx PUT responses (RFC 9110 9.3.4 deviation, see docs).", "bool"),
    Option("etag_from_body", as_bool, True,
           "Take the ETag header from the top-level 'etag' field of a JSON response body when "
           "the app did not set apimw.etag.response (costs a JSON parse).", "bool"),
    Option("current_etag", _as_callable, None,
           "'module:function' called as f(environ) -> current etag or None, for the 412 pre-check.",
           oslo=False),
    Option("hmac_key", as_optional_str, None,
           "Deployment secret for HMAC-SHA-512 etags (>= 16 bytes); offered to the app as "
           "apimw.etag.generator.", secret=True),
    Option("algorithm", as_str, "hmac-sha512", "Etag digest: hmac-sha512 or sha512."),
    Option("ignored_fields", _as_ignored, _DEFAULT_IGNORED_LIST,
           "Fields left out of the etag, as 'type:field' entries.", "list"),
    Option("error_profile", as_optional_str, None,
           "Error body profile (ironic or api-sig); default: the outer middleware's, else api-sig."),
    Option("metrics", as_metrics, None,
           "'package.module:attribute' naming an apimw.metrics.Metrics object told each answer the "
           "middleware gives (304, 412, 428, 400...) (e.g. apimw.metrics_prometheus:METRICS).", oslo=False),
)  # fmt: skip


#: What :meth:`ETagMiddleware.enter` decides before the app runs (:attr:`Entry.kind`), and
#: what it decides on the app's answer.
PROBLEM: Final = "problem"  # answer with Entry.problem
PLAIN: Final = "plain"  # no precondition: run the app, add its etag to a 2xx
DIRECT: Final = "direct"  # run the app, nothing to add
CALL: Final = "call"  # run the app, hold its answer for the decision (conditional_answer)
NOT_MODIFIED: Final = "not-modified"  # answer 304 with Entry.etag
SEND: Final = "send"  # send the app's answer with Entry.headers


class Entry(NamedTuple):
    """One decision of the etag middleware (see the kinds above)."""

    kind: str
    problem: HTTPProblem | None = None
    cond: IfMatch | None = None
    inm: IfNoneMatch | None = None
    #: a CALL that first asks ``current_etag`` (then :meth:`ETagMiddleware.looked_up`)
    lookup: bool = False
    etag: str | None = None
    headers: list[tuple[str, str]] = []  # noqa: RUF012 - never mutated


#: The entries of the two pass-through kinds (:meth:`ETagMiddleware.enter` answers with these).
_PLAIN: Final = Entry(PLAIN)
_DIRECT: Final = Entry(DIRECT)


class _Capture:
    """start_response interceptor: holds the app's status and headers until we decide."""

    __slots__ = ("status", "headers", "chunks")

    def __init__(self) -> None:
        self.status: str | None = None
        self.headers: list[tuple[str, str]] = []
        self.chunks: list[bytes] = []

    def __call__(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], object]:
        # Nothing has been sent yet, so a second call (with exc_info, PEP 3333) just replaces,
        # and the exc_info is not passed on: our caller sees one answer (see _problem).
        self.status = status
        self.headers = headers
        return self.chunks.append


class _Body:
    """Iterable handed to the server: buffered chunks then the rest; ``close()`` exactly once."""

    __slots__ = ("_head", "_rest", "_source")

    def __init__(
        self, head: list[bytes], rest: Iterator[bytes] | None, source: Iterable[bytes] | None
    ) -> None:
        self._head = head
        self._rest = rest
        self._source = source

    def __iter__(self) -> Iterator[bytes]:
        yield from self._head
        if self._rest is not None:
            yield from self._rest

    def close(self) -> None:
        source, self._source = self._source, None
        close = getattr(source, "close", None)
        if close is not None:
            close()


_Held = tuple[str, list[tuple[str, str]], list[bytes]]
_NOT_HELD: Final[_Held | None] = None


def _close(iterable: Iterable[bytes] | None) -> None:
    close = getattr(iterable, "close", None)
    if close is not None:
        close()


def _is_2xx(status: str) -> bool:
    return status[:1] == "2"


def _wraps(app: object, kind: type) -> bool:
    """Whether the chain of middlewares below *app* (``.app`` / ``._app``) holds a *kind*."""
    seen: set[int] = set()
    todo = [app]
    while todo and len(seen) < 64:  # bounded: a chain is short, and cycles end here
        obj = todo.pop()
        if obj is None or id(obj) in seen:
            continue
        if isinstance(obj, kind):
            return True
        seen.add(id(obj))
        # "rules": an apimw.asgi middleware's WSGI instance, where its options live
        todo.extend(getattr(obj, name, None) for name in ("app", "_app", "rules"))
    return False


class ETagMiddleware:
    """If-Match / If-None-Match handling and ETag response headers for a resource API.

    Place it inside the microversion middleware (it reads the served version) and
    outside (or instead of) the app's own precondition handling.  See ``docs/etag.md``.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        min_version: str | Version | None = None,
        methods: Iterable[str] = ("PUT", "PATCH", "DELETE"),
        require_if_match: Iterable[str] = (),
        enforces: Iterable[str] | str | Callable[[WSGIEnvironment], bool] = (),
        strict_rfc9110: bool = False,
        accept_unquoted: bool = False,
        ignore_suffixes: Iterable[str] = (),
        not_modified: bool = False,
        if_none_match_on_writes: bool = False,
        etag_on_put: bool = True,
        etag_from_body: bool = True,
        current_etag: Callable[[WSGIEnvironment], str | None] | str | None = None,
        hmac_key: str | bytes | None = None,
        algorithm: str = "hmac-sha512",
        ignored_fields: Mapping[str, Iterable[str]] | Iterable[str] = _DEFAULT_IGNORED_LIST,
        error_profile: str | None = None,
        metrics: Metrics | str | None = None,
    ) -> None:
        self.app = app  # the property below: also sets self._call_app
        self.metrics = as_metrics(metrics)
        # here, not at import: apimw.etag stays cheap
        from apimw.microversion import MicroversionMiddleware, VersionGate

        if _wraps(app, MicroversionMiddleware):
            raise ConfigError(
                "the etag middleware wraps a MicroversionMiddleware: put it inside the microversion "
                "middleware (order: microversion -> ... -> etag -> app), or it never sees the served version"
            )
        self._gate = VersionGate(min_version, what="etags (If-Match, If-None-Match, ETag)")
        self._warned_no_version = False
        self.min_version = self._gate.lo
        self.methods = frozenset(m.strip().upper() for m in methods)
        if not self.methods or not self.methods <= _WRITE_METHODS:
            raise ConfigError(f"etag methods must be among {', '.join(sorted(_WRITE_METHODS))}")
        self.require_rules = parse_policy(require_if_match, self.methods, option="require_if_match")
        declared = _as_enforces(enforces)
        self._enforces_call: Callable[[WSGIEnvironment], Any] | None = None
        self.enforce_rules: tuple[tuple[str, str], ...] = ()
        if callable(declared):
            self._enforces_call = declared
        else:
            self.enforce_rules = parse_policy(declared, self.methods, option="enforces")
            missing = uncovered(self.require_rules, self.enforce_rules, self.methods)
            if missing:
                raise ConfigError(
                    f"require_if_match: {', '.join(missing)} not in enforces: If-Match is refused "
                    "where the app does not enforce it, so no client could write there"
                )
        self.strict = bool(strict_rfc9110)
        self.suffixes = tuple(s for s in ignore_suffixes if s)
        self.accept_unquoted = bool(accept_unquoted)
        self._cache = _cache_for(self.accept_unquoted, self.suffixes)
        self.not_modified = bool(not_modified)
        self.if_none_match_on_writes = bool(if_none_match_on_writes)
        self.etag_on_put = bool(etag_on_put)
        self.etag_from_body = bool(etag_from_body)
        self.current_etag = _as_callable(current_etag)
        self.error_profile = None if error_profile is None else check_profile(error_profile)
        ignored = (
            _as_ignored(ignored_fields)
            if not isinstance(ignored_fields, Mapping)
            else {k: frozenset(v) for k, v in ignored_fields.items()}
        )
        self.generator: ETagGenerator | None = None
        if hmac_key is not None or algorithm == "sha512":
            self.generator = ETagGenerator(
                key=hmac_key, algorithm=algorithm, ignored_fields=ignored, weak=not self.strict
            )
        elif algorithm not in ALGORITHMS:
            raise ConfigError(f"etag algorithm must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}")
        self._response_methods = (
            _ETAG_RESPONSE_METHODS if self.etag_on_put else _ETAG_RESPONSE_METHODS - {"PUT"}
        )

    app = WrappedApp()  # the wrapped WSGI app (may be replaced)
    _call_app: WSGIApplication  # what calls it, bound by WrappedApp

    # -- helpers ---------------------------------------------------------------------------

    def _problem(
        self,
        environ: WSGIEnvironment,
        start_response: StartResponse,
        problem: HTTPProblem,
        exc_info: Any = None,
    ) -> Iterable[bytes]:
        """Answer with *problem*; *exc_info* only to replace an answer already started.

        A problem rendered before *start_response* was called is an answer, not an
        error: with exc_info, webob's ``get_response`` and werkzeug's test client (and
        so any webob middleware outside this one) re-raise it instead (PEP 3333 needs
        exc_info only to replace headers already given to start_response).
        """
        self._report(problem.code)
        return respond_with_problem(
            environ, start_response, problem, profile=self.error_profile, exc_info=exc_info
        )

    def _report(self, code: str) -> None:
        """Tell ``metrics`` an answer of ours: a problem code of the etag middleware's (an app's
        other problems rendered here, a gate's or a 404, are not the etag middleware's outcomes)."""
        if self.metrics is not None and code.startswith(("etag.", "apimw.")):
            self.metrics.etag(problem_outcome(code))

    def _direct(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """Call the app with nothing to add; render an :class:`HTTPProblem` it raises."""
        started = False

        def tracked(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], object]:
            nonlocal started
            if started:
                return start_response(status, headers, exc_info)
            started = True  # nothing to replace yet: no exc_info (see _problem)
            return start_response(status, headers)

        try:
            return self._call_app(environ, tracked)
        except HTTPProblem as problem:
            return self._problem(environ, start_response, problem, sys.exc_info() if started else None)

    def _too_old(self, environ: Mapping[str, Any], header: str) -> HTTPProblem:
        from apimw.microversion import VersionGate  # loaded by __init__ already

        try:
            VersionGate(self.min_version, what=f"The {header} header").check(environ)
        except HTTPProblem as problem:
            return problem
        raise AssertionError("unreachable: _too_old called at an allowed version")  # pragma: no cover

    def _no_version(self) -> HTTPProblem:
        """min_version is set but no microversion middleware in front: a deployment mistake.

        Serving on would silently drop every etag (and refuse every If-Match as "too old"),
        so every request gets a 500 that names the fix; the log says it once.
        """
        if not self._warned_no_version:
            self._warned_no_version = True
            LOG.error(
                "the etag middleware has min_version %s but no served microversion in the environ: "
                "put a MicroversionMiddleware in front of it (or unset min_version)",
                self.min_version,
            )
        problem = HTTPProblem(
            500,
            "apimw.misconfigured",
            "The service is misconfigured: etags start at a microversion, but no microversion "
            "middleware negotiated one for this request.",
        )
        return problem

    def _enforced(self, method: str, environ: WSGIEnvironment, path: str) -> bool:
        """Whether the app declared that it enforces If-Match on this write."""
        if self._enforces_call is not None:
            return bool(self._enforces_call(environ))
        return route_matches(self.enforce_rules, method, path)

    # -- the decisions, sans-IO (the WSGI glue below and apimw.asgi call them) ----------------

    def enter(
        self,
        environ: WSGIEnvironment,
        method: str,
        im_raw: str | None,
        inm_raw: str | None,
        path: str,
    ) -> Entry:
        """What to do with a request before the app runs.

        *environ* is the WSGI environ or the ASGI scope: the app's keys (the generator,
        ``enabled``, the parsed conditions) are set in it, and it is what ``enforces`` and
        ``current_etag`` callables are given.  *method* is upper case; *im_raw* and
        *inm_raw* are the If-Match and If-None-Match values (``None``: absent).  A problem
        in the entry is not reported yet (:meth:`reported` does, as the glue renders it).
        """
        if self.generator is not None:
            environ[ENVIRON_GENERATOR] = self.generator
        lowest = self.min_version
        if lowest is None:
            enabled = True
        else:
            # Inlined VersionGate.allows.
            served = environ.get(ENVIRON_VERSION)
            if served is None:
                return Entry(PROBLEM, self._no_version())
            enabled = isinstance(served, Version) and served >= lowest
        environ[ENVIRON_ENABLED] = enabled
        try:
            if method in self.methods:
                return self._write(environ, method, enabled, im_raw, inm_raw, path)
            if method == "POST" and im_raw is not None:
                # A state change must not run unconditionally when the client asked for a
                # condition we do not evaluate on this method: refuse rather than ignore.
                if not enabled:
                    return Entry(PROBLEM, self._too_old(environ, IF_MATCH_HEADER))
                return Entry(PROBLEM, if_match_unsupported(method))
            if not enabled:
                return _DIRECT
            if self.not_modified and (method == "GET" or method == "HEAD") and inm_raw is not None:
                try:
                    parsed = self._cache.get(inm_raw)
                except _Malformed:
                    return Entry(PROBLEM, _malformed(IF_NONE_MATCH_HEADER))
                inm = IfNoneMatch(parsed, raw=inm_raw)
                return Entry(CALL, inm=inm, lookup=self.current_etag is not None)
            if method in self._response_methods:
                return _PLAIN
            return _DIRECT
        except HTTPProblem as problem:
            # Raised by the If-None-Match parser or an ``enforces`` callable.
            return Entry(PROBLEM, problem)

    def _write(
        self,
        environ: WSGIEnvironment,
        method: str,
        enabled: bool,
        im_raw: str | None,
        inm_raw: str | None,
        path: str,
    ) -> Entry:
        environ[ENVIRON_IF_MATCH] = None
        if im_raw is None and inm_raw is None:
            if enabled and self.require_rules and route_matches(self.require_rules, method, path):
                # RFC 6585 §3: the response "SHOULD include an explanation of how to
                # successfully resubmit the request" and "MUST NOT be stored by a cache".
                problem = HTTPProblem(
                    428,
                    "etag.if-match-required",
                    f"{method} on this resource must be conditional: GET it, then resend the "
                    "request with its etag in an If-Match header.",
                    headers=[("Cache-Control", "no-store")],
                )
                return Entry(PROBLEM, problem)
            if enabled and method in self._response_methods:
                return _PLAIN
            return _DIRECT
        if not enabled:
            # Nothing is written: the client asked for a precondition this version lacks.
            header = IF_MATCH_HEADER if im_raw is not None else IF_NONE_MATCH_HEADER
            return Entry(PROBLEM, self._too_old(environ, header))
        if inm_raw is not None:
            if not self.if_none_match_on_writes:
                return Entry(
                    PROBLEM,
                    HTTPProblem(
                        400,
                        "etag.if-none-match-unsupported",
                        f"If-None-Match is not supported on {method}; use If-Match.",
                    ),
                )
            environ[ENVIRON_IF_NONE_MATCH] = parse_if_none_match(
                inm_raw, accept_unquoted=self.accept_unquoted
            )
        cond: IfMatch | None = None
        if im_raw is not None:
            try:
                parsed = self._cache.get(im_raw)
            except _Malformed:
                # Never treat a malformed If-Match as absent: that would make the write unconditional.
                return Entry(PROBLEM, _malformed(IF_MATCH_HEADER))
            cond = IfMatch(parsed, strong=self.strict, raw=im_raw)
            environ[ENVIRON_IF_MATCH] = cond
            if not self._enforced(method, environ, path):
                # Decided before the app runs: a write the app cannot make conditional must not
                # happen (RFC 9110 §13.1.1: the condition is evaluated "prior to performing the
                # method"), and must not be answered 500 after it did.
                if not (cond.any and star_holds_without_app(method)):
                    return Entry(PROBLEM, if_match_unsupported(method))
                if method in self._response_methods:
                    return _PLAIN
                return _DIRECT
            # The lookup (current_etag) returns None for "missing / not visible to this
            # caller": the app then answers 401/403/404, which win over 412 (RFC 9110 §13.2.1).
        return Entry(CALL, cond=cond, lookup=cond is not None and self.current_etag is not None)

    def looked_up(self, entry: Entry, current: str | None) -> Entry:
        """*entry* (a ``lookup``) once ``current_etag`` answered *current*: 412, 304 or the app."""
        if current is not None:
            if entry.cond is not None:
                if not entry.cond.matches(current):
                    return Entry(PROBLEM, precondition_failed())
            elif entry.inm is not None and entry.inm.matches(current):
                return Entry(NOT_MODIFIED, etag=current)
        return Entry(CALL, cond=entry.cond, inm=entry.inm)

    def conditional_answer(
        self,
        environ: Mapping[str, Any],
        method: str | None,
        path: str | None,
        status: str,
        headers: list[tuple[str, str]],
        entry: Entry,
        body: Callable[[], bytes],
    ) -> Entry:
        """The app's answer to a ``CALL`` entry: ``SEND`` with the headers to send, the 500 of a
        write whose If-Match the app did not acknowledge, or a 304.  *body* gives the whole
        answer's body, asked only when its etag must be read from it."""
        if status[:1] != "2":
            return Entry(SEND, headers=headers)
        cond = entry.cond
        if cond is not None and not (cond.enforced or environ.get(ENVIRON_ENFORCED)):
            return Entry(PROBLEM, self._unenforced(method, path))
        wants_etag = method in self._response_methods
        etag = environ.get(ENVIRON_RESPONSE_ETAG)
        if etag is None:
            etag = header_value(headers, ETAG_HEADER)
            if etag is None and wants_etag and self.etag_from_body:
                ctype = header_value(headers, "Content-Type") or ""
                if "json" in ctype.lower():
                    etag = etag_in_body(body())
        if etag is not None and entry.inm is not None and entry.inm.matches(etag):
            return Entry(NOT_MODIFIED, etag=etag)
        if wants_etag and etag is not None and header_value(headers, ETAG_HEADER) != etag:
            headers = with_etag(headers, etag)
        return Entry(SEND, headers=headers)

    def plain_headers(
        self, environ: Mapping[str, Any], status: str, headers: list[tuple[str, str]]
    ) -> list[tuple[str, str]] | None:
        """The headers of the app's answer to a ``PLAIN`` entry (the app's etag added to a 2xx),
        or ``None`` when the etag is to be read from the body (:meth:`body_etag_headers`)."""
        if status[:1] == "2":
            etag = environ.get(ENVIRON_RESPONSE_ETAG)
            if etag is not None:
                return with_etag(headers, etag)
            if self.etag_from_body and body_etag_wanted(headers):
                return None
        return headers

    @staticmethod
    def body_etag_headers(headers: list[tuple[str, str]], body: bytes) -> list[tuple[str, str]]:
        """*headers* with the ETag of the JSON *body*'s top-level ``etag`` field, if it has one."""
        etag = etag_in_body(body)
        return headers if etag is None else [*headers, (ETAG_HEADER, etag)]

    def not_modified_answer(self, etag: str) -> tuple[str, list[tuple[str, str]]]:
        # RFC 9110 §15.4.5: a 304 carries the ETag it would have sent with a 200, and no body.
        self._report("etag.not-modified")
        return "304 Not Modified", [(ETAG_HEADER, etag)]

    def reported(self, problem: HTTPProblem) -> HTTPProblem:
        """*problem*, told to ``metrics`` (when it is the etag middleware's own)."""
        self._report(problem.code)
        return problem

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        # upper: Flask and pecan route ``patch`` as PATCH, and some servers pass it as sent
        method = environ["REQUEST_METHOD"].upper()
        entry = self.enter(
            environ,
            method,
            environ.get(_ENVIRON_HTTP_IF_MATCH),
            environ.get(_ENVIRON_HTTP_IF_NONE_MATCH),
            environ.get("PATH_INFO", ""),
        )
        if entry is _PLAIN:  # (enter answers the two pass-through kinds with these two)
            return self._plain(environ, start_response)
        if entry is _DIRECT:
            return self._direct(environ, start_response)
        try:
            if entry.lookup:
                assert self.current_etag is not None  # noqa: S101 - a lookup entry has one
                entry = self.looked_up(entry, self.current_etag(environ))
            kind = entry.kind
            if kind == CALL:
                return self._call(environ, start_response, entry)
            if kind == NOT_MODIFIED:
                assert entry.etag is not None  # noqa: S101
                return self._not_modified(start_response, entry.etag)
        except HTTPProblem as problem:
            # Raised by the lookup, or by the app or its data layer (StaleEtag, ResourceGone...)
            # before our caller's start_response was called (_call holds the app's answer
            # until it is decided).
            return self._problem(environ, start_response, problem)
        assert entry.problem is not None  # noqa: S101 - the one other kind
        return self._problem(environ, start_response, entry.problem)

    def _not_modified(self, start_response: StartResponse, etag: str) -> Iterable[bytes]:
        start_response(*self.not_modified_answer(etag))
        return []

    def _call(self, environ: WSGIEnvironment, start_response: StartResponse, entry: Entry) -> Iterable[bytes]:
        capture = _Capture()
        app_iter = self._call_app(environ, capture)
        rest: Iterator[bytes] | None = None
        try:
            if capture.status is None:
                # The app calls start_response lazily (from its iterator): run it up to there.
                rest = iter(app_iter)
                for chunk in rest:
                    capture.chunks.append(chunk)
                    if capture.status is not None:
                        break
                if capture.status is None:
                    raise RuntimeError("WSGI app returned without calling start_response")
            status = capture.status

            def body() -> bytes:
                nonlocal app_iter, rest
                parts = list(capture.chunks)
                try:
                    parts.extend(rest if rest is not None else app_iter)
                finally:
                    _close(app_iter)
                capture.chunks = []
                whole = b"".join(parts)
                app_iter, rest = [whole], None
                return whole

            answer = self.conditional_answer(
                environ,
                environ.get("REQUEST_METHOD"),
                environ.get("PATH_INFO"),
                status,
                capture.headers,
                entry,
                body,
            )
            if answer.kind == PROBLEM:
                _close(app_iter)
                assert answer.problem is not None  # noqa: S101
                return self._problem(environ, start_response, answer.problem)
            if answer.kind == NOT_MODIFIED:
                _close(app_iter)
                assert answer.etag is not None  # noqa: S101
                return self._not_modified(start_response, answer.etag)
            # No exc_info: the app's answer (even one it gave with exc_info, replacing an earlier
            # one) is the first our caller sees, so there is nothing to replace (see _problem).
            write = start_response(status, answer.headers)
        except BaseException:
            _close(app_iter)
            raise
        if capture.chunks and rest is None:
            # The app used write(): send that first (PEP 3333), then its iterable.
            for chunk in capture.chunks:
                write(chunk)
            capture.chunks = []
        if not capture.chunks and rest is None:
            return app_iter
        return _Body(capture.chunks, rest if rest is not None else iter(app_iter), app_iter)

    def _plain(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """No precondition to enforce: add the app's etag to a 2xx on the way out.

        The hot path: start_response goes straight through (no buffering) unless the
        etag must be read from the JSON body.
        """
        # A 2xx answer held until its body tells its etag: (status, headers, what write() sent).
        # Typed through _NOT_HELD so that mypy does not take it for None after the app ran.
        held = _NOT_HELD
        forwarded = False  # our caller's start_response was called (exc_info matters only then)

        def etag_start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], object]:
            nonlocal held, forwarded
            decided = self.plain_headers(environ, status, headers)
            if decided is not None:
                headers = decided
            elif not forwarded:
                written: list[bytes] = []
                held = (status, headers, written)
                return written.append
            held = None  # an answer held for its body etag, replaced by the app
            if forwarded:
                return start_response(status, headers, exc_info)
            forwarded = True  # the first call: nothing to replace, no exc_info (see _problem)
            return start_response(status, headers)

        try:
            app_iter = self._call_app(environ, etag_start_response)
        except HTTPProblem as problem:
            return self._problem(environ, start_response, problem, sys.exc_info() if forwarded else None)
        if held is None:
            if forwarded:
                return app_iter
        elif type(app_iter) is list and not held[2]:
            # The common case, held for its body etag: a list body (nothing to close), no write().
            status, headers, _ = held
            body = app_iter[0] if len(app_iter) == 1 else b"".join(app_iter)
            start_response(status, self.body_etag_headers(headers, body))
            return app_iter
        head: list[bytes] = []
        rest: Iterator[bytes] | None = None
        try:
            if held is None:  # (and not forwarded: returned above)
                # start_response comes from the app's iterator: run it up to there (PEP 3333).
                rest = iter(app_iter)
                for chunk in rest:
                    head.append(chunk)
                    if held is not None or forwarded:
                        break
                if held is None:
                    if not forwarded:
                        raise RuntimeError("WSGI app returned without calling start_response")
                    return _Body(head, rest, app_iter)
            status, headers, written = held
            parts = [*written, *head]
            parts.extend(rest if rest is not None else app_iter)
        except BaseException:
            _close(app_iter)
            raise
        _close(app_iter)
        body = b"".join(parts)
        start_response(status, self.body_etag_headers(headers, body))
        return [body]

    @staticmethod
    def _unenforced(method: str | None, path: str | None) -> HTTPProblem:
        LOG.error(
            "%s %s carried If-Match but the app did not acknowledge enforcing it "
            "(set environ[%r] = True after the conditional write); refusing the 2xx",
            method,
            path,
            ENVIRON_ENFORCED,
        )
        return HTTPProblem(
            500,
            "etag.precondition-not-enforced",
            "The server could not confirm that your If-Match condition was enforced; "
            "the resource may or may not have changed. GET it before retrying.",
        )


# == configuration: paste.deploy, oslo.config, Flask ==============================================

GROUP: Final = "apimw_etag"
OSLO_GROUP: Final = GROUP  # the name before GROUP, kept

filter_factory, wrap_flask, list_opts, oslo_hook, __getattr__ = integration(
    ETagMiddleware, OPTIONS, GROUP
)
