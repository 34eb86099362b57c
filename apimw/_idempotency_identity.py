"""Sans-IO: what makes two requests "the same request" -- the token, its scope key, the fingerprint.

The token headers are parsed (``X-Client-Token``, the IETF draft's ``Idempotency-Key``), the
store key is derived from the scope and the token, and the fingerprint hashes the request's
identity (method, path, query, media type, microversion headers, canonical body).  Nothing
here touches WSGI or a store, so each function is property-testable, and an ASGI middleware
would share them.  :class:`ClientToken` is what the app is handed.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Final
from urllib.parse import parse_qsl

from apimw._canonical_json import canonical_ascii_json
from apimw.errors import ConfigError

MAX_TOKEN_LENGTH: Final = 255
FINGERPRINT_VERSION: Final = b"apimw-idempotency-fp-v1"
KEY_VERSION: Final = "idem:v1:"

# Tokens: 1-255 visible ASCII characters (0x21-0x7E) but the comma, as EC2/Stripe-style clients send.
_TOKEN_RE: Final = re.compile(r"[\x21-\x7e]{1,255}")
# RFC 8941 sf-string: DQUOTE *( unescaped / "\" ( DQUOTE / "\" ) ) DQUOTE,
# unescaped = %x20-21 / %x23-5B / %x5D-7E
_SF_STRING_RE: Final = re.compile(r'"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')
_SF_UNESCAPE_RE: Final = re.compile(r"\\([\"\\])")


class TokenError(ValueError):
    """A header that names the token or its scope is malformed; ``code`` is the stable error code."""

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


def _check_single(text: str, header: str) -> str:
    """A token holds no comma: a server joins the lines of a repeated header with one (RFC 9110
    §5.3), so ``d,d`` may be two lines, and a singleton header given twice is not one token."""
    if "," in text:
        raise TokenError(
            "idempotency.token-repeated",
            f"{header} must appear once, with one value (a token holds no comma); send one token.",
        )
    return text


def check_scope_value(value: str, header: str) -> str:
    """A scope header (``X-Project-Id``, ``X-Tenant-Id``, ``X-User-Id``) holds no comma, as
    :func:`_check_single` a token: servers join repeated lines differently (waitress ``p1, p2``,
    an ASGI door ``p1,p2``), so a joined value would be a different tenant on each door.
    Keystone project and user ids never hold a comma."""
    if "," in value:
        raise TokenError(
            "idempotency.scope-repeated",
            f"{header} must appear once, with one value (a project or user id holds no comma).",
        )
    return value


def parse_client_token(value: str) -> str:
    """``X-Client-Token``: the value itself, surrounding whitespace ignored; no comma."""
    return _check_token(_check_single(value.strip(" \t"), "X-Client-Token"), "X-Client-Token")


def parse_idempotency_key(value: str) -> str:
    """``Idempotency-Key``: an RFC 8941 sf-string (``"abc"``) or, leniently, a bare token; no comma."""
    text = _check_single(value.strip(" \t"), "Idempotency-Key")
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
    method: str,
    path: str,
    query: str,
    content_type: str | None,
    versions: tuple[tuple[str, str], ...],
    body: bytes,
) -> str:
    return _fingerprint(method, path, query, content_type, versions, body)


def _fingerprint(
    method: str,
    path: str,
    query: str,
    content_type: str | None,
    versions: Sequence[tuple[str, str]],
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


def header_matcher(names: Iterable[str]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    """Header names (``*`` allowed) -> exact environ keys and one regex for the patterns."""
    exact: set[str] = set()
    patterns: list[str] = []
    for name in names:
        key = "HTTP_" + name.strip().upper().replace("-", "_")
        if not re.fullmatch(r"HTTP_[A-Z0-9_*]+", key):
            raise ConfigError(f"idempotency: bad header name in fingerprint_headers: {name!r}")
        if "*" in key:
            patterns.append(re.escape(key).replace(r"\*", "[A-Z0-9_]*"))
        else:
            exact.add(key)
    return frozenset(exact), re.compile("|".join(patterns)) if patterns else None


# -- what the app is handed ------------------------------------------------------------------


class ClientToken:
    """The token of a request the app runs under the middleware (claimed, or unprotected).

    ``scope``: whose token it is (the project under the default ``scope = project``; project
    and user under ``user``; ``*shared*`` in a shared scope).  ``token``: the client's
    token.  ``fingerprint``: the request's identity (method, path, query, body,
    microversion), the one the middleware compares a retry with.  ``project``: the
    authenticated project, if any.  ``mismatch_status``: the status the middleware answers
    a reused token with (its ``mismatch_status`` option, 409 or 422), for the app's own
    answer (:class:`apimw.idempotency_db.TokenReused`).  ``reused``: set by
    :mod:`apimw.idempotency_db` when the database found the token recorded for another
    request; the middleware then releases the claim instead of storing that answer, so the
    token stays the first request's.  ``replayed``: set by :mod:`apimw.idempotency_db` when
    the database found this request recorded (the store had lost it): the app answers with
    what the first execution made, and the middleware marks a 2xx answer as a replay
    (``Idempotent-Replayed: true``), as it does a replay from the store.
    """

    __slots__ = ("fingerprint", "mismatch_status", "project", "replayed", "reused", "scope", "token")

    def __init__(
        self,
        scope: str,
        token: str,
        fingerprint: str,
        project: str | None = None,
        *,
        mismatch_status: int = 409,
    ) -> None:
        self.scope = scope
        self.token = token
        self.fingerprint = fingerprint
        self.project = project
        self.mismatch_status = mismatch_status
        self.reused = False
        self.replayed = False

    def __repr__(self) -> str:  # never the token itself (it may end up in logs)
        return f"<ClientToken scope={self.scope!r} fingerprint={self.fingerprint[:12]}...>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClientToken):
            return NotImplemented
        return (self.scope, self.token, self.fingerprint, self.project) == (
            other.scope, other.token, other.fingerprint, other.project,
        )  # fmt: skip

    def __hash__(self) -> int:
        return hash((self.scope, self.token, self.fingerprint))
