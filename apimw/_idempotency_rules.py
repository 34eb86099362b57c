"""Sans-IO: the idempotency rules both doors share -- request facts in, a named decision out.

:class:`IdempotencyRules` holds the validated options.  A glue (the WSGI middleware in
:mod:`apimw.idempotency`, the ASGI one in :mod:`apimw.asgi.idempotency`) reads the request,
hands the rules a :class:`RequestFacts`, and acts on the decision it gets back:

1. :meth:`IdempotencyRules.admit` -- :class:`Pass` (no token: call the app untouched),
   :class:`Reply` (answer now: a 400), or :class:`Admitted` (read the body, at most
   ``max_request_bytes``);
2. :meth:`IdempotencyRules.claim` with the body -- :class:`Reply` (a replay, 409, 422,
   503...), :class:`Claimed` (run the app under the claim, feed its answer to an
   :class:`~apimw._idempotency_capture.Answering`), or :class:`Unprotected` (the store is
   down and ``fail_open``: run the app, marked).

The store calls of step 2 and of the answer's settlement are yielded as ops
(``ClaimCall(key, record, lease)``) and run by the glue on its store, blocking
(:func:`~apimw._idempotency_capture.run_ops`) or awaited (``apimw.asgi``).  Every decision
carries ``keys``: what the glue leaves for the app in the request's namespace (the WSGI
environ, the ASGI scope: the ``apimw.`` keys only).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from apimw import _idempotency_identity as identity
from apimw import _idempotency_records as records
from apimw._config import as_list, import_named
from apimw._idempotency_capture import Claim, ClaimCall, Keeping, Ops
from apimw._idempotency_identity import ClientToken
from apimw._microversion_core import check_inside_microversion
from apimw._microversion_type import ENVIRON_VERSION
from apimw._stores import PREFIX_LEN
from apimw.errors import (
    ENVIRON_MIDDLEWARE_ANSWER,
    ENVIRON_PROFILE,
    ENVIRON_REQUEST_ID,
    ConfigError,
    HTTPProblem,
    StoreError,
    check_profile,
    render_problem,
)
from apimw.metrics import Metrics, problem_outcome

LOG: Final = logging.getLogger("apimw.idempotency")

# request headers, as HTTP names them
CLIENT_TOKEN_HEADER: Final = "X-Client-Token"  # noqa: S105 - a header name
IDEMPOTENCY_KEY_HEADER: Final = "Idempotency-Key"
#: Added (value ``true``) to a replayed answer (the ``replay_header`` option's default).
REPLAYED_HEADER: Final = "Idempotent-Replayed"

# the request's namespace: the CGI keys the scope functions read (a WSGI environ, or the view
# apimw.asgi builds from the exact header names) ...
ENVIRON_PROJECT_ID: Final = "HTTP_X_PROJECT_ID"
ENVIRON_TENANT_ID: Final = "HTTP_X_TENANT_ID"
ENVIRON_USER_ID: Final = "HTTP_X_USER_ID"
#: keystonemiddleware's verdict on the caller (``Confirmed`` or ``Invalid``).
ENVIRON_IDENTITY_STATUS: Final = "HTTP_X_IDENTITY_STATUS"
# ... and what the middleware leaves there for the app and the outer middlewares
#: ``True`` on a replayed answer, ``False`` when the app ran under a claim.
ENVIRON_REPLAYED: Final = "apimw.idempotency.replayed"
#: ``"claimed"`` (the app runs protected) or ``"unprotected"`` (fail-open, store down).
ENVIRON_STATUS: Final = "apimw.idempotency.status"
#: The request's :class:`ClientToken`, for an app that records it in its own database
#: (:mod:`apimw.idempotency_db`); read it with :func:`apimw.idempotency.client_token`.
ENVIRON_TOKEN: Final = "apimw.idempotency.token"  # noqa: S105 - an environ key

DEFAULT_FINGERPRINT_HEADERS: Final = ("OpenStack-API-Version", "X-OpenStack-*-API-Version")
DEFAULT_RELEASE_STATUSES: Final = (408, 409, 423, 425, 429)
#: oslo.middleware's request_id header, Ironic's and Nova's compat headers, and the common others.
DEFAULT_REQUEST_ID_HEADERS: Final = (
    "X-OpenStack-Request-Id", "OpenStack-Request-Id", "X-Compute-Request-Id", "X-Request-Id", "Request-Id",
)  # fmt: skip
SHARED_SCOPE: Final = "*shared*"


# -- scope functions (read the request's CGI keys) ------------------------------------------------


def _scope_header(environ: Mapping[str, Any], key: str, header: str) -> str | None:
    """The value of a scope header; :class:`~apimw._idempotency_identity.TokenError` (400
    ``idempotency.scope-repeated``) when it holds a comma (two lines joined, or a list)."""
    value = environ.get(key)
    return identity.check_scope_value(value, header) if value else None


def project_scope(environ: Mapping[str, Any]) -> str | None:
    """The project auth_token authenticated (``X-Project-Id``, legacy ``X-Tenant-Id``).

    None when keystonemiddleware says the identity is not confirmed
    (``X-Identity-Status: Invalid``, its ``delay_auth_decision`` mode): that request's
    project headers vouch for nothing.
    """
    status = environ.get(ENVIRON_IDENTITY_STATUS)
    if status is not None and str(status).strip().lower() != "confirmed":
        return None
    return (
        _scope_header(environ, ENVIRON_PROJECT_ID, "X-Project-Id")
        or _scope_header(environ, ENVIRON_TENANT_ID, "X-Tenant-Id")
    )


def user_scope(environ: Mapping[str, Any]) -> str | None:
    """Project and user: the same token from two users of one project are two requests."""
    project = project_scope(environ)
    user = _scope_header(environ, ENVIRON_USER_ID, "X-User-Id") if project else None
    return f"{project}\x1f{user}" if project and user else None


def shared_scope(environ: Mapping[str, Any]) -> str | None:
    """One scope for everybody (no-auth deployments); client headers are ignored."""
    return SHARED_SCOPE


SCOPES: Final[dict[str, Callable[[Mapping[str, Any]], str | None]]] = {
    "project": project_scope,
    "user": user_scope,
    "shared": shared_scope,
}

ScopeFunction = Callable[[Any], "str | None"]


def resolve_scope(scope: str | ScopeFunction) -> ScopeFunction:
    if callable(scope):
        return scope
    if scope in SCOPES:
        return SCOPES[scope]
    if ":" in scope:
        func = import_named(scope, option="idempotency: scope")
        if callable(func):
            return func  # type: ignore[no-any-return]
    raise ConfigError(f"idempotency: scope must be project, user, shared or 'module:function'; got {scope!r}")


def as_status_list(value: str | Iterable[str | int]) -> list[int]:
    """HTTP statuses: a list, or a string read as :func:`apimw.config.as_list` reads it."""
    out = []
    for item in as_list(value) if isinstance(value, str) else value:
        code = int(item) if isinstance(item, str) and item.strip().isdigit() else item
        if not isinstance(code, int) or not 100 <= code <= 599:
            raise ConfigError(f"idempotency: not an HTTP status: {item!r}")
        out.append(code)
    return out


# -- what the rules are told, and what they decide ------------------------------------------------


class RequestFacts(NamedTuple):
    """What the rules need to know of a request with a protected method."""

    method: str
    #: ``SCRIPT_NAME + PATH_INFO`` (the ASGI ``root_path + path``, as PEP 3333 encodes it)
    path: str
    query: str
    content_type: str | None
    #: the header values as the server gives them (repeated lines joined with ``,``)
    client_token: str | None
    idempotency_key: str | None
    #: the request's identity headers (:meth:`IdempotencyRules.identity_headers`)
    identity_headers: Sequence[tuple[str, str]]
    #: the ``scope`` function's answer (the tenant), None when there is none
    scope: str | None
    project: str | None
    #: the error profile and request id an outer middleware recorded
    profile: str | None = None
    request_id: str | None = None
    multiprocess: bool = False
    #: a scope header the ``scope`` function read is malformed (it holds a comma): a 400
    scope_problem: identity.TokenError | None = None


def cgi_facts(
    rules: IdempotencyRules, request: Mapping[str, Any], client_token: str | None, key_header: str | None
) -> RequestFacts:
    """The facts of a request its PEP 3333 keys describe: a WSGI environ, or the view of an ASGI
    request the ASGI door builds (its headers' CGI keys, its scope's ``apimw.`` keys)."""
    request_id = request.get(ENVIRON_REQUEST_ID)
    scope_problem = None
    try:
        scope = rules.scope_fn(request)
    except identity.TokenError as exc:
        scope, scope_problem = None, exc
    try:
        project = project_scope(request)
    except identity.TokenError:  # a scope that does not read it (shared, or the deployment's)
        project = None
    return RequestFacts(
        method=request["REQUEST_METHOD"],
        path=request.get("SCRIPT_NAME", "") + request.get("PATH_INFO", ""),
        query=request.get("QUERY_STRING", ""),
        content_type=request.get("CONTENT_TYPE"),
        client_token=client_token,
        idempotency_key=key_header,
        identity_headers=rules.identity_headers(request.items(), request.get(ENVIRON_VERSION)),
        scope=scope,
        project=project,
        profile=request.get(ENVIRON_PROFILE),
        request_id=request_id if isinstance(request_id, str) and request_id else None,
        multiprocess=bool(request.get("wsgi.multiprocess")),
        scope_problem=scope_problem,
    )


def check_order(app: object) -> None:
    """:class:`ConfigError` when a microversion middleware is below *app* (the app the
    idempotency middleware is given): the idempotency middleware must sit inside it."""
    check_inside_microversion(app, "idempotency", "a token's fingerprint never holds the served version")


class Pass(NamedTuple):
    """No token on a request that does not need one: call the app untouched."""

    keys: Mapping[str, Any] = {}


class Reply(NamedTuple):
    """Answer now, without the app: a problem, or the stored answer replayed."""

    status: str
    headers: list[tuple[str, str]]
    body: bytes
    #: what the glue sets in the request's namespace
    keys: Mapping[str, Any]


class Admitted(NamedTuple):
    """A well-formed token and a scope: read the body (at most ``max_request_bytes``), then
    :meth:`IdempotencyRules.claim`."""

    token: str
    scope: str
    keys: Mapping[str, Any] = {}


class Claimed(NamedTuple):
    """This request owns the token now: run the app, feed its answer to an ``Answering``."""

    claim: Claim
    token: ClientToken
    keys: Mapping[str, Any]


class Unprotected(NamedTuple):
    """The store is down and ``on_store_error = fail_open``: run the app, its answer marked."""

    token: ClientToken
    keys: Mapping[str, Any]


Decision = Pass | Reply | Admitted | Claimed | Unprotected

#: The header an unprotected answer carries, and its value.
UNPROTECTED_MARK: Final = (records.STATUS_HEADER, "unprotected")


class IdempotencyRules:
    """The validated options of one idempotency middleware and its decisions (see the module).

    Built by the middleware of either door from its keyword options; every attribute is
    public and read-only by convention.  A list option also takes a string, read as a paste
    ini value is (:func:`apimw.config.as_list`: comma or newline separated).
    """

    def __init__(
        self,
        *,
        store_name: str,
        methods: str | Iterable[str] = ("POST",),
        accept_idempotency_key: bool = True,
        require_token: bool = False,
        scope: str | ScopeFunction = "project",
        missing_scope: str = "reject",
        fingerprint_headers: str | Iterable[str] = DEFAULT_FINGERPRINT_HEADERS,
        lease: float = 300.0,
        renew_lease: bool = False,
        retention: float = 86400.0,
        max_request_bytes: int = 1024 * 1024,
        max_response_bytes: int = 900 * 1024,
        store_5xx: bool = False,
        release_statuses: Iterable[int | str] = DEFAULT_RELEASE_STATUSES,
        on_store_error: str = "fail_closed",
        retry_after: int = 1,
        mismatch_status: int = 409,
        replay_header: str = REPLAYED_HEADER,
        replay_user_headers: bool = False,
        drop_headers: str | Iterable[str] = (),
        request_id_headers: str | Iterable[str] = DEFAULT_REQUEST_ID_HEADERS,
        key_prefix: str = "apimw:",
        error_profile: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.store_name = store_name
        self.metrics = metrics
        self.warn_multiprocess = store_name.startswith("memory://")
        self.methods = frozenset(m.strip().upper() for m in as_list(methods))
        if not self.methods or not all(re.fullmatch(r"[A-Z]+", m) for m in self.methods):
            raise ConfigError(f"idempotency: methods must be HTTP method names, got {sorted(self.methods)}")
        self.accept_key = bool(accept_idempotency_key)
        self.require_token = bool(require_token)
        self.scope_fn = resolve_scope(scope)
        if missing_scope not in ("reject", "shared"):
            raise ConfigError(f"idempotency: missing_scope must be reject or shared, got {missing_scope!r}")
        self.missing_shared = missing_scope == "shared"
        names = as_list(fingerprint_headers)
        self.fp_exact, fp_pattern = identity.header_matcher(names)
        # a cheap filter for every key: an exact name or the literal start of a pattern
        self.fp_starts = tuple(self.fp_exact) + tuple(
            "HTTP_" + h.strip().upper().replace("-", "_").split("*", 1)[0] for h in names if "*" in h
        )
        self.fp_match: Callable[[str], object] = (
            fp_pattern.fullmatch if fp_pattern is not None else (lambda key: None)
        )
        for name, value in (("lease", lease), ("retention", retention)):
            if not value > 0:
                raise ConfigError(f"idempotency: {name} must be > 0 seconds, got {value!r}")
        self.lease = float(lease)
        self.renew_lease = bool(renew_lease)
        if max_request_bytes < 0 or max_response_bytes < 1024:
            raise ConfigError("idempotency: max_request_bytes must be >= 0 and max_response_bytes >= 1024")
        self.max_request = int(max_request_bytes)
        if on_store_error not in ("fail_closed", "fail_open"):
            raise ConfigError(f"idempotency: bad on_store_error {on_store_error!r} (fail_closed, fail_open)")
        self.fail_open = on_store_error == "fail_open"
        if retry_after < 0:
            raise ConfigError(f"idempotency: retry_after must be >= 0, got {retry_after}")
        self.retry_after = ("Retry-After", str(int(retry_after)))
        if mismatch_status not in (409, 422):
            raise ConfigError(f"idempotency: mismatch_status must be 409 or 422, got {mismatch_status}")
        self.mismatch_status = mismatch_status
        if not re.fullmatch(r"[A-Za-z0-9-]+", replay_header):
            raise ConfigError(f"idempotency: bad replay_header {replay_header!r}")
        replayed = (replay_header, "true")
        dropped = {h.strip().lower() for h in as_list(drop_headers)}
        drop = records.DROPPED_HEADERS | dropped | {replay_header.lower()}
        if not replay_user_headers:
            drop |= records.USER_HEADERS
        request_ids = [h.strip() for h in as_list(request_id_headers)]
        if not all(re.fullmatch(r"[A-Za-z0-9-]+", h) for h in request_ids):
            raise ConfigError(f"idempotency: bad header name in request_id_headers: {request_ids!r}")
        self.request_ids = frozenset(h.lower() for h in request_ids)
        if len(key_prefix) > 100 or not re.fullmatch(r"[\x21-\x7e]*", key_prefix):
            raise ConfigError("idempotency: key_prefix must be at most 100 visible ASCII characters")
        self.key_prefix = key_prefix
        self.profile = check_profile(error_profile) if error_profile else None
        self.keeping = Keeping(
            max_response=int(max_response_bytes),
            retention=float(retention),
            drop=frozenset(drop),
            replayed=replayed,
            release=frozenset(as_status_list(release_statuses)),
            store_5xx=bool(store_5xx),
            profile=self.profile,
        )

    # -- what the glue asks first ------------------------------------------------------------------

    def protects(self, method: str) -> bool:
        """Whether requests with *method* are the middleware's (``upper()``: Flask and pecan route
        ``post`` as POST, and some servers pass it as sent)."""
        return method.upper() in self.methods

    def identity_headers(
        self, items: Iterable[tuple[str, Any]], served: object | None
    ) -> list[tuple[str, str]]:
        """Of the request's ``(CGI key, value)`` pairs, those in its identity (``fingerprint_headers``),
        plus the served microversion *served* (an outer microversion middleware's)."""
        found = []
        starts, exact, match = self.fp_starts, self.fp_exact, self.fp_match
        for key, value in items:
            if key.startswith(starts) and (key in exact or match(key)):
                found.append((key, str(value).strip()))
        if served is not None:
            found.append((ENVIRON_VERSION, str(served)))
        return found

    def report(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.idempotency(outcome)

    def problem(self, facts: RequestFacts, problem: HTTPProblem) -> Reply:
        """The answer *problem* renders to, in the deployment's profile; an apimw middleware's own."""
        self.report(problem_outcome(problem.code))
        status, headers, body = render_problem(
            problem, profile=self.profile or facts.profile or "api-sig", request_id=facts.request_id
        )
        return Reply(status, headers, b"" if facts.method == "HEAD" else body,
                     {ENVIRON_MIDDLEWARE_ANSWER: problem.code})  # fmt: skip

    def _problem(
        self,
        facts: RequestFacts,
        status: int,
        code: str,
        detail: str,
        headers: Sequence[tuple[str, str]] = (),
        extra: dict[str, Any] | None = None,
    ) -> Reply:
        return self.problem(facts, HTTPProblem(status, code, detail, headers=headers, extra=extra))

    def admit(self, facts: RequestFacts) -> Pass | Reply | Admitted:
        """Before the body is read: no token, a malformed one, no scope -- or on to :meth:`claim`."""
        key_header = facts.idempotency_key if self.accept_key else None
        if facts.client_token is None and key_header is None:
            if self.require_token:
                return self._problem(facts, 400, "idempotency.token-required",
                                     "This request needs an X-Client-Token header.")  # fmt: skip
            return Pass()
        try:
            token = identity.resolve_token(facts.client_token, key_header)
        except identity.TokenError as exc:
            return self._problem(facts, 400, exc.code, exc.detail)
        assert token is not None  # noqa: S101 - one of the headers is present
        if facts.scope_problem is not None:
            return self._problem(facts, 400, facts.scope_problem.code, facts.scope_problem.detail)
        scope = facts.scope
        if not scope:
            if not self.missing_shared:
                return self._problem(
                    facts, 400, "idempotency.scope-missing",
                    "X-Client-Token needs an authenticated project (X-Project-Id) and none was found on "
                    "this request: the idempotency middleware must come after the auth middleware "
                    "(keystonemiddleware auth_token) in the pipeline; a deployment without auth sets "
                    "scope = shared (or missing_scope = shared) in the idempotency options.",
                )  # fmt: skip
            scope = SHARED_SCOPE
        return Admitted(token, scope)

    # -- the claim ---------------------------------------------------------------------------------

    def claim(
        self, facts: RequestFacts, admitted: Admitted, body: bytes
    ) -> Ops[Reply | Claimed | Unprotected]:
        """Claim the token for this request (the store calls yielded): replay, refuse, or run."""
        fp = identity.fingerprint(
            method=facts.method, path=facts.path, query=facts.query, content_type=facts.content_type,
            versions=facts.identity_headers, body=body,
        )  # fmt: skip
        if self.warn_multiprocess and facts.multiprocess:
            self.warn_multiprocess = False
            LOG.warning(
                "idempotency: the %s store lives in one process but this server runs several: "
                "workers do not see each other's tokens; use redis:// or memcached://", self.store_name,
            )  # fmt: skip
        scope = admitted.scope
        handed = ClientToken(scope, admitted.token, fp, facts.project, mismatch_status=self.mismatch_status)
        key = identity.store_key(self.key_prefix, scope, admitted.token)
        owner = records.owner_id()
        pending = records.encode_pending(owner, fp, scope, time.time())
        try:
            current = yield from self._claim(key, pending)
        except StoreError as exc:
            return self._store_down(facts, handed, key, exc)
        if current is None:
            keys = {ENVIRON_TOKEN: handed, ENVIRON_STATUS: "claimed", ENVIRON_REPLAYED: False}
            return Claimed(Claim(key, pending[:PREFIX_LEN], owner, fp, scope, facts.method), handed, keys)
        return self._answer_existing(facts, handed, current, fp, scope)

    def _claim(self, key: str, pending: bytes) -> Ops[bytes | None]:
        """``None`` if this request owns the key now, else the record there."""
        for _ in range(3):
            current = yield ClaimCall(key, pending, self.lease)
            # our own record: a retried claim whose first reply was lost
            if current is None or current[:PREFIX_LEN] == pending[:PREFIX_LEN]:
                return None
            if current:
                return current  # type: ignore[no-any-return]
            # vanished between the failed claim and the read: claim again (bounded)
        return b""

    def _store_down(
        self, facts: RequestFacts, handed: ClientToken, key: str, exc: StoreError
    ) -> Reply | Unprotected:
        LOG.warning("idempotency store %s unavailable (key %s...): %s", self.store_name, key[-64:][:12], exc)
        if self.fail_open:
            self.report("unprotected")
            return Unprotected(handed, {ENVIRON_TOKEN: handed, ENVIRON_STATUS: "unprotected"})
        return self._problem(
            facts, 503, "idempotency.store-unavailable",
            "The idempotency store is unavailable; the request was not run. Retry later.",
            headers=[self.retry_after],
        )  # fmt: skip

    def _answer_existing(self, facts: RequestFacts, handed: ClientToken, current: bytes, fp: str,
                         scope: str) -> Reply:  # fmt: skip
        verdict, record = records.judge(current, fp, scope)
        if verdict == records.IN_FLIGHT:
            return self._problem(
                facts, 409, "idempotency.in-flight",
                "A request with this X-Client-Token is in progress; retry later.",
                headers=[self.retry_after],
            )  # fmt: skip
        if verdict == records.UNREADABLE:
            LOG.error("idempotency store %s holds an unreadable record", self.store_name)
            return self._problem(
                facts, 409, "idempotency.record-unreadable",
                "The stored record for this X-Client-Token cannot be read; use a new token.",
            )  # fmt: skip
        if verdict == records.MISMATCH:
            return self._problem(
                facts, self.mismatch_status, "idempotency.fingerprint-mismatch",
                "This X-Client-Token was already used for a different request "
                "(method, path, query, body or microversion differ).",
            )  # fmt: skip
        assert record is not None  # noqa: S101 - a tombstone or a replay
        if verdict == records.TOMBSTONED:
            headers = [("Location", record.location)] if record.location else []
            return self._problem(
                facts, 409, "idempotency.replay-unavailable",
                "The request with this X-Client-Token was run, but its answer was too large or "
                "streamed and was not stored; see Location for the resource.",
                headers=headers,
                extra={"original_status": int(record.status[:3]) if record.status[:3].isdigit() else None,
                       "location": record.location},
            )  # fmt: skip
        self.report("replayed")
        request_id = facts.request_id
        headers = records.with_request_id(
            record.headers, self.request_ids, lambda: request_id or records.new_request_id()
        )
        headers += [("Content-Length", str(len(record.body))), self.keeping.replayed]
        body = b"" if facts.method == "HEAD" else record.body
        return Reply(record.status, headers, body, {ENVIRON_TOKEN: handed, ENVIRON_REPLAYED: True})

    def exchanged(self, request: dict[str, Any], replayed: bool) -> None:
        """The claimed request's answer went out (or failed): tell ``metrics``, flag a replay
        the database guard answered (the store had lost the token)."""
        self.report("replayed" if replayed else "claimed")
        if replayed:
            request[ENVIRON_REPLAYED] = True
