"""Bench the bare-metal service over real HTTP: sequential keep-alive requests.

    python bench/bench_service.py [--database URL] [--seconds-per-case 3] [--threads 8]
    python bench/bench_service.py --server waitress,gunicorn,granian [--rounds 3]
                                  [--ironic http://127.0.0.1:6399]

Starts ``baremetal-service`` (the console command, whole middleware stack,
conductor on) on a free loopback port with a fresh SQLite file (or
``--database``), and drives it from one keep-alive connection:

* GET one node                    (1.117, ETag returned)
* GET /v1/nodes with 100 nodes    (the default list fields)
* POST /v1/nodes (create)
* PATCH a node with If-Match      (the etag from the previous answer)
* replayed POST                   (same X-Client-Token; answered from the store)
* GET one port, GET /v1/ports with 100 ports, POST /v1/ports, PATCH a port with
  If-Match (the declared resources' generic CRUD)

For each: requests/s, p50 and p99 latency, and the ratio to real Ironic 39.0's
published numbers (GET node ~70 req/s, 100-node list ~15 req/s, create
~19 req/s, measured the same way).  A baseline measured in the same run -- a
bare WSGI "hello" app on the same server -- shows how much of each request is
the HTTP stack itself.

``--server`` compares WSGI servers instead: each one (``waitress``, ``gunicorn``
with the gthread worker, ``granian``; one process, ``--threads`` threads) serves a
bare WSGI app and the service (``baremetal_service.deploy:application``, SQLite,
conductor on), in turn, ``--rounds`` times (the candidates alternate, so a
neighbour's load spreads over all of them).  Each case runs with one sequential
keep-alive client and with 8 concurrent ones; the table shows medians over the
rounds and the ratio to the first server named (measured in the same run), and
to real Ironic when ``--ironic`` answers (the same client, nodes created and
deleted there by the bench).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._http import Client, expect, free_port, wait_ready  # noqa: E402

#: Real Ironic 39.0 (API + conductor, SQLite, noauth, fake-hardware) on the same kind of machine.
IRONIC_39 = {"get node": 70.0, "list 100 nodes": 15.0, "create node": 19.0}


def measure(
    name: str,
    seconds: float,
    fn: Callable[[int], None],
    max_requests: int = 200_000,
    before: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Call ``fn(i)`` for *seconds*; ``before(i)`` (untimed, e.g. create what ``fn`` deletes) first."""
    for i in range(20):  # warm-up
        if before is not None:
            before(-1 - i)
        fn(-1 - i)
    samples: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds
    i = 0
    while i < max_requests:
        if before is not None:
            before(i)
        t0 = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t0)
        i += 1
        if t0 > deadline:
            break
    elapsed = sum(samples) if before is not None else time.perf_counter() - start
    samples.sort()
    return {
        "case": name,
        "requests": len(samples),
        "rps": len(samples) / elapsed,
        "p50_ms": statistics.median(samples) * 1000,
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000,
    }


