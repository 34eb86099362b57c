"""X-Client-Token when the replay store has lost its records: the database row answers the retry.

The store is a cache (a restarted memcached forgets everything; a memory store is per
process).  Every create records its token in the row's transaction
(:mod:`apimw.idempotency_db`), so a retry whose record is gone gets the resource the
first execution created (201, same uuid and Location) and never a second one; another
request with that token gets 409.  "The store lost its records" is a real new store or a
real memcached restart here.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apimw.idempotency import IdempotencyMiddleware, open_store
from baremetal_service.deploy import build_app

from .conftest import Api, Server, error_of, reset

STEPS_DT = [{"interface": "bios", "step": "apply_configuration", "args": {"settings": []}, "priority": 150}]
STEPS_RB = [{"interface": "bios", "step": "apply_configuration", "args": {"settings": []}, "order": 150}]


def _middleware(server: Server) -> IdempotencyMiddleware:
    found = [c for c in server.app._closers if isinstance(c, IdempotencyMiddleware)]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def forget(service_server: Server) -> Iterator[Callable[[], None]]:
    """Replace the service's replay store by a new, empty memory store (a store that lost all)."""
    mw = _middleware(service_server)
    original = mw.store
    fresh: list[Any] = []

    def forget_all() -> None:
        store = open_store("memory://")
        fresh.append(store)
        mw.store = store

    yield forget_all
    mw.store = original
    for store in fresh:
        store.close()


def post(api: Api, path: str, body: dict[str, Any], token: str, **kw: Any) -> Any:
    return api.post(path, body, headers={"X-Client-Token": token}, **kw)


def test_a_node_retried_after_the_store_forgot_is_the_same_node(api: Api, forget: Callable[[], None]) -> None:
    token = f"tok-{uuid.uuid4()}"
    body = {"driver": "fake-hardware", "name": "once"}
    first = post(api, "/v1/nodes", body, token)
    assert first.status_code == 201, first.text
    forget()
    again = post(api, "/v1/nodes", body, token)
    assert again.status_code == 201, again.text
    assert again.json()["uuid"] == first.json()["uuid"]
    assert again.headers["Location"] == first.headers["Location"]
    # answered from the database, a replay all the same, with a request id of its own
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.headers["X-OpenStack-Request-Id"] != first.headers["X-OpenStack-Request-Id"]
    assert again.json()["name"] == "once"
    assert [n["uuid"] for n in api.get("/v1/nodes").json()["nodes"]] == [first.json()["uuid"]]
    # and the store learnt the answer again: the next retry is a plain replay
    replay = post(api, "/v1/nodes", body, token)
    assert replay.headers.get("Idempotent-Replayed") == "true"
    assert replay.json()["uuid"] == first.json()["uuid"]


def test_the_answer_is_the_node_as_it_is_now(api: Api, forget: Callable[[], None]) -> None:
    token = f"tok-{uuid.uuid4()}"
    body = {"driver": "fake-hardware", "name": "changing"}
    first = post(api, "/v1/nodes", body, token).json()
    api.patch(f"/v1/nodes/{first['uuid']}", [{"op": "add", "path": "/extra/k", "value": "v"}])
    forget()
    again = post(api, "/v1/nodes", body, token)
    assert again.status_code == 201
    assert again.json()["extra"] == {"k": "v"}
    assert again.headers["ETag"] == api.get(f"/v1/nodes/{first['uuid']}").headers["ETag"]


def test_another_body_with_the_token_after_the_store_forgot_is_409(
    api: Api, forget: Callable[[], None]
) -> None:
    token = f"tok-{uuid.uuid4()}"
    assert post(api, "/v1/nodes", {"driver": "fake-hardware", "name": "a"}, token).status_code == 201
    forget()
    other = post(api, "/v1/nodes", {"driver": "fake-hardware", "name": "b"}, token)
    assert other.status_code == 409, other.text
    assert error_of(other)["code"] == "idempotency.fingerprint-mismatch"
    assert len(api.get("/v1/nodes").json()["nodes"]) == 1


def test_a_deleted_node_is_not_created_again_by_its_token(api: Api, forget: Callable[[], None]) -> None:
    token = f"tok-{uuid.uuid4()}"
    body = {"driver": "fake-hardware", "name": "gone"}
    first = post(api, "/v1/nodes", body, token).json()
    assert api.delete(f"/v1/nodes/{first['uuid']}").status_code == 204
    forget()
    again = post(api, "/v1/nodes", body, token)
    assert again.status_code == 409, again.text
    assert error_of(again)["code"] == "idempotency.resource-gone"
    assert api.get("/v1/nodes").json()["nodes"] == []


