"""Canonical JSON: the bytes an etag is computed over (orjson fast path, stdlib reference).

orjson is optional and loaded on first use, not at import: its probe (``_fast_agrees``)
runs once, the first time a document is encoded.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from apimw.errors import HTTPProblem

LOG = logging.getLogger("apimw.etag")


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
TIMESPECS: Final = ("seconds", "milliseconds", "microseconds")


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
    # uuid and decimal are not imported here (milliseconds at import): a value of their types
    # exists only if its module was imported, so sys.modules tells.
    decimal = sys.modules.get("decimal")
    if decimal is not None and isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise CanonicalizationError(f"cannot compute an etag over {value!r}")
        return _normalise(int(value) if value == value.to_integral_value() else float(value), timespec)
    uuid = sys.modules.get("uuid")
    if uuid is not None and isinstance(value, uuid.UUID):
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


_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def stdlib_json(doc: Any, timespec: str) -> bytes:
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
# on first use (_load_fast_path), so that an orjson release that changes its output only costs speed.
# A set, not a frozenset: _load_fast_path() adds uuid.UUID (imported on first use, not here);
# the functions below take it as a default argument, which sees the addition.
_FAST_LEAVES: Final[set[type]] = {str, int, bool, type(None), _dt.datetime, _dt.date, _dt.time}


def _fast_ok(container: Any, leaves: set[type] = _FAST_LEAVES) -> bool:
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


def _with_fragments(value: Any, leaves: set[type] = _FAST_LEAVES) -> Any:
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
_FAST_DEFAULTS: Final = {timespec: _fast_default(timespec) for timespec in TIMESPECS}
_FAST_CONTAINERS: Final = (dict, list, tuple)


def fast_json(doc: Any, timespec: str) -> bytes | None:
    """The canonical bytes through orjson, or None where only the stdlib path can tell."""
    if not _fast_loaded:
        _load_fast_path()
    return _encode_fast(_fast_dumps, doc, timespec)


def _encode_fast(dumps: Callable[..., bytes] | None, doc: Any, timespec: str) -> bytes | None:
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
    data = fast_json(doc, timespec)
    return stdlib_json(doc, timespec) if data is None else data


def _fast_agrees(dumps: Callable[..., bytes] | None = None) -> bool:
    """Does *dumps* (default: the fast path's) still write this probe exactly as the stdlib
    path does?"""
    if dumps is None:
        dumps = _fast_dumps

    class Key(str):
        pass

    import uuid

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
        for timespec in TIMESPECS:
            if _encode_fast(dumps, probe, timespec) != stdlib_json(probe, timespec):
                return False
    except Exception:  # noqa: BLE001 - any surprise disables the fast path, never the etags
        return False
    # str-subclass and int keys must be refused (the stdlib path checks them for duplicates)
    return (
        _encode_fast(dumps, {Key("a"): 1}, "seconds") is None
        and _encode_fast(dumps, {1: 1}, "seconds") is None
    )


_fast_loaded = False
_fast_lock: Final = threading.Lock()
_orjson: Any = None
_orjson_imported = False


def orjson_module() -> Any:
    """The orjson module, imported on first use (not at import: it costs milliseconds); None
    if it is not installed.  Every caller has a stdlib twin giving the same result."""
    global _orjson, _orjson_imported
    if not _orjson_imported:
        try:
            import orjson
        except ImportError:
            orjson = None  # type: ignore[assignment]
        _orjson = orjson
        _orjson_imported = True
    return _orjson


def _load_fast_path() -> bool:
    """Import orjson and run the probe, once (on the first document encoded, not at import).

    Sets ``_fast_dumps`` to ``orjson.dumps`` if orjson is installed and writes the probe
    exactly as the stdlib path does, else leaves it ``None``.  Returns whether the fast
    path is on.
    """
    global _fast_loaded, _fast_dumps, _FAST_ERROR, _FAST_OPTION, _Fragment
    with _fast_lock:  # the first encodings of several threads wait for one verdict
        if _fast_loaded:
            return _fast_dumps is not None
        import uuid

        _FAST_LEAVES.add(uuid.UUID)
        orjson = orjson_module()
        if orjson is not None:  # optional: the stdlib path gives the same bytes, more slowly
            _FAST_ERROR = orjson.JSONEncodeError
            _FAST_OPTION = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
            _Fragment = getattr(orjson, "Fragment", None)
            # The probe runs on orjson.dumps before any caller can use it: _fast_dumps is
            # set only once the verdict is in.
            if _fast_agrees(orjson.dumps):
                _fast_dumps = orjson.dumps
            else:
                LOG.warning(
                    "orjson %s writes differently from the stdlib: etags use the stdlib", orjson.__version__
                )
        _fast_loaded = True
        return _fast_dumps is not None


# == JSON request bodies: the idempotency fingerprint's canonical form ==========================
#
# A different canonical form from the etag's (its bytes are in stored fingerprints, so they
# never change): the body is parsed as JSON and written back with sorted keys, no whitespace
# and ASCII escapes; floats are written as the stdlib writes them (not made integers).

_ASCII_CANONICAL: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
_EXACT_LEAVES: Final[frozenset[type]] = frozenset({str, int, bool, type(None)})


def _float_free(container: Any) -> bool:
    """True if nothing under *container* is a float (orjson reads ints beyond 64 bits as floats)."""
    for item in container.values() if type(container) is dict else container:
        kind = type(item)
        if kind in _EXACT_LEAVES:
            continue
        if (kind is dict or kind is list) and _float_free(item):
            continue
        return False
    return True


def _fast_ascii_json(body: bytes) -> bytes | None:
    """:func:`canonical_ascii_json`'s exact bytes through orjson, or None where they could differ.

    For documents of str/int/bool/null/objects/arrays that orjson reads (anything else --
    floats, huge ints read as floats, lone surrogates, NaN, non-UTF-8 -- goes to the stdlib
    path), orjson with sorted keys writes what ``json`` with ``sort_keys`` and ASCII escapes
    writes, except non-ASCII text and DEL, which it leaves unescaped: such output is refused
    here too.  ``test_fast_canonical_json_is_byte_for_byte_the_stdlib_one`` checks the two
    paths against each other.
    """
    orjson = orjson_module()
    if orjson is None:
        return None
    try:
        doc = orjson.loads(body)
        kind = type(doc)
        if not (kind in _EXACT_LEAVES or ((kind is dict or kind is list) and _float_free(doc))):
            return None
        out: bytes = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, RecursionError):
        return None
    if not out.isascii() or b"\x7f" in out:
        return None
    return out


def canonical_ascii_json(body: bytes) -> bytes | None:
    """The JSON text *body* with sorted keys, no whitespace and ASCII escapes; None if it is not
    JSON (or cannot be written back).  The same bytes with or without orjson."""
    fast = _fast_ascii_json(body)
    if fast is not None:
        return fast
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    try:
        return _ASCII_CANONICAL.encode(doc).encode()
    except (ValueError, RecursionError):
        return None
