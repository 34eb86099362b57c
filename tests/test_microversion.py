"""MicroversionMiddleware driven in memory: negotiation, headers, errors, gates, discovery."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from webob import Request, Response

from apimw import ConfigError, HTTPProblem, Version, parse_version, served_version
from apimw.microversion import (
    ENVIRON_VERSION,
    MicroversionMiddleware,
    VersionedFields,
    VersionGate,
    require_version,
    select_version,
)
from tests.asgi_support import flavours, layered, module_flavour
from tests.wsgi import run

# every test runs against the WSGI middleware and its ASGI twin (apimw.asgi)
pytest_generate_tests = flavours()
FLAVOUR = "wsgi"

_flavour = module_flavour()


def mv(app: Any, **options: Any) -> Any:
    """The microversion middleware over *app*: the WSGI one or its ASGI twin (see asgi_support)."""
    return layered(FLAVOUR, app, (MicroversionMiddleware, options))

LEGACY = "X-OpenStack-Ironic-API-Version"
STD = "OpenStack-API-Version"
MIN_H = "X-OpenStack-Ironic-API-Minimum-Version"
MAX_H = "X-OpenStack-Ironic-API-Maximum-Version"


def echo_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Answers with the served version; /missing answers 404; /vary sets its own Vary."""
    body = json.dumps({"served": str(served_version(environ))}).encode()
    path = environ["PATH_INFO"]
    status = "404 Not Found" if path == "/missing" else "200 OK"
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    if path == "/vary":
        headers.append(("Vary", "Accept-Encoding, openstack-api-version"))
    if path == "/vary-star":
        headers.append(("Vary", "*"))
    if path == "/own-version-header":
        headers.append((LEGACY, "9.9"))
    start_response(status, headers)
    return [body]


def make(profile: str = "ironic", app: Any = echo_app, **kw: Any) -> MicroversionMiddleware:
    options: dict[str, Any] = dict(
        service_type="baremetal",
        min_version="1.1",
        max_version="1.115",
        legacy_header=LEGACY,
        error_profile=profile,
    )
    options.update(kw)
    return mv(app, **options)  # type: ignore[no-any-return]


def get(app: Any, path: str = "/v1/nodes", headers: dict[str, str] | None = None, **environ: Any) -> Response:
    return run(app, Request.blank(path, headers=headers or {}, environ=environ))


def served(resp: Response) -> str:
    return json.loads(resp.body)["served"]


def error_entry(resp: Response) -> dict[str, Any]:
    body = json.loads(resp.body)
    assert resp.content_type == "application/json"
    return body["errors"][0]


def vary_tokens(resp: Response) -> list[str]:
    values = [v for k, v in resp.headerlist if k.lower() == "vary"]
    assert len(values) == 1, f"exactly one Vary header, got {values}"
    return [t.strip() for t in values[0].split(",")]


# -- negotiation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({}, "1.1", id="missing-header-is-minimum"),
        pytest.param({LEGACY: ""}, "1.1", id="empty-legacy-is-minimum"),
        pytest.param({LEGACY: "1.50"}, "1.50", id="legacy-header"),
        pytest.param({STD: "baremetal 1.50"}, "1.50", id="standard-header"),
        pytest.param({LEGACY: "latest"}, "1.115", id="legacy-latest"),
        pytest.param({LEGACY: "LATEST"}, "1.115", id="latest-upper-case"),
        pytest.param({STD: "baremetal LaTeSt"}, "1.115", id="standard-latest-mixed-case"),
        pytest.param({STD: "baremetal 1.40", LEGACY: "1.30"}, "1.40", id="standard-wins-over-legacy"),
        pytest.param({STD: "compute 2.1"}, "1.1", id="other-service-only-is-minimum"),
        pytest.param({STD: "compute 2.1", LEGACY: "1.30"}, "1.30", id="other-service-falls-back-to-legacy"),
        pytest.param({STD: "compute 2.1,baremetal 1.7"}, "1.7", id="comma-joined"),
        pytest.param({STD: "baremetal 1.2, compute 2.1, baremetal 1.9"}, "1.9", id="last-entry-wins"),
        pytest.param({STD: "BareMetal 1.8"}, "1.8", id="service-type-case-insensitive"),
        pytest.param({STD: "  baremetal\t1.8  "}, "1.8", id="surrounding-whitespace"),
        pytest.param({LEGACY: "1.1"}, "1.1", id="exact-minimum"),
        pytest.param({LEGACY: "1.115"}, "1.115", id="exact-maximum"),
    ],
)
def test_served_version(headers: dict[str, str], expected: str) -> None:
    resp = get(make(), headers=headers)
    assert resp.status_int == 200
    assert served(resp) == expected
    assert resp.headers[LEGACY] == expected
    assert resp.headers[STD] == f"baremetal {expected}"
    assert resp.headers[MIN_H] == "1.1"
    assert resp.headers[MAX_H] == "1.115"
    assert sorted(vary_tokens(resp)) == [STD, LEGACY]


