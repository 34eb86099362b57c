"""apimw's ASGI middlewares end to end: FastAPI under uvicorn, loaded by ``wrk``, in one run.

    pip install 'apimw[redis]' -r bench/requirements.txt   # and Debian's wrk: apt-get install wrk
    python bench/bench_asgi.py [--rounds 16] [--seconds 1] [--connections 8] [--breakdown]

Every case is a FastAPI app served by uvicorn (one worker, its own process, on a free
loopback port), loaded by ``wrk`` (one thread, ``--connections`` keep-alive connections, so
the server is never idle), in interleaved rounds: each round measures every case of a group
once, one after the other, and each ratio is the median of the ratios taken within one round.

* A plain ``GET /v1/nodes/n1`` (``OpenStack-API-Version: baremetal 1.5``): the app without
  middleware, then with apimw's three ASGI middlewares (microversion -> idempotency -> etag;
  the etag middleware sends an ``ETag`` from 1.2).  Printed: the throughput with them over
  the throughput without them, read against the goal >= 0.9x.
* A replay on Redis: ``POST /v1/nodes`` with a client token whose answer is already stored,
  through apimw's ASGI idempotency middleware (``X-Client-Token``) and through
  ``asgi-idempotency-header`` 0.2's middleware on its Redis backend (``Idempotency-Key``),
  over the same ``redis-server`` (started on a free loopback port and stopped at the end),
  beside the app answering the same ``POST`` without middleware.  Printed: the time per
  replay (1 / throughput of the busy server) of apimw's over asgi-idempotency-header's, read
  against the goal <= 0.6x, and each replay's time beyond the bare ``POST``.
* The store's work per request, from the Redis server's own counters (``INFO``: commands
  by name, and the read events it processed, one per round trip), before and after a
  sequence of requests from one keep-alive client: a ``POST`` with a new token each time
  (goal: one round trip for the claim and one for the completion) and a replay (goal: one).

``--breakdown`` also prints where the plain ``GET``'s added time goes: the same FastAPI app
called in process (no server, no socket), CPU time of this thread per request (best of 7
batches), without middleware, with the three, and with each alone (the etag middleware
behind the microversion middleware, which serves it the version its etags need).

Each round of a group takes ``--seconds`` per case; the defaults keep the whole run under
two minutes.  The machine is shared with other work: the ratios matter more than the
throughputs, which depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fastapi import FastAPI, Request
from idempotency_header_middleware import IdempotencyHeaderMiddleware
from idempotency_header_middleware.backends.redis import RedisBackend
from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from apimw.asgi import ETagMiddleware, IdempotencyMiddleware, MicroversionMiddleware
from bench._http import HOST, Client, free_port, wait_ready

ROOT = Path(__file__).resolve().parent.parent

#: the environment variable that hands the servers the bench's Redis URL
REDIS_URL_VARIABLE = "APIMW_BENCH_REDIS_URL"
#: the document the app answers: a node with its stored etag (the etag middleware's ETag, from 1.2)
NODE = {
    "uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
    "name": "node-1",
    "provision_state": "available",
    "etag": 'W/"' + hashlib.sha512(b"node-1").hexdigest() + '"',
}
NEW_NODE = {"name": "node-1", "driver": "ipmi"}
BODY = json.dumps(NEW_NODE)
VERSION = "baremetal 1.5"
#: the ratios are read against these: throughput with / without the three middlewares on
#: the GET, time per Redis replay of apimw's over asgi-idempotency-header's
GOAL_GET = 0.9
GOAL_REPLAY = 0.6
GET_PATH, POST_PATH = "/v1/nodes/n1", "/v1/nodes"
#: the client token of the replays
TOKEN = "bench-replay-token"  # noqa: S105 - not a secret


# --- the apps, built by uvicorn (``--factory bench.bench_asgi:<name>``) in the server process


def bare_app() -> FastAPI:
    app = FastAPI()

    @app.get(GET_PATH)
    async def show() -> dict[str, str]:
        return NODE

    @app.post(POST_PATH, status_code=201)
    async def create(request: Request) -> dict[str, str]:
        await request.body()
        return NODE

    return app


MICROVERSION = (
    MicroversionMiddleware,
    {"service_type": "baremetal", "min_version": "1.1", "max_version": "1.9"},
)
IDEMPOTENCY = (IdempotencyMiddleware, {"store": "memory://", "scope": "shared"})
ETAG = (ETagMiddleware, {"min_version": "1.2"})


def with_middleware(*middleware: tuple[type, dict[str, str]]) -> FastAPI:
    """:func:`bare_app` with *middleware*, innermost first (the last added runs first)."""
    app = bare_app()
    for cls, options in middleware:
        app.add_middleware(cls, **options)
    return app


def apimw_app() -> FastAPI:
    """The three middlewares in the pipeline order: microversion -> idempotency -> etag."""
    return with_middleware(ETAG, IDEMPOTENCY, MICROVERSION)


def apimw_redis_app() -> FastAPI:
    app = bare_app()
    app.add_middleware(IdempotencyMiddleware, store=os.environ[REDIS_URL_VARIABLE], scope="shared")
    return app


def header_redis_app() -> FastAPI:
    app = bare_app()
    backend = RedisBackend(AsyncRedis.from_url(os.environ[REDIS_URL_VARIABLE]))
    app.add_middleware(IdempotencyHeaderMiddleware, backend=backend)
    return app


# --- the processes: redis-server, uvicorn, wrk


@contextmanager
def redis_server() -> Iterator[str]:
    """A ``redis-server`` of the bench's own on a free loopback port; its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (Debian: apt-get install redis-server)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-asgi-redis-") as workdir:
        args = [binary, "--bind", HOST, "--port", str(port), "--save", "", "--appendonly", "no"]
        args += ["--dir", workdir]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection((HOST, port), timeout=0.2).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit("redis-server did not start") from None
                    time.sleep(0.05)
            yield f"redis://{HOST}:{port}/0"
        finally:
            proc.terminate()
            proc.wait(10)