def test_tokens_in_the_database_are_per_project(api: Api, forget: Callable[[], None]) -> None:
    token = f"tok-{uuid.uuid4()}"
    alice, bob = api.as_project("alice"), api.as_project("bob")
    body_a, body_b = (
        {"driver": "fake-hardware", "name": "alices"},
        {"driver": "fake-hardware", "name": "bobs"},
    )
    a = post(alice, "/v1/nodes", body_a, token)
    forget()
    b = post(bob, "/v1/nodes", body_b, token)
    assert a.status_code == b.status_code == 201
    assert a.json()["uuid"] != b.json()["uuid"]
    forget()
    assert post(alice, "/v1/nodes", body_a, token).json()["uuid"] == a.json()["uuid"]
    assert post(bob, "/v1/nodes", body_b, token).json()["uuid"] == b.json()["uuid"]
    assert len(api.get("/v1/nodes").json()["nodes"]) == 2


def _bodies(api: Api) -> list[tuple[str, str, dict[str, Any]]]:
    node = api.node(name=f"n-{uuid.uuid4().hex[:8]}")
    return [
        ("/v1/chassis", "chassis", {"description": "c"}),
        ("/v1/ports", "ports", {"node_uuid": node["uuid"], "address": "52:54:00:00:0d:b1"}),
        ("/v1/portgroups", "portgroups", {"node_uuid": node["uuid"], "name": "pg-db"}),
        ("/v1/deploy_templates", "deploy_templates", {"name": "CUSTOM_DBGUARD", "steps": STEPS_DT}),
        ("/v1/runbooks", "runbooks", {"name": "CUSTOM_DBGUARD", "steps": STEPS_RB}),
        ("/v1/volume/connectors", "connectors",
         {"node_uuid": node["uuid"], "type": "iqn", "connector_id": "iqn.2026-01.org.db:guard"}),
        ("/v1/volume/targets", "targets",
         {"node_uuid": node["uuid"], "volume_type": "iscsi", "volume_id": "vol-db", "boot_index": 0}),
        ("/v1/inspection_rules", "inspection_rules",
         {"actions": [{"op": "set-attribute", "args": ["/driver", "idrac"]}]}),
        ("/v1/allocations", "allocations", {"resource_class": "rc-dbguard"}),
    ]  # fmt: skip


def test_every_declared_create_is_answered_from_the_database(api: Api, forget: Callable[[], None]) -> None:
    for path, key, body in _bodies(api):
        token = f"tok-{uuid.uuid4()}"
        first = post(api, path, body, token)
        assert first.status_code == 201, (path, first.text)
        forget()
        again = post(api, path, body, token)
        assert again.status_code == 201, (path, again.text)
        assert again.json()["uuid"] == first.json()["uuid"], path
        assert again.headers["Location"] == first.headers["Location"], path
        listed = api.get(path).json()[key]
        assert [d["uuid"] for d in listed] == [first.json()["uuid"]], path
        changed = (
            {**body, "description": "other"} if key == "inspection_rules" else {**body, "extra": {"o": 1}}
        )
        forget()
        assert post(api, path, changed, token).status_code == 409, path


# -- a real memcached that restarts ---------------------------------------------------------------


@pytest.fixture
def memcached_service(backend_url: str, memcached_server: Any) -> Iterator[Server]:
    server = Server(build_app(database_url=backend_url, store_url=memcached_server.url)).start()
    reset(server.app)
    try:
        yield server
    finally:
        server.stop()


def test_a_memcached_restart_does_not_create_twice(memcached_service: Server, memcached_server: Any) -> None:
    api = Api(memcached_service.url)
    try:
        tokens = [f"tok-{uuid.uuid4()}" for _ in range(5)]
        firsts = {t: post(api, "/v1/nodes", {"driver": "fake-hardware", "name": f"m{i}"}, t)
                  for i, t in enumerate(tokens)}  # fmt: skip
        assert all(r.status_code == 201 for r in firsts.values())
        memcached_server.stop()
        memcached_server.start()  # an empty memcached: every record is gone
        for i, t in enumerate(tokens):
            again = post(api, "/v1/nodes", {"driver": "fake-hardware", "name": f"m{i}"}, t)
            assert again.status_code == 201, again.text
            assert again.json()["uuid"] == firsts[t].json()["uuid"]
            assert again.headers.get("Idempotent-Replayed") == "true"  # answered from the database
        assert len(api.get("/v1/nodes").json()["nodes"]) == len(tokens)
    finally:
        api.close()


