"""Microversion negotiation, sans-IO: header values in, the served version and headers out.

Nothing here knows WSGI: functions take the raw request header values (``str | None``,
``None`` when absent) and return values, so the rules can be tested on their own and a
middleware of another protocol (ASGI) can share them.  :class:`Negotiator` holds one
service's configuration (validated at construction) and answers, for a request's
``OpenStack-API-Version`` and legacy header values, a :class:`Served` outcome or the
:class:`~apimw.errors.HTTPProblem` to answer with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from apimw._config import as_list
from apimw._microversion_deprecation import DEPRECATION_HEADER, SUNSET_HEADER, Deprecation
from apimw._microversion_type import LATEST, MAX_VERSION_LENGTH, Version, parse_version
from apimw.errors import ConfigError, HTTPProblem, VersionParseError, check_profile

__all__ = [
    "CODE_MALFORMED",
    "CODE_UNSUPPORTED",
    "STANDARD_HEADER",
    "Negotiator",
    "Selection",
    "Served",
    "check_token",
    "config_version",
    "merge_vary",
    "select_version",
    "unsupported_detail",
]

STANDARD_HEADER: Final = "OpenStack-API-Version"

CODE_MALFORMED: Final = "microversion.malformed"
CODE_UNSUPPORTED: Final = "microversion.unsupported"

#: Longest header value we look at; longer values are malformed (bounded work per request).
MAX_HEADER_LENGTH: Final = 1024

_Headers = tuple[tuple[str, str], ...]


def check_token(name: str, value: str) -> str:
    """*value*, if it is an HTTP token (a header name, a service type); else :class:`ConfigError`."""
    if not value or any(c.isspace() or c in ',:;"' for c in value) or not value.isascii():
        raise ConfigError(f"{name} must be a non-empty HTTP token, got {value!r}")
    return value


def config_version(name: str, value: str | Version) -> Version:
    """*value* as a :class:`Version`; a bad one is a :class:`ConfigError` naming the option."""
    try:
        return parse_version(value)
    except VersionParseError as exc:
        raise ConfigError(f"{name}: {exc}") from None


class Selection(NamedTuple):  # not a dataclass: importing dataclasses costs milliseconds
    """Outcome of reading the request headers: a served version or an error."""

    version: Version | None
    #: None, CODE_MALFORMED or CODE_UNSUPPORTED
    error: str | None = None
    requested: str | None = None
    #: which header the value came from (for messages)
    header: str | None = None


def _from_standard(value: str, service_types: frozenset[str]) -> tuple[str | None, bool]:
    """Our entry in an ``OpenStack-API-Version`` value: ``(version text, found)``.

    Entries are comma-joined (repeated header lines arrive joined by the
    server); the last entry for our service wins.  A matching service with no
    version is malformed (returned as the empty string).
    """
    for entry in reversed(value.split(",")):
        parts = entry.split()
        if not parts or parts[0].lower() not in service_types:
            continue
        if len(parts) != 2:
            return " ".join(parts[1:]), True
        return parts[1], True
    return None, False


def _last_element(value: str) -> str | None:
    """The last non-empty element of a comma-separated header value."""
    for element in reversed(value.split(",")):
        stripped = element.strip(" \t")
        if stripped:
            return stripped
    return None


def select_version(
    standard: str | None,
    legacy: str | None,
    *,
    service_types: frozenset[str],
    min_version: Version,
    max_version: Version,
    legacy_header: str | None = None,
) -> Selection:
    """Pick the version to serve from the raw header values (``None`` when absent).

    The standard header wins over the legacy one; no header -> *min_version*;
    ``latest`` (any case) -> *max_version*.  Either header sent several times (joined
    with commas by the server): the last value wins.
    """
    text: str | None = None
    header: str | None = None
    if standard:
        if len(standard) > MAX_HEADER_LENGTH:
            return Selection(None, CODE_MALFORMED, None, STANDARD_HEADER)
        found_text, found = _from_standard(standard, service_types)
        if found:
            text, header = found_text, STANDARD_HEADER
    if header is None and legacy is not None:
        if len(legacy) > MAX_HEADER_LENGTH:
            return Selection(None, CODE_MALFORMED, None, legacy_header)
        # The same rule as the standard header: repeated lines arrive comma-joined (RFC 9110
        # §5.3), empty list elements are skipped (§5.6.1), and the last one wins.
        last = _last_element(legacy)
        if last:
            text, header = last, legacy_header
    if header is None or text is None:
        return Selection(min_version)
    if text.lower() == LATEST:
        return Selection(max_version, None, text, header)
    try:
        version = parse_version(text)
    except VersionParseError:
        return Selection(None, CODE_MALFORMED, text[:MAX_VERSION_LENGTH], header)
    if not min_version <= version <= max_version:
        return Selection(None, CODE_UNSUPPORTED, text, header)
    return Selection(version, None, text, header)


def unsupported_detail(requested: str, lo: Version, hi: Version) -> str:
    """The message of a 406 for a well-formed version outside ``[lo, hi]``."""
    # Ironic's own wording, so tooling that greps it keeps working.
    version = parse_version(requested)
    if version.major != hi.major:
        return (
            f"Mutually exclusive versions requested. Version {requested} requested but not "
            f"supported by this service. The supported version range is: [{lo}, {hi}]."
        )
    return (
        f"Version {requested} was requested but the minor version is not supported by this "
        f"service. The supported version range is: [{lo}, {hi}]."
    )


def merge_vary(value: str, ours: Sequence[tuple[str, str]]) -> str:
    """One ``Vary`` value from the app's *value* (its ``Vary`` lines comma-joined) and *ours*
    (``(name, lower-case name)`` pairs): the app's tokens (``*`` stays ``*``), then the names
    of *ours* it lacked."""
    tokens = []
    for token in value.split(","):
        token = token.strip()
        if token:
            tokens.append(token)
    if "*" in tokens:
        return "*"
    seen = {token.lower() for token in tokens}
    tokens.extend(name for name, lowered in ours if lowered not in seen)
    return ", ".join(tokens)


class Served(NamedTuple):
    """A request that is served: its version and the headers that carry it."""

    version: Version
    #: the range headers, the served version in the legacy and standard headers, and at a
    #: deprecated version the deprecation headers (no Vary)
    response_headers: _Headers
    #: the request's version headers as the app should read them, exactly *version*: the
    #: standard header first, then the legacy one (if the service has one)
    request_headers: _Headers
    #: served below the ``deprecated_below`` floor
    deprecated: bool = False

    @property
    def outcome(self) -> str:
        """The metrics outcome (:mod:`apimw.metrics`): ``served`` or ``deprecated``."""
        return "deprecated" if self.deprecated else "served"


class Negotiator:
    """One service's negotiation (its type, range and header names), validated at construction.

    :meth:`negotiate` maps the raw values of the standard and legacy request headers to a
    :class:`Served` outcome or the :class:`HTTPProblem` to answer.  It is not cached:
    the middleware keeps what it derives from the outcome, per header values.
    """

    __slots__ = (
        "deprecated_below",
        "deprecation",
        "legacy_header",
        "malformed_status",
        "max_header",
        "max_version",
        "min_header",
        "min_version",
        "owned",
        "range_headers",
        "service_type",
        "service_types",
        "vary",
    )

    def __init__(
        self,
        *,
        service_type: str,
        min_version: str | Version,
        max_version: str | Version,
        legacy_header: str | None = None,
        min_header: str | None = None,
        max_header: str | None = None,
        pin_max_version: str | Version | None = None,
        error_profile: str = "api-sig",
        service_aliases: str | Sequence[str] = (),
        deprecated_below: str | Version | None = None,
        deprecated_since: object = None,
        sunset: object = None,
        deprecation_link: str | None = None,
    ) -> None:
        self.service_type = check_token("service_type", service_type)
        self.min_version = config_version("min_version", min_version)
        self.max_version = config_version("max_version", max_version)
        if self.max_version < self.min_version:
            raise ConfigError(f"max_version {self.max_version} is below min_version {self.min_version}")
        if pin_max_version is not None:
            pinned = config_version("pin_max_version", pin_max_version)
            if not self.min_version <= pinned <= self.max_version:
                raise ConfigError(
                    f"pin_max_version {pinned} is outside [{self.min_version}, {self.max_version}]"
                )
            self.max_version = pinned
        self.malformed_status = 406 if check_profile(error_profile) == "ironic" else 400
        self.service_types = frozenset(
            check_token("service_aliases", s).lower() for s in (service_type, *as_list(service_aliases))
        )
        self.legacy_header = None if legacy_header is None else check_token("legacy_header", legacy_header)
        if legacy_header is not None and legacy_header.lower().endswith("-version"):
            base = legacy_header[: -len("-Version")]
        else:
            base = "OpenStack-API"
        self.min_header = check_token("min_header", min_header or f"{base}-Minimum-Version")
        self.max_header = check_token("max_header", max_header or f"{base}-Maximum-Version")
        #: the request headers the answer depends on, for ``Vary``
        self.vary = (STANDARD_HEADER, legacy_header) if legacy_header else (STANDARD_HEADER,)
        self.range_headers = (
            (self.min_header, str(self.min_version)),
            (self.max_header, str(self.max_version)),
        )
        #: versions below it are deprecated (above max_version: the whole major version is)
        self.deprecated_below: Version | None = None
        self.deprecation: Deprecation | None = None
        signalled = (self.min_header, self.max_header, *self.vary, "Vary")
        if deprecated_below is not None:
            floor = config_version("deprecated_below", deprecated_below)
            if floor <= self.min_version:
                raise ConfigError(
                    f"deprecated_below {floor} deprecates nothing: it must be above min_version "
                    f"{self.min_version} (above max_version {self.max_version} deprecates every version)"
                )
            if deprecated_since is None:
                raise ConfigError(
                    "deprecated_below needs deprecated_since: the date the versions below it were (or will "
                    "be) deprecated, which the Deprecation header carries (RFC 9745)"
                )
            self.deprecated_below = floor
            self.deprecation = Deprecation.build(deprecated_since, sunset, deprecation_link)
            signalled += (DEPRECATION_HEADER, SUNSET_HEADER)
        elif deprecated_since is not None or sunset is not None or deprecation_link is not None:
            raise ConfigError("deprecated_since, sunset and deprecation_link need deprecated_below")
        #: the response headers the middleware sets (lower case): the app's are replaced where
        #: ours are set (the deprecation headers: only at a deprecated version)
        self.owned = frozenset(h.lower() for h in signalled)

    def negotiate(self, standard: str | None, legacy: str | None) -> Served | HTTPProblem:
        """The outcome for the raw header values (``None`` when absent)."""
        selection = select_version(
            standard,
            legacy,
            service_types=self.service_types,
            min_version=self.min_version,
            max_version=self.max_version,
            legacy_header=self.legacy_header,
        )
        if selection.version is None:
            return self.problem(selection)
        text = str(selection.version)
        labels: _Headers = ((self.legacy_header, text),) if self.legacy_header else ()
        labels += ((STANDARD_HEADER, f"{self.service_type} {text}"),)
        # The app reads exactly the served version: our entry only in the standard header,
        # whatever the client sent (`latest`, an alias, nothing), so an app that negotiates
        # by itself serves what the response is labelled with.
        response_headers = self.range_headers + labels
        deprecated = self.deprecated_below is not None and selection.version < self.deprecated_below
        if deprecated:
            assert self.deprecation is not None  # noqa: S101 - set with deprecated_below
            response_headers += self.deprecation.headers
        return Served(selection.version, response_headers, labels[::-1], deprecated)

    def problem(self, selection: Selection) -> HTTPProblem:
        """The 400/406 for a selection that serves no version."""
        lo, hi = self.min_version, self.max_version
        extra = {"min_version": str(lo), "max_version": str(hi)}
        header = selection.header or STANDARD_HEADER
        if selection.error == CODE_UNSUPPORTED and selection.requested is not None:
            detail = unsupported_detail(selection.requested, lo, hi)
            return HTTPProblem(406, CODE_UNSUPPORTED, detail, extra=extra)
        detail = f"Invalid value for {header} header: expected MAJOR.MINOR or 'latest' within [{lo}, {hi}]."
        return HTTPProblem(self.malformed_status, CODE_MALFORMED, detail, extra=extra)