def test_repeated_standard_header_lines_last_entry_wins() -> None:
    # A WSGI server joins repeated header lines with ", " (RFC 9110 §5.3).
    resp = get(make(), HTTP_OPENSTACK_API_VERSION="baremetal 1.3, baremetal 1.4")
    assert served(resp) == "1.4"


L_ENV, S_ENV = "HTTP_X_OPENSTACK_IRONIC_API_VERSION", "HTTP_OPENSTACK_API_VERSION"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        pytest.param({L_ENV: "1.5, 1.5"}, "1.5", id="legacy-same-twice"),
        pytest.param({L_ENV: "1.3, 1.4"}, "1.4", id="legacy-last-wins"),
        pytest.param({L_ENV: "1.4,1.3"}, "1.3", id="legacy-joined-without-space"),
        pytest.param({L_ENV: "1.3, latest"}, "1.115", id="legacy-last-latest"),
        pytest.param({L_ENV: "latest, 1.3"}, "1.3", id="legacy-first-latest"),
        pytest.param({L_ENV: "1.3, "}, "1.3", id="legacy-empty-line-skipped"),
        pytest.param({L_ENV: " , "}, "1.1", id="legacy-only-empty-lines"),
        pytest.param({S_ENV: "baremetal 1.5, baremetal 1.5"}, "1.5", id="standard-same-twice"),
        pytest.param({S_ENV: "baremetal 1.3,baremetal 1.4"}, "1.4", id="standard-last-wins"),
    ],
)
def test_repeated_header_lines_one_rule_for_both_headers_the_last_wins(
    environ: dict[str, str], expected: str
) -> None:
    # A WSGI server joins repeated header lines with "," or ", " (RFC 9110 §5.3); the legacy
    # header follows the standard header's rule instead of answering 406 to "1.5, 1.5".
    resp = get(make(), **environ)
    assert resp.status_int == 200, resp.body
    assert served(resp) == expected


@pytest.mark.parametrize("profile", ["api-sig", "ironic"])
def test_repeated_legacy_header_with_a_malformed_last_line_is_malformed(profile: str) -> None:
    resp = get(make(error_profile=profile), HTTP_X_OPENSTACK_IRONIC_API_VERSION="1.5, 1.x")
    assert resp.status_int == (406 if profile == "ironic" else 400)
    assert error_entry(resp)["code"] == "microversion.malformed"


