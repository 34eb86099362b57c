"""Writers that race to the *same* new state: If-Match must let exactly one of them win.

A compare-and-swap that calls "the row already holds the etag I was about to write" a
success lets two clients that read the same state and computed the same new state both
get 2xx, and a read-modify-write counter loses increments.  Each test here fails on such
a primitive; the model-based one checks every interleaving Hypothesis draws.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, create_engine

from apimw.etag import parse_if_match
from apimw.etag_db import (
    ConcurrentUpdate,
    ResourceGone,
    StaleEtag,
    cas_update,
    delete_if_match,
    update_if_match,
)
from tests.servers import Server
from tests.test_etag_db import NODE_UUID, etag_of, load, make_table, seed

KEY = {"uuid": NODE_UUID}


@pytest.fixture(params=["sqlite", "postgresql", "postgresql-repeatable-read"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, Any]]:
    table = make_table()
    if request.param == "sqlite":
        engine = create_engine(f"sqlite:///{tmp_path / 'race.db'}", connect_args={"timeout": 30},
                               pool_size=20, max_overflow=0)  # fmt: skip
    else:
        server: Server = request.getfixturevalue("postgres_server")
        isolation = "REPEATABLE READ" if request.param.endswith("repeatable-read") else "READ COMMITTED"
        engine = create_engine(server.url, pool_size=20, max_overflow=0,  # type: ignore[attr-defined]
                               isolation_level=isolation)  # fmt: skip
    table.metadata.create_all(engine)
    try:
        yield engine, table
    finally:
        table.metadata.drop_all(engine)
        engine.dispose()


def test_cas_update_of_a_row_that_already_holds_the_new_state_is_stale(db: tuple[Engine, Any]) -> None:
    """Two writers read the same row and compute the same new state: the second CAS lost."""
    engine, table = db
    original = seed(engine, table)
    new_tag = etag_of({**original, "name": "same"})
    with engine.begin() as conn:
        assert cas_update(conn, table, KEY, {"name": "same", "etag": new_tag},
                          expected=[original["etag"]]) == "updated"  # fmt: skip
    with engine.begin() as conn:
        # the row holds exactly what this writer wanted, but not the state it read
        assert cas_update(conn, table, KEY, {"name": "same", "etag": new_tag},
                          expected=[original["etag"]]) == "stale"  # fmt: skip


def test_identical_concurrent_patches_with_one_if_match_have_one_winner(db: tuple[Engine, Any]) -> None:
    engine, table = db
    original = seed(engine, table)
    writers = 8
    read_done = threading.Barrier(writers, timeout=60)

    def one(_: int) -> int:
        first = [True]

        def changes(row: dict[str, Any]) -> dict[str, Any]:
            if first[0]:
                first[0] = False
                read_done.wait()  # everybody has read the original row before anybody writes
            return {"name": "the same new name"}

        try:
            update_if_match(engine, table, KEY, changes, if_match=parse_if_match(original["etag"]),
                            etag_of=etag_of, backoff=0.001)  # fmt: skip
        except StaleEtag:
            return 412
        return 200

    with ThreadPoolExecutor(writers) as pool:
        statuses = Counter(pool.map(one, range(writers)))
    assert statuses == {200: 1, 412: writers - 1}


def test_read_modify_write_counter_loses_nothing_with_if_match(db: tuple[Engine, Any]) -> None:
    """Clients GET, add one, write back under If-Match, retry on 412: final == successes."""
    engine, table = db
    seed(engine, table)
    clients, cycles = 6, 8

    def client(_: int) -> int:
        done = 0
        for _cycle in range(cycles):
            for _attempt in range(500):
                row = load(engine, table)
                assert row is not None
                value = row["extra"].get("counter", 0)
                try:
                    update_if_match(engine, table, KEY,
                                    lambda cur, v=value: {"extra": {**cur["extra"], "counter": v + 1}},
                                    if_match=parse_if_match(row["etag"]), etag_of=etag_of,
                                    backoff=0.001)  # fmt: skip
                except StaleEtag:
                    continue
                done += 1
                break
        return done

    with ThreadPoolExecutor(clients) as pool:
        successes = sum(pool.map(client, range(clients)))
    final = load(engine, table)
    assert final is not None
    assert successes == clients * cycles
    assert final["extra"]["counter"] == successes
    assert final["etag"] == etag_of(final)


# -- model-based: any interleaving of reads and writes, writers often agreeing -----------------


@dataclass
class Writer:
    """One in-flight update_if_match / delete_if_match, paused after its read."""

    kind: str  # "set" (a value from a tiny set, so writers agree often) or "incr" or "delete"
    value: int
    presented: str  # the If-Match the client sent: the etag it saw at its GET
    release: threading.Event = field(default_factory=threading.Event)
    read: threading.Event = field(default_factory=threading.Event)
    outcome: list[str] = field(default_factory=list)
    thread: threading.Thread | None = None


def _start(engine: Engine, table: Any, writer: Writer) -> None:
    def changes(row: dict[str, Any]) -> dict[str, Any]:
        if not writer.read.is_set():
            writer.read.set()
            assert writer.release.wait(30)
        if writer.kind == "incr":
            return {"extra": {**row["extra"], "n": row["extra"].get("n", 0) + 1}}
        return {"extra": {**row["extra"], "n": writer.value}}

    def run() -> None:
        try:
            if writer.kind == "delete":
                writer.read.set()
                assert writer.release.wait(30)
                delete_if_match(engine, table, KEY, if_match=parse_if_match(writer.presented), backoff=0.001)
            else:
                update_if_match(engine, table, KEY, changes, if_match=parse_if_match(writer.presented),
                                etag_of=etag_of, backoff=0.001)  # fmt: skip
        except StaleEtag:
            writer.outcome.append("stale")
        except ResourceGone:
            writer.outcome.append("gone")
        except ConcurrentUpdate:  # pragma: no cover - never with If-Match
            writer.outcome.append("conflict")
        else:
            writer.outcome.append("ok")
        writer.read.set()  # a writer that failed before its changes ran (the row was gone)

    writer.thread = threading.Thread(target=run, daemon=True)
    writer.thread.start()
    assert writer.read.wait(30)


_OPS = st.lists(
    st.tuples(st.sampled_from(["start", "start", "start", "finish", "finish"]),
              st.sampled_from(["set", "set", "set", "incr", "delete"]), st.integers(0, 1)),
    min_size=2, max_size=14,
)  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_every_success_is_a_transition_from_the_presented_state(tmp_path: Path, ops: list[Any]) -> None:
    """Model: a write succeeds iff the row's etag, when it writes, is the one its client presented."""
    table = make_table()
    engine = create_engine(f"sqlite:///{tmp_path / 'model.db'}", connect_args={"timeout": 30})
    table.metadata.create_all(engine)
    try:
        _check_interleaving(engine, table, ops)
    finally:
        table.metadata.drop_all(engine)
        engine.dispose()


