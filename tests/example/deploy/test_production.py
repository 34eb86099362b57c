"""The production shape over real processes: gunicorn workers sharing PostgreSQL and Redis/memcached.

Every test here runs ``gunicorn -c python:baremetal_service.servers.gunicorn_conf``
(two worker processes, ``baremetal_service.deploy:application``) on loopback against
the session's real PostgreSQL (a database of its own) and the real Redis or
memcached.  ``X-Baremetal-Worker-Pid`` (a debug header the tests switch on) shows
which process answered, so each race below is checked to have really crossed
processes:

(a) one ``X-Client-Token`` sent concurrently to both workers creates one node;
(b) concurrent PATCHes with one ``If-Match`` through both workers: one 200, the rest 412;
(c) a provision action is carried out once, by one process's conductor
    (the node's event records, read from the database, show each transition once).
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from tests.example.conftest import drop_pg_database, new_pg_database, pg_url
from tests.example.production_support import LATEST, Gunicorn, burst, error_code, pid_of
from tests.servers import Server

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]  # module fixtures set up once


@pytest.fixture(scope="module")
def prod_db(postgres_server: Server, pg_template: str) -> Iterator[str]:
    """A migrated PostgreSQL database of this module (other tests truncate the shared one)."""
    name = new_pg_database(postgres_server, pg_template)
    try:
        yield pg_url(postgres_server, name)
    finally:
        drop_pg_database(postgres_server, name)


@pytest.fixture(scope="module")
def cluster_db(postgres_server: Server, pg_template: str) -> Iterator[Any]:
    """A factory of migrated databases, one per gunicorn cluster (their conductors stay apart)."""
    names: list[str] = []

    def make() -> str:
        names.append(new_pg_database(postgres_server, pg_template))
        return pg_url(postgres_server, names[-1])

    try:
        yield make
    finally:
        for name in names:
            drop_pg_database(postgres_server, name)


def _cluster(tmp: Path, db: str, store: str) -> Gunicorn:
    env = {
        "BAREMETAL_DATABASE": db,
        "BAREMETAL_STORE": store,
        "BAREMETAL_ETAG_KEY": secrets.token_hex(32),
    }
    gun = Gunicorn(tmp, env, workers=2).start()
    gun.db = db
    try:
        assert len(gun.worker_pids(want=2)) == 2, "the two workers never both answered"
    except BaseException:
        gun.stop()
        raise
    return gun


@pytest.fixture(scope="module")
def redis_cluster(
    cluster_db: Any, redis_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    gun = _cluster(tmp_path_factory.mktemp("gunicorn-redis"), cluster_db(), redis_server.url)
    try:
        yield gun
    finally:
        gun.stop()


@pytest.fixture(scope="module")
def memcached_cluster(
    cluster_db: Any, memcached_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gunicorn]:
    gun = _cluster(tmp_path_factory.mktemp("gunicorn-memcached"), cluster_db(), memcached_server.url)
    try:
        yield gun
    finally:
        gun.stop()


def _dsn(db: str) -> str:
    return db.replace("postgresql+psycopg://", "postgresql://")


def count_nodes(db: str, name: str) -> int:
    with psycopg.connect(_dsn(db)) as conn:
        row = conn.execute("SELECT count(*) FROM nodes WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def node_events(db: str, node_uuid: str) -> list[tuple[str, dict[str, Any]]]:
    with psycopg.connect(_dsn(db)) as conn:
        rows = conn.execute(
            "SELECT event_type, payload FROM node_events WHERE resource_uuid = %s ORDER BY id", (node_uuid,)
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


# -- (a) one client token, two processes, one node ----------------------------------------------------


@pytest.mark.parametrize("store", ["redis", "memcached"])
def test_one_client_token_sent_to_both_workers_creates_one_node(
    store: str, request: pytest.FixtureRequest
) -> None:
    gun: Gunicorn = request.getfixturevalue(f"{store}_cluster")
    prod_db = gun.db
    crossed = 0
    for attempt in range(8):
        token = uuid.uuid4().hex
        name = f"tok-{store}-{attempt}-{token[:8]}"

        def post(_i: int, token: str = token, name: str = name) -> requests.Response:
            return requests.post(
                gun.url + "/v1/nodes",
                json={"driver": "fake-hardware", "name": name},
                headers={**LATEST, "X-Client-Token": token},
                timeout=15,
            )

        answers = burst(12, post)
        pids = {pid_of(r) for r in answers}
        assert {r.status_code for r in answers} <= {201, 409}, [(r.status_code, r.text) for r in answers]
        for refused in (r for r in answers if r.status_code == 409):
            assert error_code(refused) == "idempotency.in-flight"
        created = [r for r in answers if r.status_code == 201]
        assert created, "no request created the node"
        assert len({r.json()["uuid"] for r in created}) == 1
        originals = [r for r in created if r.headers.get("Idempotent-Replayed") != "true"]
        assert len(originals) == 1, "the app ran more than once for one token"
        assert count_nodes(prod_db, name) == 1
        # a retry replays the one answer on whichever worker it lands
        retry_pids = set()
        for _ in range(10):  # concurrent bursts: sequential retries may all reach one worker
            for retry in burst(8, post):
                assert retry.status_code == 201
                assert retry.headers["Idempotent-Replayed"] == "true"
                assert retry.json()["uuid"] == originals[0].json()["uuid"]
                retry_pids.add(pid_of(retry))
            if len(retry_pids) == 2:
                break
        assert count_nodes(prod_db, name) == 1
        if len(pids) >= 2 and len(retry_pids) == 2:
            crossed += 1
            if crossed >= 2:
                break
    assert crossed >= 1, "the concurrent requests never reached both worker processes"


# -- (b) one If-Match, two processes: one 200, the rest 412 ------------------------------------------


def test_concurrent_patches_with_one_if_match_across_workers(redis_cluster: Gunicorn) -> None:
    url = redis_cluster.url
    created = requests.post(
        url + "/v1/nodes", json={"driver": "fake-hardware", "name": f"ifm-{uuid.uuid4().hex[:8]}"},
        headers=LATEST, timeout=10,
    )  # fmt: skip
    assert created.status_code == 201, created.text
    node = url + "/v1/nodes/" + created.json()["uuid"]
    crossed = 0
    for attempt in range(8):
        etag = requests.get(node, headers=LATEST, timeout=10).headers["ETag"]

        # every value new (a PATCH that changes nothing keeps the etag, and may succeed too)
        def patch(i: int, etag: str = etag, attempt: int = attempt) -> requests.Response:
            return requests.patch(
                node,
                json=[{"op": "add", "path": "/extra/writer", "value": f"{attempt}-w{i}"}],
                headers={**LATEST, "If-Match": etag},
                timeout=15,
            )

        answers = burst(8, patch)
        statuses = sorted(r.status_code for r in answers)
        assert statuses == [200] + [412] * 7, [(r.status_code, r.text) for r in answers]
        for stale in (r for r in answers if r.status_code == 412):
            assert error_code(stale).startswith(("etag.", "baremetal.", "node.")), stale.text
        winner = next(r for r in answers if r.status_code == 200)
        after = requests.get(node, headers=LATEST, timeout=10)
        assert after.json()["extra"]["writer"] == winner.json()["extra"]["writer"]
        assert after.headers["ETag"] == winner.headers["ETag"] != etag
        if len({pid_of(r) for r in answers}) == 2:
            crossed += 1
            if crossed >= 2:
                break
    assert crossed >= 1, "the concurrent PATCHes never reached both worker processes"


# -- (c) a provision action is carried out once, by one process ---------------------------------------


def _provision(url: str, node_uuid: str, target: str) -> requests.Response:
    return requests.put(
        f"{url}/v1/nodes/{node_uuid}/states/provision", json={"target": target}, headers=LATEST, timeout=15
    )


def _wait_state(url: str, uuids: list[str], state: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    pending = set(uuids)
    last: dict[str, Any] = {}
    while pending and time.monotonic() < deadline:
        for node_uuid in sorted(pending):
            last = requests.get(f"{url}/v1/nodes/{node_uuid}", headers=LATEST, timeout=10).json()
            if last["provision_state"] == state and last["target_provision_state"] is None:
                pending.discard(node_uuid)
        if pending:
            time.sleep(0.1)
    assert not pending, f"nodes not {state} in {timeout}s; last: {last}"


def _race(url: str, uuids: list[str], target: str) -> set[int]:
    """Send *target* 4 times per node at once; exactly one is accepted per node. Returns pids."""
    answers = burst(4 * len(uuids), lambda i: _provision(url, uuids[i % len(uuids)], target))
    pids = set()
    for node_uuid in uuids:
        mine = [a for i, a in enumerate(answers) if uuids[i % len(uuids)] == node_uuid]
        accepted = [a for a in mine if a.status_code == 202]
        assert len(accepted) == 1, [(a.status_code, a.text) for a in mine]
        assert all(400 <= a.status_code < 500 for a in mine if a.status_code != 202)
        pids |= {pid_of(a) for a in mine}
    return pids


def test_provision_actions_run_once_by_one_process(redis_cluster: Gunicorn) -> None:
    url, prod_db = redis_cluster.url, redis_cluster.db
    uuids = []
    for i in range(6):
        resp = requests.post(
            url + "/v1/nodes", json={"driver": "fake-hardware", "name": f"prov-{i}-{uuid.uuid4().hex[:6]}"},
            headers=LATEST, timeout=10,
        )  # fmt: skip
        assert resp.status_code == 201, resp.text
        uuids.append(resp.json()["uuid"])
    api_pids: set[int] = set()
    for target, state in (("manage", "manageable"), ("provide", "available"), ("active", "active"),
                          ("deleted", "available")):  # fmt: skip
        api_pids |= _race(url, uuids, target)
        _wait_state(url, uuids, state)
    assert len(api_pids) == 2, "the provision requests never reached both worker processes"

    worker_pids = redis_cluster.worker_pids(want=2)
    conductor_pids = set()
    for node_uuid in uuids:
        events = node_events(prod_db, node_uuid)
        # every transition exactly once: a second execution would repeat states or end events
        states = [payload["provision_state"] for _type, payload in events]
        assert states == [
            "enroll", "verifying", "manageable", "cleaning", "available", "deploying", "active",
            "deleting", "cleaning", "available",
        ], events  # fmt: skip
        kinds = [event_type for event_type, _ in events]
        assert kinds.count("baremetal.node.provision_set.start") == 4
        assert kinds.count("baremetal.node.conductor.end") == 4
        # the undeploy's intermediate step was written under one conductor's lease: host:pid:...
        steps = [p for t, p in events if t == "baremetal.node.conductor.step"]
        assert len(steps) == 1 and steps[0]["provision_state"] == "cleaning"
        conductor_pids.add(int(steps[0]["reservation"].split(":")[1]))
        assert all(p["reservation"] is None for t, p in events if t != "baremetal.node.conductor.step")
    assert conductor_pids <= worker_pids, (conductor_pids, worker_pids)


# -- memory:// refuses several processes --------------------------------------------------------------


MEMORY_MESSAGE = "the memory:// idempotency store cannot be used with 2 worker processes"


def test_memory_store_refuses_two_workers(tmp_path: Path, prod_db: str) -> None:
    gun = Gunicorn(tmp_path, {"BAREMETAL_DATABASE": prod_db, "BAREMETAL_STORE": "memory://"}, workers=2)
    proc = gun.spawn()
    try:
        assert proc.wait(timeout=30) != 0
    finally:
        gun.stop()
    out = gun.output()
    assert MEMORY_MESSAGE in out, out
    assert "redis://" in out and "memcached://" in out
    assert "Booting worker" not in out  # refused in the master, before any fork
    with pytest.raises(requests.ConnectionError):
        requests.get(gun.url + "/healthcheck", timeout=2)


def test_memory_store_refused_by_the_workers_without_the_config_hook(tmp_path: Path, prod_db: str) -> None:
    """Started without our servers/gunicorn_conf.py (WEB_CONCURRENCY=2): each worker refuses at load."""
    import subprocess
    import sys

    from tests.servers import HOST, free_port

    port = free_port()
    env = {
        **__import__("os").environ,
        "BAREMETAL_DATABASE": prod_db,
        "BAREMETAL_STORE": "memory://",
        "WEB_CONCURRENCY": "2",
        "BAREMETAL_CONDUCTOR_WORKERS": "0",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "gunicorn", "--no-control-socket", "-b", f"{HOST}:{port}",
         "baremetal_service.deploy:application"],
        cwd=tmp_path, env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode != 0
    assert MEMORY_MESSAGE in proc.stderr.decode(errors="replace")


def test_memory_store_with_one_worker_serves(tmp_path: Path, prod_db: str) -> None:
    gun = Gunicorn(
        tmp_path, {"BAREMETAL_DATABASE": prod_db, "BAREMETAL_STORE": "memory://"}, workers=1
    ).start()
    try:
        token = uuid.uuid4().hex
        name = f"mem-{token[:8]}"
        first, second = (
            requests.post(gun.url + "/v1/nodes", json={"driver": "fake-hardware", "name": name},
                          headers={**LATEST, "X-Client-Token": token}, timeout=10)
            for _ in range(2)
        )  # fmt: skip
        assert first.status_code == second.status_code == 201
        assert second.headers["Idempotent-Replayed"] == "true"
        assert count_nodes(prod_db, name) == 1
    finally:
        gun.stop()


def test_noauth_scopes_tokens_by_the_client_project(redis_cluster: Gunicorn) -> None:
    """The contrast to http_basic (test_production_auth): in noauth mode X-Project-Id *is* the scope."""
    token = uuid.uuid4().hex
    name = f"noauth-{token[:8]}"
    answers = [
        requests.post(
            redis_cluster.url + "/v1/nodes",
            json={"driver": "fake-hardware", "name": name},
            headers={**LATEST, "X-Client-Token": token, "X-Project-Id": project},
            timeout=10,
        )
        for project in ("project-a", "project-b")
    ]
    assert answers[0].status_code == 201
    # another scope: not a replay; the app ran again and refused the duplicate name
    assert answers[1].status_code == 409, answers[1].text
    assert "Idempotent-Replayed" not in answers[1].headers
    assert count_nodes(redis_cluster.db, name) == 1


def test_preload_is_refused(tmp_path: Path, redis_server: Server) -> None:
    """--preload would build the pool and conductor threads in the master, where a fork breaks them."""
    db = tmp_path / "bm.db"
    gun = Gunicorn(tmp_path, {"BAREMETAL_DATABASE": f"sqlite:///{db}", "BAREMETAL_STORE": redis_server.url,
                              "BAREMETAL_CONDUCTOR_WORKERS": "0"}, workers=1)  # fmt: skip
    gun.options.append("--preload")
    proc = gun.spawn()
    try:
        assert proc.wait(timeout=60) != 0
    finally:
        gun.stop()
    assert "preload_app (--preload) is not supported" in gun.output()