def test_repeated_legacy_header_lines_over_http() -> None:
    """Two real header lines through a real server, joined by it, for both headers."""
    import http.client
    import logging
    import threading

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = make_server("127.0.0.1", 0, make(), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for header, lines, expected in [(LEGACY, ["1.5", "1.5"], "1.5"), (LEGACY, ["1.6", "1.7"], "1.7"),
                                        (STD, ["baremetal 1.6", "baremetal 1.8"], "1.8")]:  # fmt: skip
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
            try:
                conn.putrequest("GET", "/v1/nodes")
                for line in lines:
                    conn.putheader(header, line)
                conn.endheaders()
                resp = conn.getresponse()
                body = json.loads(resp.read())
            finally:
                conn.close()
            assert (resp.status, body["served"]) == (200, expected)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_environ_carries_a_comparable_version() -> None:
    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        seen.update(environ)
        start_response("204 No Content", [])
        return []

    get(mv(app, service_type="baremetal", min_version="1.1", max_version="1.20"),
        headers={STD: "baremetal 1.10"})  # fmt: skip
    assert seen[ENVIRON_VERSION] == Version(1, 10)
    assert seen[ENVIRON_VERSION] > Version(1, 9)
    assert seen["apimw.error_profile"] == "api-sig"


def test_service_aliases() -> None:
    resp = get(make(service_aliases=["ironic"]), headers={STD: "ironic 1.6"})
    assert served(resp) == "1.6"


# -- errors -------------------------------------------------------------------------------

MALFORMED = [
    pytest.param({LEGACY: "spam"}, id="spam"),
    pytest.param({LEGACY: "1.1.1"}, id="three-parts"),
    pytest.param({LEGACY: "1.01"}, id="leading-zero"),
    pytest.param({LEGACY: "1.1_0"}, id="underscore"),
    pytest.param({LEGACY: "\u0661.\u0661"}, id="non-ascii-digits"),
    pytest.param({STD: "baremetal"}, id="service-without-version"),
    pytest.param({STD: "baremetal 1.2 extra"}, id="service-with-two-values"),
    pytest.param({STD: "baremetal 1." + "9" * 2000}, id="huge-value"),
    pytest.param({LEGACY: "1" * 5000}, id="huge-legacy-value"),
]


@pytest.mark.parametrize("headers", MALFORMED)
@pytest.mark.parametrize(("profile", "status"), [("api-sig", 400), ("ironic", 406)])
def test_malformed_version(headers: dict[str, str], profile: str, status: int) -> None:
    resp = get(make(profile), headers=headers)
    assert resp.status_int == status
    entry = error_entry(resp)
    assert entry["code"] == "microversion.malformed"
    assert entry["status"] == status
    assert (entry["min_version"], entry["max_version"]) == ("1.1", "1.115")
    # range headers and Vary on the error too, but no served version: none was served
    assert (resp.headers[MIN_H], resp.headers[MAX_H]) == ("1.1", "1.115")
    assert sorted(vary_tokens(resp)) == [STD, LEGACY]
    assert LEGACY not in resp.headers
    assert STD not in resp.headers


@pytest.mark.parametrize(
    ("requested", "message"),
    [
        pytest.param("99.99", "Mutually exclusive versions requested. Version 99.99", id="major-above"),
        pytest.param("2.0", "Mutually exclusive versions requested. Version 2.0", id="major-2"),
        pytest.param("1.0", "Version 1.0 was requested but the minor version", id="minor-below"),
        pytest.param("1.116", "Version 1.116 was requested but the minor version", id="minor-above"),
    ],
)
@pytest.mark.parametrize("header", [LEGACY, STD])
@pytest.mark.parametrize("profile", ["api-sig", "ironic"])
def test_out_of_range_is_406(requested: str, message: str, header: str, profile: str) -> None:
    value = requested if header == LEGACY else f"baremetal {requested}"
    resp = get(make(profile), headers={header: value})
    assert resp.status_int == 406
    entry = error_entry(resp)
    assert entry["code"] == "microversion.unsupported"
    assert entry["detail"].startswith(message)
    assert "The supported version range is: [1.1, 1.115]." in entry["detail"]
    assert (resp.headers[MIN_H], resp.headers[MAX_H]) == ("1.1", "1.115")
    assert sorted(vary_tokens(resp)) == [STD, LEGACY]


def test_ironic_profile_envelope_is_what_ironicclient_and_sdk_parse() -> None:
    resp = get(make("ironic"), headers={LEGACY: "99.99"}, HTTP_X_OPENSTACK_REQUEST_ID="x")
    body = json.loads(resp.body)
    inner = json.loads(body["error_message"])  # ironicclient: json.loads(error_message)
    assert inner["faultcode"] == "Client"
    assert inner["faultstring"] == inner["description"]  # sdk reads faultstring, old tools description
    assert "Version 99.99" in inner["faultstring"]


def test_api_sig_profile_has_only_the_errors_list() -> None:
    resp = get(make("api-sig"), headers={LEGACY: "99.99"}, **{"openstack.request_id": "req-1"})
    body = json.loads(resp.body)
    assert list(body) == ["errors"]
    entry = body["errors"][0]
    assert entry["title"] == "Not Acceptable"
    assert entry["request_id"] == "req-1"


def test_app_error_response_keeps_all_version_headers() -> None:
    resp = get(make(), path="/missing", headers={LEGACY: "1.20"})
    assert resp.status_int == 404
    assert resp.headers[LEGACY] == "1.20"
    assert resp.headers[STD] == "baremetal 1.20"
    assert (resp.headers[MIN_H], resp.headers[MAX_H]) == ("1.1", "1.115")
    assert sorted(vary_tokens(resp)) == [STD, LEGACY]


def test_vary_is_merged_with_the_apps_without_duplicates() -> None:
    resp = get(make(), path="/vary")
    tokens = vary_tokens(resp)
    assert tokens[0] == "Accept-Encoding"
    assert sorted(t.lower() for t in tokens) == sorted(["accept-encoding", STD.lower(), LEGACY.lower()])


def test_each_answer_gets_its_own_vary_merged_with_ours() -> None:
    # The merged Vary is remembered per value the app sends: answers with different values,
    # in turn and repeated, and two Vary lines in one answer, each get their own merge.
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        lines = {
            "/a": [("Vary", "Accept-Encoding")],
            "/b": [("Vary", "Accept-Language")],
            "/two": [("Vary", "Accept"), ("Vary", "Cookie")],
        }[environ["PATH_INFO"]]
        start_response("200 OK", [("Content-Type", "text/plain"), *lines])
        return [b"ok"]

    ours = sorted([STD.lower(), LEGACY.lower()])
    middleware = make(app=app)
    for path, theirs in [("/a", ["accept-encoding"]), ("/b", ["accept-language"]),
                         ("/a", ["accept-encoding"]), ("/two", ["accept", "cookie"]),
                         ("/b", ["accept-language"]), ("/two", ["accept", "cookie"])]:  # fmt: skip
        tokens = [t.lower() for t in vary_tokens(get(middleware, path=path))]
        assert sorted(tokens) == sorted(theirs + ours), (path, tokens)


def test_vary_star_stays_star() -> None:
    assert vary_tokens(get(make(), path="/vary-star")) == ["*"]


def test_app_version_header_is_replaced_not_duplicated() -> None:
    resp = get(make(), path="/own-version-header", headers={LEGACY: "1.3"})
    assert [v for k, v in resp.headerlist if k.lower() == LEGACY.lower()] == ["1.3"]  # any case: one line


def test_an_app_that_sometimes_sets_our_headers_gets_them_merged_every_time() -> None:
    # The middleware remembers the app's header names that are not its own: a name it has
    # seen before must not hide one of ours that comes later.
    calls = iter(range(100))

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        headers = [("Content-Type", "text/plain"), ("Content-Length", "0")]
        if next(calls) % 2:
            headers += [("vary", "Accept"), (LEGACY, "9.9"), ("X-Other", "1")]
        start_response("200 OK", headers)
        return [b""]

    mw = make(app=app)
    for i in range(6):
        resp = get(mw, headers={LEGACY: "1.3"})
        assert [v for k, v in resp.headerlist if k.lower() == LEGACY.lower()] == ["1.3"]  # any case: one line
        assert vary_tokens(resp) == (["Accept", STD, LEGACY] if i % 2 else [STD, LEGACY])


class CountingApp:
    """A WSGI app that is an instance of a class (as the next middleware is)."""

    def __init__(self, body: bytes) -> None:
        self.body, self.calls = body, 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        self.calls += 1
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(self.body)))])
        return [self.body]


