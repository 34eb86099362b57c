"""Microversion negotiation: ``OpenStack-API-Version`` and a service's legacy header.

``MicroversionMiddleware`` decides which version a request is served at,
answers 400/406 for malformed or unsupported versions, and puts the
Minimum/Maximum headers, the served version and one merged ``Vary`` on every
response.  The served :class:`~apimw.Version` goes into
``environ["apimw.microversion"]``; app code gates features on it with
:func:`require_version`, :class:`VersionGate` and :class:`VersionedFields`.

Parsing is sans-IO (:func:`select_version`) so it can be tested without WSGI.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from apimw import discovery as _discovery
from apimw._config import (
    Option,
    as_bool,
    as_list,
    as_optional_str,
    as_str,
    integration,
)
from apimw._microversion_type import ENVIRON_VERSION, LATEST, MAX_VERSION_LENGTH, Version, parse_version
from apimw.errors import (
    ENVIRON_PROFILE,
    ConfigError,
    HTTPProblem,
    VersionParseError,
    check_profile,
    respond_with_problem,
)

if TYPE_CHECKING:
    from _typeshed import OptExcInfo
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "CODE_FEATURE_UNAVAILABLE",
    "CODE_MALFORMED",
    "CODE_UNSUPPORTED",
    "ENVIRON_VERSION",
    "GROUP",
    "OPTIONS",
    "STANDARD_HEADER",
    "MicroversionMiddleware",
    "VersionGate",
    "VersionedFields",
    "filter_factory",
    "list_opts",
    "oslo_hook",
    "require_version",
    "select_version",
    "served_version",
    "wrap_flask",
]

STANDARD_HEADER: Final = "OpenStack-API-Version"
_STANDARD_ENVIRON: Final = "HTTP_OPENSTACK_API_VERSION"

CODE_MALFORMED: Final = "microversion.malformed"
CODE_UNSUPPORTED: Final = "microversion.unsupported"
CODE_FEATURE_UNAVAILABLE: Final = "microversion.feature-unavailable"

#: Longest header value we look at; longer values are malformed (bounded work per request).
_MAX_HEADER_LENGTH: Final = 1024
_CACHE_SIZE: Final = 512


def _environ_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


def _check_token(name: str, value: str) -> str:
    if not value or any(c.isspace() or c in ',:;"' for c in value) or not value.isascii():
        raise ConfigError(f"{name} must be a non-empty HTTP token, got {value!r}")
    return value


def _config_version(name: str, value: str | Version) -> Version:
    try:
        return parse_version(value)
    except VersionParseError as exc:
        raise ConfigError(f"{name}: {exc}") from None


# -- sans-IO selection ------------------------------------------------------------------


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
        if len(standard) > _MAX_HEADER_LENGTH:
            return Selection(None, CODE_MALFORMED, None, STANDARD_HEADER)
        found_text, found = _from_standard(standard, service_types)
        if found:
            text, header = found_text, STANDARD_HEADER
    if header is None and legacy is not None:
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


def _unsupported_detail(requested: str, lo: Version, hi: Version) -> str:
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


# -- app-side gates ---------------------------------------------------------------------


def served_version(environ: Mapping[str, Any]) -> Version | None:
    """The version this request is served at, or ``None`` outside the middleware."""
    version = environ.get(ENVIRON_VERSION)
    return version if isinstance(version, Version) else None


def _gate_problem(
    what: str,
    served: Version | None,
    lo: Version | None,
    hi: Version | None,
    status: int,
    template: str | None = None,
) -> HTTPProblem:
    if template is not None:
        detail = template.format(what=what, required=lo, until=hi, served=served)
    elif lo is not None and (served is None or served < lo):
        detail = f"{what} requires microversion {lo} or later; the request was served at {served}."
    else:
        detail = f"{what} is not available after microversion {hi}; the request was served at {served}."
    extra: dict[str, Any] = {"served_version": None if served is None else str(served)}
    extra["required_version"] = None if lo is None else str(lo)
    if hi is not None:
        extra["until_version"] = str(hi)
    return HTTPProblem(status, CODE_FEATURE_UNAVAILABLE, detail, extra=extra)


def require_version(
    environ: Mapping[str, Any],
    min_version: str | Version | None,
    max_version: str | Version | None = None,
    *,
    what: str,
    status: int = 406,
    detail: str | None = None,
) -> None:
    """Raise :class:`HTTPProblem` (code ``microversion.feature-unavailable``) unless the
    served version is within ``[min_version, max_version]``.

    The error names the required version, so a client can tell it from a range 406
    (code ``microversion.unsupported``).  Use ``status=404`` for whole routes.  *detail*
    is an optional ``str.format`` template for the message (a service keeping the wording
    its clients know): ``{what}``, ``{required}``, ``{until}``, ``{served}``.
    """
    VersionGate(min_version, max_version, what=what, status=status, detail=detail).check(environ)


class VersionGate:
    """ "This route / field / parameter exists from ``since`` (until ``until``)".

    Bounds are parsed once, at construction.  ``gate.allows(environ)`` answers
    a bool, ``gate.check(environ)`` raises, ``gate.wrap(app)`` gates a WSGI app.
    """

    __slots__ = ("detail", "hi", "lo", "status", "what")

    def __init__(
        self,
        since: str | Version | None,
        until: str | Version | None = None,
        *,
        what: str,
        status: int = 406,
        detail: str | None = None,
    ) -> None:
        self.lo = None if since is None else _config_version("since", since)
        self.hi = None if until is None else _config_version("until", until)
        if self.lo is not None and self.hi is not None and self.hi < self.lo:
            raise ConfigError(f"{what}: until {self.hi} is below since {self.lo}")
        self.what = what
        self.status = status
        if detail is not None:
            try:
                detail.format(what=what, required=self.lo, until=self.hi, served=self.lo)
            except (KeyError, IndexError, ValueError) as exc:
                raise ConfigError(f"{what}: bad detail template {detail!r}: {exc}") from None
        self.detail = detail

    def allows_version(self, version: Version | None) -> bool:
        if version is None:
            return self.lo is None
        return version.matches(self.lo, self.hi)

    def allows(self, environ: Mapping[str, Any]) -> bool:
        return self.allows_version(served_version(environ))

    def check(self, environ: Mapping[str, Any]) -> None:
        served = served_version(environ)
        if not self.allows_version(served):
            raise _gate_problem(self.what, served, self.lo, self.hi, self.status, self.detail)

    def wrap(self, app: WSGIApplication) -> WSGIApplication:
        def gated(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            served = served_version(environ)
            if not self.allows_version(served):
                problem = _gate_problem(self.what, served, self.lo, self.hi, self.status, self.detail)
                return respond_with_problem(environ, start_response, problem)
            return app(environ, start_response)

        return gated


class VersionedFields:
    """Fields of a resource and the version each appeared in (and, optionally, left).

    ``VersionedFields({"name": "1.5", "description": "1.51"})``; fields not named
    exist at every version.  ``visible(version)`` is cached per version.
    """

    def __init__(self, since: Mapping[str, str | Version], until: Mapping[str, str | Version] = ()):  # type: ignore[assignment]
        self._gates = {
            name: VersionGate(lo, dict(until).get(name), what=f"Field {name!r}") for name, lo in since.items()
        }
        for name, hi in dict(until).items():
            self._gates.setdefault(name, VersionGate(None, hi, what=f"Field {name!r}"))
        self._hidden_cache: dict[Version | None, frozenset[str]] = {}

    def hidden(self, version: Version | None) -> frozenset[str]:
        """Field names that do not exist at *version*."""
        cached = self._hidden_cache.get(version)
        if cached is None:
            cached = frozenset(n for n, g in self._gates.items() if not g.allows_version(version))
            if len(self._hidden_cache) < _CACHE_SIZE:
                self._hidden_cache[version] = cached
        return cached

    def filter(self, doc: Mapping[str, Any], version: Version | None) -> dict[str, Any]:
        """A copy of *doc* without the fields that do not exist at *version*."""
        hidden = self.hidden(version)
        return {k: v for k, v in doc.items() if k not in hidden}

    def check(self, names: Iterable[str], environ: Mapping[str, Any], *, status: int = 406) -> None:
        """Raise for the first field in *names* that does not exist at the served version."""
        served = served_version(environ)
        hidden = self.hidden(served)
        for name in names:
            if name in hidden:
                gate = self._gates[name]
                raise _gate_problem(gate.what, served, gate.lo, gate.hi, status, gate.detail)


# -- the middleware ---------------------------------------------------------------------

#: served version, response headers, the version headers forwarded to the app
_Cached = tuple[Version, list[tuple[str, str]], dict[str, str]] | HTTPProblem


class MicroversionMiddleware:
    """Negotiate the microversion of every request (see the module docstring).

    Options (keyword-only; the paste.deploy ini keys have the same names):

    service_type
        the service type in ``OpenStack-API-Version: <service_type> X.Y`` (e.g. ``baremetal``).
    min_version, max_version
        the supported range, ``"1.1"`` .. ``"1.115"``.
    legacy_header
        the service's own request header, e.g. ``X-OpenStack-Ironic-API-Version``.
        The standard header wins when both are sent.
    min_header, max_header
        names of the range headers on every response; default from the legacy
        header (``X-OpenStack-Ironic-API-Minimum-Version``) or ``OpenStack-API-Minimum-Version``.
    pin_max_version
        advertise and serve at most this version (rolling upgrades: pin the
        new release to the old one's maximum until every node is upgraded).
    error_profile
        ``api-sig`` (malformed -> 400) or ``ironic`` (malformed -> 406, Ironic envelope).
    service_aliases
        other names accepted as our service type in the standard header.
    discovery
        answer ``GET``/``HEAD`` ``/`` and ``/v{major}`` with Ironic-shaped
        discovery documents (``discovery_name``, ``discovery_description``,
        ``discovery_resources``, ``public_url``).  Place this middleware before
        authentication so that discovery stays unauthenticated.
    """

    def __init__(
        self,
        app: WSGIApplication,
        *,
        service_type: str,
        min_version: str | Version,
        max_version: str | Version,
        legacy_header: str | None = None,
        min_header: str | None = None,
        max_header: str | None = None,
        pin_max_version: str | Version | None = None,
        error_profile: str = "api-sig",
        service_aliases: Sequence[str] = (),
        discovery: bool = False,
        discovery_name: str = "",
        discovery_description: str = "",
        discovery_resources: Sequence[str] = (),
        public_url: str | None = None,
    ) -> None:
        self.app = app
        self.service_type = _check_token("service_type", service_type)
        self.min_version = _config_version("min_version", min_version)
        self.max_version = _config_version("max_version", max_version)
        if self.max_version < self.min_version:
            raise ConfigError(f"max_version {self.max_version} is below min_version {self.min_version}")
        if pin_max_version is not None:
            pinned = _config_version("pin_max_version", pin_max_version)
            if not self.min_version <= pinned <= self.max_version:
                raise ConfigError(
                    f"pin_max_version {pinned} is outside [{self.min_version}, {self.max_version}]"
                )
            self.max_version = pinned
        self.error_profile = check_profile(error_profile)
        self.malformed_status = 406 if error_profile == "ironic" else 400
        self.service_types = frozenset(
            _check_token("service_aliases", s).lower() for s in (service_type, *service_aliases)
        )
        self.legacy_header = None if legacy_header is None else _check_token("legacy_header", legacy_header)
        self._legacy_environ = None if legacy_header is None else _environ_key(legacy_header)
        if legacy_header is not None and legacy_header.lower().endswith("-version"):
            base = legacy_header[: -len("-Version")]
        else:
            base = "OpenStack-API"
        self.min_header = _check_token("min_header", min_header or f"{base}-Minimum-Version")
        self.max_header = _check_token("max_header", max_header or f"{base}-Maximum-Version")

        vary_names = [STANDARD_HEADER] + ([legacy_header] if legacy_header else [])
        self._vary_value = ", ".join(vary_names)
        self._vary_lower = tuple(v.lower() for v in vary_names)
        self._range_headers = [
            (self.min_header, str(self.min_version)),
            (self.max_header, str(self.max_version)),
        ]
        owned = {self.min_header, self.max_header, STANDARD_HEADER, "vary"}
        if legacy_header:
            owned.add(legacy_header)
        self._owned_lower = frozenset(h.lower() for h in owned)
        self._vary_header = ("Vary", self._vary_value)
        self._cache: dict[tuple[str | None, str | None], _Cached] = {}

        self.discovery = discovery
        if discovery:
            self._discovery = _discovery.DiscoveryResponder(
                min_version=self.min_version,
                max_version=self.max_version,
                name=discovery_name,
                description=discovery_description,
                resources=tuple(discovery_resources),
                public_url=public_url,
            )

    # headers for a served version, built once per version
    def _served_headers(self, version: Version) -> list[tuple[str, str]]:
        text = str(version)
        headers = list(self._range_headers)
        if self.legacy_header:
            headers.append((self.legacy_header, text))
        headers.append((STANDARD_HEADER, f"{self.service_type} {text}"))
        return headers

    def _forward(self, version: Version) -> dict[str, str]:
        """The request's version headers as the app should read them: exactly the served version.

        An app that negotiates by itself (Ironic behind a lower ``max_version``) then serves
        what the response is labelled with.  The standard header carries our entry only.
        """
        forward = {_STANDARD_ENVIRON: f"{self.service_type} {version}"}
        if self._legacy_environ is not None:
            forward[self._legacy_environ] = str(version)
        return forward

    def _problem(self, selection: Selection) -> HTTPProblem:
        lo, hi = self.min_version, self.max_version
        extra = {"min_version": str(lo), "max_version": str(hi)}
        header = selection.header or STANDARD_HEADER
        if selection.error == CODE_UNSUPPORTED and selection.requested is not None:
            detail = _unsupported_detail(selection.requested, lo, hi)
            return HTTPProblem(406, CODE_UNSUPPORTED, detail, extra=extra)
        detail = f"Invalid value for {header} header: expected MAJOR.MINOR or 'latest' within [{lo}, {hi}]."
        return HTTPProblem(self.malformed_status, CODE_MALFORMED, detail, extra=extra)

    def _select(self, standard: str | None, legacy: str | None) -> _Cached:
        key = (standard, legacy)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        selection = select_version(
            standard,
            legacy,
            service_types=self.service_types,
            min_version=self.min_version,
            max_version=self.max_version,
            legacy_header=self.legacy_header,
        )
        result: _Cached
        if selection.version is None:
            result = self._problem(selection)
        else:
            result = (selection.version, self._served_headers(selection.version), self._forward(selection.version))
        if len(self._cache) >= _CACHE_SIZE:
            self._cache.clear()  # bounded: junk header values cannot grow memory
        self._cache[key] = result
        return result

    def _merge(self, headers: list[tuple[str, str]], ours: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The app's headers minus ours, plus ours and one merged Vary."""
        owned = self._owned_lower
        for name, _ in headers:
            if name.lower() in owned:
                break
        else:  # the usual case: the app set none of our headers
            return [*headers, *ours, self._vary_header]
        merged: list[tuple[str, str]] = []
        vary_tokens: list[str] = []
        for name, value in headers:
            lowered = name.lower()
            if lowered in owned:
                if lowered == "vary":
                    vary_tokens.extend(t.strip() for t in value.split(",") if t.strip())
                continue
            merged.append((name, value))
        merged.extend(ours)
        if not vary_tokens:
            merged.append(("Vary", self._vary_value))
        elif "*" in vary_tokens:
            merged.append(("Vary", "*"))
        else:
            seen = {t.lower() for t in vary_tokens}
            vary_tokens.extend(
                v
                for v, lo in zip(self._vary_value.split(", "), self._vary_lower, strict=True)
                if lo not in seen
            )
            merged.append(("Vary", ", ".join(vary_tokens)))
        return merged

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        legacy = environ.get(self._legacy_environ) if self._legacy_environ else None
        result = self._select(environ.get(_STANDARD_ENVIRON), legacy)
        environ[ENVIRON_PROFILE] = self.error_profile
        if isinstance(result, HTTPProblem):
            # No version was served: range headers and Vary only.
            extra = [*self._range_headers, ("Vary", self._vary_value)]
            return respond_with_problem(environ, start_response, result, extra_headers=extra)

        version, ours, forward = result
        environ[ENVIRON_VERSION] = version
        environ.update(forward)
        merge = self._merge
        started = False

        def _start_response(
            status: str, headers: list[tuple[str, str]], exc_info: OptExcInfo | None = None
        ) -> Callable[[bytes], object]:
            nonlocal started
            if started:  # replacing (PEP 3333): the caller needs exc_info, and re-raises it if sent
                return start_response(status, merge(headers, ours), exc_info)
            # The first call: there is nothing to replace, so an error the app handled itself
            # is an answer; with exc_info, webob's get_response would re-raise it instead.
            started = True
            return start_response(status, merge(headers, ours))

        if self.discovery:
            answered = self._discovery(environ, _start_response, version)
            if answered is not None:
                return answered
        try:
            return self.app(environ, _start_response)
        except HTTPProblem as problem:
            # App code raised a gate or another apimw problem: render it here, replacing the
            # answer the app had started (if any; only then is exc_info passed).
            return respond_with_problem(
                environ, _start_response, problem, exc_info=sys.exc_info() if started else None
            )


# -- integration ------------------------------------------------------------------------


def _version_option(value: str) -> Version:
    return _config_version("version", value.strip())


def _optional_version_option(value: str) -> Version | None:
    return None if not value.strip() else _version_option(value)


OPTIONS: Final = (
    Option("service_type", as_str, None, "Service type in OpenStack-API-Version (e.g. baremetal).",
           required=True),
    Option("min_version", _version_option, None, "Lowest supported microversion, e.g. 1.1.",
           required=True),
    Option("max_version", _version_option, None, "Highest supported microversion, e.g. 1.115.",
           required=True),
    Option("legacy_header", as_optional_str, None,
           "Service-specific request header, e.g. X-OpenStack-Ironic-API-Version."),
    Option("min_header", as_optional_str, None, "Response header naming the minimum version."),
    Option("max_header", as_optional_str, None, "Response header naming the maximum version."),
    Option("pin_max_version", _optional_version_option, None,
           "Serve and advertise at most this version (rolling upgrades)."),
    Option("error_profile", as_str, "api-sig", "Error body profile: api-sig (400 on malformed) or "
           "ironic (406 on malformed, Ironic envelope)."),
    Option("service_aliases", as_list, [], "Other service type names accepted.", kind="list"),
    Option("discovery", as_bool, False, "Answer GET/HEAD / and /v{major} discovery documents.",
           kind="bool"),
    Option("discovery_name", as_str, "", "Service name in the root discovery document."),
    Option("discovery_description", as_str, "", "Description in the root discovery document."),
    Option("discovery_resources", as_list, [], "Resource collections linked from /v{major}.",
           kind="list"),
    Option("public_url", as_optional_str, None,
           "Base URL for discovery links (default: from the request)."),
)  # fmt: skip

GROUP: Final = "apimw_microversion"
OSLO_GROUP: Final = GROUP  # the name before GROUP, kept

filter_factory, wrap_flask, list_opts, oslo_hook = integration(MicroversionMiddleware, OPTIONS, GROUP)


def __getattr__(name: str) -> Any:
    # ``OPTS``: the oslo.config options, built on first use so oslo.config stays optional.
    if name == "OPTS":
        return list_opts()[0][1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
