"""The example service against real Ironic 39.0: every figure of docs/example/performance.md, with plots.

    # first an Ironic 39.0 on 127.0.0.1:6399 (tests/test_ironic_hook.py installs and starts one)
    python bench/bench_vs_ironic.py --ironic http://127.0.0.1:6399 \\
        --plots docs/example/perf --json docs/example/perf/results.json

``--quick`` is a smoke run (well under a minute; the figures are then rough).  Without
a reachable ``--ironic`` only our side is measured (no ratios).  Everything talks to
127.0.0.1; every loop is bounded in count and time.

Our side is ``python -m baremetal_service.cli --host 127.0.0.1 --port P --database
sqlite:///<tmp>/fresh.db`` (its default server, threads and store), started by the bench
-- or ``--service URL`` (already running; ``--service-pid`` for its memory,
``--service-database`` for a fast cost-growth set-up), or ``--service-cmd`` (another
server: a shell-style command with ``{python}``, ``{host}``, ``{port}``, ``{database}``).
Ironic is an all-in-one ``ironic`` process (API + conductor, SQLite, noauth,
fake-hardware).  Both get ``X-OpenStack-Ironic-API-Version: latest`` (the
negotiated versions are printed: Ironic 39.0 stops at 1.115).

1. Sequential (one keep-alive connection; 100 nodes created on each side by the bench
   first, deleted at the end): GET /v1/nodes/{uuid}, GET /v1/nodes (100), GET
   /v1/nodes/detail (100), POST /v1/nodes, DELETE /v1/nodes/{uuid} (the node to delete
   is created untimed just before), PATCH /v1/nodes/{uuid} with If-Match (the ETag of the
   previous answer; a side that serves no ETag -- Ironic 39.0 -- gets the same PATCH
   without If-Match, which it would ignore anyway) and a replayed POST (same
   X-Client-Token, answered from the replay store; Ironic has no replay -- the same
   token creates another node, the same name is a 409 -- so its column is a plain POST
   that creates a node, labelled so).  ``--rounds`` rounds; in each, every case runs on
   both sides back to back (the order alternates), so background load falls on both;
   the table shows medians over the rounds.  req/s is requests over the time spent
   inside them (1 / mean latency; untimed set-up between requests does not count);
   p50/p99 are nearest-rank.  PASS when ours/Ironic >= 20 (the goal).
2. Concurrency: 8 keep-alive clients (``--client-procs`` processes x threads, so the
   load generator is not one GIL) on GET node, list (100) and POST, against our
   default server (1 process), our service with 2 worker processes (the CLI's
   ``--workers`` when it has one, else gunicorn with ``baremetal_service.servers.gunicorn_conf``,
   2 workers x 4 threads; a Redis replay store, since ``memory://`` refuses two
   processes) and Ironic.  Ironic's all-in-one process embeds its API server (cheroot,
   10 threads) in the conductor process: ``[api]api_workers`` is only read by
   ``ironic-api``, which needs a separate conductor and an RPC transport, so Ironic
   runs one process in both comparisons (printed).
3. Cost growth (ours): GET /v1/nodes and /v1/nodes/detail with 100, 1,000 and 10,000
   nodes, walked page by page as Ironic paginates (``limit`` = the service's maximum
   page, 1000; follow ``next``): time per node for a full walk, and the server
   process's VmRSS before, after each page and after.  A list of exactly k x 1000
   nodes ends with an empty page, as on Ironic (a full page always carries ``next``).
   Set-up (not measured) copies a node created through the API into new rows (new
   uuid and name) with one ``INSERT ... SELECT`` per row in the service's database;
   for a ``--service`` without ``--service-database`` it POSTs the nodes instead.

Output: a table per section on stdout, ``--json FILE`` with every figure and
``--plots DIR`` with latency.png, ratio.png, concurrency.png and growth.png.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import multiprocessing
import os
import platform
import secrets
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._http import (  # noqa: E402
    HOST,
    VERSION_HEADER,
    Client,
    expect,
    free_port,
    port_of,
    rss_kib,
    serving_pid,
    summarize,
    wait_ready,
)

GOAL = 20.0
MAX_PAGE = 1000  # baremetal_service.handlers.common.MAX_LIMIT, Ironic's [api]max_limit default
BASE_NODES = 100
CONCURRENT_CLIENTS = 8
IRONIC_CONF = Path("/tmp/peer/ironic.conf")  # noqa: S108 - read when present: its [api] api_workers
IRONIC_PIDFILE = Path("/tmp/peer/ironic.pid")  # noqa: S108

SEQ_CASES = {
    "get": "GET /v1/nodes/{uuid}",
    "list": "GET /v1/nodes (100)",
    "detail": "GET /v1/nodes/detail (100)",
    "post": "POST /v1/nodes",
    "delete": "DELETE /v1/nodes/{uuid}",
    "patch": "PATCH /v1/nodes/{uuid} If-Match",
    "replay": "replayed POST",
}
DISPLAY = {"ironic": "Ironic 39.0", "ours": "ours (1 process)"}
CONC_CASES = {"get": "GET /v1/nodes/{uuid}", "list": "GET /v1/nodes (100)", "post": "POST /v1/nodes"}


_T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f} s] {message}", file=sys.stderr, flush=True)


# -- one server under test ---------------------------------------------------------------------


class Side:
    """A server under test (ours or Ironic) and what the bench made on it."""

    def __init__(self, name: str, port: int, *, pid: int | None = None, label: str = "",
                 version: str = "latest") -> None:  # fmt: skip
        self.name = name
        self.port = port
        self.pid = pid
        self.label = label
        self.version = version
        self.client = Client(port, version=version)
        self.run = uuid.uuid4().hex[:8]
        self.serial = itertools.count()
        self.created: set[str] = set()  # nodes the bench made here and has not deleted yet
        self.base: list[str] = []
        self.etags = False  # GET node answers with an ETag
        self.replays = False  # a POST repeated with its X-Client-Token is answered from a store
        self.negotiated = ""
        self.preexisting = 0

    def new_name(self, tag: str) -> str:
        return f"{tag}-{self.run}-{next(self.serial)}"

    def create(self, tag: str, headers: dict[str, str] | None = None,
               body: dict[str, Any] | None = None) -> tuple[str, dict[str, str]]:  # fmt: skip
        body = body or {"driver": "fake-hardware", "name": self.new_name(tag)}
        status, hdrs, payload = self.client.call("POST", "/v1/nodes", body, headers)
        expect(status, 201, payload)
        node = str(json.loads(payload)["uuid"])
        self.created.add(node)
        return node, hdrs

    def delete(self, node: str) -> None:
        status, _h, payload = self.client.call("DELETE", f"/v1/nodes/{node}")
        expect(status, 204, payload)
        self.created.discard(node)

    def setup(self, count: int) -> None:
        """*count* nodes for the lists (``base[0]`` is the one read and patched); probe etags and replay."""
        status, hdrs, payload = self.client.call("GET", f"/v1/nodes?limit={MAX_PAGE}")
        expect(status, 200, payload)
        self.preexisting = len(json.loads(payload)["nodes"])
        self.negotiated = hdrs.get(VERSION_HEADER.lower(), "?")
        if self.preexisting:
            log(f"warning: {self.name} already holds {self.preexisting} nodes: its lists are longer than 100")
        self.base = make_nodes(self, count, "b")
        _s, hdrs, _p = self.client.call("GET", f"/v1/nodes/{self.base[0]}")
        self.etags = bool(hdrs.get("etag"))
        token = f"probe-{self.run}"
        body = {"driver": "fake-hardware", "name": self.new_name("t")}
        first, _h = self.create("t", {"X-Client-Token": token}, body)
        status, hdrs, payload = self.client.call("POST", "/v1/nodes", body, {"X-Client-Token": token})
        if status == 201:
            again = str(json.loads(payload)["uuid"])
            self.replays = again == first and hdrs.get("idempotent-replayed") == "true"
            self.created.add(again)
        for node in list(self.created - set(self.base)):
            self.delete(node)

    def cleanup(self) -> None:
        """Delete every node the bench made here (bounded: one attempt each)."""
        nodes = list(self.created)
        if not nodes:
            return

        def delete_some(chunk: list[str]) -> None:
            client = Client(self.port, version=self.version)
            try:
                for node in chunk:
                    with contextlib.suppress(OSError, SystemExit):
                        status, _h, _p = client.call("DELETE", f"/v1/nodes/{node}")
                        if status in (204, 404):
                            self.created.discard(node)
            finally:
                client.close()

        workers = min(4, len(nodes))
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(delete_some, [nodes[i::workers] for i in range(workers)]))
        if self.created:
            log(f"warning: {len(self.created)} node(s) left on {self.name}")


def make_nodes(side: Side, count: int, tag: str, threads: int = 4) -> list[str]:
    """*count* nodes created on *side* through the API by *threads* clients (set-up, not measured)."""

    def make(n: int) -> list[str]:
        client = Client(side.port, version=side.version)
        made: list[str] = []
        try:
            for _ in range(n):
                body = {"driver": "fake-hardware", "name": side.new_name(tag)}
                status, _h, payload = client.call("POST", "/v1/nodes", body)
                expect(status, 201, payload)
                made.append(str(json.loads(payload)["uuid"]))
        finally:
            client.close()
            side.created.update(made)
        return made

    shares = [count // threads + (1 if i < count % threads else 0) for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        return [node for made in pool.map(make, shares) for node in made]


# -- 1. sequential cases ---------------------------------------------------------------------


def measure(
    fn: Callable[[int], None],
    seconds: float,
    *,
    before: Callable[[int], None] | None = None,
    warmup: int = 5,
    min_requests: int = 3,
    max_requests: int = 200_000,
) -> dict[str, Any]:
    """Call ``fn(i)`` until *seconds* were spent inside it and at least *min_requests* times
    (``before(i)`` first, untimed); a wall-clock limit bounds it whatever the server does."""
    for i in range(warmup):
        if before is not None:
            before(-1 - i)
        fn(-1 - i)
    samples: list[float] = []
    busy = 0.0
    wall_limit = time.monotonic() + 4 * seconds + 10
    for i in range(max_requests):
        if before is not None:
            before(i)
        t0 = time.perf_counter()
        fn(i)
        took = time.perf_counter() - t0
        samples.append(took)
        busy += took
        if (busy >= seconds and len(samples) >= min_requests) or time.monotonic() > wall_limit:
            break
    return summarize(samples)


def run_case(side: Side, key: str, seconds: float, warmup: int) -> dict[str, Any]:
    """One sequential case on *side*: its figures; the nodes it made are deleted after (untimed)."""
    client = side.client
    target = side.base[0]
    made_before = set(side.created)
    connects = client.connects
    note: dict[str, Any] = {}
    before: Callable[[int], None] | None = None

    if key == "get":

        def fn(i: int) -> None:
            status, _h, payload = client.call("GET", f"/v1/nodes/{target}")
            expect(status, 200, payload)

    elif key in ("list", "detail"):
        path = "/v1/nodes" if key == "list" else "/v1/nodes/detail"
        status, _h, payload = client.call("GET", path)
        expect(status, 200, payload)
        note["nodes_listed"] = len(json.loads(payload)["nodes"])

        def fn(i: int) -> None:
            status, _h, payload = client.call("GET", path)
            expect(status, 200, payload)

    elif key == "post":

        def fn(i: int) -> None:
            side.create("p")

    elif key == "delete":
        pending: list[str] = []

        def make(i: int) -> None:
            pending.append(side.create("d")[0])

        before = make

        def fn(i: int) -> None:
            side.delete(pending.pop())

    elif key == "patch":
        _s, hdrs, _p = client.call("GET", f"/v1/nodes/{target}")
        etag = {"value": hdrs.get("etag", "")}
        sent = {"if_match": 0}

        def fn(i: int) -> None:
            headers = {"If-Match": etag["value"]} if etag["value"] else None
            sent["if_match"] += bool(headers)
            body = [{"op": "add", "path": "/extra/n", "value": i}]
            status, hdrs, payload = client.call("PATCH", f"/v1/nodes/{target}", body, headers)
            expect(status, 200, payload)
            etag["value"] = hdrs.get("etag", "")

        note["if_match"] = side.etags

    elif key == "replay":
        note["replayed"] = side.replays
        if side.replays:
            token = f"bench-{side.run}-{next(side.serial)}"
            body = {"driver": "fake-hardware", "name": side.new_name("r")}
            side.create("r", {"X-Client-Token": token}, body)

            def fn(i: int) -> None:
                status, hdrs, payload = client.call("POST", "/v1/nodes", body, {"X-Client-Token": token})
                expect(status, 201, payload)
                if hdrs.get("idempotent-replayed") != "true":
                    raise SystemExit(f"{side.name}: a repeated POST was not answered as a replay")

        else:  # no replay on this server: the retried POST creates another node

            def fn(i: int) -> None:
                side.create("r")

    else:
        raise ValueError(key)

    result = measure(fn, seconds, before=before, warmup=warmup)
    result["connections"] = client.connects - connects
    if key == "patch":
        note["if_match_sent"] = sent["if_match"]
    result.update(note)
    for node in list(side.created - made_before):  # untimed: keep the lists at 100
        side.delete(node)
    return result


def _medians(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """req/s, p50 and p99 as the medians over *rounds* (kept too, under ``rounds``)."""
    return {
        "rps": statistics.median(r["rps"] for r in rounds),
        "p50_ms": statistics.median(r["p50_ms"] for r in rounds),
        "p99_ms": statistics.median(r["p99_ms"] for r in rounds),
        "rounds": rounds,
    }


def sequential(sides: list[Side], rounds: int, seconds: float, warmup: int) -> dict[str, Any]:
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {k: {s.name: [] for s in sides} for k in SEQ_CASES}
    for round_no in range(rounds):
        for key in SEQ_CASES:
            for side in sides if round_no % 2 == 0 else sides[::-1]:
                runs[key][side.name].append(run_case(side, key, seconds, warmup))
        log(f"sequential: round {round_no + 1}/{rounds} done")
    out: dict[str, Any] = {}
    for key, label in SEQ_CASES.items():
        row: dict[str, Any] = {"case": label}
        for side in sides:
            rs = runs[key][side.name]
            row[side.name] = _medians(rs)
        if "ironic" in row and "ours" in row:
            ratio = row["ours"]["rps"] / row["ironic"]["rps"]
            row["ratio"] = ratio
            row["pass"] = ratio >= GOAL
        row["notes"] = case_notes(key, sides, runs[key])
        out[key] = row
    return out


def case_notes(key: str, sides: list[Side], runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    notes = []
    for side in sides:
        last = runs[side.name][-1]
        if key == "patch" and not side.etags:
            notes.append(f"{side.name}: serves no ETag; PATCH sent without If-Match")
        if key == "replay" and not side.replays:
            notes.append(f"{side.name}: no replay (X-Client-Token ignored); measured a plain POST")
        if key in ("list", "detail") and last.get("nodes_listed") != BASE_NODES:
            notes.append(f"{side.name}: the list held {last.get('nodes_listed')} nodes")
        per_request = last["connections"] / max(1, last["requests"])
        if per_request > 0.5:
            notes.append(f"{side.name}: {last['connections']} connections for {last['requests']} "
                         "requests (the server closes keep-alive connections)")  # fmt: skip
    return notes


# -- 2. concurrency --------------------------------------------------------------------------

_BARRIER: Any = None


def _init_client_process(barrier: Any) -> None:
    global _BARRIER
    _BARRIER = barrier


def _client_thread(job: dict[str, Any], tag: str, out: dict[str, Any]) -> None:
    client = Client(job["port"], version=job["version"])
    serial = itertools.count()
    target, case = job["target"], job["case"]

    def once() -> tuple[int, int, bytes]:
        if case == "get":
            status, _h, payload = client.call("GET", f"/v1/nodes/{target}")
            return status, 200, payload
        if case == "list":
            status, _h, payload = client.call("GET", "/v1/nodes")
            return status, 200, payload
        body = {"driver": "fake-hardware", "name": f"cc-{tag}-{next(serial)}"}
        status, _h, payload = client.call("POST", "/v1/nodes", body)
        if status == 201:
            out["created"].append(json.loads(payload)["uuid"])
        return status, 201, payload

    ready = True
    try:
        for _ in range(3):  # warm-up: connection, server threads, caches
            once()
    except (OSError, ValueError) as exc:
        out["errors"].append(f"warm-up: {exc!r}")
        ready = False
    try:
        _BARRIER.wait(timeout=120)
    except threading.BrokenBarrierError:
        ready = False
    first = last = time.monotonic()
    stop = first + job["seconds"]
    samples: list[float] = []
    try:
        while ready and len(samples) < 1_000_000:
            t0 = time.monotonic()
            if t0 >= stop:
                break
            status, wanted, payload = once()
            last = time.monotonic()
            samples.append(last - t0)
            if status != wanted:
                out["errors"].append(f"{status}: {payload[:160]!r}")
                if len(out["errors"]) > 50:
                    break
    except (OSError, ValueError) as exc:
        out["errors"].append(repr(exc))
    finally:
        client.close()
    out["samples"].extend(samples)
    out["spans"].append((first, last))


def _client_process(job: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"samples": [], "errors": [], "created": [], "spans": []}
    threads = [threading.Thread(target=_client_thread, args=(job, f"{job['tag']}-{i}", out))
               for i in range(job["threads"])]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(job["seconds"] + 240)
    return out


def drive(side: Side, case: str, seconds: float, pool: Any, barrier: Any, procs: int) -> dict[str, Any]:
    """*CONCURRENT_CLIENTS* clients over *procs* processes on *side* for *seconds*: the figures."""
    per = [CONCURRENT_CLIENTS // procs + (1 if i < CONCURRENT_CLIENTS % procs else 0) for i in range(procs)]
    run = uuid.uuid4().hex[:6]
    jobs = [{"port": side.port, "version": side.version, "case": case, "target": side.base[0],
             "seconds": seconds, "threads": n, "tag": f"{run}-{i}"} for i, n in enumerate(per)]  # fmt: skip
    pending = pool.map_async(_client_process, jobs)
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=120)  # every client connected and warmed up: go
    parts = pending.get(timeout=seconds + 300)
    barrier.reset()
    samples = [x for p in parts for x in p["samples"]]
    errors = [e for p in parts for e in p["errors"]]
    side.created.update(u for p in parts for u in p["created"])
    spans = [s for p in parts for s in p["spans"]]
    wall = max(s[1] for s in spans) - min(s[0] for s in spans) if spans else 0.0
    result = summarize(samples, wall or None)
    result["errors"] = len(errors)
    result["error_samples"] = errors[:3]
    if errors:
        log(f"concurrency {side.name} {case}: {len(errors)} error(s), e.g. {errors[0]}")
    if not samples:
        raise SystemExit(f"concurrency {side.name} {case}: no request completed: {errors[:3]}")
    return result


def concurrency(sides: list[Side], rounds: int, seconds: float, procs: int) -> dict[str, Any]:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(CONCURRENT_CLIENTS + 1)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {k: {s.name: [] for s in sides} for k in CONC_CASES}
    with ctx.Pool(procs, initializer=_init_client_process, initargs=(barrier,)) as pool:
        for round_no in range(rounds):
            for key in CONC_CASES:
                shift = round_no % len(sides)
                for side in sides[shift:] + sides[:shift]:
                    made_before = set(side.created)
                    runs[key][side.name].append(drive(side, key, seconds, pool, barrier, procs))
                    for node in list(side.created - made_before):  # untimed: lists stay at 100
                        side.delete(node)
            log(f"concurrency: round {round_no + 1}/{rounds} done")
    out: dict[str, Any] = {}
    for key, label in CONC_CASES.items():
        row: dict[str, Any] = {"case": label}
        for side in sides:
            rs = runs[key][side.name]
            row[side.name] = {**_medians(rs), "errors": sum(r["errors"] for r in rs)}
        out[key] = row
    return out


# -- 3. cost growth --------------------------------------------------------------------------


def clone_nodes(database: str, template: str, count: int, tag: str) -> None:
    """*count* new rows in ``nodes``: copies of node *template* with a new uuid and name."""
    import sqlalchemy as sa

    engine = sa.create_engine(database, connect_args={"timeout": 60} if database.startswith("sqlite") else {})
    try:
        skip = {"id", "uuid", "name", "instance_uuid"}
        columns = [c["name"] for c in sa.inspect(engine).get_columns("nodes") if c["name"] not in skip]
        cols = ", ".join(f'"{c}"' for c in columns)
        insert = sa.text(
            f'INSERT INTO nodes ({cols}, "uuid", "name") '  # noqa: S608 - column names from the schema
            f"SELECT {cols}, :uuid, :name FROM nodes WHERE uuid = :template"
        )
        for start in range(0, count, 1000):
            rows = [{"uuid": str(uuid.uuid4()), "name": f"g-{tag}-{i}", "template": template}
                    for i in range(start, min(count, start + 1000))]  # fmt: skip
            with engine.begin() as conn:
                conn.execute(insert, rows)
    finally:
        engine.dispose()


def walk(side: Side, path: str, pid: int | None, max_pages: int) -> dict[str, Any]:
    """Every page of *path* (``limit`` = the maximum page, following ``next``): time and RSS per page."""
    url: str | None = f"{path}?limit={MAX_PAGE}"
    seconds = 0.0
    nodes = 0
    rss = []
    for _ in range(max_pages):
        if url is None:
            break
        t0 = time.perf_counter()
        status, _h, payload = side.client.call("GET", url)
        seconds += time.perf_counter() - t0
        expect(status, 200, payload)
        doc = json.loads(payload)
        nodes += len(doc["nodes"])
        rss.append(rss_kib(pid))
        nxt = doc.get("next")
        url = "/" + nxt.split("/", 3)[3] if nxt else None
    return {"seconds": seconds, "nodes": nodes, "pages": len(rss), "rss_kib": rss, "complete": url is None}


def growth(side: Side, database: str | None, sizes: list[int], seconds: float,
           max_walks: int) -> list[dict[str, Any]]:  # fmt: skip
    rows = []
    for size in sizes:
        current = walk(side, "/v1/nodes", None, size // MAX_PAGE + 50)["nodes"]
        missing = size - current
        t0 = time.monotonic()
        if missing > 0:
            if database:
                clone_nodes(database, side.base[0], missing, f"{side.run}-{size}")
            else:
                make_nodes(side, missing, "g")
        setup = time.monotonic() - t0
        log(f"growth: {size} nodes ready ({setup:.1f} s of set-up)")
        for path in ("/v1/nodes", "/v1/nodes/detail"):
            rss_before = rss_kib(side.pid)
            walks = []
            deadline = time.monotonic() + seconds
            for k in range(max(2, max_walks)):  # at least 2: the first (cold) and a warm one
                walks.append(walk(side, path, side.pid, size // MAX_PAGE + 50))
                if k >= 1 and time.monotonic() > deadline:
                    break
            rss_after = rss_kib(side.pid)
            per_node = [w["seconds"] / max(1, w["nodes"]) * 1e6 for w in walks]
            rows.append({
                "path": path,
                "size": size,
                "nodes_walked": walks[-1]["nodes"],
                "pages": walks[-1]["pages"],
                "complete": all(w["complete"] for w in walks),
                "walks": len(walks),
                "walk_s": statistics.median(w["seconds"] for w in walks),
                "us_per_node": statistics.median(per_node),
                "rss_before_kib": rss_before,
                "rss_pages_kib": walks[0]["rss_kib"],
                "rss_last_walk_kib": walks[-1]["rss_kib"],
                "rss_after_kib": rss_after,
            })  # fmt: skip
    return rows


# -- servers -----------------------------------------------------------------------------------


class Process:
    """A server we started (its own session), stopped by its process group at the end."""

    def __init__(self, argv: list[str], env: dict[str, str], logfile: Path, cwd: Path) -> None:
        self.argv = argv
        self.logfile = logfile
        with open(logfile, "ab") as out:
            self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)  # fmt: skip

    def ready(self, port: int, path: str = "/") -> None:
        try:
            wait_ready(port, self.proc, path, timeout=90)
        except SystemExit:
            log(self.logfile.read_text(errors="replace")[-3000:])
            raise

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def cli_help() -> str:
    out = subprocess.run([sys.executable, "-m", "baremetal_service.cli", "--help"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    return out.stdout


class Pending:
    """A server started but perhaps not answering yet: :meth:`side` waits for it."""

    def __init__(self, name: str, proc: Process, port: int, label: str, version: str) -> None:
        self.name, self.proc, self.port, self.label, self.version = name, proc, port, label, version

    def side(self) -> Side:
        self.proc.ready(self.port)
        # the application's process: granian's worker under the default command
        pid = serving_pid(self.proc.proc.pid)
        return Side(self.name, self.port, pid=pid, label=self.label, version=self.version)


def start_ours(args: argparse.Namespace, workdir: Path, processes: list[Process]) -> tuple[Pending, str]:
    port = free_port()
    database = f"sqlite:///{workdir / 'fresh.db'}"
    if args.service_cmd:
        argv = shlex.split(
            args.service_cmd.format(python=sys.executable, host=HOST, port=port, database=database)
        )
    else:
        argv = [sys.executable, "-m", "baremetal_service.cli", "--host", HOST, "--port", str(port),
                "--database", database]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = Process(argv, env, workdir / "service.log", workdir)
    processes.append(proc)
    label = " ".join(["python", *(shlex.quote(a) for a in argv[1:])]).replace(str(workdir), "<tmp>")
    return Pending("ours", proc, port, label, args.microversion), database


def start_two_workers(args: argparse.Namespace, workdir: Path, processes: list[Process],
                      stoppers: list[Callable[[], None]]) -> Pending:  # fmt: skip
    """Our service with 2 worker processes (the CLI's --workers if any, else gunicorn) and Redis."""
    from tests.servers import RedisServer

    redis_dir = workdir / "redis"
    redis_dir.mkdir()
    redis = RedisServer(redis_dir)
    redis.start()
    stoppers.append(redis.stop)
    port = free_port()
    database = f"sqlite:///{workdir / 'two-workers.db'}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BAREMETAL_DATABASE": database,
           "BAREMETAL_STORE": redis.url, "BAREMETAL_ETAG_KEY": secrets.token_hex(32),
           "BAREMETAL_ACCESS_LOG": "", "BAREMETAL_LOG_LEVEL": "warning"}  # fmt: skip
    if "--workers" in cli_help():
        argv = [sys.executable, "-m", "baremetal_service.cli", "--host", HOST, "--port", str(port),
                "--database", database, "--store", redis.url,
                "--server", "granian", "--workers", "2"]  # fmt: skip
        label = "baremetal_service.cli --server granian --workers 2 (Redis store)"
    else:
        argv = [sys.executable, "-m", "gunicorn", "-c", "python:baremetal_service.servers.gunicorn_conf",
                "-w", "2", "--threads", "4", "-b", f"{HOST}:{port}",
                "baremetal_service.deploy:application"]  # fmt: skip
        label = "gunicorn -c python:baremetal_service.servers.gunicorn_conf -w 2 --threads 4 (gevent, Redis)"
    proc = Process(argv, env, workdir / "two-workers.log", workdir)
    processes.append(proc)
    return Pending("ours 2 workers", proc, port, label, args.microversion)