@pytest.mark.wsgi_only  # the WSGI middleware's own attributes or PEP 3333 mechanics
def test_the_wrapped_app_can_be_an_instance_and_can_be_replaced() -> None:
    first, second = CountingApp(b"first"), CountingApp(b"second")
    mw = mv(first, service_type="baremetal", min_version="1.1", max_version="1.2")
    assert get(mw).body == b"first" and mw.app is first
    mw.app = second
    assert get(mw).body == b"second" and mw.app is second
    mw.app = echo_app
    assert served(get(mw)) == "1.1"
    assert (first.calls, second.calls) == (1, 1)


def test_head_error_has_no_body() -> None:
    resp = run(make(), Request.blank("/v1/nodes", method="HEAD", headers={LEGACY: "99.99"}))
    assert resp.status_int == 406
    assert resp.body == b""


# -- forwarding the negotiated version to the app -------------------------------------------


def self_negotiating_app(reads: str) -> Callable[..., Iterable[bytes]]:
    """An app that negotiates by itself, like Ironic: range 1.1..1.115, no header -> 1.1,
    ``latest`` -> 1.115, from the one header it reads (*reads*: "legacy" or "standard").
    It answers the version it served, with ``health`` only from 1.109 (as Ironic does)."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if reads == "legacy":
            text = environ.get("HTTP_X_OPENSTACK_IRONIC_API_VERSION")
        else:
            service, _, text = environ.get("HTTP_OPENSTACK_API_VERSION", "").partition(" ")
            text = text if service == "baremetal" else None
        version = Version(1, 1) if not text else Version(1, 115) if text == "latest" else parse_version(text)
        doc: dict[str, Any] = {"app_version": str(version)}
        if version >= Version(1, 109):
            doc["health"] = "OK"
        body = json.dumps(doc).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]

    return app


@pytest.mark.parametrize("reads", ["legacy", "standard"])
@pytest.mark.parametrize(
    ("headers", "label"),
    [
        pytest.param({LEGACY: "latest"}, "1.99", id="legacy-latest"),
        pytest.param({STD: "baremetal latest"}, "1.99", id="standard-latest"),
        pytest.param({}, "1.1", id="no-header"),
        pytest.param({LEGACY: "1.50"}, "1.50", id="legacy-only"),
        pytest.param({STD: "baremetal 1.50"}, "1.50", id="standard-only"),
        pytest.param({STD: "baremetal 1.40", LEGACY: "latest"}, "1.40", id="standard-wins-over-legacy"),
        pytest.param({STD: "ironic 1.60"}, "1.60", id="alias"),
        pytest.param({STD: "compute 2.1, baremetal 1.70"}, "1.70", id="with-another-service"),
        pytest.param({STD: "compute latest"}, "1.1", id="another-service-only"),
        pytest.param({STD: "BAREMETAL 1.80"}, "1.80", id="service-type-case"),
    ],
)
def test_the_app_serves_exactly_the_version_the_middleware_labels(
    reads: str, headers: dict[str, str], label: str
) -> None:
    # Ironic 1.115 behind max_version 1.99: `latest` was labelled 1.99 while the app served
    # 1.115.  The middleware forwards what it negotiated in the version headers.
    app = mv(
        self_negotiating_app(reads), service_type="baremetal", min_version="1.1", max_version="1.99",
        legacy_header=LEGACY, service_aliases=["ironic"], error_profile="ironic",
    )  # fmt: skip
    resp = get(app, headers=headers)
    assert resp.status_int == 200
    body = json.loads(resp.body)
    assert body["app_version"] == label
    assert "health" not in body
    assert resp.headers[STD] == f"baremetal {label}"
    assert resp.headers[LEGACY] == label
    assert (resp.headers[MIN_H], resp.headers[MAX_H]) == ("1.1", "1.99")
    assert sorted(vary_tokens(resp)) == [STD, LEGACY]


def test_the_forwarded_headers_are_what_the_app_sees() -> None:
    seen: dict[str, Any] = {}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        seen.update(environ)
        start_response("204 No Content", [])
        return []

    mw = mv(app, service_type="baremetal", min_version="1.1", max_version="1.99",
                                legacy_header=LEGACY)  # fmt: skip
    get(mw, headers={STD: "compute 2.1, baremetal latest", LEGACY: "1.3"})
    assert seen[S_ENV] == "baremetal 1.99"  # our entry only: the app negotiates on it
    assert seen[L_ENV] == "1.99"
    assert seen[ENVIRON_VERSION] == Version(1, 99)
    # a service without a legacy header forwards the standard header only
    mw = mv(app, service_type="compute", min_version="2.1", max_version="2.90")
    seen.clear()
    get(mw, headers={LEGACY: "1.3"})
    assert seen[S_ENV] == "compute 2.1"
    assert seen[L_ENV] == "1.3"


# -- pinning ------------------------------------------------------------------------------


def test_pin_max_version_lowers_what_is_advertised_and_served() -> None:
    app = make(pin_max_version="1.82")
    assert get(app).headers[MAX_H] == "1.82"
    assert served(get(app, headers={LEGACY: "latest"})) == "1.82"
    resp = get(app, headers={LEGACY: "1.83"})
    assert resp.status_int == 406
    assert error_entry(resp)["max_version"] == "1.82"


# -- configuration ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        pytest.param({"min_version": "1.10", "max_version": "1.2"}, "below", id="min-above-max"),
        pytest.param({"max_version": "1.x"}, "max_version", id="bad-version"),
        pytest.param({"pin_max_version": "1.200"}, "outside", id="pin-above-max"),
        pytest.param({"error_profile": "nova"}, "profile", id="unknown-profile"),
        pytest.param({"service_type": "bare metal"}, "service_type", id="service-type-with-space"),
        pytest.param({"legacy_header": "X Bad"}, "legacy_header", id="bad-header-name"),
    ],
)
def test_bad_configuration_fails_at_construction(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(**kw)


def test_standard_only_service_uses_standard_range_header_names() -> None:
    app = mv(echo_app, service_type="compute", min_version="2.1", max_version="2.90")
    resp = get(app, headers={STD: "compute 2.10"})
    assert resp.headers["OpenStack-API-Minimum-Version"] == "2.1"
    assert resp.headers["OpenStack-API-Maximum-Version"] == "2.90"
    assert vary_tokens(resp) == [STD]


# -- gates --------------------------------------------------------------------------------


def gated_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    if environ["PATH_INFO"] == "/name":
        require_version(environ, "1.5", what="Field 'name'")
    if environ["PATH_INFO"] == "/route":
        require_version(environ, "1.50", what="Route /v1/things", status=404)
    if environ["PATH_INFO"] == "/window":
        require_version(environ, "1.10", "1.20", what="Parameter 'old'")
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


def gated(profile: str = "api-sig") -> MicroversionMiddleware:
    return mv(
        gated_app, service_type="baremetal", min_version="1.1", max_version="1.115",
        legacy_header=LEGACY, error_profile=profile,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("path", "version", "status", "required"),
    [
        pytest.param("/name", "1.4", 406, "1.5", id="field-too-new"),
        pytest.param("/route", "1.49", 404, "1.50", id="route-too-new-404"),
        pytest.param("/window", "1.9", 406, "1.10", id="param-before-window"),
        pytest.param("/window", "1.21", 406, "1.10", id="param-after-window"),
    ],
)
def test_gate_error_names_the_required_version(path: str, version: str, status: int, required: str) -> None:
    resp = get(gated(), path=path, headers={LEGACY: version})
    assert resp.status_int == status
    entry = error_entry(resp)
    # distinguishable from an out-of-range 406 by its code
    assert entry["code"] == "microversion.feature-unavailable"
    assert entry["required_version"] == required
    assert entry["served_version"] == version
    # a version *was* served, so it is echoed
    assert resp.headers[LEGACY] == version


@pytest.mark.parametrize(("path", "version"), [("/name", "1.5"), ("/route", "latest"), ("/window", "1.20")])
def test_gate_passes_inside_its_window(path: str, version: str) -> None:
    assert get(gated(), path=path, headers={LEGACY: version}).status_int == 200


def test_version_gate_wrap_gates_a_whole_wsgi_app() -> None:
    inner = VersionGate("1.60", what="Route /v1/shards", status=404).wrap(echo_app)
    app = mv(inner, service_type="baremetal", min_version="1.1", max_version="1.115")
    assert get(app, headers={STD: "baremetal 1.59"}).status_int == 404
    assert get(app, headers={STD: "baremetal 1.60"}).status_int == 200


def test_versioned_fields() -> None:
    fields = VersionedFields({"name": "1.5", "description": "1.51"}, until={"legacy": "1.9"})
    doc = {"uuid": "u", "name": "n", "description": "d", "legacy": "x"}
    assert fields.filter(doc, Version(1, 1)) == {"uuid": "u", "legacy": "x"}
    assert fields.filter(doc, Version(1, 51)) == {"uuid": "u", "name": "n", "description": "d"}
    with pytest.raises(HTTPProblem) as info:
        fields.check(["uuid", "description"], {ENVIRON_VERSION: Version(1, 50)})
    assert info.value.code == "microversion.feature-unavailable"
    assert info.value.extra["required_version"] == "1.51"
    fields.check(["uuid", "name"], {ENVIRON_VERSION: Version(1, 5)})


def test_gate_message_can_keep_a_services_own_wording() -> None:
    wording = (
        "Request not acceptable. {what} requires API version {required} or later; "
        "the request was served at {served}."
    )
    environ = {ENVIRON_VERSION: Version(1, 11)}
    with pytest.raises(HTTPProblem) as info:
        require_version(environ, "1.12", what="RAID", detail=wording)
    assert info.value.detail == (
        "Request not acceptable. RAID requires API version 1.12 or later; the request was served at 1.11."
    )
    # the code and the machine-readable versions are the library's, whatever the words
    assert info.value.status == 406 and info.value.code == "microversion.feature-unavailable"
    assert info.value.extra["required_version"] == "1.12" and info.value.extra["served_version"] == "1.11"
    require_version({ENVIRON_VERSION: Version(1, 12)}, "1.12", what="RAID", detail=wording)
    # a template naming anything else is refused when the gate is built, not at request time
    with pytest.raises(ConfigError):
        VersionGate("1.2", what="x", detail="{what} needs {version}")


def test_gate_bounds_are_validated() -> None:
    with pytest.raises(ConfigError):
        VersionGate("1.10", "1.2", what="x")
    with pytest.raises(ConfigError):
        VersionGate("one", what="x")


# -- discovery ----------------------------------------------------------------------------


def discovery_app(**kw: Any) -> MicroversionMiddleware:
    options: dict[str, Any] = dict(
        discovery=True, discovery_name="OpenStack Ironic API", discovery_description="Bare metal.",
        discovery_resources=["chassis", "nodes", "ports", "drivers"],
    )  # fmt: skip
    return make(**{**options, **kw})


def test_root_discovery_document_is_ironic_shaped() -> None:
    resp = get(discovery_app(), path="/", HTTP_HOST="127.0.0.1:6385")
    assert resp.status_int == 200
    doc = resp.json
    assert doc["name"] == "OpenStack Ironic API"
    entry = doc["versions"][0]
    assert doc["default_version"] == entry
    assert entry == {
        "id": "v1",
        "links": [{"href": "http://127.0.0.1:6385/v1/", "rel": "self"}],
        "status": "CURRENT",
        "min_version": "1.1",
        "version": "1.115",
        "max_version": "1.115",
    }
    assert resp.headers[MIN_H] == "1.1" and resp.headers[LEGACY] == "1.1"


@pytest.mark.parametrize("path", ["/v1", "/v1/"])
def test_major_discovery_document(path: str) -> None:
    resp = get(discovery_app(), path=path, HTTP_HOST="127.0.0.1:6385")
    doc = resp.json
    assert doc["id"] == "v1"
    assert doc["version"]["version"] == "1.115"  # keystoneauth reads body["version"]
    assert doc["nodes"] == [
        {"href": "http://127.0.0.1:6385/v1/nodes/", "rel": "self"},
        {"href": "http://127.0.0.1:6385/nodes/", "rel": "bookmark"},
    ]
    assert doc["links"][0] == {"href": "http://127.0.0.1:6385/v1/", "rel": "self"}


def test_discovery_head_has_headers_and_no_body() -> None:
    get_resp = get(discovery_app(), path="/")
    head = run(discovery_app(), Request.blank("/", method="HEAD"))
    assert head.status_int == 200 and head.body == b""
    assert head.headers["Content-Length"] == get_resp.headers["Content-Length"]


def test_discovery_uses_public_url_and_pinned_max() -> None:
    doc = get(discovery_app(public_url="https://bm.example.org/", pin_max_version="1.82"), path="/").json
    assert doc["versions"][0]["links"][0]["href"] == "https://bm.example.org/v1/"
    assert doc["versions"][0]["version"] == "1.82"


def test_discovery_out_of_range_is_406_like_ironic() -> None:
    assert get(discovery_app(), path="/", headers={LEGACY: "99.99"}).status_int == 406


def test_non_discovery_paths_and_methods_reach_the_app() -> None:
    assert served(get(discovery_app(), path="/v1/nodes")) == "1.1"
    resp = run(discovery_app(), Request.blank("/", method="POST"))
    assert resp.json == {"served": "1.1"}


def test_discovery_helpers_are_usable_on_their_own() -> None:
    from apimw.discovery import major_document, request_base_url, root_document

    environ = Request.blank("/x", environ={"SCRIPT_NAME": "/baremetal"}, headers={"Host": "h:6385"}).environ
    base = request_base_url(environ)
    assert base == "http://h:6385/baremetal"
    lo, hi = Version(1, 1), Version(1, 9)
    root = root_document(base_url=base, min_version=lo, max_version=hi, name="svc")
    assert root["versions"][0]["links"][0]["href"] == "http://h:6385/baremetal/v1/"
    v1 = major_document(base_url=base, min_version=lo, max_version=hi, resources=["nodes"])
    assert v1["version"]["min_version"] == "1.1" and v1["nodes"][0]["rel"] == "self"


def resource_names(doc: dict[str, Any]) -> list[str]:
    return [k for k, v in doc.items() if isinstance(v, list) and k != "links"]


@pytest.mark.parametrize(
    ("headers", "listed"),
    [
        pytest.param({}, ["nodes"], id="no-header-is-the-minimum"),
        pytest.param({LEGACY: "1.23"}, ["nodes"], id="before-both"),
        pytest.param({LEGACY: "1.24"}, ["nodes", "portgroups"], id="from-since"),
        pytest.param({STD: "baremetal 1.82"}, ["nodes", "portgroups", "shards"], id="string-form"),
        pytest.param({LEGACY: "latest"}, ["nodes", "portgroups", "shards"], id="latest"),
    ],
)
def test_major_discovery_links_each_resource_from_its_version(
    headers: dict[str, str], listed: list[str]
) -> None:
    # Ironic lists a collection in /v1 only at versions that have it (portgroups from 1.24).
    app = discovery_app(discovery_resources=["nodes", ("portgroups", "1.24"), "shards:1.82"])
    resp = get(app, path="/v1/", headers=headers, HTTP_HOST="127.0.0.1:6385")
    assert resource_names(resp.json) == listed
    if "portgroups" in listed:
        assert resp.json["portgroups"] == [
            {"href": "http://127.0.0.1:6385/v1/portgroups/", "rel": "self"},
            {"href": "http://127.0.0.1:6385/portgroups/", "rel": "bookmark"},
        ]
    head = run(app, Request.blank("/v1/", method="HEAD", headers=headers))
    assert head.headers["Content-Length"] == str(len(get(app, path="/v1/", headers=headers).body))


def test_major_document_links_resources_at_the_served_version() -> None:
    from apimw.discovery import major_document

    lo, v124, hi = Version(1, 1), Version(1, 24), Version(1, 99)
    resources = ["nodes", ("portgroups", v124), "shards:1.82"]
    doc = major_document(base_url="", min_version=lo, max_version=hi, resources=resources, served=lo)
    assert resource_names(doc) == ["nodes"]
    doc = major_document(base_url="", min_version=lo, max_version=hi, resources=resources, served=v124)
    assert resource_names(doc) == ["nodes", "portgroups"]
    doc = major_document(base_url="", min_version=lo, max_version=hi, resources=resources)  # the max
    assert resource_names(doc) == ["nodes", "portgroups", "shards"]


@pytest.mark.parametrize(
    "resource",
    [pytest.param(("portgroups", "1.x"), id="bad-version"), pytest.param("shards:", id="empty-version"),
     pytest.param(":1.2", id="no-name"), pytest.param(("a/b", "1.2"), id="not-a-path-segment")],
)  # fmt: skip
def test_bad_discovery_resources_fail_at_construction(resource: Any) -> None:
    with pytest.raises(ConfigError, match="discovery_resources"):
        discovery_app(discovery_resources=["nodes", resource])


def test_without_discovery_the_root_reaches_the_app() -> None:
    assert served(get(make(), path="/")) == "1.1"


# -- sans-IO ------------------------------------------------------------------------------


def test_select_version_is_usable_without_wsgi() -> None:
    sel = select_version(
        "compute 2.1, baremetal 1.9", None, service_types=frozenset({"baremetal"}),
        min_version=Version(1, 1), max_version=Version(1, 10),
    )  # fmt: skip
    assert sel.version == Version(1, 9)
    sel = select_version(
        None, "1.11", service_types=frozenset({"baremetal"}),
        min_version=Version(1, 1), max_version=Version(1, 10), legacy_header=LEGACY,
    )  # fmt: skip
    assert sel.version is None and sel.error == "microversion.unsupported" and sel.header == LEGACY


# -- PEP 3333 -----------------------------------------------------------------------------


class ClosingBody:
    def __init__(self) -> None:
        self.closed = 0

    def __iter__(self) -> Any:
        yield b"a"
        yield b"b"

    def close(self) -> None:
        self.closed += 1


@pytest.mark.wsgi_only  # the WSGI middleware's own attributes or PEP 3333 mechanics
def test_close_is_called_exactly_once_and_write_is_passed_through() -> None:
    body = ClosingBody()
    written: list[bytes] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> ClosingBody:
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"w")
        return body

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        return written.append

    mw = mv(app, service_type="baremetal", min_version="1.1", max_version="1.2")
    environ = Request.blank("/").environ
    result = mw(environ, start_response)
    chunks = list(result)
    result.close()  # type: ignore[attr-defined]
    assert written == [b"w"] and chunks == [b"a", b"b"]
    assert body.closed == 1


@pytest.mark.wsgi_only  # PEP 3333's exc_info
@pytest.mark.parametrize("started_first", [False, True], ids=["first-call", "replacing"])
def test_exc_info_reaches_the_server_only_to_replace(started_first: bool) -> None:
    # PEP 3333: exc_info lets the app replace headers it already gave start_response (the
    # server re-raises it if they were sent).  On a first call there is nothing to replace,
    # and webob's get_response / werkzeug's test client would re-raise the error the app
    # handled instead of sending its answer: the middleware drops it there.
    received: list[Any] = []

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        if started_first:
            start_response("200 OK", [("Content-Type", "text/plain")])
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            import sys

            start_response("500 Internal Server Error", [("Content-Type", "text/plain")], sys.exc_info())
        return [b"x"]

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        received.append((status, dict(headers), exc_info))
        return lambda data: None

    mw = mv(app, service_type="baremetal", min_version="1.1", max_version="1.2")
    mw(Request.blank("/").environ, start_response)
    status, headers, exc_info = received[-1]
    assert len(received) == (2 if started_first else 1)
    assert status.startswith("500")
    if started_first:
        assert exc_info is not None and exc_info[0] is RuntimeError
    else:
        assert exc_info is None
    assert headers["OpenStack-API-Version"] == "baremetal 1.1"
