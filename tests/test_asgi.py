"""apimw.asgi with real ASGI apps: Starlette, FastAPI, uvicorn workers on real Redis.

The behaviour suites of the three middlewares run against the ASGI twins too
(tests/asgi_support.py); these tests cover what only an ASGI app can show: concurrent
tasks on one loop, two uvicorn worker processes sharing Redis, FastAPI's
``add_middleware`` and dependencies, an ``async def`` etag lookup.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Request
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.routing import Route

from apimw import Version
from apimw.asgi import (
    ETagMiddleware,
    IdempotencyMiddleware,
    MicroversionMiddleware,
    if_match,
    mark_enforced,
    open_async_store,
    served_version,
)
from apimw.errors import ConfigError
from apimw.etag import IfMatch, format_etag
from tests.servers import HOST, Server, Service

ROOT = Path(__file__).resolve().parent.parent
VERSION_15 = {"OpenStack-API-Version": "baremetal 1.5"}


def counting_app(store: Any, *, delay: float = 0.2) -> tuple[Starlette, list[int]]:
    executions: list[int] = []

    async def create(request: Any) -> JSONResponse:
        body = await request.json()
        executions.append(1)
        await asyncio.sleep(delay)  # other tasks run meanwhile: the retries arrive while it runs
        return JSONResponse({"uuid": str(uuid.uuid4()), "name": body["name"]}, status_code=201)

    app = Starlette(
        routes=[Route("/v1/nodes", create, methods=["POST"])],
        middleware=[
            Middleware(
                IdempotencyMiddleware,
                store=store,
                scope="shared",
                lease=30,
                key_prefix=f"t{uuid.uuid4().hex[:8]}:",
            )
        ],  # fmt: skip
    )
    return app, executions


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_concurrent_tasks_with_one_token_run_the_app_exactly_once(
    request: pytest.FixtureRequest, kind: str
) -> None:
    store = open_async_store(
        "memory://" if kind == "memory" else request.getfixturevalue("redis_server").url
    )
    app, executions = counting_app(store)

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:

            async def one(delay: float) -> httpx.Response:
                await asyncio.sleep(delay)
                return await client.post("/v1/nodes", json={"name": "n1"}, headers={"X-Client-Token": "tok"})

            try:
                # 24 at once, then 8 after the first answer was stored
                first = await asyncio.gather(*(one(0) for _ in range(24)))
                return [*first, *await asyncio.gather(*(one(0.01) for _ in range(8)))]
            finally:
                await store.aclose()

    answers = asyncio.run(burst())
    assert len(executions) == 1
    created = [a for a in answers if a.status_code == 201]
    in_flight = [a for a in answers if a.status_code == 409]
    assert len(created) + len(in_flight) == 32
    assert len({a.content for a in created}) == 1  # every 201 is the first answer
    assert all(a.json()["errors"][0]["code"] == "idempotency.in-flight" for a in in_flight)
    assert sum(a.headers.get("Idempotent-Replayed") == "true" for a in created) == len(created) - 1
    assert all(a.headers.get("Idempotent-Replayed") == "true" for a in answers[24:])
    assert len(in_flight) >= 1  # the 23 others arrived while it ran


@pytest.mark.parametrize("store_fixture", ["redis_server", "memcached_server"])
def test_two_uvicorn_workers_on_a_shared_store_run_a_token_once(
    store_fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Redis (redis.asyncio) and memcached (the blocking store in worker threads): a burst of
    one token over both workers runs the app once; the rest are 409 in flight or the replay."""
    store: Server = request.getfixturevalue(store_fixture)
    log = tmp_path / "executions.log"
    uvicorn = Service(
        tmp_path,
        lambda port: [sys.executable, "-m", "uvicorn", "tests.asgi_app:app", "--host", HOST,
                      "--port", str(port), "--workers", "2", "--no-access-log", "--log-level", "warning"],
        name="uvicorn", cwd=ROOT, ready_path="/pid",
        env={"APIMW_TEST_STORE": store.url, "APIMW_TEST_LOG": str(log)},  # type: ignore[attr-defined]
    )  # fmt: skip
    with uvicorn:
        base = uvicorn.url
        # both workers serve: each new connection may go to either; wait until two pids answered
        pids: set[str] = set()
        deadline = time.monotonic() + 30
        while len(pids) < 2 and time.monotonic() < deadline:
            try:
                pids.add(httpx.get(f"{base}/pid", timeout=2).text)
            except httpx.TransportError:
                time.sleep(0.1)
        assert len(pids) == 2, f"uvicorn did not start two workers: {pids}"

        def burst(token: str) -> list[httpx.Response]:
            answers: list[httpx.Response] = []
            lock = threading.Lock()
            go = threading.Event()

            def one() -> None:
                go.wait(5)
                with httpx.Client(timeout=10) as client:  # its own connection: either worker
                    answer = client.post(f"{base}/v1/nodes", json={"name": "n1"},
                                         headers={"X-Client-Token": token, **VERSION_15})  # fmt: skip
                with lock:
                    answers.append(answer)

            threads = [threading.Thread(target=one) for _ in range(16)]
            for thread in threads:
                thread.start()
            go.set()
            for thread in threads:
                thread.join(30)
            return answers

        # a burst whose answers came from both workers (the kernel picks: at most 5 bursts)
        for attempt in range(5):
            token = f"shared-{attempt}"
            answers = burst(token)
            assert len(answers) == 16
            assert len(log.read_text().splitlines()) == attempt + 1  # one execution per token
            created = [a for a in answers if a.status_code == 201]
            assert created and all(a.status_code in (201, 409) for a in answers)
            assert len({a.content for a in created}) == 1
            assert created[0].json()["version"] == "1.5"
            if len({a.headers["X-Worker"] for a in answers}) == 2:
                break
        else:
            pytest.fail("no burst reached both workers")
        # a retry after the first answer is a replay from the store, whichever worker takes it
        for _ in range(4):
            replay = httpx.post(f"{base}/v1/nodes", json={"name": "n1"},
                                headers={"X-Client-Token": token, **VERSION_15})  # fmt: skip
            assert replay.status_code == 201 and replay.content == created[0].content
            assert replay.headers["Idempotent-Replayed"] == "true"
        other = httpx.post(f"{base}/v1/nodes", json={"name": "n2"}, headers={"X-Client-Token": token})
        assert other.status_code == 409
        assert other.json()["errors"][0]["code"] == "idempotency.fingerprint-mismatch"
        assert len(log.read_text().splitlines()) == attempt + 1