def bench_service(port: int, seconds: float) -> list[dict[str, Any]]:
    client = Client(port)
    run = uuid.uuid4().hex[:8]
    # 100 nodes for the list; the first one is the one we GET and PATCH.
    uuids = []
    for i in range(100):
        status, _, payload = client.call(
            "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"b-{run}-{i}"}
        )
        expect(status, 201, payload)
        uuids.append(json.loads(payload)["uuid"])
    target = uuids[0]
    results = []

    def get_node(_: int) -> None:
        status, _h, payload = client.call("GET", f"/v1/nodes/{target}")
        expect(status, 200, payload)

    results.append(measure("get node", seconds, get_node))

    def list_nodes(_: int) -> None:
        status, _h, payload = client.call("GET", "/v1/nodes")
        expect(status, 200, payload)

    results.append(measure("list 100 nodes", seconds, list_nodes))

    counter = iter(range(10**9))

    def create(_: int) -> None:
        status, _h, payload = client.call(
            "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"c-{run}-{next(counter)}"}
        )
        expect(status, 201, payload)

    results.append(measure("create node", seconds, create, max_requests=5000))

    _, headers, _ = client.call("GET", f"/v1/nodes/{target}")
    etag = {"value": headers.get("etag", "")}

    def patch(i: int) -> None:
        body = [{"op": "add", "path": "/extra/n", "value": i}]
        status, h, payload = client.call("PATCH", f"/v1/nodes/{target}", body, {"If-Match": etag["value"]})
        expect(status, 200, payload)
        etag["value"] = h.get("etag", etag["value"])

    results.append(measure("patch with If-Match", seconds, patch, max_requests=5000))

    token = f"bench-{run}"
    status, _, payload = client.call(
        "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"r-{run}"}, {"X-Client-Token": token}
    )
    expect(status, 201, payload)

    def replay(_: int) -> None:
        status, h, payload = client.call(
            "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"r-{run}"}, {"X-Client-Token": token}
        )
        expect(status, 201, payload)

    results.append(measure("replayed POST", seconds, replay))
    results.extend(bench_ports(client, target, run, seconds))
    return results


def bench_ports(client: Client, node: str, run: str, seconds: float) -> list[dict[str, Any]]:
    """The declared resources' generic CRUD, measured on ports (100 on one node)."""
    prefix = int(run[:6], 16) & 0xFFFFFF
    macs = (f"52:{prefix >> 16:02x}:{(prefix >> 8) & 0xFF:02x}:{i >> 16 & 0xFF:02x}:"
            f"{i >> 8 & 0xFF:02x}:{i & 0xFF:02x}" for i in range(10**6))  # fmt: skip
    ports = []
    for _ in range(100):
        status, _h, payload = client.call("POST", "/v1/ports", {"node_uuid": node, "address": next(macs)})
        expect(status, 201, payload)
        ports.append(json.loads(payload)["uuid"])
    target = ports[0]
    results = []

    def get_port(_: int) -> None:
        status, _h, payload = client.call("GET", f"/v1/ports/{target}")
        expect(status, 200, payload)

    results.append(measure("get port", seconds, get_port))

    def list_ports(_: int) -> None:
        status, _h, payload = client.call("GET", "/v1/ports")
        expect(status, 200, payload)

    results.append(measure("list 100 ports", seconds, list_ports))

    def create(_: int) -> None:
        status, _h, payload = client.call("POST", "/v1/ports", {"node_uuid": node, "address": next(macs)})
        expect(status, 201, payload)

    results.append(measure("create port", seconds, create, max_requests=5000))

    _, headers, _ = client.call("GET", f"/v1/ports/{target}")
    etag = {"value": headers.get("etag", "")}

    def patch(i: int) -> None:
        body = [{"op": "add", "path": "/extra/n", "value": i}]
        status, h, payload = client.call("PATCH", f"/v1/ports/{target}", body, {"If-Match": etag["value"]})
        expect(status, 200, payload)
        etag["value"] = h.get("etag", etag["value"])

    results.append(measure("patch port with If-Match", seconds, patch, max_requests=5000))
    return results


def _hello(environ: Any, start_response: Any) -> list[bytes]:
    body = b'{"hello": "world"}'
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def bench_baseline(seconds: float, threads: int) -> dict[str, Any]:
    from waitress.server import create_server

    server = create_server(_hello, host="127.0.0.1", port=0, threads=threads)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        client = Client(server.effective_port)

        def hello(_: int) -> None:
            client.call("GET", "/")

        result = measure("baseline: bare WSGI app, same server", seconds, hello)
        client.close()
        return result
    finally:
        # Let the worker threads finish before the sockets go (else they write to a closed trigger).
        server.task_dispatcher.shutdown(timeout=5)
        server.close()


# -- --server: the same client against several WSGI servers (and real Ironic) ----------------------

#: The bare app and the service as every server loads them (module:object).
HELLO_TARGET = "bench.bench_service:hello"
SERVICE_TARGET = "baremetal_service.deploy:application"
CONCURRENT_CLIENTS = 8


