"""Sans-IO parts of the idempotency middleware: tokens, scope keys, fingerprints, records.

Nothing here touches WSGI or a store, so each function is property-testable.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Final, NamedTuple
from urllib.parse import parse_qsl

from apimw._canonical_json import canonical_ascii_json, orjson_module
from apimw._stores import PREFIX_LEN

MAX_TOKEN_LENGTH: Final = 255
FINGERPRINT_VERSION: Final = b"apimw-idempotency-fp-v1"
KEY_VERSION: Final = "idem:v1:"

# Tokens: 1-255 visible ASCII characters (0x21-0x7E), as EC2/Stripe-style clients send.
_TOKEN_RE: Final = re.compile(r"[\x21-\x7e]{1,255}")
# RFC 8941 sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE,
# unescaped = %x20-21 / %x23-5B / %x5D-7E
_SF_STRING_RE: Final = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')
_SF_UNESCAPE_RE: Final = re.compile(r"\\([\"\\])")


# built once: json.dumps() with non-default arguments builds a new encoder on every call
_COMPACT: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


class TokenError(ValueError):
    """The token header is malformed; ``code`` is the stable error code."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _check_token(token: str, header: str) -> str:
    if _TOKEN_RE.fullmatch(token) is None:
        raise TokenError(
            "idempotency.token-invalid",
            f"{header} must be 1 to {MAX_TOKEN_LENGTH} visible ASCII characters (no spaces).",
        )
    return token


def parse_client_token(value: str) -> str:
    """``X-Client-Token``: the value itself, surrounding whitespace ignored."""
    return _check_token(value.strip(" \t"), "X-Client-Token")


def parse_idempotency_key(value: str) -> str:
    """``Idempotency-Key``: an RFC 8941 sf-string (``"abc"``) or, leniently, a bare token."""
    text = value.strip(" \t")
    # draft-ietf-httpapi-idempotency-key-header: "`Idempotency-Key` is an Item Structured
    # Header [RFC8941]. Its value MUST be a String."
    if text.startswith('"'):
        match = _SF_STRING_RE.fullmatch(text)
        if match is None:
            raise TokenError("idempotency.token-invalid", "Idempotency-Key is not a valid quoted string.")
        text = _SF_UNESCAPE_RE.sub(r"\1", match.group(1))
    return _check_token(text, "Idempotency-Key")


def resolve_token(client_token: str | None, idempotency_key: str | None) -> str | None:
    """The request's token from either header; both present and different is an error."""
    first = parse_client_token(client_token) if client_token is not None else None
    second = parse_idempotency_key(idempotency_key) if idempotency_key is not None else None
    if first is not None and second is not None and first != second:
        raise TokenError(
            "idempotency.token-ambiguous",
            "X-Client-Token and Idempotency-Key are both present and differ; send one of them.",
        )
    return first if first is not None else second


