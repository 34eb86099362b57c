"""The microversion value (:class:`Version`), its strict parser (sans-IO, no WSGI here), and
the environ key the microversion middleware stores the served version under."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final, NamedTuple

from apimw.errors import VersionParseError

__all__ = ["ENVIRON_VERSION", "LATEST", "MAX_VERSION_LENGTH", "Version", "parse_version"]

#: ``environ`` key of the served :class:`Version` (set by the microversion middleware; read by
#: the etag and idempotency middlewares, the gates and the adapters).  Defined here only.
ENVIRON_VERSION: Final = "apimw.microversion"

#: Longest version string we look at; anything longer is malformed (no regex on huge input).
MAX_VERSION_LENGTH: Final = 16
LATEST: Final = "latest"

# API-SIG microversion guideline: "^([1-9]\d*)\.([1-9]\d*|0)$".  We use [0-9] and
# fullmatch so that non-ASCII digits and a trailing newline (which "$" allows) are refused.
_VERSION_RE: Final = re.compile(r"([1-9][0-9]*)\.(0|[1-9][0-9]*)", re.ASCII)


class Version(NamedTuple):
    """A microversion ``major.minor``; compares as a tuple (1.10 > 1.9)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"

    def matches(self, min_version: Version | None = None, max_version: Version | None = None) -> bool:
        """True if ``min_version <= self <= max_version`` (open bounds when ``None``)."""
        if min_version is not None and self < min_version:
            return False
        return max_version is None or self <= max_version


@lru_cache(maxsize=256)
def _parse_cached(text: str) -> Version:
    match = _VERSION_RE.fullmatch(text)
    if match is None:
        raise VersionParseError(f"invalid microversion {text!r}: expected MAJOR.MINOR, e.g. 1.2")
    return Version(int(match.group(1)), int(match.group(2)))


def parse_version(text: str | Version) -> Version:
    """Parse ``"1.2"`` strictly; raise :class:`VersionParseError` on anything else.

    Accepts only ``^([1-9][0-9]*)\\.(0|[1-9][0-9]*)$`` on ASCII digits, as a whole
    string, at most :data:`MAX_VERSION_LENGTH` characters.  ``latest`` is *not*
    a version: callers resolve it against their range.
    """
    if isinstance(text, Version):
        return text
    if not isinstance(text, str):
        raise VersionParseError(f"a microversion must be a string, not {type(text).__name__}")
    if len(text) > MAX_VERSION_LENGTH:
        raise VersionParseError(f"invalid microversion: longer than {MAX_VERSION_LENGTH} characters")
    return _parse_cached(text)