def hello(environ: Any, start_response: Any) -> list[bytes]:
    return _hello(environ, start_response)


def server_command(server: str, target: str, port: int, threads: int) -> list[str]:
    """The command serving *target* with *server*: one process, *threads* threads."""
    python = sys.executable
    if server == "waitress":
        return [python, "-m", "waitress", "--host=127.0.0.1", f"--port={port}", f"--threads={threads}",
                "--asyncore-use-poll", target]  # fmt: skip
    if server == "gunicorn":
        return [python, "-m", "gunicorn", "--worker-class", "gthread", "--workers", "1", "--threads",
                str(threads), "--bind", f"127.0.0.1:{port}", "--keep-alive", "75", target]  # fmt: skip
    if server == "granian":
        return [python, "-m", "granian", "--interface", "wsgi", "--workers", "1", "--blocking-threads",
                str(threads), "--no-ws", "--host", "127.0.0.1", "--port", str(port), target]  # fmt: skip
    if server == "cli":  # the baremetal-service command with its default server (the service only)
        return [python, "-m", "baremetal_service.cli", "--port", str(port), "--threads", str(threads)]
    if server.startswith("cli-"):  # the command with --server waitress|granian (the service only)
        return [python, "-m", "baremetal_service.cli", "--port", str(port), "--threads", str(threads),
                "--server", server.removeprefix("cli-")]  # fmt: skip
    raise SystemExit(f"unknown server {server!r} (waitress, gunicorn, granian, cli, cli-<server>)")


