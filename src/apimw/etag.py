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

The app-facing contract (environ keys, helpers) is documented in ``docs/etag.md``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib
import json
import logging
import math
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from apimw._options import (
    Option,
    as_bool,
    as_list,
    as_optional_str,
    as_str,
    flask_wrap,
    make_filter_factory,
    oslo_opts,
)
from apimw._version import Version
from apimw.errors import (
    ApimwError,
    ConfigError,
    HTTPProblem,
    check_profile,
    respond_with_problem,
)
from apimw.microversion import ENVIRON_VERSION, VersionGate

if TYPE_CHECKING:
    from _hashlib import HASH as _Hash

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
    "parse_if_match",
    "parse_if_none_match",
    "precondition_failed",
    "set_response_etag",
    "split_etag",
    "wrap_flask",
]

LOG = logging.getLogger(__name__)

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

ETAG_HEADER: Final = "ETag"
IF_MATCH: Final = "HTTP_IF_MATCH"
IF_NONE_MATCH: Final = "HTTP_IF_NONE_MATCH"

#: The Ironic spec's ignored fields per resource type.
DEFAULT_IGNORED_FIELDS: Final[Mapping[str, frozenset[str]]] = {
    "node": frozenset({"driver_internal_info", "etag", "updated_at"}),
    "port": frozenset({"etag", "updated_at"}),
    "portgroup": frozenset({"etag", "updated_at"}),
    "chassis": frozenset({"etag", "updated_at"}),
}
_FALLBACK_IGNORED: Final = frozenset({"etag", "updated_at"})
ALGORITHMS: Final = ("hmac-sha512", "sha512")
MIN_KEY_BYTES: Final = 16


# == generation ==============================================================================


#: The stable code of a document that cannot be hashed because of what it holds.
CODE_CANONICALIZATION: Final = "etag.canonicalization-failed"
#: The stable code of a document holding a Python type the canonical form does not know.
CODE_UNSUPPORTED_TYPE: Final = "etag.unsupported-type"


class CanonicalizationError(HTTPProblem):
    """A resource document cannot be hashed deterministically.

    An :class:`HTTPProblem`, so the middlewares (and the Flask and webob adapters) render
    it when the app lets it through.  Bad *content* -- NaN or Infinity, a string with a lone
    surrogate (JSON ``"\\ud800"`` parses to one), nesting too deep, keys that collide
    once made strings -- is the client's input: 400 ``etag.canonicalization-failed``.  A
    value of a type the canonical form does not know (or a non-string key) is the
    server's own doing: 500 ``etag.unsupported-type``.
    """

    def __init__(self, detail: str, *, status: int = 400, code: str = CODE_CANONICALIZATION) -> None:
        super().__init__(status, code, detail)


def _unsupported(detail: str) -> CanonicalizationError:
    return CanonicalizationError(detail, status=500, code=CODE_UNSUPPORTED_TYPE)


_UTC = _dt.UTC
_TIMESPECS: Final = ("seconds", "milliseconds", "microseconds")


def _datetime(value: _dt.datetime, timespec: str) -> str:
    # Naive datetimes are taken as UTC (what SQLAlchemy's DateTime gives back from SQLite
    # for a value saved as aware UTC), so the tag is the same before save and after reload.
    if type(value) is _dt.datetime:  # the same text as below, sooner (no replace() call)
        if value.tzinfo is None:
            return value.isoformat("T", timespec) + "Z"
        return value.astimezone(_UTC).isoformat("T", timespec)[:-6] + "Z"  # drop "+00:00"
    if value.tzinfo is not None:  # a subclass: its own astimezone/replace/isoformat
        value = value.astimezone(_UTC).replace(tzinfo=None)
    return value.isoformat(timespec=timespec) + "Z"


_LEAVES: Final = frozenset({str, int, bool, type(None)})


def _normalise(value: Any, timespec: str) -> Any:
    """Return *value* with every non-JSON-native leaf made canonical (unchanged if none)."""
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] | None = None
        for key, item in value.items():
            if type(key) is not str:
                if out is None:
                    out = dict(value)
                del out[key]
                new_key = _key(key)
                if new_key in out or (new_key != key and new_key in value):
                    raise CanonicalizationError(f"duplicate key {new_key!r} after converting keys to strings")
                key = new_key
                out[key] = item
            if type(item) in _LEAVES:
                continue
            new = _normalise(item, timespec)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if kind is list or kind is tuple:
        items: list[Any] | None = None if kind is list else list(value)
        for index, item in enumerate(value):
            if type(item) in _LEAVES:
                continue
            new = _normalise(item, timespec)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    if kind is float:
        if not math.isfinite(value):
            raise CanonicalizationError(
                f"cannot compute an etag over {value!r}: NaN and Infinity are not JSON numbers"
            )
        # 100.0 and 100 are the same JSON number (a jsonb round trip turns one into the other).
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
        return value
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if isinstance(value, _dt.datetime):
        return _datetime(value, timespec)
    if isinstance(value, _dt.date | _dt.time):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        members = [_normalise(item, timespec) for item in value]
        try:
            return sorted(members, key=_sort_key)
        except TypeError:
            raise CanonicalizationError("cannot sort a set of mixed types for an etag") from None
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise CanonicalizationError(f"cannot compute an etag over {value!r}")
        return _normalise(int(value) if value == value.to_integral_value() else float(value), timespec)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _normalise(float(value), timespec)
    if isinstance(value, Mapping):
        return _normalise(dict(value), timespec)
    if isinstance(value, list | tuple):
        return _normalise(list(value), timespec)
    raise _unsupported(f"cannot compute an etag over a value of type {kind.__name__}")


def _key(key: Any) -> str:
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))
    raise _unsupported(f"mapping keys must be strings, got {type(key).__name__}")


