"""apimw's ASGI stack against ``asgi-idempotency-header``, over a bare Starlette app, in one run.

    python bench/bench_asgi.py [--rounds 5] [--clock cpu|wall] [--redis redis://127.0.0.1:6379/0]

Cases, each an in-process ASGI call (no server, no socket) timed in batches on one loop:

* a plain ``GET`` through the bare Starlette app (the baseline), through apimw's three ASGI
  middlewares (microversion -> idempotency -> etag), and through ``asgi-idempotency-header``
  0.2's ``IdempotencyHeaderMiddleware`` (memory backend) alone;
* a replayed ``POST`` (same token, same body: the app does not run) through each
  idempotency middleware alone, on ``memory://``; and through apimw's on Redis, beside one
  ``GET`` round trip of the same ``redis.asyncio`` store (``redis-server`` is started on a
  free loopback port unless ``--redis`` names one).

Goals (issue 20): the whole apimw stack adds no more than ``asgi-idempotency-header``'s one
middleware on the plain GET; a replay costs no more than one store round trip + 10 us.
Figures are medians over the rounds (best of 5 batches each); the clock is this thread's
CPU time by default (the machine is shared: ``--clock wall`` for wall time, which the Redis
round trip needs to count the server's time).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from idempotency_header_middleware import IdempotencyHeaderMiddleware
from idempotency_header_middleware.backends.memory import MemoryBackend
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from apimw.asgi import ETagMiddleware, IdempotencyMiddleware, MicroversionMiddleware, open_replay_store

NODE = {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "name": "node-1", "provision_state": "available"}
BODY = b'{"name": "node-1", "driver": "ipmi"}'


async def show(request: Request) -> JSONResponse:
    return JSONResponse(NODE)


async def create(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse(NODE, status_code=201)


def starlette(*middleware: Middleware) -> Starlette:
    routes = [Route("/v1/nodes/n1", show), Route("/v1/nodes", create, methods=["POST"])]
    return Starlette(routes=routes, middleware=list(middleware))


def apimw_stack(store: Any = "memory://") -> Starlette:
    return starlette(
        Middleware(MicroversionMiddleware, service_type="baremetal", min_version="1.1", max_version="1.9"),
        Middleware(IdempotencyMiddleware, store=store, scope="shared"),
        Middleware(ETagMiddleware),
    )


def scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), *headers], "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }  # fmt: skip


GET = scope("GET", "/v1/nodes/n1", [(b"accept", b"application/json")])
POST_APIMW = scope("POST", "/v1/nodes", [(b"content-type", b"application/json"), (b"content-length", b"36"),
                                         (b"x-client-token", b"bench-token")])  # fmt: skip
POST_HEADER = scope("POST", "/v1/nodes", [(b"content-type", b"application/json"), (b"content-length", b"36"),
                                          (b"idempotency-key", b"bench-token")])  # fmt: skip


def caller(app: Any, template: dict[str, Any], body: bytes = b"") -> Callable[[], Any]:
    """One request: a coroutine function running *template* through *app*; checks the status."""
    message = {"type": "http.request", "body": body, "more_body": False}
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        return message

    async def send(sent: dict[str, Any]) -> None:
        if sent["type"] == "http.response.start":
            status.append(sent["status"])

    async def call() -> None:
        status.clear()
        await app(dict(template, headers=list(template["headers"])), receive, send)
        if not status or status[0] >= 300:
            raise RuntimeError(f"the bench request answered {status}")

    return call


def per_call_us(loop: asyncio.AbstractEventLoop, call: Callable[[], Any], clock: Callable[[], int],
                number: int = 2000, repeat: int = 5) -> float:  # fmt: skip
    async def batch(n: int) -> None:
        for _ in range(n):
            await call()

    loop.run_until_complete(batch(200))  # warm caches (and store the first answer)
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeat):
            start = clock()
            loop.run_until_complete(batch(number))
            best = min(best, (clock() - start) / number / 1000)
    finally:
        gc.enable()
    return best


def start_redis() -> tuple[subprocess.Popen[bytes], str, str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed: pass --redis redis://host:port/0")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="bench-asgi-redis-")
    proc = subprocess.Popen(
        [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            workdir,
        ],
        stdout=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, f"redis://127.0.0.1:{port}/0", workdir
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("redis-server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--redis", help="a Redis URL (default: start redis-server on a free loopback port)")
    args = parser.parse_args()
    clock = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns

    proc = workdir = None
    url = args.redis
    if url is None:
        proc, url, workdir = start_redis()
    loop = asyncio.new_event_loop()
    redis_store = open_replay_store(url)
    try:
        header_backend = MemoryBackend()
        cases: dict[str, Callable[[], Any]] = {
            "bare starlette, GET": caller(starlette(), GET),
            "apimw stack (3 middlewares), GET": caller(apimw_stack(), GET),
            "asgi-idempotency-header, GET": caller(
                starlette(Middleware(IdempotencyHeaderMiddleware, backend=header_backend)), GET
            ),
            "bare starlette, POST": caller(starlette(), POST_APIMW, BODY),
            "apimw idempotency, POST replay (memory://)": caller(
                starlette(Middleware(IdempotencyMiddleware, store="memory://", scope="shared")),
                POST_APIMW,
                BODY,
            ),
            "asgi-idempotency-header, POST replay (memory)": caller(
                starlette(Middleware(IdempotencyHeaderMiddleware, backend=MemoryBackend())), POST_HEADER, BODY
            ),
            "apimw idempotency, POST replay (redis://)": caller(
                starlette(Middleware(IdempotencyMiddleware, store=redis_store, scope="shared")),
                POST_APIMW,
                BODY,
            ),
            "one redis.asyncio GET round trip (the same store)": lambda: redis_store.get("apimw:bench:probe"),
        }
        results: dict[str, list[float]] = {name: [] for name in cases}
        ratios: dict[str, list[float]] = {"stack": [], "replay-memory": [], "replay-redis": []}
        for _ in range(args.rounds):
            got = {name: per_call_us(loop, call, clock) for name, call in cases.items()}
            for name, value in got.items():
                results[name].append(value)
            bare = got["bare starlette, GET"]
            header_added = got["asgi-idempotency-header, GET"] - bare
            ratios["stack"].append((got["apimw stack (3 middlewares), GET"] - bare) / max(header_added, 0.01))
            post = got["bare starlette, POST"]
            ratios["replay-memory"].append(got["apimw idempotency, POST replay (memory://)"])
            ratios["replay-redis"].append(
                got["apimw idempotency, POST replay (redis://)"]
                - got["one redis.asyncio GET round trip (the same store)"]
            )
            _ = post
        med = {name: statistics.median(values) for name, values in results.items()}
        print(f"\nbench_asgi: {args.rounds} rounds, {args.clock} clock, medians (us per request)")
        print(f"  {'case':52} {'us/req':>9} {'added us':>9}")
        for name, value in med.items():
            base = med["bare starlette, POST"] if "POST" in name else med["bare starlette, GET"]
            added = f"{value - base:9.2f}" if "round trip" not in name and "bare" not in name else " " * 9
            print(f"  {name:52} {value:9.2f} {added}")
        bare, post = med["bare starlette, GET"], med["bare starlette, POST"]
        stack_added = med["apimw stack (3 middlewares), GET"] - bare
        header_added = med["asgi-idempotency-header, GET"] - bare
        print("\nratios")
        print(f"  apimw stack added / asgi-idempotency-header added (GET): {statistics.median(ratios['stack']):.2f}x"
              f"  ({stack_added:.2f} us vs {header_added:.2f} us; goal <= 1.0x)")  # fmt: skip
        replay_header = med["asgi-idempotency-header, POST replay (memory)"]
        replay_memory = med["apimw idempotency, POST replay (memory://)"]
        print(f"  apimw replay / asgi-idempotency-header replay (memory): {replay_memory / replay_header:.2f}x"
              f"  ({replay_memory:.2f} us vs {replay_header:.2f} us)")  # fmt: skip
        over = statistics.median(ratios["replay-redis"])
        rt = med["one redis.asyncio GET round trip (the same store)"]
        print(f"  apimw replay on Redis - one store round trip: {over:+.2f} us"
              f"  (replay {med['apimw idempotency, POST replay (redis://)']:.2f} us, round trip {rt:.2f} us;"
              " goal <= 10 us)")  # fmt: skip
    finally:
        loop.run_until_complete(redis_store.aclose())
        loop.close()
        if proc is not None:
            proc.terminate()
            proc.wait(10)
            shutil.rmtree(workdir or "", ignore_errors=True)


if __name__ == "__main__":
    main()
