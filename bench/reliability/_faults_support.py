"""Pieces shared by the fault scenarios (store_outage, worker_kill, db_restart): a timed
load recorder, fault helpers for the real servers, and the database checks of what the
service wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tests.servers import HOST, PostgresServer

EXTRA_KEY = "rel_token"  # the client token, in each node's extra


# -- faults --------------------------------------------------------------------------------
def fast_shutdown(server: PostgresServer, timeout: float = 30.0) -> None:
    """Stop PostgreSQL with a *fast* shutdown (SIGINT: open sessions are cut, in-flight
    transactions roll back), as ``pg_ctl stop -m fast`` does; SIGKILL if it hangs."""
    proc, server.proc = server.proc, None
    if proc is None or proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)


def durable_commits(server: PostgresServer, database: str) -> None:
    """Make *database*'s commits survive a server crash: the test servers run with
    ``synchronous_commit=off`` (a SIGKILL may then lose the last commits, which is the
    configuration's promise, not the service's); a per-database setting overrides it for
    every new session.  (``fsync=off`` stays: a process crash keeps the OS page cache.)"""
    import psycopg

    with psycopg.connect(
        f"host={HOST} port={server.port} user=postgres dbname=postgres", autocommit=True
    ) as conn:
        conn.execute(f'ALTER DATABASE "{database}" SET synchronous_commit = on')


def pg_connect(db_url: str) -> Any:
    """A psycopg connection (autocommit) to the service's PostgreSQL database *db_url*."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(db_url)
    return psycopg.connect(
        host=url.host, port=url.port, user=url.username, dbname=url.database, autocommit=True
    )


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


# -- the load --------------------------------------------------------------------------------
class Record:
    """One request as the load saw it: when (seconds since the load's start), what, the answer."""

    __slots__ = ("t", "kind", "status", "code", "seconds", "token", "json_body", "body")

    def __init__(
        self,
        t: float,
        kind: str,
        status: int,
        code: str,
        seconds: float,
        token: str | None = None,
        json_body: bool = True,
        body: bytes = b"",
    ) -> None:
        self.t = t
        self.kind = kind
        self.status = status
        self.code = code
        self.seconds = seconds
        self.token = token
        self.json_body = json_body
        self.body = body

    def as_row(self) -> list[Any]:
        return [round(self.t, 3), self.kind, self.status, self.code]