# -- FastAPI ------------------------------------------------------------------------------

ETAGS = {"n1": format_etag("a" * 128)}


def version(request: Request) -> Version:
    """The served microversion, as a FastAPI dependency."""
    served = served_version(request.scope)
    assert served is not None
    return served


def condition(request: Request) -> IfMatch | None:
    """The request's parsed If-Match, as a FastAPI dependency."""
    return if_match(request.scope)


def fastapi_app() -> FastAPI:
    app = FastAPI()

    @app.get("/v1/nodes/{name}")
    async def show(name: str, served: Annotated[Version, Depends(version)]) -> dict[str, Any]:
        return {"name": name, "served": str(served), "etag": ETAGS[name]}

    @app.patch("/v1/nodes/{name}")
    async def update(request: Request, name: str,
                     cond: Annotated[IfMatch | None, Depends(condition)]) -> dict[str, Any]:  # fmt: skip
        if cond is not None:
            if not cond.matches(ETAGS[name]):
                return JSONResponse({"stale": True}, status_code=412)  # type: ignore[return-value]
            mark_enforced(request.scope)
        ETAGS[name] = format_etag(uuid.uuid4().hex * 4)
        return {"name": name, "etag": ETAGS[name]}

    app.add_middleware(ETagMiddleware, min_version="1.2", enforces="PATCH /v1/nodes/", hmac_key="k" * 32)
    app.add_middleware(IdempotencyMiddleware, scope="shared", methods=["POST", "PATCH"])
    app.add_middleware(MicroversionMiddleware, service_type="baremetal", min_version="1.1", max_version="1.9")
    return app


