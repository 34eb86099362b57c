"""apimw.client.VersionedSession against real HTTP servers on 127.0.0.1.

One test per use case of the Ironic microversion spec (UC1 .. UC9), plus the
cache (TTL, range changes, sharing) and threads.  "New" servers run apimw's
MicroversionMiddleware around a tiny app; "old" servers are bare WSGI apps that
know nothing of microversions, or hand-written apps that mimic servers from
before the Minimum/Maximum headers existed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest
from hypothesis import given
from hypothesis import strategies as st

from apimw import Version, VersionParseError, parse_version
from apimw.client import (
    UNVERSIONED,
    InvalidVersion,
    ServerRange,
    UnsupportedVersion,
    VersionCache,
    VersionedSession,
    VersionMismatch,
    choose_version,
    endpoint_key,
    range_from_document,
    read_range,
    read_served,
)
from apimw.errors import ApimwError, ConfigError
from apimw.microversion import MicroversionMiddleware, require_version

LEGACY = "X-OpenStack-Ironic-API-Version"
LEGACY_ENVIRON = "HTTP_X_OPENSTACK_IRONIC_API_VERSION"
MIN_HEADER = "X-OpenStack-Ironic-API-Minimum-Version"
MAX_HEADER = "X-OpenStack-Ironic-API-Maximum-Version"


# -- servers ----------------------------------------------------------------------------


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 64  # the default backlog (5) drops concurrent connects: 1 s SYN retries


class LiveServer:
    """A real HTTP server on 127.0.0.1 (port 0) whose app can be swapped; it records
    what each request carried: ``(method, path, legacy header, standard header, status)``."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.seen: list[tuple[str, str, str | None, str | None, int]] = []
        self._lock = threading.Lock()
        self.httpd = make_server(
            "127.0.0.1", 0, self._wsgi, server_class=_ThreadingServer, handler_class=_QuietHandler
        )
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self.thread.start()

    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        statuses: list[int] = []

        def recording_start_response(status: str, headers: Any, exc_info: Any = None) -> Any:
            statuses.append(int(status.split()[0]))
            return start_response(status, headers, exc_info)

        # what the client sent, read before the app runs (the microversion middleware
        # forwards the version it negotiated in these headers)
        sent = (environ.get(LEGACY_ENVIRON), environ.get("HTTP_OPENSTACK_API_VERSION"))
        result = self.app(environ, recording_start_response)
        body = b"".join(result)
        with self._lock:
            self.seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], *sent, statuses[-1]))
        return [body]

    def sent_versions(self) -> list[tuple[str | None, int]]:
        """``(legacy header value, status)`` of each request, in order."""
        with self._lock:
            return [(legacy, status) for _, _, legacy, _, status in self.seen]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def nodes_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """The service behind the middleware: reports the version it was served at."""
    served = environ.get("apimw.microversion")
    body = json.dumps({"path": environ["PATH_INFO"], "served": None if served is None else str(served)})
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body.encode()]


def new_server_app(min_version: str, max_version: str, **options: Any) -> MicroversionMiddleware:
    return MicroversionMiddleware(
        nodes_app,
        service_type="baremetal",
        min_version=min_version,
        max_version=max_version,
        legacy_header=LEGACY,
        error_profile="ironic",
        **options,
    )