class Recorder:
    """Thread-safe list of :class:`Record` with the fault instants, by phase."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.records: list[Record] = []
        self.marks: dict[str, float] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.start

    def add(self, record: Record) -> None:
        with self._lock:
            self.records.append(record)

    def mark(self, name: str) -> float:
        t = self.now()
        self.marks[name] = t
        return t

    def phase(self, t: float, down: str = "down", up: str = "up") -> str:
        if t < self.marks.get(down, float("inf")):
            return "before"
        if t < self.marks.get(up, float("inf")):
            return "during"
        return "after"

    def snapshot(self) -> list[Record]:
        with self._lock:
            return list(self.records)


def reply_record(rec: Recorder, kind: str, sent: float, reply: Any, token: str | None = None) -> Record:
    """A :class:`Record` of a harness ``Reply`` sent at *sent* (seconds since the start)."""
    json_body = True
    if reply.status >= 400 and reply.status != 0:
        try:
            reply.json()
        except ValueError:
            json_body = False
    body = reply.body if reply.status >= 500 or reply.status == 0 else b""
    record = Record(
        sent,
        kind,
        reply.status,
        reply.error_code if reply.status >= 400 else "",
        reply.seconds,
        token,
        json_body,
        body[:2000],
    )
    rec.add(record)
    return record


def run_threads(targets: Iterable[Callable[[], None]], timeout: float) -> list[str]:
    """Run each target in a thread; join (bounded); the errors raised, as text."""
    errors: list[str] = []

    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except Exception as exc:  # a load thread's crash is a problem to report
                errors.append(f"{type(exc).__name__}: {exc}")

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in threads):
        errors.append("a load thread did not finish in time")
    return errors


# -- figures ---------------------------------------------------------------------------------
def by_phase(
    records: Sequence[Record], rec: Recorder, down: str = "down", up: str = "up", kinds: Sequence[str] = ()
) -> dict[str, dict[str, dict[str, int]]]:
    """{kind: {phase: {status: count}}} (statuses as strings, for JSON)."""
    out: dict[str, dict[str, Counter[str]]] = {}
    for r in records:
        if kinds and r.kind not in kinds:
            continue
        out.setdefault(r.kind, {}).setdefault(rec.phase(r.t, down, up), Counter())[str(r.status)] += 1
    return {k: {p: dict(sorted(c.items())) for p, c in v.items()} for k, v in out.items()}


def timeline(records: Sequence[Record], bucket: float = 0.5) -> dict[str, Any]:
    """Requests per second by status class over time: {"t": [...], "<class>": [...]}."""
    if not records:
        return {"t": [], "bucket": bucket}
    end = max(r.t for r in records)
    n = int(end / bucket) + 1
    classes = ("2xx", "409", "503", "other 4xx", "500 and other 5xx", "no answer")
    series = {c: [0.0] * n for c in classes}
    for r in records:
        i = min(n - 1, int(r.t / bucket))
        series[status_class(r.status)][i] += 1.0 / bucket
    return {
        "t": [round(i * bucket, 3) for i in range(n)],
        "bucket": bucket,
        **{c: [round(v, 1) for v in vs] for c, vs in series.items()},
    }


def status_class(status: int) -> str:
    if status == 0:
        return "no answer"
    if 200 <= status < 300:
        return "2xx"
    if status in (409, 503):
        return str(status)
    if 400 <= status < 500:
        return "other 4xx"
    return "500 and other 5xx"


CLASS_COLOURS = {
    "2xx": "tab:green",
    "409": "tab:orange",
    "503": "tab:blue",
    "other 4xx": "tab:purple",
    "500 and other 5xx": "tab:red",
    "no answer": "black",
}


def plot_timeline(ax: Any, series: dict[str, Any], marks: dict[str, float], title: str) -> None:
    """Stacked requests/s by status class, with the fault instants as vertical lines."""
    t = list(series.get("t") or [])
    if t:
        classes = [c for c in CLASS_COLOURS if any(series.get(c) or [])]
        t.append(t[-1] + series["bucket"])  # the last bucket's right edge
        ax.stackplot(
            t,
            *[[*series[c], series[c][-1]] for c in classes],
            labels=classes,
            colors=[CLASS_COLOURS[c] for c in classes],
            step="post",
            alpha=0.8,
        )
    for name, x in marks.items():
        ax.axvline(
            x,
            color="red" if "down" in name or "kill" in name or "stop" in name else "tab:green",
            linestyle="--",
            linewidth=1.2,
        )
        ax.annotate(
            name, (x, 1.0), xycoords=("data", "axes fraction"), rotation=90, va="top", ha="right", fontsize=8
        )
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("seconds since the load started")
    ax.set_ylabel("requests/s")
    ax.legend(loc="upper right", fontsize=7)


def node_counts(db_url: str) -> dict[str, Any]:
    """What the service wrote, read straight from PostgreSQL: nodes per client token (from the
    node's ``extra``), and the recorded client tokens (``client_tokens``, migration 0008)."""
    with pg_connect(db_url) as conn:
        per_token = dict(
            conn.execute(
                "SELECT extra::json->>%s, count(*) FROM nodes WHERE extra::json->>%s IS NOT NULL GROUP BY 1",
                (EXTRA_KEY, EXTRA_KEY),
            ).fetchall()
        )
        nodes_total = conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
        token_rows = conn.execute(
            "SELECT token, resource_id FROM client_tokens WHERE resource_kind = 'node'"
        ).fetchall()
        node_uuids = {
            row[0]: row[1]
            for row in conn.execute("SELECT uuid, extra::json->>%s FROM nodes", (EXTRA_KEY,)).fetchall()
        }
    recorded = {token: resource for token, resource in token_rows}
    return {
        "per_token": per_token,
        "nodes_total": nodes_total,
        "recorded": recorded,
        "node_token": node_uuids,
    }
