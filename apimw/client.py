"""Client-side microversion negotiation for any Python client, on top of ``requests``.

:class:`VersionedSession` sends every request at a microversion it negotiated
with the server, following the use cases of the Ironic microversion spec
(``UC1`` .. ``UC9`` in the comments below):

* not pinned: start at the newest version the client knows; on a 406 read the
  server's range and settle on the highest common version, never above what the
  client knows, and retry once (UC7A).  An old server that answers without
  version headers is spoken to at 1.0 (UC3A).
* pinned (``version="1.5"``): the version never changes silently; an old server
  (UC3B), a server too new (UC5) or too old (UC6, UC7B) stops with
  :class:`UnsupportedVersion`, which names the server's minimum and maximum.
* malformed user versions (``spam``, ``l33t``, ``1.2.3.4.5``) raise
  :class:`InvalidVersion` at construction, before any request (UC4).
* ``latest`` (UC9) is resolved to the server's maximum from the range headers or
  ``GET /v{major}`` and sent as ``X.Y``; the literal is sent only with
  ``send_latest=True``.
* the server's range is learned from the Minimum/Maximum headers of *any*
  response and kept in a :class:`VersionCache` per endpoint with a TTL; an entry
  is replaced as soon as a response shows a different range.
* a version both sides accept is used as is (UC8), and the echoed (served)
  version is checked against the requested one (:class:`VersionMismatch`).

Thread safety: the cache has its own lock, and a per-endpoint lock serialises
negotiation, so N threads starting on a cold cache cost one 406, not N.

Exceptions (all :class:`~apimw.errors.ApimwError`)::

    VersionParseError
    └── InvalidVersion          a user-given version is malformed (UC4)
    UnsupportedVersion          no version both sides accept (UC3B, UC5, UC6, UC7B)
    └── VersionMismatch         the server served another version than requested
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple
from urllib.parse import urlsplit

from apimw._microversion_type import LATEST, Version, parse_version
from apimw.errors import ApimwError, ConfigError, VersionParseError, explain_missing

try:
    import requests
except ImportError as exc:  # one line naming the extra
    explain_missing(exc, "apimw.client", module="requests", library="requests", extra="client")
    raise

__all__ = [
    "DEFAULT_CACHE_TTL",
    "STANDARD_HEADER",
    "UNVERSIONED",
    "InvalidVersion",
    "ServerRange",
    "UnsupportedVersion",
    "VersionCache",
    "VersionMismatch",
    "VersionedSession",
    "choose_version",
    "endpoint_key",
    "range_from_document",
    "read_range",
    "read_served",
]

LOG = logging.getLogger(__name__)

STANDARD_HEADER: Final = "OpenStack-API-Version"
DEFAULT_CACHE_TTL: Final = 300.0
#: What a server without microversion support speaks (UC1, UC3A).
V1_0: Final = Version(1, 0)
_SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


# -- errors -----------------------------------------------------------------------------


class InvalidVersion(VersionParseError):
    """A user-given microversion is malformed (UC4); raised before any request."""


class UnsupportedVersion(ApimwError):
    """No version both the client and the server accept, or a pinned version the server refuses.

    ``server_min``/``server_max`` are the server's range (``1.0``/``1.0`` for a server
    without microversions, ``None`` when the server did not say); ``response`` is the
    server's answer when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        endpoint: str,
        requested: Version | None,
        client_min: Version,
        client_max: Version,
        server_min: Version | None = None,
        server_max: Version | None = None,
        response: requests.Response | None = None,
    ) -> None:
        super().__init__(message)
        self.endpoint = endpoint
        self.requested = requested
        self.client_min = client_min
        self.client_max = client_max
        self.server_min = server_min
        self.server_max = server_max
        self.response = response


