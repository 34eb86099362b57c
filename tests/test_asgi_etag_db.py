"""apimw.etag_db behind apimw.asgi: a FastAPI app on a real PostgreSQL, served by real uvicorn
workers on loopback (tests/asgi_etag_db_app.py, written as docs/asgi.md shows it).

tests/test_etag_db_races.py races the helpers in threads of one process; here the writers are
HTTP clients spread over two worker processes.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, insert, select

from tests.asgi_etag_db_app import etag_of, nodes_table
from tests.servers import HOST, Server, Service
from tests.test_docs import ROOT

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
