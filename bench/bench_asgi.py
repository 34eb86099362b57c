"""apimw's ASGI stack against ``asgi-idempotency-header``, over a bare Starlette app, in one run.

    pip install 'apimw[redis]' -r bench/requirements.txt
    python bench/bench_asgi.py [--rounds 5] [--clock cpu|wall] [--redis redis://127.0.0.1:6379/0]

Cases, each an in-process ASGI call (no server, no socket) timed in batches on one loop:

* a plain ``GET`` through the bare Starlette app (the baseline), through apimw's three ASGI
  middlewares (microversion -> idempotency -> etag), through each of the three alone (the
  breakdown of what the stack adds), through ``asgi-idempotency-header`` 0.2's
  ``IdempotencyHeaderMiddleware`` (memory backend) alone, and through two reference
  middlewares that do only the plumbing of apimw's two that touch a ``GET``'s answer: one
  appends four headers to the answer (microversion's), one holds the answer's start until
  its body was looked at (etag's);
* a ``POST`` with a new token each time (claim, run the app, store) and a replayed ``POST``
  (same token, same body: the app does not run) through each idempotency middleware alone,
  on ``memory://``; and a replay through apimw's on Redis beside its one store round trip
  (the claim, ``SET NX GET``, of a key that is there) on the same ``redis.asyncio`` store
  (``redis-server`` is started on a free loopback port unless ``--redis`` names one); beside
  it, the same round trip inside a request (a reference middleware that does the least a
  replay can: find its header, read the body, one claim, send the bytes found), and
  ``asgi-idempotency-header``'s replay on its Redis backend (two ``GET``s: body, status).

``--stages`` also prints where a replay's wall time goes, on ``memory://`` and on Redis: from
the request entering the app to the claim, the claim, the claim's answer to the answer
started, and to the request done (medians of 3000 replays).

Goals: the whole apimw stack adds no more than ``asgi-idempotency-header``'s one
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
from idempotency_header_middleware.backends.redis import RedisBackend
from redis.asyncio import Redis
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from apimw.asgi import ETagMiddleware, IdempotencyMiddleware, MicroversionMiddleware, open_async_store

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


MICROVERSION = Middleware(
    MicroversionMiddleware, service_type="baremetal", min_version="1.1", max_version="1.9"
)
ETAG = Middleware(ETagMiddleware)


def idempotency(store: Any = "memory://") -> Middleware:
    return Middleware(IdempotencyMiddleware, store=store, scope="shared")


def apimw_stack(store: Any = "memory://") -> Starlette:
    return starlette(MICROVERSION, idempotency(store), ETAG)


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


BARE_GET, STACK_GET, HEADER_GET = (
    "bare starlette, GET",
    "apimw stack (3 middlewares), GET",
    "asgi-idempotency-header, GET",
)
#: the stack's GET broken down: each of apimw's middlewares alone over the bare app
ALONE_GET = {
    "microversion": " apimw microversion alone, GET",
    "idempotency": " apimw idempotency alone, GET",
    "etag": " apimw etag alone, GET",
}
REFERENCE_GET = {
    "append 4 headers": "reference: append 4 headers, GET",
    "hold the start": "reference: hold the start for the body, GET",
}
BARE_POST = "bare starlette, POST"
FIRST_APIMW, FIRST_HEADER = (
    "apimw idempotency, POST new token (memory://)",
    "asgi-idempotency-header, POST new key",
)
REPLAY_APIMW, REPLAY_HEADER = (
    "apimw idempotency, POST replay (memory://)",
    "asgi-idempotency-header, POST replay",
)
REPLAY_REDIS, ROUND_TRIP, ROUND_TRIP_IN_REQUEST, REPLAY_HEADER_REDIS = (
    "apimw idempotency, POST replay (redis://)",
    "its one store round trip: the claim (SET NX GET)",
    "reference: one claim inside a request, POST",
    "asgi-idempotency-header, POST replay (redis://)",
)


PROBE_KEY = "apimw:bench:probe"
PROBE_RECORD = b"0" * 32 + b'P{"v":1}\n'


class AppendHeaders:
    """Reference: the least a middleware that adds headers to every answer does (microversion's plumbing)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.headers = [(b"x-min", b"1.1"), (b"x-max", b"1.9"), (b"x-version", b"1.1"), (b"vary", b"x-v")]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = self.headers

        async def appending(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *headers]}
            await send(message)

        await self.app(scope, receive, appending)


