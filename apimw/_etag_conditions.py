"""If-Match / If-None-Match parsing (sans-IO): strict RFC 9110 grammar, cached per header value."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from apimw._config import as_list
from apimw.errors import HTTPProblem


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


# == parsing (sans-IO) ========================================================================

# RFC 9110 §8.8.3: entity-tag = [ weak ] opaque-tag; weak = %s"W/";
# opaque-tag = DQUOTE *etagc DQUOTE; etagc = %x21 / %x23-7E / obs-text.
_TAG_RE: Final = re.compile(r'[ \t]*(W/)?"([\x21\x23-\x7e\x80-\xff]*)"[ \t]*')
# The Ironic spec's own (invalid) examples: W/<hex> and a bare <hex>; only when tolerated.
_LEGACY_RE: Final = re.compile(r"[ \t]*(W/)?([0-9A-Fa-f]+)[ \t]*")
_EMPTY_RE: Final = re.compile(r"[ \t]*,")
_OWS_END_RE: Final = re.compile(r"[ \t]*\Z")
MAX_HEADER_LENGTH: Final = 8192


class Malformed(Exception):
    """A precondition header that breaks the grammar (answered 400 by :func:`malformed`)."""


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
            raise Malformed
        pos = match.end()
        if pos < end:
            if value[pos] != ",":
                raise Malformed
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
        raise Malformed
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


class ParseCache:
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
            except Malformed:
                parsed = None
            if len(value) <= _CACHE_KEY_MAX:
                if len(self._hits) >= _CACHE_MAX:
                    self._hits.clear()
                self._hits[value] = parsed
        if parsed is None:
            raise Malformed
        return parsed  # type: ignore[no-any-return]


_MISSING: Final[Any] = object()


def _join(value: str | Sequence[str]) -> str:
    # RFC 9110 §5.3: several field lines of a list-based field are one comma-joined value.
    return value if isinstance(value, str) else ",".join(value)


class _Condition:
    """What If-Match and If-None-Match share: the parsed list, ``*``, the raw header value,
    and the app's acknowledgement that its write was conditional on it."""

    __slots__ = ("_parsed", "raw", "enforced")

    def __init__(self, parsed: _Parsed, *, raw: str) -> None:
        self._parsed = parsed
        self.raw = raw
        self.enforced = False

    def mark_enforced(self) -> None:
        """Record that the write was made conditional on this header (fail-closed check)."""
        self.enforced = True

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

    __slots__ = ("strong",)

    def __init__(self, parsed: _Parsed, *, strong: bool, raw: str) -> None:
        super().__init__(parsed, raw=raw)
        self.strong = strong

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

    def __repr__(self) -> str:
        return f"IfMatch({self.raw!r})"


class IfNoneMatch(_Condition):
    """A parsed If-None-Match; always compared weakly (RFC 9110 §13.1.2).

    On a write (``if_none_match_on_writes``) the app enforces it: ``If-None-Match: *`` on a
    PUT creates only when no current representation exists, else 412; it then calls
    :meth:`mark_enforced`.
    """

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


class IfUnmodifiedSince:
    """A write's If-Unmodified-Since (``if_unmodified_since_on_writes``), for the app to enforce.

    :meth:`holds` is RFC 9110 §13.1.4's evaluation against the resource's last modification
    date; the app makes its write conditional on it and calls :meth:`mark_enforced`.
    """

    __slots__ = ("date", "raw", "enforced")

    def __init__(self, date: datetime, *, raw: str) -> None:
        self.date = date
        self.raw = raw
        self.enforced = False

    def holds(self, last_modified: datetime | None) -> bool:
        """False when the resource was modified after :attr:`date` (``None``: no date, holds).

        HTTP-dates have whole seconds: *last_modified* is compared at that precision."""
        if last_modified is None:
            return True
        if last_modified.tzinfo is None:
            last_modified = last_modified.replace(tzinfo=UTC)
        return last_modified.replace(microsecond=0) <= self.date

    def mark_enforced(self) -> None:
        """Record that the write was made conditional on this date (fail-closed check)."""
        self.enforced = True

    def __repr__(self) -> str:
        return f"IfUnmodifiedSince({self.raw!r})"


def malformed(header: str) -> HTTPProblem:
    """The 400 problem for a malformed If-Match or If-None-Match *header*."""
    code = "etag.if-match-malformed" if header == "If-Match" else "etag.if-none-match-malformed"
    return HTTPProblem(
        400,
        code,
        f"The {header} header is malformed: expected * or a comma-separated list of "
        'entity-tags such as W/"<etag>" (RFC 9110 section 13.1).',
    )


_DEFAULT_CACHE = ParseCache(False, ())
_LEGACY_CACHE = ParseCache(True, ())


def cache_for(legacy: bool, suffixes: Sequence[str]) -> ParseCache:
    """The parse cache for this tolerance (*legacy*: unquoted etags) and these ignored suffixes."""
    if not suffixes:
        return _LEGACY_CACHE if legacy else _DEFAULT_CACHE
    return ParseCache(legacy, tuple(suffixes))


def parse_if_match(
    value: str | Sequence[str] | None,
    *,
    strong: bool = False,
    accept_unquoted: bool = False,
    ignore_suffixes: str | Sequence[str] = (),
) -> IfMatch | None:
    """Parse If-Match field value(s); ``None`` when absent.

    Several field lines may be passed as a sequence (they are comma-joined).  ``*`` only
    alone; ``*`` mixed with tags, unquoted tags (unless *accept_unquoted*) and any other
    syntax error raise :class:`HTTPProblem` 400 (``etag.if-match-malformed``).  An empty
    value is an empty list: it matches nothing (412), it is not "absent".  *ignore_suffixes*
    may be a string, read as a paste ini value is (comma or newline separated).
    """
    if value is None:
        return None
    raw = _join(value)
    try:
        parsed = cache_for(accept_unquoted, as_list(ignore_suffixes)).get(raw)
    except Malformed:
        raise malformed("If-Match") from None
    return IfMatch(parsed, strong=strong, raw=raw)


def parse_if_none_match(
    value: str | Sequence[str] | None, *, accept_unquoted: bool = False
) -> IfNoneMatch | None:
    """Parse If-None-Match field value(s) like :func:`parse_if_match`."""
    if value is None:
        return None
    raw = _join(value)
    try:
        parsed = cache_for(accept_unquoted, ()).get(raw)
    except Malformed:
        raise malformed("If-None-Match") from None
    return IfNoneMatch(parsed, raw=raw)


_STALE: Final = (
    "The resource was modified since you read it: the If-Match etag does not match its "
    "current etag. Fetch the resource again, then retry with the new etag."
)


class StaleEtag(HTTPProblem):
    """412 ``etag.precondition-failed``: the resource's etag is no longer one If-Match names.

    Raise it from the app's write (or its data layer) below an apimw middleware, which
    renders it in the deployment's error profile.
    """

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(412, "etag.precondition-failed", detail or _STALE)


def precondition_failed(detail: str | None = None) -> HTTPProblem:
    """The 412 answer (``etag.precondition-failed``) for a stale If-Match: a :class:`StaleEtag`."""
    return StaleEtag(detail)