def _sort_key(item: Any) -> str:
    return json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_ENCODER: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def _stdlib_json(doc: Any, timespec: str) -> bytes:
    """The reference encoding: every value normalised in Python, then the stdlib encoder."""
    try:
        return _ENCODER.encode(_normalise(doc, timespec)).encode("utf-8")
    except RecursionError:
        raise CanonicalizationError("document nested too deeply for an etag") from None
    except UnicodeEncodeError:
        # A lone surrogate (U+D800..U+DFFF) is not text: UTF-8 cannot encode it, so there
        # are no canonical bytes to hash.  JSON's "\ud800" escape gives one to any client.
        where = _surrogate_path(doc)
        raise CanonicalizationError(
            "cannot compute an etag: "
            + (f"the {where[1]} at {where[0] or '/'}" if where else "a string")
            + " holds a lone surrogate (a \\uD800-\\uDFFF escape that is not part of a pair), "
            "which is not valid Unicode text"
        ) from None


def _surrogate_path(doc: Any, depth: int = 0) -> tuple[str, str] | None:
    """``(path, "string" | "key")`` of the first lone surrogate, the path shortened and ASCII."""
    if depth > 64:
        return None
    if isinstance(doc, str):
        return None if _encodable(doc) else ("", "string")
    items: Iterable[tuple[Any, Any]]
    if isinstance(doc, Mapping):
        items = doc.items()
    elif isinstance(doc, list | tuple | set | frozenset):
        items = enumerate(doc)
    else:
        return None
    for key, value in items:
        name = key if isinstance(key, str) else str(key)
        segment = "/" + (name if len(name) <= 40 else name[:40] + "...")
        if not _encodable(segment):
            return (ascii(segment)[1:-1][:200], "key")
        inner = _surrogate_path(value, depth + 1)
        if inner is not None:
            return ((segment + inner[0])[:200], inner[1])
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- the fast path: orjson, only where its bytes are provably the stdlib path's ----------------
#
# orjson (optional) encodes a document several times faster than the stdlib, but not always
# to the same bytes: floats are formatted differently (1e16 vs 1e+16) and integral floats
# are not made integers, NaN/Infinity become null instead of being refused, ints beyond 64
# bits and non-str keys raise, and Enums, dataclasses and str/int/dict/list subclasses are
# encoded natively.  So it only gets documents made of the exact types below, which it
# writes byte for byte as the stdlib path does (keys sorted by code point = UTF-8 byte
# order, the same control-character escapes, UTF-8 output, UUIDs as str(uuid)); datetimes,
# dates and times come back to _fast_default through OPT_PASSTHROUGH_DATETIME.  A document
# with floats gets a copy (of the containers on the way to a float) in which each float is
# what the stdlib path writes for it -- an integer if integral below 2**53, else
# float.__repr__ (the stdlib encoder's text) as an orjson.Fragment (orjson >= 3.9); NaN and
# Infinity leave the fast path to be refused there.  Anything else -- a set, a Decimal, a
# subclass, an int key -- and anything orjson refuses (big ints, non-str keys, lone
# surrogates, nesting deeper than 255) takes the stdlib path, which gives the same bytes or
# raises as before.  tests/test_etag_generate.py checks
# the two paths against each other on generated documents; _fast_agrees() re-checks a probe
# at import, so that an orjson release that changes its output only costs speed.
_FAST_LEAVES: Final[frozenset[type]] = frozenset(
    {str, int, bool, type(None), _dt.datetime, _dt.date, _dt.time, uuid.UUID}
)


def _fast_ok(container: Any, leaves: frozenset[type] = _FAST_LEAVES) -> bool:
    """True if every value under *container* (an exact dict, list or tuple) has a fast type."""
    for item in container.values() if type(container) is dict else container:
        if type(item) in leaves:
            continue
        kind = type(item)
        if kind is dict:
            children = item.values()
        elif kind is list or kind is tuple:
            children = item
        else:
            return False
        for child in children:  # one level inline: most containers hold only leaves
            if type(child) in leaves:
                continue
            kind = type(child)
            if (kind is dict or kind is list or kind is tuple) and _fast_ok(child):
                continue
            return False
    return True


_SLOW: Final = object()  # _with_fragments: only the stdlib path can tell


def _with_fragments(value: Any, leaves: frozenset[type] = _FAST_LEAVES) -> Any:
    """*value* with its floats written as the stdlib path writes them (copying only what
    changes), or _SLOW if it holds anything else that orjson cannot write alike."""
    kind = type(value)
    if kind is dict:
        out: dict[str, Any] | None = None
        for key, item in value.items():
            if type(item) in leaves:
                continue
            new = _with_fragments(item)
            if new is _SLOW:
                return _SLOW
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if kind is list or kind is tuple:
        items: list[Any] | None = None
        for index, item in enumerate(value):
            if type(item) in leaves:
                continue
            new = _with_fragments(item)
            if new is _SLOW:
                return _SLOW
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    if kind is float and _Fragment is not None and math.isfinite(value):
        if value.is_integer() and abs(value) < 2**53:  # as _normalise: 100.0 is 100
            return int(value)
        return _Fragment(float.__repr__(value))
    return _SLOW


def _fast_default(timespec: str) -> Callable[[Any], str]:
    def default(value: Any) -> str:
        if type(value) is _dt.datetime:
            return _datetime(value, timespec)
        if type(value) is _dt.date or type(value) is _dt.time:
            return value.isoformat()
        raise TypeError(type(value).__name__)  # not reached: _fast_ok let only these through

    return default


_fast_dumps: Callable[..., bytes] | None = None
_Fragment: Callable[[str], Any] | None = None  # orjson >= 3.9: JSON text written as is
_FAST_ERROR: type[Exception] = TypeError
_FAST_OPTION = 0
_FAST_DEFAULTS: Final = {timespec: _fast_default(timespec) for timespec in _TIMESPECS}
_FAST_CONTAINERS: Final = (dict, list, tuple)
try:
    import orjson
