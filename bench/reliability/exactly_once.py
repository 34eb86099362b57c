"""64 clients send the same `POST /v1/nodes` with the same `X-Client-Token` at the same
instant, once per round, with a fresh token each round.  The service runs under gunicorn with
2 worker processes (64 threads each, so every one of the 64 requests is being served at once
whichever worker its connection landed on) on PostgreSQL, with Redis and then memcached as
the replay store.  The 64 keep-alive connections are opened (and spread over both workers)
before the first round and kept across rounds, so connection set-up is not in the latencies;
a barrier releases the 64 requests together.

What it proves: one token is executed once, across processes and under contention.  The
nodes are counted in the database (rows tagged with the round's token, not 201 answers):
"created" must equal the number of rounds and "duplicates" (rows beyond one per token) must
be 0.  The 63 losers of each round must each get either the winner's answer replayed (201,
`Idempotent-Replayed: true`, the same node uuid) or 409 `idempotency.in-flight` with a
`Retry-After` header (the winner was still running); "other" counts anything else and must be 0,
as must 5xx and connection errors.

How to read the table: one row per store.  "in-flight 409" and "replayed 201" split the
losers; which one a loser gets depends only on whether it reached the store before or after the
winner's answer was recorded.  Latencies are per request, in milliseconds, measured by the
client from the barrier's release to the end of the answer; the winner's include creating the
node in PostgreSQL.  "workers" is how many gunicorn worker processes answered (the 64
connections are split 32/32, and every round is checked to have been answered by both).  The
plot shows the losers' latency distribution (CDF) per store and per answer.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

from bench.reliability._harness import Client, Context, Reply, ms, percentiles
from bench.reliability._once_support import PID_HEADER, ReplyCounts, connect_spread
from tests.example.production_support import Gunicorn

TITLE = "Exactly once under load"

STORES = ("redis", "memcached")
CONCURRENCY = 64
WORKERS = 2
#: threads per worker: all 64 requests in flight at once even if every connection landed on one worker
THREADS = 64
IN_FLIGHT = "idempotency.in-flight"
#: the node's ``extra`` key that tags a round's rows with its token (nodes are counted by it)
TAG = "reliability_exactly_once"
KINDS = ("replayed", "in_flight", "other")


def _dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def rows_per_token(database: str, tokens: list[str]) -> dict[str, list[str]]:
    """The node uuids in *database* tagged with each of *tokens* (what was really created)."""
    found: dict[str, list[str]] = {t: [] for t in tokens}
    with psycopg.connect(_dsn(database)) as conn:
        for tag, node in conn.execute(
            "SELECT extra->>%s, uuid FROM nodes WHERE extra ? %s ORDER BY id", (TAG, TAG)
        ):
            found.setdefault(tag, []).append(str(node))
    return found


def _uuid(reply: Reply) -> str:
    try:
        return str(reply.json()["uuid"])
    except (ValueError, KeyError, TypeError):
        return ""


class _Tally(ReplyCounts):
    """What one store's rounds showed."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: Counter[str] = Counter()  # winner / replayed / in_flight / other
        self.other: Counter[str] = Counter()  # "status code" of the other answers
        self.executions = 0  # 201s that were not replays (the app ran)
        self.replay_uuid_mismatch = 0
        self.in_flight_without_retry_after = 0
        self.latency: dict[str, list[float]] = {"winner": [], **{k: [] for k in KINDS}}
        self.winner_uuids: dict[str, str] = {}
        self.crossed_rounds = 0  # rounds answered by more than one worker process

    def round(self, token: str, replies: list[Reply]) -> None:
        pids = {r.headers[PID_HEADER] for r in replies if PID_HEADER in r.headers}
        self.crossed_rounds += len(pids) > 1
        for reply in replies:
            self.count(reply)
        originals = [r for r in replies if r.status == 201 and r.headers.get("idempotent-replayed") != "true"]
        self.executions += len(originals)
        winner = originals[0] if originals else None
        if winner is not None:
            self.answers["winner"] += 1
            self.latency["winner"].append(ms(winner.seconds))
            self.winner_uuids[token] = _uuid(winner)
        for reply in replies:
            if reply is winner:
                continue
            if reply.status == 201 and reply.headers.get("idempotent-replayed") == "true":
                if winner is not None and _uuid(reply) != self.winner_uuids[token]:
                    self.replay_uuid_mismatch += 1
                    kind = "other"
                else:
                    kind = "replayed"
            elif reply.status == 409 and reply.error_code == IN_FLIGHT:
                if "retry-after" in reply.headers:
                    kind = "in_flight"
                else:
                    self.in_flight_without_retry_after += 1
                    kind = "other"
            else:
                kind = "other"
            if kind == "other":
                self.other[f"{reply.status} {reply.error_code}".strip()] += 1
            self.answers[kind] += 1
            self.latency[kind].append(ms(reply.seconds))