def test_interleavings_on_postgresql(postgres_server: Server) -> None:
    """The same model on PostgreSQL (read committed) for a fixed set of nasty schedules."""
    schedules: list[list[Any]] = [
        [("start", "set", 1), ("start", "set", 1), ("finish", "", 0), ("finish", "", 0)],
        [("start", "incr", 0), ("start", "incr", 0), ("start", "incr", 0), ("finish", "", 0),
         ("finish", "", 0), ("finish", "", 0)],
        [("start", "set", 0), ("start", "delete", 0), ("finish", "", 0), ("finish", "", 0)],
        [("start", "delete", 0), ("start", "set", 1), ("finish", "", 0), ("finish", "", 0)],
    ]
    for isolation in ("READ COMMITTED", "REPEATABLE READ"):
        for ops in schedules:
            table = make_table()
            engine = create_engine(postgres_server.url, isolation_level=isolation)  # type: ignore[attr-defined]
            table.metadata.create_all(engine)
            try:
                _check_interleaving(engine, table, ops)
            finally:
                table.metadata.drop_all(engine)
                engine.dispose()


def _check_interleaving(engine: Engine, table: Any, ops: list[Any]) -> None:
    seed(engine, table)
    pending: list[Writer] = []
    for op, kind, value in ops:
        row = load(engine, table)
        if op == "start":
            if row is None:
                continue
            writer = Writer(kind, value, presented=row["etag"])
            _start(engine, table, writer)
            pending.append(writer)
        elif pending:
            writer = pending.pop(0)
            _finish(writer, row, engine, table)
    for writer in pending:
        _finish(writer, load(engine, table), engine, table)


def _finish(writer: Writer, before: dict[str, Any] | None, engine: Engine, table: Any) -> None:
    writer.release.set()
    assert writer.thread is not None
    writer.thread.join(30)
    assert not writer.thread.is_alive()
    after = load(engine, table)
    (outcome,) = writer.outcome
    if before is None:
        assert outcome == "gone"
        return
    expected = "ok" if before["etag"] == writer.presented else "stale"
    assert outcome == expected, (writer, before, after)
    if outcome != "ok":
        assert after == before  # a loser wrote nothing
    elif writer.kind == "delete":
        assert after is None
    else:
        assert after is not None
        want = before["extra"].get("n", 0) + 1 if writer.kind == "incr" else writer.value
        assert after["extra"]["n"] == want
        assert after["etag"] == etag_of(after)