except ImportError:  # optional: the stdlib path gives the same bytes, more slowly
    pass
else:
    _fast_dumps = orjson.dumps
    _FAST_ERROR = orjson.JSONEncodeError
    _FAST_OPTION = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
    _Fragment = getattr(orjson, "Fragment", None)


def _fast_json(doc: Any, timespec: str) -> bytes | None:
    """The canonical bytes through orjson, or None where only the stdlib path can tell."""
    dumps = _fast_dumps
    default = _FAST_DEFAULTS.get(timespec)
    if dumps is None or default is None:
        return None
    kind = type(doc)
    try:
        if kind not in _FAST_LEAVES and not (kind in _FAST_CONTAINERS and _fast_ok(doc)):
            doc = _with_fragments(doc)
            if doc is _SLOW:
                return None
        return dumps(doc, default=default, option=_FAST_OPTION)
    except (_FAST_ERROR, RecursionError):
        return None


def canonical_json(doc: Any, *, timespec: str = "microseconds") -> bytes:
    """The canonical UTF-8 JSON of *doc*: the bytes an etag is computed over.

    Keys sorted at every depth, no whitespace, UTF-8 (not ``\\u`` escapes), datetimes as
    UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (naive ones taken as UTC), integral floats as
    integers, tuples as lists, sets as sorted lists, UUIDs and Decimals as their JSON
    values.  NaN, Infinity and unknown types raise :class:`CanonicalizationError`.
    The same bytes with or without orjson installed (it only makes this faster).
    """
    data = _fast_json(doc, timespec)
    return _stdlib_json(doc, timespec) if data is None else data


def _fast_agrees() -> bool:
    """Does the installed orjson still write this probe exactly as the stdlib path does?"""

    class Key(str):
        pass

    text = "".join(map(chr, range(0x80))) + "\x80\x9f\xa0é\u2028\u2029\ud7ff\ue000\ufeff\uffff\U0010ffff"
    keys = ["", "a", "B", "a\x00", "aa", "\x7f", "é", "\ue000", "\uffff", "\U00010000", "\U0010ffff", text]
    leaves: list[Any] = [
        None, True, False, 0, -1, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, text,
        _dt.datetime(2026, 5, 1, 12, 0, 0, 5), _dt.datetime(2026, 5, 1, 12, tzinfo=_UTC),
        _dt.datetime(2026, 5, 1, 14, tzinfo=_dt.timezone(_dt.timedelta(hours=2))),
        _dt.date(2026, 5, 1), _dt.time(12, 30, 1, 7), uuid.UUID(int=2**128 - 1),
    ]  # fmt: skip
    if _Fragment is not None:  # floats take the fast path too
        leaves += [0.1, -0.0, 100.0, 1e16, 2.0**53, 1.5e-7, 1e300, 5e-324, -1.7976931348623157e308]
    probe: dict[str, Any] = {key: [index, (index, {}), {"z": [], "y": ()}] for index, key in enumerate(keys)}
    probe["a"] = [leaves, tuple(leaves), dict(zip(reversed(keys), leaves, strict=False))]
    try:
        for timespec in _TIMESPECS:
            if _fast_json(probe, timespec) != _stdlib_json(probe, timespec):
                return False
    except Exception:  # noqa: BLE001 - any surprise disables the fast path, never the etags
        return False
    # str-subclass and int keys must be refused (the stdlib path checks them for duplicates)
    return _fast_json({Key("a"): 1}, "seconds") is None and _fast_json({1: 1}, "seconds") is None


if _fast_dumps is not None and not _fast_agrees():
    LOG.warning("orjson %s writes differently from the stdlib: etags use the stdlib", orjson.__version__)
    _fast_dumps = None


def format_etag(opaque: str, *, weak: bool = True) -> str:
    """``"ab12"`` -> ``'W/"ab12"'`` (the header and body form)."""
    return f'W/"{opaque}"' if weak else f'"{opaque}"'


def split_etag(value: str) -> tuple[bool, str]:
    """``'W/"ab"'`` -> ``(True, "ab")``, ``'"ab"'`` -> ``(False, "ab")``; a bare stored
    digest ``"ab"`` -> ``(False, "ab")`` (its weakness is the app's formatting choice)."""
    if value.startswith('W/"') and value.endswith('"') and len(value) >= 4:
        return True, value[3:-1]
    if value.startswith('"') and value.endswith('"') and len(value) >= 2:
        return False, value[1:-1]
    return False, value


_SHA512_BLOCK: Final = 128
_IPAD: Final = bytes(x ^ 0x36 for x in range(256))
_OPAD: Final = bytes(x ^ 0x5C for x in range(256))


def _hmac_pads(key: bytes) -> tuple[_Hash, _Hash]:
    """SHA-512 states after the inner and outer key pads (RFC 2104 §2), to copy per message."""
    if len(key) > _SHA512_BLOCK:
        key = hashlib.sha512(key).digest()
    key = key.ljust(_SHA512_BLOCK, b"\0")
    return hashlib.sha512(key.translate(_IPAD)), hashlib.sha512(key.translate(_OPAD))


