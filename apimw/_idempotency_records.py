"""Sans-IO: the records the idempotency middleware keeps in its store, and what one answers.

A record is ``owner (32 hex) + state (P pending, C complete, T tombstone) + JSON head + "\n" +
body``; the store compares the first :data:`~apimw._stores.PREFIX_LEN` bytes to fence its
writes.  :func:`judge` is the protocol's decision for a request that lost the claim (replay,
in flight, another request, tombstone, unreadable); :func:`stored_headers` and
:func:`with_request_id` what a replay's headers are.  Nothing here touches WSGI or a store.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import secrets
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Final, NamedTuple

from apimw._stores import PREFIX_LEN

# -- owner ids: unique per claim, cheap (no urandom per request), new per forked process --------

_OWNER = {"nonce": secrets.token_hex(8), "counter": itertools.count()}


def _new_owner_nonce() -> None:
    _OWNER["nonce"] = secrets.token_hex(8)
    _OWNER["counter"] = itertools.count()


os.register_at_fork(after_in_child=_new_owner_nonce)


def owner_id() -> bytes:
    """32 hex characters: a random per-process nonce and a counter."""
    return f"{_OWNER['nonce']}{next(_OWNER['counter']):016x}".encode()  # type: ignore[call-overload]


# built once: json.dumps() with non-default arguments builds a new encoder on every call
_COMPACT: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


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
    return owner + state + _COMPACT.encode(meta).encode() + b"\n" + body


def encode_pending(owner: bytes, fp: str, scope: str, claimed_at: float) -> bytes:
    return _encode(owner, PENDING, {"v": 1, "fp": fp, "sc": scope, "t": round(claimed_at, 3)})


def encode_complete(
    owner: bytes, fp: str, scope: str, status: str, headers: Iterable[tuple[str, str]], body: bytes
) -> bytes:
    return _encode(owner, COMPLETE, {"v": 1, "fp": fp, "sc": scope, "s": status, "h": list(headers)}, body)


def encode_tombstone(owner: bytes, fp: str, scope: str, status: str, location: str | None) -> bytes:
    return _encode(owner, TOMBSTONE, {"v": 1, "fp": fp, "sc": scope, "s": status, "loc": location})


#: Records up to this size have their decoding cached (the replays of one token repeat it).
_CACHED_RECORD_LIMIT: Final = 16384


def decode_record(raw: bytes) -> Record:
    """Parse a stored record; anything unexpected raises :class:`RecordError` (never "absent")."""
    if len(raw) <= _CACHED_RECORD_LIMIT:
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
    try:
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
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise RecordError(f"corrupt idempotency record: {exc}") from None


# -- headers -----------------------------------------------------------------------

#: Says what the middleware did with an answer: ``not-stored`` (see :data:`NOT_STORED`), or
#: ``unprotected`` (the store was down and ``on_store_error = fail_open`` ran the app).  Absent
#: when the answer was stored, or when its claim was released (nothing kept: a retry runs again).
STATUS_HEADER: Final = "Idempotency-Status"
#: On a first answer that was sent but not stored for replay (too large, or the store refused
#: it): a retry gets 409 ``idempotency.replay-unavailable`` (or, if even the tombstone could not
#: be written, runs again after the lease).
NOT_STORED: Final = (STATUS_HEADER, "not-stored")

#: Never replayed: hop-by-hop (RFC 9110 7.6.1) and per-response values.  (Request ids are
#: stored, and replayed with a new value: :func:`with_request_id`.)
DROPPED_HEADERS: Final = frozenset(
    {
        "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
        "te", "trailer", "trailers", "transfer-encoding", "upgrade",
        "content-length", "date", "server", "idempotent-replayed", "idempotency-status",
    }
)  # fmt: skip
#: Per-user headers: a token's scope is a project, and a replay may go to another user of it
#: (or to the same user with a new token).  Not replayed unless ``replay_user_headers``.
USER_HEADERS: Final = frozenset(
    {
        "x-auth-token", "x-subject-token", "authentication-info", "proxy-authentication-info",
        "set-cookie", "set-cookie2", "www-authenticate",
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


# -- what a request that lost the claim is answered ----------------------------------------------

#: :func:`judge`'s verdicts.
IN_FLIGHT: Final = "in-flight"
UNREADABLE: Final = "unreadable"
MISMATCH: Final = "mismatch"
TOMBSTONED: Final = "tombstoned"
REPLAY: Final = "replay"


class Judgement(NamedTuple):
    verdict: str
    record: Record | None = None


_IN_FLIGHT: Final = Judgement(IN_FLIGHT)


def judge(current: bytes, fp: str, scope: str) -> Judgement:
    """What the record found under a token answers a request (fingerprint *fp*, *scope*).

    *current* is what the claim found: ``b""`` when the record vanished between the failed
    claim and its read (a claim in progress elsewhere).
    """
    if not current:
        return _IN_FLIGHT
    try:
        record = decode_record(current)
    except RecordError:
        return Judgement(UNREADABLE)
    # The draft: "If there is an attempt to reuse an idempotency key with a different request
    # payload, the resource server SHOULD reply with a HTTP 422" (OpenStack and EC2 use 409).
    if record.scope != scope or record.fp != fp:
        return Judgement(MISMATCH, record)
    # The draft: "The request was retried before the original request completed. The
    # resource server MUST respond with a resource conflict error."
    if record.state == PENDING:
        return _IN_FLIGHT
    if record.state == TOMBSTONE:
        return Judgement(TOMBSTONED, record)
    return Judgement(REPLAY, record)


def releases(status: str, release: frozenset[int], store_5xx: bool) -> bool:
    """Whether an answer with *status* releases the claim (a retry runs again) instead of
    being stored: a transient status of *release*, or a 5xx unless *store_5xx*."""
    code = int(status[:3]) if status[:3].isdigit() else 500
    return code in release or (code >= 500 and not store_5xx)
