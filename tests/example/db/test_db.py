"""The data layer on SQLite and PostgreSQL: migrations, CRUD, paging, etags, atomic If-Match."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apimw.errors import ConfigError
from apimw.etag import parse_if_match
from baremetal_service import exceptions as exc
from baremetal_service.db.api import NODES, Database, public
from baremetal_service.db.engine import create_engine, make_sessionmaker
from baremetal_service.db.etags import make_generator
from baremetal_service.db.migrate import current_revision, head_revision, upgrade
from baremetal_service.db.models import Base, Node

KEY = b"k" * 32


@pytest.fixture
def db(database_url: str) -> Any:
    database = Database(database_url, etag_generator=make_generator(KEY))
    yield database
    database.dispose()


def node(db: Database, **values: Any) -> dict[str, Any]:
    values.setdefault("driver", "fake-hardware")
    values.setdefault("provision_state", "enroll")
    return db.insert("node", values)


# -- engine and migrations -------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("sqlite://", id="sqlite-memory"),
        pytest.param("sqlite:///:memory:", id="sqlite-memory-explicit"),
        pytest.param("mysql://u@h/db", id="mysql"),
        pytest.param("postgresql+pg8000://u@h/db", id="postgres-other-driver"),
        pytest.param("not a url", id="garbage"),
    ],
)
def test_unsupported_database_urls_fail_at_startup(url: str) -> None:
    with pytest.raises(ConfigError):
        create_engine(url)


def test_sqlite_connections_use_wal_busy_timeout_and_foreign_keys(tmp_path: Any) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    finally:
        engine.dispose()


def test_migrations_build_exactly_the_models_schema(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url)
    try:
        assert current_revision(engine) is None
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == []
        upgrade(engine)  # at head: a no-op, not an error
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_etag_columns_come_from_their_own_migration_and_old_rows_get_etags(
    empty_database_url: str,
) -> None:
    engine = create_engine(empty_database_url)
    try:
        upgrade(engine, "0001")
        inspector = sa.inspect(engine)
        for table in ("nodes", "ports", "portgroups", "chassis", "node_events"):
            assert "etag" not in {c["name"] for c in inspector.get_columns(table)}
        with engine.begin() as conn:  # a node written before etags existed
            conn.execute(
                sa.text(
                    "INSERT INTO nodes (uuid, name, driver, driver_info, driver_internal_info, "
                    "properties, extra, instance_info, provision_state, maintenance, clean_step, "
                    "deploy_step, conductor_group, protected, retired, disable_power_off, "
                    "console_enabled, network_data, raid_config, target_raid_config, service_step, "
                    "created_at) VALUES ('1be26c0b-03f2-4d2e-ae87-c02d7f33c123', 'old', "
                    "'fake-hardware', '{}', '{}', '{}', '{}', '{}', 'enroll', false, '{}', '{}', '', "
                    "false, false, false, false, '{}', '{}', '{}', '{}', '2020-01-01 00:00:00')"
                )
            )
        upgrade(engine)
        inspector = sa.inspect(engine)
        for table in ("nodes", "ports", "portgroups", "chassis", "node_events"):
            assert "etag" in {c["name"] for c in sa.inspect(engine).get_columns(table)}
    finally:
        engine.dispose()
    db = Database(empty_database_url, etag_generator=make_generator(KEY))
    try:
        assert db.backfill_etags() == 1
        old = db.get("node", "old")
        assert old["etag"] == make_generator(KEY).etag(public(old), "node")
        assert db.backfill_etags() == 0
    finally:
        db.dispose()


def test_orm_sessions_read_what_the_data_api_wrote(db: Database) -> None:
    created = node(db, name="orm", properties={"cpus": 2})
    with make_sessionmaker(db.engine)() as session:
        row = session.execute(sa.select(Node).where(Node.uuid == created["uuid"])).scalar_one()
        assert (row.name, row.properties, row.etag) == ("orm", {"cpus": 2}, created["etag"])
        assert row.created_at.isoformat() + "+00:00" == created["created_at"]


def test_lookup_columns_are_indexed(db: Database) -> None:
    inspector = sa.inspect(db.engine)

    def indexed(table: str) -> set[str]:
        cols = {c for ix in inspector.get_indexes(table) for c in ix["column_names"]}
        cols |= {c for uc in inspector.get_unique_constraints(table) for c in uc["column_names"]}
        return cols

    assert {"uuid", "name", "provision_state", "instance_uuid", "pending_action"} <= indexed("nodes")
    assert {"uuid", "address", "node_id"} <= indexed("ports")
    assert {"uuid", "address", "name"} <= indexed("portgroups")


# -- CRUD ------------------------------------------------------------------------------


def test_create_get_by_uuid_and_name_update_delete(db: Database) -> None:
    created = node(db, name="n1", properties={"cpus": 4})
    assert created["uuid"] and created["created_at"].endswith("+00:00")
    assert created["updated_at"] is None
    by_name = db.get("node", "n1")
    by_uuid = db.get("node", created["uuid"].upper())
    assert public(by_name) == public(by_uuid)
    assert by_name["properties"] == {"cpus": 4}
    updated = db.update("node", "n1", lambda cur: {"description": "rack 3"})
    assert updated["description"] == "rack 3" and updated["updated_at"] is not None
    assert db.get("node", "n1")["description"] == "rack 3"
    db.delete("node", "n1")
    with pytest.raises(exc.NodeNotFound) as info:
        db.get("node", "n1")
    assert info.value.status == 404
    assert info.value.detail == "Node n1 could not be found."


@pytest.mark.parametrize(
    ("kind", "values", "error", "status"),
    [
        pytest.param("node", {"name": "dup"}, exc.NodeNameExists, 409, id="node-name"),
        pytest.param("port", {"address": "52:54:00:aa:bb:01"}, exc.MACAlreadyExists, 409, id="port-mac"),
    ],
)
def test_duplicates_are_409_with_ironic_text(
    db: Database, kind: str, values: dict[str, Any], error: type[exc.BaremetalError], status: int
) -> None:
    owner = node(db, name="owner")
    if kind == "node":
        node(db, **values)
        with pytest.raises(error) as info:
            node(db, **values)
        assert info.value.detail == "A node with name dup already exists."
    else:
        db.insert("port", {**values, "node_uuid": owner["uuid"]})
        with pytest.raises(error) as info:
            db.insert("port", {**values, "node_uuid": owner["uuid"]})
        assert info.value.detail == "A port with MAC address 52:54:00:aa:bb:01 already exists."
    assert info.value.status == status
    assert len(db.list(kind)) == (1 if kind == "port" else 2)


def test_deleting_a_node_deletes_its_ports_and_portgroups(db: Database) -> None:
    n = node(db, name="n")
    pg = db.insert("portgroup", {"node_uuid": n["uuid"], "name": "bond0"})
    db.insert("port", {"node_uuid": "n", "address": "52:54:00:00:00:01", "portgroup_uuid": pg["uuid"]})
    db.delete("node", "n")
    assert db.list("port") == [] and db.list("portgroup") == []


def test_reference_to_a_missing_node_is_a_400_not_found(db: Database) -> None:
    with pytest.raises(exc.NodeNotFound) as info:
        db.insert(
            "port", {"node_uuid": "3f1c5b56-5c4e-4b8a-9b7e-2a1d0c9e8f70", "address": "52:54:00:00:00:02"}
        )
    assert info.value.status == 400


# -- lists -----------------------------------------------------------------------------


@pytest.mark.parametrize("sort_dir", ["asc", "desc"])
@pytest.mark.parametrize("sort_key", ["id", "name", "provision_state", "created_at"])
def test_pages_cover_every_node_once_in_order(db: Database, sort_key: str, sort_dir: str) -> None:
    names = ["c", None, "a", "e", None, "b", "d"]
    states = ["enroll", "available", "enroll", "active", "manageable", "available", "enroll"]
    uuids = [node(db, name=n, provision_state=s)["uuid"] for n, s in zip(names, states, strict=True)]
    everything = db.list("node", sort_key=sort_key, sort_dir=sort_dir)
    assert sorted(d["uuid"] for d in everything) == sorted(uuids)
    seen: list[str] = []
    marker = None
    for _ in range(10):
        page = db.list("node", limit=3, marker=marker, sort_key=sort_key, sort_dir=sort_dir)
        seen += [d["uuid"] for d in page]
        if len(page) < 3:
            break
        marker = page[-1]["uuid"]
    assert seen == [d["uuid"] for d in everything]
    if sort_key == "name":
        present = [d["name"] for d in everything if d["name"] is not None]
        assert present == sorted(present, reverse=sort_dir == "desc")


def test_bad_paging_parameters_are_400_and_unknown_marker_404(db: Database) -> None:
    node(db)
    with pytest.raises(exc.InvalidParameterValue):
        db.list("node", sort_key="driver_info")
    with pytest.raises(exc.InvalidParameterValue):
        db.list("node", sort_dir="sideways")
    with pytest.raises(exc.InvalidParameterValue):
        db.list("node", limit=-1)
    with pytest.raises(exc.NodeNotFound):
        db.list("node", marker="0b7c8a4e-1111-4f3e-9d56-0c2b9d1c7e11")


def test_listing_100_nodes_is_one_query(db: Database) -> None:
    for i in range(100):
        node(db, name=f"n{i}")
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", record)
    try:
        page = db.list("node", limit=100)
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", record)
    assert len(page) == 100
    assert len(statements) == 1, statements
    # one pooled connection (this thread's checkouts: SQLite's WAL checkpointer takes one of
    # its own now and then)
    checkouts: list[Any] = []
    me = threading.get_ident()

    def checkout(*args: Any) -> None:
        if threading.get_ident() == me:
            checkouts.append(args)

    sa.event.listen(db.engine, "checkout", checkout)
    try:
        assert db.list("node", limit=100) == page
    finally:
        sa.event.remove(db.engine, "checkout", checkout)
    assert len(checkouts) == 1
    narrow = db.list("node", limit=100, fields=["name", "provision_state"], internal=False)
    assert [d["name"] for d in narrow] == [f"n{i}" for i in range(100)]
    assert set(narrow[0]) == {"uuid", "name", "provision_state"}


# -- etags -------------------------------------------------------------------------------


def test_stored_etag_is_the_etag_of_the_stored_state_after_a_round_trip(db: Database) -> None:
    gen = make_generator(KEY)
    props = {"cpus": 4, "ratio": 1.5, "whole": 2.0, "text": "é ☃", "nested": {"b": [1, {"a": None}]}}
    n = node(db, name="rt", properties=props, driver_info={"ipmi_password": "s3cret"})
    db.update("node", "rt", lambda cur: {"extra": {"x": 1}})
    fresh = db.get("node", "rt")
    assert fresh["etag"] == gen.etag(public(fresh), "node")
    assert fresh["etag"] != n["etag"]
    assert fresh["etag"].startswith('W/"') and len(fresh["etag"]) == 132
    assert "s3cret" not in fresh["etag"]


def test_node_etag_ignores_driver_internal_info_but_not_data(db: Database) -> None:
    n = node(db, name="e")
    same = db.update("node", "e", lambda cur: {"driver_internal_info": {"agent_url": "x"}})
    assert same["etag"] == n["etag"] and same["updated_at"] is not None
    changed = db.update("node", "e", lambda cur: {"provision_state": "manageable"})
    assert changed["etag"] != n["etag"]


def test_port_etag_changes_with_its_node(db: Database) -> None:
    a, b = node(db, name="a"), node(db, name="b")
    port = db.insert("port", {"node_uuid": "a", "address": "52:54:00:00:00:03"})
    moved = db.update("port", port["uuid"], lambda cur: {"node_uuid": "b"})
    assert moved["node_uuid"] == b["uuid"] != a["uuid"]
    assert moved["etag"] != port["etag"]
    assert db.get("port", port["uuid"])["etag"] == moved["etag"]


def test_every_write_records_an_event_with_the_etag(db: Database) -> None:
    n = node(db, name="ev")
    u = db.update("node", "ev", lambda cur: {"description": "d"})
    db.delete("node", "ev")
    events = db.list_events(resource_uuid=n["uuid"])
    assert [e["event_type"] for e in events] == [
        "baremetal.node.create.end", "baremetal.node.update.end", "baremetal.node.delete.end",
    ]  # fmt: skip
    assert [e["etag"] for e in events] == [n["etag"], u["etag"], u["etag"]]
    assert events[1]["payload"]["description"] == "d"
    assert "driver_info" not in events[0]["payload"]


# -- atomic If-Match -----------------------------------------------------------------------


def test_if_match_stale_is_412_and_current_passes(db: Database) -> None:
    n = node(db, name="im")
    cond = parse_if_match(n["etag"])
    assert cond is not None
    db.update("node", "im", lambda cur: {"description": "first"}, if_match=cond)
    assert cond.enforced
    with pytest.raises(exc.PreconditionFailed) as info:
        db.update("node", "im", lambda cur: {"description": "second"}, if_match=n["etag"])
    assert info.value.status == 412 and info.value.code == "etag.precondition-failed"
    assert db.get("node", "im")["description"] == "first"
    with pytest.raises(exc.PreconditionFailed):
        db.delete("node", "im", if_match=[n["etag"]])
    db.delete("node", "im", if_match="*")


def test_two_writers_with_the_same_if_match_one_wins(db: Database) -> None:
    """Both read the node and pass the If-Match check before either writes: one 412."""
    n = node(db, name="race")
    barrier = threading.Barrier(2, timeout=10)
    results: dict[str, Any] = {}

    def writer(label: str) -> None:
        def mutate(cur: dict[str, Any]) -> dict[str, Any]:
            if cur["etag"] == n["etag"]:
                barrier.wait()  # both have read the same etag
            return {"description": label}

        try:
            results[label] = db.update("node", "race", mutate, if_match=n["etag"])
        except exc.PreconditionFailed as error:
            results[label] = error

    threads = [threading.Thread(target=writer, args=(x,)) for x in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    outcomes = sorted(type(r).__name__ for r in results.values())
    assert outcomes == ["PreconditionFailed", "dict"]
    winner = next(r for r in results.values() if isinstance(r, dict))
    assert db.get("node", "race")["description"] == winner["description"]


def test_unconditional_concurrent_writes_lose_nothing(db: Database) -> None:
    """Twenty threads each add their own key to extra: all twenty keys survive."""
    node(db, name="many")

    def add(i: int) -> None:
        db.update("node", "many", lambda cur: {"extra": {**cur["extra"], f"k{i}": i}})

    threads = [threading.Thread(target=add, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert db.get("node", "many")["extra"] == {f"k{i}": i for i in range(20)}


# -- leases ------------------------------------------------------------------------------


def test_only_one_claim_wins_and_expired_leases_can_be_taken_over(db: Database) -> None:
    n = node(db, name="lease")
    assert not db.claim_node(n["id"], "w1", lease_timeout=60)  # nothing queued
    db.update("node", "lease", lambda cur: {"pending_action": "power:power on"})
    assert db.claim_node(n["id"], "w1", lease_timeout=60)
    assert not db.claim_node(n["id"], "w2", lease_timeout=60)
    assert db.pending_nodes(lease_timeout=60) == []
    with db.engine.begin() as conn:  # w1 went silent long ago
        conn.execute(NODES.update().where(NODES.c.id == n["id"]).values(reserved_at=dt.datetime(2000, 1, 1)))
    assert db.claim_node(n["id"], "w2", lease_timeout=60)
    assert db.get("node", "lease")["reservation"] == "w2"


def test_eight_workers_claiming_one_node_at_once_one_wins(db: Database) -> None:
    n = node(db, name="contended")
    db.update("node", "contended", lambda cur: {"pending_action": "provision:manage"})
    barrier = threading.Barrier(8, timeout=10)
    wins: list[str] = []

    def claim(worker: str) -> None:
        barrier.wait()
        if db.claim_node(n["id"], worker, lease_timeout=60):
            wins.append(worker)

    threads = [threading.Thread(target=claim, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(wins) == 1
    assert db.get("node", "contended")["reservation"] == wins[0]


def test_services_starting_at_once_on_an_empty_database_migrate_it_once(empty_database_url: str) -> None:
    from baremetal_service.objects.service import BaremetalService

    barrier = threading.Barrier(3, timeout=20)
    services: list[BaremetalService] = []
    errors: list[BaseException] = []

    def start() -> None:
        barrier.wait()
        try:
            services.append(BaremetalService(empty_database_url, conductor_workers=0))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    try:
        assert errors == [] and len(services) == 3
        assert current_revision(services[0].db.engine) == head_revision()
        created = services[0].create_node({"name": "after", "driver": "fake-hardware"})
        assert services[2].get_node("after")["uuid"] == created["uuid"]
    finally:
        for svc in services:
            svc.close()


_VALUES = st.one_of(st.none(), st.sampled_from(["a", "b", "bb", "c", "Z"]))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(st.tuples(_VALUES, st.sampled_from(["enroll", "available", "active"])), max_size=12),
    sort_key=st.sampled_from(["resource_class", "provision_state", "id"]),
    sort_dir=st.sampled_from(["asc", "desc"]),
    limit=st.integers(min_value=1, max_value=5),
)
def test_paging_matches_a_python_sort_for_any_data(
    db: Database, rows: list[tuple[str | None, str]], sort_key: str, sort_dir: str, limit: int
) -> None:
    """Pages (NULLs first ascending, ties by id) concatenate to exactly the sorted table."""
    with db.engine.begin() as conn:
        conn.execute(NODES.delete())
    made = [node(db, resource_class=rc, provision_state=ps) for rc, ps in rows]

    def key(doc: dict[str, Any]) -> tuple[Any, ...]:
        value = doc[sort_key]
        return (value is not None, value if value is not None else 0, doc["id"])

    expected = [d["uuid"] for d in sorted(made, key=key, reverse=sort_dir == "desc")]
    seen: list[str] = []
    marker = None
    for _ in range(len(rows) + 2):
        page = db.list("node", limit=limit, marker=marker, sort_key=sort_key, sort_dir=sort_dir)
        seen += [d["uuid"] for d in page]
        if len(page) < limit:
            break
        marker = page[-1]["uuid"]
    assert seen == expected


_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(extra=st.dictionaries(_TEXT, _JSON, max_size=4), properties=st.dictionaries(_TEXT, _JSON, max_size=3))
def test_written_documents_and_etags_survive_the_database_round_trip(
    db: Database, extra: dict[str, Any], properties: dict[str, Any]
) -> None:
    """What a write returns is what a read gives back, and the stored etag is the etag of it
    (JSONB turns 1e20 into 100000000000000000000: no drift allowed)."""
    gen = make_generator(KEY)
    created = node(db, extra=extra)
    assert public(created) == public(db.get("node", created["uuid"]))
    updated = db.update("node", created["uuid"], lambda cur: {"properties": properties, "description": "x"})
    fresh = db.get("node", created["uuid"])
    assert public(updated) == public(fresh)
    assert fresh["etag"] == updated["etag"] == gen.etag(public(fresh), "node")


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"name": "a\x00b"}, id="column"),
        pytest.param({"extra": {"k": "a\x00b"}}, id="json-value"),
        pytest.param({"properties": {"k\x00": 1}}, id="json-key"),
        pytest.param({"extra": {"k": [1, {"deep": "\x00"}]}}, id="json-nested"),
        pytest.param({"name": "n" * 256}, id="too-long-name"),
        pytest.param({"resource_class": "R" * 81}, id="too-long-resource-class"),
    ],
)
def test_values_postgresql_cannot_store_are_400_on_every_backend(
    db: Database, values: dict[str, Any]
) -> None:
    with pytest.raises(exc.InvalidParameterValue) as info:
        node(db, **values)
    assert info.value.status == 400 and ("NUL" in info.value.detail or "longer than" in info.value.detail)
    n = node(db, name="clean")
    with pytest.raises(exc.InvalidParameterValue):
        db.update("node", "clean", lambda cur: values)
    assert db.get("node", "clean")["etag"] == n["etag"]


def test_first_connections_to_a_new_sqlite_file_race_without_database_locked(tmp_path: Any) -> None:
    """Processes that open a new SQLite file at the same moment all get WAL and a connection.

    Switching a file to WAL needs an exclusive lock; a connection that asks for it while
    another holds the write lock gets "database is locked" at once (SQLite's deadlock
    avoidance, no busy wait). Seen as a startup failure when several services start on
    an empty database together (the migration test above, under load).
    """
    errors: list[str] = []
    for round_ in range(60):
        url = f"sqlite:///{tmp_path / f'race{round_}.db'}"
        barrier = threading.Barrier(4, timeout=20)

        def first_write(i: int, url: str = url, barrier: threading.Barrier = barrier) -> None:
            engine = create_engine(url)
            try:
                barrier.wait()
                with engine.connect() as conn:
                    conn.exec_driver_sql("BEGIN IMMEDIATE")
                    conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (x)")
                    conn.exec_driver_sql("INSERT INTO t VALUES (?)", (i,))
                    conn.commit()
                    assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            except Exception as error:  # noqa: BLE001 - collected and asserted below
                errors.append(f"{type(error).__name__}: {error}")
            finally:
                engine.dispose()

        threads = [threading.Thread(target=first_write, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert errors == []
