"""The data API under failure: duplicates, lost races, stale If-Match, failed write
conditions, and a PostgreSQL outage during reads and during a write (SQLAlchemy's errors,
the API's 503, then the pool recovers).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from werkzeug.test import Client

from baremetal_service import exceptions as exc
from baremetal_service.db.api import NODES, Database
from baremetal_service.db.engine import is_unavailable
from baremetal_service.db.migrate import upgrade
from baremetal_service.deploy import build_app
from tests.servers import PostgresServer, make_workdir

V = {"X-OpenStack-Ironic-API-Version": "latest"}


def test_a_duplicate_a_lost_race_a_stale_if_match_and_a_failed_condition(database_url: str) -> None:
    db = Database(database_url)
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


def test_a_database_outage_is_a_503_and_reads_recover() -> None:
    server = PostgresServer(make_workdir("db-read-outage"))
    server.start()
    db: Database | None = None
    app = None
    try:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE reads")
        url = f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/reads"
        db = Database(url)
        upgrade(db.engine)
        app = build_app(url, "memory://", run_conductor=False)
        client = Client(app)
        with db.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO chassis (uuid, description, extra, etag, created_at) "
                                 "VALUES (:u, 'd', '{}', 'W/\"x\"', now())"), {"u": (u := str(uuid.uuid4()))})
        assert db.get("chassis", u)["description"] == "d"
        assert [c["uuid"] for c in db.list("chassis", marker=None)] == [u]
        server.stop()  # (a SIGKILL could lose the last commits: the test server runs synchronous_commit=off)
        for _ in range(3):  # the pooled connection is dead, then no connection can be made
            with pytest.raises(sa.exc.OperationalError):
                db.get("chassis", u)
            with pytest.raises(sa.exc.OperationalError):
                db.list("chassis")
            with pytest.raises(sa.exc.OperationalError):
                db.list_nodes(marker=u, sort_key="created_at")
            for path in ("/v1/nodes", "/v1/nodes/detail", "/v1/chassis"):  # the API: 503
                resp = client.get(path, headers=V)
                assert resp.status_code == 503, (path, resp.get_data())
                assert resp.json is not None and resp.json["error_message"]
        server.start()
        assert db.get("chassis", u)["description"] == "d"
        assert [c["uuid"] for c in db.list("chassis", limit=5)] == [u]
        resp = client.get("/v1/chassis", headers=V)
        assert resp.status_code == 200 and [c["uuid"] for c in resp.json["chassis"]] == [u]
    finally:
        if db is not None:
            db.dispose()
        if app is not None:
            app.close()
        server.stop()


def test_a_database_outage_during_a_write_is_a_503_and_the_pool_recovers() -> None:
    server = PostgresServer(make_workdir("db-write-outage"))
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
