"""The etag middleware's options: their converters (paste, oslo.config strings), their table
(:data:`OPTIONS`) and their documentation (:data:`OPTION_DOCS`, the ``:param`` lines both
middlewares' docstrings end with, so ``help()`` shows every option on either door)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from apimw._config import Option, as_bool, as_int, as_list, as_optional_str, as_str
from apimw._etag_digest import DEFAULT_IGNORED_FIELDS
from apimw.errors import ConfigError
from apimw.metrics import as_metrics

DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024


def as_callable(value: str | Callable[..., Any] | None) -> Callable[..., Any] | None:
    """A callable, or the ``package.module:function`` that names one (paste, oslo.config)."""
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
        return {str(k): frozenset(v) for k, v in value.items()}
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
           "Microversion from which etags are served (ETag header, preconditions); a precondition "
           "on a write below it -> 406. Unset: always on."),
    Option("methods", as_list, ["PUT", "PATCH", "DELETE"],
           "Write methods whose If-Match is parsed and enforced (add POST for conditional actions).",
           "list"),
    Option("require_if_match", as_list, [],
           "428 policy: entries 'METHOD' or 'METHOD /path/prefix' ('*' for every write method) "
           "that must be conditional (carry If-Match).", "list"),
    Option("enforces", as_enforces, [],
           "Where the app enforces the write's precondition itself and marks it (mark_enforced): "
           "entries 'METHOD' or 'METHOD /path/prefix' ('*' for every write method), or one "
           "'module:function' f(request) -> bool. A precondition on any other write is refused "
           "(400) before the app runs.", "list"),
    Option("strict_rfc9110", as_bool, False,
           "Strong If-Match comparison as RFC 9110 13.1.1 says (then emit strong etags).", "bool"),
    Option("accept_unquoted", as_bool, False,
           "Tolerate the Ironic spec's unquoted W/<hex> and bare <hex> in If-Match.", "bool"),
    Option("ignore_suffixes", as_list, [],
           "Suffixes proxies append to etags (e.g. -gzip) that If-Match may carry.", "list"),
    Option("not_modified", as_bool, False,
           "Answer If-None-Match (weak match) and If-Modified-Since on GET/HEAD with 304 (opt-in).",
           "bool"),
    Option("if_none_match_on_writes", as_bool, False,
           "Hand If-None-Match on writes to the app where it enforces (If-None-Match: * on a PUT: "
           "create only) instead of answering 400.", "bool"),
    Option("if_unmodified_since_on_writes", as_bool, False,
           "Hand If-Unmodified-Since on writes (without If-Match) to the app where it enforces, "
           "instead of answering 400.", "bool"),
    Option("etag_on_put", as_bool, True,
           "Send ETag on 2xx PUT responses (RFC 9110 9.3.4 deviation, see docs).", "bool"),
    Option("etag_from_body", as_bool, True,
           "Take the ETag header from the top-level 'etag' field of an application/json (or "
           "+json) response body when the app did not set apimw.etag.response.", "bool"),
    Option("max_body_bytes", as_positive_int, DEFAULT_MAX_BODY_BYTES,
           "The most of a JSON answer held to read its etag; a longer answer is streamed on "
           "without an ETag (metrics: streamed-without-etag).", "int"),
    Option("current_etag", as_callable, None,
           "'module:function' called as f(request) -> current etag or None, for the 412 pre-check.",
           oslo=False),
    Option("hmac_key", as_optional_str, None,
           "Deployment secret for HMAC-SHA-512 etags (>= 16 bytes); offered to the app as "
           "apimw.etag.generator.", secret=True),
    Option("algorithm", as_str, "hmac-sha512", "Etag digest: hmac-sha512 or sha512."),
    Option("ignored_fields", as_ignored, DEFAULT_IGNORED_LIST,
           "Fields left out of the etag, as 'type:field' entries.", "list"),
    Option("error_profile", as_optional_str, None,
           "Error body profile (ironic or api-sig); default: the outer middleware's, else api-sig."),
    Option("metrics", as_metrics, None,
           "'package.module:attribute' naming an apimw.metrics.Metrics object told each answer the "
           "middleware gives (304, 412, 428, 400...) (e.g. apimw.metrics_prometheus:METRICS).", oslo=False),
)  # fmt: skip


#: The ``:param`` lines of every option, appended to both middlewares' docstrings.
OPTION_DOCS: Final = """
    :param min_version: microversion from which etags are served (the ``ETag`` header,
        preconditions); a precondition on a write below it is 406, an If-Match on GET/HEAD
        too.  Default ``None``: always on (no microversion middleware needed).
    :param methods: write methods whose preconditions are handed to the app or refused.
        Default ``("PUT", "PATCH", "DELETE")``; add ``"POST"`` for conditional actions
        (otherwise a precondition on a POST is refused, 400).
    :param require_if_match: 428 policy: entries ``"METHOD"`` or ``"METHOD /path/prefix"``
        (``"*"`` for every write method) where a write must be conditional.  Default ``()``.
    :param enforces: where the app enforces the write's precondition in its data layer and
        acknowledges with :func:`mark_enforced`: policy entries as above, or a callable /
        ``"module:function"`` ``f(request) -> bool`` (*request*: the environ or the ASGI
        scope).  A precondition on any other write is refused (400) before the app runs.
        Default ``()``: nowhere.
    :param strict_rfc9110: strong If-Match comparison as RFC 9110 §13.1.1 says (then emit
        strong etags).  Default ``False``: weak comparison, the Ironic spec's weak etags.
    :param accept_unquoted: tolerate the Ironic spec's unquoted ``W/<hex>`` and bare
        ``<hex>`` in If-Match.  Default ``False``.
    :param ignore_suffixes: suffixes proxies append to etags (``-gzip``) that If-Match may
        carry.  Default ``()``.
    :param not_modified: answer If-None-Match (weak match) and If-Modified-Since on GET/HEAD
        with 304.  Default ``False`` (the Ironic spec supports no If-None-Match): a 200.
    :param if_none_match_on_writes: hand If-None-Match on writes to the app where it enforces
        (``If-None-Match: *`` on a PUT creates only) as ``apimw.etag.if_none_match``.
        Default ``False``: 400 ``etag.if-none-match-unsupported``.
    :param if_unmodified_since_on_writes: hand If-Unmodified-Since on writes without
        If-Match to the app where it enforces, as ``apimw.etag.if_unmodified_since``.
        Default ``False``: 400 ``etag.if-unmodified-since-unsupported``.
    :param etag_on_put: send ``ETag`` on a 2xx PUT.  Default ``True``.
    :param etag_from_body: take the ``ETag`` from the top-level ``etag`` field of an
        ``application/json`` (or ``+json``) body when the app set no etag.  Default ``True``.
    :param max_body_bytes: the most of a JSON answer held to read its etag; a longer answer
        is streamed on without an ``ETag`` (``metrics.etag("streamed-without-etag")``).
        Default 1 MiB.
    :param current_etag: ``f(request) -> etag or None`` (or ``"module:function"``): a cheap
        lookup for the 412 pre-check before the app runs (``None``: missing or not visible,
        the app answers).  Default ``None``.
    :param hmac_key: deployment secret (>= 16 bytes) of the HMAC-SHA-512
        :class:`ETagGenerator` offered to the app as ``apimw.etag.generator``.  Default ``None``.
    :param algorithm: ``"hmac-sha512"`` (default) or ``"sha512"``.
    :param ignored_fields: fields left out of the etag: ``{"node": [...]}`` or
        ``"type:field"`` entries.  Default: the Ironic spec's table.
    :param error_profile: error body profile, ``"ironic"`` or ``"api-sig"``.  Default: the
        outer middleware's, else api-sig.
    :param metrics: an :class:`apimw.metrics.Metrics` (or ``"module:attribute"``) told each
        answer the middleware gives.  Default ``None``.
    """