class ETagGenerator:
    """Computes a resource's etag when the app saves it.

    :param key: the deployment secret for HMAC-SHA-512 (at least 16 bytes).  Keyed by
        default so that no reader can guess a masked secret (a BMC password in
        ``driver_info``) offline from the public etag; required unless
        ``algorithm="sha512"``.
    :param algorithm: ``"hmac-sha512"`` (default) or ``"sha512"`` (the spec's plain hash).
    :param ignored_fields: resource type -> top-level fields left out of the hash
        (defaults to the Ironic spec's table); types not listed ignore ``etag`` and
        ``updated_at``.
    :param weak: emit ``W/"..."`` (default, the spec) or strong ``"..."`` tags (only with
        the middleware's ``strict_rfc9110``).
    :param timespec: datetime precision hashed; use your datastore's (``"seconds"`` for
        MySQL ``DATETIME`` without fractional seconds).
    """

    __slots__ = ("_key", "_inner", "_outer", "_plain", "_ignored", "weak", "timespec", "algorithm")

    def __init__(
        self,
        *,
        key: bytes | str | None = None,
        algorithm: str = "hmac-sha512",
        ignored_fields: Mapping[str, Iterable[str]] = DEFAULT_IGNORED_FIELDS,
        weak: bool = True,
        timespec: str = "microseconds",
    ) -> None:
        if algorithm not in ALGORITHMS:
            raise ConfigError(f"etag algorithm must be one of {', '.join(ALGORITHMS)}; got {algorithm!r}")
        if timespec not in _TIMESPECS:
            raise ConfigError(f"etag timespec must be one of {', '.join(_TIMESPECS)}; got {timespec!r}")
        raw_key = key.encode("utf-8") if isinstance(key, str) else key
        if algorithm == "hmac-sha512" and (not raw_key or len(raw_key) < MIN_KEY_BYTES):
            raise ConfigError(
                f"etag algorithm hmac-sha512 needs a secret key of at least {MIN_KEY_BYTES} bytes "
                "(set hmac_key, or choose algorithm sha512 knowingly)"
            )
        self.algorithm = algorithm
        self._plain = algorithm == "sha512"
        self._key = raw_key or b""
        self._inner, self._outer = _hmac_pads(self._key)
        self._ignored = {name: frozenset(fields) for name, fields in ignored_fields.items()}
        self.weak = weak
        self.timespec = timespec

    def __repr__(self) -> str:  # never show the key
        return f"ETagGenerator(algorithm={self.algorithm!r}, weak={self.weak})"

    def __reduce__(self) -> tuple[Any, ...]:  # copy, deepcopy, pickle: rebuilt (hash objects don't pickle)
        options = {"key": self._key or None, "algorithm": self.algorithm, "ignored_fields": self._ignored}
        return (_generator, (options, self.weak, self.timespec))

    def ignored(self, resource_type: str | None) -> frozenset[str]:
        if resource_type is None:
            return _FALLBACK_IGNORED
        return self._ignored.get(resource_type, _FALLBACK_IGNORED)

    def digest(self, doc: Mapping[str, Any], resource_type: str | None = None) -> str:
        """The 128 hex digits for *doc* (store these, or the wire form from :meth:`etag`)."""
        ignored = self.ignored(resource_type)
        if type(doc) is dict and doc.keys().isdisjoint(ignored):
            fields: Any = doc  # nothing to drop: canonical_json never changes its argument
        else:
            fields = dict(doc)
            for name in ignored:
                fields.pop(name, None)
        data = _fast_json(fields, self.timespec)  # canonical_json(), one call less
        if data is None:
            data = _stdlib_json(fields, self.timespec)
        if self._plain:
            return hashlib.sha512(data).hexdigest()
        # HMAC-SHA-512 (RFC 2104) from the key pads hashed once in __init__: the same digest as
        # hmac.digest(key, data, "sha512"), without setting up the key on every call.
        inner = self._inner.copy()
        inner.update(data)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.hexdigest()

    def etag(self, doc: Mapping[str, Any], resource_type: str | None = None) -> str:
        """The wire form ``W/"<128 hex>"``: the ETag header and the body ``etag`` field."""
        digest = self.digest(doc, resource_type)
        return f'W/"{digest}"' if self.weak else f'"{digest}"'  # format_etag(), inline


def _generator(options: dict[str, Any], weak: bool, timespec: str) -> ETagGenerator:
    return ETagGenerator(**options, weak=weak, timespec=timespec)


# == parsing (sans-IO) ========================================================================

# RFC 9110 §8.8.3: entity-tag = [ weak ] opaque-tag; weak = %s"W/";
# opaque-tag = DQUOTE *etagc DQUOTE; etagc = %x21 / %x23-7E / obs-text.
_TAG_RE: Final = re.compile(r'[ \t]*(W/)?"([\x21\x23-\x7e\x80-\xff]*)"[ \t]*')
# The Ironic spec's own (invalid) examples: W/<hex> and a bare <hex>; only when tolerated.
_LEGACY_RE: Final = re.compile(r"[ \t]*(W/)?([0-9A-Fa-f]+)[ \t]*")
_EMPTY_RE: Final = re.compile(r"[ \t]*,")
_OWS_END_RE: Final = re.compile(r"[ \t]*\Z")
MAX_HEADER_LENGTH: Final = 8192


class _Malformed(Exception):
    pass


def _scan(value: str, legacy: bool) -> list[tuple[bool, str]]:
    """Entity-tags of a ``#entity-tag`` list; empty elements skipped (RFC 9110 §5.6.1)."""
    tags: list[tuple[bool, str]] = []
    pos, end = 0, len(value)
    while pos < end:
        empty = _EMPTY_RE.match(value, pos)
        if empty:
            pos = empty.end()
            continue
        if _OWS_END_RE.match(value, pos):
            break
        match = _TAG_RE.match(value, pos)
        if match is None and legacy:
            match = _LEGACY_RE.match(value, pos)
        if match is None:
            raise _Malformed
        pos = match.end()
        if pos < end:
            if value[pos] != ",":
                raise _Malformed
            pos += 1
        tags.append((match.group(1) is not None, match.group(2)))
    return tags


class _Parsed:
    """One parsed header value: ``*`` or a set of tags (immutable, cached by raw value)."""

    __slots__ = ("any", "weak", "strong")

    def __init__(self, any_: bool, weak: frozenset[str], strong: frozenset[str]) -> None:
        self.any = any_
        self.weak = weak  # every opaque-tag (weak comparison ignores W/)
        self.strong = strong  # opaque-tags sent without W/ (strong comparison)