def ironic_settings() -> str:
    """What the Ironic peer runs with (from its config at IRONIC_CONF, when there is one)."""
    workers = "unset"
    with contextlib.suppress(OSError):
        section = ""
        for line in IRONIC_CONF.read_text().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[api]" and line.replace(" ", "").startswith("api_workers="):
                workers = line.split("=", 1)[1].strip()
    return (
        "Ironic 39.0 all-in-one `ironic` (API embedded in the conductor process: 1 process, "
        f"cheroot 10 threads; [api]api_workers={workers} is only read by ironic-api), SQLite"
    )


def ironic_pid() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        pid = int(IRONIC_PIDFILE.read_text().strip())
        if "ironic" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
            return pid
    return None


def reachable(url: str) -> bool:
    try:
        wait_ready(port_of(url), None, "/", timeout=3)
    except SystemExit:
        return False
    return True


# -- output ----------------------------------------------------------------------------------


def print_sequential(seq: dict[str, Any], names: list[str]) -> None:
    both = "ironic" in names
    head = f"{'case':<32}{'ours req/s':>11}{'p50 ms':>8}{'p99 ms':>8}"
    if both:
        head += f"{'Ironic req/s':>14}{'p50 ms':>8}{'p99 ms':>8}{'ratio':>8}  goal 20x"
    print("\n== 1. sequential, one keep-alive connection (medians over the rounds)")
    print(head)
    for row in seq.values():
        ours = row["ours"]
        line = f"{row['case']:<32}{ours['rps']:>11.0f}{ours['p50_ms']:>8.2f}{ours['p99_ms']:>8.2f}"
        if both:
            ir = row["ironic"]
            verdict = "PASS" if row["pass"] else "FAIL"
            line += (
                f"{ir['rps']:>14.1f}{ir['p50_ms']:>8.1f}{ir['p99_ms']:>8.1f}{row['ratio']:>7.1f}x  {verdict}"
            )
        print(line)
    notes = [f"  {row['case']}: {n}" for row in seq.values() for n in row["notes"]]
    if notes:
        print("notes:\n" + "\n".join(notes))


