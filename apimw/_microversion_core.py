"""The microversion rules for one request, protocol-neutral: request facts in, a decision out.

:class:`MicroversionCore` holds one service's configuration.  Its :meth:`~MicroversionCore.decide`
takes what a request says (method, path, the raw values of the standard and the legacy
version headers, ``None`` when absent) and answers one of three named decisions:

- :class:`Refuse`: answer now with this problem (400/406), adding these headers;
- :class:`Discover`: answer now with a discovery document (:meth:`~MicroversionCore.document`);
- :class:`Serve`: call the app at this version; it reads these version header values; add
  these headers to its answer (:meth:`~MicroversionCore.response_headers`).

The core never sees a WSGI environ or an ASGI scope: the WSGI middleware
(:class:`apimw.microversion.MicroversionMiddleware`) and the ASGI one
(:class:`apimw.asgi.MicroversionMiddleware`) each move their protocol's request and answer to
and from it.  Decisions are kept per pair of header values, bounded: at most
:data:`CACHE_SIZE` of them, and never for a value longer than :data:`MAX_CACHED_VALUE`
characters (a client choosing huge or ever new values makes the core decide again, and
holds no memory).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, Required, TypedDict, Unpack

from apimw import discovery as _discovery
from apimw._microversion_negotiation import STANDARD_HEADER, Negotiator, merge_vary
from apimw._microversion_type import Version
from apimw.errors import ConfigError, HTTPProblem
from apimw.metrics import Metrics, as_metrics, problem_outcome

__all__ = [
    "CACHE_SIZE",
    "MAX_CACHED_VALUE",
    "Discover",
    "MicroversionCore",
    "MicroversionOptions",
    "Refuse",
    "Serve",
    "check_inside_microversion",
    "wraps_microversion",
]

#: At most this many decisions are kept (then the cache starts again).
CACHE_SIZE: Final = 512
#: Header values longer than this (together) are decided each time and never kept.  Real
#: values are short: ``baremetal 1.115``, ``compute 2.90, baremetal latest``.
MAX_CACHED_VALUE: Final = 128

Headers = tuple[tuple[str, str], ...]
RawHeaders = tuple[tuple[bytes, bytes], ...]


class MicroversionOptions(TypedDict, total=False):
    """The options of the microversion middlewares (documented in
    :class:`apimw.microversion.MicroversionMiddleware`'s docstring)."""

    service_type: Required[str]
    min_version: Required[str | Version]
    max_version: Required[str | Version]
    legacy_header: str | None
    min_header: str | None
    max_header: str | None
    pin_max_version: str | Version | None
    error_profile: str
    service_aliases: str | Sequence[str]
    discovery: bool
    discovery_name: str
    discovery_description: str
    discovery_resources: str | Sequence[_discovery.Resource]
    public_url: str | None
    deprecated_below: str | Version | None
    deprecated_since: object
    sunset: object
    deprecation_link: str | None
    metrics: Metrics | str | None


class Refuse(NamedTuple):
    """Answer now with *problem* (400 or 406), adding *headers* (the range headers, ``Vary``)."""

    problem: HTTPProblem
    headers: Headers


class Serve(NamedTuple):
    """Call the app at *version*.

    The app reads the request's version headers as *standard* and *legacy* (exactly the
    served version, whatever the client sent); *headers* are added to its answer (``Vary``
    last; merged with the app's by :meth:`MicroversionCore.response_headers`).  The ``raw_*``
    fields say the same in bytes for a byte-oriented protocol (ASGI): the headers to add
    (lower-case names), and the request header lines to drop and to add so that the app
    reads *standard* and *legacy* (both empty when the client sent exactly those).
    """

    version: Version
    headers: Headers
    standard: str
    #: ``None`` when the service has no legacy header
    legacy: str | None
    raw_headers: RawHeaders
    raw_dropped: frozenset[bytes]
    raw_added: RawHeaders
    #: the metrics outcome: ``served`` or ``deprecated``
    outcome: str
    #: the names (lower case) of the app's headers that *headers* replace (``Vary`` aside,
    #: which is merged)
    replaced: frozenset[str]


class Discover(NamedTuple):
    """Answer now with the discovery document *kind* (``root`` or ``major``), as served at
    *serve*'s version: :meth:`MicroversionCore.document` gives its headers and body."""

    serve: Serve
    kind: str


Decision = Refuse | Serve | Discover

#: the options that are not the :class:`Negotiator`'s
_NOT_NEGOTIATION: Final = frozenset(
    {"discovery", "discovery_name", "discovery_description", "discovery_resources", "public_url", "metrics"}
)


class MicroversionCore:
    """One service's microversion rules; the options are
    :class:`apimw.microversion.MicroversionMiddleware`'s, validated here (a bad one is a
    :class:`~apimw.errors.ConfigError`).  A list option also takes a string, read as a paste ini
    value is (:func:`apimw.config.as_list`: comma or newline separated)."""

    def __init__(self, **options: Unpack[MicroversionOptions]) -> None:
        # the options of the negotiation proper go to the Negotiator, which validates them
        negotiation = {key: value for key, value in options.items() if key not in _NOT_NEGOTIATION}
        negotiator = self.negotiator = Negotiator(**negotiation)  # type: ignore[arg-type]
        self.metrics = as_metrics(options.get("metrics"))
        self.error_profile = options.get("error_profile", "api-sig")
        self.service_type = negotiator.service_type
        self.min_version, self.max_version = negotiator.min_version, negotiator.max_version
        self.legacy_header = negotiator.legacy_header
        #: the response headers the rules set (lower case), as text and as ASGI names
        self.owned = negotiator.owned
        self.owned_raw = frozenset(name.encode("latin-1") for name in negotiator.owned)
        self._vary = ("Vary", ", ".join(negotiator.vary))
        #: the request headers our ``Vary`` names, with their lower-case names (to merge the app's)
        self._vary_names = tuple((name, name.lower()) for name in negotiator.vary)
        #: the app's ``Vary`` value -> the one merged with ours; bounded like the decisions
        self._merged_vary: dict[str, str] = {}
        self._refused_headers: Headers = (*negotiator.range_headers, self._vary)
        self._decisions: dict[tuple[str | None, str | None], Refuse | Serve] = {}
        self.discovery: _discovery.DiscoveryResponder | None = None
        if options.get("discovery", False):
            self.discovery = _discovery.DiscoveryResponder(
                min_version=self.min_version,
                max_version=self.max_version,
                name=options.get("discovery_name", ""),
                description=options.get("discovery_description", ""),
                resources=options.get("discovery_resources", ()),
                public_url=options.get("public_url"),
                deprecated_below=negotiator.deprecated_below,
                deprecation=negotiator.deprecation,
            )

    def decide(self, method: str, path: str, standard: str | None, legacy: str | None) -> Decision:
        """The decision for a request: its *method*, *path* (below the app's root) and the raw
        values of the standard and the legacy version headers (``None`` when absent; repeated
        lines joined with ``,``).  The outcome is told to ``metrics``."""
        key = (standard, legacy)
        decision = self._decisions.get(key)
        if decision is None:
            decision = self._decide(standard, legacy)
            if len(standard or "") + len(legacy or "") <= MAX_CACHED_VALUE:
                if len(self._decisions) >= CACHE_SIZE:
                    self._decisions.clear()
                self._decisions[key] = decision
        metrics = self.metrics
        if type(decision) is Refuse:
            if metrics is not None:
                metrics.microversion(problem_outcome(decision.problem.code), "")
            return decision
        assert type(decision) is Serve  # noqa: S101 - the cache holds Refuse and Serve only
        if metrics is not None:
            metrics.microversion(decision.outcome, str(decision.version))
        if self.discovery is not None and method in ("GET", "HEAD"):
            kind = self.discovery.kind(path)
            if kind is not None:
                return Discover(decision, kind)
        return decision

    def _decide(self, standard: str | None, legacy: str | None) -> Refuse | Serve:
        served = self.negotiator.negotiate(standard, legacy)
        if isinstance(served, HTTPProblem):
            return Refuse(served, self._refused_headers)
        headers = (*served.response_headers, self._vary)
        # the standard header first, the legacy one last (the same entry when there is none)
        forward = served.request_headers
        legacy_name = self.legacy_header.lower() if self.legacy_header else STANDARD_HEADER.lower()
        sent = {legacy_name: legacy, STANDARD_HEADER.lower(): standard}  # standard wins a shared name
        changed = [(name.lower(), value) for name, value in forward if sent.get(name.lower()) != value]
        return Serve(
            version=served.version,
            headers=headers,
            standard=forward[0][1],
            legacy=forward[-1][1] if self.legacy_header else None,
            raw_headers=tuple((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers),
            raw_dropped=frozenset(k.encode("latin-1") for k, _ in changed if sent.get(k) is not None),
            raw_added=tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in changed),
            outcome=served.outcome,
            replaced=self.owned.intersection(name.lower() for name, _ in served.response_headers),
        )

    def response_headers(self, app_headers: Sequence[tuple[str, str]], serve: Serve) -> list[tuple[str, str]]:
        """The app's answer's headers with *serve*'s, in one pass over the app's: its own
        values of the headers the rules set are replaced, and its ``Vary`` merged with ours into
        one (the last header).  An owned header the rules do not set this time (``Deprecation``
        at a version that is not deprecated) is the app's."""
        replaced = serve.replaced
        merged: list[tuple[str, str]] = []
        vary: list[str] = []
        for header in app_headers:
            lowered = header[0].lower()
            if lowered == "vary":
                vary.append(header[1])
            elif lowered not in replaced:
                merged.append(header)
        if not vary:
            merged.extend(serve.headers)
            return merged
        merged.extend(serve.headers[:-1])
        merged.append(("Vary", self._merge_vary(vary[0] if len(vary) == 1 else ", ".join(vary))))
        return merged

    def _merge_vary(self, value: str) -> str:
        """The app's ``Vary`` *value* merged with ours, kept per value (an app sends few)."""
        merged = self._merged_vary.get(value)
        if merged is None:
            merged = merge_vary(value, self._vary_names)
            if len(value) <= MAX_CACHED_VALUE:
                if len(self._merged_vary) >= CACHE_SIZE:
                    self._merged_vary.clear()
                self._merged_vary[value] = merged
        return merged

    def document(self, decision: Discover, method: str, base_url: str) -> tuple[list[tuple[str, str]], bytes]:
        """The 200 answer to *decision*: its headers (ours included) and body (empty for
        ``HEAD``).  *base_url* is the request's ``scheme://host[:port]/root`` (see
        :func:`apimw.discovery.base_url`); the ``public_url`` option wins over it."""
        assert self.discovery is not None  # noqa: S101 - Discover comes only with discovery on
        headers, body = self.discovery.document(decision.kind, method, base_url, decision.serve.version)
        return self.response_headers(headers, decision.serve), body


#: The attributes a middleware keeps the app it wraps in (``app``; oslo.middleware's
#: ``application``; Flask's ``wsgi_app``): :func:`wraps_microversion` follows them.
APP_ATTRIBUTES: Final = ("app", "application", "wsgi_app")


def wraps(app: object, is_middleware: Callable[[object], bool]) -> bool:
    """Whether a middleware for which *is_middleware* holds is below *app* in its chain of
    middlewares (*app* included).

    For an apimw middleware to refuse, when the pipeline is built, an order that cannot work.
    The chain is followed through :data:`APP_ATTRIBUTES`; a middleware that keeps its app under
    another name is not seen through.
    """
    seen: set[int] = set()
    todo = [app]
    while todo and len(seen) < 64:  # bounded: a chain is short, and cycles end here
        obj = todo.pop()
        if obj is None or id(obj) in seen:
            continue
        if is_middleware(obj):
            return True
        seen.add(id(obj))
        todo.extend(getattr(obj, name, None) for name in APP_ATTRIBUTES)
    return False


def is_microversion_middleware(obj: object) -> bool:
    """Whether *obj* is a microversion middleware (WSGI or ASGI: it holds a
    :class:`MicroversionCore` as its ``core``)."""
    return isinstance(getattr(obj, "core", None), MicroversionCore)


def wraps_microversion(app: object) -> bool:
    """Whether a microversion middleware is below *app* in its chain of middlewares: an inner
    apimw middleware placed outside it would never see a served version."""
    return wraps(app, is_microversion_middleware)


def check_inside_microversion(app: object, middleware: str, because: str) -> None:
    """:class:`ConfigError` when a microversion middleware is below *app*, the app the
    *middleware* (``etag``, ``idempotency``) is given: it must sit inside the microversion
    middleware, or it would never see the served version (*because* says what that costs)."""
    if wraps_microversion(app):
        raise ConfigError(
            f"the {middleware} middleware is outside the microversion middleware (e.g. 'pipeline = "
            f"{middleware} ... microversion ... app'): put it inside the microversion middleware "
            f"(order: request_id -> microversion -> auth -> idempotency -> etag -> app), or {because}"
        )