def _parse(value: str, legacy: bool, suffixes: tuple[str, ...]) -> _Parsed:
    if len(value) > MAX_HEADER_LENGTH:
        raise _Malformed
    # "*" alone; empty list elements around it are skipped as everywhere (RFC 9110 §5.6.1.2).
    if value.strip(" \t,") == "*":
        return _Parsed(True, frozenset(), frozenset())
    tags = _scan(value, legacy)
    weak: set[str] = set()
    strong: set[str] = set()
    for is_weak, opaque in tags:
        variants = [opaque]
        variants += [opaque[: -len(s)] for s in suffixes if opaque.endswith(s) and len(opaque) > len(s)]
        weak.update(variants)
        if not is_weak:
            strong.update(variants)
    return _Parsed(False, frozenset(weak), frozenset(strong))


_CACHE_MAX: Final = 512
_CACHE_KEY_MAX: Final = 1024


class _ParseCache:
    """A small bounded cache keyed by the raw header value: values repeat on the hot path."""

    __slots__ = ("legacy", "suffixes", "_hits")

    def __init__(self, legacy: bool, suffixes: tuple[str, ...]) -> None:
        self.legacy = legacy
        self.suffixes = suffixes
        self._hits: dict[str, _Parsed | None] = {}

    def get(self, value: str) -> _Parsed:
        parsed = self._hits.get(value, _MISSING)
        if parsed is _MISSING:
            try:
                parsed = _parse(value, self.legacy, self.suffixes)
            except _Malformed:
                parsed = None
            if len(value) <= _CACHE_KEY_MAX:
                if len(self._hits) >= _CACHE_MAX:
                    self._hits.clear()
                self._hits[value] = parsed
        if parsed is None:
            raise _Malformed
        return parsed  # type: ignore[no-any-return]


_MISSING: Final[Any] = object()


def _join(value: str | Sequence[str]) -> str:
    # RFC 9110 §5.3: several field lines of a list-based field are one comma-joined value.
    return value if isinstance(value, str) else ",".join(value)


class _Condition:
    """What If-Match and If-None-Match share: the parsed list, ``*``, the raw header value."""

    __slots__ = ("_parsed", "raw")

    def __init__(self, parsed: _Parsed, *, raw: str) -> None:
        self._parsed = parsed
        self.raw = raw

    @property
    def any(self) -> bool:
        """The header was ``*``."""
        return self._parsed.any

    @property
    def tags(self) -> frozenset[str]:
        """The opaque tags listed (without ``W/`` and quotes)."""
        return self._parsed.weak


class IfMatch(_Condition):
    """A parsed If-Match for one request; the app's data layer enforces it and says so.

    ``any`` is ``If-Match: *``; ``tags`` are the opaque-tags sent.  :meth:`matches` is the
    comparison the middleware uses (weak by default, strong in ``strict_rfc9110`` mode);
    call :meth:`mark_enforced` (or :func:`mark_enforced` on the environ) once your write
    was conditional on it.  ``raw`` is the header value, to hand over an RPC boundary and
    re-parse there with :func:`parse_if_match`.
    """

    __slots__ = ("strong", "enforced")

    def __init__(self, parsed: _Parsed, *, strong: bool, raw: str) -> None:
        super().__init__(parsed, raw=raw)
        self.strong = strong
        self.enforced = False

    def matches(self, current: str | None) -> bool:
        """Whether the condition holds for the resource's *current* etag (``None``: no resource).

        *current* may be the wire form (``W/"..."``) or the bare stored digest.
        """
        if current is None:
            return False  # "*" is true iff a current representation exists (§13.1.1)
        if self._parsed.any:
            return True
        weak, opaque = split_etag(current)
        if self.strong:
            # RFC 9110 §13.1.1: "... using the strong comparison function".
            return not weak and opaque in self._parsed.strong
        # Deliberate deviation from §13.1.1 (weak comparison, W/ ignored on both sides): our
        # etags are weak validators of the resource *state* (they do not change with the
        # microversion's rendering), no Range requests are served, and proxies weaken strong
        # tags (nginx gzip), so a strong comparison would answer 412 to every conditional
        # write.  strict_rfc9110=True restores the RFC's strong comparison.
        return opaque in self._parsed.weak

    def mark_enforced(self) -> None:
        """Record that the write was made conditional on this If-Match (fail-closed check)."""
        self.enforced = True

    def __repr__(self) -> str:
        return f"IfMatch({self.raw!r})"


class IfNoneMatch(_Condition):
    """A parsed If-None-Match; always compared weakly (RFC 9110 §13.1.2)."""

    __slots__ = ()

    def matches(self, current: str | None) -> bool:
        """True if *current* is one of the tags (so the condition "none match" is false)."""
        if current is None:
            return False
        if self._parsed.any:
            return True
        return split_etag(current)[1] in self._parsed.weak

    def __repr__(self) -> str:
        return f"IfNoneMatch({self.raw!r})"


def _malformed(header: str) -> HTTPProblem:
    code = "etag.if-match-malformed" if header == "If-Match" else "etag.if-none-match-malformed"
    return HTTPProblem(
        400,
        code,
        f"The {header} header is malformed: expected * or a comma-separated list of "
        'entity-tags such as W/"<etag>" (RFC 9110 section 13.1).',
    )


_DEFAULT_CACHE = _ParseCache(False, ())
_LEGACY_CACHE = _ParseCache(True, ())


def _cache_for(legacy: bool, suffixes: Sequence[str]) -> _ParseCache:
    if not suffixes:
        return _LEGACY_CACHE if legacy else _DEFAULT_CACHE
    return _ParseCache(legacy, tuple(suffixes))


