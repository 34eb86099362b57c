"""Read-modify-write over HTTP: GET the node, add one to ``extra/counter``, PATCH it back
with ``If-Match``, retry the cycle on 412.  With If-Match nothing is lost (the final value
equals the number of 200s); without it the same clients lose increments, which shows the
test can fail.  Served by one process (many threads) and by two processes on one database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from tests.servers import HOST, Server, free_port

CLIENTS = 8
CYCLES = 10
HEADERS = {"X-OpenStack-Ironic-API-Version": "latest"}


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'counter.db'}"
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


def _start(database: str, key_file: Path, workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with (workdir / f"service-{port}.log").open("wb") as log:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "baremetal_service.cli", "--port", str(port), "--database", database,
             "--no-conductor", "--etag-key-file", str(key_file), "--threads", str(CLIENTS)],
            stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    url = f"http://{HOST}:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            requests.get(f"{url}/v1/", timeout=1)
            return proc, url
        except requests.ConnectionError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the service did not start: {(workdir / f'service-{port}.log').read_text()}")


@pytest.fixture(params=[1, 2], ids=["one-process", "two-processes"])
def urls(request: pytest.FixtureRequest, database: str, tmp_path: Path) -> Iterator[list[str]]:
    key_file = tmp_path / "etag.key"
    key_file.write_text(uuid.uuid4().hex)
    procs = []
    try:
        first = _start(database, key_file, tmp_path)  # migrates the database before the second starts
        procs.append(first)
        for _ in range(request.param - 1):
            procs.append(_start(database, key_file, tmp_path))
        yield [url for _, url in procs]
    finally:
        for proc, _ in procs:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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
