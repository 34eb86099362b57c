"""The etag middleware and streamed answers, on both doors: it holds a JSON answer only up to
``max_body_bytes`` (then streams it on without an ETag, counted in metrics), holds nothing that
is not ``application/json`` or ``+json``, passes every ASGI response message through in order,
survives deeply nested JSON, and honours PEP 3333's ``exc_info`` once headers are sent.

Each door is driven natively: the WSGI middleware as a server iterates it, the ASGI one with
a ``send`` that records the messages as they arrive.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import apimw.asgi
from apimw.etag import ETagMiddleware, mark_enforced, set_response_etag
from apimw.metrics import NoMetrics
from tests.asgi_support import run_async

MiB = 1024 * 1024
#: the most chunks an endless app produces before the test calls it stuck (a bounded loop)
ENDLESS_GUARD = 2000
TAG = 'W/"' + "a" * 16 + '"'


class Counted(NoMetrics):
    """The etag outcomes the middleware reported."""

    def __init__(self) -> None:
        self.outcomes: list[str] = []

    def etag(self, outcome: str) -> None:
        self.outcomes.append(outcome)


class Streamer:
    """An answer of *count* chunks (``None``: endless, up to the guard) of *ctype*, made one at a
    time; it records how many it had made when the client received the first body byte."""

    def __init__(self, ctype: str, chunk: bytes, count: int | None, *, acknowledge: bool = False) -> None:
        self.ctype = ctype
        self.chunk = chunk
        self.count = count
        self.acknowledge = acknowledge
        self.made = 0
        self.made_at_first_byte: int | None = None
        self.stop = False
        self.closed = False

    def chunks(self) -> Iterator[bytes]:
        try:
            while not self.stop and (self.count is None or self.made < self.count):
                if self.made >= ENDLESS_GUARD:
                    raise AssertionError("the client never received the stream")
                self.made += 1
                yield self.chunk
        finally:
            self.closed = True

    def received(self, chunk: bytes) -> None:
        if chunk and self.made_at_first_byte is None:
            self.made_at_first_byte = self.made

    # -- the WSGI app
    def wsgi(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        if self.acknowledge:
            mark_enforced(environ)
        start_response("200 OK", [("Content-Type", self.ctype)])
        return self.chunks()

    # -- the ASGI app
    async def asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.acknowledge:
            mark_enforced(scope)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", self.ctype.encode())]})  # fmt: skip
        for chunk in self.chunks():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


Served = tuple[int, dict[str, str], int]


def serve(door: str, streamer: Streamer, *, read: int | None = None, method: str = "GET",
          headers: dict[str, str] | None = None, **options: Any) -> Served:  # fmt: skip
    """Serve one request through the etag middleware on *door*, as a server would: the status, the
    headers and the number of body bytes received; after *read* body chunks the client leaves."""
    headers = headers or {}
    options.setdefault("enforces", "*")
    if door == "wsgi":
        middleware = ETagMiddleware(streamer.wsgi, **options)
        environ = {"REQUEST_METHOD": method, "PATH_INFO": "/v1/nodes/n1", "SERVER_NAME": "t",
                   "SERVER_PORT": "80", "wsgi.url_scheme": "http"}  # fmt: skip
        environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
        got: dict[str, Any] = {}

        def start_response(status: str, hdrs: list[tuple[str, str]], exc_info: Any = None) -> Any:
            got["status"], got["headers"] = int(status[:3]), dict(hdrs)
            return lambda chunk: None

        result = middleware(environ, start_response)
        size = chunks = 0
        try:
            for chunk in result:
                streamer.received(chunk)
                size += len(chunk)
                chunks += 1
                if read is not None and chunks >= read:
                    break  # the client left: the server closes the iterable
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return got["status"], got["headers"], size

    app = apimw.asgi.ETagMiddleware(streamer.asgi, **options)
    scope = {"type": "http", "method": method, "path": "/v1/nodes/n1", "root_path": "", "query_string": b"",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}  # fmt: skip
    state: dict[str, Any] = {"size": 0, "chunks": 0}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            state["status"] = message["status"]
            state["headers"] = {k.decode(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            chunk = message.get("body", b"")
            streamer.received(chunk)
            state["size"] += len(chunk)
            state["chunks"] += 1 if chunk else 0
            if read is not None and state["chunks"] >= read:
                streamer.stop = True  # the client left: the app sees it and stops

    run_async(app(scope, receive, send))
    return state["status"], state["headers"], state["size"]


DOORS = ["wsgi", "asgi"]


@pytest.mark.parametrize("door", DOORS)
def test_a_48_mib_json_stream_is_streamed_past_the_cap_without_an_etag(door: str) -> None:
    metrics = Counted()
    streamer = Streamer("application/json", b"x" * MiB, 48)
    status, headers, size = serve(door, streamer, metrics=metrics)
    assert status == 200 and size == 48 * MiB
    assert "etag" not in {k.lower() for k in headers}
    # the client had its first byte once the cap (1 MiB by default) was passed, not at the end
    assert streamer.made_at_first_byte is not None and streamer.made_at_first_byte <= 2
    assert metrics.outcomes == ["streamed-without-etag"]


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("ctype", ["application/x-ndjson", "application/json-seq", "text/event-stream"])
def test_an_endless_stream_that_is_not_one_json_document_is_sent_as_it_comes(door: str, ctype: str) -> None:
    streamer = Streamer(ctype, b'{"etag": "W/\\"a\\""}\n', None)
    status, headers, _ = serve(door, streamer, read=100)
    assert status == 200 and "etag" not in {k.lower() for k in headers}
    assert streamer.made_at_first_byte == 1  # nothing held
    assert streamer.made <= 101 and streamer.closed  # it stopped once the client left


@pytest.mark.parametrize("door", DOORS)
def test_an_endless_json_stream_is_held_only_up_to_the_cap(door: str) -> None:
    streamer = Streamer("application/json", b"[" * 4096, None)
    status, _, _ = serve(door, streamer, read=10, max_body_bytes=64 * 1024)
    assert status == 200
    assert streamer.made_at_first_byte is not None and streamer.made_at_first_byte <= 17
    assert streamer.closed and streamer.made < ENDLESS_GUARD


@pytest.mark.parametrize("door", DOORS)
def test_a_conditional_write_streams_past_the_cap_too(door: str) -> None:
    streamer = Streamer("application/json", b" " * MiB, 8, acknowledge=True)
    status, headers, size = serve(door, streamer, method="PATCH", headers={"If-Match": TAG})
    assert status == 200 and size == 8 * MiB
    assert streamer.made_at_first_byte is not None and streamer.made_at_first_byte <= 2


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(
    ("ctype", "etag"),
    [
        pytest.param("application/json", TAG, id="json"),
        pytest.param("application/json; charset=utf-8", TAG, id="json-charset"),
        pytest.param("application/vnd.api+json", TAG, id="plus-json"),
        pytest.param("application/x-ndjson", None, id="ndjson"),
        pytest.param("application/json-seq", None, id="json-seq"),
        pytest.param("text/plain", None, id="text"),
    ],
)
def test_only_json_documents_are_read_for_their_etag(door: str, ctype: str, etag: str | None) -> None:
    streamer = Streamer(ctype, json.dumps({"etag": TAG}).encode(), 1)
    status, headers, _ = serve(door, streamer)
    assert status == 200 and headers.get("ETag", headers.get("etag")) == etag


@pytest.mark.parametrize("door", DOORS)
def test_a_deeply_nested_json_answer_is_sent_not_a_500(door: str) -> None:
    deep = b'{"etag": "W/\\"a\\"", "deep": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    streamer = Streamer("application/json", deep, 1)
    status, headers, size = serve(door, streamer)
    assert status == 200 and size == len(deep)


# -- every ASGI response message passes, in order -----------------------------------------------


def asgi_messages(tail: list[dict[str, Any]], *, method: str = "GET", headers: dict[str, str] | None = None,
                  start: dict[str, Any] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """The messages the server receives when the app sends a JSON start then *tail*."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        mark_enforced(scope)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")], **(start or {})})  # fmt: skip
        for message in tail:
            await send(message)

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": method, "path": "/v1/nodes/n1", "root_path": "", "query_string": b"",
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}  # fmt: skip
    run_async(apimw.asgi.ETagMiddleware(app, enforces="*")(scope, receive, send))
    return sent


