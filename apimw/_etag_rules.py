"""The etag middleware's rules, sans-IO: request facts in, a named decision out.

:class:`ETagRules` holds the validated options and decides, for the WSGI glue
(:class:`apimw.etag.ETagMiddleware`) and the ASGI glue (:class:`apimw.asgi.ETagMiddleware`)
alike:

1. before the app runs, :meth:`ETagRules.decide` reads the request's :class:`Facts` and
   answers :class:`Refuse` (answer now with this problem), :class:`NotModified` (answer 304)
   or :class:`Run` (call the app with these additions, then treat its answer so);
2. a :class:`Run` with ``lookup`` first asks the deployment's ``current_etag``, then
   :meth:`ETagRules.prechecked` decides again on the etag it gave;
3. on the app's answer, :meth:`ETagRules.answer` reads its status and headers and answers
   :class:`Send` (send the app's answer with these headers), :class:`Refuse`,
   :class:`NotModified`, or :class:`ReadBody` (the etag is in the JSON body: hold at most
   ``limit`` bytes of it); a :class:`ReadBody` carries that decision, and
   :meth:`ETagRules.answer_body` finishes it on the body (``None`` when it was longer).

The preconditions follow RFC 9110 §13.2.2's order: If-Match, else If-Unmodified-Since
(§13.1.4: only without If-Match), then If-None-Match, then If-Modified-Since (GET/HEAD, only
without If-None-Match).  On a write, each precondition is either handed to the app (which
enforces it in its data layer and acknowledges with ``mark_enforced``; the answer fails
closed otherwise) or refused with a 4xx before the app runs: never silently ignored.  On
GET/HEAD, they are evaluated on the app's 2xx answer against the etag and ``Last-Modified``
it supplies.  ``docs/conformance/etag.md`` lists each rule with the test that proves it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from apimw._config import as_list
from apimw._etag_conditions import (
    IfMatch,
    IfNoneMatch,
    IfUnmodifiedSince,
    Malformed,
    cache_for,
    malformed,
    precondition_failed,
)
from apimw._etag_decisions import (
    Decision,
    Facts,
    NotModified,
    ReadBody,
    Refuse,
    Run,
    Send,
    Treatment,
    parse_http_date,
)
from apimw._etag_digest import ALGORITHMS, ETagGenerator
from apimw._etag_options import (
    DEFAULT_IGNORED_LIST,
    DEFAULT_MAX_BODY_BYTES,
    as_callable,
    as_compat,
    as_enforces,
    as_ignored,
    as_positive_int,
    compat_switches,
)
from apimw._etag_policy import (
    parse_policy,
    precondition_unsupported,
    route_matches,
    star_holds_without_app,
    uncovered,
)
from apimw._etag_response import (
    ETAG_HEADER,
    etag_and_type,
    etag_in_body,
    header_value,
    is_json_document,
    with_etag,
)
from apimw._idempotency_rules import IdempotencyRules
from apimw._microversion_core import check_inside_microversion, wraps
from apimw._microversion_type import ENVIRON_VERSION, Version
from apimw.errors import ConfigError, HTTPProblem, check_profile
from apimw.metrics import Metrics, as_metrics, problem_outcome
from apimw.microversion import VersionGate

LOG = logging.getLogger("apimw.etag")

# -- what the middleware hands the app (environ / scope keys) -------------------------------

#: ``IfMatch | None``: the parsed If-Match of a write (PUT/PATCH/DELETE), ``None`` if absent.
ENVIRON_IF_MATCH: Final = "apimw.etag.if_match"
#: ``IfNoneMatch | None``: only on writes, and only with ``if_none_match_on_writes``.
ENVIRON_IF_NONE_MATCH: Final = "apimw.etag.if_none_match"
#: ``IfUnmodifiedSince | None``: only on writes, and only with ``if_unmodified_since_on_writes``.
ENVIRON_IF_UNMODIFIED_SINCE: Final = "apimw.etag.if_unmodified_since"
#: The app sets this to ``True`` once its data layer enforced the write's precondition.
ENVIRON_ENFORCED: Final = "apimw.etag.enforced"
#: The app sets the wire-form etag (``W/"..."``) of the resource in the response body.
ENVIRON_RESPONSE_ETAG: Final = "apimw.etag.response"
#: ``bool``: etags are served at this request's microversion (include the body field).
ENVIRON_ENABLED: Final = "apimw.etag.enabled"
#: The configured :class:`ETagGenerator` (only when the middleware has a key or plain SHA-512).
ENVIRON_GENERATOR: Final = "apimw.etag.generator"

IF_MATCH_HEADER: Final = "If-Match"
IF_NONE_MATCH_HEADER: Final = "If-None-Match"
IF_MODIFIED_SINCE_HEADER: Final = "If-Modified-Since"
IF_UNMODIFIED_SINCE_HEADER: Final = "If-Unmodified-Since"

#: The ``metrics.etag`` outcome of a JSON answer longer than ``max_body_bytes``, streamed on
#: without the ETag its body may have named.
STREAMED_WITHOUT_ETAG: Final = "streamed-without-etag"

_WRITE_METHODS: Final = frozenset({"PUT", "PATCH", "DELETE", "POST"})
_ETAG_RESPONSE_METHODS: Final = frozenset({"GET", "HEAD", "POST", "PATCH", "PUT"})
_READS: Final = frozenset({"GET", "HEAD"})
#: RFC 9110 §15.4.5: the fields a 304 carries that its 200 would have sent.
_NOT_MODIFIED_FIELDS: Final = frozenset({"cache-control", "content-location", "date", "expires", "vary"})


def _date_malformed(header: str) -> HTTPProblem:
    slug = header.lower()
    return HTTPProblem(
        400,
        f"etag.{slug}-malformed",
        f"The {header} header is not an HTTP-date (such as 'Sun, 06 Nov 1994 08:49:37 GMT'); "
        "a write is never made unconditional by a malformed precondition, so nothing was changed.",
    )


def _is_idempotency_middleware(obj: object) -> bool:
    return isinstance(getattr(obj, "rules", None), IdempotencyRules)


def check_order(app: object) -> None:
    """:class:`ConfigError` when a microversion or an idempotency middleware is below *app* (the
    app the etag middleware is given): the etag middleware must sit inside both, next to the app.

    Inside the idempotency middleware because a replayed write never reaches the app, so no data
    layer enforces its precondition again: outside, every replayed conditional write would fail
    closed."""
    check_inside_microversion(app, "etag", "it never sees the served version")
    if wraps(app, _is_idempotency_middleware):
        raise ConfigError(
            "the etag middleware is outside the idempotency middleware (e.g. 'pipeline = ... etag "
            "idempotency ... app'): put it inside (order: request_id -> microversion -> auth -> "
            "idempotency -> etag -> app), or every replayed conditional write fails closed: a replay "
            "never reaches the app that enforces its precondition"
        )


# == the rules ===================================================================================


class ETagRules:
    """The etag middleware's options, validated, and its decisions (see the module docstring).

    Both glues build one from the same keyword options (documented on
    :class:`apimw.etag.ETagMiddleware`); the deployment's callables (``enforces``,
    ``current_etag``) are given the request as the door has it: the WSGI environ or the
    ASGI scope.  A list option also takes a string, read as a paste ini value is
    (:func:`apimw.config.as_list`: comma or newline separated).
    """

    def __init__(
        self,
        *,
        min_version: str | Version | None = None,
        methods: str | Iterable[str] = ("PUT", "PATCH", "DELETE"),
        require_if_match: str | Iterable[str] = (),
        enforces: Iterable[str] | str | Callable[[Any], bool] = (),
        strict_rfc9110: bool = False,
        compat: str = "rfc9110",
        accept_unquoted: bool | None = None,
        ignore_suffixes: str | Iterable[str] = (),
        not_modified: bool | None = None,
        if_none_match_on_writes: bool | None = None,
        if_unmodified_since_on_writes: bool | None = None,
        etag_on_put: bool | None = None,
        etag_from_body: bool = True,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        current_etag: Callable[[Any], Any] | str | None = None,
        hmac_key: str | bytes | None = None,
        algorithm: str = "hmac-sha512",
        ignored_fields: Mapping[str, Iterable[str]] | Iterable[str] = DEFAULT_IGNORED_LIST,
        error_profile: str | None = None,
        metrics: Metrics | str | None = None,
    ) -> None:
        self.metrics = as_metrics(metrics)
        self._gate = VersionGate(min_version, what="etags (If-Match, If-None-Match, ETag)")
        self._warned_no_version = False
        self.min_version = self._gate.lo
        self.methods = frozenset(m.strip().upper() for m in as_list(methods))
        if not self.methods or not self.methods <= _WRITE_METHODS:
            raise ConfigError(f"etag methods must be among {', '.join(sorted(_WRITE_METHODS))}")
        self.require_rules = parse_policy(as_list(require_if_match), self.methods, option="require_if_match")
        declared = as_enforces(enforces)
        #: ``f(request) -> bool`` when ``enforces`` is a callable, else ``None`` (the rules below)
        self.enforces_call: Callable[[Any], Any] | None = None
        self.enforce_rules: tuple[tuple[str, str], ...] = ()
        if callable(declared):
            self.enforces_call = declared
        else:
            self.enforce_rules = parse_policy(declared, self.methods, option="enforces")
            missing = uncovered(self.require_rules, self.enforce_rules, self.methods)
            if missing:
                raise ConfigError(
                    f"require_if_match: {', '.join(missing)} not in enforces: If-Match is refused "
                    "where the app does not enforce it, so no client could write there"
                )
        self.strict = bool(strict_rfc9110)
        self.suffixes = tuple(s for s in as_list(ignore_suffixes) if s)
        switches = compat_switches(compat, {
            "accept_unquoted": accept_unquoted,
            "etag_on_put": etag_on_put,
            "not_modified": not_modified,
            "if_none_match_on_writes": if_none_match_on_writes,
            "if_unmodified_since_on_writes": if_unmodified_since_on_writes,
        })  # fmt: skip
        #: the compatibility profile's name, and the switches it set (with their overrides)
        self.compat = as_compat(compat)
        self.accept_unquoted = switches["accept_unquoted"]
        self._cache = cache_for(self.accept_unquoted, self.suffixes)
        self.not_modified = switches["not_modified"]
        self.if_none_match_on_writes = switches["if_none_match_on_writes"]
        self.if_unmodified_since_on_writes = switches["if_unmodified_since_on_writes"]
        self.etag_on_put = switches["etag_on_put"]
        self.etag_from_body = bool(etag_from_body)
        self.max_body_bytes = as_positive_int(max_body_bytes)
        self.current_etag = as_callable(current_etag)
        self.error_profile = None if error_profile is None else check_profile(error_profile)
        ignored = as_ignored(ignored_fields)
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
        base = {} if self.generator is None else {ENVIRON_GENERATOR: self.generator}
        #: the two decisions of a request without preconditions, made once
        self._plain = {True: Run({**base, ENVIRON_ENABLED: True}, send_etag=True),
                       False: Run({**base, ENVIRON_ENABLED: False})}  # fmt: skip
        self._direct = Run({**base, ENVIRON_ENABLED: True})
        self._base = base

    # -- reporting ---------------------------------------------------------------------------

    def report(self, code: str) -> None:
        """Tell ``metrics`` an outcome of the etag middleware's: a problem code of its own (an
        app's other problems rendered by the glue, a gate's or a 404, are not), or
        ``not-modified`` / ``streamed-without-etag``."""
        if self.metrics is not None and code.startswith(("etag.", "apimw.")):
            self.metrics.etag(problem_outcome(code))

    # -- before the app ----------------------------------------------------------------------

    def decide(self, facts: Facts, request: Any) -> Decision:
        """What to do with a request before the app runs.  *request* (the environ or scope) is
        only handed to an ``enforces`` callable."""
        lowest = self.min_version
        if lowest is None:
            enabled = True
        else:
            served = facts.served
            if served is None:
                return Refuse(self._no_version())
            enabled = isinstance(served, Version) and served >= lowest
        method = facts.method
        try:
            if method in self.methods:
                return self._write(facts, request, enabled)
            if method in _READS:
                return self._read(facts, enabled)
            if method == "POST":
                # A state change must not run unconditionally when the client asked for a
                # condition this service does not evaluate on it: refuse rather than ignore.
                header = _write_precondition(facts)
                if header is not None:
                    if not enabled:
                        return Refuse(self.too_old(header, facts.served))
                    return Refuse(precondition_unsupported(method, header))
        except HTTPProblem as problem:
            # Raised by an ``enforces`` callable.
            return Refuse(problem)
        # RFC 9110 §13.2.1: preconditions mean nothing to OPTIONS, CONNECT, TRACE.
        if enabled and method in self._response_methods:
            return self._plain[True]
        return self._plain[False] if not enabled else self._direct

    def _read(self, facts: Facts, enabled: bool) -> Decision:
        im_raw = facts.if_match
        if (
            im_raw is None
            and facts.if_unmodified_since is None
            and (not self.not_modified or (facts.if_none_match is None and facts.if_modified_since is None))
        ):
            return self._plain[enabled]
        if_match: IfMatch | None = None
        if_none_match: IfNoneMatch | None = None
        if im_raw is not None:
            if not enabled:
                # no etag is served at this version, so none can be compared
                return Refuse(self.too_old(IF_MATCH_HEADER, facts.served))
            try:
                parsed = self._cache.get(im_raw)
            except Malformed:
                return Refuse(malformed(IF_MATCH_HEADER))
            if_match = IfMatch(parsed, strong=self.strict, raw=im_raw)
        # RFC 9110 §13.1.4: If-Unmodified-Since only without If-Match; an invalid date is ignored.
        unmodified = parse_http_date(facts.if_unmodified_since) if if_match is None else None
        modified: datetime | None = None
        if self.not_modified and enabled:
            inm_raw = facts.if_none_match
            if inm_raw is not None:
                try:
                    parsed = self._cache.get(inm_raw)
                except Malformed:
                    return Refuse(malformed(IF_NONE_MATCH_HEADER))
                if_none_match = IfNoneMatch(parsed, raw=inm_raw)
            else:
                # §13.1.3: If-Modified-Since only without If-None-Match; an invalid date is ignored.
                modified = parse_http_date(facts.if_modified_since)
        return Run(
            self._plain[enabled].additions,
            if_match=if_match,
            if_none_match=if_none_match,
            if_modified_since=modified,
            if_unmodified_since=unmodified,
            send_etag=enabled,
            lookup=self.current_etag is not None and (if_match is not None or if_none_match is not None),
        )

    def _write(self, facts: Facts, request: Any, enabled: bool) -> Decision:
        method = facts.method
        im_raw = facts.if_match
        inm_raw = facts.if_none_match
        # §13.1.4: If-Unmodified-Since is ignored when If-Match is present.
        ius_raw = facts.if_unmodified_since if im_raw is None else None
        send_etag = enabled and method in self._response_methods
        additions: dict[str, Any] = {**self._base, ENVIRON_ENABLED: enabled, ENVIRON_IF_MATCH: None}
        if im_raw is None and inm_raw is None and ius_raw is None:
            if enabled and self.require_rules and route_matches(self.require_rules, method, facts.path):
                return Refuse(self._required(method))
            return Run(additions, send_etag=send_etag)
        if not enabled:
            # Nothing is written: the client asked for a precondition this version lacks.
            return Refuse(self.too_old(_write_precondition(facts) or IF_MATCH_HEADER, facts.served))
        if_match: IfMatch | None = None
        if im_raw is not None:
            try:
                parsed = self._cache.get(im_raw)
            except Malformed:
                # Never treat a malformed If-Match as absent: that would make the write unconditional.
                return Refuse(malformed(IF_MATCH_HEADER))
            if_match = IfMatch(parsed, strong=self.strict, raw=im_raw)
            additions[ENVIRON_IF_MATCH] = if_match
        unmodified: IfUnmodifiedSince | None = None
        if ius_raw is not None:
            if not self.if_unmodified_since_on_writes:
                return Refuse(precondition_unsupported(method, IF_UNMODIFIED_SINCE_HEADER))
            date = parse_http_date(ius_raw)
            if date is None:
                # Deliberately not "ignored" as RFC 9110 §13.1.4 says: ignoring it would make
                # the write unconditional.
                return Refuse(_date_malformed(IF_UNMODIFIED_SINCE_HEADER))
            unmodified = IfUnmodifiedSince(date, raw=ius_raw)
            additions[ENVIRON_IF_UNMODIFIED_SINCE] = unmodified
        if_none_match: IfNoneMatch | None = None
        if inm_raw is not None:
            if not self.if_none_match_on_writes:
                return Refuse(precondition_unsupported(method, IF_NONE_MATCH_HEADER))
            try:
                parsed = self._cache.get(inm_raw)
            except Malformed:
                return Refuse(malformed(IF_NONE_MATCH_HEADER))
            if_none_match = IfNoneMatch(parsed, raw=inm_raw)
            additions[ENVIRON_IF_NONE_MATCH] = if_none_match
        if not self._enforced(method, facts.path, request):
            # Decided before the app runs: a write the app cannot make conditional must not
            # happen (RFC 9110 §13.1.1: the condition is evaluated "prior to performing the
            # method"), and must not be answered 500 after it did.
            if (
                if_match is not None
                and if_match.any
                and star_holds_without_app(method)
                and not (unmodified or if_none_match)
            ):
                return Run(additions, send_etag=send_etag)
            header = IF_MATCH_HEADER if if_match is not None else _write_precondition(facts)
            return Refuse(precondition_unsupported(method, header or IF_MATCH_HEADER))
        handed = tuple(c for c in (if_match, unmodified, if_none_match) if c is not None)
        # The lookup (current_etag) returns None for "missing / not visible to this caller":
        # the app then answers 401/403/404, which win over 412 (RFC 9110 §13.2.1).
        return Run(
            additions,
            if_match=if_match,
            if_none_match=if_none_match,
            handed=handed,
            send_etag=send_etag,
            lookup=self.current_etag is not None and (if_match is not None or if_none_match is not None),
        )

    def prechecked(self, run: Run, current: str | None) -> Decision:
        """*run* (a ``lookup``) once ``current_etag`` answered *current*: 412, 304 or the app.

        ``None`` (missing, or not visible to this caller) decides nothing: the app answers its
        401/403/404, which win over 412 (RFC 9110 §13.2.1)."""
        if current is None:
            return run
        if run.if_match is not None and not run.if_match.matches(current):
            return Refuse(precondition_failed())
        if run.if_none_match is not None and run.if_none_match.matches(current):
            if self._is_write(run):
                # §13.1.2: false on a method other than GET/HEAD -> 412.
                return Refuse(precondition_failed(_EXISTS))
            return NotModified([(ETAG_HEADER, current)])
        return run

    def _is_write(self, run: Run) -> bool:
        return bool(run.handed) or ENVIRON_IF_MATCH in run.additions

    # -- on the app's answer -----------------------------------------------------------------

    def answer(
        self,
        run: Run,
        status: int,
        headers: list[tuple[str, str]],
        *,
        acknowledged: bool,
        response_etag: str | None,
    ) -> Treatment:
        """How to treat the app's answer to *run*: its *status* and *headers*, whether the app
        *acknowledged* enforcing the write's precondition, and the etag it set
        (``apimw.etag.response``).  :class:`ReadBody` when the etag is to be read from the
        body: the glue then holds the body and finishes with :meth:`answer_body`."""
        if not 200 <= status < 300:
            # RFC 9110 §13.2.1: preconditions are ignored when the answer without them would
            # not have been a 2xx; the app's 401/403/404/412 is the answer.
            return Send(headers)
        if run.handed and not (acknowledged or any(c.enforced for c in run.handed)):
            return Refuse(self._unenforced())
        sent_etag, ctype = etag_and_type(headers)
        etag = response_etag if response_etag is not None else sent_etag
        if etag is None and run.needs_etag and self.etag_from_body and is_json_document(ctype):
            return ReadBody(self.max_body_bytes, run, headers)
        return self._treated(run, headers, etag, sent_etag)

    def answer_body(self, read: ReadBody, body: bytes | None) -> Treatment:
        """The treatment of the answer *read* held, once its body is read: *body*, or ``None``
        when it was longer than ``read.limit`` or did not come whole (sent on without the etag
        it may have named, and counted)."""
        if body is None:
            self.report("etag." + STREAMED_WITHOUT_ETAG)
            return self._treated(read.run, read.headers, None, None)
        return self._treated(read.run, read.headers, etag_in_body(body), None)

    def _treated(
        self, run: Run, headers: list[tuple[str, str]], etag: str | None, sent_etag: str | None
    ) -> Treatment:
        """The answer once its *etag* is known (*sent_etag*: the ETag header the app set)."""
        if run.evaluate:  # GET/HEAD: evaluated here, in RFC 9110 §13.2.2's order
            refused = self._evaluate(run, etag, headers)
            if refused is not None:
                return refused
        if run.send_etag and etag is not None and etag != sent_etag:
            headers = with_etag(headers, etag, replace=sent_etag is not None)
        return Send(headers)

    def _evaluate(self, run: Run, etag: str | None, headers: list[tuple[str, str]]) -> Treatment | None:
        last_modified: datetime | None = None
        if run.if_unmodified_since is not None or run.if_modified_since is not None:
            last_modified = parse_http_date(header_value(headers, "Last-Modified"))
        if run.if_match is not None:
            # §13.1.1: a 2xx means a current representation exists, so "*" holds; listed tags
            # are compared with the etag the app supplied (none supplied: nothing matches).
            if not (run.if_match.any or run.if_match.matches(etag)):
                return Refuse(precondition_failed())
        # §13.1.4: false when the representation was modified after the date; ignored when
        # the resource has no modification date.
        elif (
            run.if_unmodified_since is not None
            and last_modified is not None
            and (last_modified > run.if_unmodified_since)
        ):
            return Refuse(precondition_failed(_MODIFIED))
        if run.if_none_match is not None:
            # §13.1.2: "*" is false when a current representation exists (a 2xx says it does)
            if run.if_none_match.any or run.if_none_match.matches(etag):
                return self._not_modified(etag, headers)
        # §13.1.3: false when the representation was not modified since the date
        elif (
            run.if_modified_since is not None
            and last_modified is not None
            and (last_modified <= run.if_modified_since)
        ):
            return self._not_modified(etag, headers)
        return None

    def _not_modified(self, etag: str | None, headers: list[tuple[str, str]]) -> NotModified:
        # RFC 9110 §15.4.5: a 304 carries the fields its 200 would have sent that guide caches
        # (ETag, Cache-Control, Content-Location, Date, Expires, Vary), Last-Modified when
        # there is no ETag, and no body.
        kept = [(k, v) for k, v in headers if k.lower() in _NOT_MODIFIED_FIELDS]
        if etag is not None:
            kept.append((ETAG_HEADER, etag))
        else:
            kept.extend((k, v) for k, v in headers if k.lower() == "last-modified")
        return NotModified(kept)

    # -- problems ----------------------------------------------------------------------------

    def too_old(self, header: str, served: object) -> HTTPProblem:
        """406: *header* below ``min_version`` (the microversion middleware's answer)."""
        try:
            VersionGate(self.min_version, what=f"The {header} header").check({ENVIRON_VERSION: served})
        except HTTPProblem as problem:
            return problem
        raise AssertionError("unreachable: too_old called at an allowed version")  # pragma: no cover

    @staticmethod
    def _required(method: str) -> HTTPProblem:
        # RFC 6585 §3: the response "SHOULD include an explanation of how to successfully
        # resubmit the request" and "MUST NOT be stored by a cache".
        return HTTPProblem(
            428,
            "etag.if-match-required",
            f"{method} on this resource must be conditional: GET it, then resend the "
            "request with its etag in an If-Match header.",
            headers=[("Cache-Control", "no-store")],
        )

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
        return HTTPProblem(
            500,
            "apimw.misconfigured",
            "The service is misconfigured: etags start at a microversion, but no microversion "
            "middleware negotiated one for this request.",
        )

    def _enforced(self, method: str, path: str, request: Any) -> bool:
        """Whether the app declared that it enforces preconditions on this write."""
        if self.enforces_call is not None:
            return bool(self.enforces_call(request))
        return route_matches(self.enforce_rules, method, path)

    @staticmethod
    def _unenforced() -> HTTPProblem:
        LOG.error(
            "a write carried a precondition but the app did not acknowledge enforcing it "
            "(mark_enforced(environ) after the conditional write); refusing the 2xx"
        )
        return HTTPProblem(
            500,
            "etag.precondition-not-enforced",
            "The server could not confirm that your precondition was enforced; "
            "the resource may or may not have changed. GET it before retrying.",
        )


_EXISTS: Final = "The resource exists: If-None-Match asked to write only if it did not. Nothing was changed."
_MODIFIED: Final = "The resource was modified after the If-Unmodified-Since date. Fetch it again, then retry."


def _write_precondition(facts: Facts) -> str | None:
    """The first precondition header a write carries that the rules evaluate, ``None``: none."""
    if facts.if_match is not None:
        return IF_MATCH_HEADER
    if facts.if_unmodified_since is not None:
        return IF_UNMODIFIED_SINCE_HEADER
    if facts.if_none_match is not None:
        return IF_NONE_MATCH_HEADER
    return None
