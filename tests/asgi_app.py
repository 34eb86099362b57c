"""A Starlette app behind apimw's three ASGI middlewares, for the uvicorn multi-worker test.

``APIMW_TEST_STORE`` is the replay store URL; every execution of ``POST /v1/nodes`` appends
the worker's pid to the file ``APIMW_TEST_LOG``.  ``GET /pid`` answers the worker's pid;
``POST /v1/flaky`` raises on its first execution in a worker.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from apimw.asgi import ETagMiddleware, IdempotencyMiddleware, MicroversionMiddleware, served_version


async def create(request: Request) -> JSONResponse:
    body = await request.json()
    fd = os.open(os.environ["APIMW_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
    finally:
        os.close(fd)
    await asyncio.sleep(0.3)  # long enough for the retries to arrive while it runs
    node = {"uuid": str(uuid.uuid4()), "name": body.get("name"), "pid": os.getpid(),
            "version": str(served_version(request.scope))}  # fmt: skip
    return JSONResponse(node, status_code=201)


async def flaky(request: Request) -> JSONResponse:
    """Raises on its first execution in a worker (after the claim), answers 201 on the next."""
    await request.body()
    FLAKY.append(1)
    if len(FLAKY) == 1:
        raise RuntimeError("failed after the claim")
    return JSONResponse({"runs": len(FLAKY), "pid": os.getpid()}, status_code=201)


FLAKY: list[int] = []


async def pid(request: Request) -> PlainTextResponse:
    return PlainTextResponse(str(os.getpid()))


class WorkerHeader:
    """Outermost: every answer says which worker process gave it (``X-Worker``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_pid(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"x-worker", str(os.getpid()).encode())]
            await send(message)

        await self.app(scope, receive, send_with_pid)


app = Starlette(
    routes=[Route("/v1/nodes", create, methods=["POST"]), Route("/v1/flaky", flaky, methods=["POST"]),
            Route("/pid", pid)],
    middleware=[
        Middleware(WorkerHeader),
        Middleware(MicroversionMiddleware, service_type="baremetal", min_version="1.1", max_version="1.9"),
        Middleware(
            IdempotencyMiddleware,
            store=os.environ.get("APIMW_TEST_STORE", "memory://"),
            scope="shared",
            lease=30,
        ),  # fmt: skip
        Middleware(ETagMiddleware),
    ],
)