def test_fastapi_add_middleware_and_dependencies_see_the_served_version_and_if_match() -> None:
    ETAGS["n1"] = format_etag("a" * 128)

    async def run() -> None:
        transport = httpx.ASGITransport(app=fastapi_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            got = await client.get("/v1/nodes/n1", headers={"OpenStack-API-Version": "baremetal 1.4"})
            assert got.status_code == 200
            assert got.json()["served"] == "1.4"
            assert got.headers["ETag"] == ETAGS["n1"]
            assert got.headers["OpenStack-API-Version"] == "baremetal 1.4"
            headers = {"OpenStack-API-Version": "baremetal 1.4", "If-Match": got.headers["ETag"]}
            changed = await client.patch("/v1/nodes/n1", json={}, headers=headers)
            assert changed.status_code == 200
            assert changed.headers["ETag"] == ETAGS["n1"] != got.headers["ETag"]
            stale = await client.patch("/v1/nodes/n1", json={}, headers=headers)
            assert stale.status_code == 412
            old = {**headers, "OpenStack-API-Version": "baremetal 1.1"}
            below = await client.patch("/v1/nodes/n1", json={}, headers=old)
            assert below.status_code == 406  # If-Match below the etag microversion: nothing written
            too_new = await client.get("/v1/nodes/n1", headers={"OpenStack-API-Version": "baremetal 9.0"})
            assert too_new.status_code == 406

    asyncio.run(run())


def test_an_async_current_etag_lookup_answers_412_before_the_app_runs() -> None:
    writes: list[str] = []

    async def lookup(scope: Any) -> str | None:
        await asyncio.sleep(0)  # a database round trip
        return format_etag("b" * 128) if scope["path"].endswith("/n1") else None

    async def update(request: Any) -> JSONResponse:
        writes.append(request.path_params["name"])
        mark_enforced(request.scope)
        return JSONResponse({}, status_code=200)

    app = Starlette(routes=[Route("/v1/nodes/{name}", update, methods=["PUT"])],
                    middleware=[Middleware(ETagMiddleware, current_etag=lookup, enforces="*")])  # fmt: skip
    transport = httpx.ASGITransport(app=app)

    async def run() -> tuple[int, int]:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            stale = await client.put("/v1/nodes/n1", json={}, headers={"If-Match": format_etag("c" * 128)})
            fresh = await client.put("/v1/nodes/n1", json={}, headers={"If-Match": format_etag("b" * 128)})
            return stale.status_code, fresh.status_code

    assert asyncio.run(run()) == (412, 200)
    assert writes == ["n1"]


def test_lifespan_and_websocket_scopes_pass_through() -> None:
    seen: list[str] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    app = MicroversionMiddleware(inner, service_type="baremetal", min_version="1.1", max_version="1.2")
    asyncio.run(app({"type": "lifespan"}, None, None))  # type: ignore[arg-type]
    assert seen == ["lifespan"]


def test_options_are_validated_by_the_wsgi_twin() -> None:
    async def inner(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("never called")

    with pytest.raises(ConfigError, match="max_version"):
        MicroversionMiddleware(inner, service_type="baremetal", min_version="1.5", max_version="1.2")
    with pytest.raises(ConfigError, match="mismatch_status"):
        IdempotencyMiddleware(inner, mismatch_status=418)
    with pytest.raises(TypeError):
        ETagMiddleware(inner, no_such_option=True)
    # the order check of the WSGI etag middleware holds for the ASGI stack too
    microversion = MicroversionMiddleware(
        inner, service_type="baremetal", min_version="1.1", max_version="1.2"
    )
    with pytest.raises(ConfigError, match="inside the microversion"):
        ETagMiddleware(microversion)


# -- the database guard from async code ----------------------------------------------------


def test_the_database_guard_from_async_code_answers_a_retry_the_store_forgot(postgres_server: Server) -> None:
    """An async route records its token with apimw.idempotency_db on SQLAlchemy's asyncio engine
    (``AsyncConnection.run_sync``): a retry after the store lost its record gets the first
    resource, another request with the token 409; one row either way."""
    from sqlalchemy import Column, MetaData, String, Table, create_engine, func, select
    from sqlalchemy.ext.asyncio import create_async_engine

    from apimw._stores.memory_store import MemoryStore
    from apimw.asgi import client_token
    from apimw.idempotency_db import AlreadyCreated, client_tokens_table, record_token

    metadata = MetaData()
    tokens = client_tokens_table(metadata, name=f"tokens_{uuid.uuid4().hex[:8]}")
    things = Table(f"things_{uuid.uuid4().hex[:8]}", metadata, Column("uuid", String(36), primary_key=True),
                   Column("name", String(64)))  # fmt: skip
    url = postgres_server.url  # type: ignore[attr-defined]
    sync_engine = create_engine(url)
    metadata.create_all(sync_engine)
    store = open_async_store("memory://")

    async def scenario() -> list[httpx.Response]:
        engine = create_async_engine(url)

        async def create(request: Any) -> JSONResponse:
            body = await request.json()
            token = client_token(request.scope)
            new = str(uuid.uuid4())
            try:
                async with engine.begin() as conn:
                    if token is not None:
                        await conn.run_sync(record_token, tokens, token, kind="thing", resource_id=new)
                    await conn.execute(things.insert(), {"uuid": new, "name": body["name"]})
            except AlreadyCreated as done:
                new = done.resource_id
            return JSONResponse({"uuid": new}, status_code=201)

        guarded = Middleware(IdempotencyMiddleware, store=store, scope="shared")
        app = Starlette(routes=[Route("/things", create, methods=["POST"])], middleware=[guarded])
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                headers = {"X-Client-Token": "tok-db"}
                first = await client.post("/things", json={"name": "one"}, headers=headers)
                store.store = MemoryStore()  # type: ignore[attr-defined]  # the store lost every record
                retry = await client.post("/things", json={"name": "one"}, headers=headers)
                store.store = MemoryStore()  # type: ignore[attr-defined]
                other = await client.post("/things", json={"name": "two"}, headers=headers)
                return [first, retry, other]
        finally:
            await engine.dispose()

    try:
        first, retry, other = asyncio.run(scenario())
        with sync_engine.connect() as conn:
            rows = conn.execute(select(func.count()).select_from(things)).scalar_one()
    finally:
        metadata.drop_all(sync_engine)
        sync_engine.dispose()
    assert first.status_code == retry.status_code == 201
    assert retry.json() == first.json()
    assert retry.headers.get("Idempotent-Replayed") == "true"  # answered from the database
    assert (
        other.status_code == 409 and other.json()["errors"][0]["code"] == "idempotency.fingerprint-mismatch"
    )
    assert rows == 1


def test_apimw_asgi_needs_no_greenlet(tmp_path: Path) -> None:
    """The ASGI middlewares are native (no greenlet bridge): they import without it."""
    code = "import sys\nsys.modules['greenlet'] = None\nimport apimw.asgi\n"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr


def test_a_body_in_several_messages_is_one_request_to_the_fingerprint_and_the_app() -> None:
    seen: list[bytes] = []

    async def create(request: Any) -> JSONResponse:
        seen.append(await request.body())
        return JSONResponse({"n": len(seen)}, status_code=201)

    app = Starlette(
        routes=[Route("/v1/nodes", create, methods=["POST"])],
        middleware=[Middleware(IdempotencyMiddleware, scope="shared")],
    )

    async def post(pieces: list[bytes]) -> tuple[int, bytes]:
        messages = [
            {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1}
            for i, p in enumerate(pieces)
        ]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/nodes", "root_path": "", "query_string": b"",
                 "headers": [(b"content-type", b"application/json"), (b"x-client-token", b"multi")],
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 5000)}  # fmt: skip
        await app(scope, receive, send)
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return sent[0]["status"], body

    first = asyncio.run(post([b'{"name": ', b'"n1", "driver"', b': "ipmi"}']))
    again = asyncio.run(post([b'{"name": "n1", "driver": "ipmi"}']))  # the same request in one piece
    other = asyncio.run(post([b'{"name": "n2", ', b'"driver": "ipmi"}']))
    assert seen == [b'{"name": "n1", "driver": "ipmi"}']
    assert first == again == (201, b'{"n":1}')
    assert other[0] == 409


