"""Writes on the driver's cursor (db/driver_write.py) store what SQLAlchemy Core stores.

The same creates, updates and deletes through both paths (``Database.fast_writes``) leave
byte-identical rows and event records (the stored text of JSON and datetime columns on
SQLite, the values on PostgreSQL); a duplicate is the same IntegrityError (409), a lost
race is retried the same way, a database outage during a write is reported as SQLAlchemy
reports it (the API's 503) and the pool recovers; the switch is a setting.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from baremetal_service import exceptions as exc
from baremetal_service.db.api import EVENTS, NODES, PORTGROUPS, PORTS, RESOURCE_CLASSES, Database
from baremetal_service.db.driver_write import DriverWrite
from baremetal_service.db.engine import is_unavailable

from tests.servers import PostgresServer, make_workdir

#: Columns that differ between two writes of the same values (identity, clock, the etag over both).
_VARYING = {"id", "uuid", "created_at", "updated_at", "etag", "node_id", "portgroup_id", "resource_uuid",
            "node_uuid", "portgroup_uuid"}


def _raw_rows(db: Database, table: sa.Table, where: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows as the database holds them: SQLite's storage class and text, PostgreSQL's values."""
    cols = [c.name for c in table.c]
    if db.engine.dialect.name == "sqlite":
        select = ", ".join(f"typeof({c}), {c}" for c in cols)
    else:
        select = ", ".join(f"pg_typeof({c})::text, {c}::text" for c in cols)
    with db.engine.connect() as conn:
        query = f"SELECT {select} FROM {table.name} WHERE {where} ORDER BY id"  # noqa: S608 - our names
        rows = conn.execute(sa.text(query), params)
        out = []
        for row in rows:
            values = list(row)
            out.append({c: (values[2 * i], values[2 * i + 1]) for i, c in enumerate(cols)})
    return out


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row without what differs between two writes; datetimes by their stored form."""
    out = {}
    for key, (kind, value) in row.items():
        if key in _VARYING:
            out[key] = (kind, value is None)  # (provision_updated_at shows the stored datetime form)
        elif key == "payload":
            payload = dict(json.loads(value))
            out[key] = (kind, {k: v for k, v in payload.items() if k not in _VARYING})
        else:
            out[key] = (kind, value)
    return out


def _scenario(db: Database, fast: bool) -> dict[str, Any]:
    """Create a node (JSON, booleans, unicode, an integral float), a portgroup and a port,
    update the node twice (with a match condition), delete the port, delete the node (and
    so its portgroup and another port): nothing is left, the next run uses the same names."""
    db.fast_writes = fast
    node = db.insert("node", {
        "uuid": str(uuid.uuid4()), "name": "node-1", "driver": "fake-hardware",
        "properties": {"cpus": 4, "ram": 2.0, "f": 1.5, "s": "é\u2603", "n": None, "l": [1, {"a": []}]},
        "extra": {}, "maintenance": True, "maintenance_reason": "r", "provision_state": "enroll",
        "conductor_group": "", "power_state": "power off",
    })  # fmt: skip
    group = db.insert("portgroup", {"node_uuid": node["uuid"], "name": "pg-1", "extra": {"k": "v"}})
    port_mac = "52:54:00:00:00:01"
    port = db.insert("port", {"node_uuid": node["uuid"], "address": port_mac,
                              "portgroup_uuid": group["uuid"]})  # fmt: skip
    db.update("node", node["uuid"], lambda cur: {"extra": {"x": 1, "y": [True, None]}, "maintenance": False,
                                                 "maintenance_reason": None},
              match={"reservation": None})  # fmt: skip
    db.update("node", node["uuid"], lambda cur: {"description": "d" * 300, "protected": True,
                                                 "provision_updated_at": "2026-01-02T03:04:05.000006+00:00"})
    stored = {
        "node": _raw_rows(db, NODES, "uuid = :u", {"u": node["uuid"]}),
        "port": _raw_rows(db, PORTS, "uuid = :u", {"u": port["uuid"]}),
        "portgroup": _raw_rows(db, PORTGROUPS, "uuid = :u", {"u": group["uuid"]}),
    }
    db.update("node", node["uuid"], lambda cur: {"protected": False})
    db.delete("port", port["uuid"])
    db.insert("port", {"node_uuid": node["uuid"], "address": port_mac})  # deleted with the node
    db.delete("node", node["uuid"], match={"reservation": None, "pending_action": None})
    with db.engine.connect() as conn:
        left = conn.execute(sa.select(sa.func.count()).select_from(PORTS).where(
            PORTS.c.address == port_mac)).scalar_one()  # fmt: skip
        groups = conn.execute(sa.select(sa.func.count()).select_from(PORTGROUPS).where(
            PORTGROUPS.c.name == "pg-1")).scalar_one()  # fmt: skip
    assert (left, groups) == (0, 0)
    events = _raw_rows(db, EVENTS, "resource_uuid IN (:n, :p, :g)",
                       {"n": node["uuid"], "p": port["uuid"], "g": group["uuid"]})  # fmt: skip
    return {
        **{k: [_comparable(r) for r in rows] for k, rows in stored.items()},
        "events": [_comparable(r) for r in events],
    }


def test_driver_writes_store_what_core_writes_store(database_url: str) -> None:
    db = Database(database_url)
    try:
        fast = _scenario(db, True)
        core = _scenario(db, False)
        assert fast == core
        # 3 creates, 3 node updates, the port and node deletes (the second port is not selected)
        assert len(fast["events"]) == 8
        assert [e["event_type"][1] for e in fast["events"]][-1] == "baremetal.node.delete.end"
    finally:
        db.dispose()


@pytest.mark.parametrize("fast", [True, False])
def test_a_duplicate_and_a_lost_race_answer_alike_on_both_paths(database_url: str, fast: bool) -> None:
    db = Database(database_url, fast_writes=fast)
    try:
        db.insert("node", {"name": "dup", "driver": "fake-hardware", "provision_state": "enroll"})
        with pytest.raises(exc.NodeNameExists):
            db.insert("node", {"name": "dup", "driver": "fake-hardware", "provision_state": "enroll"})
        other = db.insert("node", {"name": "other", "driver": "fake-hardware", "provision_state": "enroll"})
        with pytest.raises(exc.NodeNameExists):
            db.update("node", other["uuid"], lambda cur: {"name": "dup"})
        # a write that loses its compare-and-swap (another writer committed in between) runs again
        calls = []

        def mutate(cur: dict[str, Any]) -> dict[str, Any]:
            calls.append(cur["etag"])
            if len(calls) == 1:
                db.update("node", other["uuid"], lambda c: {"description": "meanwhile"})
            return {"extra": {"n": len(calls)}}

        doc = db.update("node", other["uuid"], mutate)
        assert len(calls) == 2 and calls[0] != calls[1]
        assert doc["extra"] == {"n": 2} and doc["description"] == "meanwhile"
        # a stale If-Match is 412, a failed match condition is a conflict after its retries
        with pytest.raises(exc.PreconditionFailed):
            db.update("node", other["uuid"], lambda c: {"description": "x"}, if_match=[calls[0]])
        with db.engine.begin() as conn:
            conn.execute(NODES.update().where(NODES.c.uuid == other["uuid"]).values(reservation="w"))
        seen = []
        with pytest.raises(exc.Conflict):
            db.update("node", other["uuid"], lambda c: {"description": "y"}, match={"reservation": None},
                      on_conflict=lambda cur: seen.append(cur["reservation"]))  # fmt: skip
        assert seen and set(seen) == {"w"}
        with pytest.raises(exc.Conflict):
            db.delete("node", other["uuid"], match={"reservation": None})
        assert db.get("node", other["uuid"])["description"] == "meanwhile"
    finally:
        db.dispose()


def test_a_failed_driver_write_rolls_back_its_whole_transaction(database_url: str) -> None:
    db = Database(database_url)
    try:
        insert = DriverWrite(db.engine.dialect, RESOURCE_CLASSES.insert(), column_keys=["name", "created_at"])
        with db.engine.begin() as conn:
            assert insert.run(conn, {"name": "CUSTOM_A", "created_at": dt.datetime(2026, 1, 1)}) == 1
        with pytest.raises(sa.exc.IntegrityError), db.engine.begin() as conn:
            assert insert.run(conn, {"name": "CUSTOM_B", "created_at": dt.datetime(2026, 1, 1)}) == 1
            insert.run(conn, {"name": "CUSTOM_A", "created_at": dt.datetime(2026, 1, 1)})
        assert [r["name"] for r in db.list_resource_classes()] == ["CUSTOM_A"]
        # and the connection it failed on is fine for the next transaction
        with db.engine.begin() as conn:
            assert insert.run(conn, {"name": "CUSTOM_C", "created_at": dt.datetime(2026, 1, 1)}) == 1
        assert [r["name"] for r in db.list_resource_classes()] == ["CUSTOM_A", "CUSTOM_C"]
        with pytest.raises(ValueError, match="column_keys"):  # a Python-side default it would not apply
            DriverWrite(db.engine.dialect, NODES.insert(), column_keys=["uuid", "driver"])
    finally:
        db.dispose()


def test_a_database_outage_during_a_driver_write_is_a_503_and_the_pool_recovers() -> None:
    server = PostgresServer(make_workdir("driver-writes"))
    server.start()
    db: Database | None = None
    try:
        import psycopg

        admin = f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE writes")
        db = Database(f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/writes", pool_size=1)
        db.upgrade()
        node = db.insert("node", {"name": "n", "driver": "fake-hardware", "provision_state": "enroll"})
        killed = threading.Event()

        def mutate(cur: dict[str, Any]) -> dict[str, Any]:
            # the write's connection dies between the read and the UPDATE (an outage mid-request)
            if not killed.is_set():
                killed.set()
                with psycopg.connect(admin, autocommit=True) as kill:
                    kill.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                 "WHERE datname = 'writes' AND pid <> pg_backend_pid()")  # fmt: skip
            return {"description": "after"}

        with pytest.raises(sa.exc.DBAPIError) as raised:
            db.update("node", node["uuid"], mutate)
        assert is_unavailable(raised.value) and raised.value.connection_invalidated
        # the dead connection left the pool: the next write reconnects and succeeds
        assert db.update("node", node["uuid"], lambda cur: {"description": "later"})["description"] == "later"
    finally:
        if db is not None:
            db.dispose()
        server.stop()


def test_the_core_write_path_stays_selectable() -> None:
    from baremetal_service.wsgi import settings

    assert settings({})["fast_writes"] is True
    assert settings({"BAREMETAL_FAST_WRITES": "false"})["fast_writes"] is False