def test_the_service_table_is_the_library_schema() -> None:
    import sqlalchemy as sa

    from apimw.idempotency_db import client_tokens_table
    from baremetal_service.db.api import CLIENT_TOKENS

    library = client_tokens_table(sa.MetaData(), name="client_tokens")

    def shape(table: sa.Table) -> list[tuple[str, str, bool, bool]]:
        return [(c.name, str(c.type), bool(c.nullable), c.primary_key) for c in table.columns]

    assert shape(CLIENT_TOKENS) == shape(library)
    assert {i.name for i in CLIENT_TOKENS.indexes} == {i.name for i in library.indexes}


# -- PostgreSQL at REPEATABLE READ: the losing INSERT is a serialization failure ----------------


@pytest.fixture
def repeatable_read_service(postgres_server: Any, pg_template: str) -> Iterator[Any]:
    """The domain service on a PostgreSQL database whose default isolation is REPEATABLE READ
    (``ALTER DATABASE ... SET default_transaction_isolation``, as a deployment would)."""
    import psycopg

    from baremetal_service.deploy import make_service
    from tests.example.conftest import drop_pg_database, new_pg_database, pg_admin_dsn, pg_url

    name = new_pg_database(postgres_server, pg_template)
    with psycopg.connect(pg_admin_dsn(postgres_server), autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} SET default_transaction_isolation TO 'repeatable read'")
    service = make_service(pg_url(postgres_server, name), conductor_workers=0)
    try:
        yield service
    finally:
        service.close()
        drop_pg_database(postgres_server, name)


def test_racing_creates_at_repeatable_read_make_one_node_and_no_error(repeatable_read_service: Any) -> None:
    """Workers whose stores lost the token race at the database: the losers' INSERTs fail with
    40001 at REPEATABLE READ; the create is retried and answered with the winner's node."""
    import threading

    from apimw.idempotency import ClientToken

    service = repeatable_read_service
    with service.db.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW transaction_isolation").scalar() == "repeatable read"
    tok = ClientToken("*shared*", f"tok-{uuid.uuid4()}", "f" * 64)
    writers = 6
    barrier = threading.Barrier(writers)
    answers: list[str] = []
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            barrier.wait(10)
            node = service.create_node({"driver": "fake-hardware", "name": "rr-node"}, token=tok)
            answers.append(node["uuid"])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    nodes = service.list_nodes()
    assert [n["uuid"] for n in nodes] == [answers[0]]
    assert answers == [answers[0]] * writers


# -- the service configured with mismatch_status = 422 (the IETF draft) -------------------------


@pytest.fixture
def paste_server(backend_url: str, tmp_path: Any) -> Iterator[Callable[..., Server]]:
    """Start the example's api-paste.ini pipeline with extra ``[filter:idempotency]`` options."""
    from baremetal_service.deploy import PASTE_INI, load_paste_app

    started: list[Server] = []

    def start(*, store_url: str = "memory://", hang: bool = False, **options: Any) -> Server:
        text = PASTE_INI.read_text()
        extra = "".join(f"{key} = {value}\n" for key, value in options.items())
        text = text.replace("[filter:idempotency]\n", "[filter:idempotency]\n" + extra, 1)
        if hang:  # a worker that can be stopped between its commit and the store completion
            text = text.replace(" idempotency etag ", " idempotency hang etag ", 1)
            text += f"\n[filter:hang]\npaste.filter_factory = {__name__}:hang_filter\n"
        ini = tmp_path / f"api-paste-{len(started)}.ini"
        ini.write_text(text)
        server = Server(load_paste_app(ini, database_url=backend_url, store_url=store_url)).start()
        started.append(server)
        if len(started) == 1:
            reset(server.app)
        return server

    yield start
    for server in started:
        server.stop()


