"""The etag middleware's options: their converters (paste, oslo.config strings), their table
(:data:`OPTIONS`) and their documentation (:data:`OPTION_DOCS`, the ``:param`` lines both
middlewares' docstrings end with, so ``help()`` shows every option on either door)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from apimw._config import Option, as_bool, as_int, as_list, as_optional_str, as_str, import_named, option_docs
from apimw._etag_digest import DEFAULT_IGNORED_FIELDS
from apimw.errors import ConfigError
from apimw.metrics import as_metrics

GROUP: Final = "apimw_etag"
DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024

#: The compatibility profiles (the ``compat`` option): the wire behaviour each sets.
#: ``rfc9110`` (the default) is RFC 9110's; ``ironic`` is what Ironic's etag spec and its
#: clients expect: unquoted ``W/<hex>`` tolerated in If-Match, an ``ETag`` on a 2xx PUT, and
#: no If-None-Match / If-Unmodified-Since on writes nor 304 on reads (Ironic supports neither).
COMPAT_PROFILES: Final[Mapping[str, Mapping[str, bool]]] = {
    "rfc9110": {
        "accept_unquoted": False,
        "etag_on_put": False,
        "not_modified": True,
        "if_none_match_on_writes": True,
        "if_unmodified_since_on_writes": True,
    },
    "ironic": {
        "accept_unquoted": True,
        "etag_on_put": True,
        "not_modified": False,
        "if_none_match_on_writes": False,
        "if_unmodified_since_on_writes": False,
    },
}
#: The switches a profile sets; each one given alone overrides its profile's value.
COMPAT_SWITCHES: Final = tuple(COMPAT_PROFILES["rfc9110"])


def as_compat(value: str) -> str:
    """A compatibility profile's name (``rfc9110`` or ``ironic``)."""
    name = str(value).strip().lower()
    if name not in COMPAT_PROFILES:
        raise ConfigError(f"compat must be one of {', '.join(COMPAT_PROFILES)}; got {value!r}")
    return name


def compat_switches(compat: str, overrides: Mapping[str, bool | str | None]) -> dict[str, bool]:
    """The switches of profile *compat*, each overridden where *overrides* gives it (not ``None``)."""
    switches = dict(COMPAT_PROFILES[as_compat(compat)])
    for name, value in overrides.items():
        if value is not None:
            switches[name] = as_bool(value)
    return switches


def as_callable(value: str | Callable[..., Any] | None) -> Callable[..., Any] | None:
    """A callable, or the ``package.module:function`` that names one (paste, oslo.config)."""
    if value is None or callable(value):
        return value
    text = str(value).strip()
    if not text:
        return None
    obj = import_named(text, option="etag")
    if not callable(obj):
        raise ConfigError(f"{text!r} is not callable")
    return obj  # type: ignore[no-any-return]


def as_enforces(value: str | Iterable[str] | Callable[..., Any]) -> list[str] | Callable[..., Any]:
    """Policy entries, or one ``module:function`` (``f(request) -> bool``) or a callable."""
    if callable(value):
        return value
    entries = as_list(value)
    if len(entries) == 1 and ":" in entries[0] and " " not in entries[0]:
        return as_callable(entries[0])  # type: ignore[return-value]  # not None: non-empty
    return entries


