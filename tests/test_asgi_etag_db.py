"""apimw.etag_db behind apimw.asgi: a FastAPI app on a real PostgreSQL, served by real uvicorn
workers on loopback (tests/asgi_etag_db_app.py, written as docs/asgi.md shows it).

tests/test_etag_db_races.py races the helpers in threads of one process; here the writers are
HTTP clients spread over two worker processes, and the database goes away under them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, insert, select, text
from webob import Request

from apimw.etag import ENVIRON_IF_MATCH, ETagMiddleware, parse_if_match, set_response_etag
from apimw.etag_db import update_if_match
from apimw.microversion import MicroversionMiddleware
from tests.asgi_etag_db_app import etag_of, nodes_table
from tests.servers import HOST, PostgresServer, Server, Service, make_workdir
from tests.test_docs import ROOT
from tests.wsgi import run

VERSION = {"OpenStack-API-Version": "baremetal 1.5"}


def _seed(engine: Engine, table: Any, name: str) -> dict[str, Any]:
    row: dict[str, Any] = {"uuid": name, "driver": "ipmi", "version": 0}
    row["etag"] = etag_of(row)
    with engine.begin() as conn:
        conn.execute(table.delete().where(table.c.uuid == name))
        conn.execute(insert(table).values(**row))
    return row


def _load(engine: Engine, table: Any, name: str) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(select(table).where(table.c.uuid == name)).mappings().one())


def _uvicorn(workdir: Path, url: str, table: str) -> Service:
    return Service(
        workdir,
        lambda port: [sys.executable, "-m", "uvicorn", "tests.asgi_etag_db_app:app", "--host", HOST,
                      "--port", str(port), "--workers", "2", "--no-access-log", "--log-level", "warning"],
        name="uvicorn", cwd=ROOT, ready_path="/pid", env={"APIMW_TEST_DB": url, "APIMW_TEST_TABLE": table},
    )  # fmt: skip


@pytest.fixture
def table(postgres_server: Server) -> Iterator[tuple[Engine, Any]]:
    engine = create_engine(postgres_server.url)  # type: ignore[attr-defined]
    nodes = nodes_table(f"nodes_{uuid.uuid4().hex[:10]}")
    nodes.metadata.create_all(engine)
    try:
        yield engine, nodes
    finally:
        nodes.metadata.drop_all(engine)
        engine.dispose()


def test_writers_with_one_etag_over_two_uvicorn_workers_have_one_winner(
    table: tuple[Engine, Any], tmp_path: Path, postgres_server: Server
) -> None:
    """Each round, 16 PATCHes carrying the same If-Match go to either worker (every other round
    all with the same body, so they race to the same new document): one 200, fifteen 412, and
    the row's version counts the winners; the winner's ETag is the stored one and writes next."""
    engine, nodes = table
    rounds, writers = 12, 16
    _seed(engine, nodes, "n1")
    with _uvicorn(tmp_path, postgres_server.url, nodes.name) as uvicorn:  # type: ignore[attr-defined]

        async def race() -> set[int]:
            limits = httpx.Limits(max_keepalive_connections=0)  # a new connection each: either worker
            async with httpx.AsyncClient(base_url=uvicorn.url, timeout=30, limits=limits) as client:
                pids: set[int] = set()
                for round_ in range(rounds):
                    etag = _load(engine, nodes, "n1")["etag"]
                    answers = await asyncio.gather(*(
                        client.patch("/v1/nodes/n1", headers={**VERSION, "If-Match": etag},
                                     json={"driver": "redfish" if round_ % 2 else f"driver-{i}"})
                        for i in range(writers)
                    ))  # fmt: skip
                    statuses = Counter(a.status_code for a in answers)
                    assert statuses == {200: 1, 412: writers - 1}, (round_, statuses)
                    (won,) = (a for a in answers if a.status_code == 200)
                    stored = _load(engine, nodes, "n1")
                    assert stored["version"] == round_ + 1  # no lost update, no double win
                    assert won.headers["ETag"] == won.json()["etag"] == stored["etag"] == etag_of(stored)
                    pids.update(a.json()["pid"] for a in answers if a.status_code == 200)
                return pids

        winners = asyncio.run(race())
        follow = httpx.patch(f"{uvicorn.url}/v1/nodes/n1", json={"driver": "ilo"},
                             headers={**VERSION, "If-Match": _load(engine, nodes, "n1")["etag"]})  # fmt: skip
        assert follow.status_code == 200
        uvicorn.assert_no_traceback()
    assert _load(engine, nodes, "n1")["version"] == rounds + 1
    assert len(winners) == 2, f"the winners all came from one worker: {winners}"


def _wsgi_patch(engine: Engine, nodes: Any, name: str, if_match: str) -> Any:
    """The same write through the WSGI middlewares, in process."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        row = update_if_match(engine, nodes, {"uuid": name}, lambda cur: {"version": cur["version"] + 1},
                              if_match=environ[ENVIRON_IF_MATCH], etag_of=etag_of)  # fmt: skip
        set_response_etag(environ, row["etag"])
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]

    etag = ETagMiddleware(app, min_version="1.2", enforces="*")
    stack = MicroversionMiddleware(etag, service_type="baremetal", min_version="1.1", max_version="1.9")
    req = Request.blank(f"/v1/nodes/{name}", method="PATCH", headers={**VERSION, "If-Match": if_match})
    return run(stack, req)


