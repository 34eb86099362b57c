"""The atomic half: conditional UPDATE/DELETE on real SQLite and PostgreSQL, through the middleware."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import OperationalError
from webob import Request

from apimw.etag import ENVIRON_IF_MATCH, ETagGenerator, ETagMiddleware, parse_if_match, set_response_etag
from apimw.etag_db import (
    ConcurrentUpdate,
    ResourceGone,
    StaleEtag,
    cas_update,
    delete_if_match,
    is_retryable,
    update_if_match,
)
from tests.servers import Server
from tests.wsgi import run

KEY = "db-test-deployment-secret-0123456789"
GEN = ETagGenerator(key=KEY)
THREADS = 32
NODE_UUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
CREATED = dt.datetime(2026, 11, 1, 8, 30, 15, 123456, tzinfo=dt.UTC)


def etag_of(row: Any) -> str:
    return GEN.etag(row, "node")


def make_table() -> Table:
    json_type = JSON().with_variant(JSONB(), "postgresql")
    return Table(
        f"nodes_{uuid.uuid4().hex[:10]}",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("uuid", String(36), unique=True, nullable=False),
        Column("name", String(255)),
        Column("extra", json_type, nullable=False),
        Column("properties", json_type, nullable=False),
        Column("driver_internal_info", json_type, nullable=False),
        Column("created_at", DateTime(timezone=True)),
        Column("updated_at", DateTime(timezone=True)),
        Column("etag", String(132), nullable=False),
    )


def seed(engine: Engine, table: Table) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": 1,
        "uuid": NODE_UUID,
        "name": "node-1",
        "extra": {"z": 1, "a": {"nested": [1, 2.5, None]}},
        "properties": {"memory_mb": 262144, "cpus": 32, "ratio": 100.0},
        "driver_internal_info": {},
        "created_at": CREATED,
        "updated_at": None,
    }
    doc["etag"] = etag_of(doc)
    with engine.begin() as conn:
        conn.execute(insert(table).values(**doc))
    return doc


def load(engine: Engine, table: Table) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(select(table).where(table.c.uuid == NODE_UUID)).mappings().first()
    return None if row is None else dict(row)


@pytest.fixture(params=["sqlite", "postgresql", "postgresql-repeatable-read"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, Table]]:
    table = make_table()
    if request.param == "sqlite":
        engine = create_engine(
            f"sqlite:///{tmp_path / 'etag.db'}", connect_args={"timeout": 30},
            pool_size=THREADS + 4, max_overflow=0,
        )  # fmt: skip
    else:
        server: Server = request.getfixturevalue("postgres_server")
        isolation = "REPEATABLE READ" if request.param.endswith("repeatable-read") else "READ COMMITTED"
        engine = create_engine(server.url, pool_size=THREADS + 4, max_overflow=0, isolation_level=isolation)  # type: ignore[attr-defined]
    table.metadata.create_all(engine)
    try:
        yield engine, table
    finally:
        table.metadata.drop_all(engine)
        engine.dispose()


def patch_app(engine: Engine, table: Table, barrier: threading.Barrier | None, reached: list[int]) -> Any:
    """PATCH /v1/nodes/<uuid> with {"extra": {...}}: merge into extra, conditional on If-Match."""

    def lookup(environ: dict[str, Any]) -> str | None:
        row = load(engine, table)
        return None if row is None else str(row["etag"])

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        node_uuid = environ["PATH_INFO"].rsplit("/", 1)[-1]
        body = json.loads(environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"])))
        reached.append(1)
        if barrier is not None:
            barrier.wait()  # every request has passed the middleware's pre-check by now
        row = update_if_match(
            engine, table, {"uuid": node_uuid},
            lambda current: {"extra": {**current["extra"], **body["extra"]}},
            if_match=environ[ENVIRON_IF_MATCH], etag_of=etag_of,
        )  # fmt: skip
        set_response_etag(environ, row["etag"])
        payload = json.dumps({"uuid": row["uuid"], "extra": row["extra"], "etag": row["etag"]}).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        start_response("200 OK", headers)
        return [payload]

    return ETagMiddleware(app, hmac_key=KEY, current_etag=lookup, enforces="PATCH")


def patch_request(tag: str, n: int) -> Request:
    r = Request.blank(f"/v1/nodes/{NODE_UUID}", method="PATCH", headers={"If-Match": tag})
    r.body = json.dumps({"extra": {f"writer{n}": n}}).encode()
    r.content_type = "application/json"
    return r


def test_32_concurrent_patches_with_the_same_if_match_one_wins(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    barrier = threading.Barrier(THREADS, timeout=60)
    reached: list[int] = []
    app = patch_app(engine, table, barrier, reached)

    def one(n: int) -> tuple[int, Any]:
        resp = run(app, patch_request(original["etag"], n))
        return resp.status_int, resp

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(one, range(THREADS)))
    statuses = Counter(status for status, _ in results)
    assert statuses == {200: 1, 412: THREADS - 1}
    assert len(reached) == THREADS  # all passed the pre-check: the 412s come from the database CAS
    for status, resp in results:
        if status == 412:
            assert resp.json["errors"][0]["code"] == "etag.precondition-failed"
    (winner,) = [resp for status, resp in results if status == 200]
    final = load(engine, table)
    assert final is not None
    # the winner's patch and nobody else's; the stored etag is the etag of the stored state
    writers = [k for k in final["extra"] if k.startswith("writer")]
    assert len(writers) == 1 and final["extra"] == {**original["extra"], writers[0]: int(writers[0][6:])}
    assert final["etag"] == etag_of(final) == winner.headers["ETag"] == winner.json["etag"]
    assert final["etag"] != original["etag"]


def test_etag_before_save_equals_etag_after_reload(db: tuple[Engine, Table]) -> None:
    engine, table = db
    saved = seed(engine, table)
    reloaded = load(engine, table)
    assert reloaded is not None
    assert reloaded["etag"] == saved["etag"] == etag_of(reloaded)


def test_gone_stale_and_success_are_told_apart(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    key = {"uuid": NODE_UUID}
    cond = parse_if_match(original["etag"])
    assert cond is not None
    row = update_if_match(engine, table, key, {"name": "renamed"}, if_match=cond, etag_of=etag_of)
    assert cond.enforced
    assert row["etag"] == etag_of(row) != original["etag"]
    with pytest.raises(StaleEtag) as stale:
        update_if_match(engine, table, key, {"name": "again"}, if_match=parse_if_match(original["etag"]),
                        etag_of=etag_of)  # fmt: skip
    assert stale.value.status == 412
    with pytest.raises(ResourceGone) as gone:
        update_if_match(engine, table, {"uuid": "nope"}, {"name": "x"}, if_match=cond, etag_of=etag_of)
    assert gone.value.status == 404
    # If-Match: * passes iff the row exists
    update_if_match(engine, table, key, {"name": "star"}, if_match=parse_if_match("*"), etag_of=etag_of)
    final = load(engine, table)
    assert final is not None and final["name"] == "star"


def test_no_op_update_keeps_the_etag(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    row = update_if_match(engine, table, {"uuid": NODE_UUID}, {"name": original["name"]},
                          if_match=parse_if_match(original["etag"]), etag_of=etag_of)  # fmt: skip
    assert row["etag"] == original["etag"]


def test_already_applied_retry_is_2xx_only_when_enabled(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    key = {"uuid": NODE_UUID}
    # the client's PATCH was applied but the response was lost; it retries with its old tag
    update_if_match(engine, table, key, {"name": "new"}, if_match=parse_if_match(original["etag"]),
                    etag_of=etag_of)  # fmt: skip
    with pytest.raises(StaleEtag):
        update_if_match(engine, table, key, {"name": "new"}, if_match=parse_if_match(original["etag"]),
                        etag_of=etag_of)  # fmt: skip
    row = update_if_match(engine, table, key, {"name": "new"}, if_match=parse_if_match(original["etag"]),
                          etag_of=etag_of, already_applied=True)  # fmt: skip
    assert row["name"] == "new"
    # a different change on top of a state the client never saw is still stale
    with pytest.raises(StaleEtag):
        update_if_match(engine, table, key, {"name": "other"}, if_match=parse_if_match(original["etag"]),
                        etag_of=etag_of, already_applied=True)  # fmt: skip


def test_ignored_field_raw_update_does_not_desync(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    with engine.begin() as conn:  # a raw UPDATE of an ignored field, as Ironic's conductor does
        conn.execute(update(table).where(table.c.uuid == NODE_UUID).values(driver_internal_info={"x": 1}))
    row = load(engine, table)
    assert row is not None and etag_of(row) == row["etag"] == original["etag"]


def test_unconditional_writes_still_keep_the_etag_consistent(db: tuple[Engine, Table]) -> None:
    engine, table = db
    seed(engine, table)
    barrier = threading.Barrier(8, timeout=60)

    def one(n: int) -> dict[str, Any]:
        barrier.wait()
        return update_if_match(engine, table, {"uuid": NODE_UUID},
                               lambda cur: {"extra": {**cur["extra"], f"w{n}": n}},
                               if_match=None, etag_of=etag_of, retries=20)  # fmt: skip

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(8)))
    final = load(engine, table)
    assert final is not None
    assert {f"w{n}" for n in range(8)} <= set(final["extra"])  # no lost update
    assert final["etag"] == etag_of(final)


def test_delete_if_match(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    key = {"uuid": NODE_UUID}
    with pytest.raises(StaleEtag):
        delete_if_match(engine, table, key, if_match=parse_if_match('W/"stale"'))
    deleted = delete_if_match(engine, table, key, if_match=parse_if_match(original["etag"]))
    assert deleted["etag"] == original["etag"]
    assert load(engine, table) is None
    with pytest.raises(ResourceGone):
        delete_if_match(engine, table, key, if_match=parse_if_match(original["etag"]))


def test_delete_racing_patch_with_the_same_tag_one_wins(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    barrier = threading.Barrier(2, timeout=60)

    def do_delete() -> str:
        barrier.wait()
        try:
            delete_if_match(engine, table, {"uuid": NODE_UUID}, if_match=parse_if_match(original["etag"]))
        except (StaleEtag, ResourceGone) as exc:
            return str(exc.status)
        return "deleted"

    def do_patch() -> str:
        barrier.wait()
        try:
            update_if_match(engine, table, {"uuid": NODE_UUID}, {"name": "patched"},
                            if_match=parse_if_match(original["etag"]), etag_of=etag_of)  # fmt: skip
        except (StaleEtag, ResourceGone) as exc:
            return str(exc.status)
        return "patched"

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(do_delete), pool.submit(do_patch)]
        outcomes = [f.result() for f in futures]
    winners = [o for o in outcomes if o in ("deleted", "patched")]
    assert len(winners) == 1
    final = load(engine, table)
    assert (final is None) == (winners[0] == "deleted")


def test_cas_update_primitive(db: tuple[Engine, Table]) -> None:
    engine, table = db
    original = seed(engine, table)
    key = {"uuid": NODE_UUID}
    new = {**original, "name": "cas"}
    new_tag = etag_of(new)
    with engine.begin() as conn:
        stale = cas_update(conn, table, key, {"name": "x", "etag": 'W/"x"'}, expected=['W/"a"', 'W/"b"'])
        assert stale == "stale"
        assert cas_update(conn, table, key, {"name": "cas", "etag": new_tag},
                          expected=['W/"other"', original["etag"]]) == "updated"  # fmt: skip
        assert cas_update(conn, table, {"uuid": "ghost"}, {"etag": "W/\"x\""}, expected=[new_tag]) == "gone"
        assert cas_update(conn, table, key, {"name": "y"}, expected=[]) == "stale"


# -- serialization failures / lock timeouts are retried, then 412 (never 500) ---------------------


def test_postgres_serialization_failures_are_retried_then_412(postgres_server: Server) -> None:
    table = make_table()
    engine = create_engine(postgres_server.url, isolation_level="REPEATABLE READ")  # type: ignore[attr-defined]
    table.metadata.create_all(engine)
    try:
        original = seed(engine, table)
        key = {"uuid": NODE_UUID}
        attempts: list[int] = []

        def conflicting(conflicts: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
            def changes(row: dict[str, Any]) -> dict[str, Any]:
                attempts.append(1)
                if len(attempts) <= conflicts:
                    # another client touches the row after our snapshot: our UPDATE gets 40001
                    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as other:
                        touch = update(table).where(table.c.uuid == NODE_UUID).values(name=table.c.name)
                        other.execute(touch)
                return {"name": "mine"}

            return changes

        # always conflicting: bounded retries, then 412 with If-Match ...
        with pytest.raises(StaleEtag):
            update_if_match(engine, table, key, conflicting(100), if_match=parse_if_match(original["etag"]),
                            etag_of=etag_of, retries=3, backoff=0.001)  # fmt: skip
        assert len(attempts) == 4
        # ... and 409 without
        attempts.clear()
        with pytest.raises(ConcurrentUpdate) as info:
            update_if_match(engine, table, key, conflicting(100), if_match=None, etag_of=etag_of,
                            retries=2, backoff=0.001)  # fmt: skip
        assert info.value.status == 409 and len(attempts) == 3
        # one conflict: the retry succeeds
        attempts.clear()
        row = update_if_match(engine, table, key, conflicting(1), if_match=parse_if_match(original["etag"]),
                              etag_of=etag_of, backoff=0.001)  # fmt: skip
        assert len(attempts) == 2 and row["name"] == "mine"
        stored = load(engine, table)
        assert stored is not None and stored["etag"] == etag_of(stored)
    finally:
        table.metadata.drop_all(engine)
        engine.dispose()


def test_a_real_postgres_deadlock_is_classified_retryable(postgres_server: Server) -> None:
    table = make_table()
    engine = create_engine(postgres_server.url)  # type: ignore[attr-defined]
    table.metadata.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(insert(table), [
                {"uuid": u, "extra": {}, "properties": {}, "driver_internal_info": {}, "etag": "x"}
                for u in ("a", "b")
            ])  # fmt: skip
        first_locked = threading.Barrier(2, timeout=30)
        errors: list[OperationalError] = []

        def lock_in_order(first: str, second: str) -> None:
            try:
                with engine.begin() as conn:
                    conn.execute(text("SET LOCAL deadlock_timeout = '50ms'"))
                    conn.execute(update(table).where(table.c.uuid == first).values(name="x"))
                    first_locked.wait()
                    conn.execute(update(table).where(table.c.uuid == second).values(name="x"))
            except OperationalError as exc:
                errors.append(exc)

        threads = [threading.Thread(target=lock_in_order, args=order) for order in (("a", "b"), ("b", "a"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(errors) == 1  # PostgreSQL broke the deadlock by failing one of the two
        assert getattr(errors[0].orig, "sqlstate", None) == "40P01"  # deadlock_detected
        assert is_retryable(errors[0])
    finally:
        table.metadata.drop_all(engine)
        engine.dispose()


def test_sqlite_lock_timeouts_are_retried_then_412(tmp_path: Path) -> None:
    table = make_table()
    path = tmp_path / "locked.db"
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05})
    table.metadata.create_all(engine)
    original = seed(engine, table)
    holder = create_engine(f"sqlite:///{path}").raw_connection()
    try:
        holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
        with pytest.raises(OperationalError) as locked, engine.begin() as conn:
            conn.execute(text(f"UPDATE {table.name} SET name = 'x'"))  # noqa: S608 - our own table name
        assert is_retryable(locked.value)
        with pytest.raises(StaleEtag) as info:
            update_if_match(engine, table, {"uuid": NODE_UUID}, {"name": "mine"},
                            if_match=parse_if_match(original["etag"]), etag_of=etag_of,
                            retries=2, backoff=0.001)  # fmt: skip
        assert info.value.status == 412
    finally:
        holder.rollback()
        holder.close()
        engine.dispose()


@pytest.mark.serial  # measured against the clock
def test_write_attempts_are_bounded_and_back_off_between_attempts() -> None:
    import time

    from apimw.etag_db import write_attempts

    started = time.monotonic()
    stamps = []
    for attempt in write_attempts(3, 0.01):
        stamps.append((attempt, time.monotonic()))
    assert [a for a, _ in stamps] == [0, 1, 2, 3]
    # the first attempt at once; then pauses of about 10, 20, 40 ms (jitter 0.5x..1.5x)
    assert stamps[0][1] - started < 0.005
    gaps = [b - a for (_, a), (_, b) in zip(stamps, stamps[1:], strict=False)]
    for gap, base in zip(gaps, (0.01, 0.02, 0.04), strict=True):
        assert gap >= base * 0.5
    assert list(write_attempts(0)) == [0]
    assert list(write_attempts(-3)) == [0]  # at least one attempt
    # the pause is capped: 30 doublings of 1 s do not sleep for years
    gen = write_attempts(40, 1.0)
    next(gen)
    before = time.monotonic()
    next(gen)
    assert time.monotonic() - before < 0.5
