"""Reads on the driver's cursor (db/driver_select.py) give what SQLAlchemy Core gives.

One-row reads: every resource kind, by UUID and by name, unscoped and scoped to a
project (owner, lessee, someone else), found and not found.  Lists: every node filter,
markers (found, missing, another project's), each sort key both ways, fields, limits,
projects, and the generic lists of the other kinds; on SQLite and PostgreSQL.  A
database outage is reported as SQLAlchemy reports it (the API's 503), then reads recover.
"""

from __future__ import annotations

import json
import re
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


def _both_lists(db: Database, call: Any) -> Any:
    answers = []
    for fast in (True, False):
        db.fast_reads = fast
        try:
            answers.append(("found", call()))
        except BaremetalError as exc:
            answers.append(("error", type(exc).__name__, exc.code, str(exc)))
    db.fast_reads = True
    assert answers[0] == answers[1]
    return answers[0]


def test_driver_lists_equal_core_lists(database_url: str) -> None:
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        chassis = _post(client, "/v1/chassis", {"description": "c"})
        nodes = []
        for i in range(12):
            body: dict[str, Any] = {
                "driver": "fake-hardware", "name": None if i % 4 == 3 else f"n-{i:02d}",
                "resource_class": ["small", "big", None][i % 3], "owner": ["p1", "p2", None][i % 3],
                "lessee": "p2" if i % 5 == 0 else None, "maintenance": i % 2 == 0,
                "description": ["a 100% match", "under_score", "slash/ed", None][i % 4],
                "shard": ["s1", "s2", None][i % 3], "extra": {"i": i, "f": 1.5, "l": [None, "é"]},
                "properties": {"cpus": i}, "retired": i % 3 == 1, "conductor_group": ["", "g1"][i % 2],
            }  # fmt: skip
            if i % 4 == 1:
                body["chassis_uuid"] = chassis["uuid"]
            if i % 6 == 5:
                body["instance_uuid"] = str(uuid.uuid4())
            if i in (7, 8):
                body["parent_node"] = nodes[0]["uuid"]
            nodes.append(_post(client, "/v1/nodes", body))
        node = nodes[1]
        _post(client, "/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:00:00:02"})
        _post(client, "/v1/ports", {"node_uuid": nodes[2]["uuid"], "address": "52:54:00:00:00:03"})
        db = app.service.db
        filter_sets: list[dict[str, Any]] = [
            {}, {"children": False}, {"provision_state": "enroll"}, {"driver": "fake-hardware"},
            {"resource_class": "small"}, {"conductor_group": "g1"}, {"owner": "p1"}, {"lessee": "p2"},
            {"project": "p2"}, {"shard": ["s1", "s2"]}, {"shard": ["s2"]}, {"shard": "s1"},
            {"sharded": True}, {"sharded": False}, {"maintenance": True}, {"maintenance": False},
            {"retired": True}, {"associated": True}, {"associated": False},
            {"instance_uuid": nodes[5]["instance_uuid"]}, {"parent_node": nodes[0]["uuid"]},
            {"chassis_uuid": chassis["uuid"]}, {"chassis_uuid": str(uuid.uuid4())},
            {"description_contains": "100%"}, {"description_contains": "_"},
            {"description_contains": "/"}, {"description_contains": "UNDER"},
            {"maintenance": True, "owner": "p1", "children": False, "resource_class": None},
        ]  # fmt: skip
        found = 0
        for filters in filter_sets:
            for project in (None, "p1", "p2"):
                answer = _both_lists(db, lambda f=filters, p=project: db.list_nodes(filters=f, project_id=p))
                found += answer[0] == "found" and len(answer[1])
        assert found > 50
        # the filters do filter, and LIKE's wildcards in description_contains are literal text
        assert len(_both_lists(db, lambda: db.list_nodes(filters={"description_contains": "_"}))[1]) == 3
        assert len(_both_lists(db, lambda: db.list_nodes(filters={"description_contains": "0%"}))[1]) == 3
        assert len(_both_lists(db, lambda: db.list_nodes(filters={"description_contains": "h/"}))[1]) == 3
        sort_keys = ["id", "uuid", "name", "created_at", "maintenance", "resource_class", "owner"]
        pages = 0
        for sort_key in sort_keys:
            for sort_dir in ("asc", "desc"):
                for project in (None, "p1"):
                    full = _both_lists(db, lambda k=sort_key, d=sort_dir, p=project: db.list_nodes(
                        sort_key=k, sort_dir=d, project_id=p, internal=False))[1]  # fmt: skip
                    for start in range(len(full)):  # every marker, pages of 3: the same rows
                        marker = full[start]["uuid"]
                        page = _both_lists(db, lambda k=sort_key, d=sort_dir, p=project, m=marker:
                                           db.list_nodes(sort_key=k, sort_dir=d, project_id=p, marker=m,
                                                         limit=3, internal=False))[1]  # fmt: skip
                        assert page == full[start + 1:start + 4]
                        pages += 1
        assert pages > 100
        for marker in (str(uuid.uuid4()), "not-a-uuid", nodes[1]["uuid"].upper()):
            for project in (None, "p2"):
                _both_lists(db, lambda m=marker, p=project: db.list_nodes(marker=m, project_id=p))
        assert _both_lists(db, lambda: db.list_nodes(marker=nodes[3]["uuid"], project_id="p2"))[0] == "error"
        for fields in (["name"], ["name", "created_at", "extra"], ["driver_info", "driver"], ["traits"]):
            for internal in (True, False):
                _both_lists(db, lambda f=fields, i=internal: db.list_nodes(fields=f, internal=i, limit=5))
        for limit in (None, 0, 1, 5, 100000, -1):
            _both_lists(db, lambda n=limit: db.list_nodes(limit=n))
        _both_lists(db, lambda: db.list_nodes(sort_key="driver_info"))
        _both_lists(db, lambda: db.list_nodes(sort_dir="up"))
        # the other kinds' lists (equals filters, scoping through the node)
        for kind in KINDS:
            _both_lists(db, lambda k=kind: db.list(k))
        node_id = db.get("node", node["uuid"])["id"]
        for project in (None, "p1", "p2"):
            ports = _both_lists(db, lambda p=project: db.list("port", equals={"node_id": node_id},
                                                              project_id=p))[1]
            assert len(ports) == (0 if project == "p1" else 1)
        assert _both_lists(db, lambda: db.list("port", equals={"portgroup_id": None}))[1]  # IS NULL
        ports = _both_lists(db, lambda: db.list("port", equals={"address": "52:54:00:00:00:03"}))[1]
        assert [p["address"] for p in ports] == ["52:54:00:00:00:03"]
        # and the whole API answer is the same both ways
        for path in ("/v1/nodes", "/v1/nodes/detail", "/v1/nodes?fields=name,extra&limit=4&sort_key=name",
                     f"/v1/nodes?marker={nodes[3]['uuid']}&limit=3&sort_dir=desc",
                     "/v1/nodes?owner=p1&maintenance=true", "/v1/ports/detail",
                     f"/v1/nodes?marker={uuid.uuid4()}"):  # fmt: skip
            bodies = []
            for fast in (True, False):
                db.fast_reads = fast
                resp = client.get(path, headers=V)
                body = re.sub(rb"req-[0-9a-f-]{36}", b"req-x", resp.get_data())  # each request its own
                bodies.append((resp.status_code, body))
            db.fast_reads = True
            assert bodies[0] == bodies[1], path
    finally:
        app.close()


def test_a_database_outage_is_reported_as_sqlalchemy_reports_it_and_reads_recover() -> None:
    server = PostgresServer(make_workdir("driver-reads"))
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