class VersionMismatch(UnsupportedVersion):
    """The server echoed another served version than the one requested."""

    def __init__(self, message: str, *, served: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.served = served


# -- sans-IO helpers --------------------------------------------------------------------


class ServerRange(NamedTuple):
    """The versions a server accepts; ``versioned=False`` for a server without microversions."""

    min_version: Version
    max_version: Version
    versioned: bool = True

    def supports(self, version: Version) -> bool:
        return self.min_version <= version <= self.max_version

    def __str__(self) -> str:
        if not self.versioned:
            return "no microversion support (1.0 only)"
        return f"[{self.min_version}, {self.max_version}]"


#: The range of a server that answers without any version header (UC1, UC3).
UNVERSIONED: Final = ServerRange(V1_0, V1_0, versioned=False)


def endpoint_key(url: str) -> str:
    """``scheme://host:port/prefix`` with the default port made explicit, no trailing slash."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ConfigError(f"endpoint must be an absolute http(s) URL, got {url!r}")
    port = parts.port or _DEFAULT_PORTS[scheme]
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}{parts.path.rstrip('/')}"


def _parse_or_none(text: object) -> Version | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_version(text.strip())
    except VersionParseError:
        return None


def read_range(
    headers: Mapping[str, str], min_header: str | None, max_header: str | None
) -> ServerRange | None:
    """The range from the Minimum/Maximum response headers, or ``None`` if absent or malformed."""
    if not min_header or not max_header:
        return None
    lo = _parse_or_none(headers.get(min_header))
    hi = _parse_or_none(headers.get(max_header))
    if lo is None or hi is None or hi < lo:
        return None
    return ServerRange(lo, hi)


def read_served(headers: Mapping[str, str], service_type: str, legacy_header: str | None) -> str | None:
    """The served version as the server wrote it: the standard header's entry for
    *service_type* (the last one wins, as on the server), else the legacy header."""
    standard = headers.get(STANDARD_HEADER)
    if standard:
        found = None
        for entry in standard.split(","):
            parts = entry.split()
            if len(parts) == 2 and parts[0].lower() == service_type.lower():
                found = parts[1]
        if found is not None:
            return found
    if legacy_header:
        legacy = headers.get(legacy_header)
        if legacy and legacy.strip():
            return legacy.strip()
    return None


def _entry_range(entry: Mapping[str, Any]) -> ServerRange:
    lo = _parse_or_none(entry.get("min_version"))
    hi = _parse_or_none(entry.get("max_version")) or _parse_or_none(entry.get("version"))
    if lo is None or hi is None or hi < lo:
        # Empty strings count as absent (keystoneauth does the same): an old server.
        return UNVERSIONED
    return ServerRange(lo, hi)


def range_from_document(doc: object, major: int) -> ServerRange | None:
    """The range in a discovery document (``GET /`` or ``GET /v{major}``).

    Reads ``version`` (Ironic ``/v1``) or the ``versions`` list (``/``, also
    ``{"versions": {"values": [...]}}``), the entry whose ``id`` is ``v{major}``;
    ``max_version`` wins over ``version``.  An entry without a range means a server
    without microversions; ``None`` when the document has no entry for *major*.
    """
    if not isinstance(doc, Mapping):
        return None
    entries: list[Any] = []
    if isinstance(doc.get("version"), Mapping):
        entries.append(doc["version"])
    versions = doc.get("versions")
    if isinstance(versions, Mapping):
        versions = versions.get("values")
    if isinstance(versions, list):
        entries.extend(versions)
    wanted = f"v{major}"
    for entry in entries:
        if isinstance(entry, Mapping) and str(entry.get("id", "")).split(".")[0] == wanted:
            return _entry_range(entry)
    return None


def _range_from_error_body(response: requests.Response) -> ServerRange | None:
    """``errors[0].min_version/max_version`` of an API-SIG (or apimw Ironic) 406 body."""
    try:
        doc = response.json()
    except ValueError:
        return None
    errors = doc.get("errors") if isinstance(doc, dict) else None
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return None
    lo = _parse_or_none(errors[0].get("min_version"))
    hi = _parse_or_none(errors[0].get("max_version"))
    if lo is None or hi is None or hi < lo:
        return None
    return ServerRange(lo, hi)


def choose_version(client_min: Version, client_max: Version, server: ServerRange) -> Version | None:
    """The highest version both sides accept, never above *client_max* (UC7A); ``None`` if none."""
    best = min(client_max, server.max_version)
    if best < max(client_min, server.min_version):
        return None
    return best


# -- cache ------------------------------------------------------------------------------


class VersionCache:
    """Thread-safe ``key -> ServerRange`` with a TTL; share one between sessions.

    ``put`` refreshes the TTL (every response with range headers confirms the
    range) and replaces an entry whose range changed.
    """

    def __init__(self, ttl: float = DEFAULT_CACHE_TTL, *, clock: Callable[[], float] = time.monotonic):
        if not ttl > 0:
            raise ConfigError(f"cache ttl must be > 0 seconds, got {ttl!r}")
        self.ttl = float(ttl)
        self._clock = clock
        self._entries: dict[Hashable, tuple[ServerRange, float]] = {}
        self._locks: dict[Hashable, threading.RLock] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> ServerRange | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if found[1] <= self._clock():
                del self._entries[key]
                return None
            return found[0]

    def put(self, key: Hashable, server: ServerRange) -> ServerRange | None:
        """Store *server*; return the previous live range if it was different, else ``None``."""
        with self._lock:
            now = self._clock()
            old = self._entries.get(key)
            self._entries[key] = (server, now + self.ttl)
            if old is not None and old[1] > now and old[0] != server:
                return old[0]
            return None

    def drop(self, key: Hashable) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def lock(self, key: Hashable) -> threading.RLock:
        """The negotiation lock of *key* (one per endpoint, shared by every session)."""
        with self._lock:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.RLock()
            return lock


# -- the session ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    header: str | None  # value to send; None = no version header
    expected: Version | None  # what the server must echo; None = accept any


def _config_version(name: str, value: str | Version) -> Version:
    try:
        return parse_version(value)
    except VersionParseError as exc:
        raise ConfigError(f"{name}: {exc}") from None


class VersionedSession:
    """A ``requests`` session bound to one endpoint that negotiates the microversion.

    ``endpoint`` is the service's unversioned root (``http://127.0.0.1:6385`` or
    ``https://cloud/baremetal``); :meth:`request` takes paths under it.

    Keyword options:

    service_type
        the name in ``OpenStack-API-Version: <service_type> X.Y``.
    max_version, min_version
        the newest and oldest version this client knows.  Unpinned requests start
        at ``max_version`` and are never sent above it.
    version
        ``None`` (negotiate), a pin ``"X.Y"`` within the client's range, or
        ``"latest"`` (the server's maximum, resolved, see :attr:`send_latest`).
    legacy_header
        the service's own header, e.g. ``X-OpenStack-Ironic-API-Version``: sent along
        with the standard one and read for the echoed version.
    send_standard_header
        send ``OpenStack-API-Version`` (default on; keystoneauth sends both).
    min_header, max_header
        the response range headers; default derived from ``legacy_header``
        (``X-OpenStack-Ironic-API-Minimum-Version``) else ``OpenStack-API-Minimum-Version``.
    versioned
        ``False`` behaves as a pre-microversion client (UC1, UC2): no version header,
        the server's default is served; ranges are still learned.
    send_latest
        send the literal ``latest`` and accept whatever the server serves.
    probe_unsafe
        before the first POST/PUT/PATCH/DELETE to an endpoint whose range is unknown,
        read ``GET /v{major}`` so the write is never the probe (an old server would
        carry it out at 1.0 before the client could refuse, UC3B).
    discovery_path
        where the range is read when headers do not say; default ``/v{major}``.
    cache, cache_ttl
        share a :class:`VersionCache` between sessions; else a private one with *cache_ttl*.
    session, timeout
        the underlying ``requests.Session`` (shared between threads) and the default timeout.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        service_type: str,
        max_version: str | Version,
        min_version: str | Version | None = None,
        version: str | Version | None = None,
        legacy_header: str | None = None,
        send_standard_header: bool = True,
        min_header: str | None = None,
        max_header: str | None = None,
        versioned: bool = True,
        send_latest: bool = False,
        probe_unsafe: bool = True,
        discovery_path: str | None = None,
        cache: VersionCache | None = None,
        cache_ttl: float = DEFAULT_CACHE_TTL,
        session: requests.Session | None = None,
        timeout: float | None = 30.0,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.key = endpoint_key(endpoint)
        if not service_type or any(c.isspace() or c == "," for c in service_type):
            raise ConfigError(f"service_type must be a single token, got {service_type!r}")
        self.service_type = service_type
        self.client_max = _config_version("max_version", max_version)
        major = self.client_max.major
        self.client_min = (
            Version(major, 0) if min_version is None else _config_version("min_version", min_version)
        )
        if self.client_min > self.client_max or self.client_min.major != major:
            raise ConfigError(
                f"min_version {self.client_min} must be <= max_version {self.client_max}, same major"
            )
        if versioned and not legacy_header and not send_standard_header:
            raise ConfigError("send_standard_header=False needs a legacy_header to send")
        self.legacy_header = legacy_header
        self.send_standard_header = send_standard_header
        base = legacy_header[: -len("-Version")] if legacy_header and legacy_header.lower().endswith(
            "-version") else "OpenStack-API"
        self.min_header = min_header or f"{base}-Minimum-Version"
        self.max_header = max_header or f"{base}-Maximum-Version"
        self.versioned = versioned
        self.send_latest = send_latest
        self.probe_unsafe = probe_unsafe
        self.discovery_path = discovery_path or f"/v{major}"
        self.timeout = timeout
        self.cache = cache if cache is not None else VersionCache(cache_ttl)
        self._cache_key = (self.key, service_type.lower(), major)
        self._own_session = session is None
        self.http = session if session is not None else requests.Session()

        if not versioned and version is not None:
            raise ConfigError("version= needs versioned=True (a versioned=False session sends no version)")
        self._warned_latest: Version | None = None
        # UC4: validate the user's version before any request.  UC9: "latest", any case.
        self.latest = False
        self.pinned: Version | None = None
        if version is not None:
            if isinstance(version, str) and version.strip().lower() == LATEST:
                self.latest = True
            else:
                try:
                    self.pinned = parse_version(version)
                except VersionParseError:
                    raise InvalidVersion(
                        f"invalid microversion {version!r}: expected MAJOR.MINOR (e.g. 1.10) or 'latest'"
                    ) from None
                if not self.client_min <= self.pinned <= self.client_max:
                    raise self._unsupported(
                        f"microversion {self.pinned} is outside what this client supports "
                        f"[{self.client_min}, {self.client_max}]",
                        None,
                    )

    # -- public API -----------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> requests.Response:
        """Send *method* *path* (relative to the endpoint, or an absolute URL under it)
        at the negotiated version; ``kwargs`` go to ``requests.Session.request``.

        Returns the response (a 406 too, when it is not about the version range, e.g. a
        feature gate); raises :class:`UnsupportedVersion` when no version fits.
        """
        method = method.upper()
        url = self._url(path)
        known = self.cache.get(self._cache_key)
        if known is None:
            # Cold endpoint: one thread negotiates while the others wait for its result.
            with self.cache.lock(self._cache_key):
                known = self.cache.get(self._cache_key)
                if known is None and (self._latest_needs_range() or (
                        self.versioned and self.probe_unsafe and method not in _SAFE_METHODS)):
                    known = self._discover()
                if known is None:
                    return self._send(method, url, kwargs, None)
        return self._send(method, url, kwargs, known)

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("GET", path, **kwargs)

    def head(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("HEAD", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("PUT", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> requests.Response:
        return self.request("DELETE", path, **kwargs)

    def negotiate(self) -> Version:
        """The version the next request will be served at, learning the server's range
        (``GET /v{major}``) if it is not cached; ``1.0`` for a server without
        microversions.  Call it before building a request body that depends on the version.
        """
        with self.cache.lock(self._cache_key):
            known = self.cache.get(self._cache_key) or self._discover()
        if known is None:
            raise self._unsupported(
                f"cannot learn the microversion range of {self.endpoint}: "
                f"{self.endpoint}{self.discovery_path} did not say", None)
        if not known.versioned:
            if self.pinned is not None and self.pinned != V1_0:
                raise self._old_server(self.pinned, None)
            return V1_0
        if self.pinned is not None and not known.supports(self.pinned):
            raise self._no_common(known, self.pinned, None)
        plan = self._plan(known)
        if plan.expected is None:
            return known.max_version if self.latest else known.min_version
        return plan.expected

    def server_range(self) -> ServerRange | None:
        """The cached range of this endpoint, if any."""
        return self.cache.get(self._cache_key)

    def served_version(self, response: requests.Response) -> Version | None:
        """The version *response* was served at: the echoed one, ``1.0`` for a server
        without microversions, ``None`` if the response does not say."""
        served = _parse_or_none(read_served(response.headers, self.service_type, self.legacy_header))
        if served is not None:
            return served
        if read_range(response.headers, self.min_header, self.max_header) is None:
            known = self.cache.get(self._cache_key)
            if known is not None and not known.versioned:
                return V1_0
        return None

    def close(self) -> None:
        if self._own_session:
            self.http.close()

    def __enter__(self) -> VersionedSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- negotiation ----------------------------------------------------------------

    def _latest_needs_range(self) -> bool:
        return self.versioned and self.latest and not self.send_latest

    def _plan(self, known: ServerRange | None) -> _Plan:
        if not self.versioned:
            return _Plan(None, None)  # UC1/UC2: an old client sends nothing
        if self.pinned is not None:
            return _Plan(str(self.pinned), self.pinned)  # the server decides; never changed (UC3B/5/6/7B)
        if self.latest:
            if self.send_latest:
                return _Plan(LATEST, None)  # UC9 literally: whatever the server's newest is
            if known is None:
                raise self._unsupported(
                    f"cannot resolve 'latest': {self.endpoint}{self.discovery_path} did not give a "
                    "microversion range", None)
            if not known.versioned:
                return _Plan(None, None)  # an old server's latest is 1.0: nothing to send
            # UC9: resolved to the server's maximum and sent as X.Y, so the echo can be checked.
            if known.max_version > self.client_max and self._warned_latest != known.max_version:
                self._warned_latest = known.max_version  # once per server maximum, not per request
                LOG.warning("%s serves 'latest' = %s, newer than this client knows (%s); "
                            "unknown fields are ignored", self.endpoint, known.max_version, self.client_max)
            return _Plan(str(known.max_version), known.max_version)
        if known is None or not known.versioned:
            # Spec "New Client Default": the newest version the client knows.  An old server
            # ignores the header (UC3A); an upgraded one answers it.
            return _Plan(str(self.client_max), self.client_max)
        chosen = choose_version(self.client_min, self.client_max, known)
        if chosen is None:
            raise self._no_common(known, self.client_max, None)  # UC5/UC6 without a pin
        return _Plan(str(chosen), chosen)

    def _send(
        self, method: str, url: str, kwargs: dict[str, Any], known: ServerRange | None
    ) -> requests.Response:
        plan = self._plan(known)
        if (known is not None and not known.versioned and self.pinned not in (None, V1_0)
                and method not in _SAFE_METHODS):
            # UC3B for a write: an old server would carry it out at 1.0; refuse before sending.
            # (A safe request is sent: its answer tells whether the server was upgraded.)
            raise self._old_server(self.pinned, None)
        response = self._do(method, url, kwargs, plan)
        self._learn(response)
        if response.status_code == 406 and plan.header is not None:
            retry = self._after_406(plan, response)
            if retry is None:
                return response
            response.close()
            plan = retry
            response = self._do(method, url, kwargs, plan)
            learned = self._learn(response)
            if response.status_code == 406 and plan.expected is not None and (
                    learned is not None and not learned.supports(plan.expected)):
                # Retried once; the range moved again.  Report instead of looping.
                raise self._no_common(learned, plan.expected, response)
        self._check(response, plan)
        return response

    def _after_406(self, plan: _Plan, response: requests.Response) -> _Plan | None:
        """Decide what a 406 means: ``None`` -> hand it to the caller, a plan -> retry once."""
        with self.cache.lock(self._cache_key):
            # UC7A: Minimum/Maximum headers, else the API-SIG body, else GET /v{major}.
            server = read_range(response.headers, self.min_header, self.max_header)
            if server is None:
                server = _range_from_error_body(response)
                if server is not None:
                    self._remember(server)
                else:
                    server = self._discover()
            if server is None:
                raise self._unsupported(
                    f"{self.endpoint} refused microversion {plan.header} (406) and did not say "
                    "which versions it supports", plan.expected, response=response)
            if not server.versioned or plan.expected is None or server.supports(plan.expected):
                # Not about the range (a feature gate, an Accept mismatch): the caller's answer.
                return None
            if self.pinned is not None:
                raise self._no_common(server, self.pinned, response)  # UC5, UC6, UC7B
            if self.latest:
                return _Plan(str(server.max_version), server.max_version)  # latest moved
            chosen = choose_version(self.client_min, self.client_max, server)
            if chosen is None:
                raise self._no_common(server, plan.expected, response)  # UC5/UC6 unpinned
            LOG.info("%s supports %s; negotiated %s (asked %s)", self.endpoint, server, chosen, plan.header)
            return _Plan(str(chosen), chosen)  # UC7A: retry once at the highest common version

    def _check(self, response: requests.Response, plan: _Plan) -> None:
        served = read_served(response.headers, self.service_type, self.legacy_header)
        if served is None:
            if read_range(response.headers, self.min_header, self.max_header) is not None:
                return
            if not 200 <= response.status_code < 300:
                return  # an error without headers proves nothing (a proxy, an auth filter)
            # A success without any version header: a server that predates microversions.
            known = self.cache.get(self._cache_key)
            if known is not None and known.versioned:
                return  # one header-less route does not undo what the server said
            self._remember(UNVERSIONED)
            if self.versioned and self.pinned is not None and self.pinned != V1_0:
                raise self._old_server(self.pinned, response)  # UC3B: report and stop
            return  # UC1 / UC3A: proceed at 1.0
        if plan.expected is None:
            return
        # UC8: a compatible request is answered at exactly the requested version.
        if _parse_or_none(served) != plan.expected:
            known = self.cache.get(self._cache_key)
            raise VersionMismatch(
                f"{self.endpoint} served microversion {served!r} although {plan.expected} was requested",
                served=served, endpoint=self.endpoint, requested=plan.expected,
                client_min=self.client_min, client_max=self.client_max,
                server_min=known.min_version if known else None,
                server_max=known.max_version if known else None, response=response,
            )

    def _learn(self, response: requests.Response) -> ServerRange | None:
        """Learn the range from any response's Minimum/Maximum headers."""
        server = read_range(response.headers, self.min_header, self.max_header)
        if server is not None:
            self._remember(server)
        return server

    def _remember(self, server: ServerRange) -> None:
        previous = self.cache.put(self._cache_key, server)
        if previous is not None:
            LOG.info("%s changed its microversion range from %s to %s", self.endpoint, previous, server)

    def _discover(self) -> ServerRange | None:
        """``GET /v{major}`` without a version header: range headers, else the document."""
        response = self.http.get(
            self.endpoint + self.discovery_path, headers={"Accept": "application/json"}, timeout=self.timeout
        )
        with response:
            server = read_range(response.headers, self.min_header, self.max_header)
            if server is None and 200 <= response.status_code < 300:
                try:
                    doc = response.json()
                except ValueError:
                    doc = None
                server = range_from_document(doc, self.client_max.major) or UNVERSIONED
        if server is not None:
            self._remember(server)
        return server

    # -- plumbing -------------------------------------------------------------------

    def _do(self, method: str, url: str, kwargs: dict[str, Any], plan: _Plan) -> requests.Response:
        headers = dict(kwargs.get("headers") or {})
        if plan.header is not None:
            if self.send_standard_header:
                headers[STANDARD_HEADER] = f"{self.service_type} {plan.header}"
            if self.legacy_header:
                headers[self.legacy_header] = plan.header
        call = {**kwargs, "headers": headers}
        call.setdefault("timeout", self.timeout)
        return self.http.request(method, url, **call)

    def _url(self, path: str) -> str:
        if "://" in path:
            key = endpoint_key(path)
            if key == self.key or key.startswith(self.key + "/"):
                return path
            raise ValueError(f"{path!r} is not under the endpoint {self.endpoint!r}")
        return f"{self.endpoint}/{path.lstrip('/')}"

    def _unsupported(
        self, message: str, requested: Version | None, *, response: requests.Response | None = None
    ) -> UnsupportedVersion:
        return UnsupportedVersion(
            message, endpoint=self.endpoint, requested=requested,
            client_min=self.client_min, client_max=self.client_max, response=response,
        )

    def _no_common(
        self, server: ServerRange, requested: Version, response: requests.Response | None
    ) -> UnsupportedVersion:
        if self.pinned is not None:
            message = (f"{self.endpoint} does not support the requested microversion {requested}: "
                       f"server minimum {server.min_version}, maximum {server.max_version}")
        else:
            message = (f"no microversion in common with {self.endpoint}: server minimum "
                       f"{server.min_version}, maximum {server.max_version}; this client supports "
                       f"[{self.client_min}, {self.client_max}]")
        return UnsupportedVersion(
            message, endpoint=self.endpoint, requested=requested, client_min=self.client_min,
            client_max=self.client_max, server_min=server.min_version, server_max=server.max_version,
            response=response,
        )

    def _old_server(self, requested: Version, response: requests.Response | None) -> UnsupportedVersion:
        return UnsupportedVersion(
            f"{self.endpoint} does not support microversions (it answered without version "
            f"headers; server minimum 1.0, maximum 1.0), so the requested microversion "
            f"{requested} cannot be used",
            endpoint=self.endpoint, requested=requested, client_min=self.client_min,
            client_max=self.client_max, server_min=V1_0, server_max=V1_0, response=response,
        )
