"""One-row reads on the driver's cursor (db/driver_select.py) give what SQLAlchemy Core gives.

Every resource kind, by UUID and by name, unscoped and scoped to a project (owner,
lessee, someone else), found and not found, on SQLite and PostgreSQL; and a database
outage is reported as SQLAlchemy reports it (the API's 503), then reads recover.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from baremetal_service.app import build_app
from baremetal_service.db.api import KINDS, Database
from baremetal_service.db.migrate import upgrade
from baremetal_service.exceptions import BaremetalError
from werkzeug.test import Client

from tests.servers import PostgresServer, make_workdir

V = {"X-OpenStack-Ironic-API-Version": "latest"}


def _post(client: Client, path: str, body: dict[str, Any], project: str | None = None) -> dict[str, Any]:
    headers = dict(V, **({"X-Project-Id": project} if project else {}))
    resp = client.post(path, json=body, headers=headers)
    assert resp.status_code == 201, resp.get_data(as_text=True)
    return json.loads(resp.get_data())


def _both(db: Database, kind: str, ident: Any, project: str | None) -> Any:
    answers = []
    for fast in (True, False):
        db.fast_reads = fast
        try:
            answers.append(("found", db.get(kind, ident, project_id=project)))
        except BaremetalError as exc:
            answers.append(("error", type(exc).__name__, exc.code, str(exc)))
    db.fast_reads = True
    assert answers[0] == answers[1], (kind, ident, project)
    return answers[0]


def test_driver_reads_equal_core_reads_for_every_kind(database_url: str) -> None:
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        chassis = _post(client, "/v1/chassis", {"description": "c", "extra": {"k": [1, 2.5, None]}})
        node = _post(client, "/v1/nodes", {
            "driver": "fake-hardware", "name": "node-1", "chassis_uuid": chassis["uuid"],
            "owner": "owner-p", "lessee": "lessee-p", "properties": {"cpus": 4, "f": 1.5},
            "extra": {"deep": {"list": [{"a": "é"}]}},
        })  # fmt: skip
        group = _post(client, "/v1/portgroups", {"node_uuid": node["uuid"], "name": "pg-1",
                                                 "address": "52:54:00:00:00:01"})
        port = _post(client, "/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:00:00:02",
                                           "portgroup_uuid": group["uuid"], "name": "port-1"})
        template = _post(client, "/v1/deploy_templates", {
            "name": "CUSTOM_T1", "steps": [{"interface": "bios", "step": "apply_configuration",
                                            "args": {}, "priority": 10}]})  # fmt: skip
        db = app.service.db
        cases = [("chassis", chassis["uuid"]), ("node", node["uuid"]), ("node", "node-1"),
                 ("node", node["uuid"].upper()), ("portgroup", group["uuid"]), ("portgroup", "pg-1"),
                 ("port", port["uuid"]), ("port", "port-1"), ("deploy_template", template["uuid"]),
                 ("deploy_template", "CUSTOM_T1")]  # fmt: skip
        for kind in KINDS:  # and a miss of every kind, by uuid and by a name-like string
            cases += [(kind, str(uuid.uuid4())), (kind, "no-such-name"), (kind, "nul\x00name")]
        found = 0
        for kind, ident in cases:
            for project in (None, "owner-p", "lessee-p", "other-p"):
                found += _both(db, kind, ident, project)[0] == "found"
        # the scoped misses are real misses: other-p sees no node; owner and lessee do
        assert _both(db, "node", node["uuid"], "other-p")[0] == "error"
        assert _both(db, "node", node["uuid"], "lessee-p")[1]["owner"] == "owner-p"
        assert found >= 20
        # datetimes and JSON columns come back as the same values through both paths
        doc = _both(db, "node", "node-1", None)[1]
        assert doc["created_at"].endswith("+00:00") and doc["properties"] == {"cpus": 4, "f": 1.5}
    finally:
        app.close()


def test_a_database_outage_is_reported_as_sqlalchemy_reports_it_and_reads_recover() -> None:
    server = PostgresServer(make_workdir("driver-reads"))
    server.start()
    db: Database | None = None
    try:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE reads")
        url = f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/reads"
        db = Database(url)
        upgrade(db.engine)
        with db.engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO chassis (uuid, description, extra, etag, created_at) "
                                 "VALUES (:u, 'd', '{}', 'W/\"x\"', now())"), {"u": (u := str(uuid.uuid4()))})
        assert db.get("chassis", u)["description"] == "d"
        server.stop()  # (a SIGKILL could lose the last commits: the test server runs synchronous_commit=off)
        for _ in range(3):  # the pooled connection is dead, then no connection can be made
            with pytest.raises(sa.exc.OperationalError):
                db.get("chassis", u)
        server.start()
        assert db.get("chassis", u)["description"] == "d"
    finally:
        if db is not None:
            db.dispose()
        server.stop()


def test_the_core_path_stays_selectable(tmp_path: Path) -> None:
    from baremetal_service.wsgi import settings

    assert settings({})["fast_reads"] is True
    assert settings({"BAREMETAL_FAST_READS": "false"})["fast_reads"] is False


def test_a_failed_read_returns_its_connection_to_the_pool_as_it_took_it(database_url: str) -> None:
    """The PostgreSQL read switches its connection to autocommit; an error in the query must not
    leave it so, or the next transaction on that pooled connection would commit every statement."""
    from baremetal_service.db.driver_select import DriverSelect

    db = Database(database_url, pool_size=1)
    try:
        missing = sa.Table("no_such_table", sa.MetaData(), sa.Column("uuid", sa.String))
        query = DriverSelect(db.engine, sa.select(missing).where(missing.c.uuid == sa.bindparam("ident")))
        with pytest.raises(sa.exc.ProgrammingError if db.engine.dialect.name == "postgresql"
                           else sa.exc.OperationalError):
            query.rows({"ident": "x"})
        fairy = db.engine.raw_connection()
        try:
            if db.engine.dialect.name == "postgresql":
                assert fairy.driver_connection.autocommit is False
        finally:
            fairy.close()
        with db.engine.connect() as conn:  # and the pool still serves transactions
            assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    finally:
        db.dispose()