class Server(NamedTuple):
    """A uvicorn server of the bench: its loopback port and its process (one worker)."""

    port: int
    pid: int

    def cpu_seconds(self) -> float:
        """The CPU time (user + system) the server's process has used so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sample(NamedTuple):
    """One wrk run against one server."""

    #: wrk's requests per second
    rps: float
    #: the server's CPU time per request, microseconds
    cpu_us: float


@contextmanager
def uvicorn(factory: str, redis_url: str = "") -> Iterator[Server]:
    """``uvicorn --factory bench.bench_asgi:<factory>``, one worker on a free loopback port."""
    port = free_port()
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, **{REDIS_URL_VARIABLE: redis_url})
    args = [
        sys.executable, "-m", "uvicorn", "--factory", f"bench.bench_asgi:{factory}",
        "--host", HOST, "--port", str(port), "--workers", "1", "--no-access-log", "--log-level", "warning",
    ]  # fmt: skip
    proc = subprocess.Popen(args, env=env, cwd=ROOT)
    try:
        wait_ready(port, proc, GET_PATH, timeout=60)
        yield Server(port, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def wrk_binary() -> str:
    binary = shutil.which("wrk")
    if binary is None:
        raise SystemExit(
            "wrk is not installed: this benchmark loads the servers with wrk (Debian: apt-get install -y wrk)"
        )
    return binary


def lua_script(method: str, headers: dict[str, str], body: str | None) -> str:
    lines = [f'wrk.method = "{method}"']
    lines += [f'wrk.headers["{name}"] = "{value}"' for name, value in headers.items()]
    if body is not None:
        lines.append(f"wrk.body = '{body}'")
    return "\n".join(lines) + "\n"


class Load:
    """One wrk load: a method, path, headers and body, against a server's port."""

    def __init__(self, args: argparse.Namespace, workdir: Path, name: str, method: str, path: str,
                 headers: dict[str, str], body: str | None = None) -> None:  # fmt: skip
        self.args, self.path = args, path
        self.script = workdir / f"{name}.lua"
        self.script.write_text(lua_script(method, headers, body))

    def run(self, server: Server, seconds: int) -> Sample:
        """Run wrk for *seconds* (SystemExit on any error or non-2xx answer)."""
        command = [
            wrk_binary(), "-t1", f"-c{self.args.connections}", f"-d{seconds}s",
            "-s", str(self.script), f"http://{HOST}:{server.port}{self.path}",
        ]  # fmt: skip
        cpu = server.cpu_seconds()
        out = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30, check=True)
        cpu = server.cpu_seconds() - cpu
        if "Non-2xx" in out.stdout or "Socket errors" in out.stdout:
            raise SystemExit(f"wrk saw errors:\n{out.stdout}")
        rps = re.search(r"Requests/sec:\s+([\d.]+)", out.stdout)
        requests = re.search(r"(\d+) requests in", out.stdout)
        if rps is None or requests is None:
            raise SystemExit(f"no request count in wrk's output:\n{out.stdout}{out.stderr}")
        return Sample(float(rps.group(1)), cpu * 1e6 / int(requests.group(1)))