@functools.lru_cache(maxsize=1024)
def store_key(prefix: str, scope: str, token: str) -> str:
    """``prefix + "idem:v1:" + sha256(scope US token)``: <= 250 bytes, no raw token in it.

    The draft's security advice: "implement a unique composite key as the idempotent cache
    lookup key ... combining the idempotency key sent by the client with other client
    specific attributes known only to the resource server" -- here, the authenticated scope.
    """
    digest = hashlib.sha256(f"{scope}\x1f{token}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}{KEY_VERSION}{digest}"


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _lp(data: bytes) -> bytes:
    """Length-prefixed field, so that no two field lists hash alike."""
    return len(data).to_bytes(8, "big") + data


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_json(mtype: str) -> bool:
    return mtype == "application/json" or mtype.endswith("+json") or mtype == ""


def canonical_body(mtype: str, body: bytes) -> bytes:
    """Canonical JSON (sorted keys, no whitespace) when the body is JSON, else the bytes tagged raw."""
    if body and is_json(mtype):
        canonical = canonical_ascii_json(body)
        if canonical is not None:
            return b"json:" + canonical
    return b"raw:" + body


_VERSION_FIELD: Final = _lp(FINGERPRINT_VERSION)


#: Requests up to this size have their fingerprint cached (a retry repeats the same bytes).
CACHE_BODY_LIMIT: Final = 8192


def fingerprint(
    *,
    method: str,
    path: str,
    query: str,
    content_type: str | None,
    versions: Sequence[tuple[str, str]],
    body: bytes,
) -> str:
    """sha256 over length-prefixed fields: what makes two requests "the same request"."""
    if len(body) <= CACHE_BODY_LIMIT:
        return _fingerprint_cached(method, path, query, content_type, tuple(versions), body)
    return _fingerprint(method, path, query, content_type, versions, body)


@functools.lru_cache(maxsize=512)
def _fingerprint_cached(
    method: str, path: str, query: str, content_type: str | None, versions: tuple[tuple[str, str], ...],
    body: bytes,
) -> str:
    return _fingerprint(method, path, query, content_type, versions, body)


def _fingerprint(
    method: str, path: str, query: str, content_type: str | None, versions: Sequence[tuple[str, str]],
    body: bytes,
) -> str:
    fields = [_VERSION_FIELD, _lp(_b(method)), _lp(_b(path))]
    if query:
        # QUERY_STRING is a latin-1 native string: decoding %XX as latin-1 keeps every byte distinct.
        pairs = sorted(parse_qsl(query, keep_blank_values=True, encoding="latin-1"))
        fields.append(_lp(str(len(pairs)).encode()))
        fields.extend(_lp(_b(name)) + _lp(_b(value)) for name, value in pairs)
    else:
        fields.append(_lp(b"0"))
    mtype = media_type(content_type)
    fields.append(_lp(_b(mtype)))
    fields.append(_lp(str(len(versions)).encode()))
    fields.extend(_lp(_b(name)) + _lp(_b(value)) for name, value in sorted(versions))
    fields.append(hashlib.sha256(canonical_body(mtype, body)).digest())
    return hashlib.sha256(b"".join(fields)).hexdigest()


# -- records ----------------------------------------------------------------------------

PENDING: Final = b"P"
COMPLETE: Final = b"C"
TOMBSTONE: Final = b"T"


class Record(NamedTuple):
    owner: bytes
    state: bytes
    fp: str
    scope: str
    status: str = ""
    headers: list[tuple[str, str]] = []  # a NamedTuple default, never mutated
    body: bytes = b""
    location: str | None = None


class RecordError(ValueError):
    """A stored record cannot be decoded."""


def _encode(owner: bytes, state: bytes, meta: dict[str, object], body: bytes = b"") -> bytes:
    assert len(owner) == PREFIX_LEN - 1  # noqa: S101 - internal invariant
    head = _COMPACT.encode(meta).encode()
    return owner + state + head + b"\n" + body


def encode_pending(owner: bytes, fp: str, scope: str, claimed_at: float) -> bytes:
    # the hot path of every first POST: formatted by hand (fp is hex; the scope is JSON-escaped)
    return b"%bP{\"v\":1,\"fp\":\"%b\",\"sc\":%b,\"t\":%.3f}\n" % (
        owner, fp.encode(), _json_str(scope), claimed_at
    )


@functools.lru_cache(maxsize=1024)
def _json_str(text: str) -> bytes:
    return json.dumps(text, ensure_ascii=True).encode()


def _json_headers(headers: list[tuple[str, str]]) -> bytes:
    """The headers as a JSON array of pairs (orjson; the stdlib for what orjson refuses)."""
    orjson = orjson_module()
    if orjson is None:
        return _COMPACT.encode(headers).encode()
    try:
        out: bytes = orjson.dumps(headers)
    except TypeError:  # a lone surrogate, a str subclass: ASCII-escaped by the stdlib encoder
        return _COMPACT.encode(headers).encode()
    return out


def encode_complete(
    owner: bytes, fp: str, scope: str, status: str, headers: Iterable[tuple[str, str]], body: bytes
) -> bytes:
    # by hand around one encoder call: the hot path of every first POST
    return b"%bC{\"v\":1,\"fp\":\"%b\",\"sc\":%b,\"s\":%b,\"h\":%b}\n%b" % (
        owner, fp.encode(), _json_str(scope), _json_str(status), _json_headers(list(headers)), body,
    )  # fmt: skip


def encode_tombstone(owner: bytes, fp: str, scope: str, status: str, location: str | None) -> bytes:
    return _encode(owner, TOMBSTONE, {"v": 1, "fp": fp, "sc": scope, "s": status, "loc": location})


def decode_record(raw: bytes) -> Record:
    """Parse a stored record; anything unexpected raises :class:`RecordError` (never "absent")."""
    if len(raw) <= 2 * CACHE_BODY_LIMIT:
        return _decode_cached(raw)
    return _decode(raw)


@functools.lru_cache(maxsize=256)
def _decode_cached(raw: bytes) -> Record:
    return _decode(raw)


def _decode(raw: bytes) -> Record:
    head, sep, body = raw[PREFIX_LEN:].partition(b"\n")
    state = raw[PREFIX_LEN - 1 : PREFIX_LEN]
    if not sep or state not in (PENDING, COMPLETE, TOMBSTONE):
        raise RecordError("not an apimw idempotency record")
    orjson = orjson_module()
    try:
        if orjson is None:
            meta = json.loads(head)
        else:
            try:
                meta = orjson.loads(head)
            except orjson.JSONDecodeError:  # e.g. an escaped lone surrogate, only the stdlib reads
                meta = json.loads(head)
        if meta["v"] != 1:
            raise RecordError(f"unknown record version {meta['v']!r}")
        fp, scope = str(meta["fp"]), str(meta["sc"])
        if state == COMPLETE:
            headers = [(str(k), str(v)) for k, v in meta["h"]]
            return Record(raw[: PREFIX_LEN - 1], state, fp, scope, str(meta["s"]), headers, body)
        if state == TOMBSTONE:
            loc = meta.get("loc")
            return Record(raw[: PREFIX_LEN - 1], state, fp, scope, str(meta["s"]), location=loc)
        return Record(raw[: PREFIX_LEN - 1], state, fp, scope)
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"corrupt idempotency record: {exc}") from None