def test_a_reused_token_gets_the_configured_mismatch_status_from_the_database_too(
    paste_server: Callable[..., Server],
) -> None:
    """``mismatch_status = 422``: the store's answer and the database guard's are the same."""
    server = paste_server(mismatch_status=422)
    api = Api(server.url)
    try:
        token = f"tok-{uuid.uuid4()}"
        assert post(api, "/v1/nodes", {"driver": "fake-hardware", "name": "a"}, token).status_code == 201
        from_store = post(api, "/v1/nodes", {"driver": "fake-hardware", "name": "b"}, token)
        restarted = paste_server(mismatch_status=422)  # another process: its store never saw the token
        other = Api(restarted.url)
        try:
            from_db = post(other, "/v1/nodes", {"driver": "fake-hardware", "name": "b"}, token)
            # not stored as the token's answer: the first request's retry still gets its node
            again = post(other, "/v1/nodes", {"driver": "fake-hardware", "name": "a"}, token)
        finally:
            other.close()
        assert again.status_code == 201, again.text
        assert again.json()["name"] == "a"
        assert from_store.status_code == 422, from_store.text
        assert from_db.status_code == 422, from_db.text
        assert error_of(from_db)["code"] == error_of(from_store)["code"] == "idempotency.fingerprint-mismatch"
        assert len(api.get("/v1/nodes").json()["nodes"]) == 1
    finally:
        api.close()


# -- the token is looked up before the checks that the first create itself may now fail -------


def test_a_named_node_retried_on_a_fresh_service_process_is_the_same_node(
    paste_server: Callable[..., Server],
) -> None:
    """Another API process on the same database (its store never saw the token): 201 with the
    first node, not 409 "a node named ... already exists"."""
    first_server = paste_server()
    api = Api(first_server.url)
    try:
        token = f"tok-{uuid.uuid4()}"
        body = {"driver": "fake-hardware", "name": "named-once"}
        first = post(api, "/v1/nodes", body, token)
        assert first.status_code == 201, first.text
        other = Api(paste_server().url)
        try:
            again = post(other, "/v1/nodes", body, token)
            reused = post(other, "/v1/nodes", {**body, "description": "other"}, token)
        finally:
            other.close()
        assert again.status_code == 201, again.text
        assert again.json()["uuid"] == first.json()["uuid"]
        assert again.headers["Location"].endswith(f"/v1/nodes/{first.json()['uuid']}")
        assert set(again.json()) == set(first.json())  # the body shape of the first answer
        assert reused.status_code == 409, reused.text
        assert error_of(reused)["code"] == "idempotency.fingerprint-mismatch"
        assert [n["uuid"] for n in api.get("/v1/nodes").json()["nodes"]] == [first.json()["uuid"]]
    finally:
        api.close()


def test_a_port_retried_after_its_node_changed_owner_is_the_port_not_a_403(
    api: Api, forget: Callable[[], None]
) -> None:
    """The project created a port on its node; the node was then given to another project
    (leased back).  The retry's answer is the port it created (as a replay would have been),
    not the 403 that a new port on that node would get now."""
    alice = api.as_project("alice")
    try:
        node = alice.node(name="alices-node")
        token = f"tok-{uuid.uuid4()}"
        body = {"node_uuid": node["uuid"], "address": "52:54:00:00:0d:c1"}
        first = post(alice, "/v1/ports", body, token)
        assert first.status_code == 201, first.text
        moved = api.patch(f"/v1/nodes/{node['uuid']}", [
            {"op": "replace", "path": "/owner", "value": "bob"},
            {"op": "add", "path": "/lessee", "value": "alice"},
        ])  # fmt: skip
        assert moved.status_code == 200, moved.text
        forget()
        again = post(alice, "/v1/ports", body, token)
        assert again.status_code == 201, again.text
        assert again.json()["uuid"] == first.json()["uuid"]
        assert again.headers["Location"] == first.headers["Location"]
        assert len(api.get("/v1/ports").json()["ports"]) == 1
        # a new port on that node (another token) is refused, as before
        other = {**body, "address": "52:54:00:00:0d:c2"}
        assert post(alice, "/v1/ports", other, f"tok-{uuid.uuid4()}").status_code == 403
    finally:
        alice.close()


def test_a_port_retried_after_its_node_was_deleted_is_resource_gone(
    api: Api, forget: Callable[[], None]
) -> None:
    """The node (and with it the port the token created) is gone: 409 idempotency.resource-gone,
    the token's answer, not the 400 "node not found" of a new create."""
    alice = api.as_project("alice")
    try:
        node = alice.node(name="short-lived")
        token = f"tok-{uuid.uuid4()}"
        body = {"node_uuid": node["uuid"], "address": "52:54:00:00:0d:c3"}
        assert post(alice, "/v1/ports", body, token).status_code == 201
        assert api.delete(f"/v1/nodes/{node['uuid']}").status_code == 204
        forget()
        again = post(alice, "/v1/ports", body, token)
        assert again.status_code == 409, again.text
        assert error_of(again)["code"] == "idempotency.resource-gone"
    finally:
        alice.close()