PATHSEND = {"type": "http.response.pathsend", "path": "/srv/nodes/n1.json"}
ZEROCOPY = {"type": "http.response.zerocopy", "file": 7, "count": 10, "more_body": False}
TRAILERS = {"type": "http.response.trailers", "headers": [(b"digest", b"sha-256=x")], "more_trailers": False}
BODY_END = {"type": "http.response.body", "body": b"{}", "more_body": False}


@pytest.mark.parametrize(
    "request_headers",
    [pytest.param({}, id="get"), pytest.param({"If-Match": "*"}, id="conditional-patch")],
)
@pytest.mark.parametrize(
    ("tail", "start"),
    [
        pytest.param([PATHSEND], {}, id="pathsend"),
        pytest.param([ZEROCOPY], {}, id="zerocopy"),
        pytest.param([BODY_END, TRAILERS], {"trailers": True}, id="trailers"),
    ],
)
def test_every_asgi_response_message_passes_in_order(
    request_headers: dict[str, str], tail: list[dict[str, Any]], start: dict[str, Any]
) -> None:
    method = "PATCH" if request_headers else "GET"
    sent = asgi_messages(tail, method=method, headers=request_headers, start=start)
    assert [m["type"] for m in sent] == ["http.response.start", *(m["type"] for m in tail)]
    assert sent[0]["status"] == 200 and sent[0].get("trailers", False) == bool(start)
    assert sent[1:] == tail


