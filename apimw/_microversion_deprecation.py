"""Deprecation signals, sans-IO: the response headers that tell a client its version is going away.

A service deprecates the microversions below a floor (``deprecated_below``); a request
served at one of them gets, built once at construction:

``Deprecation: @<epoch seconds>``
    RFC 9745 §2: ``Deprecation = sf-date`` (an RFC 9651 structured-field date), the date
    the version was (or will be) deprecated: the ``deprecated_since`` option.
``Sunset: <IMF-fixdate>``
    RFC 8594 §3: ``Sunset = HTTP-date``, when the version may stop being served
    (``sunset``, optional).
``Link: <url>; rel="deprecation"``
    RFC 9745 §3: where the deprecation is explained (``deprecation_link``, optional).

Dates are given as an HTTP-date (``Sun, 01 Nov 2026 00:00:00 GMT``), an ISO 8601 UTC date
or time (``2026-11-01``, ``2026-11-01T12:00:00Z``), an sf-date (``@1793491200``), epoch
seconds (an int) or an aware :class:`datetime.datetime`, from year 1 to year 9999.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from apimw.errors import ConfigError

__all__ = [
    "DEPRECATION_HEADER",
    "LINK_HEADER",
    "SUNSET_HEADER",
    "Deprecation",
    "check_link",
    "http_date",
    "parse_date",
]

DEPRECATION_HEADER: Final = "Deprecation"
SUNSET_HEADER: Final = "Sunset"
LINK_HEADER: Final = "Link"

_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_IMF_FIXDATE: Final = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ("
    + "|".join(_MONTHS)
    + r") (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT"
)
_ISO: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?(?:Z|[+-]00:?00))?")
_SF_DATE: Final = re.compile(r"@-?\d{1,15}")
#: 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: an HTTP-date's year has four digits
#: (RFC 9110 §5.6.7), so Sunset and the discovery documents' dates can say no other
_FIRST: Final = -62135596800
_LAST: Final = 253402300799
# RFC 3986 URI-reference characters, no spaces, quotes or angle brackets (RFC 8288 <URI-Reference>)
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[!#$%&'()*+,\-./0-9:;=?@A-Z\[\]_a-z~]+")


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm)."""
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _epoch(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int | None:
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 60):
        return None
    days = _days_from_civil(year, month, day)
    if _civil(days) != (year, month, day):  # a day past the month's end (Feb 30)
        return None
    return days * 86400 + hour * 3600 + minute * 60 + second


def _civil(days: int) -> tuple[int, int, int]:
    """``(year, month, day)`` of *days* since 1970-01-01 (the inverse of _days_from_civil)."""
    days += 719468
    era = (days if days >= 0 else days - 146096) // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def http_date(epoch: int) -> str:
    """*epoch* as an IMF-fixdate (RFC 9110 §5.6.7): ``Sun, 01 Nov 2026 00:00:00 GMT``."""
    days, seconds = divmod(epoch, 86400)
    year, month, day = _civil(days)
    hour, rest = divmod(seconds, 3600)
    return (
        f"{_DAYS[(days + 3) % 7]}, {day:02d} {_MONTHS[month - 1]} {year:04d} "
        f"{hour:02d}:{rest // 60:02d}:{rest % 60:02d} GMT"
    )


def parse_date(name: str, value: object) -> int:
    """*value* (see the module docstring) as epoch seconds; a bad one is a :class:`ConfigError`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return _in_range(name, value, value)
    timestamp = getattr(value, "timestamp", None)
    if callable(timestamp) and not isinstance(value, str):
        if getattr(value, "tzinfo", None) is None:
            raise ConfigError(
                f"{name}: a datetime needs a time zone (e.g. datetime.timezone.utc), got {value!r}"
            )
        return _in_range(name, int(timestamp()), value)
    text = str(value).strip()
    found: int | None = None
    if _SF_DATE.fullmatch(text):
        found = int(text[1:])
    elif match := _IMF_FIXDATE.fullmatch(text):
        day, month, year, hour, minute, second = match.groups()
        found = _epoch(int(year), _MONTHS.index(month) + 1, int(day), int(hour), int(minute), int(second))
    elif match := _ISO.fullmatch(text):
        found = _epoch(*(int(part) for part in match.groups() if part is not None))
    if found is None:
        raise ConfigError(
            f"{name}: expected an HTTP-date ('Sun, 01 Nov 2026 00:00:00 GMT'), an ISO date "
            f"('2026-11-01' or '2026-11-01T00:00:00Z') or '@<epoch seconds>', got {value!r}"
        )
    return _in_range(name, found, value)


def _in_range(name: str, epoch: int, value: object) -> int:
    if not _FIRST <= epoch <= _LAST:
        raise ConfigError(
            f"{name}: {value!r} is not between year 1 and year 9999 (an HTTP-date has a four-digit year)"
        )
    return epoch


def check_link(value: str) -> str:
    """*value*, if it is an absolute URI a ``Link`` header can carry; else :class:`ConfigError`."""
    text = value.strip()
    if not _URI.fullmatch(text):
        raise ConfigError(f"deprecation_link: expected an absolute URL (https://...), got {value!r}")
    return text


class Deprecation(NamedTuple):
    """A service's deprecation: when (epoch seconds), its sunset, its notice, and the headers."""

    since: int
    sunset: int | None
    link: str | None
    #: ``Deprecation``, then ``Sunset`` and ``Link`` when configured
    headers: tuple[tuple[str, str], ...]

    @classmethod
    def build(cls, since: object, sunset: object = None, link: str | None = None) -> Deprecation:
        """Validated: *sunset*, when given, is not before *since* (RFC 9745 §4)."""
        since_epoch = parse_date("deprecated_since", since)
        sunset_epoch = None if sunset is None else parse_date("sunset", sunset)
        if sunset_epoch is not None and sunset_epoch < since_epoch:
            raise ConfigError(
                f"sunset ({http_date(sunset_epoch)}) is before deprecated_since ({http_date(since_epoch)})"
            )
        link = None if link is None else check_link(link)
        # RFC 9745 §2: "Deprecation = sf-date"; RFC 9651 §3.3.7: sf-date = "@" sf-integer
        headers: tuple[tuple[str, str], ...] = ((DEPRECATION_HEADER, f"@{since_epoch}"),)
        if sunset_epoch is not None:
            # RFC 8594 §3: "Sunset = HTTP-date"
            headers += ((SUNSET_HEADER, http_date(sunset_epoch)),)
        if link is not None:
            # RFC 9745 §3: the "deprecation" link relation
            headers += ((LINK_HEADER, f'<{link}>; rel="deprecation"'),)
        return cls(since_epoch, sunset_epoch, link, headers)
