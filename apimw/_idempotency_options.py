"""The idempotency middleware's options: their converters, their table (:data:`OPTIONS`, read by
paste.deploy, oslo.config and Flask) and their documentation (:data:`OPTION_DOCS`, which both
middlewares' docstrings end with, so ``help()`` shows every option on either door)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from apimw._config import Option, as_bool, as_float, as_int, as_list, as_optional_str, as_str, option_docs
from apimw._idempotency_rules import (
    DEFAULT_FINGERPRINT_HEADERS,
    DEFAULT_RELEASE_STATUSES,
    DEFAULT_REQUEST_ID_HEADERS,
    REPLAYED_HEADER,
    as_status_list,
)
from apimw.errors import ConfigError
from apimw.metrics import as_metrics

GROUP: Final = "apimw_idempotency"


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
           "user (project and X-User-Id), shared (one scope, no-auth deployments), or module:function. "
           "A project or user header holding a comma (two lines, or a list) is a 400."),
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
    Option("release_statuses", as_status_list, list(DEFAULT_RELEASE_STATUSES),
           "Transient statuses that release the claim so a retry runs again.", kind="list"),
    Option("on_store_error", _choice("fail_closed", "fail_open"), "fail_closed",
           "Store unreachable: fail_closed answers 503; fail_open runs the app unprotected."),
    Option("retry_after", as_int, 1, "Retry-After seconds on 409 in-flight and 503.", kind="int"),
    Option("mismatch_status", as_int, 409,
           "Status for a reused token with a different request: 409 (OpenStack) or 422 (IETF draft).",
           kind="int"),
    Option("replay_header", as_str, REPLAYED_HEADER,
           "Header added (value true) to a replayed answer."),
    Option("replay_user_headers", as_bool, False,
           "Replay the per-user response headers too (X-Auth-Token, X-Subject-Token, Authentication-Info, "
           "Set-Cookie, WWW-Authenticate): off, a replay may reach another user of the project.",
           kind="bool"),
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


OPTION_DOCS: Final = option_docs(OPTIONS, GROUP)