# -- PEP 3333: exc_info once the headers are sent ------------------------------------------------


class AppFailure(Exception):
    pass


@pytest.mark.parametrize(
    ("method", "headers"),
    [
        pytest.param("GET", {}, id="get"),
        pytest.param("PATCH", {"HTTP_IF_MATCH": TAG}, id="conditional-patch"),
    ],
)
def test_start_response_with_exc_info_after_the_headers_went_out_reraises(
    method: str, headers: dict[str, str]
) -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        mark_enforced(environ)
        set_response_etag(environ, TAG)
        start_response("200 OK", [("Content-Type", "application/json")])
        yield b'{"nodes": ['
        try:
            raise AppFailure("the database went away mid-answer")
        except AppFailure:
            start_response("500 Internal Server Error", [("Content-Type", "text/html")], sys.exc_info())
        yield b"<h1>error page</h1>"

    sent: list[bytes] = []
    statuses: list[str] = []

    def start_response(status: str, hdrs: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if exc_info is not None and sent:  # a server that sent the headers re-raises (PEP 3333)
            raise exc_info[1].with_traceback(exc_info[2])
        statuses.append(status)
        return sent.append

    environ = {"REQUEST_METHOD": method, "PATH_INFO": "/v1/nodes/n1", **headers}
    result = ETagMiddleware(app, enforces="*")(environ, start_response)
    with pytest.raises(AppFailure):
        for chunk in result:
            sent.append(chunk)
    getattr(result, "close", lambda: None)()
    assert statuses == ["200 OK"] and b"error page" not in b"".join(sent)


# -- what the ASGI middleware hands the app ------------------------------------------------------


def test_the_asgi_middleware_adds_only_apimw_keys_to_the_scope() -> None:
    seen: dict[str, Any] = {}

    def enforced(scope: dict[str, Any]) -> bool:
        return str(scope["path"]).startswith("/v1/nodes/")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.update(scope)
        mark_enforced(scope)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: dict[str, Any]) -> None:
        seen.setdefault("status", message.get("status"))

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "DELETE", "path": "/v1/nodes/n1", "root_path": "", "query_string": b"",
             "headers": [(b"if-match", TAG.encode())]}  # fmt: skip
    given = set(scope)
    middleware = apimw.asgi.ETagMiddleware(app, enforces=enforced, current_etag=lambda scope: TAG)
    run_async(middleware(scope, receive, send))
    assert seen["status"] == 204 and apimw.asgi.if_match(scope) is not None
    added = set(scope) - given
    assert added and all(key.startswith("apimw.etag.") for key in added), sorted(added)
