"""The microversion middleware's bounds and header matching, on the WSGI and the ASGI door.

What a client chooses (the size and the number of distinct version header values) must not
grow a server process; header names are matched as HTTP defines them; repeated header lines
follow one rule on both doors; PEP 3333's ``exc_info`` rule holds once the answer is sent.
"""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from webob import Request

from apimw import HTTPProblem, served_version
from apimw.asgi import MicroversionMiddleware as ASGIMicroversionMiddleware
from apimw.microversion import MicroversionMiddleware
from tests.asgi_support import flavours, layered, module_flavour
from tests.wsgi import run
from tests.wsgiref_run import run_under_wsgiref

pytest_generate_tests = flavours()
FLAVOUR = "wsgi"

_flavour = module_flavour()

LEGACY = "X-OpenStack-Ironic-API-Version"
STD = "OpenStack-API-Version"
OPTIONS: dict[str, Any] = {
    "service_type": "baremetal",
    "min_version": "1.1",
    "max_version": "1.115",
    "legacy_header": LEGACY,
    "error_profile": "ironic",
}


def echo_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = json.dumps({"served": str(served_version(environ))}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def mv(**options: Any) -> Any:
    return layered(FLAVOUR, echo_app, (MicroversionMiddleware, {**OPTIONS, **options}))


def retained_bytes(app: Any, requests: Iterable[dict[str, str]]) -> int:
    """Bytes still allocated after *app* answered *requests* (the strings sent are freed)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for headers in requests:
            status = run(app, Request.blank("/v1/nodes", headers=headers)).status_int
            assert status in (200, 400, 406)
            del headers
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_long_version_values_are_not_kept() -> None:
    """100 distinct 120 kB values (12 MB sent) leave less than 1 MB behind."""
    app = mv()
    run(app, Request.blank("/v1/nodes"))  # warm: the first request builds what every one shares

    def requests() -> Iterable[dict[str, str]]:
        for i in range(100):
            filler = f"{i:06d}" + "x" * 120_000
            yield {STD: f"baremetal 1.{i % 100}, other {filler}"} if i % 2 else {LEGACY: filler}

    assert retained_bytes(app, requests()) < 1_000_000


# -- the ASGI door's header lines (a WSGI server has joined or dropped them already) ---------


def asgi_request(raw_headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[str, str], dict[str, Any]]:
    """One request through the ASGI middleware: status, response headers, what the app saw."""
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["version"] = served_version(scope)
        seen["headers"] = list(scope["headers"])
        seen["keys"] = set(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
             "scheme": "http", "path": "/v1/nodes", "raw_path": b"/v1/nodes", "root_path": "",
             "query_string": b"", "headers": raw_headers, "server": ("127.0.0.1", 80),
             "client": ("127.0.0.1", 40000)}  # fmt: skip
    asyncio.run(ASGIMicroversionMiddleware(app, **OPTIONS)(scope, receive, send))
    start = sent[0]
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in start["headers"]}
    return start["status"], headers, seen


@pytest.mark.wsgi_only  # ASGI header lines, driven directly
@pytest.mark.parametrize(
    "name",
    [b"openstack_api_version", b"x_openstack_ironic_api_version", b"openstack-api_version"],
)
def test_an_underscore_is_not_a_hyphen_on_the_asgi_door(name: bytes) -> None:
    status, headers, seen = asgi_request([(name, b"baremetal 1.5" if b"openstack_api" in name else b"1.5")])
    assert status == 200
    assert str(seen["version"]) == "1.1"  # no version header was sent: the minimum
    assert headers[STD.lower()] == "baremetal 1.1"
    assert (name, b"baremetal 1.5") in seen["headers"] or (name, b"1.5") in seen["headers"]


@pytest.mark.wsgi_only  # ASGI header lines, driven directly
@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        pytest.param([(b"openstack-api-version", b"baremetal 1.6"),
                      (b"openstack-api-version", b"baremetal 1.8")], "1.8", id="standard"),
        pytest.param([(b"x-openstack-ironic-api-version", b"1.6"),
                      (b"x-openstack-ironic-api-version", b"1.7")], "1.7", id="legacy"),
        pytest.param([(b"x-openstack-ironic-api-version", b"1.5"),
                      (b"x-openstack-ironic-api-version", b"1.5")], "1.5", id="legacy-same-twice"),
    ],
)  # fmt: skip
def test_repeated_lines_follow_the_wsgi_servers_joining_on_the_asgi_door(
    lines: list[tuple[bytes, bytes]], expected: str
) -> None:
    # A WSGI server joins repeated lines with "," (RFC 9110 §5.3); the ASGI door reads them alike.
    status, headers, seen = asgi_request(lines)
    assert status == 200
    assert str(seen["version"]) == expected
    # the app reads one line per version header, carrying exactly the served version
    forwarded = [
        (k, v)
        for k, v in seen["headers"]
        if k in (b"openstack-api-version", b"x-openstack-ironic-api-version")
    ]
    assert sorted(forwarded) == sorted([(b"openstack-api-version", f"baremetal {expected}".encode()),
                                        (b"x-openstack-ironic-api-version", expected.encode())])  # fmt: skip


@pytest.mark.wsgi_only  # ASGI scope keys, driven directly
def test_the_asgi_door_hands_the_app_apimw_keys_only() -> None:
    before = {"type", "asgi", "http_version", "method", "scheme", "path", "raw_path", "root_path",
              "query_string", "headers", "server", "client"}  # fmt: skip
    _, _, seen = asgi_request([(b"x-openstack-ironic-api-version", b"1.5")])
    added = seen["keys"] - before
    assert added and all(key.startswith("apimw.") for key in added), added


@pytest.mark.wsgi_only  # ASGI: discovery needs no CGI keys
def test_asgi_discovery_links_come_from_the_host_header() -> None:
    sent: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise AssertionError("discovery is answered by the middleware")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "scheme": "https",
        "path": "/api/v1",
        "root_path": "/api",
        "query_string": b"",
        "headers": [(b"host", b"bm.example:8443")],
        "server": ("10.0.0.1", 80),
    }
    mw = ASGIMicroversionMiddleware(app, **OPTIONS, discovery=True, discovery_resources=["nodes"])
    asyncio.run(mw(scope, None, send))  # type: ignore[arg-type]
    assert sent[0]["status"] == 200 and "HTTP_HOST" not in scope and "PATH_INFO" not in scope
    doc = json.loads(sent[1]["body"])
    assert doc["nodes"][0]["href"] == "https://bm.example:8443/api/v1/nodes/"


# -- PEP 3333: once the answer is sent, an error re-raises (never appended to the body) ------


@pytest.mark.wsgi_only  # PEP 3333's exc_info
def test_a_gate_raised_after_the_answer_was_sent_is_not_appended_to_it() -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        write = start_response("200 OK", [("Content-Type", "text/plain")])
        write(b"partial")  # the headers are on the wire now
        raise HTTPProblem(406, "microversion.feature-unavailable", "too late")

    wire, caught = run_under_wsgiref(MicroversionMiddleware(app, **OPTIONS), "/v1/nodes")
    assert caught is not None and caught[0] is HTTPProblem  # re-raised to the server
    head, _, body = wire.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and body == b"partial"