def print_concurrency(conc: dict[str, Any], names: list[str]) -> None:
    print(f"\n== 2. concurrency: {CONCURRENT_CLIENTS} keep-alive clients (medians over the rounds)")
    print(f"{'server':<16}{'case':<24}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'vs Ironic':>11}")
    for row in conc.values():
        for name in names:
            fig = row[name]
            ratio = ""
            if "ironic" in row and name != "ironic":
                ratio = f"{fig['rps'] / row['ironic']['rps']:.1f}x"
            print(f"{name:<16}{row['case']:<24}{fig['rps']:>9.0f}{fig['p50_ms']:>9.2f}{fig['p99_ms']:>9.2f}"
                  f"{fig['errors']:>8}{ratio:>11}")  # fmt: skip


def print_growth(rows: list[dict[str, Any]]) -> None:
    print(f"\n== 3. cost growth (ours): full walk, pages of {MAX_PAGE} following `next`")
    print(f"{'path':<18}{'nodes':>7}{'pages':>6}{'walks':>6}{'walk s':>9}{'us/node':>9}"
          f"{'RSS MiB: before':>16}{'max':>7}{'after':>7}{'last walk +':>12}")  # fmt: skip

    def mib(kib: int | float | None) -> str:
        return "?" if kib is None else f"{kib / 1024:.1f}"

    for row in rows:
        pages = [k for k in row["rss_pages_kib"] + row["rss_last_walk_kib"] if k is not None]
        last = [k for k in row["rss_last_walk_kib"] if k is not None]
        print(f"{row['path']:<18}{row['nodes_walked']:>7}{row['pages']:>6}{row['walks']:>6}"
              f"{row['walk_s']:>9.3f}{row['us_per_node']:>9.1f}{mib(row['rss_before_kib']):>16}"
              f"{mib(max(pages) if pages else None):>7}{mib(row['rss_after_kib']):>7}"
              f"{mib(last[-1] - last[0] if last else None):>12}")  # fmt: skip
    for path in ("/v1/nodes", "/v1/nodes/detail"):
        per = [r["us_per_node"] for r in rows if r["path"] == path]
        if len(per) > 1:
            print(f"  {path}: time per node, largest / smallest list: {per[-1] / per[0]:.2f}x")
    print("  (RSS: the server process's VmRSS; 'last walk +': its growth over the last, warm walk's pages)")


