"""Microversion negotiation: ``OpenStack-API-Version`` and a service's legacy header.

``MicroversionMiddleware`` decides which version a request is served at,
answers 400/406 for malformed or unsupported versions, and puts the
Minimum/Maximum headers, the served version and one merged ``Vary`` on every
response.  The served :class:`~apimw.Version` goes into
``environ["apimw.microversion"]``, and into the request's version headers, so an
app that negotiates by itself serves the same version; app code gates features on
it with :func:`require_version`, :class:`VersionGate` and :class:`VersionedFields`.

This module is the WSGI glue.  The rules are sans-IO, in
:mod:`apimw._microversion_negotiation` (:func:`select_version`, re-exported here), so
they can be tested without WSGI; the :class:`Version` value is in
:mod:`apimw._microversion_type`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from apimw import discovery as _discovery
from apimw._config import (
    Option,
    as_bool,
    as_list,
    as_optional_str,
    as_str,
    integration,
)
from apimw._microversion_negotiation import (
    CODE_MALFORMED,
    CODE_UNSUPPORTED,
    STANDARD_HEADER,
    Negotiator,
    merge_response_headers,
    select_version,
)
from apimw._microversion_negotiation import Selection as Selection
from apimw._microversion_negotiation import config_version as _config_version
from apimw._microversion_type import ENVIRON_VERSION, Version
from apimw._microversion_type import parse_version as parse_version
from apimw._wsgi import WrappedApp
from apimw.errors import (
    ENVIRON_PROFILE,
    ConfigError,
    HTTPProblem,
    respond_with_problem,
)
from apimw.metrics import Metrics, as_metrics, problem_outcome

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

#: ``environ`` key of the standard request header
_ENVIRON_STANDARD: Final = "HTTP_OPENSTACK_API_VERSION"
_STANDARD_LOWER: Final = STANDARD_HEADER.lower()

CODE_FEATURE_UNAVAILABLE: Final = "microversion.feature-unavailable"

_CACHE_SIZE: Final = 512


def _environ_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


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
    allow: tuple[str, ...] = (),
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
    headers = [("Allow", ", ".join(allow))] if allow else ()
    return HTTPProblem(status, CODE_FEATURE_UNAVAILABLE, detail, extra=extra, headers=headers)


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

    Options (keyword-only):

    what
        what the gate guards, named in the error (``"Allocations"``).
    status
        the status outside the range: 406 (a field, parameter or verb the version does not
        know), 404 or 405; :meth:`route` and :meth:`method` declare the last two.
    detail
        a ``str.format`` template of the error message (a service keeping the wording its
        clients know): ``{what}``, ``{required}``, ``{until}``, ``{served}``.
    allow
        the ``Allow`` header of the error (the methods the route answers at that version),
        none when empty.

    The two answers a client knows for a route outside its versions:

    * ``VersionGate.route("1.52", what="Allocations")``: the route does not exist yet, so
      every method on it answers 404, as an unknown path does;
    * ``VersionGate.method("1.52", what="Creating allocations")``: the route exists but the
      version does not allow this method on it: 405.
    """

    __slots__ = ("allow", "detail", "hi", "lo", "status", "what")

    @classmethod
    def route(
        cls,
        since: str | Version | None,
        until: str | Version | None = None,
        *,
        what: str,
        detail: str | None = None,
    ) -> VersionGate:
        """A route that exists only from *since* (until *until*): 404 at other versions."""
        return cls(since, until, what=what, status=404, detail=detail)

    @classmethod
    def method(
        cls,
        since: str | Version | None,
        until: str | Version | None = None,
        *,
        what: str,
        detail: str | None = None,
        allow: Sequence[str] = (),
    ) -> VersionGate:
        """A method allowed only from *since* (until *until*) on a route that exists: 405 at
        other versions, with ``Allow: <allow>`` when given."""
        return cls(since, until, what=what, status=405, detail=detail, allow=allow)

    def __init__(
        self,
        since: str | Version | None,
        until: str | Version | None = None,
        *,
        what: str,
        status: int = 406,
        detail: str | None = None,
        allow: Sequence[str] = (),
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
        self.allow = tuple(method.upper() for method in allow)

    def problem(self, served: Version | None) -> HTTPProblem:
        """The error this gate answers at *served* (a version outside its range)."""
        return _gate_problem(self.what, served, self.lo, self.hi, self.status, self.detail, self.allow)

    def allows_version(self, version: Version | None) -> bool:
        if version is None:
            return self.lo is None
        return version.matches(self.lo, self.hi)

    def allows(self, environ: Mapping[str, Any]) -> bool:
        return self.allows_version(served_version(environ))

    def check(self, environ: Mapping[str, Any]) -> None:
        served = served_version(environ)
        if not self.allows_version(served):
            raise self.problem(served)

    def wrap(self, app: WSGIApplication) -> WSGIApplication:
        def gated(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
            served = served_version(environ)
            if not self.allows_version(served):
                return respond_with_problem(environ, start_response, self.problem(served))
            return app(environ, start_response)

        return gated


class VersionedFields:
    """Fields of a resource and the version each appeared in (and, optionally, left).

    ``VersionedFields({"name": "1.5", "description": "1.51"})``; fields not named
    exist at every version.  ``hidden(version)`` is cached per version.
    """

    def __init__(self, since: Mapping[str, str | Version], until: Mapping[str, str | Version] = ()):  # type: ignore[assignment]
        self._gates = {
            name: VersionGate(lo, dict(until).get(name), what=f"Field {name!r}") for name, lo in since.items()
        }
        for name, hi in dict(until).items():
            self._gates.setdefault(name, VersionGate(None, hi, what=f"Field {name!r}"))
        self._hidden_cache: dict[Version | None, frozenset[str]] = {}

    def since(self, name: str) -> Version | None:
        """The version *name* appeared in (``None``: every version, or not a versioned field)."""
        gate = self._gates.get(name)
        return None if gate is None else gate.lo

    def visible(self, names: Iterable[str], version: Version | None) -> tuple[str, ...]:
        """The names of *names* that exist at *version*, in their order."""
        hidden = self.hidden(version)
        return tuple(n for n in names if n not in hidden)

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

#: What the middleware does for one pair of raw header values, built once: for a served
#: request ``(version, standard, legacy, headers, report, raw)``: the version, the values of the
#: standard and the legacy request headers forwarded to the app, the response headers to add
#: (``Vary`` last); for a refused one ``(None, "", "", problem, report, None)``.  *report* tells
#: the ``metrics`` object the outcome (``None`` without one).  *raw* is the same for ASGI, as
#: bytes: the response headers to add, and the rewrite of the request's header lines that
#: forwards the served version (the names whose lines are dropped, the lines appended; both
#: empty when the client sent exactly what is forwarded).
_Outcome = tuple[
    Version | None,
    str,
    str,
    Any,  # headers or problem
    Callable[[], None] | None,
    tuple[list[tuple[bytes, bytes]], frozenset[bytes], list[tuple[bytes, bytes]]] | None,
]

#: Read for the legacy header when the service has none: never set, so it reads ``None``.
_ENVIRON_NO_LEGACY: Final = "apimw.microversion.no-legacy-header"


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
    deprecated_below, deprecated_since, sunset, deprecation_link
        versions below ``deprecated_below`` are deprecated: their answers carry
        ``Deprecation: @<deprecated_since>`` (RFC 9745), ``Sunset`` (RFC 8594) and
        ``Link: <deprecation_link>; rel="deprecation"`` when those are set, and the
        discovery documents say so (see ``docs/microversion.md``).
    metrics
        an :class:`apimw.metrics.Metrics` told every request's outcome (served,
        deprecated, malformed, unsupported) and served version.
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
        discovery_resources: Sequence[_discovery.Resource] = (),
        public_url: str | None = None,
        deprecated_below: str | Version | None = None,
        deprecated_since: object = None,
        sunset: object = None,
        deprecation_link: str | None = None,
        metrics: Metrics | str | None = None,
    ) -> None:
        self.app = app  # the property below: also sets self._call_app
        negotiator = self.negotiator = Negotiator(
            service_type=service_type,
            min_version=min_version,
            max_version=max_version,
            legacy_header=legacy_header,
            min_header=min_header,
            max_header=max_header,
            pin_max_version=pin_max_version,
            error_profile=error_profile,
            service_aliases=service_aliases,
            deprecated_below=deprecated_below,
            deprecated_since=deprecated_since,
            sunset=sunset,
            deprecation_link=deprecation_link,
        )
        self.metrics = as_metrics(metrics)
        self.service_type = negotiator.service_type
        self.min_version, self.max_version = negotiator.min_version, negotiator.max_version
        self.error_profile = error_profile
        self.malformed_status = negotiator.malformed_status
        self.service_types = negotiator.service_types
        self.legacy_header = negotiator.legacy_header
        self.min_header, self.max_header = negotiator.min_header, negotiator.max_header
        # the legacy header's environ key, read and written; a service without one reads a key
        # that is never set and writes the standard header's value twice (cheaper than a test)
        self._legacy_read = _ENVIRON_NO_LEGACY if legacy_header is None else _environ_key(legacy_header)
        self._legacy_write = _ENVIRON_STANDARD if legacy_header is None else self._legacy_read
        self._legacy_lower = _STANDARD_LOWER if legacy_header is None else legacy_header.lower()
        self._vary_value = ", ".join(negotiator.vary)
        self._refused_headers = [*negotiator.range_headers, ("Vary", self._vary_value)]
        #: per standard header value, per legacy header value (two lookups are cheaper than a
        #: tuple key's hash); at most _CACHE_SIZE outcomes in all
        self._outcomes: dict[str | None, dict[str | None, _Outcome]] = {}
        self._outcome_count = 0
        #: response header names, as the app spells them, known not to be ours (the hot path
        #: checks the app's headers against it instead of lower-casing each name)
        self._plain_names: set[str] = set()

        self.discovery = discovery
        if discovery:
            self._discovery = _discovery.DiscoveryResponder(
                min_version=self.min_version,
                max_version=self.max_version,
                name=discovery_name,
                description=discovery_description,
                resources=tuple(discovery_resources),
                public_url=public_url,
                deprecated_below=negotiator.deprecated_below,
                deprecation=negotiator.deprecation,
            )

    app = WrappedApp()  # the wrapped WSGI app (may be replaced)
    _call_app: WSGIApplication  # what calls it, bound by WrappedApp

    def _outcome(self, standard: str | None, legacy: str | None) -> _Outcome:
        """Negotiate once per pair of raw header values (bounded: junk cannot grow memory)."""
        served = self.negotiator.negotiate(standard, legacy)
        outcome: _Outcome
        metrics = self.metrics
        if isinstance(served, HTTPProblem):
            outcome_label, version_label = problem_outcome(served.code), ""
            outcome = (None, "", "", served, None, None)
        else:
            # the standard header first, the legacy one last (the same entry when there is none)
            forwarded = served.request_headers
            headers = [*served.response_headers, ("Vary", self._vary_value)]
            outcome_label, version_label = served.outcome, str(served.version)
            # the request's version headers the app would read differently from what is served
            sent = {self._legacy_lower: legacy, _STANDARD_LOWER: standard}  # standard wins a shared name
            changed = [(k.lower(), v) for k, v in forwarded if sent.get(k.lower()) != v]
            raw = (
                [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],  # ASGI's case
                frozenset(k.encode("latin-1") for k, _ in changed if sent.get(k) is not None),
                [(k.encode("latin-1"), v.encode("latin-1")) for k, v in changed],
            )
            outcome = (served.version, forwarded[0][1], forwarded[-1][1], headers, None, raw)
        if metrics is not None:  # told once per request, built once per outcome
            report = partial(metrics.microversion, outcome_label, version_label)
            outcome = (*outcome[:4], report, outcome[5])
        if self._outcome_count >= _CACHE_SIZE:
            self._outcomes.clear()
            self._outcome_count = 0
        self._outcomes.setdefault(standard, {})[legacy] = outcome
        self._outcome_count += 1
        return outcome

    def merge(self, headers: list[tuple[str, str]], ours: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The app's response *headers* minus ours, then *ours* (an outcome's, ``Vary`` last)
        and one merged ``Vary`` (sans-IO: the WSGI and the ASGI middleware both ask here)."""
        owned, plain = self.negotiator.owned, self._plain_names
        mine = False
        for name, _ in headers:
            if name.lower() in owned:
                mine = True
            elif len(plain) < _CACHE_SIZE:
                plain.add(name)
        if not mine:
            return [*headers, *ours]
        return merge_response_headers(headers, ours[:-1], owned, self.negotiator.vary)

    def negotiated(self, standard: str | None, legacy: str | None) -> _Outcome:
        """The outcome for a request's raw standard and legacy header values (``None``: absent),
        told to ``metrics``.  Sans-IO: the WSGI and the ASGI middleware both ask here."""
        try:
            outcome = self._outcomes[standard][legacy]
        except KeyError:
            outcome = self._outcome(standard, legacy)
        report = outcome[4]
        if report is not None:
            report()
        return outcome

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        version, forward_standard, forward_legacy, ours, _, _ = self.negotiated(
            environ.get(_ENVIRON_STANDARD), environ.get(self._legacy_read)
        )
        environ[ENVIRON_PROFILE] = self.error_profile
        if version is None:
            # No version was served: range headers and Vary only.
            return respond_with_problem(environ, start_response, ours, extra_headers=self._refused_headers)
        environ[ENVIRON_VERSION] = version
        # The request's version headers as the app should read them: an app that negotiates
        # by itself serves what we label.
        environ[_ENVIRON_STANDARD] = forward_standard
        environ[self._legacy_write] = forward_legacy
        plain = self._plain_names
        started = False

        def _start_response(
            status: str, headers: list[tuple[str, str]], exc_info: OptExcInfo | None = None
        ) -> Callable[[bytes], object]:
            nonlocal started
            for name, _ in headers:
                if name not in plain:  # ours, or not seen yet
                    headers = self.merge(headers, ours)
                    break
            else:  # the usual case: the app set none of our headers
                headers = [*headers, *ours]
            if started:  # replacing (PEP 3333): the caller needs exc_info, and re-raises it if sent
                return start_response(status, headers, exc_info)
            # The first call: there is nothing to replace, so an error the app handled itself
            # is an answer; with exc_info, webob's get_response would re-raise it instead.
            started = True
            return start_response(status, headers)

        if self.discovery:
            answered = self._discovery(environ, _start_response, version)
            if answered is not None:
                return answered
        try:
            return self._call_app(environ, _start_response)
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
    Option("deprecated_below", _optional_version_option, None,
           "Versions below this one are deprecated: their answers carry Deprecation (RFC 9745), "
           "Sunset and a deprecation Link; discovery marks them. Needs deprecated_since."),
    Option("deprecated_since", as_optional_str, None,
           "When the versions below deprecated_below were (or will be) deprecated: an HTTP-date, an "
           "ISO date (2026-11-01) or @<epoch seconds>; sent as Deprecation: @<epoch seconds>."),
    Option("sunset", as_optional_str, None,
           "When the deprecated versions may stop being served (same forms); sent as Sunset."),
    Option("deprecation_link", as_optional_str, None,
           "URL of the deprecation notice; sent as Link: <url>; rel=\"deprecation\"."),
    Option("metrics", as_metrics, None,
           "'package.module:attribute' naming an apimw.metrics.Metrics object told each outcome "
           "(e.g. apimw.metrics_prometheus:METRICS).", oslo=False),
)  # fmt: skip

GROUP: Final = "apimw_microversion"
OSLO_GROUP: Final = GROUP  # the name before GROUP, kept

filter_factory, wrap_flask, list_opts, oslo_hook, __getattr__ = integration(
    MicroversionMiddleware, OPTIONS, GROUP
)