def test_an_inner_apimw_middleware_reads_the_body_through_the_middlewares_between() -> None:
    """apimw microversion -> a body-rewriting ASGI middleware -> apimw idempotency -> app: the
    idempotency middleware fingerprints, and the app reads, the rewritten body."""
    seen: list[bytes] = []

    async def create(request: Any) -> JSONResponse:
        seen.append(await request.body())
        return JSONResponse({"got": seen[-1].decode()}, status_code=201)

    class Upper:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            async def upper() -> Any:
                message = await receive()
                if message["type"] == "http.request":
                    message = {**message, "body": message.get("body", b"").upper()}
                return message

            await self.app(scope, upper, send)

    app = Starlette(
        routes=[Route("/v1/nodes", create, methods=["POST"])],
        middleware=[
            Middleware(
                MicroversionMiddleware, service_type="baremetal", min_version="1.1", max_version="1.9"
            ),
            Middleware(Upper),
            Middleware(IdempotencyMiddleware, scope="shared"),
        ],
    )

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            token = {"X-Client-Token": "up"}
            return [
                await client.post("/v1/nodes", content=b'{"a": "x"}', headers=token),
                await client.post("/v1/nodes", content=b'{"a": "X"}', headers=token),  # the same, rewritten
            ]

    first, retry = asyncio.run(run())
    assert seen == [b'{"A": "X"}']
    assert first.json() == {"got": '{"A": "X"}'}
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
