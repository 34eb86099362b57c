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
  ``ETag`` response header, and fails closed: a write that carried If-Match does not get a
  2xx unless the app acknowledged that its data layer enforced the condition.

The code lives in private sibling modules, one concern each: ``_canonical_json`` (the
bytes hashed, with the optional orjson fast path), ``_etag_digest`` (:class:`ETagGenerator`),
``_etag_conditions`` (the wire form and the If-Match/If-None-Match parsers) and
``_etag_middleware`` (the middleware, its environ keys, helpers and options); the public
names are re-exported here.

The app-facing contract (environ keys, helpers) is documented in ``docs/etag.md``.
"""

from __future__ import annotations

from typing import Any

from apimw._canonical_json import (
    CODE_CANONICALIZATION,
    CODE_UNSUPPORTED_TYPE,
    CanonicalizationError,
    canonical_json,
)
from apimw._etag_conditions import (
    IfMatch,
    IfNoneMatch,
    format_etag,
    parse_if_match,
    parse_if_none_match,
    precondition_failed,
    split_etag,
)
from apimw._etag_digest import (
    DEFAULT_IGNORED_FIELDS,
    ETagGenerator,
)
from apimw._etag_middleware import (
    ENVIRON_ENABLED,
    ENVIRON_ENFORCED,
    ENVIRON_GENERATOR,
    ENVIRON_IF_MATCH,
    ENVIRON_IF_NONE_MATCH,
    ENVIRON_RESPONSE_ETAG,
    GROUP,
    OPTIONS,
    ETagMiddleware,
    etags_enabled,
    filter_factory,
    generator_from_environ,
    list_opts,
    mark_enforced,
    oslo_hook,
    set_response_etag,
    wrap_flask,
)

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
    "GROUP",
    "OPTIONS",
    "CanonicalizationError",
    "ETagGenerator",
    "ETagMiddleware",
    "IfMatch",
    "IfNoneMatch",
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


def __getattr__(name: str) -> Any:
    # ``OPTS``: the oslo.config options, built on first use so oslo.config stays optional.
    if name == "OPTS":
        return list_opts()[0][1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
