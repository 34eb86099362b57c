"""The idempotency middleware's answers on both doors: streams, cut answers, every ASGI message
type, header names as HTTP defines them, and a renewer that never holds up the request.

Each test drives the WSGI middleware (a WSGI app, a strict WSGI caller) and the ASGI one (an
ASGI app, the messages a server would exchange) with the same request and asserts the same
outcome.  Executions are counted by the apps; orders, not clocks, show streaming.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import threading
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
import werkzeug.serving

import apimw.asgi
from apimw.etag import ETagMiddleware, mark_enforced
from apimw.idempotency import IdempotencyMiddleware
from tests.asgi_support import layered
from tests.idempotency_support import call, environ_for

DOORS = ["wsgi", "asgi"]
MIB = 1024 * 1024
NODE = json.dumps({"name": "node-1"}).encode()


def token() -> str:
    return f"tok-{uuid.uuid4()}"


# -- drivers ---------------------------------------------------------------------------------


def asgi_scope(
    token_value: str | None = None,
    *,
    project: str | None = "project-a",
    headers: list[tuple[bytes, bytes]] | None = None,
    method: str = "POST",
) -> dict[str, Any]:
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(NODE)).encode())]
    if token_value is not None:
        raw.append((b"x-client-token", token_value.encode()))
    if project is not None:
        raw.append((b"x-project-id", project.encode()))
    raw.extend(headers or [])
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": "/v1/nodes", "raw_path": b"/v1/nodes", "root_path": "",
        "query_string": b"", "headers": raw, "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 4000),
        "extensions": {"http.response.pathsend": {}, "http.response.zerocopy": {},
                       "http.response.trailers": {}},
    }  # fmt: skip


class Client:
    """One ASGI request's messages: the body, then ``http.disconnect`` once told to (or at the end)."""

    def __init__(self, body: bytes = NODE) -> None:
        self.body: bytes | None = body
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.on_send: Callable[[dict[str, Any]], None] = lambda message: None

    async def receive(self) -> dict[str, Any]:
        body, self.body = self.body, None
        if body is not None:
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)
        self.on_send(message)

    @property
    def status(self) -> int:
        return int(next(m for m in self.sent if m["type"] == "http.response.start")["status"])

    @property
    def headers(self) -> dict[str, str]:
        start = next(m for m in self.sent if m["type"] == "http.response.start")
        return {k.decode().lower(): v.decode() for k, v in start["headers"]}

    @property
    def content(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")

    def json(self) -> Any:
        return json.loads(self.content)


async def asgi_request(app: Any, scope: dict[str, Any], client: Client | None = None) -> Client:
    client = client or Client()
    try:
        await app(scope, client.receive, client.send)
    finally:
        client.gone.set()
    return client


def code_of(body: bytes) -> str:
    return str(json.loads(body)["errors"][0]["code"])


class Counted:
    """How many times an app ran, and the order of what it made and what reached the client."""

    def __init__(self) -> None:
        self.runs = 0
        self.events: list[tuple[str, int]] = []


def asgi_created(counted: Counted) -> Any:
    """A complete small 201 (the retry of a released claim gets it)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        counted.runs += 1
        body = json.dumps({"serial": counted.runs}).encode()
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": body})

    return app


def wsgi_created(counted: Counted) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        counted.runs += 1
        start_response("201 Created", [("Content-Type", "application/json")])
        return [json.dumps({"serial": counted.runs}).encode()]

    return app


# -- a 48 MiB answer streams, and the middleware keeps at most max_response_bytes -------------


def test_wsgi_a_48_mib_answer_is_streamed_and_tombstoned() -> None:
    counted = Counted()

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        environ["wsgi.input"].read()
        counted.runs += 1
        start_response("201 Created", [("Content-Type", "application/octet-stream")])
        for i in range(48):
            counted.events.append(("made", i))
            yield bytes(MIB)

    mw = IdempotencyMiddleware(app, scope="shared", store=f"memory://{uuid.uuid4().hex}")
    tok = token()
    got: list[str] = []
    tracemalloc.start()
    try:
        result = mw(
            environ_for(token=tok), lambda status, headers, exc_info=None: got.extend([status, *headers])
        )
        size = 0
        for i, chunk in enumerate(result):
            counted.events.append(("got", i))
            size += len(chunk)
        result.close()  # type: ignore[attr-defined]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size == 48 * MIB
    assert counted.events.index(("got", 0)) < counted.events.index(("made", 47))
    assert peak < 8 * MIB  # one chunk at a time, and at most max_response_bytes held
    assert ("Idempotency-Status", "not-stored") in got
    again = call(mw, environ_for(token=tok))
    assert (again.status, again.code) == (409, "idempotency.replay-unavailable")
    assert counted.runs == 1


def test_asgi_a_48_mib_answer_is_streamed_and_tombstoned() -> None:
    counted = Counted()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        counted.runs += 1
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"application/octet-stream")]})  # fmt: skip
        for i in range(48):
            counted.events.append(("made", i))
            await send({"type": "http.response.body", "body": bytes(MIB), "more_body": i < 47})

    mw = apimw.asgi.IdempotencyMiddleware(app, scope="shared", store=f"memory://{uuid.uuid4().hex}")
    tok = token()

    async def run() -> tuple[int, int, Client]:
        client = Client()
        size = 0

        def on_send(message: dict[str, Any]) -> None:
            nonlocal size
            if message["type"] == "http.response.body":
                counted.events.append(("got", size // MIB))
                size += len(message.get("body", b""))
                message["body"] = b""  # the client keeps nothing

        client.on_send = on_send
        tracemalloc.start()
        try:
            await asgi_request(mw, asgi_scope(tok), client)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return size, peak, await asgi_request(mw, asgi_scope(tok))

    size, peak, again = asyncio.run(run())
    assert size == 48 * MIB
    assert counted.events.index(("got", 0)) < counted.events.index(("made", 47))
    assert peak < 8 * MIB
    assert (again.status, code_of(again.content)) == (409, "idempotency.replay-unavailable")
    assert counted.runs == 1


# -- an answer that did not complete is never stored -------------------------------------------


@pytest.mark.parametrize("door", DOORS)
def test_an_app_that_fails_mid_answer_releases_the_claim(door: str) -> None:
    counted = Counted()
    fail = [True]

    def wsgi_app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        environ["wsgi.input"].read()
        counted.runs += 1
        start_response("201 Created", [("Content-Type", "application/json")])
        yield b'{"serial": '
        if fail[0]:
            raise RuntimeError("the database went away")
        yield b"2}"

    async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        counted.runs += 1
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"serial": ', "more_body": True})
        if fail[0]:
            raise RuntimeError("the database went away")
        await send({"type": "http.response.body", "body": b"2}"})

    tok = token()
    store = f"memory://{uuid.uuid4().hex}"
    if door == "wsgi":
        mw = IdempotencyMiddleware(wsgi_app, scope="shared", store=store)
        with pytest.raises(RuntimeError):
            call(mw, environ_for(token=tok))
        fail[0] = False
        again = call(mw, environ_for(token=tok))
        status, body = again.status, again.body
    else:
        amw = apimw.asgi.IdempotencyMiddleware(asgi_app, scope="shared", store=store)

        async def run() -> Client:
            with pytest.raises(RuntimeError):
                await asgi_request(amw, asgi_scope(tok))
            fail[0] = False
            return await asgi_request(amw, asgi_scope(tok))

        got = asyncio.run(run())
        status, body = got.status, got.content
    assert (status, body) == (201, b'{"serial": 2}')
    assert counted.runs == 2


def test_asgi_an_app_that_returns_without_its_last_body_message_is_not_stored() -> None:
    """Starlette's StreamingResponse returns so when its client leaves mid-stream."""
    counted = Counted()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        counted.runs += 1
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"serial": ', "more_body": True})
        if counted.runs == 1:
            return  # the client left: the answer ends here
        await send({"type": "http.response.body", "body": b"2}"})

    mw = apimw.asgi.IdempotencyMiddleware(app, scope="shared", store=f"memory://{uuid.uuid4().hex}")
    tok = token()

    async def run() -> tuple[Client, Client]:
        return await asgi_request(mw, asgi_scope(tok)), await asgi_request(mw, asgi_scope(tok))

    cut, again = asyncio.run(run())
    # the client was told no more than the app said: an unfinished body
    assert [m.get("more_body", False) for m in cut.sent if m["type"] == "http.response.body"][-1:] != [False]
    # nothing was kept and the token is free again: not announced as a tombstone (``not-stored``)
    assert "idempotency-status" not in cut.headers
    assert (again.status, again.content, counted.runs) == (201, b'{"serial": 2}', 2)
    assert "idempotent-replayed" not in again.headers


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("declared", ["100", "3"], ids=["longer", "shorter"])
def test_an_answer_that_does_not_match_its_content_length_is_not_stored(door: str, declared: str) -> None:
    """The server aborts such an answer: it did not complete as declared, so a retry runs again."""
    counted = Counted()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        counted.runs += 1
        body = json.dumps({"serial": counted.runs}).encode()
        length = declared if counted.runs == 1 else str(len(body))
        start_response("201 Created", [("Content-Type", "application/json"), ("Content-Length", length)])
        return [body]

    options = {"scope": "shared", "store": f"memory://{uuid.uuid4().hex}"}
    stack = layered(door, app, (IdempotencyMiddleware, options))
    tok = token()
    first = call(stack, environ_for(token=tok))
    assert (first.status, first.header("Content-Length")) == (201, declared)  # what the app said
    assert not first.has("Idempotency-Status")  # nothing kept: the token is free again
    again = call(stack, environ_for(token=tok))
    assert (again.status, json.loads(again.body), counted.runs) == (201, {"serial": 2}, 2)
    assert not again.has("Idempotent-Replayed")
    replay = call(stack, environ_for(token=tok))  # the complete answer is the one kept
    assert (json.loads(replay.body), replay.header("Idempotent-Replayed")) == ({"serial": 2}, "true")
    assert counted.runs == 2


@pytest.mark.parametrize("door", DOORS)
def test_a_head_answer_keeps_its_content_length_and_is_stored(door: str) -> None:
    """A HEAD answer declares the length of the body a GET would get, and sends none."""
    counted = Counted()

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        counted.runs += 1
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "100")])
        return []

    options = {"scope": "shared", "methods": ["HEAD"], "store": f"memory://{uuid.uuid4().hex}"}
    stack = layered(door, app, (IdempotencyMiddleware, options))
    tok = token()
    first = call(stack, environ_for(token=tok, method="HEAD", body=None))
    replay = call(stack, environ_for(token=tok, method="HEAD", body=None))
    assert (first.status, replay.header("Idempotent-Replayed"), counted.runs) == (200, "true", 1)


