"""A gunicorn worker is killed with SIGKILL while it holds a client token's claim: after the
idempotency middleware claimed the token in Redis and before it recorded the answer.  No
debug hook is needed to hold a request there: the harness takes `LOCK TABLE nodes IN ACCESS
EXCLUSIVE MODE` on PostgreSQL from its own connection, sends the token POST, finds the
database backend waiting on that lock (`pg_stat_activity`) and, from its client port, the
worker process that owns the connection (`/proc`), and kills that worker.  The service runs
with 2 workers, no conductor, and a short lease (`BAREMETAL_IDEMPOTENCY_LEASE`).

Two variants alternate.  *Before commit*: the worker is killed while its create waits on the
lock, then the lock is released; its transaction (client token row included) rolls back.
*After commit*: Redis writes are paused (`CLIENT PAUSE WRITE`), the lock is released, the
node and its client token row commit, and the worker is killed while its completion write
waits on Redis (its Redis connections are closed before the pause ends, so the write it sent
is dropped as an unacknowledged one would be); the claim stays in flight although the node
exists.  Then the same token is retried every 100 ms.

What it proves: retries get 409 `idempotency.in-flight` with Retry-After until the lease
ends, then exactly one execution: a new node (before commit) or, after commit, the database
guard answers with the node the killed worker created instead of creating a second; later
retries replay that answer.  How to read the table: one row per round; times are when the
answer came.  "409 before lease end" counts the retries answered before the claim's lease could
have ended (every one must be 409); "first success" is counted from the kill and from the
claim (the POST), and sits just after the lease (later when the retry waited for a respawned
worker to build its app: its claim then came after the lease anyway).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench.reliability._faults_support import EXTRA_KEY, node_counts, pg_connect, wait_until
from bench.reliability._harness import Client, Context, child_pids
from tests.servers import HOST

TITLE = "Worker killed after claim"

RETRY_EVERY = 0.1
VARIANTS = ("before commit", "after commit")


def _socket_inode(local_port: int, remote_port: int) -> str | None:
    """The inode of the TCP socket 127.0.0.1:local_port -> :remote_port (/proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        if int(local.split(":")[1], 16) == local_port and int(remote.split(":")[1], 16) == remote_port:
            return inode
    return None


def _owner(pids: list[int], inode: str) -> int | None:
    target = f"socket:[{inode}]"
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


def _connections_to(pid: int, remote_port: int) -> list[int]:
    """Local ports of *pid*'s TCP connections to 127.0.0.1:remote_port."""
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except OSError:
        return []
    ports = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes and int(fields[2].split(":")[1], 16) == remote_port:
            ports.append(int(fields[1].split(":")[1], 16))
    return ports


def _waiting_backend(conn: Any) -> tuple[int, int] | None:
    """(backend pid, client port) of the session waiting on a lock in this database."""
    row = conn.execute(
        "SELECT pid, client_port FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() LIMIT 1"
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else None


def _round(ctx: Context, gun: Any, db: str, redis_port: int, lease: float, variant: str) -> dict[str, Any]:
    import redis as redis_lib

    pg_port = int(db.rsplit(":", 1)[1].split("/")[0])
    token = uuid.uuid4().hex
    body = {"driver": "fake-hardware", "extra": {EXTRA_KEY: token}}
    headers = {"X-Client-Token": token}
    first: dict[str, Any] = {}
    problems: list[str] = []
    with (
        pg_connect(db) as locker,
        pg_connect(db) as watcher,
        redis_lib.Redis(host=HOST, port=redis_port) as rds,
    ):
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE nodes IN ACCESS EXCLUSIVE MODE")

        def original() -> None:
            with Client(gun.url, timeout=lease + 30) as client:
                first["reply"] = client.post("/v1/nodes", body, headers=headers)

        claim_at = time.monotonic()
        thread = threading.Thread(target=original, daemon=True)
        thread.start()
        waiting: list[tuple[int, int]] = []

        def found() -> bool:
            backend = _waiting_backend(watcher)
            if backend:
                waiting.append(backend)
            return backend is not None

        wait_until(found, 15, 0.01)
        workers = child_pids(gun.proc.pid)
        victim = None
        if waiting:
            inode = _socket_inode(waiting[0][1], pg_port)
            victim = _owner(workers, inode) if inode else None
        victims = [victim] if victim else workers  # not found: kill every worker
        if not waiting:
            problems.append(f"{variant}: the create never waited on the lock")
        committed = False
        if variant == "after commit":
            rds.execute_command("CLIENT", "PAUSE", str(int((lease + 20) * 1000)), "WRITE")
            locker.execute("ROLLBACK")
            committed = wait_until(
                lambda: (
                    watcher.execute(
                        "SELECT count(*) FROM client_tokens WHERE token = %s", (token,)
                    ).fetchone()[0]
                    == 1
                ),
                15,
            )
            if not committed:
                problems.append(f"{variant}: the held create did not commit")
            time.sleep(0.1)  # the worker is now writing its completion to the paused Redis
        redis_ports = [port for pid in victims for port in _connections_to(pid, redis_port)]
        killed_at = time.monotonic()
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        if variant == "after commit":
            # the dead worker's completion may be waiting in Redis's paused query buffer: it
            # died before the store acknowledged it, so drop it (as if it had not been sent)
            for port in redis_ports:
                with contextlib.suppress(redis_lib.ResponseError):  # already gone
                    rds.execute_command("CLIENT", "KILL", "ADDR", f"{HOST}:{port}")
            rds.execute_command("CLIENT", "UNPAUSE")
        else:
            locker.execute("ROLLBACK")
        thread.join(lease + 40)
    original_status = first["reply"].status if "reply" in first else None
    lease_end = claim_at + lease
    retries: list[dict[str, Any]] = []
    deadline = killed_at + lease + 15
    successes = 0
    with Client(gun.url) as client:
        while time.monotonic() < deadline and successes < 3:
            sent = time.monotonic()
            reply = client.post("/v1/nodes", body, headers=headers)
            answered = time.monotonic()
            node = ""
            if reply.status == 201:
                successes += 1
                node = str(reply.json().get("uuid", ""))
            retries.append(
                {
                    # when the answer came (a request waits, e.g. on a worker that is
                    # still building its app: its claim may come after the lease)
                    "t_kill": round(answered - killed_at, 3),
                    "t_claim": round(answered - claim_at, 3),
                    "seconds": round(answered - sent, 3),
                    "pid": reply.headers.get("x-baremetal-worker-pid"),
                    "status": reply.status,
                    "code": reply.error_code if reply.status >= 400 else "",
                    "retry_after": reply.headers.get("retry-after"),
                    "node": node,
                    "replayed": reply.headers.get("idempotent-replayed") == "true",
                }
            )
            if successes == 0:
                time.sleep(max(0.0, RETRY_EVERY - (time.monotonic() - sent)))
    counts = node_counts(db)
    nodes = counts["per_token"].get(token, 0)
    node_uuid = next((n for n, t in counts["node_token"].items() if t == token), None)
    ok_retries = [r for r in retries if r["status"] == 201]
    first_ok = ok_retries[0] if ok_retries else None
    # answered before the lease could have ended (the claim came after claim_at): all 409
    early = [r for r in retries if r["t_claim"] < lease]
    early_successes = [r for r in early if r["status"] == 201]
    in_flight = [
        r
        for r in early
        if r["status"] == 409 and r["code"] == "idempotency.in-flight" and (r["retry_after"] or "").isdigit()
    ]
    figures = {
        "variant": variant,
        "killed": len(victims),
        "worker_found": victim is not None,
        "victims": victims,
        "workers_before": workers,
        "waiting_backend": waiting[:1],
        "original_status": original_status,
        "committed_before_kill": committed,
        "retries": len(retries),
        "retries_before_lease_end": len(early),
        "in_flight_409_before_lease_end": len(in_flight),
        "first_success_after_kill": first_ok["t_kill"] if first_ok else None,
        "first_success_after_claim": first_ok["t_claim"] if first_ok else None,
        "first_success_replayed": first_ok["replayed"] if first_ok else None,
        "executions": nodes,
        "answers_name_the_node": bool(ok_retries) and {r["node"] for r in ok_retries} == {node_uuid},
        "later_retries_replayed": all(r["replayed"] for r in ok_retries[1:]),
        "token_recorded_for_the_node": counts["recorded"].get(token) == node_uuid,
        "5xx": sum(1 for r in retries if r["status"] >= 500 or r["status"] == 0),
        "timeline": [[r["t_kill"], r["status"]] for r in retries],
        "retry_details": retries[:3] + retries[-3:],
        "lease_end_after_kill": round(lease_end - killed_at, 3),
    }
    if early_successes:
        problems.append(f"{variant}: {len(early_successes)} retries succeeded before the lease ended")
    if not early:
        problems.append(f"{variant}: no retry was sent before the lease ended (the hold took too long)")
    if len(in_flight) != len(early):
        problems.append(
            f"{variant}: {len(early) - len(in_flight)} retries before the lease end were not "
            "409 in-flight with Retry-After"
        )
    if nodes != 1:
        problems.append(f"{variant}: {nodes} executions (nodes) for one token")
    if not first_ok:
        problems.append(f"{variant}: no retry succeeded within the lease + 15 s")
    for name in ("answers_name_the_node", "later_retries_replayed", "token_recorded_for_the_node"):
        if first_ok and not figures[name]:
            problems.append(f"{variant}: not {name.replace('_', ' ')}")
    if figures["5xx"]:
        problems.append(f"{variant}: {figures['5xx']} retries answered 5xx or not at all")
    figures["problems"] = problems
    return figures


def run(ctx: Context) -> dict[str, Any]:
    rounds = ctx.pick(10, 2)
    lease = ctx.pick(5.0, 3.0)
    redis = ctx.redis()
    db = ctx.database("postgresql")
    gun = ctx.gunicorn(
        db, redis.url, env={"BAREMETAL_IDEMPOTENCY_LEASE": str(lease), "BAREMETAL_CONDUCTOR_WORKERS": "0"}
    )
    results = []
    for i in range(rounds):
        wait_until(lambda: len(child_pids(gun.proc.pid)) == 2, 30, 0.1)  # the killed one respawned
        # ...and has built its app (lazily, on its first request: seconds on a busy machine), so a
        # retry does not wait for that while the lease runs out
        gun.worker_pids(want=2)
        results.append(_round(ctx, gun, db, redis.port, lease, VARIANTS[i % len(VARIANTS)]))
    problems = [p for r in results for p in r["problems"]]
    rows = [
        [
            i + 1,
            r["variant"],
            r["original_status"],
            f"{r['in_flight_409_before_lease_end']} of {r['retries_before_lease_end']}",
            r["first_success_after_kill"],
            r["first_success_after_claim"],
            "database guard"
            if r["committed_before_kill"]
            else ("replay" if r["first_success_replayed"] else "executed"),
            r["executions"],
            r["5xx"],
        ]
        for i, r in enumerate(results)
    ]
    executions = sum(r["executions"] for r in results)
    duplicates = sum(max(0, r["executions"] - 1) for r in results)
    five = sum(r["5xx"] for r in results)
    in_flight = sum(r["in_flight_409_before_lease_end"] for r in results)
    early = sum(r["retries_before_lease_end"] for r in results)
    after_claim = [
        r["first_success_after_claim"] for r in results if r["first_success_after_claim"] is not None
    ]
    summary = (
        f"{rounds} workers killed holding a claim (lease {lease:g} s): {in_flight} of {early} retries "
        f"before the lease end answered 409 in-flight, {executions} executions for {rounds} tokens "
        f"({duplicates} duplicates), {five} 5xx; first success {min(after_claim, default=0):.2f}-"
        f"{max(after_claim, default=0):.2f} s after the claim"
    )
    return {
        "ok": not problems,
        "summary": summary,
        "table": {
            "columns": [
                "round",
                "killed",
                "original answer",
                "409 before lease end",
                "first success after kill (s)",
                "after claim (s)",
                "first success",
                "executions",
                "5xx",
            ],
            "rows": rows,
        },
        "problems": problems,
        "data": {
            "lease": lease,
            "rounds": [{k: v for k, v in r.items() if k != "problems"} for r in results],
        },
    }


def plot(result: dict[str, Any], out_dir: str | Path) -> list[str]:
    import matplotlib.pyplot as plt

    rounds = result["data"]["rounds"]
    colours = {201: "tab:green", 409: "tab:orange"}
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rounds) + 2))
    for i, r in enumerate(rounds):
        xs = [p[0] for p in r["timeline"]]
        cs = [colours.get(p[1], "tab:red") for p in r["timeline"]]
        ax.scatter(xs, [i + 1] * len(xs), c=cs, s=14)
        ax.plot([r["lease_end_after_kill"]] * 2, [i + 0.6, i + 1.4], color="black", linewidth=2)
    ax.set_yticks(range(1, len(rounds) + 1), [f"{i + 1}: {r['variant']}" for i, r in enumerate(rounds)])
    ax.set_xlabel("answer time, seconds since the worker was killed (black bar: the claim's lease ends)")
    ax.set_title(
        "Retries of the killed worker's token: orange 409 in-flight, green 201 (first: executed "
        "or guard; then replays)",
        fontsize=9,
    )
    ax.invert_yaxis()
    fig.tight_layout()
    name = "worker_kill-retries.png"
    fig.savefig(Path(out_dir) / name, dpi=90)
    plt.close(fig)
    return [name]