def as_ignored(value: str | Iterable[str] | Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    if isinstance(value, Mapping):
        return {str(k): frozenset(as_list(v)) for k, v in value.items()}
    table: dict[str, set[str]] = {}
    for entry in as_list(value):
        rtype, sep, field = entry.partition(":")
        if not sep or not rtype.strip() or not field.strip():
            raise ConfigError(f"ignored_fields entries are 'type:field', got {entry!r}")
        table.setdefault(rtype.strip(), set()).add(field.strip())
    return {k: frozenset(v) for k, v in table.items()}


def as_positive_int(value: str | int) -> int:
    number = as_int(value)
    if number < 1:
        raise ConfigError(f"expected a positive number of bytes, got {value!r}")
    return number


DEFAULT_IGNORED_LIST: Final = [
    f"{rtype}:{field}" for rtype, fields in DEFAULT_IGNORED_FIELDS.items() for field in sorted(fields)
]

OPTIONS: Final = (
    Option("min_version", as_optional_str, None,
           "The microversion from which etags are served (the ETag header, preconditions); a "
           "precondition on a write below it is 406, an If-Match on GET/HEAD too. Unset: always on "
           "(no microversion middleware needed)."),
    Option("methods", as_list, ["PUT", "PATCH", "DELETE"],
           "Write methods whose preconditions are handed to the app or refused; add POST for "
           "conditional actions (otherwise a precondition on a POST is refused, 400).", "list"),
    Option("require_if_match", as_list, [],
           "428 policy: entries 'METHOD' or 'METHOD /path/prefix' ('*' for every write method) "
           "where a write must be conditional (carry If-Match).", "list"),
    Option("enforces", as_enforces, [],
           "Where the app enforces the write's precondition in its data layer and acknowledges "
           "with mark_enforced(): policy entries as above, or a callable or 'module:function' "
           "f(request) -> bool (request: the environ or the ASGI scope). A precondition on any "
           "other write is refused (400) before the app runs. Empty: nowhere.", "list"),
    Option("compat", as_compat, "rfc9110",
           "Compatibility profile. rfc9110: RFC 9110's preconditions (304 on GET/HEAD for "
           "If-None-Match / If-Modified-Since; If-None-Match and If-Unmodified-Since on writes "
           "handed to the app where it enforces; no ETag on a PUT answer, section 9.3.4; If-Match "
           "quoted). ironic: Ironic's etag spec and its clients (unquoted W/<hex> tolerated in "
           "If-Match; ETag on a 2xx PUT; If-None-Match and If-Unmodified-Since on writes refused, "
           "400; no 304, a 200). The five options marked 'override of compat' change one of these "
           "alone."),
    Option("strict_rfc9110", as_bool, False,
           "Strong If-Match comparison as RFC 9110 section 13.1.1 says (then emit strong etags). "
           "Off: weak comparison, the Ironic spec's weak etags.", "bool"),
    Option("accept_unquoted", as_bool, None,
           "Override of compat: tolerate the Ironic spec's unquoted W/<hex> and bare <hex> in "
           "If-Match. Unset: the profile's (ironic: on).", "bool"),
    Option("ignore_suffixes", as_list, [],
           "Suffixes proxies append to etags (-gzip) that If-Match may carry.", "list"),
    Option("not_modified", as_bool, None,
           "Override of compat: answer If-None-Match (weak match) and If-Modified-Since on GET/HEAD "
           "with 304 (off: a 200). Unset: the profile's (rfc9110: on).", "bool"),
    Option("if_none_match_on_writes", as_bool, None,
           "Override of compat: hand If-None-Match on writes to the app where it enforces "
           "(If-None-Match: * on a PUT creates only) as apimw.etag.if_none_match (off: 400 "
           "etag.if-none-match-unsupported). Unset: the profile's (rfc9110: on).", "bool"),
    Option("if_unmodified_since_on_writes", as_bool, None,
           "Override of compat: hand If-Unmodified-Since on writes without If-Match to the app "
           "where it enforces, as apimw.etag.if_unmodified_since (off: 400 "
           "etag.if-unmodified-since-unsupported). Unset: the profile's (rfc9110: on).", "bool"),
    Option("etag_on_put", as_bool, None,
           "Override of compat: send ETag on a 2xx PUT (an RFC 9110 section 9.3.4 deviation, see "
           "docs/etag.md). Unset: the profile's (ironic: on).", "bool"),
    Option("etag_from_body", as_bool, True,
           "Take the ETag header from the top-level 'etag' field of an application/json (or +json) "
           "answer when the app did not set apimw.etag.response.", "bool"),
    Option("max_body_bytes", as_positive_int, DEFAULT_MAX_BODY_BYTES,
           "The most of a JSON answer held to read its etag; a longer answer is streamed on "
           "without an ETag (metrics: streamed-without-etag).", "int"),
    Option("current_etag", as_callable, None,
           "f(request) -> etag or None (or 'module:function'): a cheap lookup for the 412 "
           "pre-check before the app runs (None: missing or not visible, the app answers).",
           oslo=False),
    Option("hmac_key", as_optional_str, None,
           "Deployment secret (>= 16 bytes) of the HMAC-SHA-512 ETagGenerator offered to the app "
           "as apimw.etag.generator.", secret=True),
    Option("algorithm", as_str, "hmac-sha512", "Etag digest: hmac-sha512 or sha512."),
    Option("ignored_fields", as_ignored, DEFAULT_IGNORED_LIST,
           "Fields left out of the etag: {'node': [...]} or 'type:field' entries. The default is "
           "the Ironic spec's table.", "list"),
    Option("error_profile", as_optional_str, None,
           "Error body profile, ironic or api-sig. Unset: the outer middleware's, else api-sig."),
    Option("metrics", as_metrics, None,
           "An apimw.metrics.Metrics object (or 'package.module:attribute' naming one, e.g. "
           "apimw.metrics_prometheus:METRICS) told each answer the middleware gives (304, 412, "
           "428, 400...).", oslo=False),
)  # fmt: skip

OPTION_DOCS: Final = option_docs(OPTIONS, GROUP)