# --- checks and store counters, from one keep-alive client


def expect(got: tuple[int, dict[str, str], bytes], status: int, *headers: str) -> dict[str, str]:
    code, hdrs, payload = got
    missing = [name for name in headers if name not in hdrs]
    if code != status or missing:
        wanted = f"{status} with {', '.join(headers) or 'any headers'}"
        raise SystemExit(f"unexpected answer {code} (wanted {wanted}): {hdrs} {payload[:300]!r}")
    return hdrs


def post(client: Client, token: tuple[str, str]) -> tuple[int, dict[str, str], bytes]:
    """The POST wrk sends (the same body bytes), with *token*: (header name, value)."""
    return client.call("POST", POST_PATH, body=NEW_NODE, headers=dict([token]))


class StoreCounters:
    """The Redis server's own counts: commands by name (those a script runs included), and
    read events (one per round trip: a request the server read and answered)."""

    def __init__(self, url: str) -> None:
        self.redis = Redis.from_url(url)

    def snapshot(self) -> dict[str, int]:
        info = self.redis.info("all")
        counts = {"round trips": int(info["total_reads_processed"])}
        for key, value in info.items():
            if key.startswith("cmdstat_"):
                counts[key.removeprefix("cmdstat_")] = int(value["calls"])
        return counts

    def settled(self) -> dict[str, int]:
        """A snapshot once the server has seen no other command for 0.2 s (bounded: 10 s)."""
        last = self.snapshot()
        for _ in range(50):
            time.sleep(0.2)
            now = self.snapshot()
            if now["round trips"] - last["round trips"] == 1:  # only the INFO of this snapshot
                return now
            last = now
        raise SystemExit("the Redis server did not settle: another client is using it")

    @staticmethod
    def per_request(before: dict[str, int], after: dict[str, int], requests: int) -> dict[str, float]:
        """What *requests* requests sent between two snapshots, each, without the snapshots'
        own ``INFO`` commands: a read is counted when it happens, a command once it ran, so
        as many ``INFO`` reads as ``INFO`` commands fall between the two."""
        delta = {name: after[name] - before.get(name, 0) for name in after}
        delta["round trips"] -= delta.pop("info")
        return {name: count / requests for name, count in delta.items() if count}


def store_work(
    port: int, counters: StoreCounters, token_header: str, requests: int = 50
) -> dict[str, dict[str, float]]:
    """Per request: *requests* POSTs with a new token each, then as many replays of one."""
    client = Client(port, version="")
    prefix = f"work-{port}-{time.monotonic_ns()}"
    expect(post(client, (token_header, f"{prefix}-warm")), 201)  # connections and scripts ready
    before = counters.settled()
    for i in range(requests):
        expect(post(client, (token_header, f"{prefix}-{i}")), 201)
    new = counters.per_request(before, counters.settled(), requests)
    before = counters.settled()
    for _ in range(requests):
        expect(post(client, (token_header, f"{prefix}-0")), 201, "idempotent-replayed")
    replay = counters.per_request(before, counters.settled(), requests)
    client.close()
    return {"new token": new, "replay": replay}


# --- the report