def parse_if_match(
    value: str | Sequence[str] | None,
    *,
    strong: bool = False,
    accept_unquoted: bool = False,
    ignore_suffixes: Sequence[str] = (),
) -> IfMatch | None:
    """Parse If-Match field value(s); ``None`` when absent.

    Several field lines may be passed as a sequence (they are comma-joined).  ``*`` only
    alone; ``*`` mixed with tags, unquoted tags (unless *accept_unquoted*) and any other
    syntax error raise :class:`HTTPProblem` 400 (``etag.if-match-malformed``).  An empty
    value is an empty list: it matches nothing (412), it is not "absent".
    """
    if value is None:
        return None
    raw = _join(value)
    try:
        parsed = _cache_for(accept_unquoted, ignore_suffixes).get(raw)
    except _Malformed:
        raise _malformed("If-Match") from None
    return IfMatch(parsed, strong=strong, raw=raw)


def parse_if_none_match(
    value: str | Sequence[str] | None, *, accept_unquoted: bool = False
) -> IfNoneMatch | None:
    """Parse If-None-Match field value(s) like :func:`parse_if_match`."""
    if value is None:
        return None
    raw = _join(value)
    try:
        parsed = _cache_for(accept_unquoted, ()).get(raw)
    except _Malformed:
        raise _malformed("If-None-Match") from None
    return IfNoneMatch(parsed, raw=raw)


def precondition_failed(detail: str | None = None) -> HTTPProblem:
    """The 412 answer (``etag.precondition-failed``) for a stale If-Match."""
    return HTTPProblem(
        412,
        "etag.precondition-failed",
        detail
        or "The resource was modified since you read it: the If-Match etag does not match its "
        "current etag. Fetch the resource again, then retry with the new etag.",
    )


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
    environ[ENVIRON_RESPONSE_ETAG] = None if etag is None else _check_wire(etag)


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
           "'module:function' called as f(environ) -> current etag or None, for the 412 pre-check."),
    Option("hmac_key", as_optional_str, None,
           "Deployment secret for HMAC-SHA-512 etags (>= 16 bytes); offered to the app as "
           "apimw.etag.generator."),
    Option("algorithm", as_str, "hmac-sha512", "Etag digest: hmac-sha512 or sha512."),
    Option("ignored_fields", _as_ignored, _DEFAULT_IGNORED_LIST,
           "Fields left out of the etag, as 'type:field' entries.", "list"),
    Option("error_profile", as_optional_str, None,
           "Error body profile (ironic or api-sig); default: the outer middleware's, else api-sig."),
)  # fmt: skip


def _parse_policy(entries: Iterable[str], methods: frozenset[str]) -> tuple[tuple[str, str], ...]:
    rules = []
    for entry in entries:
        method, _, prefix = entry.strip().partition(" ")
        method = method.upper()
        prefix = prefix.strip()
        if method != "*" and method not in methods:
            raise ConfigError(
                f"require_if_match: {method!r} is not one of the etag methods ({', '.join(sorted(methods))})"
            )
        if prefix and not prefix.startswith("/"):
            raise ConfigError(f"require_if_match: path prefix must start with '/', got {prefix!r}")
        rules.append((method, prefix))
    return tuple(rules)


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


def _close(iterable: Iterable[bytes] | None) -> None:
    close = getattr(iterable, "close", None)
    if close is not None:
        close()


def _is_2xx(status: str) -> bool:
    return status[:1] == "2"


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    lowered = name.lower()
    for key, value in headers:
        if key.lower() == lowered:
            return value
    return None


_VALID_WIRE_ETAG: Final = re.compile(r'(W/)?"[\x21\x23-\x7e\x80-\xff]*"')


def _check_wire(etag: str) -> str:
    # Cheap checks on the hot path (no regex): quoted, one pair of quotes, no CR/LF/controls.
    if (
        etag[-1:] == '"'
        and (etag[:3] == 'W/"' or etag[:1] == '"')
        and etag.count('"') == 2
        and etag.isprintable()
        and " " not in etag
    ):
        return etag
    raise ApimwError(f"the app supplied an invalid etag {etag!r}; build it with format_etag()")


def _with_etag(headers: list[tuple[str, str]], etag: str) -> list[tuple[str, str]]:
    """*headers* with ``ETag: etag`` (replacing one the app set)."""
    if not etag.isprintable():  # never a CR/LF into the response head
        _check_wire(etag)
    for name, _ in headers:
        if len(name) == 4 and name.lower() == "etag":
            headers = [h for h in headers if len(h[0]) != 4 or h[0].lower() != "etag"]
            break
    return [*headers, (ETAG_HEADER, etag)]


def _body_etag_wanted(headers: list[tuple[str, str]]) -> bool:
    """No ETag header yet, and a JSON body that may carry an ``etag`` field."""
    ctype = ""
    for key, value in headers:
        lowered = key.lower()
        if lowered == "etag":
            return False
        if lowered == "content-type":
            ctype = value
    return "json" in ctype.lower()