def _burst(clients: list[Client], pool: ThreadPoolExecutor, token: str, body: dict[str, Any]) -> list[Reply]:
    barrier = threading.Barrier(len(clients))
    headers = {"X-Client-Token": token}

    def one(client: Client) -> Reply:
        barrier.wait(timeout=60)
        return client.post("/v1/nodes", body, headers=headers)

    return list(pool.map(one, clients))


def _store_run(gun: Gunicorn, store: str, rounds: int) -> dict[str, Any]:
    database = gun.db
    tally = _Tally()
    tokens: list[str] = []
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        clients = [Client(gun.url, timeout=60) for _ in range(CONCURRENCY)]
        try:
            spread = connect_spread(clients, WORKERS)
            for _ in range(rounds):
                token = uuid.uuid4().hex
                tokens.append(token)
                body = {"driver": "fake-hardware", "extra": {TAG: token}}
                tally.round(token, _burst(clients, pool, token, body))
        finally:
            for client in clients:
                client.close()
    rows = rows_per_token(database, tokens)
    created = sum(len(rows.get(t, [])) for t in tokens)
    duplicates = sum(max(0, len(rows.get(t, [])) - 1) for t in tokens)
    missing = sum(1 for t in tokens if not rows.get(t))
    # the answer the clients got names the node that is in the database
    wrong_uuid = sum(1 for t, u in tally.winner_uuids.items() if rows.get(t) and u not in rows[t])
    return {
        "store": store,
        "rounds": rounds,
        "created": created,
        "duplicates": duplicates,
        "missing": missing,
        "executions": tally.executions,
        "answers": dict(tally.answers),
        "other": dict(tally.other),
        "server_errors": tally.server_errors,
        "connection_errors": tally.connection_errors,
        "replay_uuid_mismatch": tally.replay_uuid_mismatch,
        "in_flight_without_retry_after": tally.in_flight_without_retry_after,
        "winner_uuid_not_in_db": wrong_uuid,
        "workers_answering": len(tally.pids),
        "rounds_across_workers": tally.crossed_rounds,
        "connections_per_worker": sorted(spread.values(), reverse=True),
        "latency_ms": {k: percentiles(v) for k, v in tally.latency.items()},
        "latencies_ms": tally.latency,
    }


def _problems(r: dict[str, Any]) -> list[str]:
    s = r["store"]
    out = []
    if r["created"] != r["rounds"]:
        out.append(
            f"{s}: {r['created']} nodes in the database for {r['rounds']} tokens "
            f"({r['missing']} tokens created nothing)"
        )
    if r["duplicates"]:
        out.append(f"{s}: {r['duplicates']} duplicate nodes (rows beyond one per token)")
    if r["executions"] != r["rounds"]:
        out.append(f"{s}: the app ran {r['executions']} times (non-replayed 201s) for {r['rounds']} tokens")
    if r["server_errors"]:
        out.append(f"{s}: {r['server_errors']} 5xx answers")
    if r["connection_errors"]:
        out.append(f"{s}: {r['connection_errors']} connection errors")
    if r["answers"].get("other"):
        out.append(
            f"{s}: {r['answers']['other']} losers answered neither by a replay of the winner nor by "
            f"409 in-flight with Retry-After: {r['other']}"
        )
    if r["winner_uuid_not_in_db"]:
        out.append(f"{s}: {r['winner_uuid_not_in_db']} winners named a node that is not in the database")
    if r["workers_answering"] < WORKERS or r["rounds_across_workers"] < r["rounds"]:
        out.append(
            f"{s}: {r['workers_answering']} of {WORKERS} worker processes answered; "
            f"{r['rounds_across_workers']} of {r['rounds']} rounds crossed processes"
        )
    return out


