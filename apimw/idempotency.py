"""``X-Client-Token`` idempotent replay: a retried POST gets the first answer, never a second server.

Place it **after** keystonemiddleware's ``auth_token`` in the pipeline: the scope
of a token is the authenticated project (``X-Project-Id``, which ``auth_token``
strips from the client's request and sets itself).  See ``docs/idempotency.md``.

Per request with a token (``X-Client-Token``, or ``Idempotency-Key``)::

    token -> scope -> body (buffered, capped) -> fingerprint -> claim(key, lease)
      won:  run the app, store the response (owner-fenced) *before* sending it
      lost: same fingerprint -> replay | in flight -> 409 | other request -> 409 (422)

Requests without a token, and methods not configured, go straight to the app
without a store call.
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from apimw import _idempotency_identity as identity
from apimw import _idempotency_records as records
from apimw._config import (
    Option,
    as_bool,
    as_float,
    as_int,
    as_list,
    as_optional_str,
    as_str,
    integration,
    oslo_config,
)
from apimw._idempotency_body import read_body
from apimw._idempotency_capture import Claim, Exchange, Keeping, Ops, run_ops
from apimw._idempotency_identity import ClientToken as ClientToken
from apimw._idempotency_lease import Renewer
from apimw._idempotency_metered import MeteredStore
from apimw._idempotency_records import NOT_STORED as NOT_STORED
from apimw._idempotency_records import STATUS_HEADER
from apimw._microversion_type import ENVIRON_VERSION
from apimw._stores import PREFIX_LEN, Store, mask_url, open_store
from apimw._wsgi import WrappedApp
from apimw.errors import (
    ENVIRON_REQUEST_ID,
    ConfigError,
    HTTPProblem,
    StoreError,
    check_profile,
    problem_answer,
)
from apimw.metrics import Metrics, as_metrics, problem_outcome

if TYPE_CHECKING:
    from types import TracebackType

    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    ExcInfo = tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]

__all__ = [
    "ENVIRON_REPLAYED",
    "ENVIRON_STATUS",
    "ENVIRON_TOKEN",
    "GROUP",
    "OPTIONS",
    "ClientToken",
    "IdempotencyMiddleware",
    "ReplayStore",
    "check_replay_store",
    "client_token",
    "filter_factory",
    "list_opts",
    "open_replay_store",
    "oslo_hook",
    "wrap_flask",
]

LOG = logging.getLogger("apimw.idempotency")

GROUP: Final = "apimw_idempotency"
FLASK_CONFIG_KEY: Final = "APIMW_IDEMPOTENCY"

# headers
CLIENT_TOKEN_HEADER: Final = "X-Client-Token"  # noqa: S105 - a header name
IDEMPOTENCY_KEY_HEADER: Final = "Idempotency-Key"
#: Added (value ``true``) to a replayed answer (the ``replay_header`` option's default).
REPLAYED_HEADER: Final = "Idempotent-Replayed"
#: ``unprotected`` on an answer the app gave unprotected (store down, ``fail_open``), and
#: ``not-stored`` (:data:`NOT_STORED`) on a first answer that will not be replayed.
UNPROTECTED_HEADER: Final = STATUS_HEADER

# environ keys: the request headers read ...
ENVIRON_CLIENT_TOKEN: Final = "HTTP_X_CLIENT_TOKEN"  # noqa: S105 - an environ key
ENVIRON_IDEMPOTENCY_KEY: Final = "HTTP_IDEMPOTENCY_KEY"
ENVIRON_PROJECT_ID: Final = "HTTP_X_PROJECT_ID"
ENVIRON_TENANT_ID: Final = "HTTP_X_TENANT_ID"
ENVIRON_USER_ID: Final = "HTTP_X_USER_ID"
# ... and what the middleware leaves there for the app and the outer middlewares
#: ``True`` on a replayed answer, ``False`` when the app ran under a claim.
ENVIRON_REPLAYED: Final = "apimw.idempotency.replayed"
#: ``"claimed"`` (the app runs protected) or ``"unprotected"`` (fail-open, store down).
ENVIRON_STATUS: Final = "apimw.idempotency.status"
#: The request's :class:`ClientToken`, for an app that records it in its own database
#: (:mod:`apimw.idempotency_db`); read it with :func:`client_token`.
ENVIRON_TOKEN: Final = "apimw.idempotency.token"  # noqa: S105 - an environ key

# the names before the convention (ENVIRON_<NAME> for environ keys), kept working
ENV_CLIENT_TOKEN: Final = ENVIRON_CLIENT_TOKEN
ENV_IDEMPOTENCY_KEY: Final = ENVIRON_IDEMPOTENCY_KEY
ENV_PROJECT_ID: Final = ENVIRON_PROJECT_ID
ENV_TENANT_ID: Final = ENVIRON_TENANT_ID
ENV_USER_ID: Final = ENVIRON_USER_ID

DEFAULT_FINGERPRINT_HEADERS: Final = ("OpenStack-API-Version", "X-OpenStack-*-API-Version")
DEFAULT_RELEASE_STATUSES: Final = (408, 409, 423, 425, 429)
#: oslo.middleware's request_id header, Ironic's and Nova's compat headers, and the common others.
DEFAULT_REQUEST_ID_HEADERS: Final = (
    "X-OpenStack-Request-Id", "OpenStack-Request-Id", "X-Compute-Request-Id", "X-Request-Id", "Request-Id",
)  # fmt: skip
SHARED_SCOPE: Final = "*shared*"

#: What :meth:`IdempotencyMiddleware.protect` decides (:attr:`Answer.kind`).
ANSWER: Final = "answer"  # send status, headers, body (a problem or a replay)
CLAIMED: Final = "claimed"  # run the app under the claim (an Exchange)
UNPROTECTED: Final = "unprotected"  # the store is down and fail_open: run the app, marked


class Answer(NamedTuple):
    """What a request with a token gets before its app runs (see the kinds above)."""

    kind: str
    status: str = ""
    headers: list[tuple[str, str]] = []  # noqa: RUF012 - never mutated
    body: bytes = b""
    claim: Claim | None = None
    token: ClientToken | None = None


_UNPROTECTED: Final = Answer(UNPROTECTED)


def _request_id(environ: WSGIEnvironment) -> str:
    """The id an outer request_id middleware gave this request (its logs carry it), else a new one."""
    found = environ.get(ENVIRON_REQUEST_ID)
    return found if isinstance(found, str) and found else records.new_request_id()


def client_token(environ: WSGIEnvironment) -> ClientToken | None:
    """The :class:`ClientToken` of the request the app is running, ``None`` without a token."""
    found = environ.get(ENVIRON_TOKEN)
    return found if isinstance(found, ClientToken) else None


# -- scope functions ----------------------------------------------------------------------


def project_scope(environ: WSGIEnvironment) -> str | None:
    """The project auth_token authenticated (``X-Project-Id``, legacy ``X-Tenant-Id``)."""
    return environ.get(ENVIRON_PROJECT_ID) or environ.get(ENVIRON_TENANT_ID) or None


def user_scope(environ: WSGIEnvironment) -> str | None:
    """Project and user: the same token from two users of one project are two requests."""
    project = project_scope(environ)
    user = environ.get(ENVIRON_USER_ID)
    return f"{project}\x1f{user}" if project and user else None


def shared_scope(environ: WSGIEnvironment) -> str | None:
    """One scope for everybody (no-auth deployments); client headers are ignored."""
    return SHARED_SCOPE


_SCOPES: Final[dict[str, Callable[[WSGIEnvironment], str | None]]] = {
    "project": project_scope,
    "user": user_scope,
    "shared": shared_scope,
}


def _resolve_scope(scope: str | Callable[[WSGIEnvironment], str | None]) -> Callable[..., str | None]:
    if callable(scope):
        return scope
    if scope in _SCOPES:
        return _SCOPES[scope]
    module, sep, attr = scope.partition(":")
    if sep and module and attr:
        try:
            func = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"idempotency: cannot import scope function {scope!r}: {exc}") from None
        if callable(func):
            return func  # type: ignore[no-any-return]
    raise ConfigError(f"idempotency: scope must be project, user, shared or 'module:function'; got {scope!r}")


def _as_status_list(value: str | Iterable[str | int]) -> list[int]:
    items = as_list(value) if isinstance(value, str) else list(value)
    out = []
    for item in items:
        code = as_int(item) if isinstance(item, str) else item
        if not isinstance(code, int) or not 100 <= code <= 599:
            raise ConfigError(f"idempotency: not an HTTP status: {item!r}")
        out.append(code)
    return out


def _choice(*allowed: str) -> Callable[[str], str]:
    def convert(value: str) -> str:
        text = value.strip().lower().replace("-", "_")
        if text not in allowed:
            raise ConfigError(f"expected one of {', '.join(allowed)}; got {value!r}")
        return text

    return convert


OPTIONS: Final = (
    Option("store", as_str, "memory://",
           "Record store URL: memory://[name][?max_items=N&max_bytes=N], memcached://host:port[,host:port], "
           "redis://[:password@]host:port/db, rediss://..., unix://..., redis+cluster://h:p[,h:p], "
           "redis+sentinel://h:p[,h:p]/service[/db]. Secret: it may carry a password.", secret=True),
    Option("store_timeout", as_float, 0.5,
           "Socket timeout (seconds) for the store, unless the URL sets its own."),
    Option("methods", as_list, ["POST"], "HTTP methods protected by a token.", kind="list"),
    Option("accept_idempotency_key", as_bool, True,
           "Also accept the IETF Idempotency-Key header (quoted sf-string or bare).", kind="bool"),
    Option("require_token", as_bool, False,
           "Answer 400 to a protected method without a token.", kind="bool"),
    Option("scope", as_str, "project",
           "Whose tokens are separate: project (X-Project-Id / X-Tenant-Id from auth_token), "
           "user (project and X-User-Id), shared (one scope, no-auth deployments), or module:function."),
    Option("missing_scope", _choice("reject", "shared"), "reject",
           "A token-bearing request without a scope: reject (400) or use the shared scope."),
    Option("fingerprint_headers", as_list, list(DEFAULT_FINGERPRINT_HEADERS),
           "Request headers that are part of the request's identity (* matches); the microversion "
           "headers by default.", kind="list"),
    Option("lease", as_float, 300.0,
           "Seconds a claim lives while the app runs; keep it above the API worker timeout.",
           kind="float"),
    Option("renew_lease", as_bool, False,
           "While the app runs, renew the claim every lease/3 seconds (owner-checked), so a slow "
           "request keeps its token past the lease.", kind="bool"),
    Option("retention", as_float, 86400.0,
           "Seconds a stored response is replayed (the spec's memcache_expiration).", kind="float"),
    Option("max_request_bytes", as_int, 1024 * 1024,
           "Largest request body buffered for the fingerprint; larger -> 413.", kind="int"),
    Option("max_response_bytes", as_int, 900 * 1024,
           "Largest stored record (body + headers; memcached items are 1 MiB); a larger answer is sent "
           "with Idempotency-Status: not-stored and a tombstone is stored.",
           kind="int"),
    Option("store_5xx", as_bool, False,
           "Store 5xx answers too (at-most-once); by default they release the claim.", kind="bool"),
    Option("release_statuses", _as_status_list, list(DEFAULT_RELEASE_STATUSES),
           "Transient statuses that release the claim so a retry runs again.", kind="list"),
    Option("on_store_error", _choice("fail_closed", "fail_open"), "fail_closed",
           "Store unreachable: fail_closed answers 503; fail_open runs the app unprotected."),
    Option("retry_after", as_int, 1, "Retry-After seconds on 409 in-flight and 503.", kind="int"),
    Option("mismatch_status", as_int, 409,
           "Status for a reused token with a different request: 409 (OpenStack) or 422 (IETF draft).",
           kind="int"),
    Option("replay_header", as_str, REPLAYED_HEADER,
           "Header added (value true) to a replayed answer."),
    Option("drop_headers", as_list, [], "More response headers never stored or replayed.", kind="list"),
    Option("request_id_headers", as_list, list(DEFAULT_REQUEST_ID_HEADERS),
           "Response headers that carry the request id: a replay gets a new one in each (the outer "
           "request_id middleware's, else a new req-<uuid4>).", kind="list"),
    Option("key_prefix", as_str, "apimw:", "Prefix of every store key."),
    Option("error_profile", as_optional_str, None,
           "Error body profile (ironic, api-sig); default: the outer middleware's, else api-sig."),
    Option("metrics", as_metrics, None,
           "'package.module:attribute' naming an apimw.metrics.Metrics object told each outcome and "
           "each store call's duration (e.g. apimw.metrics_prometheus:METRICS).", oslo=False),
)  # fmt: skip


class IdempotencyMiddleware:
    """Replay the stored answer of a POST retried with the same ``X-Client-Token``."""

    def __init__(
        self,
        app: WSGIApplication,
        *,
        store: str | Store = "memory://",
        store_timeout: float = 0.5,
        methods: Iterable[str] = ("POST",),
        accept_idempotency_key: bool = True,
        require_token: bool = False,
        scope: str | Callable[[WSGIEnvironment], str | None] = "project",
        missing_scope: str = "reject",
        fingerprint_headers: Iterable[str] = DEFAULT_FINGERPRINT_HEADERS,
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
        drop_headers: Iterable[str] = (),
        request_id_headers: Iterable[str] = DEFAULT_REQUEST_ID_HEADERS,
        key_prefix: str = "apimw:",
        error_profile: str | None = None,
        metrics: Metrics | str | None = None,
    ) -> None:
        self.app = app  # the property below: also sets self._call_app
        self.metrics = as_metrics(metrics)
        if isinstance(store, str):
            if store_timeout <= 0:
                raise ConfigError(f"idempotency: store_timeout must be > 0, got {store_timeout}")
            store = open_store(store, timeout=store_timeout)
        self.store = store
        self._warn_multiprocess = self.store.name.startswith("memory://")
        self._methods = frozenset(m.strip().upper() for m in methods)
        if not self._methods or not all(re.fullmatch(r"[A-Z]+", m) for m in self._methods):
            raise ConfigError(f"idempotency: methods must be HTTP method names, got {sorted(self._methods)}")
        self._accept_key = bool(accept_idempotency_key)
        self._require_token = bool(require_token)
        self._scope_fn = _resolve_scope(scope)
        if missing_scope not in ("reject", "shared"):
            raise ConfigError(f"idempotency: missing_scope must be reject or shared, got {missing_scope!r}")
        self._missing_shared = missing_scope == "shared"
        headers = list(fingerprint_headers)
        self._fp_exact, self._fp_pattern = identity.header_matcher(headers)
        # literal start of each wildcard name: a cheap filter before the regex
        self._fp_prefixes = tuple(
            "HTTP_" + h.strip().upper().replace("-", "_").split("*", 1)[0] for h in headers if "*" in h
        )
        # a cheap filter for every environ key: an exact name or the literal start of a pattern
        self._fp_starts = tuple(self._fp_exact) + self._fp_prefixes
        self._fp_match: Callable[[str], object] = (
            self._fp_pattern.fullmatch if self._fp_pattern is not None else (lambda key: None)
        )
        for name, value in (("lease", lease), ("retention", retention)):
            if not value > 0:
                raise ConfigError(f"idempotency: {name} must be > 0 seconds, got {value!r}")
        self._lease = float(lease)
        self._renewer = Renewer(self._calls, self._lease) if renew_lease else None
        if max_request_bytes < 0 or max_response_bytes < 1024:
            raise ConfigError("idempotency: max_request_bytes must be >= 0 and max_response_bytes >= 1024")
        self._max_request = int(max_request_bytes)
        self._max_response = int(max_response_bytes)
        release = frozenset(_as_status_list(release_statuses))
        if on_store_error not in ("fail_closed", "fail_open"):
            raise ConfigError(f"idempotency: bad on_store_error {on_store_error!r} (fail_closed, fail_open)")
        self._fail_open = on_store_error == "fail_open"
        if retry_after < 0:
            raise ConfigError(f"idempotency: retry_after must be >= 0, got {retry_after}")
        self._retry_after = ("Retry-After", str(int(retry_after)))
        if mismatch_status not in (409, 422):
            raise ConfigError(f"idempotency: mismatch_status must be 409 or 422, got {mismatch_status}")
        self._mismatch_status = mismatch_status
        if not re.fullmatch(r"[A-Za-z0-9-]+", replay_header):
            raise ConfigError(f"idempotency: bad replay_header {replay_header!r}")
        self._replayed = (replay_header, "true")
        extra_drop = {h.strip().lower() for h in drop_headers} | {replay_header.lower()}
        request_ids = [h.strip() for h in request_id_headers]
        if not all(re.fullmatch(r"[A-Za-z0-9-]+", h) for h in request_ids):
            raise ConfigError(f"idempotency: bad header name in request_id_headers: {request_ids!r}")
        self._request_ids = frozenset(h.lower() for h in request_ids)
        if len(key_prefix) > 100 or not re.fullmatch(r"[\x21-\x7e]*", key_prefix):
            raise ConfigError("idempotency: key_prefix must be at most 100 visible ASCII characters")
        self._key_prefix = key_prefix
        self._profile = check_profile(error_profile) if error_profile else None
        self._keeping = Keeping(
            max_response=self._max_response,
            retention=float(retention),
            drop=records.DROPPED_HEADERS | extra_drop,
            replayed=self._replayed,
            release=release,
            store_5xx=bool(store_5xx),
            profile=self._profile,
        )
        self._probe_store()

    app = WrappedApp()  # the wrapped WSGI app (may be replaced)
    _call_app: WSGIApplication  # what calls it, bound by WrappedApp

    _app = app  # the name before ``app``, kept

    def __repr__(self) -> str:
        return f"<IdempotencyMiddleware store={self.store.name} methods={sorted(self._methods)}>"

    @property
    def store(self) -> Store:
        """The replay store (may be replaced; with ``metrics``, its calls are timed)."""
        return self._store

    @store.setter
    def store(self, store: Store) -> None:
        self._store = store
        #: what the middleware calls: the store, or the store timed for ``metrics``
        self._calls: Store = store if self.metrics is None else MeteredStore(store, self.metrics)

    def _report(self, outcome: str) -> None:
        if self.metrics is not None:
            self.metrics.idempotency(outcome)

    def _probe_store(self) -> None:
        """One quick, bounded look at a network store at startup: a warning if it cannot be reached.

        The middleware keeps running either way (the store may come up later); meanwhile
        requests with a token get 503 (fail_closed) or run unprotected (fail_open).
        """
        ping = getattr(self.store, "ping", None)
        if not callable(ping):
            return
        try:
            ping()
        except StoreError as exc:
            reason = str(exc)
        except Exception as exc:  # noqa: BLE001 - a custom store's probe must not stop the service
            reason = type(exc).__name__  # its text might quote a URL with a password
        else:
            item_max = getattr(self.store, "item_size_max", None)
            if isinstance(item_max, int) and self._max_response + 512 > item_max:
                LOG.warning(
                    "idempotency: the store %s takes items of at most %d bytes, below max_response_bytes "
                    "(%d): larger answers are sent with Idempotency-Status: not-stored and not replayed",
                    self.store.name, item_max, self._max_response,
                )  # fmt: skip
            return
        LOG.warning(
            "idempotency: the store %s cannot be reached at startup (%s); until it can, requests with "
            "a token %s", mask_url(self.store.name), reason,
            "run unprotected (on_store_error = fail_open)" if self._fail_open
            else "get 503 idempotency.store-unavailable (on_store_error = fail_closed)",
        )  # fmt: skip

    def close(self) -> None:
        """Close the store's connections (call at shutdown; the middleware reconnects if used again)."""
        if self._renewer is not None:
            self._renewer.stop()
        self.store.close()

    # -- the hot path ------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        # upper: Flask and pecan route ``post`` as POST, and some servers pass it as sent
        if environ.get("REQUEST_METHOD", "").upper() not in self._methods:
            return self._call_app(environ, start_response)
        client_token = environ.get(ENVIRON_CLIENT_TOKEN)
        key_header = environ.get(ENVIRON_IDEMPOTENCY_KEY) if self._accept_key else None
        if client_token is None and key_header is None:
            if self._require_token:
                return self._send(start_response, self.token_required(environ))
            return self._call_app(environ, start_response)
        return self._protected(environ, start_response, client_token, key_header)

    def token_required(self, environ: WSGIEnvironment) -> Answer:
        """The 400 of a protected method without a token (``require_token``)."""
        return self._problem_answer(environ, 400, "idempotency.token-required",
                                    "This request needs an X-Client-Token header.")  # fmt: skip

    # -- protected requests -------------------------------------------------------------------

    @staticmethod
    def _send(start_response: StartResponse, answer: Answer) -> list[bytes]:
        start_response(answer.status, answer.headers)
        return [answer.body] if answer.body else []

    def _problem_answer(
        self,
        environ: WSGIEnvironment,
        status: int,
        code: str,
        detail: str,
        headers: Sequence[tuple[str, str]] = (),
        extra: dict[str, Any] | None = None,
    ) -> Answer:
        return self._render(environ, HTTPProblem(status, code, detail, headers=headers, extra=extra))

    def _render(self, environ: WSGIEnvironment, problem: HTTPProblem) -> Answer:
        self._report(problem_outcome(problem.code))
        status, headers, body = problem_answer(
            environ, problem, method=environ.get("REQUEST_METHOD"), profile=self._profile
        )
        return Answer(ANSWER, status, headers, body)

    def _protected(
        self,
        environ: WSGIEnvironment,
        start_response: StartResponse,
        client_token: str | None,
        key_header: str | None,
    ) -> Iterable[bytes]:
        found = run_ops(
            self.protect(environ, client_token, key_header),
            self._calls,
            lambda: read_body(environ, self._max_request),
        )
        if found.kind == ANSWER:
            return self._send(start_response, found)
        if found.kind == UNPROTECTED:
            marker = (UNPROTECTED_HEADER, "unprotected")
            started = False

            def marked_start_response(
                status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
            ) -> Callable[[bytes], object]:
                nonlocal started
                if started:  # replacing: exc_info as PEP 3333 says (the caller re-raises if sent)
                    return start_response(status, [*headers, marker], exc_info)
                started = True  # nothing to replace: webob's get_response would re-raise exc_info
                return start_response(status, [*headers, marker])

            return self._app(environ, marked_start_response)
        assert found.claim is not None and found.token is not None  # noqa: S101 - CLAIMED
        exchange = Exchange(self._app, self._calls, self._renewer, self._keeping, environ, start_response,
                            found.claim, found.token)  # fmt: skip
        try:
            return exchange.run()
        finally:
            self.exchanged(environ, exchange)

    def exchanged(self, environ: WSGIEnvironment, exchange: Exchange) -> None:
        """The claimed request's answer went out (or failed): tell ``metrics``, flag a replay."""
        self._report("replayed" if exchange.replayed else "claimed")
        if exchange.replayed:  # the database guard answered: the store had lost the token
            environ[ENVIRON_REPLAYED] = True

    def protect(
        self,
        environ: WSGIEnvironment,
        client_token: str | None,
        key_header: str | None,
        header_keys: Iterable[str] | None = None,
    ) -> Ops[Answer]:
        """A request with a token, up to the app: the answer to send (a problem, a replay), or
        the claim the app runs under, or ``UNPROTECTED`` (the store is down, ``fail_open``).

        Sans-IO: it yields the store calls (:data:`~apimw._idempotency_capture.Op`) and
        ``("body",)`` for the request body (:func:`~apimw._idempotency_body.read_body`'s
        answer); the WSGI middleware runs it with :func:`run_ops`, ``apimw.asgi`` awaits it.
        *environ* is the WSGI environ, or the ASGI scope with the CGI keys; *header_keys*, when
        given, are its keys that may hold request headers (the fingerprint's look at fewer keys).
        """
        try:
            token = identity.resolve_token(client_token, key_header)
        except identity.TokenError as exc:
            return self._problem_answer(environ, 400, exc.code, exc.detail)
        assert token is not None  # noqa: S101 - one of the headers is present
        scope = self._scope_fn(environ)
        if not scope:
            if not self._missing_shared:
                return self._problem_answer(
                    environ, 400, "idempotency.scope-missing",
                    "X-Client-Token needs an authenticated project (X-Project-Id) and none was found on "
                    "this request: the idempotency middleware must come after the auth middleware "
                    "(keystonemiddleware auth_token) in the pipeline; a deployment without auth sets "
                    "scope = shared (or missing_scope = shared) in the idempotency options.",
                )  # fmt: skip
            scope = SHARED_SCOPE
        body = yield ("body",)
        if isinstance(body, HTTPProblem):
            return self._render(environ, body)
        fp = identity.fingerprint(
            method=environ["REQUEST_METHOD"],
            path=environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", ""),
            query=environ.get("QUERY_STRING", ""),
            content_type=environ.get("CONTENT_TYPE"),
            versions=self._version_headers(environ, environ if header_keys is None else header_keys),
            body=body,
        )
        if self._warn_multiprocess and environ.get("wsgi.multiprocess"):
            self._warn_multiprocess = False
            LOG.warning(
                "idempotency: the %s store lives in one process but this server runs several: "
                "workers do not see each other's tokens; use redis:// or memcached://", self.store.name,
            )  # fmt: skip
        handed = environ[ENVIRON_TOKEN] = ClientToken(
            scope, token, fp, project_scope(environ), mismatch_status=self._mismatch_status
        )
        key = identity.store_key(self._key_prefix, scope, token)
        owner = records.owner_id()
        pending = records.encode_pending(owner, fp, scope, time.time())
        try:
            current = yield from self._claim(key, pending)
        except StoreError as exc:
            return self._store_down(environ, key, exc)
        if current is None:
            environ[ENVIRON_STATUS] = "claimed"
            environ[ENVIRON_REPLAYED] = False
            return Answer(CLAIMED, claim=Claim(key, pending[:PREFIX_LEN], owner, fp, scope), token=handed)
        return self._answer_existing(environ, current, fp, scope)

    def _version_headers(self, environ: WSGIEnvironment, keys: Iterable[str]) -> list[tuple[str, str]]:
        # one pass over the keys; the order does not matter (the fingerprint sorts them)
        found = []
        starts, exact, match = self._fp_starts, self._fp_exact, self._fp_match
        for k in keys:
            if k.startswith(starts) and (k in exact or match(k)):
                found.append((k, str(environ[k]).strip()))
        served = environ.get(ENVIRON_VERSION)
        if served is not None:
            found.append((ENVIRON_VERSION, str(served)))
        return found

    def _claim(self, key: str, pending: bytes) -> Ops[bytes | None]:
        """``None`` if this request owns the key now, else the record there."""
        for _ in range(3):
            current = yield ("claim", key, pending, self._lease)
            # our own record: a retried claim whose first reply was lost
            if current is None or current[:PREFIX_LEN] == pending[:PREFIX_LEN]:
                return None
            if current:
                return current  # type: ignore[no-any-return]
            # vanished between the failed claim and the read: claim again (bounded)
        return b""

    def _store_down(self, environ: WSGIEnvironment, key: str, exc: StoreError) -> Answer:
        LOG.warning("idempotency store %s unavailable (key %s...): %s", self.store.name, key[-64:][:12], exc)
        if self._fail_open:
            self._report("unprotected")
            environ[ENVIRON_STATUS] = "unprotected"
            return _UNPROTECTED
        return self._problem_answer(
            environ, 503, "idempotency.store-unavailable",
            "The idempotency store is unavailable; the request was not run. Retry later.",
            headers=[self._retry_after],
        )  # fmt: skip

    def _answer_existing(self, environ: WSGIEnvironment, current: bytes, fp: str, scope: str) -> Answer:
        verdict, record = records.judge(current, fp, scope)
        if verdict == records.IN_FLIGHT:
            return self._problem_answer(
                environ, 409, "idempotency.in-flight",
                "A request with this X-Client-Token is in progress; retry later.",
                headers=[self._retry_after],
            )  # fmt: skip
        if verdict == records.UNREADABLE:
            LOG.error("idempotency store %s holds an unreadable record", self.store.name)
            return self._problem_answer(
                environ, 409, "idempotency.record-unreadable",
                "The stored record for this X-Client-Token cannot be read; use a new token.",
            )  # fmt: skip
        if verdict == records.MISMATCH:
            return self._problem_answer(
                environ, self._mismatch_status, "idempotency.fingerprint-mismatch",
                "This X-Client-Token was already used for a different request "
                "(method, path, query, body or microversion differ).",
            )  # fmt: skip
        assert record is not None  # noqa: S101 - a tombstone or a replay
        if verdict == records.TOMBSTONED:
            headers = [("Location", record.location)] if record.location else []
            return self._problem_answer(
                environ, 409, "idempotency.replay-unavailable",
                "The request with this X-Client-Token was run, but its answer was too large or "
                "streamed and was not stored; see Location for the resource.",
                headers=headers,
                extra={"original_status": int(record.status[:3]) if record.status[:3].isdigit() else None,
                       "location": record.location},
            )  # fmt: skip
        self._report("replayed")
        environ[ENVIRON_REPLAYED] = True
        headers = records.with_request_id(record.headers, self._request_ids, lambda: _request_id(environ))
        headers += [("Content-Length", str(len(record.body))), self._replayed]
        body = b"" if environ.get("REQUEST_METHOD") == "HEAD" else record.body
        return Answer(ANSWER, record.status, headers, body)


