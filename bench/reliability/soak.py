"""Soak: mixed traffic at a steady rate; memory, file descriptors and connections stay flat.

The service runs under gunicorn (2 worker processes, 4 threads each) on PostgreSQL with Redis
as the replay store, with gunicorn's worker recycling switched off (``--max-requests 0``; the
sample configuration recycles a worker every ~20,000 requests, which would hide a leak).
Eight client threads send a fixed target rate (100 requests/s for 10 minutes; the requests
are paced on a schedule, not sent flat-out) of a mix like a real client's: creates of nodes
with an ``X-Client-Token`` (and replays of earlier ones, which must answer with the same
node), GETs of a node, of the node list and of a node's ports, port creates, read-modify-write
PATCHes with ``If-Match`` (a 412 on a lost race is part of the mix), and deletes of the
oldest nodes that keep the number of nodes bounded (at most 100).

Every few seconds a sampler records, for the gunicorn master and each worker: the resident
set size (RSS), the number of open file descriptors and how many of them are sockets; the
ESTABLISHED TCP connections to the service's port (``/proc/net/tcp``); the PostgreSQL
backends connected to the service's database (``pg_stat_activity``); and Redis's connected
clients.

What it proves: nothing accumulates.  The guarantee holds when there is no 5xx and no
request without an answer, no replay answered with another node, no worker was restarted,
file descriptors and sockets per process, TCP connections, PostgreSQL backends and Redis
clients at the end are within 5 of their value after the warm-up, and each worker's RSS grew
by less than 8 MiB after the warm-up.  The warm-up is the first 10 % of the run: the caches
that fill once (SQLAlchemy's compiled statements, the regular expression and JSON schema
caches, the database pool opening its connections, Python's allocator taking its arenas)
are filled by then.  8 MiB is far below what a real leak produces over the run (100 bytes
per request is already ~3 MiB per worker over 30,000 requests each, and typical leaks --
an unreleased response, a connection or a cached dict per request -- are kilobytes) and
above the noise of the allocator's arenas and the garbage collector's timing.  The figure
``KiB/1k req`` divides each worker's growth by the requests it served.

Where the growth after the warm-up comes from: apimw's bounded caches fill during the
first ~10,000 requests a worker serves (store keys of 1,024 client tokens, 512 request
fingerprints, 256 decoded replay records, 512 parsed ``If-Match`` values: about 2 MiB
together), after the 10 % warm-up of a 10-minute run.  Measured in one process: after
10,000 requests the caches are full and the number of live Python objects and allocated
blocks stays flat over the next 15,000 requests.  ``growth in 2nd half`` (RSS at the end
minus RSS at the middle of the run) is the figure to watch for a leak: it excludes the
warm-up of those caches in a full run.

How to read it: one row per process (RSS after the warm-up and at the end, the growth, open
files and sockets), then the service-wide counts.  The plot shows RSS and open files of each
process over the run (the warm-up shaded).  ``SOAK_SECONDS`` and ``SOAK_RATE`` in the
environment change the full run's length and rate (e.g. ``SOAK_SECONDS=120``).
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
import uuid
from collections import Counter, deque
from pathlib import Path
from typing import Any

from bench.reliability._harness import Client, Context, Reply, child_pids, ms, open_fds, percentiles, rss_kib

TITLE = "Soak"

#: seconds of traffic (full, quick); SOAK_SECONDS overrides the full run's
DURATION = (600.0, 8.0)
#: target requests per second (full, quick); SOAK_RATE overrides the full run's
RATE = (100.0, 50.0)
#: seconds between two samples (full, quick)
SAMPLE_EVERY = (5.0, 0.5)
#: the share of the run before the baseline sample
WARMUP = 0.10
CLIENTS = 8
MAX_NODES = 100
#: the bounds of the guarantee (see the docstring)
RSS_GROWTH_KIB = 8 * 1024
FD_GROWTH = 5
PROJECT = "soak"
#: (operation, weight)
MIX = (("create", 12), ("replay", 4), ("get node", 24), ("list nodes", 14), ("node ports", 10),
       ("create port", 6), ("patch", 20), ("list ports", 10))  # fmt: skip


class Traffic:
    """The client side: a paced schedule, the node pool, the counts."""

    def __init__(self, url: str, rate: float, duration: float) -> None:
        self.url = url
        self.rate = rate
        self.duration = duration
        self.lock = threading.Lock()
        self.ticket = 0
        self.start = 0.0
        self.nodes: deque[str] = deque()
        self.created: deque[tuple[str, dict[str, Any], str]] = deque(maxlen=50)
        self.statuses: Counter[tuple[str, int]] = Counter()
        self.by_pid: Counter[int] = Counter()
        self.latencies: list[float] = []
        self.late: list[float] = []
        self.replay_mismatches = 0
        self.examples: list[str] = []
        self.requests = 0
        self.ended = 0.0
        ops, weights = zip(*MIX, strict=True)
        self._ops, self._weights = list(ops), list(weights)

    def next_ticket(self) -> int:
        """Wait for the next slot of the schedule (one per request); :class:`Over` when the run is."""
        with self.lock:
            i = self.ticket
            self.ticket += 1
        due = self.start + i / self.rate
        if due >= self.start + self.duration:
            raise Over
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        else:
            with self.lock:
                self.late.append(-delay)
        return i

    def send(self, client: Client, op: str, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> Reply:
        self.next_ticket()
        reply = client.request(method, path, body, headers=headers)
        with self.lock:
            self.requests += 1
            self.statuses[(op, reply.status)] += 1
            self.latencies.append(reply.seconds)
            pid = reply.headers.get("x-baremetal-worker-pid")
            if pid:
                self.by_pid[int(pid)] += 1
            if (reply.status >= 500 or reply.status == 0) and len(self.examples) < 10:
                self.examples.append(f"{op} -> {reply.status}: {reply.body[:300]!r}")
        return reply

    def pick_node(self, rng: random.Random) -> str | None:
        with self.lock:
            return self.nodes[rng.randrange(len(self.nodes))] if self.nodes else None

    def one(self, client: Client, i: int) -> None:
        """Operation number *i* of the mix (one to three requests), chosen from *i* (repeatable)."""
        rng = random.Random(i)
        op = rng.choices(self._ops, self._weights)[0]
        node = self.pick_node(rng)
        if node is None or op == "create":
            self.create(client, i)
        elif op == "replay":
            with self.lock:
                earlier = self.created[rng.randrange(len(self.created))] if self.created else None
            if earlier is None:
                self.create(client, i)
                return
            token, body, uuid_ = earlier
            reply = self.send(client, op, "POST", "/v1/nodes", body, {"X-Client-Token": token})
            if reply.status == 201 and reply.json().get("uuid") != uuid_:
                with self.lock:
                    self.replay_mismatches += 1
        elif op == "get node":
            self.send(client, op, "GET", f"/v1/nodes/{node}")
        elif op == "list nodes":
            self.send(client, op, "GET", "/v1/nodes?limit=50&detail=" + rng.choice(["true", "false"]))
        elif op == "node ports":
            self.send(client, op, "GET", f"/v1/nodes/{node}/ports")
        elif op == "list ports":
            self.send(client, op, "GET", f"/v1/ports?node_uuid={node}&detail=true")
        elif op == "create port":
            mac = "52:54:01:" + ":".join(f"{(i >> s) & 0xFF:02x}" for s in (16, 8, 0))
            self.send(client, op, "POST", "/v1/ports", {"node_uuid": node, "address": mac})
        elif op == "patch":
            got = self.send(client, "patch (GET)", "GET", f"/v1/nodes/{node}")
            if got.status == 200:
                patch = [{"op": "add", "path": "/extra/n", "value": i}]
                self.send(client, op, "PATCH", f"/v1/nodes/{node}", patch,
                          {"If-Match": got.headers.get("etag", "")})

    def create(self, client: Client, i: int) -> None:
        token = uuid.uuid4().hex
        body = {"driver": "fake-hardware", "name": f"soak-{i}", "extra": {"i": i}}
        reply = self.send(client, "create", "POST", "/v1/nodes", body, {"X-Client-Token": token})
        if reply.status != 201:
            return
        doomed = None
        with self.lock:
            self.nodes.append(reply.json()["uuid"])
            self.created.append((token, body, reply.json()["uuid"]))
            if len(self.nodes) > MAX_NODES:
                doomed = self.nodes.popleft()
        if doomed:
            self.send(client, "delete", "DELETE", f"/v1/nodes/{doomed}")

    def run(self) -> None:
        errors: list[BaseException] = []
        operations = itertools.count()

        def worker() -> None:
            try:
                with Client(self.url, project=PROJECT, timeout=30) as client:
                    while True:
                        self.one(client, next(operations))
            except Over:
                pass
            except BaseException as exc:  # reported below
                errors.append(exc)

        self.start = time.monotonic()
        threads = [threading.Thread(target=worker, name=f"soak-{n}", daemon=True) for n in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(self.duration + 120)
        self.ended = time.monotonic()
        if errors:
            raise errors[0]
        if any(t.is_alive() for t in threads):
            raise TimeoutError("the soak's clients did not finish")


class Over(Exception):
    """The run's time is up."""