# -- replayed headers -----------------------------------------------------------------------

#: Never replayed: hop-by-hop (RFC 9110 7.6.1), per-response values, cookies and auth
#: challenges.  (Request ids are stored, and replayed with a new value: :func:`with_request_id`.)
DROPPED_HEADERS: Final = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "trailers", "transfer-encoding", "upgrade",
        "content-length", "date", "server", "set-cookie", "set-cookie2", "www-authenticate",
        "idempotent-replayed", "idempotency-status",
    }
)  # fmt: skip


def stored_headers(headers: Iterable[tuple[str, str]], drop: frozenset[str]) -> list[tuple[str, str]]:
    """The response headers worth replaying (Location, Content-Type, ETag, ... kept in order)."""
    return [(k, v) for k, v in headers if k.lower() not in drop]


def new_request_id() -> str:
    """``req-<uuid4>``, the form of oslo.context's ``generate_request_id``."""
    return f"req-{uuid.uuid4()}"


def with_request_id(
    headers: Sequence[tuple[str, str]], names: frozenset[str], request_id: Callable[[], str]
) -> list[tuple[str, str]]:
    """*headers* with every header named in *names* (lower case) set to one ``request_id()``.

    A replay is a new request: its answer must not carry the first request's id, which the
    logs tie to the first execution.  *request_id* is called at most once, and only when
    such a header is there.
    """
    out = list(headers)
    fresh = None
    for i, (name, _) in enumerate(out):
        if name.lower() in names:
            if fresh is None:
                fresh = request_id()
            out[i] = (name, fresh)
    return out


def location_of(headers: Iterable[tuple[str, str]]) -> str | None:
    for name, value in headers:
        if name.lower() == "location":
            return value
    return None