def _plot_sequential(plt: Any, report: dict[str, Any], out_dir: Path, subtitle: str,
                     colors: dict[str, str]) -> list[str]:  # fmt: skip
    """latency.png (ours vs Ironic per request type) and ratio.png (with the goal line)."""
    seq = report["sequential"]
    written = []
    names = report["sides"]
    caveat = {"patch": "\n(Ironic: no If-Match)", "replay": "\n(Ironic: plain POST)"}
    labels = []
    for key, row in seq.items():
        ironic_caveat = key in caveat and any(n.startswith("ironic:") for n in row["notes"])
        labels.append(row["case"] + (caveat[key] if ironic_caveat else ""))
    x = list(range(len(labels)))

    # latency per request type
    fig, ax = plt.subplots(figsize=(11, 5.5))
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        p50 = [row[name]["p50_ms"] for row in seq.values()]
        p99 = [row[name]["p99_ms"] for row in seq.values()]
        pos = [i + (k - (len(names) - 1) / 2) * width for i in x]
        ax.bar(pos, p50, width, label=f"{DISPLAY.get(name, name)} p50", color=colors.get(name))
        ax.scatter(pos, p99, marker="_", s=300, color="black", zorder=3, label="p99" if k == 0 else None)
    ax.set_yscale("log")
    ax.set_ylabel("latency, ms (log)")
    ax.set_xticks(x, labels, rotation=20, ha="right")
    ax.set_title(f"Sequential latency per request type, ours vs Ironic 39.0 ({subtitle})")
    ax.legend()
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_dir / "latency.png", dpi=110)
    plt.close(fig)
    written.append("latency.png")

    if "ironic" in names:
        fig, ax = plt.subplots(figsize=(11, 5.5))
        ratios = [row["ratio"] for row in seq.values()]
        bar_colors = ["tab:green" if r >= GOAL else "tab:orange" for r in ratios]
        ax.bar(x, ratios, 0.6, color=bar_colors)
        for i, r in zip(x, ratios, strict=True):
            ax.text(i, r, f"{r:.1f}x", ha="center", va="bottom")
        ax.axhline(GOAL, color="red", linestyle="--", label=f"goal {GOAL:.0f}x")
        if max(ratios) > 3 * GOAL:
            ax.set_yscale("log")
        ax.set_ylabel("ours / Ironic, req/s")
        ax.set_xticks(x, labels, rotation=20, ha="right")
        ax.set_title(f"Throughput ratio vs Ironic 39.0, sequential ({subtitle})")
        ax.legend()
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(out_dir / "ratio.png", dpi=110)
        plt.close(fig)
        written.append("ratio.png")
    return written