# -- the sampler ---------------------------------------------------------------------------------------
def sockets(pid: int) -> int:
    count = 0
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for name in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}").startswith("socket:"):
                count += 1
        except OSError:
            pass
    return count


def established(port: int) -> int:
    """ESTABLISHED TCP connections whose local port is *port* (the service's side of each)."""
    total = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                total += 1
    return total


class Sampler:
    def __init__(self, master: int, port: int, database: str, redis_url: str, every: float) -> None:
        import psycopg
        import redis

        self.master = master
        self.port = port
        self.every = every
        self.samples: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        name = database.rsplit("/", 1)[1]
        host_port = database.split("@", 1)[1].rsplit("/", 1)[0]
        host, _, pgport = host_port.partition(":")
        self._pg = psycopg.connect(host=host, port=int(pgport), user="postgres", dbname="postgres",
                                   autocommit=True)
        self._dbname = name
        self._redis = redis.Redis.from_url(redis_url, socket_timeout=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-sampler", daemon=True)

    def sample(self) -> dict[str, Any]:
        procs: dict[str, dict[str, int]] = {}
        for role, pid in [("master", self.master), *(("worker", p) for p in child_pids(self.master))]:
            try:
                procs[str(pid)] = {"master": int(role == "master"), "rss_kib": rss_kib(pid),
                                   "fds": open_fds(pid), "sockets": sockets(pid)}
            except OSError:
                continue
        (backends,) = self._pg.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (self._dbname,)).fetchone() or (0,)
        clients = int(self._redis.info("clients")["connected_clients"]) - 1
        point = {"t": round(time.monotonic() - self.t0, 2), "procs": procs,
                 "established": established(self.port), "pg_backends": int(backends),
                 "redis_clients": clients}
        self.samples.append(point)
        return point

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def start(self) -> None:
        self.t0 = time.monotonic()
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.sample()
        self._pg.close()
        self._redis.close()


