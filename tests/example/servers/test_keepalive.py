"""A keep-alive client keeps its one connection across every answer, 204 included.

Before: each DELETE's 204 came with ``Connection: close`` (waitress 3 closes any
HTTP/1.1 response without a Content-Length, and a 204 must not carry one), so every
DELETE dropped the client's connection and cost it a reconnect.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import HOST, baremetal_service

VERSION = {"X-OpenStack-Ironic-API-Version": "latest"}


@pytest.fixture(params=["default", "granian"])
def service_port(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[int]:
    """``baremetal-service`` (its default server, waitress, and granian) on a free loopback port, SQLite in
    *tmp_path*."""
    chosen = [] if request.param == "default" else ["--server", request.param]
    with baremetal_service(tmp_path, "--no-conductor", *chosen) as service:
        yield service.port
    assert service.proc is not None and service.proc.returncode == 0, service.output()
    service.assert_no_traceback()


def _call(
    conn: http.client.HTTPConnection, method: str, path: str, body: object = None
) -> tuple[int, dict[str, str], bytes]:
    headers = dict(VERSION)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    resp = conn.getresponse()
    payload = resp.read()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload


def test_a_keep_alive_client_keeps_its_connection_across_a_delete(service_port: int) -> None:
    conn = http.client.HTTPConnection(HOST, service_port, timeout=10)
    try:
        status, _, payload = _call(conn, "POST", "/v1/nodes", {"driver": "fake-hardware", "name": "ka-1"})
        assert status == 201, payload
        node = json.loads(payload)["uuid"]
        sock = conn.sock  # the one socket everything below must go through
        assert sock is not None
        local = sock.getsockname()

        status, headers, payload = _call(conn, "DELETE", f"/v1/nodes/{node}")
        assert status == 204, payload
        assert payload == b""
        assert "content-length" not in headers, headers  # RFC 9110: never on a 204
        assert "transfer-encoding" not in headers, headers
        assert headers.get("connection", "").lower() != "close", headers

        # the next requests go over the same socket: http.client would have opened a new one
        # (another local port) had the server closed it
        status, _, payload = _call(conn, "GET", f"/v1/nodes/{node}")
        assert status == 404, payload
        status, _, payload = _call(conn, "POST", "/v1/nodes", {"driver": "fake-hardware", "name": "ka-2"})
        assert status == 201, payload
        status, headers, _ = _call(conn, "DELETE", f"/v1/nodes/{json.loads(payload)['uuid']}")
        assert status == 204
        status, _, payload = _call(conn, "GET", "/v1/nodes")
        assert status == 200 and json.loads(payload) == {"nodes": []}, payload
        assert conn.sock is sock
        assert conn.sock.getsockname() == local
    finally:
        conn.close()