def measure_get(args: argparse.Namespace, stack: ExitStack, workdir: Path) -> None:
    get = Load(args, workdir, "get", "GET", GET_PATH, {"OpenStack-API-Version": VERSION})
    servers = {
        "without": stack.enter_context(uvicorn("bare_app")),
        "with": stack.enter_context(uvicorn("apimw_app")),
    }
    client = Client(servers["with"].port, version="")
    expect(client.call("GET", GET_PATH, headers={"OpenStack-API-Version": VERSION}), 200, "etag", "vary")
    client.close()
    samples = interleaved(args, {name: (get, server) for name, server in servers.items()})
    print(f"\nplain GET {GET_PATH}, OpenStack-API-Version: {VERSION} (medians of the rounds)")
    print(f"  {'':52} {'req/s':>8} {'server CPU us/req':>18}")
    labels = {"without": "FastAPI app without middleware", "with": "with apimw's three ASGI middlewares"}
    for name, label in labels.items():
        print(f"  {label:52} {median(samples[name], 'rps'):8.0f} {median(samples[name], 'cpu_us'):18.1f}")
    print(f"  throughput with / without:           {ratio(samples['with'], samples['without'], 'rps')}"
          f"   goal >= {GOAL_GET}x")  # fmt: skip
    print(f"  server CPU per request with / without: {ratio(samples['with'], samples['without'], 'cpu_us')}")


def measure_replay(args: argparse.Namespace, stack: ExitStack, workdir: Path, url: str) -> dict[str, int]:
    """The replay loads; the ports of apimw's server and asgi-idempotency-header's."""
    servers = {
        "bare": stack.enter_context(uvicorn("bare_app")),
        "apimw": stack.enter_context(uvicorn("apimw_redis_app", url)),
        "header": stack.enter_context(uvicorn("header_redis_app", url)),
    }
    headers = {"bare": {}, "apimw": {"X-Client-Token": TOKEN}, "header": {"Idempotency-Key": TOKEN}}
    for name in ("apimw", "header"):
        client = Client(servers[name].port, version="")
        expect(post(client, *headers[name].items()), 201)  # stores the answer the loads replay
        expect(post(client, *headers[name].items()), 201, "idempotent-replayed")
        client.close()
    json_type = {"Content-Type": "application/json"}
    loads = {
        name: (Load(args, workdir, name, "POST", POST_PATH, {**json_type, **extra}, BODY), servers[name])
        for name, extra in headers.items()
    }
    samples = interleaved(args, loads)
    print(f"\nreplayed POST {POST_PATH} on Redis (medians of the rounds)")
    print(f"  {'':52} {'req/s':>8} {'server CPU us/req':>18}")
    labels = {
        "bare": "FastAPI app without middleware (the app runs)",
        "apimw": "apimw's idempotency, replay (X-Client-Token)",
        "header": "asgi-idempotency-header 0.2, replay (Idempotency-Key)",
    }
    for name, label in labels.items():
        print(f"  {label:52} {median(samples[name], 'rps'):8.0f} {median(samples[name], 'cpu_us'):18.1f}")
    # time per replay = 1 / throughput of the busy server: apimw's / asgi-idempotency-header's
    per_replay = ratio(samples["header"], samples["apimw"], "rps")
    print(f"  time per replay, apimw / asgi-idempotency-header:  {per_replay}   goal <= {GOAL_REPLAY}x")
    print(f"  server CPU per replay, apimw / asgi-idempotency-header: "
          f"{ratio(samples['apimw'], samples['header'], 'cpu_us')}")  # fmt: skip
    return {"apimw idempotency": servers["apimw"].port, "asgi-idempotency-header": servers["header"].port}


def interleaved(args: argparse.Namespace, loads: dict[str, tuple[Load, Server]]) -> dict[str, list[Sample]]:
    """``--rounds`` rounds, each running every load once in turn (a first, unrecorded round warms up)."""
    samples: dict[str, list[Sample]] = {name: [] for name in loads}
    for round_ in range(args.rounds + 1):
        for name, (load, server) in loads.items():
            sample = load.run(server, seconds=1 if round_ == 0 else args.seconds)
            if round_:
                samples[name].append(sample)
    return samples


