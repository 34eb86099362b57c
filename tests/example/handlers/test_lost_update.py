"""Read-modify-write over HTTP: GET the node, add one to ``extra/counter``, PATCH it back
with ``If-Match``, retry the cycle on 412.  With If-Match nothing is lost (the final value
equals the number of 200s); without it the same clients lose increments, which shows the
test can fail.  Served by one process (many threads) and by two processes on one database.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from tests.servers import Server, Service, baremetal_service

CLIENTS = 8
CYCLES = 10
HEADERS = {"X-OpenStack-Ironic-API-Version": "latest"}


# The services of one (database, processes) pair serve both tests of the module (each test
# writes a node of its own): half the service start-ups.  One xdist worker runs them.
pytestmark = pytest.mark.xdist_group(__name__)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path_factory.mktemp('counter') / 'counter.db'}"
        return
    server: Server = request.getfixturevalue("postgres_server")
    name = f"counter_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(server.url, isolation_level="AUTOCOMMIT")  # type: ignore[attr-defined]
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"CREATE DATABASE {name}"))
        yield server.url.rsplit("/", 1)[0] + "/" + name  # type: ignore[attr-defined]
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    finally:
        admin.dispose()


def _service(database: str, key_file: Path, workdir: Path) -> Service:
    return baremetal_service(
        workdir, "--database", database, "--no-conductor", "--etag-key-file", str(key_file),
        "--threads", str(CLIENTS), host=False, ready_path="/v1/",
    )  # fmt: skip


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-processes"])
def urls(
    request: pytest.FixtureRequest, database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    tmp_path = tmp_path_factory.mktemp("services")
    key_file = tmp_path / "etag.key"
    key_file.write_text(uuid.uuid4().hex)
    with ExitStack() as services:
        # one after the other: the first migrates the database before the second starts
        started = [services.enter_context(_service(database, key_file, tmp_path / f"service-{i}"))
                   for i in range(request.param)]  # fmt: skip
        yield [service.url for service in started]


def _counter(urls: list[str], node: str, *, if_match: bool) -> tuple[int, int]:
    """Run the clients; return (number of 200 PATCHes, final counter)."""

    def client(i: int) -> int:
        url = urls[i % len(urls)]
        with requests.Session() as session:
            return _cycles(session, url, node, if_match=if_match)

    with ThreadPoolExecutor(CLIENTS) as pool:
        successes = sum(pool.map(client, range(CLIENTS)))
    final = requests.get(f"{urls[0]}/v1/nodes/{node}", headers=HEADERS, timeout=30).json()["extra"]["counter"]
    return successes, final


def _cycles(session: requests.Session, url: str, node: str, *, if_match: bool) -> int:
    ok = 0
    for _cycle in range(CYCLES):
        for _attempt in range(300):  # bounded: a client that never wins fails the test
            got = session.get(f"{url}/v1/nodes/{node}", headers=HEADERS, timeout=30)
            assert got.status_code == 200, got.text
            value = got.json()["extra"].get("counter", 0)
            headers = {**HEADERS, "If-Match": got.headers["ETag"]} if if_match else HEADERS
            patch = [{"op": "add", "path": "/extra/counter", "value": value + 1}]
            resp = session.patch(f"{url}/v1/nodes/{node}", json=patch, headers=headers, timeout=30)
            if resp.status_code == 412 and if_match:
                continue
            assert resp.status_code == 200, resp.text
            ok += 1
            break
        else:
            raise AssertionError("a client never got its write in")
    return ok


@pytest.mark.slow
def test_if_match_read_modify_write_loses_no_increment(urls: list[str]) -> None:
    created = requests.post(f"{urls[0]}/v1/nodes", json={"driver": "fake-hardware", "extra": {"counter": 0}},
                            headers=HEADERS, timeout=30)  # fmt: skip
    assert created.status_code == 201, created.text
    node = created.json()["uuid"]
    successes, final = _counter(urls, node, if_match=True)
    assert successes == CLIENTS * CYCLES
    assert final == successes

    # The same clients without If-Match: the read-modify-write races, increments are lost.
    requests.patch(f"{urls[0]}/v1/nodes/{node}", json=[{"op": "add", "path": "/extra/counter", "value": 0}],
                   headers=HEADERS, timeout=30).raise_for_status()  # fmt: skip
    blind, final = _counter(urls, node, if_match=False)
    assert blind == CLIENTS * CYCLES
    assert final < blind, "without If-Match the racing clients should have lost some increments"


@pytest.mark.slow
def test_identical_patches_with_one_if_match_have_one_winner(urls: list[str]) -> None:
    created = requests.post(f"{urls[0]}/v1/nodes", json={"driver": "fake-hardware"}, headers=HEADERS,
                            timeout=30)  # fmt: skip
    node = created.json()["uuid"]
    etag = created.headers["ETag"]
    patch = [{"op": "add", "path": "/extra/same", "value": "the same new state"}]

    def write(i: int) -> int:
        return requests.patch(f"{urls[i % len(urls)]}/v1/nodes/{node}", json=patch, timeout=30,
                              headers={**HEADERS, "If-Match": etag}).status_code  # fmt: skip

    for _round in range(3):
        with ThreadPoolExecutor(CLIENTS) as pool:
            statuses = sorted(pool.map(write, range(CLIENTS)))
        assert statuses == [200] + [412] * (CLIENTS - 1)
        etag = requests.get(f"{urls[0]}/v1/nodes/{node}", headers=HEADERS, timeout=30).headers["ETag"]
        patch = [{"op": "add", "path": "/extra/same", "value": f"round {_round}"}]
