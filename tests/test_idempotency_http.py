"""Over real HTTP: waitress on loopback in front of the middleware, requests as the client."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from apimw.idempotency import IdempotencyMiddleware
from tests.idempotency_support import CreateApp
from tests.wsgi import LoopbackWaitress


class Served:
    def __init__(self, app: Any) -> None:
        self.server = LoopbackWaitress(app, name="waitress-idem", threads=4)
        self.url = self.server.url
        self.session = requests.Session()
        deadline = time.monotonic() + 10
        while True:
            try:
                self.session.get(self.url + "/", timeout=1)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def post(self, path: str, token: str | None, **kwargs: Any) -> requests.Response:
        headers = {"X-Project-Id": "project-a", **kwargs.pop("headers", {})}
        if token is not None:
            headers["X-Client-Token"] = token
        return self.session.post(self.url + path, headers=headers, timeout=10, **kwargs)

    def close(self) -> None:
        self.session.close()
        self.server.stop()


class Router:
    """/v1/nodes creates (counted); /v1/dumps answers 50 kB in chunks."""

    def __init__(self) -> None:
        self.create = CreateApp()
        self.dumps = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["PATH_INFO"] == "/v1/dumps":
            self.dumps += 1
            environ["wsgi.input"].read()
            start_response("201 Created", [("Content-Type", "application/octet-stream"),
                                           ("Location", f"/v1/dumps/{self.dumps}")])  # fmt: skip
            return (b"d" * 1000 for _ in range(50))
        if environ["REQUEST_METHOD"] == "GET":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok"]
        return self.create(environ, start_response)


@pytest.fixture(params=["memory", "redis"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[Served, Router]]:
    url = "memory://" if request.param == "memory" else request.getfixturevalue("redis_server").url
    router = Router()
    mw = IdempotencyMiddleware(router, store=url, key_prefix=f"h{uuid.uuid4().hex[:8]}:",
                               max_response_bytes=16_000)  # fmt: skip
    server = Served(mw)
    try:
        yield server, router
    finally:
        server.close()
        mw.close()


def test_chunked_upload_replay_over_http(served: tuple[Served, Router]) -> None:
    server, router = served

    def chunks() -> Iterator[bytes]:
        yield b'{"name": '
        yield b'"over-http", "driver": "ipmi"}'

    json_type = {"Content-Type": "application/json"}
    first = server.post("/v1/nodes", "http-token", data=chunks(), headers=json_type)
    assert first.status_code == 201
    assert first.json()["received"] == '{"name": "over-http", "driver": "ipmi"}'
    again = server.post("/v1/nodes", "http-token", data=b'{"driver":"ipmi","name":"over-http"}',
                        headers=json_type)  # fmt: skip
    assert again.status_code == 201
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == first.headers["Location"]
    assert "Set-Cookie" not in again.headers
    other = server.post("/v1/nodes", "http-token", json={"name": "other"})
    assert other.status_code == 409
    assert other.json()["errors"][0]["code"] == "idempotency.fingerprint-mismatch"
    assert router.create.calls == 1


def test_large_answer_streams_over_http_and_a_retry_does_not_run_again(served: tuple[Served, Router]) -> None:
    server, router = served
    first = server.post("/v1/dumps", "dump-token", json={})
    assert first.status_code == 201
    assert first.content == b"d" * 50_000
    retry = server.post("/v1/dumps", "dump-token", json={})
    assert retry.status_code == 409
    assert retry.headers["Location"] == "/v1/dumps/1"
    assert retry.json()["errors"][0]["code"] == "idempotency.replay-unavailable"
    assert router.dumps == 1