# -- a worker that stopped after its commit, before the store completion: the lease expires ---

#: Requests with ``X-Test-Hang: <id>`` stop after the app answered (the create committed),
#: before the idempotency middleware stores the answer, until ``HANGING[id][1]`` is set.
HANGING: dict[str, tuple[Any, Any]] = {}


def hang_filter(global_conf: Any, **local_conf: Any) -> Callable[[Any], Any]:
    """paste filter, inside the idempotency middleware: a worker stuck between commit and completion."""

    def make(app: Any) -> Any:
        def hang(environ: dict[str, Any], start_response: Any) -> Any:
            events = HANGING.get(environ.get("HTTP_X_TEST_HANG", ""))
            if events is None:
                return app(environ, start_response)
            answered, resume = events
            body = b"".join(app(environ, start_response))  # the create has committed
            answered.set()
            resume.wait(30)
            return [body]

        return hang

    return make


@pytest.mark.parametrize("store", ["redis", "memcached"])
def test_after_the_lease_of_a_stuck_first_execution_its_retry_gets_the_same_node(
    paste_server: Callable[..., Server], request: pytest.FixtureRequest, store: str
) -> None:
    """The first execution committed its node, then its worker stopped before storing the
    answer (killed, or hung): the claim stays in the store (real Redis / memcached) until its
    lease (1 s) expires.  Until then a retry is 409 in-flight; after it, the retry runs again
    and the database guard answers with the node the first execution created -- no second
    node.  The stuck worker's late completion is fenced: the retry's answer stays the token's."""
    import threading
    import time

    store_server = request.getfixturevalue(f"{store}_server")
    server = paste_server(store_url=store_server.url, lease=1, hang=True)
    api = Api(server.url)
    hang_id = uuid.uuid4().hex
    answered, resume = threading.Event(), threading.Event()
    HANGING[hang_id] = (answered, resume)
    token = f"tok-{uuid.uuid4()}"
    body = {"driver": "fake-hardware", "description": f"stuck on {store}"}  # no name: a 2nd would be made
    stuck_answer: list[Any] = []
    stuck_api = Api(server.url)

    def first_execution() -> None:
        headers = {"X-Client-Token": token, "X-Test-Hang": hang_id}
        stuck_answer.append(stuck_api.post("/v1/nodes", body, headers=headers))

    stuck = threading.Thread(target=first_execution)
    try:
        stuck.start()
        assert answered.wait(10), "the first execution did not answer"
        nodes = api.get("/v1/nodes").json()["nodes"]
        assert len(nodes) == 1  # committed, but its answer is not stored
        in_flight = post(api, "/v1/nodes", body, token)
        assert in_flight.status_code == 409, in_flight.text
        assert error_of(in_flight)["code"] == "idempotency.in-flight"
        deadline = time.monotonic() + 10
        again = in_flight
        while time.monotonic() < deadline:
            time.sleep(0.25)
            again = post(api, "/v1/nodes", body, token)
            if again.status_code != 409 or error_of(again)["code"] != "idempotency.in-flight":
                break
        assert again.status_code == 201, again.text
        assert again.json()["uuid"] == nodes[0]["uuid"]
        assert again.headers.get("Idempotent-Replayed") == "true"  # answered from the database
        assert [n["uuid"] for n in api.get("/v1/nodes").json()["nodes"]] == [nodes[0]["uuid"]]
    finally:
        resume.set()
        stuck.join(30)
        HANGING.pop(hang_id, None)
        stuck_api.close()
    try:
        assert stuck_answer and stuck_answer[0].status_code == 201
        assert stuck_answer[0].json()["uuid"] == nodes[0]["uuid"]
        replay = post(api, "/v1/nodes", body, token)  # the retry's stored answer, not a third run
        assert replay.status_code == 201 and replay.headers.get("Idempotent-Replayed") == "true"
        assert replay.json()["uuid"] == nodes[0]["uuid"]
        assert len(api.get("/v1/nodes").json()["nodes"]) == 1
    finally:
        api.close()