def plot(report: dict[str, Any], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    colors = {"ours": "tab:blue", "ironic": "tab:red", "ours 2 workers": "tab:green"}
    subtitle = f"{report['machine']['cpus']} CPUs, load {report['machine']['load_before'][0]}" + (
        ", --quick" if report["settings"]["quick"] else "")  # fmt: skip
    seq = report.get("sequential")
    if seq:
        written += _plot_sequential(plt, report, out_dir, subtitle, colors)

    conc = report.get("concurrency")
    if conc:
        cnames = report["concurrency_sides"]
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        clabels = [row["case"] for row in conc.values()]
        cx = list(range(len(clabels)))
        width = 0.8 / len(cnames)
        for k, name in enumerate(cnames):
            pos = [i + (k - (len(cnames) - 1) / 2) * width for i in cx]
            shown = DISPLAY.get(name, name)
            axes[0].bar(pos, [row[name]["rps"] for row in conc.values()], width, label=shown,
                        color=colors.get(name))  # fmt: skip
            axes[1].bar(pos, [row[name]["p50_ms"] for row in conc.values()], width, label=f"{shown} p50",
                        color=colors.get(name))  # fmt: skip
            axes[1].scatter(pos, [row[name]["p99_ms"] for row in conc.values()], marker="_", s=300,
                            color="black", zorder=3, label="p99" if k == 0 else None)  # fmt: skip
        axes[0].set_yscale("log")
        axes[0].set_ylabel("req/s (log)")
        axes[0].set_title(f"{CONCURRENT_CLIENTS} concurrent clients: throughput")
        axes[1].set_yscale("log")
        axes[1].set_ylabel("latency, ms (log)")
        axes[1].set_title("latency")
        for ax in axes:
            ax.set_xticks(cx, clabels, rotation=15, ha="right")
            ax.grid(axis="y", which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(subtitle)
        fig.tight_layout()
        fig.savefig(out_dir / "concurrency.png", dpi=110)
        plt.close(fig)
        written.append("concurrency.png")

    rows = report.get("growth")
    if rows:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        path_colors = {"/v1/nodes": "tab:blue", "/v1/nodes/detail": "tab:purple"}
        for path, color in path_colors.items():
            mine = [r for r in rows if r["path"] == path]
            axes[0].plot([r["nodes_walked"] for r in mine], [r["us_per_node"] for r in mine], "o-",
                         color=color, label=path)  # fmt: skip
        # RSS in the order measured: per list size and path, before the walks, after each page of
        # the first walk and of the last one, after the walks.
        offset = 0
        labelled: set[str] = set()
        for r in rows:
            warm = r["rss_last_walk_kib"] if r["walks"] > 1 else []
            kib = [r["rss_before_kib"], *r["rss_pages_kib"], *warm, r["rss_after_kib"]]
            series = [k / 1024 if k is not None else float("nan") for k in kib]
            xs = list(range(offset, offset + len(series)))
            color = path_colors[r["path"]]
            axes[1].plot(xs, series, ".-", color=color, label=None if r["path"] in labelled else r["path"])
            labelled.add(r["path"])
            if r["path"] == "/v1/nodes":
                axes[1].axvline(offset - 0.5, color="grey", linestyle=":", linewidth=0.8)
                where = axes[1].get_xaxis_transform()
                axes[1].text(offset - 0.3, 0.02, f"{r['size']:,}", transform=where, fontsize=8, c="grey")
            offset += len(series)
        axes[0].set_xscale("log")
        axes[0].set_ylim(bottom=0)
        axes[0].set_xlabel("nodes in the list (log)")
        axes[0].set_ylabel("µs per node, full paginated walk")
        axes[0].set_title("time per node vs list size")
        axes[1].set_ylim(bottom=0)
        axes[1].set_xlabel("samples in order: before, each page of the first and last walk, after")
        axes[1].set_ylabel("server RSS, MiB")
        axes[1].set_title("server memory per page")
        for ax in axes:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"Cost growth, ours ({subtitle})")
        fig.tight_layout()
        fig.savefig(out_dir / "growth.png", dpi=110)
        plt.close(fig)
        written.append("growth.png")
    return written


# -- main ------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_before": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip


@contextlib.contextmanager
def servers() -> Iterator[tuple[list[Process], list[Callable[[], None]]]]:
    processes: list[Process] = []
    stoppers: list[Callable[[], None]] = []
    try:
        yield processes, stoppers
    finally:
        for proc in reversed(processes):
            proc.stop()
        for stop in reversed(stoppers):
            with contextlib.suppress(Exception):
                stop()


def set_up(side: Side) -> None:
    t0 = time.monotonic()
    side.setup(BASE_NODES)
    log(f"{side.name}: {BASE_NODES} nodes in {time.monotonic() - t0:.1f} s; microversion "
        f"{side.negotiated}, etags {side.etags}, replay {side.replays}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ironic", default=None, help="real Ironic's URL, e.g. http://127.0.0.1:6399")
    parser.add_argument(
        "--service", default=None, help="our service's URL, already running (default: start it)"
    )
    parser.add_argument("--service-pid", type=int, default=None, help="--service: its pid (for RSS)")
    parser.add_argument(
        "--service-database", default=None, help="--service: its database URL (growth set-up)"
    )
    parser.add_argument(
        "--service-cmd",
        default=None,
        help="start our service with this command ({python} {host} {port} {database})",
    )
    parser.add_argument("--microversion", default="latest", help="X-OpenStack-Ironic-API-Version (latest)")
    parser.add_argument("--seconds-per-case", type=float, default=None, help="per case, side and round (2)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds, sides alternating (3)")
    parser.add_argument("--client-procs", type=int, default=2, help="client processes for the 8 clients (2)")
    parser.add_argument("--sizes", default=None, help="cost growth list sizes (100,1000,10000)")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: sequential,concurrency,"
                        "two-workers,growth")  # fmt: skip
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: short cases, 1 round, sizes 100,1000"
    )
    parser.add_argument("--json", default=None, help="write every figure to this file")
    parser.add_argument("--plots", default=None, help="write the PNG plots into this directory")
    args = parser.parse_args(argv)
    seconds = args.seconds_per_case or (0.3 if args.quick else 2.0)
    rounds = args.rounds or (1 if args.quick else 3)
    sizes = [int(s) for s in (args.sizes or ("100,1000" if args.quick else "100,1000,10000")).split(",")]
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    if not (0 < seconds <= 60 and 1 <= rounds <= 20 and 1 <= args.client_procs <= CONCURRENT_CLIENTS):
        parser.error("--seconds-per-case in (0, 60], --rounds in [1, 20], --client-procs in [1, 8]")
    if not all(BASE_NODES <= s <= 100_000 for s in sizes):
        parser.error(f"--sizes: each in [{BASE_NODES}, 100000]")

    started = time.monotonic()
    report: dict[str, Any] = {
        "command": "python bench/bench_vs_ironic.py "
        + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "machine": machine(),
        "settings": {
            "seconds_per_case": seconds,
            "rounds": rounds,
            "quick": args.quick,
            "clients": CONCURRENT_CLIENTS,
            "client_procs": args.client_procs,
            "sizes": sizes,
            "goal": GOAL,
            "microversion": args.microversion,
        },  # fmt: skip
    }
    workdir = Path(tempfile.mkdtemp(prefix="bench-vs-ironic-"))
    sides: list[Side] = []
    try:
        with servers() as (processes, stoppers):
            # Launch our servers first, then set Ironic up while they start.
            two: Pending | Side | None = None
            if args.service:
                ours_at: Pending | Side = Side("ours", port_of(args.service), pid=args.service_pid,
                                               label=args.service, version=args.microversion)  # fmt: skip
                database = args.service_database
            else:
                ours_at, database = start_ours(args, workdir, processes)
            if args.quick and "concurrency" not in skip and "two-workers" not in skip:
                two = start_two_workers(args, workdir, processes, stoppers)  # idle until section 2
            ironic = None
            if args.ironic and reachable(args.ironic):
                ironic = Side("ironic", port_of(args.ironic), pid=ironic_pid(), label=ironic_settings(),
                              version=args.microversion)  # fmt: skip
                sides.append(ironic)
            elif args.ironic:
                log(f"no Ironic answers at {args.ironic}: our side only, no ratios")
            if ironic is not None:
                set_up(ironic)
            ours = ours_at.side() if isinstance(ours_at, Pending) else ours_at
            sides.insert(0, ours)
            set_up(ours)
            report["sides"] = [s.name for s in sides]
            report["servers"] = {s.name: {"label": s.label, "microversion": s.negotiated, "etags": s.etags,
                                          "replay": s.replays, "preexisting_nodes": s.preexisting}
                                 for s in sides}  # fmt: skip
            try:
                if "sequential" not in skip:
                    report["sequential"] = sequential(sides, rounds, seconds, 2 if args.quick else 5)
                    print_sequential(report["sequential"], report["sides"])
                if "concurrency" not in skip:
                    conc_sides = [ours]
                    if "two-workers" not in skip:
                        if two is None:
                            two = start_two_workers(args, workdir, processes, stoppers)
                        two = two.side() if isinstance(two, Pending) else two
                        set_up(two)
                        report["servers"][two.name] = {"label": two.label, "microversion": two.negotiated}
                        conc_sides.append(two)
                    conc_sides += [s for s in sides if s.name == "ironic"]
                    report["concurrency_sides"] = [s.name for s in conc_sides]
                    report["concurrency"] = concurrency(
                        conc_sides, rounds, max(seconds, 0.5), args.client_procs
                    )
                    print_concurrency(report["concurrency"], report["concurrency_sides"])
                if "growth" not in skip:
                    report["growth"] = growth(ours, database, sizes, seconds, 2 if args.quick else 10)
                    print_growth(report["growth"])
            finally:
                for side in sides:
                    side.cleanup()
                    side.client.close()
                if isinstance(two, Side):  # its server and database go with the work directory
                    two.client.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
    report["seconds"] = round(time.monotonic() - started, 1)
    print("\nservers:")
    for name, info in report["servers"].items():
        print(f"  {name}: {info['label']} (microversion {info.get('microversion')})")
    print(f"{report['machine']['cpus']} CPUs, load {report['machine']['load_before']} -> "
          f"{report['machine']['load_after']}; {report['seconds']} s")  # fmt: skip
    if args.plots:
        written = plot(report, Path(args.plots))
        print(f"plots: {', '.join(str(Path(args.plots) / w) for w in written)}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print(f"figures: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