def run(ctx: Context) -> dict[str, Any]:
    rounds = ctx.pick(100, 3)
    database = ctx.database("postgresql")  # one for both stores: rows are told apart by their token
    stores = {store: ctx.store_url(store) for store in STORES}
    with ThreadPoolExecutor(len(STORES)) as starting:  # start-up in parallel: the quick version's budget
        started = starting.map(
            lambda s: ctx.gunicorn(database, stores[s], workers=WORKERS, threads=THREADS), STORES
        )
        services = dict(zip(STORES, started, strict=True))
    results = [_store_run(services[store], store, rounds) for store in STORES]
    problems = [p for r in results for p in _problems(r)]
    losers = rounds * (CONCURRENCY - 1)
    rows = []
    for r in results:
        lat = r["latency_ms"]

        def cell(kind: str, point: str, lat: dict[str, Any] = lat) -> Any:
            return lat[kind].get(point, "-")

        rows.append([
            r["store"], r["rounds"], r["created"], r["duplicates"], r["server_errors"],
            r["connection_errors"],
            r["answers"].get("in_flight", 0), r["answers"].get("replayed", 0), r["answers"].get("other", 0),
            r["workers_answering"],
            f"{cell('winner', 'p50')} / {cell('winner', 'p99')} / {cell('winner', 'max')}",
            f"{cell('in_flight', 'p50')} / {cell('in_flight', 'p90')} / {cell('in_flight', 'p99')} / "
            f"{cell('in_flight', 'max')}",
            f"{cell('replayed', 'p50')} / {cell('replayed', 'p90')} / {cell('replayed', 'p99')} / "
            f"{cell('replayed', 'max')}",
        ])  # fmt: skip
    summary = "; ".join(
        f"{r['store']}: {r['created']} nodes for {r['rounds']} tokens x {CONCURRENCY} concurrent POSTs, "
        f"{r['duplicates']} duplicates, {r['server_errors']} 5xx, losers {r['answers'].get('in_flight', 0)} "
        f"in-flight 409 + {r['answers'].get('replayed', 0)} replays of {losers}"
        for r in results
    )
    return {
        "ok": not problems,
        "summary": summary,
        "table": {
            "columns": [
                "store",
                "rounds",
                "created",
                "duplicates",
                "5xx",
                "conn. errors",
                "in-flight 409",
                "replayed 201",
                "other",
                "workers",
                "winner ms p50/p99/max",
                "409 ms p50/p90/p99/max",
                "replay ms p50/p90/p99/max",
            ],
            "rows": rows,
        },
        "problems": problems,
        "data": {"concurrency": CONCURRENCY, "workers": WORKERS, "threads": THREADS, "stores": results},
    }


def plot(result: dict[str, Any], out_dir: Path) -> list[str]:
    import matplotlib.pyplot as plt

    stores = result["data"]["stores"]
    fig, axes = plt.subplots(1, len(stores), figsize=(6 * len(stores), 4.2), sharey=True, squeeze=False)
    labels = {"in_flight": "409 in-flight", "replayed": "201 replayed", "other": "other", "winner": "winner"}
    for ax, r in zip(axes[0], stores, strict=True):
        for kind in ("in_flight", "replayed", "winner", "other"):
            values = sorted(r["latencies_ms"].get(kind) or [])
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, ys, where="post", label=f"{labels[kind]} (n={len(values)})")
        ax.set_xscale("log")
        ax.set_xlabel("latency (ms, log scale)")
        ax.set_title(
            f"{r['store']}: {r['rounds']} rounds x {result['data']['concurrency']} POSTs, one token each"
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right")
    axes[0][0].set_ylabel("fraction of answers (CDF)")
    fig.tight_layout()
    name = "exactly_once-latency.png"
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    return [name]
