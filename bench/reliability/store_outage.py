"""The replay store (Redis with AOF `appendfsync always`, then memcached) is killed with SIGKILL
while clients create nodes with an `X-Client-Token` and other clients list nodes without a
token; it is started again on the same port two thirds into the run.  The service runs under
gunicorn (2 worker processes) on PostgreSQL.  Every token is fresh; every third one is sent
again with the same token as soon as its answer came, and once more after the restart (until
it gets an answer other than 409 in-flight: a claim whose completion write failed because the
store died lives until its lease ends; the lease is set shorter than the run with
`BAREMETAL_IDEMPOTENCY_LEASE`).

What it proves: while the store is down, a token request gets 503 with a JSON error body and
the code `idempotency.store-unavailable` (never 500: the request did not run), requests
without a token keep working, and afterwards no token produced two nodes, counted in the
database. The retries after a memcached restart are the hard case: memcached forgot every
record, so the retry runs the app again, and it is the database-side guard
(`apimw.idempotency_db`, the `client_tokens` row written in the node's transaction) that
answers with the node the first execution created.

How to read the table: one column per store. "during" counts the requests sent after the kill
ended and answered before the restart command. "answered by the database guard" counts,
for memcached (which restarts empty), the first retry after the restart of a token already
answered 201: the store had no record, so the guard answered it (with `Idempotent-Replayed`,
like a replay). "recovery" is the time from the restart command to the first token request that
succeeded. The plots show requests per second by status over time, with the kill and the
restart marked.
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
    node_counts,
    plot_timeline,
    reply_record,
    run_threads,
    timeline,
)
from bench.reliability._harness import Client, Context

TITLE = "Replay store outage under load"

STORES = ("redis", "memcached")
#: every RETRY_EVERY-th token is retried (after its answer, and after the restart)
RETRY_EVERY = 3
STORE_DOWN_CODE = "idempotency.store-unavailable"


class _Token:
    __slots__ = ("token", "answers", "retried")

    def __init__(self, token: str) -> None:
        self.token = token
        #: (kind, status, node uuid or "", replayed)
        self.answers: list[tuple[str, int, str, bool]] = []
        self.retried = False


def _post(client: Client, rec: Recorder, tok: _Token, kind: str) -> int:
    sent = rec.now()
    reply = client.post(
        "/v1/nodes",
        {"driver": "fake-hardware", "extra": {EXTRA_KEY: tok.token}},
        headers={"X-Client-Token": tok.token},
    )
    reply_record(rec, kind, sent, reply, tok.token)
    node = ""
    if reply.status == 201:
        try:
            node = str(reply.json()["uuid"])
        except (ValueError, KeyError, TypeError):
            node = "?"
    tok.answers.append((kind, reply.status, node, reply.headers.get("idempotent-replayed") == "true"))
    return reply.status


def _one_store(ctx: Context, kind: str, db: str, seconds: float, lease: float) -> dict[str, Any]:
    server = (
        ctx.redis("--appendonly", "yes", "--appendfsync", "always") if kind == "redis" else ctx.memcached()
    )
    gun = ctx.gunicorn(db, server.url, env={"BAREMETAL_IDEMPOTENCY_LEASE": str(lease)})
    token_clients = ctx.pick(8, 4)
    get_clients = ctx.pick(2, 1)
    tokens: list[_Token] = []
    tokens_lock = threading.Lock()
    rec = Recorder()

    def token_client() -> None:
        pending: list[_Token] = []  # retried before the restart: to send again after it
        n = 0
        with Client(gun.url) as client:
            while rec.now() < seconds:
                if pending and rec.phase(rec.now()) == "after":
                    # oldest first: the tokens answered 201 before the kill are the hard case
                    _post(client, rec, pending.pop(0), "retry after restart")
                    continue
                tok = _Token(uuid.uuid4().hex)
                with tokens_lock:
                    tokens.append(tok)
                n += 1
                _post(client, rec, tok, "token")
                if n % RETRY_EVERY == 0:
                    tok.retried = True
                    sent = rec.now()
                    _post(client, rec, tok, "retry")
                    if rec.phase(sent) != "after":
                        pending.append(tok)

    def get_client() -> None:
        with Client(gun.url) as client:
            while rec.now() < seconds:
                sent = rec.now()
                reply_record(rec, "get", sent, client.get("/v1/nodes?limit=20"))

    def faults() -> None:
        time.sleep(max(0.0, seconds / 3 - rec.now()))
        server.kill()
        rec.mark("down")
        time.sleep(max(0.0, 2 * seconds / 3 - rec.now()))
        rec.mark("up")  # before the start: nothing sent after the server is back counts as "during"
        server.start()
        rec.mark("started")

    errors = run_threads(
        [faults] + [token_client] * token_clients + [get_client] * get_clients, timeout=seconds + 120
    )
    rec.mark("load end")
    # every retried token once more, until it is not in flight (bounded: its lease, plus margin)
    sweep_deadline = time.monotonic() + lease + 10.0
    with Client(gun.url) as client:
        for tok in [t for t in tokens if t.retried]:
            while True:
                status = _post(client, rec, tok, "final retry")
                if status not in (409, 503, 0) or time.monotonic() > sweep_deadline:
                    break
                time.sleep(0.2)
    records = rec.snapshot()
    counts = node_counts(db)
    output = gun.output()
    gun.stop()
    return _figures(kind, rec, records, tokens, counts, seconds, lease, errors, output)


def _first_after_restart_repeats_a_201(tok: _Token) -> bool:
    """The token's first answer after the restart (a retry during the load or the final sweep)
    is a 201 and it had a 201 before."""
    after = [i for i, a in enumerate(tok.answers) if a[0] in ("retry after restart", "final retry")]
    if not after:
        return False
    first = after[0]
    return tok.answers[first][1] == 201 and any(a[1] == 201 for a in tok.answers[:first])


def _figures(
    kind: str,
    rec: Recorder,
    records: list[Any],
    tokens: list[_Token],
    counts: dict[str, Any],
    seconds: float,
    lease: float,
    errors: list[str],
    output: str,
) -> dict[str, Any]:
    down, up = rec.marks["down"], rec.marks["up"]
    token_kinds = ("token", "retry", "retry after restart", "final retry")
    posts = [r for r in records if r.kind in token_kinds]
    gets = [r for r in records if r.kind == "get"]
    # sent after the kill and answered before the restart command (a request sent just before
    # the restart may be served by the restarted store on a busy machine)
    during_posts = [r for r in posts if down <= r.t and r.t + r.seconds < up]
    during_gets = [r for r in gets if down <= r.t and r.t + r.seconds < up]
    other_5xx = [r for r in records if r.status >= 500 and r.status != 503]
    no_answer = [r for r in records if r.status == 0]
    bad_503 = [r for r in records if r.status == 503 and (not r.json_body or r.code != STORE_DOWN_CODE)]
    recovered = [r.t + r.seconds for r in posts if r.t >= up and 200 <= r.status < 300]
    per_token: dict[str, int] = counts["per_token"]
    duplicates = sum(max(0, n - 1) for n in per_token.values())
    answered_nodes = {t.token: {a[2] for a in t.answers if a[1] == 201} for t in tokens}
    split_answers = sum(1 for nodes in answered_nodes.values() if len(nodes) > 1)
    node_of = {node: tok for node, tok in counts["node_token"].items() if tok}
    lost = sum(
        1 for tok, nodes in answered_nodes.items() if nodes and not any(node_of.get(n) == tok for n in nodes)
    )
    unanswered_nodes = sum(1 for tok, n in per_token.items() if n and not answered_nodes.get(tok))
    retried = [t for t in tokens if t.retried]
    # A retry the database guard answers carries Idempotent-Replayed like a store replay. memcached
    # restarts empty: a token's first 201 after the restart, when it had its 201 before, can only be
    # the guard's (later ones replay it from the store). Redis (AOF) restarts with its records.
    forgets = kind == "memcached"
    guard_answers = sum(1 for t in retried if forgets and _first_after_restart_repeats_a_201(t))
    replayed = sum(1 for t in retried for a in t.answers[1:] if a[1] == 201 and a[3]) - guard_answers
    in_flight_after = sum(
        1 for r in posts if r.t >= up and r.status == 409 and r.code == "idempotency.in-flight"
    )
    final = Counter(t.answers[-1][1] for t in retried)
    get_ok_during = sum(1 for r in during_gets if 200 <= r.status < 300)
    figures = {
        "store": kind,
        "seconds": seconds,
        "lease": lease,
        "kill_at": round(down, 2),
        "restart_at": round(up, 2),
        "requests": len(records),
        "by_phase": by_phase(records, rec),
        "token_requests_during": len(during_posts),
        "token_503_during": sum(1 for r in during_posts if r.status == 503),
        "token_statuses_during": dict(Counter(str(r.status) for r in during_posts)),
        "gets_during": len(during_gets),
        "get_success_during": round(100.0 * get_ok_during / len(during_gets), 2) if during_gets else None,
        "other_5xx": len(other_5xx),
        "no_answer": len(no_answer),
        "bad_503_bodies": len(bad_503),
        "tokens": len(tokens),
        "retried_tokens": len(retried),
        "replayed_from_store": replayed,
        "answered_by_db_guard": guard_answers,
        "in_flight_409_after_restart": in_flight_after,
        "final_retry_statuses": {str(k): v for k, v in sorted(final.items())},
        "nodes": counts["nodes_total"],
        "tokens_with_a_node": sum(1 for n in per_token.values() if n),
        "duplicates": duplicates,
        "answers_naming_two_nodes": split_answers,
        "acknowledged_but_missing": lost,
        "nodes_without_an_answer": unanswered_nodes,
        "recovery_seconds": round(min(recovered) - up, 3) if recovered else None,
        "load_errors": errors,
        "traceback_in_log": "Traceback" in output,
        "timeline_posts": timeline([r for r in posts if r.t <= seconds], bucket=seconds / 30),
        "timeline_gets": timeline([r for r in gets if r.t <= seconds], bucket=seconds / 30),
        "marks": {"store killed": round(down, 3), "restart": round(up, 3)},
        "samples_5xx": [r.body.decode(errors="replace")[:300] for r in other_5xx[:3]],
    }
    problems = []
    if figures["token_503_during"] != len(during_posts):
        problems.append(
            f"{kind}: token requests during the outage answered {figures['token_statuses_during']} "
            "(every one must be 503)"
        )
    if during_gets and get_ok_during != len(during_gets):
        problems.append(
            f"{kind}: {len(during_gets) - get_ok_during} of {len(during_gets)} GETs without a "
            "token failed during the outage"
        )
    if not during_posts or not during_gets:
        problems.append(f"{kind}: no requests were sent during the outage")
    for name in (
        "other_5xx",
        "no_answer",
        "bad_503_bodies",
        "duplicates",
        "answers_naming_two_nodes",
        "acknowledged_but_missing",
    ):
        if figures[name]:
            problems.append(f"{kind}: {name.replace('_', ' ')}: {figures[name]}")
    if figures["recovery_seconds"] is None:
        problems.append(f"{kind}: no token request succeeded after the restart")
    if final.get(409) or final.get(503) or final.get(0):
        problems.append(
            f"{kind}: retried tokens still unanswered at the end: {figures['final_retry_statuses']}"
        )
    if errors:
        problems.append(f"{kind}: load errors: {errors}")
    figures["problems"] = problems
    return figures


def run(ctx: Context) -> dict[str, Any]:
    seconds = ctx.pick(30.0, 4.0)
    lease = ctx.pick(15.0, 2.0)
    databases = {kind: ctx.database("postgresql") for kind in STORES}  # (migrations: one at a time)
    results: dict[str, dict[str, Any]] = {}
    if ctx.quick:  # both stores at once: the test suite's time budget
        crashes = run_threads(
            [
                lambda k=k: results.__setitem__(k, _one_store(ctx, k, databases[k], seconds, lease))
                for k in STORES
            ],
            timeout=seconds + 180,
        )
        if crashes:
            raise RuntimeError(f"a store's run crashed: {crashes}")
    else:
        for kind in STORES:
            results[kind] = _one_store(ctx, kind, databases[kind], seconds, lease)
    problems = [p for kind in STORES for p in results[kind]["problems"]]
    rows = []
    labels = [
        (
            "token POSTs before / during / after",
            lambda f: "{} / {} / {}".format(
                *(
                    sum(n for k in f["by_phase"] if k != "get" for n in f["by_phase"][k].get(p, {}).values())
                    for p in ("before", "during", "after")
                )
            ),
        ),
        (
            "token POSTs during the outage answered 503",
            lambda f: f"{f['token_503_during']} of {f['token_requests_during']}",
        ),
        (
            "GETs without a token during the outage: 2xx",
            lambda f: f"{f['get_success_during']} % of {f['gets_during']}",
        ),
        ("5xx other than 503 / no answer", lambda f: f"{f['other_5xx']} / {f['no_answer']}"),
        ("tokens used (retried)", lambda f: f"{f['tokens']} ({f['retried_tokens']})"),
        ("retries replayed by the store", lambda f: f["replayed_from_store"]),
        ("retries answered by the database guard", lambda f: f["answered_by_db_guard"]),
        (
            f"409 in-flight after the restart (lease {lease:g} s)",
            lambda f: f["in_flight_409_after_restart"],
        ),
        ("nodes created", lambda f: f["nodes"]),
        ("duplicates (tokens with 2+ nodes)", lambda f: f["duplicates"]),
        ("acknowledged creations missing", lambda f: f["acknowledged_but_missing"]),
        ("recovery after the restart (s)", lambda f: f["recovery_seconds"]),
    ]
    for label, value in labels:
        rows.append([label, *(value(results[k]) for k in STORES)])
    summary = "; ".join(
        f"{k}: {results[k]['token_503_during']}/{results[k]['token_requests_during']} token POSTs 503 "
        f"during the outage, GETs {results[k]['get_success_during']} % 2xx, "
        f"{results[k]['other_5xx']} other 5xx, {results[k]['duplicates']} duplicates over "
        f"{results[k]['tokens']} tokens ({results[k]['answered_by_db_guard']} retries answered by the "
        f"database guard), recovered in {results[k]['recovery_seconds']} s"
        for k in STORES
    )
    return {
        "ok": not problems,
        "summary": summary,
        "table": {"columns": ["figure", *STORES], "rows": rows},
        "problems": problems,
        "data": {k: {n: v for n, v in results[k].items() if n != "problems"} for k in STORES},
    }


def plot(result: dict[str, Any], out_dir: str | Path) -> list[str]:
    import matplotlib.pyplot as plt

    data = result["data"]
    fig, axes = plt.subplots(len(data), 2, figsize=(12, 3.6 * len(data)), squeeze=False)
    for row, (kind, figures) in enumerate(data.items()):
        plot_timeline(
            axes[row][0],
            figures["timeline_posts"],
            figures["marks"],
            f"{kind}: token POSTs (requests/s by status)",
        )
        plot_timeline(
            axes[row][1], figures["timeline_gets"], figures["marks"], f"{kind}: GETs without a token"
        )
    fig.tight_layout()
    name = "store_outage-timeline.png"
    fig.savefig(Path(out_dir) / name, dpi=90)
    plt.close(fig)
    return [name]