class HoldStart:
    """Reference: the least a middleware that reads the body before the headers go does (etag's plumbing)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] | None = None

        async def holding(message: dict[str, Any]) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                held = message
                return
            if held is not None:
                message.get("body", b"").find(b'"etag"')
                await send(held)
                held = None
            await send(message)

        await self.app(scope, receive, holding)


class OneRoundTrip:
    """Reference: the least a replay on Redis does inside a request (the same app, the same
    Starlette layers): find the token, read the body, one claim, send the bytes found."""

    def __init__(self, app: Any, store: Any) -> None:
        self.app, self.store = app, store

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        token = next((value for name, value in scope["headers"] if name == b"x-client-token"), None)
        if token is None:
            await self.app(scope, receive, send)
            return
        await receive()
        found = await self.store.claim(PROBE_KEY, PROBE_RECORD, 3600)
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": found, "more_body": False})


def fresh_tokens(app: Any, template: dict[str, Any], header: bytes) -> Callable[[], Any]:
    """A POST with a new token each call (the whole protocol: claim, run the app, store)."""
    count = iter(range(10**9))
    plain = [(k, v) for k, v in template["headers"] if k != header]

    def call() -> Any:
        tokened = dict(template, headers=[*plain, (header, b"t-%d" % next(count))])
        return caller(app, tokened, BODY)()

    return call


def cases(redis_store: Any, redis_url: str) -> dict[str, Callable[[], Any]]:
    def apimw_idempotency(store: Any = "memory://") -> Starlette:
        return starlette(idempotency(store))

    def header_idempotency(backend: Any = None) -> Starlette:
        return starlette(Middleware(IdempotencyHeaderMiddleware, backend=backend or MemoryBackend()))

    return {
        BARE_GET: caller(starlette(), GET),
        STACK_GET: caller(apimw_stack(), GET),
        ALONE_GET["microversion"]: caller(starlette(MICROVERSION), GET),
        ALONE_GET["idempotency"]: caller(apimw_idempotency(), GET),
        ALONE_GET["etag"]: caller(starlette(ETAG), GET),
        HEADER_GET: caller(header_idempotency(), GET),
        REFERENCE_GET["append 4 headers"]: caller(starlette(Middleware(AppendHeaders)), GET),
        REFERENCE_GET["hold the start"]: caller(starlette(Middleware(HoldStart)), GET),
        BARE_POST: caller(starlette(), POST_APIMW, BODY),
        FIRST_APIMW: fresh_tokens(apimw_idempotency(), POST_APIMW, b"x-client-token"),
        FIRST_HEADER: fresh_tokens(header_idempotency(), POST_HEADER, b"idempotency-key"),
        REPLAY_APIMW: caller(apimw_idempotency(), POST_APIMW, BODY),
        REPLAY_HEADER: caller(header_idempotency(), POST_HEADER, BODY),
        REPLAY_REDIS: caller(apimw_idempotency(redis_store), POST_APIMW, BODY),
        # what a replay sends: a claim that finds the record there
        ROUND_TRIP: lambda: redis_store.claim(PROBE_KEY, PROBE_RECORD, 3600),
        ROUND_TRIP_IN_REQUEST: caller(
            starlette(Middleware(OneRoundTrip, store=redis_store)), POST_APIMW, BODY
        ),
        REPLAY_HEADER_REDIS: caller(
            header_idempotency(RedisBackend(Redis.from_url(redis_url))), POST_HEADER, BODY
        ),
    }


class TimedStore:
    """An asyncio store that notes when each claim is sent and answered (``--stages``)."""

    def __init__(self, store: Any, marks: dict[str, int]) -> None:
        self.store, self.marks, self.name = store, marks, store.name

    async def claim(self, key: str, value: bytes, lease: float) -> bytes | None:
        self.marks["claim"] = time.perf_counter_ns()
        found: bytes | None = await self.store.claim(key, value, lease)
        self.marks["claimed"] = time.perf_counter_ns()
        return found

    def __getattr__(self, name: str) -> Any:  # complete, release, extend, get, aclose
        return getattr(self.store, name)


def stage_times(loop: asyncio.AbstractEventLoop, store: Any, number: int = 3000) -> dict[str, float]:
    """The median wall time (us) of each stage of a replay through apimw's idempotency middleware."""
    marks: dict[str, int] = {}

    def marking(app: Any) -> Any:
        async def entered(scope: dict[str, Any], receive: Any, send: Any) -> None:
            async def noted(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    marks["start"] = time.perf_counter_ns()
                await send(message)

            marks["enter"] = time.perf_counter_ns()
            await app(scope, receive, noted)
            marks["done"] = time.perf_counter_ns()

        return entered

    call = caller(starlette(Middleware(marking), idempotency(TimedStore(store, marks))), POST_APIMW, BODY)
    spans: dict[str, list[int]] = {
        name: [] for name in ("to the claim", "the claim", "to the answer", "answer sent")
    }

    async def run() -> None:
        for _ in range(number):
            await call()
            spans["to the claim"].append(marks["claim"] - marks["enter"])
            spans["the claim"].append(marks["claimed"] - marks["claim"])
            spans["to the answer"].append(marks["start"] - marks["claimed"])
            spans["answer sent"].append(marks["done"] - marks["start"])

    loop.run_until_complete(call())  # the first request stores the answer
    gc.disable()
    try:
        loop.run_until_complete(run())
    finally:
        gc.enable()
    return {name: statistics.median(values) / 1000 for name, values in spans.items()}


def print_stages(loop: asyncio.AbstractEventLoop, redis_store: Any) -> None:
    print("\nwhere a replay's wall time goes, around apimw's idempotency middleware (us, medians)")
    for name, store in (("memory://", open_async_store("memory://")), ("redis://", redis_store)):
        times = stage_times(loop, store)
        print(f"  {name:10} " + "  ".join(f"{stage} {value:6.2f}" for stage, value in times.items()))
    alone: list[int] = []

    async def claims() -> None:
        for _ in range(3000):
            start = time.perf_counter_ns()
            await redis_store.claim(PROBE_KEY, PROBE_RECORD, 3600)
            alone.append(time.perf_counter_ns() - start)

    loop.run_until_complete(claims())
    print(f"  the Redis claim alone, timed the same way: {statistics.median(alone) / 1000:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--redis", help="a Redis URL (default: start redis-server on a free loopback port)")
    parser.add_argument("--stages", action="store_true", help="also time the stages of a replay (wall clock)")
    args = parser.parse_args()
    clock = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns

    proc = workdir = None
    url = args.redis
    if url is None:
        proc, url, workdir = start_redis()
    loop = asyncio.new_event_loop()
    redis_store = open_async_store(url)
    try:
        timed = cases(redis_store, url)
        rounds: list[dict[str, float]] = []
        for _ in range(args.rounds):
            rounds.append({name: per_call_us(loop, call, clock) for name, call in timed.items()})
        report(rounds, args)
        if args.stages:
            print_stages(loop, redis_store)
    finally:
        loop.run_until_complete(redis_store.aclose())
        loop.close()
        if proc is not None:
            proc.terminate()
            proc.wait(10)
            shutil.rmtree(workdir or "", ignore_errors=True)


def report(rounds: list[dict[str, float]], args: argparse.Namespace) -> None:
    med = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}

    def ratio(
        numerator: Callable[[dict[str, float]], float], denominator: Callable[[dict[str, float]], float]
    ) -> float:
        """The median over the rounds of the ratio taken within each round."""
        return statistics.median(numerator(r) / max(denominator(r), 0.01) for r in rounds)

    print(f"\nbench_asgi: {args.rounds} rounds, {args.clock} clock, medians (us per request)")
    print(f"  {'case':52} {'us/req':>9} {'added us':>9}")
    for name, value in med.items():
        base = med[BARE_POST] if "POST" in name else med[BARE_GET]
        plain = name in (BARE_GET, BARE_POST, ROUND_TRIP, ROUND_TRIP_IN_REQUEST)
        added = "" if plain else f"{value - base:9.2f}"
        print(f"  {name:52} {value:9.2f} {added}")
    stack = ratio(lambda r: r[STACK_GET] - r[BARE_GET], lambda r: r[HEADER_GET] - r[BARE_GET])
    first = ratio(lambda r: r[FIRST_APIMW] - r[BARE_POST], lambda r: r[FIRST_HEADER] - r[BARE_POST])
    replay = ratio(lambda r: r[REPLAY_APIMW], lambda r: r[REPLAY_HEADER])
    over = statistics.median(r[REPLAY_REDIS] - r[ROUND_TRIP] for r in rounds)
    over_in_request = statistics.median(r[REPLAY_REDIS] - r[ROUND_TRIP_IN_REQUEST] for r in rounds)
    header_over = statistics.median(r[REPLAY_HEADER_REDIS] - r[ROUND_TRIP] for r in rounds)
    alone = {what: med[name] - med[BARE_GET] for what, name in ALONE_GET.items()}
    parts = " + ".join(f"{what} {added:.2f}" for what, added in alone.items())
    print(f"\nthe GET's added us, each middleware alone: {parts} = {sum(alone.values()):.2f}"
          f" (the three together: {med[STACK_GET] - med[BARE_GET]:.2f})")  # fmt: skip
    print("\nratios (goals: the stack <= 1.0x the one middleware; a replay <= one round trip + 10 us)")
    print(f"  plain GET, apimw's 3 middlewares / asgi-idempotency-header (added):  {stack:8.2f}x")
    print(f"  POST, new token, apimw idempotency / asgi-idempotency-header (added): {first:8.2f}x")
    print(f"  POST replay, apimw idempotency / asgi-idempotency-header (whole):     {replay:8.2f}x")
    print(f"  POST replay on Redis, minus its one store round trip (the claim):    {over:+8.2f} us")
    print(
        f"  POST replay on Redis, minus one claim inside a request (reference):  {over_in_request:+8.2f} us"
    )
    print(f"  asgi-idempotency-header's replay on Redis, minus one claim:          {header_over:+8.2f} us")


if __name__ == "__main__":
    main()