def pre_range_header_app(*, discovery: str) -> Callable[..., list[bytes]]:
    """A server from before the Minimum/Maximum headers (range 1.1 .. 1.10): its 406
    says nothing about the range; ``GET /v1`` tells it in headers or only in the document."""
    lo, hi = Version(1, 1), Version(1, 10)

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        path = environ["PATH_INFO"]
        if path.rstrip("/") == "/v1":
            doc = {"id": "v1", "version": {"id": "v1", "status": "CURRENT", "min_version": str(lo),
                                          "version": str(hi), "links": []}}
            body = json.dumps(doc).encode()
            headers = [("Content-Type", "application/json")]
            if discovery == "headers":
                headers += [(MIN_HEADER, str(lo)), (MAX_HEADER, str(hi))]
            start_response("200 OK", headers)
            return [body]
        requested = environ.get(LEGACY_ENVIRON)
        served = lo if requested is None else parse_version(requested)
        if not lo <= served <= hi:
            inner = json.dumps({"faultcode": "Client", "faultstring": "Not Acceptable", "debuginfo": None})
            start_response("406 Not Acceptable", [("Content-Type", "application/json")])
            return [json.dumps({"error_message": inner}).encode()]
        start_response("200 OK", [("Content-Type", "application/json"), (LEGACY, str(served))])
        return [b'{"nodes": []}']

    return app


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[..., Any]], LiveServer]]:
    servers: list[LiveServer] = []

    def start(app: Callable[..., Any]) -> LiveServer:
        server = LiveServer(app)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def client() -> Iterator[Callable[..., VersionedSession]]:
    sessions: list[VersionedSession] = []

    def make(server: LiveServer, **options: Any) -> VersionedSession:
        options.setdefault("service_type", "baremetal")
        options.setdefault("legacy_header", LEGACY)
        options.setdefault("cache", VersionCache())
        options.setdefault("timeout", 10)
        session = VersionedSession(server.url, **options)
        sessions.append(session)
        return session

    yield make
    for session in sessions:
        session.close()


V = parse_version


# -- use cases --------------------------------------------------------------------------


def test_uc1_old_client_old_server(serve, client):
    server = serve(nodes_app)
    session = client(server, max_version="1.10", versioned=False)

    response = session.get("/v1/nodes")

    assert response.status_code == 200
    assert server.seen == [("GET", "/v1/nodes", None, None, 200)]  # no version header at all
    assert session.served_version(response) == V("1.0")
    assert session.server_range() == UNVERSIONED


def test_uc2_old_client_new_server_gets_the_minimum(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, max_version="1.10", versioned=False)

    response = session.get("/v1/nodes")

    assert response.status_code == 200
    assert server.seen == [("GET", "/v1/nodes", None, None, 200)]
    assert response.json()["served"] == "1.1"
    assert session.served_version(response) == V("1.1")
    assert session.server_range() == ServerRange(V("1.1"), V("1.10"))  # learned from any response


def test_uc3a_new_client_old_server_not_pinned_proceeds_at_1_0(serve, client):
    server = serve(nodes_app)
    session = client(server, max_version="1.15")

    first = session.get("/v1/nodes")
    second = session.get("/v1/nodes")

    assert (first.status_code, second.status_code) == (200, 200)
    # The client tried its newest version; the old server ignored the header.
    assert server.seen[0] == ("GET", "/v1/nodes", "1.15", "baremetal 1.15", 200)
    assert session.served_version(first) == V("1.0")
    assert session.negotiate() == V("1.0")
    assert session.server_range() == UNVERSIONED


def test_uc3b_new_client_old_server_pinned_reports_and_stops(serve, client):
    server = serve(nodes_app)
    session = client(server, max_version="1.15", version="1.5")

    with pytest.raises(UnsupportedVersion) as info:
        session.get("/v1/nodes")

    message = str(info.value)
    assert "does not support microversions" in message
    assert "1.5" in message and "minimum 1.0, maximum 1.0" in message
    assert (info.value.server_min, info.value.server_max) == (V("1.0"), V("1.0"))


def test_uc3b_pinned_write_to_old_server_is_never_sent(serve, client):
    server = serve(nodes_app)
    session = client(server, max_version="1.15", version="1.5")

    with pytest.raises(UnsupportedVersion, match="does not support microversions"):
        session.post("/v1/nodes", json={"name": "n1"})

    # Only the discovery probe reached the server, never the POST.
    assert [(m, p) for m, p, *_ in server.seen] == [("GET", "/v1")]


@pytest.mark.parametrize(
    "bad",
    ["spam", "l33t", "1.2.3.4.5", "", "1", "1.", ".1", "01.1", "1.01", "1.1\n", " 1.1", "v1.1",
     "\u0661.\u0661", "1.1.1", "latest-ish", "9" * 40 + ".1"],
)
def test_uc4_malformed_user_version_is_rejected_before_any_request(serve, client, bad):
    server = serve(new_server_app("1.1", "1.10"))

    with pytest.raises(InvalidVersion) as info:
        client(server, max_version="1.10", version=bad)

    assert isinstance(info.value, VersionParseError) and isinstance(info.value, ApimwError)
    assert repr(bad) in str(info.value)
    assert server.seen == []