def _etag_in_body(body: bytes) -> str | None:
    """The top-level ``etag`` string of a JSON object body (a list's items are not the resource)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    if isinstance(doc, dict):
        value = doc.get("etag")
        if isinstance(value, str) and _VALID_WIRE_ETAG.fullmatch(value):
            return value
    return None


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
    ) -> None:
        self.app = app
        self._gate = VersionGate(min_version, what="etags (If-Match, If-None-Match, ETag)")
        self.min_version = self._gate.lo
        self.methods = frozenset(m.strip().upper() for m in methods)
        if not self.methods or not self.methods <= _WRITE_METHODS:
            raise ConfigError(f"etag methods must be among {', '.join(sorted(_WRITE_METHODS))}")
        self.require_rules = _parse_policy(require_if_match, self.methods)
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
        ignored = _as_ignored(ignored_fields) if not isinstance(ignored_fields, Mapping) else {
            k: frozenset(v) for k, v in ignored_fields.items()
        }
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
        return respond_with_problem(
            environ, start_response, problem, profile=self.error_profile, exc_info=exc_info
        )

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
            return self.app(environ, tracked)
        except HTTPProblem as problem:
            return self._problem(environ, start_response, problem, sys.exc_info() if started else None)

    def _too_old(self, environ: WSGIEnvironment, header: str) -> HTTPProblem:
        try:
            VersionGate(self.min_version, what=f"The {header} header").check(environ)
        except HTTPProblem as problem:
            return problem
        raise AssertionError("unreachable: _too_old called at an allowed version")  # pragma: no cover

    def _required(self, method: str, path: str) -> bool:
        for rule_method, prefix in self.require_rules:
            if (rule_method == "*" or rule_method == method) and (
                not prefix or path == prefix or path.startswith(prefix.rstrip("/") + "/")
            ):
                return True
        return False

    # -- WSGI ------------------------------------------------------------------------------

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if self.generator is not None:
            environ[ENVIRON_GENERATOR] = self.generator
        lowest = self.min_version
        if lowest is None:
            enabled = True
        else:
            # Inlined VersionGate.allows: with min_version set and no microversion middleware
            # in front, etags are off (the served version is unknown), as for every apimw gate.
            served = environ.get(ENVIRON_VERSION)
            enabled = isinstance(served, Version) and served >= lowest
        environ[ENVIRON_ENABLED] = enabled
        method = environ["REQUEST_METHOD"]
        try:
            if method in self.methods:
                return self._write(environ, start_response, method, enabled)
            if method == "POST" and IF_MATCH in environ:
                # A state change must not run unconditionally when the client asked for a
                # condition we do not evaluate on this method: refuse rather than ignore.
                if not enabled:
                    return self._problem(environ, start_response, self._too_old(environ, "If-Match"))
                return self._problem(environ, start_response, HTTPProblem(
                    400,
                    "etag.if-match-unsupported",
                    "If-Match is not supported on POST here (only on "
                    f"{', '.join(sorted(self.methods))}).",
                ))  # fmt: skip
            if not enabled:
                return self._direct(environ, start_response)
            if self.not_modified and (method == "GET" or method == "HEAD"):
                inm_raw = environ.get(IF_NONE_MATCH)
                if inm_raw is not None:
                    return self._conditional_get(environ, start_response, inm_raw)
            if method in self._response_methods:
                return self._plain(environ, start_response)
            return self._direct(environ, start_response)
        except HTTPProblem as problem:
            # Raised by the lookup or the If-None-Match parser, or by the app or its data layer
            # (StaleEtag, ResourceGone...) before our caller's start_response was called (_call
            # holds the app's answer until it is decided; _plain and _direct catch their own).
            return self._problem(environ, start_response, problem)

    def _write(
        self, environ: WSGIEnvironment, start_response: StartResponse, method: str, enabled: bool
    ) -> Iterable[bytes]:
        im_raw = environ.get(IF_MATCH)
        inm_raw = environ.get(IF_NONE_MATCH)
        environ[ENVIRON_IF_MATCH] = None
        if im_raw is None and inm_raw is None:
            if enabled and self.require_rules and self._required(method, environ.get("PATH_INFO", "")):
                # RFC 6585 §3: the response "SHOULD include an explanation of how to
                # successfully resubmit the request" and "MUST NOT be stored by a cache".
                problem = HTTPProblem(
                    428,
                    "etag.if-match-required",
                    f"{method} on this resource must be conditional: GET it, then resend the "
                    "request with its etag in an If-Match header.",
                    headers=[("Cache-Control", "no-store")],
                )
                return self._problem(environ, start_response, problem)
            if enabled and method in self._response_methods:
                return self._plain(environ, start_response)
            return self._direct(environ, start_response)
        if not enabled:
            # Nothing is written: the client asked for a precondition this version lacks.
            header = "If-Match" if im_raw is not None else "If-None-Match"
            return self._problem(environ, start_response, self._too_old(environ, header))
        if inm_raw is not None:
            if not self.if_none_match_on_writes:
                return self._problem(
                    environ,
                    start_response,
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
                return self._problem(environ, start_response, _malformed("If-Match"))
            cond = IfMatch(parsed, strong=self.strict, raw=im_raw)
            environ[ENVIRON_IF_MATCH] = cond
            if self.current_etag is not None:
                # The lookup returns None for "missing / not visible to this caller": the app
                # then answers 401/403/404, which win over 412 (RFC 9110 §13.2.1).
                current = self.current_etag(environ)
                if current is not None and not cond.matches(current):
                    return self._problem(environ, start_response, precondition_failed())
        return self._call(environ, start_response, cond, None)

    def _conditional_get(
        self, environ: WSGIEnvironment, start_response: StartResponse, inm_raw: str
    ) -> Iterable[bytes]:
        try:
            parsed = self._cache.get(inm_raw)
        except _Malformed:
            return self._problem(environ, start_response, _malformed("If-None-Match"))
        inm = IfNoneMatch(parsed, raw=inm_raw)
        if self.current_etag is not None:
            current = self.current_etag(environ)
            if current is not None and inm.matches(current):
                return self._not_modified(start_response, current)
        return self._call(environ, start_response, None, inm)

    def _not_modified(self, start_response: StartResponse, etag: str) -> Iterable[bytes]:
        # RFC 9110 §15.4.5: a 304 carries the ETag it would have sent with a 200, and no body.
        start_response("304 Not Modified", [(ETAG_HEADER, etag)])
        return []

    def _call(
        self,
        environ: WSGIEnvironment,
        start_response: StartResponse,
        cond: IfMatch | None,
        inm: IfNoneMatch | None,
    ) -> Iterable[bytes]:
        capture = _Capture()
        app_iter = self.app(environ, capture)
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
            headers = capture.headers
            if _is_2xx(status):
                if cond is not None and not (cond.enforced or environ.get(ENVIRON_ENFORCED)):
                    return self._unenforced(environ, start_response, app_iter)
                wants_etag = environ.get("REQUEST_METHOD") in self._response_methods
                etag = environ.get(ENVIRON_RESPONSE_ETAG)
                if etag is None:
                    etag = _header(headers, ETAG_HEADER)
                    if etag is None and wants_etag and self.etag_from_body:
                        etag, app_iter, rest = self._etag_from_body(capture, app_iter, rest)
                if etag is not None and inm is not None and inm.matches(etag):
                    _close(app_iter)
                    return self._not_modified(start_response, etag)
                if wants_etag and etag is not None and _header(headers, ETAG_HEADER) != etag:
                    headers = _with_etag(headers, etag)
            # No exc_info: the app's answer (even one it gave with exc_info, replacing an earlier
            # one) is the first our caller sees, so there is nothing to replace (see _problem).
            write = start_response(status, headers)
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

    def _etag_from_body(
        self, capture: _Capture, app_iter: Iterable[bytes], rest: Iterator[bytes] | None
    ) -> tuple[str | None, Iterable[bytes], Iterator[bytes] | None]:
        ctype = _header(capture.headers, "Content-Type") or ""
        if "json" not in ctype.lower():
            return None, app_iter, rest
        body_parts = list(capture.chunks)
        try:
            body_parts.extend(rest if rest is not None else app_iter)
        finally:
            _close(app_iter)
        capture.chunks = []
        body = b"".join(body_parts)
        return _etag_in_body(body), [body], None

    def _plain(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """No precondition to enforce: add the app's etag to a 2xx on the way out.

        The hot path: start_response goes straight through (no buffering) unless the
        etag must be read from the JSON body.
        """
        deferred: list[Any] = []
        called = False
        forwarded = False  # our caller's start_response was called (exc_info matters only then)
        from_body = self.etag_from_body

        def etag_start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], object]:
            nonlocal called, forwarded
            called = True
            if status[:1] == "2":
                etag = environ.get(ENVIRON_RESPONSE_ETAG)
                if etag is not None:
                    headers = _with_etag(headers, etag)
                elif from_body and not forwarded and _body_etag_wanted(headers):
                    deferred[:] = [status, headers, []]
                    return deferred[2].append  # type: ignore[no-any-return]
            deferred.clear()  # an answer held for its body etag, replaced by the app
            if forwarded:
                return start_response(status, headers, exc_info)
            forwarded = True  # the first call: nothing to replace, no exc_info (see _problem)
            return start_response(status, headers)

        try:
            app_iter = self.app(environ, etag_start_response)
        except HTTPProblem as problem:
            return self._problem(environ, start_response, problem, sys.exc_info() if forwarded else None)
        if called and not deferred:
            return app_iter
        head: list[bytes] = []
        rest: Iterator[bytes] | None = None
        try:
            if not called:
                # start_response comes from the app's iterator: run it up to there (PEP 3333).
                rest = iter(app_iter)
                for chunk in rest:
                    head.append(chunk)
                    if called:
                        break
                if not called:
                    raise RuntimeError("WSGI app returned without calling start_response")
                if not deferred:
                    return _Body(head, rest, app_iter)
            status, headers, written = deferred
            parts = [*written, *head]
            parts.extend(rest if rest is not None else app_iter)
        except BaseException:
            _close(app_iter)
            raise
        _close(app_iter)
        body = b"".join(parts)
        etag = _etag_in_body(body)
        if etag is not None:
            headers = [*headers, (ETAG_HEADER, etag)]
        start_response(status, headers)
        return [body]

    def _unenforced(
        self, environ: WSGIEnvironment, start_response: StartResponse, app_iter: Iterable[bytes]
    ) -> Iterable[bytes]:
        _close(app_iter)
        LOG.error(
            "%s %s carried If-Match but the app did not acknowledge enforcing it "
            "(set environ[%r] = True after the conditional write); refusing the 2xx",
            environ.get("REQUEST_METHOD"),
            environ.get("PATH_INFO"),
            ENVIRON_ENFORCED,
        )
        problem = HTTPProblem(
            500,
            "etag.precondition-not-enforced",
            "The server could not confirm that your If-Match condition was enforced; "
            "the resource may or may not have changed. GET it before retrying.",
        )
        return respond_with_problem(
            environ, start_response, problem, profile=self.error_profile, extra_headers=()
        )


# == configuration: paste.deploy, oslo.config, Flask ==============================================

OSLO_GROUP: Final = "apimw_etag"


def _factory(app: WSGIApplication, **kwargs: Any) -> WSGIApplication:
    return ETagMiddleware(app, **kwargs)


filter_factory = make_filter_factory(_factory, OPTIONS, OSLO_GROUP)


def list_opts() -> list[tuple[str, list[Any]]]:
    """oslo-config-generator hook: ``[("apimw_etag", [...Opt])]`` (``hmac_key`` is secret)."""
    opts = oslo_opts([opt for opt in OPTIONS if opt.name != "current_etag"])
    for opt in opts:
        if opt.name == "hmac_key":
            opt.secret = True
    return [(OSLO_GROUP, opts)]


def wrap_flask(flask_app: Any, **overrides: Any) -> Any:
    """Wrap ``flask_app.wsgi_app`` in :class:`ETagMiddleware`; settings from
    ``flask_app.config["APIMW_ETAG"]`` (a dict of option names), then *overrides*."""
    return flask_wrap(flask_app, _factory, OPTIONS, "APIMW_ETAG", overrides)



def __getattr__(name: str) -> Any:
    # ``OPTS``: the oslo.config options, built on first use so oslo.config stays optional.
    if name == "OPTS":
        return list_opts()[0][1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