# -- configuration --------------------------------------------------------------------------

filter_factory, wrap_flask, list_opts, oslo_hook, __getattr__ = integration(
    IdempotencyMiddleware, OPTIONS, GROUP
)


def ironic_hook(app: WSGIApplication) -> WSGIApplication:
    """``apimw_idempotency`` for OpenStack Ironic's ``[api] middleware`` hook (docs/adopting.md).

    Ironic applies that hook outside its own authentication, so a replay would be answered
    before auth runs, and a ``project`` or ``user`` scope would trust an ``X-Project-Id`` that
    any caller can send.  This builds the middleware like :func:`oslo_hook` only where that is
    safe: Ironic without authentication (``[DEFAULT] auth_strategy = noauth``) and
    ``scope = shared``; anything else is a :class:`ConfigError` when Ironic builds its API.
    """
    conf = oslo_config().CONF
    try:
        strategy = conf.auth_strategy
    except AttributeError:  # oslo.config's NoSuchOptError: not Ironic's configuration
        raise ConfigError(
            f"oslo.config [{GROUP}]: the host has no [DEFAULT] auth_strategy, so whether its hook runs "
            "before authentication cannot be told; apimw_idempotency is Ironic's (auth_strategy = noauth)"
        ) from None
    if strategy != "noauth":
        raise ConfigError(
            f"oslo.config [{GROUP}]: Ironic's [api] middleware runs before its authentication, so with "
            f"auth_strategy = {strategy} a replay would be answered to unauthenticated callers; leave "
            "apimw_idempotency out of the hook (docs/adopting.md)"
        )
    built = oslo_hook(app)
    if not isinstance(built, IdempotencyMiddleware) or built._scope_fn is not shared_scope:
        scope = conf[GROUP].scope
        close = getattr(built, "close", None)
        if close is not None:
            close()
        raise ConfigError(
            f"oslo.config [{GROUP}]: scope = {scope} trusts X-Project-Id / X-User-Id headers that, before "
            "Ironic's authentication, any caller can send; set scope = shared (noauth: one tenant)"
        )
    return built


#: What the middleware stores replays in (Redis, memcached, in-process memory): the object
#: :func:`open_replay_store` returns (``get``, ``claim``, ``complete``, ``release``,
#: ``extend``, ``close``).
ReplayStore = Store

#: The key :func:`check_replay_store` reads (never written by the middleware).
PROBE_KEY: Final = "apimw:healthcheck:probe"


def open_replay_store(url: str, *, timeout: float = 0.5) -> ReplayStore:
    """The replay store of *url* (``memory://``, ``redis://host:6379/0``, ``memcached://...``).

    The same stores the middleware's ``store`` option opens; *timeout* is the socket
    timeout unless the URL sets its own.  No connection is made here.  Raises
    :class:`~apimw.errors.ConfigError` for an unknown scheme or a malformed URL.
    Close it with ``store.close()``.
    """
    return open_store(url, timeout=timeout)


def check_replay_store(store: ReplayStore) -> None:
    """One read of a probe key: returns when the store answers, raises its error when not
    (for health checks: a :class:`~apimw.errors.StoreError` or the client's connection error)."""
    store.get(PROBE_KEY)
