"""apimw.asgi served by a real uvicorn on loopback: docs/asgi.md's samples and a Starlette app,
driven over real HTTP (raw sockets where a client's timing matters).

tests/test_asgi.py has the in-process and two-worker exactly-once tests; these check what only
a real server and real HTTP show.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

import apimw.asgi
from tests.servers import HOST, MemcachedServer, RedisServer, Service
from tests.test_docs import ROOT, samples_of


def _fastapi_sample(directory: Path) -> str:
    """docs/asgi.md's FastAPI sample, as written, in *directory* as a module; its name."""
    samples = samples_of(ROOT / "docs" / "asgi.md")
    sample = next(s for s in samples if s.lang == "python" and "FastAPI()" in s.text)
    (directory / "asgi_fastapi_sample.py").write_text(sample.text)
    return "asgi_fastapi_sample"


def _uvicorn(directory: Path, module: str, *extra: str, env: dict[str, str] | None = None) -> Service:
    return Service(
        directory,
        lambda port: [sys.executable, "-m", "uvicorn", f"{module}:app", "--app-dir", str(directory),
                      "--host", HOST, "--port", str(port), "--no-access-log", "--log-level", "warning",
                      *extra],
        name="uvicorn", ready_path="/v1/nodes/n1", env=env,
    )  # fmt: skip


def _test_app(directory: Path, store: str, log: Path, *extra: str) -> Service:
    """uvicorn serving tests/asgi_app.py on *store*, its executions counted in *log*."""
    return Service(
        directory,
        lambda port: [sys.executable, "-m", "uvicorn", "tests.asgi_app:app", "--host", HOST, "--port",
                      str(port), *extra, "--no-access-log", "--log-level", "warning"],
        name="uvicorn", cwd=ROOT, ready_path="/pid",
        env={"APIMW_TEST_STORE": store, "APIMW_TEST_LOG": str(log)},
    )  # fmt: skip


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of the one answer on *sock* (``Connection: close``)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def test_the_fastapi_sample_lets_one_of_two_writers_with_the_same_etag_win(tmp_path: Path) -> None:
    """Two PATCHes carrying the etag both read: one 200, the other 412, however their bodies
    arrive. The sample once checked If-Match, then awaited the body, then wrote: two writers
    whose bodies came a moment after their headers both passed the check and both won."""
    with _uvicorn(tmp_path, _fastapi_sample(tmp_path)) as uvicorn:
        version = {"OpenStack-API-Version": "baremetal 1.5"}
        etag = httpx.get(f"{uvicorn.url}/v1/nodes/n1", headers=version).headers["ETag"]
        writers = []
        for driver in ("idrac", "ilo"):  # the sample left n1 on redfish
            body = json.dumps({"driver": driver}).encode()
            sock = socket.create_connection((HOST, uvicorn.port), timeout=10)
            sock.sendall(
                b"PATCH /v1/nodes/n1 HTTP/1.1\r\nHost: apimw\r\nConnection: close\r\n"
                b"OpenStack-API-Version: baremetal 1.5\r\nContent-Type: application/json\r\n"
                + f"If-Match: {etag}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            )
            writers.append((sock, body))
        time.sleep(0.3)  # both requests are in the app, waiting for their bodies
        for sock, body in writers:
            sock.sendall(body)
        answers = []
        for sock, _ in writers:
            with sock:
                answers.append(_answer(sock))
        assert sorted(status for status, _ in answers) == [200, 412], answers
        (won,) = (json.loads(body) for status, body in answers if status == 200)
        assert httpx.get(f"{uvicorn.url}/v1/nodes/n1", headers=version).json()["driver"] == won["driver"]

        # If-Match: * on a node that does not exist: the app's 404 (docs/etag.md), not a 500
        missing = httpx.patch(f"{uvicorn.url}/v1/nodes/n9", json={"driver": "ipmi"},
                              headers={**version, "If-Match": "*"})  # fmt: skip
        assert missing.status_code == 404
        uvicorn.assert_no_traceback()


def test_redis_down_is_503_until_it_returns_and_an_app_error_releases_the_claim(tmp_path: Path) -> None:
    """Two uvicorn workers on a Redis of the test's own: Redis killed, a request with a token
    is a 503 JSON with Retry-After and the app does not run (fail-closed); Redis restarted on
    its port, the same uvicorn serves tokens again. An app that raises after the claim
    releases it: the retry runs (never a 409 in-flight for the lease)."""
    log = tmp_path / "executions.log"
    redis = RedisServer(tmp_path / "redis")
    with redis:
        uvicorn = _test_app(tmp_path, redis.url, log, "--workers", "2")
        with uvicorn:

            def post(token: str, path: str = "/v1/nodes") -> httpx.Response:
                with httpx.Client(timeout=10) as client:  # a new connection: either worker
                    return client.post(f"{uvicorn.url}{path}", json={"name": token},
                                       headers={"X-Client-Token": token})  # fmt: skip

            redis.kill()
            for attempt in range(4):
                down = post(f"down-{attempt}")
                assert down.status_code == 503
                assert down.headers["Retry-After"] == "1"
                assert down.headers["Content-Type"] == "application/json"
                assert down.json()["errors"][0]["code"] == "idempotency.store-unavailable"
            assert not log.exists()  # fail-closed: the app never ran

            redis.start()
            for attempt in range(4):
                first, again = post(f"up-{attempt}"), post(f"up-{attempt}")
                assert first.status_code == again.status_code == 201
                assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"
            assert len(log.read_text().splitlines()) == 4

            # each worker fails its first run: retry until a 201; every failure released its claim
            statuses = [post("flaky", "/v1/flaky").status_code for _ in range(3)]
            assert statuses[-1] == 201 and set(statuses) <= {500, 201}, statuses
            assert post("flaky", "/v1/flaky").headers["Idempotent-Replayed"] == "true"


# -- found by reading the glue: ASGI apps within the spec that the middlewares mishandled -------


def _call(
    app: Any, method: str = "GET", headers: list[tuple[bytes, bytes]] | None = None
) -> list[dict[str, Any]]:
    """One in-process ASGI request through *app*: the messages it sent."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": "/v1/things", "raw_path": b"/v1/things", "root_path": "",
        "query_string": b"", "headers": [(b"host", b"127.0.0.1"), *(headers or [])],
        "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def test_response_headers_given_as_a_generator_reach_the_client() -> None:
    """ASGI lets an app give its headers as any iterable; a generator can be read once."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        lines = [(b"content-type", b"application/json"), (b"x-app", b"1")]
        headers = (line for line in lines)
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})

    stack = apimw.asgi.MicroversionMiddleware(
        apimw.asgi.ETagMiddleware(app), service_type="baremetal", min_version="1.1", max_version="1.9"
    )
    start = _call(stack)[0]
    headers = {name.lower(): value for name, value in start["headers"]}
    assert start["status"] == 200
    assert headers[b"x-app"] == b"1"
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"openstack-api-version"] == b"baremetal 1.1"


