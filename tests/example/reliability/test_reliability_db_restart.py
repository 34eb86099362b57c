"""Database restart under load: the short version of
``bench/reliability/db_restart.py``, plus the regression test of what it found (a database
outage answered 500 ``server.error`` instead of 503)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from werkzeug.test import Client as WsgiClient

from bench.reliability._faults_support import durable_commits, fast_shutdown
from bench.reliability._harness import Context
from tests.servers import PostgresServer, make_workdir

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # timed: see scripts/test

LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    server = PostgresServer(make_workdir("db-outage-pg"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _error(resp: Any) -> tuple[str, str]:
    body = json.loads(resp.get_data())
    return body["errors"][0]["code"], json.loads(body["error_message"])["faultstring"]


@pytest.mark.parametrize("how", ["kill", "fast_shutdown"])
def test_a_database_outage_is_a_503_with_a_code_not_a_500(own_postgres: PostgresServer, how: str) -> None:
    """Every request that needs the database while it is down: 503 with a stable code, a
    Retry-After and a JSON body without internals; then the same process recovers."""
    from baremetal_service.db.engine import create_engine
    from baremetal_service.db.migrate import upgrade
    from baremetal_service.deploy import make_application

    url = f"postgresql+psycopg://postgres@127.0.0.1:{own_postgres.port}/postgres"
    durable_commits(own_postgres, "postgres")
    engine = create_engine(url)
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    app = make_application({"BAREMETAL_DATABASE": url, "BAREMETAL_STORE": "memory://",
                            "BAREMETAL_CONDUCTOR_WORKERS": "0"})  # fmt: skip
    try:
        client = WsgiClient(app)
        created = client.post("/v1/nodes", json={"driver": "fake-hardware"}, headers=LATEST)
        assert created.status_code == 201, created.get_data(as_text=True)
        node, etag = created.json["uuid"], created.headers["ETag"]
        if how == "kill":  # a crash
            own_postgres.kill()
        else:  # pg_ctl stop -m fast
            fast_shutdown(own_postgres)
        answers = [
            client.get("/v1/nodes", headers=LATEST),
            client.get(f"/v1/nodes/{node}", headers=LATEST),
            client.post("/v1/nodes", json={"driver": "fake-hardware"},
                        headers={**LATEST, "X-Client-Token": uuid.uuid4().hex}),
            client.patch(f"/v1/nodes/{node}", json=[{"op": "add", "path": "/extra/n", "value": 1}],
                         headers={**LATEST, "If-Match": etag}),
        ]  # fmt: skip
        for resp in answers:
            text = resp.get_data(as_text=True)
            assert resp.status_code == 503, text
            assert resp.headers["Content-Type"].startswith("application/json")
            assert resp.headers.get("Retry-After", "").isdigit()
            code, message = _error(resp)
            assert code == "baremetal.database-unavailable"
            assert "database" in message
            for internal in ("Traceback", "psycopg", "OperationalError", str(own_postgres.port)):
                assert internal not in text
        own_postgres.start()
        after = client.get(f"/v1/nodes/{node}", headers=LATEST)
        if after.status_code == 503:  # a pooled connection from before the outage: dropped now
            after = client.get(f"/v1/nodes/{node}", headers=LATEST)
        assert after.status_code == 200, after.get_data(as_text=True)
        assert "n" not in after.json["extra"]
    finally:
        app.close()


@pytest.fixture
def ctx() -> Iterator[Context]:
    with Context(quick=True) as context:
        yield context


def test_database_restart_under_load(ctx: Context) -> None:
    """The short scenario: 503 during the outage, recovery without a service restart, nothing
    half-written, PATCH counters exact."""
    from bench.reliability import db_restart

    result = db_restart.run(ctx)
    data = result["data"]
    assert data["during"] > 0
    assert data["during_503"] == data["during"], data["samples_not_503_during"]
    assert data["bad_503_bodies"] == data["internals_in_bodies"] == 0
    assert data["other_5xx"] == data["no_answer"] == 0
    assert data["recovery_seconds"] is not None
    assert data["tokens"] > 0
    assert data["tokens_never_answered"] == data["tokens_without_exactly_one_node"] == 0
    assert data["answered_node_not_the_tokens"] == data["answers_naming_two_nodes"] == 0
    assert data["nodes_without_their_token_row"] == data["token_rows_without_their_node"] == 0
    assert data["duplicates"] == data["incomplete_node_rows"] == 0
    assert data["patch_successes"] > 0
    assert data["patch_final_values"] == data["patch_successes"]
    assert result["ok"], result["problems"]
