"""Bench the production shape under concurrent load: gunicorn workers vs one process.

    python bench/bench_multiprocess.py [--seconds-per-case 3] [--clients 32] [--workers 4]

Starts a real PostgreSQL and a real Redis (``--store memcached``: memcached) on
loopback (tests/servers.py), then
serves the bare-metal service in three shapes, each on a fresh database, with
the same store:

* ``single process``: ``baremetal-service`` (the console command: waitress,
  8 threads, one process, conductor on) -- the in-process single worker;
* ``gunicorn 1x4``: gunicorn with 1 worker process x 4 threads (our
  gunicorn_conf.py);
* ``gunicorn NxT``: gunicorn with ``--workers`` processes x ``--threads`` threads.

All three run at once (idle ones cost little) and are driven in turn: each case
runs ``--rounds`` interleaved rounds over the shapes, so background load on a
shared machine falls on every shape alike.  Each shape gets ``--clients``
concurrent keep-alive clients (spread over ``--client-processes`` processes, so
the load generator is not one GIL) for ``--seconds-per-case`` seconds per case
in total:

* GET one node, GET /v1/nodes with 100 nodes, POST /v1/nodes (create),
  replayed POST (same X-Client-Token; answered from Redis).

Every answer's status is checked.  It prints req/s, p50 and p99 per shape and
case, and the ratio of each shape to the single process measured in the same
run.  On a small machine the ratio is bounded by its cores
(``os.cpu_count()`` is printed): the load generator shares them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.servers import (  # noqa: E402
    MemcachedServer,
    PostgresServer,
    RedisServer,
    Server,
    free_port,
    make_workdir,
)

REPO = Path(__file__).resolve().parent.parent
GUNICORN_CONF = "python:baremetal_service.servers.gunicorn_conf"
VERSION = {"X-OpenStack-Ironic-API-Version": "latest", "Content-Type": "application/json"}
CASES = ("get node", "list 100 nodes", "replayed POST", "create node")
EXPECTED = {"get node": 200, "list 100 nodes": 200, "replayed POST": 201, "create node": 201}


# -- load generator: client processes x threads, one keep-alive connection per thread --------


def _call(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None,
          headers: dict[str, str] | None = None) -> tuple[int, bytes]:  # fmt: skip
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers={**VERSION, **(headers or {})})
    resp = conn.getresponse()
    return resp.status, resp.read()


def _client_thread(
    port: int, case: str, ctx: dict[str, Any], start_at: float, stop_at: float, tag: str,
    out: list[float], errors: list[str],
) -> None:  # fmt: skip
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    token = f"bench-{tag}"
    replay_body = {"driver": "fake-hardware", "name": f"r-{tag}"}
    if case == "replayed POST":
        status, payload = _call(conn, "POST", "/v1/nodes", replay_body, {"X-Client-Token": token})
        if status != 201:
            errors.append(f"{status} {payload[:200]!r}")
            return
    target = ctx["target"]
    n = 0

    def once() -> int:
        nonlocal n
        n += 1
        if case == "get node":
            return _call(conn, "GET", f"/v1/nodes/{target}")[0]
        if case == "list 100 nodes":
            return _call(conn, "GET", "/v1/nodes")[0]
        if case == "replayed POST":
            return _call(conn, "POST", "/v1/nodes", replay_body, {"X-Client-Token": token})[0]
        return _call(conn, "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"c-{tag}-{n}"})[0]

    wanted = EXPECTED[case]
    try:
        for _ in range(5):  # warm-up: connections, worker pools and per-process caches
            once()
    except OSError as exc:
        errors.append(repr(exc))
        return
    while time.time() < start_at:
        time.sleep(0.001)
    try:
        while True:
            t0 = time.perf_counter()
            if time.time() >= stop_at:
                break
            status = once()
            out.append(time.perf_counter() - t0)
            if status != wanted:
                errors.append(str(status))
                if len(errors) > 20:
                    break
    except OSError as exc:
        errors.append(repr(exc))
    finally:
        conn.close()


Job = tuple[int, str, dict[str, Any], float, float, int, str]


def _client_process(args: Job) -> tuple[list[float], list[str]]:
    port, case, ctx, start_at, stop_at, threads, prefix = args
    out: list[float] = []
    errors: list[str] = []
    workers = [
        threading.Thread(
            target=_client_thread,
            args=(port, case, ctx, start_at, stop_at, f"{prefix}-{i}", out, errors),
        )
        for i in range(threads)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(stop_at - time.time() + 60)
    return out, errors


def drive(port: int, case: str, ctx: dict[str, Any], *, clients: int, processes: int,
          seconds: float, pool: Any) -> list[float]:  # fmt: skip
    """Latencies (seconds) of every request *clients* clients completed in *seconds*."""
    per = [clients // processes + (1 if i < clients % processes else 0) for i in range(processes)]
    start_at = time.time() + 1.0  # every client connects and warms up, then all start together
    stop_at = start_at + seconds
    run = uuid.uuid4().hex[:8]
    jobs = [(port, case, ctx, start_at, stop_at, n, f"{run}-{i}") for i, n in enumerate(per) if n]
    samples: list[float] = []
    errors: list[str] = []
    for out, errs in pool.map(_client_process, jobs):
        samples.extend(out)
        errors.extend(errs)
    if errors:
        raise SystemExit(f"{case}: unexpected answers: {errors[:5]}")
    return samples


def summarize(shape: str, case: str, samples: list[float], seconds: float) -> dict[str, Any]:
    samples = sorted(samples)
    return {
        "shape": shape,
        "case": case,
        "requests": len(samples),
        "rps": len(samples) / seconds,
        "p50_ms": statistics.median(samples) * 1000,
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000,
    }


# -- the shapes -----------------------------------------------------------------------------------


def _wait_ready(port: int, proc: subprocess.Popen[bytes], path: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the service exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the service did not start")


def _start(shape: str, port: int, database: str, store: str, workers: int, threads: int,
           log: Path) -> subprocess.Popen[bytes]:  # fmt: skip
    env = {**os.environ, "BAREMETAL_DATABASE": database, "BAREMETAL_STORE": store,
           "BAREMETAL_ETAG_KEY": secrets.token_hex(32), "BAREMETAL_ACCESS_LOG": "",
           "BAREMETAL_LOG_LEVEL": "warning"}  # fmt: skip
    if shape == "single process":
        argv = [sys.executable, "-m", "baremetal_service.cli", "--port", str(port), "--database", database,
                "--store", store, "--threads", "8"]  # fmt: skip
        path = "/"
    else:
        argv = [sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF), "-w", str(workers),
                "--threads", str(threads), "-b", f"127.0.0.1:{port}",
                "baremetal_service.deploy:application"]  # fmt: skip
        path = "/healthcheck"
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    _wait_ready(port, proc, path)
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _new_database(pg: Server) -> str:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:12]}"
    dsn = f"host=127.0.0.1 port={pg.port} user=postgres dbname=postgres"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return f"postgresql+psycopg://postgres@127.0.0.1:{pg.port}/{name}"


def prepare_shape(shape: str, pg: Server, store: str, workers: int, threads: int,
                  workdir: Path) -> tuple[subprocess.Popen[bytes], int, dict[str, Any]]:  # fmt: skip
    """Start *shape* on a fresh database with 100 nodes: (process, port, context)."""
    port = free_port()
    proc = _start(shape, port, _new_database(pg), store, workers, threads, workdir / f"{port}.log")
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        run = uuid.uuid4().hex[:8]
        uuids = []
        for i in range(100):
            body = {"driver": "fake-hardware", "name": f"b-{run}-{i}"}
            status, payload = _call(conn, "POST", "/v1/nodes", body)
            if status != 201:
                raise SystemExit(f"setup create: {status} {payload[:200]!r}")
            uuids.append(json.loads(payload)["uuid"])
        conn.close()
    except BaseException:
        _stop(proc)
        raise
    return proc, port, {"target": uuids[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds-per-case", type=float, default=3.0, help="per shape, over all rounds")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per case (default 3)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--client-processes", type=int, default=4)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--store", choices=("redis", "memcached"), default="redis", help="the replay store")
    parser.add_argument("--skip-1x4", action="store_true", help="skip the gunicorn 1-worker shape")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not 0 < args.seconds_per_case <= 60 or not 0 < args.clients <= 256 or args.client_processes < 1:
        parser.error("--seconds-per-case in (0, 60], --clients in (0, 256], --client-processes >= 1")
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds in [1, 20]")

    pg = PostgresServer(make_workdir("bench-mp-pg"))
    store_class = RedisServer if args.store == "redis" else MemcachedServer
    store: Server = store_class(make_workdir("bench-mp-store"))
    workdir = make_workdir("bench-mp")
    results: list[dict[str, Any]] = []
    shapes: list[tuple[str, int, int]] = [("single process", 1, 8)]
    if not args.skip_1x4:
        shapes.append((f"gunicorn 1x{args.threads}", 1, args.threads))
    shapes.append((f"gunicorn {args.workers}x{args.threads}", args.workers, args.threads))
    ctx = multiprocessing.get_context("fork")
    running: dict[str, tuple[subprocess.Popen[bytes], int, dict[str, Any]]] = {}
    try:
        pg.start()
        store.start()
        for shape, workers, threads in shapes:
            running[shape] = prepare_shape(shape, pg, store.url, workers, threads, workdir)
        # Interleaved rounds: each case runs on every shape in turn, `rounds` times, so that
        # background load on a shared machine falls on all shapes alike.
        samples: dict[tuple[str, str], list[float]] = {}
        round_seconds = args.seconds_per_case / args.rounds
        with ctx.Pool(args.client_processes) as pool:
            for case in CASES:
                for _ in range(args.rounds):
                    for shape, _w, _t in shapes:
                        _proc, port, context = running[shape]
                        samples.setdefault((shape, case), []).extend(
                            drive(port, case, context, clients=args.clients, processes=args.client_processes,
                                  seconds=round_seconds, pool=pool)
                        )  # fmt: skip
        results = [
            summarize(shape, case, samples[(shape, case)], args.seconds_per_case)
            for shape, _w, _t in shapes
            for case in CASES
        ]
    finally:
        for proc, _port, _context in running.values():
            _stop(proc)
        store.stop()
        pg.stop()
        for server in (pg, store):
            shutil.rmtree(server.workdir, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)

    if args.json:
        print(json.dumps({"cpu_count": os.cpu_count(), "results": results}, indent=2))
        return 0
    base = {r["case"]: r["rps"] for r in results if r["shape"] == "single process"}
    print(f"\n{args.clients} concurrent keep-alive clients ({args.client_processes} processes), "
          f"{args.seconds_per_case:.0f} s per case in {args.rounds} interleaved rounds, "
          f"PostgreSQL + {args.store} on loopback, "
          f"{os.cpu_count()} CPUs (shared with the load generator)")  # fmt: skip
    print(f"{'shape':<16} {'case':<16} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs single':>10}")
    for row in results:
        ratio = row["rps"] / base[row["case"]] if base.get(row["case"]) else float("nan")
        print(f"{row['shape']:<16} {row['case']:<16} {row['rps']:8.0f} {row['p50_ms']:8.2f} "
              f"{row['p99_ms']:8.2f} {ratio:9.2f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
