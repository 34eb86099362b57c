"""Canonical JSON: the bytes an etag is computed over, and a request body's canonical form.

Both are written by the standard library's :mod:`json`.  Stored etags and replay fingerprints
hash these bytes, so they never change from one release to the next
(``tests/test_canonical_json_bytes.py`` pins them).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import sys
from collections.abc import Iterable, Mapping
from typing import Any, Final

from apimw.errors import HTTPProblem

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


def canonical_json(doc: Any, *, timespec: str = "microseconds") -> bytes:
    """The canonical UTF-8 JSON of *doc*: the bytes an etag is computed over.

    Keys sorted at every depth, no whitespace, UTF-8 (not ``\\u`` escapes), datetimes as
    UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (naive ones taken as UTC), integral floats as
    integers, tuples as lists, sets as sorted lists, UUIDs and Decimals as their JSON
    values.  NaN, Infinity and unknown types raise :class:`CanonicalizationError`.
    """
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


# == JSON request bodies: the idempotency fingerprint's canonical form ==========================
#
# A different canonical form from the etag's (its bytes are in stored fingerprints, so they
# never change): the body is parsed as JSON and written back with sorted keys, no whitespace
# and ASCII escapes; floats are written as the stdlib writes them (not made integers).

_ASCII_CANONICAL: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def canonical_ascii_json(body: bytes) -> bytes | None:
    """The JSON text *body* with sorted keys, no whitespace and ASCII escapes; None if it is not
    JSON (or cannot be written back)."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return None
    try:
        return _ASCII_CANONICAL.encode(doc).encode()
    except (ValueError, RecursionError):
        return None