@pytest.mark.parametrize("pin", ["1.6", None], ids=["pinned", "not-pinned"])
def test_uc5_server_newer_than_client_reports_server_range(serve, client, pin):
    server = serve(new_server_app("1.8", "1.15"))
    session = client(server, min_version="1.1", max_version="1.6", version=pin)

    with pytest.raises(UnsupportedVersion) as info:
        session.get("/v1/nodes")

    assert "minimum 1.8, maximum 1.15" in str(info.value)
    assert (info.value.server_min, info.value.server_max) == (V("1.8"), V("1.15"))
    assert info.value.response is not None and info.value.response.status_code == 406
    assert server.sent_versions() == [("1.6", 406)]  # reported, not retried


@pytest.mark.parametrize(("pin", "sent"), [("1.10", "1.10"), (None, "1.15")], ids=["pinned", "not-pinned"])
def test_uc6_server_older_than_client_reports_server_range(serve, client, pin, sent):
    server = serve(new_server_app("1.1", "1.5"))
    session = client(server, min_version="1.10", max_version="1.15", version=pin)

    with pytest.raises(UnsupportedVersion) as info:
        session.get("/v1/nodes")

    assert "minimum 1.1, maximum 1.5" in str(info.value)
    assert server.sent_versions() == [(sent, 406)]


def test_uc7a_negotiates_down_retries_once_and_caches(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, min_version="1.8", max_version="1.15")

    first = session.get("/v1/nodes")
    second = session.get("/v1/nodes")

    assert first.status_code == second.status_code == 200
    assert first.json()["served"] == "1.10"
    assert first.headers[LEGACY] == "1.10" and first.headers["OpenStack-API-Version"] == "baremetal 1.10"
    assert session.served_version(second) == V("1.10")
    # 1.15 -> 406 -> 1.10; the second request goes straight to 1.10 (cached).
    assert server.sent_versions() == [("1.15", 406), ("1.10", 200), ("1.10", 200)]
    assert session.server_range() == ServerRange(V("1.1"), V("1.10"))


@pytest.mark.parametrize("discovery", ["headers", "document"])
def test_uc7a_406_without_range_headers_falls_back_to_get_v1(serve, client, discovery):
    server = serve(pre_range_header_app(discovery=discovery))
    session = client(server, min_version="1.8", max_version="1.15")

    response = session.get("/v1/nodes")

    assert response.status_code == 200
    assert session.served_version(response) == V("1.10")
    assert [(m, p, legacy, status) for m, p, legacy, _, status in server.seen] == [
        ("GET", "/v1/nodes", "1.15", 406),
        ("GET", "/v1", None, 200),
        ("GET", "/v1/nodes", "1.10", 200),
    ]