def test_an_app_that_answers_nothing_is_named_in_asgi_terms() -> None:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()

    stack = apimw.asgi.IdempotencyMiddleware(app, scope="shared")
    request = [(b"content-type", b"application/json"), (b"x-client-token", b"t-1")]
    with pytest.raises(RuntimeError) as raised:
        _call(stack, "POST", request)
    assert "http.response.start" in str(raised.value)
    assert "start_response" not in str(raised.value)
    # the claim was released: the retry runs the app again (not a 409 in flight)
    with pytest.raises(RuntimeError, match="http.response.start"):
        _call(stack, "POST", request)


def test_every_header_name_apimw_sends_is_lower_case() -> None:
    """ASGI's header names are lower case: Starlette's ``Headers``/``MutableHeaders`` (which
    GZipMiddleware, CORSMiddleware... use on the answer) compare raw names as lower case, so
    an outer middleware would miss our ``Vary`` and add a second one; HTTP/2 forbids upper case."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        body = b'{"uuid": "n1", "etag": "W/\\"abc\\""}'
        await send({"type": "http.response.start", "status": 201 if scope["method"] == "POST" else 200,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    async def current(scope: dict[str, Any]) -> str:
        return 'W/"abc"'

    etag = apimw.asgi.ETagMiddleware(app, current_etag=current, enforces="*")
    stack = apimw.asgi.MicroversionMiddleware(
        apimw.asgi.IdempotencyMiddleware(etag, scope="shared"),
        service_type="baremetal", min_version="1.1", max_version="1.9",
        deprecated_below="1.5", deprecated_since="2026-01-01", sunset="2027-01-01",
        deprecation_link="https://docs.example.com/deprecations",
    )  # fmt: skip
    token = [(b"content-type", b"application/json"), (b"x-client-token", b"t-lower")]
    answers = {
        "GET": _call(stack),
        "GET 1.9": _call(stack, headers=[(b"openstack-api-version", b"baremetal 1.9")]),
        "406": _call(stack, headers=[(b"openstack-api-version", b"baremetal 9.9")]),
        "400 version": _call(stack, headers=[(b"openstack-api-version", b"baremetal x")]),
        "POST": _call(stack, "POST", token),
        "replay": _call(stack, "POST", token),
        "412": _call(stack, "PATCH", [(b"if-match", b'W/"stale"')]),
    }
    for what, sent in answers.items():
        names = [name for name, _ in sent[0]["headers"]]
        assert names == [name.lower() for name in names], (what, names)
    replayed = dict(answers["replay"][0]["headers"])
    assert replayed[b"idempotent-replayed"] == b"true"
    assert answers["406"][0]["status"] == 406 and answers["412"][0]["status"] == 412
    assert dict(answers["GET"][0]["headers"])[b"deprecation"] == b"@1767225600"


# -- memcached under ASGI: the blocking store's calls in worker threads ---------------------


@pytest.mark.serial  # measured against the clock
def test_a_hung_memcached_answers_503_in_about_the_store_timeout_under_load(tmp_path: Path) -> None:
    """memcached paused (SIGSTOP: connections are accepted, nothing answers), 200 concurrent
    POSTs with distinct tokens to one uvicorn worker: each is a 503 in about the store timeout
    (0.5 s here), a plain GET stays fast, and after SIGCONT the same uvicorn serves tokens.
    The store's calls queued on asyncio's default executor (min(32, cpus + 4) threads), each
    taking three socket timeouts on the hung server: the last 503s came after 50 s (0.5 s
    timeout, 2 cpus), and every other user of the default executor waited behind them."""
    log = tmp_path / "executions.log"
    memcached = MemcachedServer(tmp_path / "memcached")
    with memcached:
        uvicorn = _test_app(tmp_path, f"{memcached.url}?timeout=0.5", log)
        with uvicorn:

            async def burst(prefix: str, count: int) -> tuple[list[tuple[int, float]], tuple[int, float]]:
                limits = httpx.Limits(max_connections=count + 1)
                async with httpx.AsyncClient(base_url=uvicorn.url, timeout=120, limits=limits) as client:

                    async def post(n: int) -> tuple[int, float]:
                        start = time.monotonic()
                        answer = await client.post("/v1/nodes", json={"name": n},
                                                   headers={"X-Client-Token": f"{prefix}-{n}"})  # fmt: skip
                        if answer.status_code == 503:
                            assert answer.headers["Retry-After"] == "1"
                            assert answer.json()["errors"][0]["code"] == "idempotency.store-unavailable"
                        return answer.status_code, time.monotonic() - start

                    async def get() -> tuple[int, float]:
                        await asyncio.sleep(0.1)  # while the POSTs wait on the store
                        start = time.monotonic()
                        answer = await client.get("/pid")
                        return answer.status_code, time.monotonic() - start

                    *posts, plain = await asyncio.gather(*(post(n) for n in range(count)), get())
                    return posts, plain

            assert all(status == 201 for status, _ in asyncio.run(burst("warm", 20))[0])
            os.kill(memcached.proc.pid, signal.SIGSTOP)  # type: ignore[union-attr]
            try:
                posts, plain = asyncio.run(burst("hung", 200))
            finally:
                os.kill(memcached.proc.pid, signal.SIGCONT)  # type: ignore[union-attr]
            assert {status for status, _ in posts} == {503}
            slowest = max(took for _, took in posts)
            # queued on a shared executor, the 200 calls of three 0.5 s timeouts each take
            # 200 * 1.5 / 6 threads = 50 s on 2 cpus; each answered in about the timeout, the
            # slowest comes after about 1.3 s on an idle machine: 15 s is the margin for a loaded one
            assert slowest < 15.0, f"the slowest 503 took {slowest:.1f} s (store timeout 0.5 s)"
            assert plain[0] == 200 and plain[1] < 10.0, plain
            assert len(log.read_text().splitlines()) == 20  # fail-closed: the app never ran

            posts, _ = asyncio.run(burst("back", 20))
            assert all(status == 201 for status, _ in posts), posts
            assert len(log.read_text().splitlines()) == 40