def test_asgi_an_app_that_returns_without_an_answer_after_a_disconnect_does_not_raise() -> None:
    """What an inner middleware holding a JSON answer does when its client left: nothing sent.
    (An app that answers nothing to a client still there is an error: tests/test_asgi_over_http.py.)"""
    counted = Counted()
    created = asgi_created(counted)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if counted.runs == 0:
            await receive()
            counted.runs += 1
            assert (await receive())["type"] == "http.disconnect"
            return
        await created(scope, receive, send)

    mw = apimw.asgi.IdempotencyMiddleware(app, scope="shared", store=f"memory://{uuid.uuid4().hex}")
    tok = token()

    async def run() -> tuple[Client, Client]:
        left = Client()
        left.gone.set()
        return await asgi_request(mw, asgi_scope(tok), left), await asgi_request(mw, asgi_scope(tok))

    nothing, again = asyncio.run(run())
    assert nothing.sent == []
    assert (again.status, again.json(), counted.runs) == (201, {"serial": 2}, 2)


def test_asgi_a_json_stream_cut_by_a_disconnect_behind_etag_does_not_raise() -> None:
    counted = Counted()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        counted.runs += 1
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"items": [1, ', "more_body": True})
        if (await receive())["type"] == "http.disconnect":
            return
        await send({"type": "http.response.body", "body": b"2]}"})

    store = f"memory://{uuid.uuid4().hex}"
    mw = apimw.asgi.IdempotencyMiddleware(apimw.asgi.ETagMiddleware(app), scope="shared", store=store)
    tok = token()

    async def run() -> Client:
        client = Client()
        client.gone.set()  # the client leaves once the app asks
        return await asgi_request(mw, asgi_scope(tok), client)

    asyncio.run(run())  # no exception out of the middleware
    again = asyncio.run(run())
    assert counted.runs == 2
    assert "idempotent-replayed" not in again.headers if again.sent else True


def test_asgi_an_outer_cancel_scope_does_not_cancel_the_release(redis_server: Any) -> None:
    """anyio cancels every await inside a cancelled scope: the release is shielded."""
    counted = Counted()
    outer: list[anyio.CancelScope] = []
    created = asgi_created(counted)

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if counted.runs == 0:
            await receive()
            counted.runs += 1
            outer[0].cancel()  # a timeout outside the middleware fires while the app runs
            await anyio.sleep_forever()
        await created(scope, receive, send)

    mw = apimw.asgi.IdempotencyMiddleware(
        app, scope="shared", store=redis_server.url, key_prefix=f"t{uuid.uuid4().hex[:8]}:"
    )
    tok = token()

    async def run() -> Client:
        try:
            with anyio.CancelScope() as cancel:
                outer.append(cancel)
                await asgi_request(mw, asgi_scope(tok))
            assert cancel.cancelled_caught
            return await asgi_request(mw, asgi_scope(tok))
        finally:
            await mw.aclose()

    again = anyio.run(run)
    assert (again.status, again.json(), counted.runs) == (201, {"serial": 2}, 2)


# -- pathsend, zerocopy, trailers: passed through, never stored empty ---------------------------


@pytest.mark.parametrize(
    "last",
    [
        pytest.param({"type": "http.response.pathsend", "path": "/etc/hostname"}, id="pathsend"),
        pytest.param({"type": "http.response.zerocopy", "file": 3, "more_body": False}, id="zerocopy"),
        pytest.param({"type": "http.response.trailers", "headers": [(b"x-sum", b"1")],
                      "more_trailers": False},
                     id="trailers"),
    ],
)  # fmt: skip
def test_asgi_every_response_message_passes_and_what_cannot_be_stored_is_not(last: dict[str, Any]) -> None:
    counted = Counted()
    trailers = last["type"] == "http.response.trailers"

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        counted.runs += 1
        await send({"type": "http.response.start", "status": 201, "trailers": trailers,
                    "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
        if trailers:
            await send({"type": "http.response.body", "body": b"made", "more_body": False})
        await send(dict(last))

    mw = apimw.asgi.IdempotencyMiddleware(app, scope="shared", store=f"memory://{uuid.uuid4().hex}")
    tok = token()

    async def run() -> tuple[Client, Client]:
        return await asgi_request(mw, asgi_scope(tok)), await asgi_request(mw, asgi_scope(tok))

    first, again = asyncio.run(run())
    kinds = [m["type"] for m in first.sent]
    assert kinds[0] == "http.response.start" and kinds[-1] == last["type"]
    assert first.sent[-1] == last
    assert first.sent[0].get("trailers", False) == trailers
    assert first.headers["idempotency-status"] == "not-stored"
    assert (again.status, code_of(again.content)) == (409, "idempotency.replay-unavailable")
    assert counted.runs == 1


# -- header names as HTTP defines them; repeated singleton headers ------------------------------


class WsgiServer:
    """The WSGI middleware behind werkzeug's WSGI server on loopback: like gunicorn (its default
    ``header_map = drop``), it drops header lines whose name holds an underscore, and joins
    repeated lines with a comma."""

    def __init__(self, app: Any) -> None:
        self.server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def post(self, headers: list[tuple[str, str]]) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            conn.putrequest("POST", "/v1/nodes")
            for name, value in [("Content-Type", "application/json"), ("Content-Length", str(len(NODE))),
                                *headers]:  # fmt: skip
                conn.putheader(name, value)
            conn.endheaders(NODE)
            answer = conn.getresponse()
            return answer.status, answer.read()
        finally:
            conn.close()

    def close(self) -> None:
        self.server.shutdown()


Post = Callable[[list[tuple[str, str]]], tuple[int, bytes]]


@pytest.fixture(params=DOORS)
def door_poster(request: pytest.FixtureRequest) -> Iterator[Callable[..., Post]]:
    """Build the middleware (its options given) on the fixture's door: the POST sends header lines
    as sent on the wire, to the middleware behind a real WSGI server or as ASGI messages; the
    same counted app and store behind both."""
    servers: list[WsgiServer] = []

    def build(**options: Any) -> Post:
        counted = Counted()
        store = f"memory://{uuid.uuid4().hex}"
        if request.param == "wsgi":
            server = WsgiServer(IdempotencyMiddleware(wsgi_created(counted), store=store, **options))
            servers.append(server)
            return server.post
        mw = apimw.asgi.IdempotencyMiddleware(asgi_created(counted), store=store, **options)

        def post(headers: list[tuple[str, str]]) -> tuple[int, bytes]:
            scope = asgi_scope(project=None, headers=[(k.lower().encode(), v.encode()) for k, v in headers])
            got = asyncio.run(asgi_request(mw, scope))
            return got.status, got.content

        return post

    yield build
    for server in servers:
        server.close()


@pytest.fixture
def door_post(door_poster: Callable[..., Post]) -> Post:
    """:func:`door_poster`'s POST to the middleware with its default options."""
    return door_poster()


def test_an_underscore_header_is_not_the_project(
    door_post: Callable[[list[tuple[str, str]]], tuple[int, bytes]],
) -> None:
    tok = token()
    first = door_post([("X-Client-Token", tok), ("X-Project-Id", "project-b")])
    assert first[0] == 201
    # the same token without a real project header: never project-b's replay
    forged = door_post([("X-Client-Token", tok), ("X_Project_Id", "project-b")])
    assert (forged[0], code_of(forged[1])) == (400, "idempotency.scope-missing")


def test_an_underscore_header_is_not_the_token(
    door_post: Callable[[list[tuple[str, str]]], tuple[int, bytes]],
) -> None:
    tok = token()
    assert door_post([("X-Client-Token", tok), ("X-Project-Id", "p")])[0] == 201
    # X_Client_Token is no token: the request runs unprotected, never a replay
    status, body = door_post([("X_Client_Token", tok), ("X-Project-Id", "p")])
    assert status == 201 and json.loads(body) == {"serial": 2}


@pytest.mark.parametrize(
    "lines",
    [
        pytest.param([("X-Client-Token", "d"), ("X-Client-Token", "d")], id="two-client-tokens"),
        pytest.param([("Idempotency-Key", '"d"'), ("Idempotency-Key", '"d"')], id="two-idempotency-keys"),
        pytest.param([("Idempotency-Key", "d"), ("Idempotency-Key", "e")], id="two-bare-keys"),
    ],
)
def test_a_repeated_token_header_is_refused_alike(
    door_post: Callable[[list[tuple[str, str]]], tuple[int, bytes]], lines: list[tuple[str, str]]
) -> None:
    status, body = door_post([*lines, ("X-Project-Id", "p")])
    assert (status, code_of(body)) == (400, "idempotency.token-repeated")


@pytest.mark.parametrize(
    ("scope", "lines"),
    [
        pytest.param("project", [("X-Project-Id", "p1"), ("X-Project-Id", "p2")], id="two-project-lines"),
        pytest.param("project", [("X-Project-Id", "p1,p2")], id="a-project-list"),
        pytest.param("project", [("X-Project-Id", "p1, p2")], id="a-project-list-with-space"),
        pytest.param("project", [("X-Tenant-Id", "p1"), ("X-Tenant-Id", "p2")], id="two-tenant-lines"),
        pytest.param("user", [("X-Project-Id", "p1"), ("X-Project-Id", "p2"), ("X-User-Id", "u")],
                     id="user-two-project-lines"),  # fmt: skip
        pytest.param("user", [("X-Project-Id", "p"), ("X-User-Id", "u1"), ("X-User-Id", "u2")],
                     id="two-user-lines"),  # fmt: skip
        pytest.param("user", [("X-Project-Id", "p"), ("X-User-Id", "u1,u2")], id="a-user-list"),
    ],
)
def test_a_scope_header_with_a_comma_is_refused_alike(
    door_poster: Callable[..., Post], scope: str, lines: list[tuple[str, str]]
) -> None:
    """Servers join repeated lines differently (``p1, p2``, ``p1,p2``): a joined tenant would differ
    from door to door, so a scope header holding a comma is refused on both."""
    post = door_poster(scope=scope)
    status, body = post([("X-Client-Token", token()), *lines])
    assert (status, code_of(body)) == (400, "idempotency.scope-repeated")
    names = [name for name, value in lines]
    (named,) = {name for name, value in lines if "," in value or names.count(name) > 1}
    assert named in json.loads(body)["errors"][0]["detail"]  # the detail names the header


def test_a_shared_scope_reads_no_scope_header(door_poster: Callable[..., Post]) -> None:
    post = door_poster(scope="shared")
    tok = token()
    assert post([("X-Client-Token", tok), ("X-Project-Id", "p1"), ("X-Project-Id", "p2")])[0] == 201
    replay = post([("X-Client-Token", tok), ("X-Project-Id", "p3")])
    assert replay == (201, json.dumps({"serial": 1}).encode())


# -- the renewer never holds a lock across a store call ----------------------------------------


class SlowRenewals:
    """A store (the documented ``store`` extension point) whose lease renewals wait for the test."""

    def __init__(self, url: str) -> None:
        from apimw.idempotency import open_store

        self.inner = open_store(url)
        self.name = self.inner.name
        self.extending = threading.Event()
        self.go_on = threading.Event()
        self.order: list[str] = []

    def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        return self.inner.claim(key, value, lease)

    def complete(self, key: str, expect: bytes, value: bytes, ttl: float) -> bool:
        return self.inner.complete(key, expect, value, ttl)

    def release(self, key: str, expect: bytes) -> bool:
        return self.inner.release(key, expect)

    def extend(self, key: str, expect: bytes, lease: float) -> bool:
        self.extending.set()
        self.go_on.wait(10)
        self.order.append("renewed")
        return self.inner.extend(key, expect, lease)

    def get(self, key: str) -> bytes | None:
        return self.inner.get(key)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("door", DOORS)
def test_a_renewal_in_progress_does_not_hold_up_the_answer(door: str) -> None:
    store = SlowRenewals(f"memory://{uuid.uuid4().hex}")
    options: dict[str, Any] = {"store": store, "scope": "shared", "lease": 0.3, "renew_lease": True}

    def wsgi_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        assert store.extending.wait(10)  # a renewal is under way
        start_response("201 Created", [("Content-Type", "text/plain")])
        return [b"made"]

    async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        while not store.extending.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"made"})

    if door == "wsgi":
        mw = IdempotencyMiddleware(wsgi_app, **options)
        status = call(mw, environ_for(token=token())).status
    else:
        amw = apimw.asgi.IdempotencyMiddleware(asgi_app, **options)
        status = asyncio.run(asgi_request(amw, asgi_scope(token()))).status
    store.order.append("answered")
    store.go_on.set()
    assert status == 201
    assert store.order[0] == "answered"


# -- the guards composed: the middlewares' own answers are never the token's -------------------


def node_app(counted: Counted) -> Any:
    """A conditional create that enforces the If-Match the etag middleware checked."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        counted.runs += 1
        mark_enforced(environ)
        start_response("201 Created", [("Content-Type", "application/json"), ("ETag", '"v2"')])
        return [json.dumps({"serial": counted.runs}).encode()]

    return app


@pytest.mark.parametrize("door", DOORS)
def test_a_412_from_the_etag_middleware_is_not_stored_and_a_fresh_if_match_runs_once(door: str) -> None:
    counted = Counted()
    stack = layered(
        door, node_app(counted),
        (IdempotencyMiddleware, {"scope": "shared", "store": f"memory://{uuid.uuid4().hex}"}),
        (ETagMiddleware, {"methods": ["POST"], "enforces": ["POST /v1/nodes"],
                          "current_etag": lambda environ: '"v1"'}),
    )  # fmt: skip
    tok = token()
    stale = call(stack, environ_for(token=tok, headers={"If-Match": '"v0"'}))
    assert (stale.status, stale.code) == (412, "etag.precondition-failed")
    assert counted.runs == 0
    fresh = call(stack, environ_for(token=tok, headers={"If-Match": '"v1"'}))
    assert (fresh.status, fresh.json) == (201, {"serial": 1})
    again = call(stack, environ_for(token=tok, headers={"If-Match": '"v1"'}))
    assert (again.status, again.json, again.header("Idempotent-Replayed")) == (201, {"serial": 1}, "true")
    assert counted.runs == 1


@pytest.mark.parametrize("door", DOORS)
def test_if_match_is_not_part_of_the_fingerprint(door: str) -> None:
    """A client that lost the answer of its conditional write, and read the resource's new etag
    before retrying, gets its replay (not a mismatch): the precondition guards the state, it is
    not what the request asks for."""
    counted = Counted()
    stack = layered(
        door,
        node_app(counted),
        (IdempotencyMiddleware, {"scope": "shared", "store": f"memory://{uuid.uuid4().hex}"}),
    )
    tok = token()
    assert call(stack, environ_for(token=tok, headers={"If-Match": '"v1"'})).status == 201
    again = call(stack, environ_for(token=tok, headers={"If-Match": '"v2"'}))
    assert (again.status, again.header("Idempotent-Replayed"), counted.runs) == (201, "true", 1)


# -- per-user headers, keystonemiddleware's identity status, an expired lease ------------------


def user_headers_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    environ["wsgi.input"].read()
    start_response("201 Created", [
        ("Content-Type", "application/json"), ("Location", "/v1/nodes/1"),
        ("X-Auth-Token", "gAAAA-secret"), ("X-Subject-Token", "gAAAA-subject"),
        ("Authentication-Info", 'nextnonce="abc"'), ("Set-Cookie", "s=1"), ("WWW-Authenticate", "Bearer"),
    ])  # fmt: skip
    return [b"{}"]


PER_USER = ("X-Auth-Token", "X-Subject-Token", "Authentication-Info", "Set-Cookie", "WWW-Authenticate")


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("keep", [False, True], ids=["default", "replay_user_headers"])
def test_per_user_headers_are_not_replayed_by_default(door: str, keep: bool) -> None:
    options: dict[str, Any] = {"store": f"memory://{uuid.uuid4().hex}"}
    if keep:
        options["replay_user_headers"] = True
    stack = layered(door, user_headers_app, (IdempotencyMiddleware, options))
    tok = token()
    first = call(stack, environ_for(token=tok))
    assert all(first.has(name) for name in PER_USER)  # the first answer is the app's
    replay = call(stack, environ_for(token=tok))
    assert replay.header("Idempotent-Replayed") == "true"
    assert replay.header("Location") == "/v1/nodes/1"
    assert [name for name in PER_USER if replay.has(name)] == (list(PER_USER) if keep else [])


@pytest.mark.parametrize("door", DOORS)
def test_an_invalid_identity_has_no_project_scope(door: str) -> None:
    counted = Counted()
    stack = layered(
        door, wsgi_created(counted), (IdempotencyMiddleware, {"store": f"memory://{uuid.uuid4().hex}"})
    )
    tok = token()
    assert call(stack, environ_for(token=tok, headers={"X-Identity-Status": "Confirmed"})).status == 201
    invalid = call(stack, environ_for(token=tok, headers={"X-Identity-Status": "Invalid"}))
    assert (invalid.status, invalid.code) == (400, "idempotency.scope-missing")
    assert counted.runs == 1


@pytest.mark.parametrize("door", DOORS)
def test_a_lease_that_expired_with_no_competitor_says_so(door: str, caplog: pytest.LogCaptureFixture) -> None:
    def slow(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read()
        threading.Event().wait(0.6)  # longer than the lease; nobody else asks for the token
        start_response("201 Created", [("Content-Type", "text/plain")])
        return [b"made"]

    options = {"scope": "shared", "lease": 0.2, "store": f"memory://{uuid.uuid4().hex}"}
    stack = layered(door, slow, (IdempotencyMiddleware, options))
    with caplog.at_level(logging.WARNING, logger="apimw.idempotency"):
        answer = call(stack, environ_for(token=token()))
    assert answer.status == 201
    messages = [r.getMessage() for r in caplog.records]
    assert not any("took it over" in m for m in messages), messages
    assert any("the claim expired" in m and "no other request" in m for m in messages), messages


# -- what the ASGI app is handed: the apimw keys, no CGI keys ---------------------------------


def test_asgi_the_app_is_handed_the_apimw_keys_and_no_cgi_keys() -> None:
    seen: list[dict[str, Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(dict(scope))
        await receive()
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"made"})

    mw = apimw.asgi.IdempotencyMiddleware(app, store=f"memory://{uuid.uuid4().hex}")
    asyncio.run(asgi_request(mw, asgi_scope(token())))
    handed = seen[0]
    assert apimw.asgi.client_token(handed) is not None
    assert apimw.asgi.client_token(handed).project == "project-a"  # type: ignore[union-attr]
    assert handed["apimw.idempotency.status"] == "claimed"
    assert sorted(k for k in handed if k.isupper() or k.startswith("wsgi.")) == []