class Running:
    """A server subprocess, stopped (SIGTERM, then SIGKILL) on exit."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd
        )

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def measure_concurrent(
    name: str, seconds: float, port: int, fn: Callable[[Client, int], None], clients: int = CONCURRENT_CLIENTS
) -> dict[str, Any]:
    """*clients* threads, each with its own keep-alive connection, calling ``fn`` for *seconds*."""
    samples: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(clients + 1)

    def run(k: int) -> None:
        client = Client(port)
        try:
            for i in range(5):  # warm-up, connection open
                fn(client, -1 - i - 10 * k)
            barrier.wait()
            deadline = time.perf_counter() + seconds
            i = 0
            while (t0 := time.perf_counter()) < deadline:
                fn(client, k * 1_000_000 + i)
                samples[k].append(time.perf_counter() - t0)
                i += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()
        finally:
            client.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise SystemExit(f"{name}: {errors[0]!r}")
    flat = sorted(x for per in samples for x in per)
    return {
        "case": name,
        "requests": len(flat),
        "rps": len(flat) / elapsed,
        "p50_ms": statistics.median(flat) * 1000,
        "p99_ms": flat[min(len(flat) - 1, int(len(flat) * 0.99))] * 1000,
    }


def bench_bare(port: int, seconds: float) -> list[dict[str, Any]]:
    client = Client(port)
    try:
        seq = measure("bare app", seconds, lambda _: expect(client.call("GET", "/")[0], 200, b""))
    finally:
        client.close()
    conc = measure_concurrent(
        "bare app x8", seconds, port, lambda c, _: expect(c.call("GET", "/")[0], 200, b"")
    )
    return [seq, conc]


def bench_four(port: int, seconds: float, created: list[str]) -> list[dict[str, Any]]:
    """GET node, list 100 nodes, create, delete: one sequential client, then 8 concurrent (not delete).

    Every node created is appended to *created* (and removed when deleted here), so a caller can
    clean up a shared server (real Ironic)."""
    client = Client(port)
    run = uuid.uuid4().hex[:8]
    counter = iter(range(10**9))

    def create(c: Client, tag: str) -> str:
        status, _h, payload = c.call(
            "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"{tag}-{run}-{next(counter)}"}
        )
        expect(status, 201, payload)
        node = json.loads(payload)["uuid"]
        created.append(node)
        return node

    def delete(c: Client, node: str) -> None:
        status, _h, payload = c.call("DELETE", f"/v1/nodes/{node}")
        expect(status, 204, payload)
        created.remove(node)

    results = []
    try:
        have = len(json.loads(client.call("GET", "/v1/nodes?limit=1000")[2])["nodes"])
        for _ in range(max(0, 100 - have)):
            create(client, "b")
        target = (
            created[0]
            if created
            else json.loads(client.call("GET", "/v1/nodes?limit=1")[2])["nodes"][0]["uuid"]
        )

        def get_node(c: Client, _: int) -> None:
            status, _h, payload = c.call("GET", f"/v1/nodes/{target}")
            expect(status, 200, payload)

        def list_nodes(c: Client, _: int) -> None:
            status, _h, payload = c.call("GET", "/v1/nodes")
            expect(status, 200, payload)

        def create_node(c: Client, _: int) -> None:
            create(c, "c")

        pending: list[str] = []
        results.append(measure("get node", seconds, lambda i: get_node(client, i)))
        results.append(measure("list 100 nodes", seconds, lambda i: list_nodes(client, i)))
        results.append(measure("create node", seconds, lambda i: create_node(client, i), max_requests=5000))
        results.append(
            measure(
                "delete node",
                seconds,
                lambda _: delete(client, pending.pop()),
                max_requests=5000,
                before=lambda _: pending.append(create(client, "d")),  # untimed
            )
        )
        results.append(measure_concurrent("get node x8", seconds, port, get_node))
        results.append(measure_concurrent("list 100 nodes x8", seconds, port, list_nodes))
        results.append(measure_concurrent("create node x8", seconds, port, create_node))
    finally:
        client.close()
    return results


def cleanup(port: int, created: list[str]) -> None:
    client = Client(port)
    try:
        for node in list(created):
            client.call("DELETE", f"/v1/nodes/{node}")
            created.remove(node)
    finally:
        client.close()


def compare_servers(args: argparse.Namespace) -> int:
    servers = [name.strip() for name in args.server.split(",") if name.strip()]
    workdir = Path(tempfile.mkdtemp(prefix="bench-servers-"))
    here = Path(__file__).resolve().parent.parent
    path = os.pathsep.join(filter(None, [str(here), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BAREMETAL_STORE": "memory://", "PYTHONPATH": path}
    ironic_port = None
    if args.ironic:
        parts = args.ironic.rstrip("/").rsplit(":", 1)
        ironic_port = int(parts[1])
        try:
            Client(ironic_port).call("GET", "/v1/nodes?limit=1")
        except OSError:
            print(f"no Ironic at {args.ironic}: no Ironic column")  # noqa: T201
            ironic_port = None
    rows: dict[str, dict[str, list[float]]] = {}
    p50s: dict[str, dict[str, list[float]]] = {}

    def keep(server: str, results: list[dict[str, Any]]) -> None:
        for row in results:
            rows.setdefault(row["case"], {}).setdefault(server, []).append(row["rps"])
            p50s.setdefault(row["case"], {}).setdefault(server, []).append(row["p50_ms"])

    ironic_created: list[str] = []
    try:
        for round_ in range(args.rounds):
            order = servers[round_ % len(servers) :] + servers[: round_ % len(servers)]
            for server in order:
                if not server.startswith("cli"):
                    port = free_port()
                    with Running(
                        server_command(server, HELLO_TARGET, port, args.threads), env, workdir
                    ) as srv:
                        wait_ready(port, srv.proc)
                        keep(server, bench_bare(port, args.seconds_per_case))
                port = free_port()
                database = f"sqlite:///{workdir / f'{server}-{round_}.sqlite'}"
                command = server_command(server, SERVICE_TARGET, port, args.threads)
                if server.startswith("cli"):
                    command += ["--database", database]
                with Running(command, {**env, "BAREMETAL_DATABASE": database}, workdir) as srv:
                    wait_ready(port, srv.proc)
                    keep(server, bench_four(port, args.seconds_per_case, []))
                print(f"round {round_ + 1}/{args.rounds}: {server} done", file=sys.stderr, flush=True)  # noqa: T201
            if ironic_port is not None:
                keep("ironic", bench_four(ironic_port, args.seconds_per_case, ironic_created))
                print(f"round {round_ + 1}/{args.rounds}: ironic done", file=sys.stderr, flush=True)  # noqa: T201
    finally:
        if ironic_port is not None and ironic_created:
            cleanup(ironic_port, ironic_created)
    if args.json:
        print(json.dumps({"rps": rows, "p50_ms": p50s}, indent=2))  # noqa: T201
        return 0
    columns = [*servers, *(["ironic"] if ironic_port is not None else [])]
    base = servers[0]
    versus = f"ratio to {base}" + (" / to Ironic (I)" if ironic_port else "")
    print(f"\nreq/s, median of {args.rounds} rounds ({args.seconds_per_case:g} s a case; "  # noqa: T201
          f"x8 = {CONCURRENT_CLIENTS} concurrent clients); {versus}")  # fmt: skip
    print(f"{'case':<20}" + "".join(f"{name:>19}" for name in columns))  # noqa: T201
    for case, per in rows.items():
        ref = statistics.median(per[base]) if base in per else None
        ironic = statistics.median(per["ironic"]) if "ironic" in per else None
        cells = []
        for name in columns:
            if name not in per:
                cells.append(f"{'-':>19}")
                continue
            value = statistics.median(per[name])
            ratio = f"{value / ref:.2f}x" if ref and name != "ironic" else ""
            vs_ironic = f"/{value / ironic:.0f}xI" if ironic and name != "ironic" else ""
            cells.append(f"{value:>8.0f} {ratio + vs_ironic:>10}")
        print(f"{case:<20}" + "".join(cells))  # noqa: T201
    print("\np50 latency, ms (median of the rounds)")  # noqa: T201
    for case, per in p50s.items():
        print(f"{case:<20}" + "".join(f"{statistics.median(per[n]):>19.2f}" if n in per else f"{'-':>19}"
                                     for n in columns))  # fmt: skip
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", default=None, help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--seconds-per-case", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--server",
        default=None,
        help="compare these servers (comma-separated: waitress, gunicorn, granian, cli, cli-waitress, "
        "cli-granian; the first is the baseline of the ratios) instead of benching the baremetal-service "
        "command",
    )
    parser.add_argument("--rounds", type=int, default=3, help="--server: rounds (candidates alternate)")
    parser.add_argument(
        "--ironic",
        default=None,
        help="--server: real Ironic's URL (e.g. http://127.0.0.1:6399) for its column",
    )
    args = parser.parse_args()
    if args.server:
        return compare_servers(args)

    workdir = Path(tempfile.mkdtemp(prefix="bench-baremetal-"))
    database = args.database or f"sqlite:///{workdir / 'bench.sqlite'}"
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "baremetal_service.cli",
        "--port",
        str(port),
        "--database",
        database,
        "--threads",
        str(args.threads),
    ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_ready(port, proc)
        results = bench_service(port, args.seconds_per_case)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    baseline = bench_baseline(args.seconds_per_case, args.threads)
    if args.json:
        print(json.dumps({"results": results, "baseline": baseline, "ironic_39": IRONIC_39}, indent=2))
        return 0
    print(f"{'case':<40} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'app ms':>7}   vs Ironic 39.0")
    for row in [*results, baseline]:
        ironic = IRONIC_39.get(row["case"])
        ratio = f"{row['rps'] / ironic:6.1f}x  (Ironic {ironic:.0f} req/s)" if ironic else ""
        # p50 minus the bare server's p50: what the service itself costs, whatever the machine load.
        app_ms = row["p50_ms"] - baseline["p50_ms"]
        timings = f"{row['rps']:9.0f} {row['p50_ms']:8.2f} {row['p99_ms']:8.2f} {app_ms:7.2f}"
        print(f"{row['case']:<40} {timings}   {ratio}")
    print(
        f"\n{len(results)} cases, sequential keep-alive, {args.seconds_per_case:.0f} s each; "
        f"database {database}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
