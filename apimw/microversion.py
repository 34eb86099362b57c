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

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Unpack

from apimw import _wsgi
from apimw._config import as_list, integration
from apimw._microversion_core import (
    Discover,
    MicroversionCore,
    MicroversionOptions,
    Refuse,
    Serve,
)
from apimw._microversion_core import wraps_microversion as wraps_microversion
from apimw._microversion_negotiation import (
    CODE_MALFORMED,
    CODE_UNSUPPORTED,
    STANDARD_HEADER,
    select_version,
)
from apimw._microversion_negotiation import Selection as Selection
from apimw._microversion_negotiation import config_version as _config_version
from apimw._microversion_options import GROUP, OPTION_DOCS, OPTIONS
from apimw._microversion_type import ENVIRON_VERSION, Version
from apimw._microversion_type import parse_version as parse_version
from apimw.discovery import request_base_url
from apimw.errors import (
    ENVIRON_PROFILE,
    ConfigError,
    HTTPProblem,
    respond_with_problem,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "CODE_FEATURE_UNAVAILABLE",
    "CODE_MALFORMED",
    "CODE_UNSUPPORTED",
    "ENVIRON_VERSION",
    "GROUP",
    "OPTIONS",
    "STANDARD_HEADER",
    "Discover",
    "MicroversionCore",
    "MicroversionMiddleware",
    "Refuse",
    "Serve",
    "VersionGate",
    "VersionedFields",
    "filter_factory",
    "list_opts",
    "oslo_hook",
    "require_version",
    "select_version",
    "served_version",
    "wrap_flask",
    "wraps_microversion",
]

#: ``environ`` key of the standard request header
_ENVIRON_STANDARD: Final = "HTTP_OPENSTACK_API_VERSION"

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
        allow: str | Sequence[str] = (),
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
        allow: str | Sequence[str] = (),
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
        self.allow = tuple(method.upper() for method in as_list(allow))  # "GET, PUT" as a paste ini reads it

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


class MicroversionMiddleware:
    """Negotiate the microversion of every request (see the module docstring).

    The rules are :class:`apimw._microversion_core.MicroversionCore`'s (``self.core``); this
    class moves a WSGI request to them and their decision back.

    Decisions are kept per pair of version header values, bounded (see
    :mod:`apimw._microversion_core`): a client choosing huge or ever new values holds no memory.
    """

    def __init__(self, app: WSGIApplication, **options: Unpack[MicroversionOptions]) -> None:
        self.app = app
        self.core = core = MicroversionCore(**options)
        #: the range served (``max_version`` lowered to ``pin_max_version`` when that is set)
        self.min_version, self.max_version = core.min_version, core.max_version
        # the environ keys of the version headers, read and written
        self._legacy_key = None if core.legacy_header is None else _environ_key(core.legacy_header)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        core = self.core
        legacy_key = self._legacy_key
        decision = core.decide(
            environ["REQUEST_METHOD"],
            environ.get("PATH_INFO", ""),
            environ.get(_ENVIRON_STANDARD),
            None if legacy_key is None else environ.get(legacy_key),
        )
        environ[ENVIRON_PROFILE] = core.error_profile
        if type(decision) is Refuse:
            # No version was served: range headers and Vary only.
            return respond_with_problem(
                environ, start_response, decision.problem, extra_headers=decision.headers
            )
        if type(decision) is Discover:
            environ[ENVIRON_VERSION] = decision.serve.version
            headers, body = core.document(decision, environ["REQUEST_METHOD"], request_base_url(environ))
            start_response("200 OK", headers)
            return [body] if body else []
        assert type(decision) is Serve  # noqa: S101 - the third kind of decision
        environ[ENVIRON_VERSION] = decision.version
        # The request's version headers as the app should read them: an app that negotiates
        # by itself serves what we label.
        environ[_ENVIRON_STANDARD] = decision.standard
        if legacy_key is not None:
            environ[legacy_key] = decision.legacy

        def with_ours(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
            return core.response_headers(headers, decision)

        start = _wsgi.StartResponse(start_response, with_ours)
        try:
            return self.app(environ, start)
        except HTTPProblem as problem:
            # App code raised a gate or another apimw problem: render it here, replacing the
            # answer the app had started (if any; only then is exc_info passed).
            return respond_with_problem(environ, start, problem, exc_info=start.exc_info())


MicroversionMiddleware.__doc__ = f"{MicroversionMiddleware.__doc__}{OPTION_DOCS}"


# -- integration ------------------------------------------------------------------------

filter_factory, wrap_flask, list_opts, oslo_hook, __getattr__ = integration(
    MicroversionMiddleware, OPTIONS, GROUP
)
