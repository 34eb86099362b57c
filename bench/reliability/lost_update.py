"""One node holds a counter in `extra` (`/extra/counter`).  N clients each run M
read-modify-write cycles on it at the same time: GET the node (its `ETag`), then PATCH
`/extra/counter` to the value read plus one with `If-Match: <etag>`; a 412 (someone wrote in
between) sends the client back to read again, a bounded number of times.  The service runs under
gunicorn with 2 worker processes (the clients' keep-alive connections split evenly between them),
on SQLite and on PostgreSQL.  Then the same clients run the same cycles on the same node
*without* If-Match: a plain read-modify-write.

What it proves: with If-Match no increment is lost, across processes, on both databases: the
final counter equals the number of successful PATCHes, which equals N x M (every client got all
its writes in).  The check of the etag is repeated in the database's `UPDATE`, so two writers that
both read the same version cannot both succeed.  The run without If-Match is the control: the
same clients, the same node, and increments are lost (two clients read the same value and both
write value + 1), which shows the check is what makes the difference and that the measurement
can see a loss.

How to read the table: one row per database and mode.  "cycles" is N x M, "successes" the
PATCHes answered 200, "412 retries" how often a client had to read again because its etag was
stale, "409 retries" how often a PATCH was answered 409 `baremetal.conflict` (the service retries
its own compare-and-set write 20 times, then asks the client to retry; the client reads again: this
happens only to plain PATCHes racing many others), "final" the counter read back at the end,
"lost" successes minus final (must be 0 with If-Match; without it, the figure that shows the
failure).  The plot compares the final value with the expected one.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.reliability._harness import Client, Context
from bench.reliability._once_support import ReplyCounts, connect_spread
from tests.example.production_support import Gunicorn

TITLE = "No lost update"

BACKENDS = ("sqlite", "postgresql")
MODES = ("if-match", "no if-match")
WORKERS = 2
#: a client that loses this many times in a row on one cycle gives up (counted, fails the run)
MAX_ATTEMPTS = 500
PATH = "/extra/counter"
#: the service's answer to a write that lost its internal compare-and-set MAX_WRITE_ATTEMPTS times in a row
CONFLICT = "baremetal.conflict"
COLORS = {"if-match": "#2a7ab9", "no if-match": "#d9534f"}


class _Tally(ReplyCounts):
    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.successes = 0
        self.retries = 0  # 412s
        self.conflicts = 0  # 409 baremetal.conflict: the service's own write lost every race; "please retry"
        self.other: Counter[str] = Counter()
        self.gave_up = 0



def _patch(value: int) -> list[dict[str, Any]]:
    return [{"op": "add", "path": PATH, "value": value}]


def _client(
    client: Client, node: str, cycles: int, if_match: bool, tally: _Tally, barrier: threading.Barrier
) -> None:
    path = f"/v1/nodes/{node}"
    successes = retries = conflicts = gave_up = 0
    barrier.wait(timeout=60)
    for _cycle in range(cycles):
        for _attempt in range(MAX_ATTEMPTS):
            got = client.get(path)
            with tally.lock:
                tally.count(got)
            if got.status != 200:
                if 0 < got.status < 500:
                    with tally.lock:
                        tally.other[f"GET {got.status} {got.error_code}".strip()] += 1
                continue
            value = int(got.json()["extra"].get("counter", 0))
            headers = {"If-Match": got.headers["etag"]} if if_match else {}
            put = client.request("PATCH", path, _patch(value + 1), headers=headers)
            with tally.lock:
                tally.count(put)
            if put.status == 200:
                successes += 1
                break
            if put.status == 412 and if_match:
                retries += 1
                continue
            if put.status == 409 and put.error_code == CONFLICT:
                conflicts += 1
                continue
            if 0 < put.status < 500:
                with tally.lock:
                    tally.other[f"PATCH {put.status} {put.error_code}".strip()] += 1
        else:
            gave_up += 1
    with tally.lock:
        tally.successes += successes
        tally.retries += retries
        tally.conflicts += conflicts
        tally.gave_up += gave_up


def _mode(gun: Gunicorn, node: str, clients: int, cycles: int, *, if_match: bool) -> dict[str, Any]:
    tally = _Tally()
    opened = [Client(gun.url, timeout=60) for _ in range(clients)]
    try:
        spread = connect_spread(opened, WORKERS)
        barrier = threading.Barrier(clients)
        start = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            for done in [pool.submit(_client, c, node, cycles, if_match, tally, barrier) for c in opened]:
                done.result()
        seconds = time.monotonic() - start
        # read back on a fresh connection: a client done early may have idled past keep-alive
        with Client(gun.url) as reader:
            final = reader.get(f"/v1/nodes/{node}")
        tally.count(final)
    finally:
        for client in opened:
            client.close()
    value = int(final.json()["extra"]["counter"]) if final.status == 200 else -1
    return {
        "mode": "if-match" if if_match else "no if-match",
        "clients": clients,
        "cycles": clients * cycles,
        "successes": tally.successes,
        "retries_412": tally.retries,
        "conflicts_409": tally.conflicts,
        "final": value,
        "lost": tally.successes - value,
        "gave_up": tally.gave_up,
        "server_errors": tally.server_errors,
        "connection_errors": tally.connection_errors,
        "other": dict(tally.other),
        "workers_answering": len(tally.pids),
        "connections_per_worker": sorted(spread.values(), reverse=True),
        "seconds": round(seconds, 2),
    }


def _backend(gun: Gunicorn, backend: str, clients: int, cycles: int) -> list[dict[str, Any]]:
    # a fresh connection for each set-up request (gunicorn closes keep-alive connections idle for 5 s)
    with Client(gun.url) as admin:
        created = admin.post("/v1/nodes", {"driver": "fake-hardware", "extra": {"counter": 0}})
        if created.status != 201:
            raise RuntimeError(
                f"{backend}: could not create the node: {created.status} {created.body[:500]!r}"
            )
        node = created.json()["uuid"]
    rows = [_mode(gun, node, clients, cycles, if_match=True)]
    with Client(gun.url) as admin:
        reset = admin.request("PATCH", f"/v1/nodes/{node}", _patch(0))
        if reset.status != 200:
            raise RuntimeError(f"{backend}: could not reset the counter: {reset.status} {reset.body[:500]!r}")
    rows.append(_mode(gun, node, clients, cycles, if_match=False))
    for row in rows:
        row["backend"] = backend
    return rows


def _problems(r: dict[str, Any]) -> list[str]:
    where = f"{r['backend']}, {r['mode']}"
    out = []
    if r["server_errors"]:
        out.append(f"{where}: {r['server_errors']} 5xx answers")
    if r["connection_errors"]:
        out.append(f"{where}: {r['connection_errors']} connection errors")
    if r["other"]:
        out.append(f"{where}: unexpected answers {r['other']}")
    if r["gave_up"]:
        out.append(f"{where}: {r['gave_up']} cycles gave up after {MAX_ATTEMPTS} attempts")
    if r["workers_answering"] < WORKERS:
        out.append(f"{where}: only {r['workers_answering']} of {WORKERS} worker processes answered")
    if r["mode"] == "if-match" and not r["final"] == r["successes"] == r["cycles"]:
        out.append(
            f"{where}: final counter {r['final']}, {r['successes']} successful PATCHes, "
            f"{r['cycles']} cycles: {r['lost']} increments lost"
        )
    if r["mode"] == "no if-match" and r["successes"] != r["cycles"]:
        out.append(f"{where}: {r['successes']} of {r['cycles']} plain PATCHes succeeded")
    return out


def run(ctx: Context) -> dict[str, Any]:
    clients = ctx.pick(8, 4)
    cycles = ctx.pick(50, 8)
    store = ctx.store_url("memcached")  # required by 2 processes; no request here carries a token
    databases = {backend: ctx.database(backend) for backend in BACKENDS}
    with ThreadPoolExecutor(len(BACKENDS)) as starting:  # start-up in parallel: the quick version's budget
        started = starting.map(
            lambda b: ctx.gunicorn(databases[b], store, workers=WORKERS, threads=clients), BACKENDS
        )
        services = dict(zip(BACKENDS, started, strict=True))
    results = [row for backend in BACKENDS for row in _backend(services[backend], backend, clients, cycles)]
    problems = [p for r in results for p in _problems(r)]
    blind = [r for r in results if r["mode"] == "no if-match"]
    guarded = [r for r in results if r["mode"] == "if-match"]
    summary = (
        f"{clients} clients x {cycles} read-modify-write cycles, 2 gunicorn workers. With If-Match: "
        + ", ".join(f"{r['backend']} final {r['final']} = {r['successes']} successes "
                    f"({r['retries_412']} 412 retries), {r['lost']} lost" for r in guarded)
        + ". Without If-Match: "
        + ", ".join(f"{r['backend']} final {r['final']} of {r['successes']}, {r['lost']} lost" for r in blind)
        + ("" if all(r["lost"] for r in blind) else
           " (a run without If-Match that lost nothing did not show the race this time)")
        + f". 5xx: {sum(r['server_errors'] for r in results)}; "
        + f"409 conflict retries: {sum(r['conflicts_409'] for r in results)}."
    )  # fmt: skip
    return {
        "ok": not problems,
        "summary": summary,
        "table": {
            "columns": [
                "database",
                "mode",
                "cycles",
                "successes",
                "412 retries",
                "409 retries",
                "final",
                "lost",
                "5xx",
                "seconds",
            ],
            "rows": [
                [
                    r["backend"],
                    r["mode"],
                    r["cycles"],
                    r["successes"],
                    r["retries_412"],
                    r["conflicts_409"],
                    r["final"],
                    r["lost"],
                    r["server_errors"],
                    r["seconds"],
                ]
                for r in results
            ],
        },  # fmt: skip
        "problems": problems,
        "data": {"clients": clients, "cycles_per_client": cycles, "workers": WORKERS, "rows": results},
    }


def plot(result: dict[str, Any], out_dir: Path) -> list[str]:
    import matplotlib.pyplot as plt

    rows = result["data"]["rows"]
    labels = [f"{r['backend']}\n{r['mode']}" for r in rows]
    xs = list(range(len(rows)))
    width = 0.38
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    ax.bar(
        [x - width / 2 for x in xs],
        [r["cycles"] for r in rows],
        width,
        label="expected (N x M)",
        color="#bbbbbb",
    )
    bars = ax.bar(
        [x + width / 2 for x in xs],
        [r["final"] for r in rows],
        width,
        color=[COLORS[r["mode"]] for r in rows],
    )
    for mode, color in COLORS.items():  # legend entries for the two colours
        ax.bar([0], [0], 0, color=color, label=f"final counter, {mode}")
    for bar, r in zip(bars, rows, strict=True):
        ax.annotate(
            f"{r['final']}" + (f"\n({r['lost']} lost)" if r["lost"] else ""),
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(xs, labels)
    ax.set_ylabel("counter")
    ax.set_ylim(0, max(r["cycles"] for r in rows) * 1.4)
    ax.set_title(
        f"{result['data']['clients']} clients x {result['data']['cycles_per_client']} "
        "read-modify-write cycles, 2 workers"
    )
    ax.legend(loc="upper center", ncols=3, fontsize=8)
    fig.tight_layout()
    name = "lost_update-final.png"
    fig.savefig(out_dir / name, dpi=110)
    plt.close(fig)
    return [name]