def test_a_database_outage_is_a_503_json_answer_and_the_service_recovers(tmp_path: Path) -> None:
    """PostgreSQL stopped (fast shutdown: sessions cut) under two uvicorn workers: a conditional
    PATCH is 503 with a stable code and Retry-After, from ASGI and WSGI alike, and nothing is
    written; started again on its port, the same workers write again."""
    with PostgresServer(make_workdir("etag-db-outage")) as pg:
        engine = create_engine(pg.url)  # type: ignore[attr-defined]
        nodes = nodes_table("nodes")
        nodes.metadata.create_all(engine)
        seeded = _seed(engine, nodes, "n1")
        engine.dispose()
        with _uvicorn(tmp_path, pg.url, nodes.name) as uvicorn:  # type: ignore[attr-defined]
            headers = {**VERSION, "If-Match": seeded["etag"]}
            assert pg.proc is not None
            os.kill(pg.proc.pid, signal.SIGINT)  # fast shutdown
            pg.proc.wait(30)
            for _ in range(4):  # new connections: both workers, their pools' stale connections too
                down = httpx.patch(f"{uvicorn.url}/v1/nodes/n1", json={"driver": "x"}, headers=headers,
                                   timeout=30)  # fmt: skip
                assert down.status_code == 503, down.text
                assert down.headers["Content-Type"] == "application/json"
                assert down.headers["Retry-After"]
                assert down.json()["errors"][0]["code"] == "etag.database-unavailable"
            wsgi = _wsgi_patch(create_engine(pg.url), nodes, "n1", seeded["etag"])  # type: ignore[attr-defined]
            assert wsgi.status_int == 503 and wsgi.json["errors"][0]["code"] == "etag.database-unavailable"
            pg.start()
            engine = create_engine(pg.url)  # type: ignore[attr-defined]
            assert _load(engine, nodes, "n1") == seeded  # nothing was written
            deadline = time.monotonic() + 10
            while True:
                up = httpx.patch(f"{uvicorn.url}/v1/nodes/n1", json={"driver": "x"}, headers=headers,
                                 timeout=30)  # fmt: skip
                if up.status_code != 503 or time.monotonic() > deadline:
                    break
            assert up.status_code == 200, up.text
            assert _load(engine, nodes, "n1")["version"] == 1
            engine.dispose()
            uvicorn.assert_no_traceback()


def test_a_connection_lost_while_committing_says_the_write_may_have_happened(postgres_server: Server) -> None:
    """The session is cut during COMMIT (a deferred trigger holds the commit open; the test
    terminates the backend then): the client cannot be told "nothing was written", since a
    commit whose acknowledgement was lost may have happened. 503 with its own code."""
    engine = create_engine(postgres_server.url)  # type: ignore[attr-defined]
    nodes = nodes_table(f"nodes_{uuid.uuid4().hex[:10]}")
    nodes.metadata.create_all(engine)
    slow = f"slow_{nodes.name}"
    with engine.begin() as conn:
        conn.execute(text(f"CREATE FUNCTION {slow}() RETURNS trigger LANGUAGE plpgsql AS "
                          "$$ BEGIN PERFORM pg_sleep(5); RETURN NULL; END $$"))  # fmt: skip
        conn.execute(text(f"CREATE CONSTRAINT TRIGGER {slow} AFTER UPDATE ON {nodes.name} DEFERRABLE "
                          f"INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {slow}()"))  # fmt: skip
    seeded = _seed(engine, nodes, "n1")
    answer: list[BaseException | None] = []

    def write() -> None:
        try:
            update_if_match(engine, nodes, {"uuid": "n1"}, {"driver": "x"},
                            if_match=parse_if_match(seeded["etag"]), etag_of=etag_of)  # fmt: skip
            answer.append(None)
        except BaseException as exc:  # noqa: BLE001 - the outcome under test
            answer.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        killer = create_engine(postgres_server.url)  # type: ignore[attr-defined]
        with killer.connect() as conn:
            for _ in range(100):  # the writer's backend is in its COMMIT (the trigger's sleep)
                pids = conn.execute(text("SELECT pid FROM pg_stat_activity WHERE query = 'COMMIT' "
                                         "AND state = 'active'")).scalars().all()  # fmt: skip
                if pids:
                    break
                time.sleep(0.05)
            assert len(pids) == 1
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pids[0]})
        killer.dispose()
    finally:
        writer.join(30)
    try:
        (exc,) = answer
        assert exc is not None and getattr(exc, "status", None) == 503, repr(exc)
        assert exc.code == "etag.write-outcome-unknown"  # type: ignore[attr-defined]
    finally:
        nodes.metadata.drop_all(engine)
        with engine.begin() as conn:
            conn.execute(text(f"DROP FUNCTION {slow}()"))
        engine.dispose()