# -- the run --------------------------------------------------------------------------------------------
def run(ctx: Context) -> dict[str, Any]:
    duration = ctx.pick(float(os.environ.get("SOAK_SECONDS") or DURATION[0]), DURATION[1])
    rate = ctx.pick(float(os.environ.get("SOAK_RATE") or RATE[0]), RATE[1])
    db = ctx.database("postgresql")
    redis_url = ctx.store_url("redis")
    gun = ctx.gunicorn(db, redis_url, workers=2, threads=4, env={"GUNICORN_CMD_ARGS": "--max-requests 0"})
    assert gun.proc is not None
    master = gun.proc.pid
    workers_before = sorted(child_pids(master))
    sampler = Sampler(master, gun.port, db, redis_url, ctx.pick(*SAMPLE_EVERY))
    traffic = Traffic(gun.url, rate, duration)
    sampler.start()
    try:
        traffic.run()
    finally:
        sampler.stop()
    workers_after = sorted(child_pids(master))
    log = gun.output()
    gun.stop()

    samples = sampler.samples
    warm = duration * WARMUP
    traffic_end = traffic.ended - sampler.t0
    schedule_end = traffic.start - sampler.t0 + duration
    base = next((s for s in samples if s["t"] >= warm), samples[0])
    # the last sample taken while the schedule still ran (the clients connected); the one
    # after the run, in data["after"], shows their connections gone
    end = [s for s in samples if s["t"] < schedule_end - 0.05][-1]
    middle = next((s for s in samples if s["t"] >= schedule_end / 2), end)
    elapsed = traffic.ended - traffic.start
    achieved = traffic.requests / elapsed if elapsed else 0.0
    statuses: Counter[int] = Counter()
    for (_op, status), n in traffic.statuses.items():
        statuses[status] += n
    errors_5xx = sum(n for s, n in statuses.items() if s >= 500)
    unanswered = statuses.get(0, 0)

    rows: list[list[Any]] = []
    problems: list[str] = []
    growth: dict[str, int] = {}
    for pid in sorted(base["procs"], key=lambda p: (not base["procs"][p]["master"], int(p))):
        b, e = base["procs"][pid], end["procs"].get(pid)
        role = "master" if b["master"] else "worker"
        if e is None:
            problems.append(f"{role} {pid} is gone at the end")
            continue
        grew = e["rss_kib"] - b["rss_kib"]
        grew_late = e["rss_kib"] - middle["procs"].get(pid, e)["rss_kib"]
        served = traffic.by_pid.get(int(pid), 0)
        per_k = round(grew / served * 1000, 1) if served else 0.0
        growth[pid] = grew
        rows.append([f"{role} {pid}", served, round(b["rss_kib"] / 1024, 1), round(e["rss_kib"] / 1024, 1),
                     round(grew / 1024, 2), round(grew_late / 1024, 2), per_k, f"{b['fds']} -> {e['fds']}",
                     f"{b['sockets']} -> {e['sockets']}"])
        if role == "worker" and grew >= RSS_GROWTH_KIB:
            problems.append(f"worker {pid}: RSS grew {grew} KiB after the warm-up "
                            f"(bound {RSS_GROWTH_KIB} KiB)")
        if e["fds"] - b["fds"] > FD_GROWTH:
            problems.append(f"{role} {pid}: open files {b['fds']} -> {e['fds']}")
        if e["sockets"] - b["sockets"] > FD_GROWTH:
            problems.append(f"{role} {pid}: sockets {b['sockets']} -> {e['sockets']}")
    for key, label in (("established", "TCP connections to the service"),
                       ("pg_backends", "PostgreSQL backends"), ("redis_clients", "Redis clients")):
        rows.append([label, "", "", "", "", "", "", f"{base[key]} -> {end[key]}", ""])
        if end[key] - base[key] > FD_GROWTH:
            problems.append(f"{label}: {base[key]} -> {end[key]}")
    if errors_5xx:
        problems.append(f"{errors_5xx} answers were 5xx: {traffic.examples[:5]}")
    if unanswered:
        problems.append(f"{unanswered} requests got no answer: {traffic.examples[:5]}")
    if traffic.replay_mismatches:
        problems.append(f"{traffic.replay_mismatches} replays answered with another node")
    if workers_before != workers_after:
        problems.append(f"workers restarted: {workers_before} -> {workers_after}")
    tracebacks = log.count("Traceback")
    if tracebacks:
        first = log.index("Traceback")
        problems.append(f"gunicorn logged {tracebacks} traceback(s); the first: {log[first:first + 2000]}")
    ok = not problems
    worker_growth = [growth[str(p)] for p in workers_before if str(p) in growth]
    summary = (f"{traffic.requests:,} requests in {elapsed:.0f} s ({achieved:.1f}/s, target {rate:g}/s): "
               f"{errors_5xx} 5xx, {unanswered} unanswered; worker RSS growth after warm-up "
               f"{', '.join(f'{g / 1024:.1f}' for g in worker_growth)} MiB "
               f"(bound {RSS_GROWTH_KIB // 1024} MiB); "
               f"open files {sum(base['procs'][p]['fds'] for p in base['procs'])} -> "
               f"{sum(e['fds'] for e in end['procs'].values())}, TCP connections {base['established']} -> "
               f"{end['established']}, PostgreSQL backends {base['pg_backends']} -> {end['pg_backends']}")
    lat = percentiles([ms(x) for x in traffic.latencies])
    return {
        "ok": ok,
        "summary": summary,
        "table": {"columns": ["process / resource", "requests served", "RSS after warm-up (MiB)",
                              "RSS at end (MiB)", "growth (MiB)", "growth in 2nd half (MiB)", "KiB/1k req",
                              "open files", "sockets"],
                  "rows": rows},
        "problems": problems,
        "data": {
            "duration": duration, "target_rate": rate, "achieved_rate": round(achieved, 1),
            "requests": traffic.requests, "5xx": errors_5xx, "unanswered": unanswered,
            "replay_mismatches": traffic.replay_mismatches,
            "statuses": {str(s): n for s, n in sorted(statuses.items())},
            "by_operation": {f"{op} {s}": n for (op, s), n in sorted(traffic.statuses.items())},
            "latency_ms": lat, "late_p99_ms": percentiles([ms(x) for x in traffic.late]).get("p99", 0.0),
            "warmup_s": warm, "workers": workers_before, "workers_after": workers_after,
            "rss_growth_kib": growth, "log_tracebacks": tracebacks,
            "baseline": base, "middle": middle, "end": end, "after": samples[-1],
            "traffic_end_s": round(traffic_end, 2),
            "samples": samples,
        },
    }