def median(samples: list[Sample], field: str) -> float:
    return statistics.median(getattr(s, field) for s in samples)


def ratio(numerator: list[Sample], denominator: list[Sample], field: str) -> str:
    """The median of the ratios taken within each round, and their range."""
    values = [getattr(n, field) / getattr(d, field) for n, d in zip(numerator, denominator, strict=True)]
    return f"{statistics.median(values):.3f}x (rounds: {min(values):.3f}-{max(values):.3f})"


def print_store_work(url: str, ports: dict[str, int]) -> None:
    counters = StoreCounters(url)
    goals = {"new token": "goal: 1 claim + 1 completion", "replay": "goal: 1"}
    print("\nthe store's work per request (Redis INFO deltas over 50 requests from one client)")
    for name, header in (
        ("apimw idempotency", "X-Client-Token"),
        ("asgi-idempotency-header", "Idempotency-Key"),
    ):
        for kind, counts in store_work(ports[name], counters, header).items():
            trips = counts.pop("round trips", 0.0)
            commands = ", ".join(f"{command} {n:g}" for command, n in sorted(counts.items()))
            goal = f"   {goals[kind]}" if name.startswith("apimw") else ""
            print(f"  {name + ', ' + kind:36} round trips {trips:4.2f} (commands: {commands}){goal}")


def breakdown() -> None:
    """Where the plain GET's added time goes: the app called in process, CPU time."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": GET_PATH, "raw_path": GET_PATH.encode(), "root_path": "",
        "query_string": b"", "client": (HOST, 50000), "server": (HOST, 8000),
        "headers": [(b"host", b"127.0.0.1:8000"), (b"openstack-api-version", VERSION.encode())],
    }  # fmt: skip
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async def batch(app: FastAPI, number: int) -> None:
        for _ in range(number):
            await app(dict(scope, headers=list(scope["headers"]), state={}), receive, send)

    apps = {
        "FastAPI app without middleware": bare_app(),
        "with apimw's three middlewares": apimw_app(),
        "microversion alone": with_middleware(MICROVERSION),
        "idempotency alone": with_middleware(IDEMPOTENCY),
        "etag behind microversion": with_middleware(ETAG, MICROVERSION),
    }
    loop = asyncio.new_event_loop()
    best = dict.fromkeys(apps, float("inf"))
    try:
        for app in apps.values():
            loop.run_until_complete(batch(app, 500))  # warm up
        for _ in range(7):
            for name, app in apps.items():
                start = time.thread_time_ns()
                loop.run_until_complete(batch(app, 2000))
                best[name] = min(best[name], (time.thread_time_ns() - start) / 2000 / 1000)
    finally:
        loop.close()
    if set(statuses) != {200}:
        raise SystemExit(f"the in-process GET answered {sorted(set(statuses))}")
    bare, *others = best
    print("\nthe plain GET in process, no server (CPU us per request, best of 7 batches; added)")
    print(f"  {bare:52} {best[bare]:8.1f}")
    for name in others:
        print(f"  {name:52} {best[name]:8.1f} {best[name] - best[bare]:+7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=1, help="wrk's duration per case and round")
    parser.add_argument("--connections", type=int, default=8, help="wrk's keep-alive connections")
    parser.add_argument(
        "--breakdown", action="store_true", help="also the GET in process, each middleware alone"
    )
    args = parser.parse_args()
    wrk = subprocess.run([wrk_binary(), "-v"], capture_output=True, text=True, check=False).stdout.split()
    print(
        f"uvicorn {version('uvicorn')}, FastAPI {version('fastapi')}, Python {sys.version.split()[0]},"
        f" wrk {wrk[1] if len(wrk) > 1 else '?'} -t1 -c{args.connections} -d{args.seconds}s,"
        f" {args.rounds} rounds"
    )
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-asgi-")))
        measure_get(args, stack, workdir)
        url = stack.enter_context(redis_server())
        ports = measure_replay(args, stack, workdir, url)
        print_store_work(url, ports)
    if args.breakdown:
        breakdown()


if __name__ == "__main__":
    main()