def test_uc7a_406_range_read_from_the_api_sig_body(serve, client):
    """A server that puts the range only in its API-SIG 406 body: no discovery needed."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        requested = parse_version(environ.get(LEGACY_ENVIRON) or "1.1")
        if requested > Version(1, 10):
            body = {"errors": [{"status": 406, "code": "microversion.unsupported", "title": "Not Acceptable",
                                "detail": "no", "min_version": "1.1", "max_version": "1.10"}]}
            start_response("406 Not Acceptable", [("Content-Type", "application/json")])
            return [json.dumps(body).encode()]
        start_response("200 OK", [("Content-Type", "application/json"), (LEGACY, str(requested))])
        return [b"{}"]

    server = serve(app)
    session = client(server, max_version="1.15")

    response = session.get("/v1/nodes")

    assert session.served_version(response) == V("1.10")
    assert server.sent_versions() == [("1.15", 406), ("1.10", 200)]


def test_uc7b_pinned_too_new_reports_and_stops(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, min_version="1.8", max_version="1.15", version="1.15")

    with pytest.raises(UnsupportedVersion) as info:
        session.get("/v1/nodes")

    assert "requested microversion 1.15" in str(info.value)
    assert "minimum 1.1, maximum 1.10" in str(info.value)
    assert info.value.requested == V("1.15")
    assert server.sent_versions() == [("1.15", 406)]


def test_uc8_compatible_version_is_used_as_is(serve, client):
    server = serve(new_server_app("1.1", "1.12"))
    session = client(server, min_version="1.8", max_version="1.10")

    response = session.get("/v1/nodes")

    assert response.status_code == 200
    assert response.headers[LEGACY] == "1.10"
    assert session.served_version(response) == V("1.10")
    assert server.sent_versions() == [("1.10", 200)]


@pytest.mark.parametrize("spelling", ["latest", "LATEST"])
def test_uc9_latest_is_resolved_to_the_server_maximum(serve, client, spelling):
    server = serve(new_server_app("1.1", "1.12", discovery=True))
    session = client(server, max_version="1.10", version=spelling)

    response = session.get("/v1/nodes")

    assert response.status_code == 200
    assert session.served_version(response) == V("1.12")  # the server's newest, above the client's
    # Resolved with GET /v1 and sent as X.Y, never the literal.
    assert server.sent_versions() == [(None, 200), ("1.12", 200)]
    assert server.seen[1][3] == "baremetal 1.12"


def test_uc9_latest_literal_when_asked(serve, client):
    server = serve(new_server_app("1.1", "1.12"))
    session = client(server, max_version="1.10", version="latest", send_latest=True)

    response = session.get("/v1/nodes")

    assert session.served_version(response) == V("1.12")
    assert server.sent_versions() == [("latest", 200)]


def test_uc9_latest_on_an_old_server_is_1_0(serve, client):
    server = serve(nodes_app)
    session = client(server, max_version="1.10", version="latest")

    response = session.get("/v1/nodes")

    assert session.served_version(response) == V("1.0")
    assert server.sent_versions() == [(None, 200), (None, 200)]


# -- beyond the use cases ---------------------------------------------------------------


def test_feature_gate_406_is_returned_not_renegotiated(serve, client):
    def gated(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        require_version(environ, "1.9", what="the 'name' field")
        return nodes_app(environ, start_response)

    app = MicroversionMiddleware(gated, service_type="baremetal", min_version="1.1", max_version="1.10",
                                 legacy_header=LEGACY, error_profile="ironic")
    server = serve(app)
    session = client(server, max_version="1.10", version="1.5")

    response = session.get("/v1/nodes")

    assert response.status_code == 406
    assert response.json()["errors"][0]["code"] == "microversion.feature-unavailable"
    assert server.sent_versions() == [("1.5", 406)]


def test_echoed_version_is_checked(serve, client):
    def liar(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        start_response("200 OK", [(MIN_HEADER, "1.1"), (MAX_HEADER, "1.10"), (LEGACY, "1.3")])
        return [b"{}"]

    session = client(serve(liar), max_version="1.10")

    with pytest.raises(VersionMismatch) as info:
        session.get("/v1/nodes")

    assert info.value.served == "1.3" and info.value.requested == V("1.10")


def test_unsafe_request_on_cold_endpoint_probes_first(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, max_version="1.15")

    response = session.post("/v1/nodes", json={"name": "n1"})

    assert response.status_code == 200
    assert [(m, legacy, status) for m, _, legacy, _, status in server.seen] == [
        ("GET", None, 200),
        ("POST", "1.10", 200),  # the write never met a 406
    ]


def test_negotiate_learns_the_range_before_a_body_is_built(serve, client):
    server = serve(new_server_app("1.1", "1.10", discovery=True))
    session = client(server, max_version="1.15")

    assert session.negotiate() == V("1.10")
    session.post("/v1/nodes", json={})

    assert [(m, p, legacy, status) for m, p, legacy, _, status in server.seen] == [
        ("GET", "/v1", None, 200),
        ("POST", "/v1/nodes", "1.10", 200),
    ]
    pinned = client(server, max_version="1.15", version="1.12")
    with pytest.raises(UnsupportedVersion, match="minimum 1.1, maximum 1.10"):
        pinned.negotiate()


@pytest.mark.parametrize(
    ("options", "legacy_sent", "standard_sent"),
    [
        pytest.param({}, "1.10", "baremetal 1.10", id="both"),
        pytest.param({"send_standard_header": False}, "1.10", None, id="legacy-only"),
        pytest.param({"legacy_header": None, "min_header": MIN_HEADER, "max_header": MAX_HEADER},
                     None, "baremetal 1.10", id="standard-only"),
    ],
)
def test_configured_headers_are_sent_and_negotiation_works(
    serve, client, options, legacy_sent, standard_sent
):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, max_version="1.15", **options)

    response = session.get("/v1/nodes")

    assert response.json()["served"] == "1.10"
    assert session.served_version(response) == V("1.10")
    method, path, legacy, standard, status = server.seen[-1]
    assert (legacy, standard, status) == (legacy_sent, standard_sent, 200)


# -- cache ------------------------------------------------------------------------------


def test_cache_entry_expires_after_ttl(serve, client):
    now = [1000.0]
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, max_version="1.15", cache=VersionCache(ttl=60, clock=lambda: now[0]))

    session.get("/v1/nodes")
    now[0] += 59
    session.get("/v1/nodes")
    now[0] += 60.5  # 59 s after the last confirmation is still fresh; 60.5 s more is not
    session.get("/v1/nodes")

    assert server.sent_versions() == [
        ("1.15", 406), ("1.10", 200), ("1.10", 200), ("1.15", 406), ("1.10", 200),
    ]


def test_cache_dropped_when_server_range_shrinks(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, max_version="1.15")
    session.get("/v1/nodes")

    # Rolling back: the server now advertises at most 1.8.
    server.app = new_server_app("1.1", "1.10", pin_max_version="1.8")
    response = session.get("/v1/nodes")

    assert response.status_code == 200 and session.served_version(response) == V("1.8")
    assert server.sent_versions()[2:] == [("1.10", 406), ("1.8", 200)]
    assert session.server_range() == ServerRange(V("1.1"), V("1.8"))


def test_cache_learns_an_upgrade_from_any_response(serve, client):
    server = serve(new_server_app("1.1", "1.10", pin_max_version="1.8"))
    session = client(server, max_version="1.15")
    session.get("/v1/nodes")

    server.app = new_server_app("1.1", "1.10")  # upgrade finished, pin lifted
    served_at = [session.served_version(session.get("/v1/nodes")) for _ in range(2)]

    # The first answer (still at 1.8) carried the new maximum; the next request uses it.
    assert served_at == [V("1.8"), V("1.10")]
    assert server.sent_versions()[2:] == [("1.8", 200), ("1.10", 200)]


def test_cache_shared_between_sessions(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    shared = VersionCache()
    client(server, max_version="1.15", cache=shared).get("/v1/nodes")

    other = client(server, max_version="1.15", cache=shared)
    other.get("/v1/nodes")

    assert server.sent_versions() == [("1.15", 406), ("1.10", 200), ("1.10", 200)]


def test_threads_on_a_cold_cache_negotiate_once(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, min_version="1.8", max_version="1.15")
    threads_count, per_thread = 12, 4
    barrier = threading.Barrier(threads_count, timeout=10)
    results: list[tuple[int, str | None]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work() -> None:
        try:
            barrier.wait()
            for _ in range(per_thread):
                response = session.get("/v1/nodes")
                with lock:
                    results.append((response.status_code, response.headers.get(LEGACY)))
        except BaseException as exc:  # reported below
            with lock:
                errors.append(exc)

    workers = [threading.Thread(target=work) for _ in range(threads_count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)

    assert errors == []
    assert results == [(200, "1.10")] * (threads_count * per_thread)
    statuses = [status for _, status in server.sent_versions()]
    assert statuses.count(406) == 1
    assert len(statuses) == threads_count * per_thread + 1


# -- sans-IO helpers and configuration --------------------------------------------------


IRONIC_V1 = {"id": "v1", "links": [], "status": "CURRENT", "min_version": "1.1", "version": "1.115"}
IRONIC_ROOT = {"name": "OpenStack Ironic API", "default_version": IRONIC_V1, "versions": [IRONIC_V1]}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(IRONIC_ROOT, ServerRange(V("1.1"), V("1.115")), id="ironic-root"),
        pytest.param({"id": "v1", "version": IRONIC_V1}, ServerRange(V("1.1"), V("1.115")),
                     id="ironic-v1"),
        pytest.param({"versions": {"values": [{"id": "v1.0", "min_version": "1.2", "max_version": "1.9",
                                               "version": "1.5"}]}}, ServerRange(V("1.2"), V("1.9")),
                     id="values-max_version-wins"),
        pytest.param({"version": {"id": "v1", "min_version": "", "version": ""}}, UNVERSIONED,
                     id="empty-strings-old-server"),
        pytest.param({"versions": [{"id": "v2", "min_version": "2.1", "version": "2.3"}]}, None,
                     id="other-major"),
        pytest.param(["not", "a", "mapping"], None, id="junk"),
    ],
)
def test_range_from_document(doc, expected):
    assert range_from_document(doc, 1) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"OpenStack-API-Version": "compute 2.1, baremetal 1.7"}, "1.7"),
        ({"OpenStack-API-Version": "compute 2.1", LEGACY: "1.4"}, "1.4"),
        ({"OpenStack-API-Version": "baremetal 1.7", LEGACY: "1.4"}, "1.7"),
        ({}, None),
    ],
)
def test_read_served(headers, expected):
    assert read_served(headers, "baremetal", LEGACY) == expected


@given(st.dictionaries(st.sampled_from([MIN_HEADER, MAX_HEADER, LEGACY, "OpenStack-API-Version"]),
                       st.text(max_size=40)))
def test_header_readers_never_raise_on_junk(headers):
    found = read_range(headers, MIN_HEADER, MAX_HEADER)
    assert found is None or found.min_version <= found.max_version
    served = read_served(headers, "baremetal", LEGACY)
    assert served is None or isinstance(served, str)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["id", "version", "versions", "values", "min_version", "max_version", "x"]),
        inner, max_size=4),
    max_leaves=12,
)


@given(_json)
def test_range_from_document_never_raises_on_junk(doc):
    found = range_from_document(doc, 1)
    assert found is None or found.min_version <= found.max_version


def test_choose_version_never_goes_above_the_client():
    assert choose_version(V("1.1"), V("1.15"), ServerRange(V("1.1"), V("1.10"))) == V("1.10")
    assert choose_version(V("1.1"), V("1.6"), ServerRange(V("1.1"), V("1.10"))) == V("1.6")
    assert choose_version(V("1.1"), V("1.6"), ServerRange(V("1.8"), V("1.15"))) is None


def test_endpoint_key_normalises_scheme_host_port_and_prefix():
    assert endpoint_key("HTTP://Example.COM/baremetal/") == "http://example.com:80/baremetal"
    assert endpoint_key("https://h:8443") == "https://h:8443"
    with pytest.raises(ConfigError):
        endpoint_key("ftp://h/")


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"max_version": "x"}, id="bad-max"),
        pytest.param({"max_version": "1.5", "min_version": "1.6"}, id="min-above-max"),
        pytest.param({"max_version": "2.5", "min_version": "1.6"}, id="two-majors"),
        pytest.param({"max_version": "1.5", "legacy_header": None, "send_standard_header": False},
                     id="no-header-to-send"),
        pytest.param({"max_version": "1.5", "service_type": "bare metal"}, id="service-type"),
        pytest.param({"max_version": "1.5", "cache_ttl": 0}, id="ttl"),
        pytest.param({"max_version": "1.5", "versioned": False, "version": "1.2"}, id="pin-unversioned"),
    ],
)
def test_bad_configuration_fails_at_construction(options):
    options = {"service_type": "baremetal", "legacy_header": LEGACY, **options}
    with pytest.raises(ConfigError):
        VersionedSession("http://127.0.0.1:1", **options)


def test_pin_outside_the_client_range_is_refused_before_any_request(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    with pytest.raises(UnsupportedVersion, match=r"outside what this client supports \[1.1, 1.10\]"):
        client(server, min_version="1.1", max_version="1.10", version="1.11")
    assert server.seen == []


def test_absolute_urls_must_be_under_the_endpoint(serve, client):
    server = serve(new_server_app("1.1", "1.10"))
    session = client(server, max_version="1.10")
    assert session.get(server.url + "/v1/nodes").status_code == 200
    with pytest.raises(ValueError, match="not under the endpoint"):
        session.get("http://127.0.0.2:1/v1/nodes")
