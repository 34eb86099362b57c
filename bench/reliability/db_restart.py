"""PostgreSQL is stopped (a *fast* shutdown, as `pg_ctl stop -m fast` does: open sessions are
cut, running transactions roll back) one third into a mixed load, and started again two thirds
in; the service (gunicorn, 2 workers, Redis as the replay store) keeps running throughout.
The load: clients creating nodes with a fresh `X-Client-Token` each (a create that did not get
its 201 is retried later with the same token, as a client should), clients incrementing a
counter in a node's `extra` with GET then PATCH `If-Match` (a 412 means read again), and a
client listing nodes.  The database keeps `synchronous_commit = on` (set per database: the
test servers run with it off).

What it proves: during the outage every request that needs the database gets 503 with a JSON
error body and the code `baremetal.database-unavailable` (not a 500, no traceback, nothing
about the server in the body); when the database is back the same processes answer again
(no restart); and nothing is half-written: every token has exactly one node, the node the
client was answered with, and its `client_tokens` row names it (no node without its row, no
row without its node); each counter's final value equals the number of PATCHes answered 200.

How to read the table: "during" counts the requests sent after the shutdown ended and answered
before the start command;
"recovery" is the time from the start command to the first request answered 2xx.  "creates
answered by the database guard" are retries, after the restart, of a create whose first
attempt failed but had committed (none are expected with a clean shutdown).  The plot shows
requests per second by status over time, with the stop and the start marked.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench.reliability._faults_support import (
    EXTRA_KEY,
    Recorder,
    by_phase,
    durable_commits,
    fast_shutdown,
    node_counts,
    pg_connect,
    plot_timeline,
    reply_record,
    run_threads,
    timeline,
)
from bench.reliability._harness import Client, Context

TITLE = "Database restart under load"

DOWN_CODE = "baremetal.database-unavailable"
PAUSE_AFTER_ERROR = 0.05


def run(ctx: Context) -> dict[str, Any]:
    seconds = ctx.pick(30.0, 5.0)
    creators, patchers, getters = ctx.pick((4, 3, 2), (2, 2, 1))
    pg = ctx.own_postgres()
    db = ctx.database("postgresql", pg)
    durable_commits(pg, db.rsplit("/", 1)[1])
    redis = ctx.redis()
    gun = ctx.gunicorn(db, redis.url)
    with Client(gun.url) as setup:
        targets = [
            setup.post("/v1/nodes", {"driver": "fake-hardware", "extra": {"count": 0}}).json()["uuid"]
            for _ in range(patchers)
        ]
    rec = Recorder()
    lock = threading.Lock()
    answered: dict[str, set[str]] = {}  # token -> node uuids it was answered with (201)
    unanswered: list[str] = []  # tokens without a 201 yet
    patched = Counter[str]()  # node -> PATCHes answered 200

    def create(client: Client, token: str, kind: str) -> int:
        sent = rec.now()
        reply = client.post(
            "/v1/nodes",
            {"driver": "fake-hardware", "extra": {EXTRA_KEY: token}},
            headers={"X-Client-Token": token},
        )
        reply_record(rec, kind, sent, reply, token)
        with lock:
            answered.setdefault(token, set())
            if reply.status == 201:
                answered[token].add(str(reply.json().get("uuid")))
        return reply.status

    def creator() -> None:
        pending: list[str] = []
        with Client(gun.url) as client:
            while rec.now() < seconds:
                if pending and rec.phase(rec.now()) == "after":
                    token, kind = pending.pop(), "create retry"
                else:
                    token, kind = uuid.uuid4().hex, "create"
                if create(client, token, kind) != 201:
                    pending.append(token)
                    time.sleep(PAUSE_AFTER_ERROR)
        with lock:
            unanswered.extend(pending)

    def patcher(node: str) -> None:
        with Client(gun.url) as client:
            while rec.now() < seconds:
                sent = rec.now()
                got = client.get(f"/v1/nodes/{node}")
                reply_record(rec, "get node", sent, got)
                if got.status != 200:
                    time.sleep(PAUSE_AFTER_ERROR)
                    continue
                count = int(got.json()["extra"].get("count", 0))
                sent = rec.now()
                reply = client.request(
                    "PATCH",
                    f"/v1/nodes/{node}",
                    [{"op": "add", "path": "/extra/count", "value": count + 1}],
                    headers={"If-Match": got.headers.get("etag", "")},
                )
                reply_record(rec, "patch", sent, reply)
                if reply.status == 200:
                    with lock:
                        patched[node] += 1
                elif reply.status != 412:
                    time.sleep(PAUSE_AFTER_ERROR)

    def getter() -> None:
        with Client(gun.url) as client:
            while rec.now() < seconds:
                sent = rec.now()
                reply = client.get("/v1/nodes?limit=20")
                reply_record(rec, "list", sent, reply)
                if reply.status != 200:
                    time.sleep(PAUSE_AFTER_ERROR)

    def faults() -> None:
        time.sleep(max(0.0, seconds / 3 - rec.now()))
        rec.mark("stop")
        fast_shutdown(pg)
        rec.mark("down")
        time.sleep(max(0.0, 2 * seconds / 3 - rec.now()))
        rec.mark("up")  # before the start: nothing answered by the restarted server counts as "during"
        pg.start()
        rec.mark("started")

    errors = run_threads(
        [faults, *([creator] * creators), *[lambda n=n: patcher(n) for n in targets], *([getter] * getters)],
        timeout=seconds + 120,
    )
    # the creates still without their 201: retried with their token until answered (bounded)
    sweep_deadline = time.monotonic() + 20.0
    with Client(gun.url) as client:
        for token in list(unanswered):
            while create(client, token, "final retry") != 201 and time.monotonic() < sweep_deadline:
                time.sleep(0.1)
    records = rec.snapshot()
    counts = node_counts(db)
    with pg_connect(db) as conn:
        finals = {
            node: int(
                conn.execute("SELECT extra::json->>'count' FROM nodes WHERE uuid = %s", (node,)).fetchone()[0]
                or 0
            )
            for node in targets
        }
        recorded_at = {
            token: float(at)
            for token, at in conn.execute(
                "SELECT token, extract(epoch FROM created_at) FROM client_tokens"
            ).fetchall()
        }
        incomplete = conn.execute(
            "SELECT count(*) FROM nodes WHERE etag IS NULL OR driver IS NULL "
            "OR provision_state IS NULL OR created_at IS NULL"
        ).fetchone()[0]
    output = gun.output()
    wall0 = time.time() - rec.now()  # the wall-clock time of the load's start
    return _result(
        rec,
        records,
        counts,
        answered,
        patched,
        finals,
        incomplete,
        errors,
        seconds,
        output,
        recorded_at,
        wall0,
    )


def _result(
    rec: Recorder,
    records: list[Any],
    counts: dict[str, Any],
    answered: dict[str, set[str]],
    patched: Counter[str],
    finals: dict[str, int],
    incomplete: int,
    errors: list[str],
    seconds: float,
    output: str,
    recorded_at: dict[str, float],
    wall0: float,
) -> dict[str, Any]:
    down, up = rec.marks["down"], rec.marks["up"]
    during = [r for r in records if down <= r.t and r.t + r.seconds < up]  # answered before the start
    not_503 = [r for r in during if r.status != 503]
    bad_bodies = [r for r in records if r.status == 503 and (not r.json_body or r.code != DOWN_CODE)]
    leaks = [
        r
        for r in records
        if r.status >= 500
        and any(s in r.body for s in (b"Traceback", b"psycopg", b"sqlalchemy", b"OperationalError"))
    ]
    other_5xx = [r for r in records if r.status >= 500 and r.status != 503]
    no_answer = [r for r in records if r.status == 0]
    recovered = [r.t + r.seconds for r in records if r.t >= up and 200 <= r.status < 300]
    per_token: dict[str, int] = counts["per_token"]
    node_token = {node: tok for node, tok in counts["node_token"].items() if tok}
    recorded: dict[str, str] = counts["recorded"]
    tokens = list(answered)
    never_answered = [t for t in tokens if not answered[t]]
    wrong_count = [t for t in tokens if answered[t] and per_token.get(t, 0) != 1]
    split = [t for t in tokens if len(answered[t]) > 1]
    mismatched = [t for t in tokens if answered[t] and node_token.get(next(iter(answered[t]))) != t]
    nodes_without_row = [n for n, t in node_token.items() if recorded.get(t) != n]
    rows_without_node = [t for t, n in recorded.items() if node_token.get(n) != t]
    unanswered_nodes = [t for t in per_token if not answered.get(t)]
    guard = sum(1 for r in records if r.kind in ("create retry", "final retry") and r.status == 201)
    guard_answers = _guard_answers(records, recorded_at, wall0)
    patch_ok = sum(patched.values())
    patch_final = sum(finals.values())
    patch_503 = sum(1 for r in records if r.kind == "patch" and r.status in (503, 0))
    figures = {
        "seconds": seconds,
        "stop_at": round(rec.marks["stop"], 2),
        "down_at": round(down, 2),
        "up_at": round(up, 2),
        "requests": len(records),
        "by_phase": by_phase(records, rec),
        "during": len(during),
        "during_503": len(during) - len(not_503),
        "during_not_503": dict(Counter(str(r.status) for r in not_503)),
        "bad_503_bodies": len(bad_bodies),
        "internals_in_bodies": len(leaks),
        "other_5xx": len(other_5xx),
        "no_answer": len(no_answer),
        "recovery_seconds": round(min(recovered) - up, 3) if recovered else None,
        "tokens": len(tokens),
        "tokens_never_answered": len(never_answered),
        "tokens_without_exactly_one_node": len(wrong_count),
        "answers_naming_two_nodes": len(split),
        "answered_node_not_the_tokens": len(mismatched),
        "nodes_without_their_token_row": len(nodes_without_row),
        "token_rows_without_their_node": len(rows_without_node),
        "nodes_nobody_was_answered": len(unanswered_nodes),
        "incomplete_node_rows": incomplete,
        "create_retries_succeeded": guard,
        "creates_answered_by_db_guard": guard_answers,
        "patch_successes": patch_ok,
        "patch_final_values": patch_final,
        "patch_failed_503": patch_503,
        "duplicates": sum(max(0, n - 1) for n in per_token.values()),
        "load_errors": errors,
        "traceback_in_service_log": output.count("Traceback"),
        "timeline": timeline([r for r in records if r.t <= seconds], bucket=seconds / 40),
        "marks": {"stop": round(rec.marks["stop"], 3), "down": round(down, 3), "start": round(up, 3)},
        "samples_not_503_during": [
            f"{r.kind} {r.status} {r.body[:200].decode(errors='replace')}" for r in not_503[:3]
        ],
    }
    problems = []
    if not during:
        problems.append("no request was sent during the outage")
    if not_503:
        problems.append(
            f"requests during the outage not answered 503: {figures['during_not_503']} "
            f"({figures['samples_not_503_during']})"
        )
    for name in (
        "bad_503_bodies",
        "internals_in_bodies",
        "other_5xx",
        "no_answer",
        "tokens_never_answered",
        "tokens_without_exactly_one_node",
        "answers_naming_two_nodes",
        "answered_node_not_the_tokens",
        "nodes_without_their_token_row",
        "token_rows_without_their_node",
        "nodes_nobody_was_answered",
        "incomplete_node_rows",
        "duplicates",
    ):
        if figures[name]:
            problems.append(f"{name.replace('_', ' ')}: {figures[name]}")
    if patch_final != patch_ok:
        problems.append(
            f"PATCH counters: final values {patch_final} != {patch_ok} PATCHes answered 200 "
            f"({patch_503} answered 503 or not at all)"
        )
    if figures["recovery_seconds"] is None:
        problems.append("no request succeeded after the restart")
    if errors:
        problems.append(f"load errors: {errors}")
    rows = [
        [
            "requests before / during / after",
            " / ".join(
                str(sum(n for k in figures["by_phase"] for n in figures["by_phase"][k].get(p, {}).values()))
                for p in ("before", "during", "after")
            ),
        ],
        ["during the outage: 503 with the code", f"{figures['during_503']} of {len(during)}"],
        [
            "503 bodies without JSON or the code / with internals",
            f"{figures['bad_503_bodies']} / {figures['internals_in_bodies']}",
        ],
        ["5xx other than 503 / no answer", f"{figures['other_5xx']} / {figures['no_answer']}"],
        ["recovery after the start, no service restart (s)", figures["recovery_seconds"]],
        ["create tokens / with exactly one node", f"{len(tokens)} / {len(tokens) - len(wrong_count)}"],
        ["creates answered by the database guard", guard_answers],
        [
            "nodes without their client_tokens row / rows without their node",
            f"{len(nodes_without_row)} / {len(rows_without_node)}",
        ],
        ["duplicates / incomplete node rows", f"{figures['duplicates']} / {incomplete}"],
        ["PATCH counters: final value / PATCHes answered 200", f"{patch_final} / {patch_ok}"],
    ]
    summary = (
        f"{figures['during_503']} of {len(during)} requests during the outage answered 503 "
        f"{DOWN_CODE}, {len(other_5xx)} other 5xx, recovered {figures['recovery_seconds']} s after the "
        f"start without a service restart; {len(tokens)} create tokens, each with exactly one node and "
        f"its client_tokens row ({figures['duplicates']} duplicates); PATCH counters {patch_final} == "
        f"{patch_ok} successes"
    )
    return {
        "ok": not problems,
        "summary": summary,
        "table": {"columns": ["figure", "value"], "rows": rows},
        "problems": problems,
        "data": figures,
    }


def _guard_answers(records: list[Any], recorded_at: dict[str, float], wall0: float) -> int:
    """Create retries answered 201 for a token whose row was committed before the retry was
    sent: an earlier attempt had created the node although its answer was lost."""
    return sum(
        1
        for r in records
        if r.kind in ("create retry", "final retry")
        and r.status == 201
        and recorded_at.get(r.token, float("inf")) < wall0 + r.t
    )


def plot(result: dict[str, Any], out_dir: str | Path) -> list[str]:
    import matplotlib.pyplot as plt

    data = result["data"]
    fig, ax = plt.subplots(figsize=(10, 4))
    plot_timeline(
        ax,
        data["timeline"],
        data["marks"],
        "Database restart: requests/s by status (creates with a token, GET + PATCH If-Match, lists)",
    )
    fig.tight_layout()
    name = "db_restart-timeline.png"
    fig.savefig(Path(out_dir) / name, dpi=90)
    plt.close(fig)
    return [name]