def plot(result: dict[str, Any], out_dir: Path) -> list[str]:
    import matplotlib.pyplot as plt

    data = result["data"]
    samples = data["samples"]
    base = data["baseline"]
    pids = sorted({p for s in samples for p in s["procs"]}, key=int)
    fig, (ax_rss, ax_fds, ax_conn) = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    colors = plt.get_cmap("tab10")
    for n, pid in enumerate(pids):
        points = [(s["t"], s["procs"][pid]) for s in samples if pid in s["procs"]]
        role = "master" if points[0][1]["master"] else "worker"
        times = [t for t, _ in points]
        start = base["procs"].get(pid, points[0][1])["rss_kib"]
        ax_rss.plot(times, [(p["rss_kib"] - start) / 1024 for _, p in points], color=colors(n),
                    label=f"{role} {pid} ({start / 1024:.0f} MiB after the warm-up)")
        ax_fds.plot(times, [p["fds"] for _, p in points], color=colors(n), label=f"{role} {pid} files")
        ax_fds.plot(times, [p["sockets"] for _, p in points], color=colors(n), linestyle="--",
                    label=f"{role} {pid} sockets")
    ax_rss.axhline(RSS_GROWTH_KIB / 1024, color="red", linestyle=":", label="bound (workers)")
    times = [s["t"] for s in samples]
    ax_conn.plot(times, [s["established"] for s in samples], label="TCP connections to the service")
    ax_conn.plot(times, [s["pg_backends"] for s in samples], label="PostgreSQL backends")
    ax_conn.plot(times, [s["redis_clients"] for s in samples], label="Redis clients")
    for ax in (ax_rss, ax_fds, ax_conn):
        ax.axvspan(0, data["warmup_s"], color="grey", alpha=0.15, label="warm-up" if ax is ax_rss else None)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(alpha=0.3)
    ax_rss.set_ylabel("RSS - RSS after warm-up (MiB)")
    ax_fds.set_ylabel("open files / sockets")
    ax_conn.set_ylabel("connections")
    ax_conn.set_xlabel("seconds")
    ax_rss.set_title(f"Soak: {data['requests']:,} requests at {data['achieved_rate']}/s "
                     f"(target {data['target_rate']:g}/s), 2 gunicorn workers")
    fig.tight_layout()
    name = "soak-resources.png"
    fig.savefig(out_dir / name, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [name]
