"""The database-side X-Client-Token guard (apimw.idempotency_db), on SQLite and a real PostgreSQL.

The replay store is a cache: a restarted memcached, an expired lease or a lost completion
write forget a token, and its retry would create a second resource.  The guard records
the token in the app's create transaction, unique per scope and token, so the retry finds
the first execution's resource instead.
"""

from __future__ import annotations

import datetime as dt
import io
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oslo_middleware.request_id import RequestId
from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, create_engine, func, select
from sqlalchemy.engine import Connection

from apimw.errors import HTTPProblem
from apimw.idempotency import (
    ENVIRON_REPLAYED,
    ENVIRON_TOKEN,
    ClientToken,
    IdempotencyMiddleware,
    client_token,
    open_store,
)
from apimw.idempotency_db import (
    DEFAULT_RETENTION,
    AlreadyCreated,
    CreateContended,
    TokenReused,
    check_token,
    client_tokens_table,
    purge_tokens,
    record_token,
    run_create,
)
from tests.idempotency_support import call, environ_for
from tests.servers import Server

FP_A = "a" * 64
FP_B = "b" * 64


def make_tables() -> tuple[Table, Table]:
    metadata = MetaData()
    tokens = client_tokens_table(metadata, name=f"tokens_{uuid.uuid4().hex[:8]}")
    things = Table(
        f"things_{uuid.uuid4().hex[:8]}", metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("uuid", String(36), nullable=False, unique=True),
        Column("name", String(64)),
    )  # fmt: skip
    return tokens, things


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, Table, Table]]:
    tokens, things = make_tables()
    if request.param == "sqlite":
        engine = create_engine(f"sqlite:///{tmp_path / 'tokens.db'}", connect_args={"timeout": 30},
                               pool_size=20, max_overflow=0)  # fmt: skip
    else:
        server: Server = request.getfixturevalue("postgres_server")
        engine = create_engine(server.url, pool_size=20, max_overflow=0)  # type: ignore[attr-defined]
    tokens.metadata.create_all(engine)
    try:
        yield engine, tokens, things
    finally:
        tokens.metadata.drop_all(engine)
        engine.dispose()


def create(
    engine: Engine,
    tokens: Table,
    things: Table,
    token: ClientToken | None,
    name: str,
    *,
    hold: float = 0.0,
    retries: int = 5,
) -> str:
    """An app's create: the guard, then the row, in one transaction; the uuid it answers with."""
    new_uuid = str(uuid.uuid4())

    def once(conn: Connection) -> None:
        if token is not None:
            record_token(conn, tokens, token, kind="thing", resource_id=new_uuid)
        conn.execute(things.insert(), {"uuid": new_uuid, "name": name})
        if hold:
            time.sleep(hold)

    try:
        run_create(engine, once, retries=retries)
    except AlreadyCreated as done:
        assert done.kind == "thing"
        return done.resource_id
    return new_uuid


def count(engine: Engine, table: Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def token(value: str = "tok-1", fp: str = FP_A, scope: str = "project-a") -> ClientToken:
    return ClientToken(scope=scope, token=value, fingerprint=fp, project=scope)


def test_the_first_create_records_the_token_with_the_resource(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    created = create(engine, tokens, things, token(), "one")
    with engine.connect() as conn:
        row = conn.execute(select(tokens)).mappings().one()
    assert (row["scope"], row["token"], row["fingerprint"]) == ("project-a", "tok-1", FP_A)
    assert (row["resource_kind"], row["resource_id"]) == ("thing", created)
    assert isinstance(row["created_at"], dt.datetime)


def test_a_retry_after_the_store_forgot_finds_the_first_resource(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    first = create(engine, tokens, things, token(), "one")
    again = create(engine, tokens, things, token(), "one")
    assert again == first
    assert count(engine, things) == 1  # the retry's transaction rolled back its row
    assert count(engine, tokens) == 1


def test_the_same_token_with_another_request_is_a_409(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    create(engine, tokens, things, token(fp=FP_A), "one")
    with pytest.raises(TokenReused) as caught:
        create(engine, tokens, things, token(fp=FP_B), "two")
    assert isinstance(caught.value, HTTPProblem)
    assert (caught.value.status, caught.value.code) == (409, "idempotency.fingerprint-mismatch")
    assert count(engine, things) == 1


def test_tokens_are_per_scope(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    first = create(engine, tokens, things, token(scope="project-a"), "one")
    other = create(engine, tokens, things, token(scope="project-b"), "one")
    assert other != first
    assert count(engine, things) == 2


def test_a_long_scope_is_recorded_by_its_digest(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    long_scope = "p" * 300 + "\x1fuser"
    first = create(engine, tokens, things, token(scope=long_scope), "one")
    assert create(engine, tokens, things, token(scope=long_scope), "one") == first
    assert create(engine, tokens, things, token(scope="p" * 300 + "\x1fother"), "one") != first


def test_a_failed_create_leaves_no_token(db: tuple[Engine, Table, Table]) -> None:
    """The guard row lives and dies with the app's transaction: a failed create can be retried."""
    engine, tokens, things = db
    with pytest.raises(RuntimeError), engine.begin() as conn:
        record_token(conn, tokens, token(), kind="thing", resource_id=str(uuid.uuid4()))
        raise RuntimeError("the create failed after the guard")
    assert count(engine, tokens) == 0
    create(engine, tokens, things, token(), "one")
    assert count(engine, things) == 1


def test_already_created_of_a_deleted_resource_has_a_409_for_the_app(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    first = create(engine, tokens, things, token(), "one")
    with pytest.raises(AlreadyCreated) as caught, engine.begin() as conn:
        record_token(conn, tokens, token(), kind="thing", resource_id=str(uuid.uuid4()))
    assert caught.value.resource_id == first
    problem = caught.value.gone()
    assert (problem.status, problem.code) == (409, "idempotency.resource-gone")


def test_purge_removes_only_rows_older_than_the_retention(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    create(engine, tokens, things, token("old"), "one")
    create(engine, tokens, things, token("new"), "two")
    with engine.begin() as conn:
        conn.execute(
            tokens.update().where(tokens.c.token == "old"),
            {"created_at": dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(days=30)},
        )
    assert purge_tokens(engine, tokens) == 1
    with engine.connect() as conn:
        assert conn.execute(select(tokens.c.token)).scalars().all() == ["new"]
    assert purge_tokens(engine, tokens, older_than=0) == 1
    assert count(engine, tokens) == 0
    assert DEFAULT_RETENTION >= 7 * 86400


def test_purge_refuses_a_negative_retention(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, _ = db
    with pytest.raises(ValueError, match="older_than"):
        purge_tokens(engine, tokens, older_than=-1)


@pytest.mark.parametrize("writers", [8])
def test_concurrent_creates_with_one_token_make_exactly_one_row(
    db: tuple[Engine, Table, Table], writers: int
) -> None:
    """N transactions with one token at once (the store lost its record): one row, one answer."""
    engine, tokens, things = db
    barrier = threading.Barrier(writers)
    answers: list[str] = []
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            barrier.wait(10)
            answers.append(create(engine, tokens, things, token("race"), "raced", hold=0.05))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert count(engine, things) == 1
    assert count(engine, tokens) == 1
    with engine.connect() as conn:
        winner = conn.execute(select(things.c.uuid)).scalar_one()
    assert answers == [winner] * writers


# -- what the middleware hands the app ---------------------------------------------------------


def _seen_by_app(environ: dict[str, Any]) -> tuple[int, ClientToken | None]:
    seen: list[ClientToken | None] = []

    def app(env: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(client_token(env))
        start_response("201 Created", [("Content-Type", "application/json")])
        return [b"{}"]

    mw = IdempotencyMiddleware(app, scope="project")
    out: list[str] = []
    base = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/v1/things",
        "SCRIPT_NAME": "",
        "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": "2",
        "wsgi.input": io.BytesIO(b"{}"),
    }
    b"".join(mw({**base, **environ}, lambda status, headers, exc_info=None: out.append(status)))
    mw.close()
    return len(seen), seen[0] if seen else None


def test_the_middleware_hands_the_app_its_token_scope_and_fingerprint() -> None:
    calls, seen = _seen_by_app({"HTTP_X_CLIENT_TOKEN": "abc", "HTTP_X_PROJECT_ID": "p1"})
    assert calls == 1 and seen is not None
    assert (seen.token, seen.scope, seen.project) == ("abc", "p1", "p1")
    assert len(seen.fingerprint) == 64
    assert ENVIRON_TOKEN == "apimw.idempotency.token"


def test_without_a_token_the_app_sees_none() -> None:
    calls, seen = _seen_by_app({"HTTP_X_PROJECT_ID": "p1"})
    assert (calls, seen) == (1, None)


# -- REPEATABLE READ / SERIALIZABLE: the loser's INSERT is a serialization failure -------------


@pytest.fixture(params=["REPEATABLE READ", "SERIALIZABLE"])
def pg_strict(
    request: pytest.FixtureRequest, postgres_server: Server
) -> Iterator[tuple[Engine, Table, Table]]:
    """A real PostgreSQL engine whose transactions run at REPEATABLE READ or SERIALIZABLE."""
    tokens, things = make_tables()
    url = postgres_server.url  # type: ignore[attr-defined]
    engine = create_engine(url, pool_size=20, max_overflow=0, isolation_level=request.param)
    tokens.metadata.create_all(engine)
    try:
        yield engine, tokens, things
    finally:
        tokens.metadata.drop_all(engine)
        engine.dispose()


def race(
    engine: Engine, tokens: Table, things: Table, writers: int, tok: ClientToken, retries: int = 5,
    hold: float = 0.05,
) -> tuple[list[Any], list[Any]]:
    """*writers* threads create with *tok* at once, each holding its transaction *hold* seconds."""
    barrier = threading.Barrier(writers)
    answers: list[Any] = []
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            barrier.wait(10)
            answers.append(create(engine, tokens, things, tok, "raced", hold=hold, retries=retries))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers, errors


def test_concurrent_creates_at_repeatable_read_or_serializable_answer_the_one_row(
    pg_strict: tuple[Engine, Table, Table],
) -> None:
    """At REPEATABLE READ, the INSERT that waited for the winner cannot see the winner's row in
    its snapshot: PostgreSQL answers 40001 (serialization_failure), not a duplicate.  The
    create is retried in a fresh transaction, which finds the row: every writer answers with
    the winner's resource, none fails."""
    engine, tokens, things = pg_strict
    answers, errors = race(engine, tokens, things, 6, token("strict"))
    assert errors == []
    assert count(engine, things) == 1
    with engine.connect() as conn:
        winner = conn.execute(select(things.c.uuid)).scalar_one()
    assert answers == [winner] * 6


def test_without_retries_the_losers_get_a_409_to_retry_never_a_database_error(
    pg_strict: tuple[Engine, Table, Table],
) -> None:
    """The retry is bounded: a create that lost every attempt is 409 + Retry-After (the
    middleware releases its claim on a 409, so the client's retry runs again)."""
    engine, tokens, things = pg_strict
    # the winner holds its transaction a second: on a loaded machine the other three have
    # started theirs by then, so each of them loses (none begins after the commit)
    answers, errors = race(engine, tokens, things, 4, token("bounded"), retries=0, hold=1.0)
    assert len(answers) == 1 and len(errors) == 3
    assert all(isinstance(e, CreateContended) for e in errors), errors
    problem = errors[0]
    assert (problem.status, problem.code) == (409, "idempotency.create-contended")
    assert ("Retry-After", "1") in problem.headers
    assert count(engine, things) == 1
    # and the client's retry, in a fresh transaction, is answered with the row
    assert create(engine, tokens, things, token("bounded"), "raced", retries=0) == answers[0]


# -- the guard's "reused token" answer is the middleware's (mismatch_status) ------------------


def _things_app(engine: Engine, tokens: Table, things: Table) -> Any:
    """A small WSGI app that creates a thing per POST under the guard (TokenReused propagates:
    the middleware renders an HTTPProblem raised by the app)."""
    import json

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = json.loads(environ["wsgi.input"].read())
        new_uuid = create(engine, tokens, things, client_token(environ), body["name"])
        start_response("201 Created", [("Content-Type", "application/json")])
        return [json.dumps({"uuid": new_uuid}).encode()]

    return app


def _post(mw: IdempotencyMiddleware, body: bytes, tok: str) -> tuple[int, dict[str, Any]]:
    import json

    seen: list[str] = []
    environ = {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/things", "SCRIPT_NAME": "", "QUERY_STRING": "",
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body), "HTTP_X_CLIENT_TOKEN": tok,
    }  # fmt: skip
    out = b"".join(mw(environ, lambda status, headers, exc_info=None: seen.append(status)))
    return int(seen[0][:3]), json.loads(out)


@pytest.mark.parametrize("mismatch_status", [409, 422])
def test_a_reused_token_answers_with_the_middlewares_mismatch_status(
    db: tuple[Engine, Table, Table], mismatch_status: int
) -> None:
    """Store record or database row, another request with a used token gets one answer: the
    middleware's ``mismatch_status`` (422 with the IETF draft's setting) and its code."""
    engine, tokens, things = db
    app = _things_app(engine, tokens, things)
    first = IdempotencyMiddleware(app, scope="shared", mismatch_status=mismatch_status)
    try:
        assert _post(first, b'{"name": "one"}', "tok-m")[0] == 201
        from_store = _post(first, b'{"name": "two"}', "tok-m")
    finally:
        first.close()
    fresh = IdempotencyMiddleware(app, scope="shared", mismatch_status=mismatch_status)  # the store lost it
    try:
        from_db = _post(fresh, b'{"name": "two"}', "tok-m")
        # that answer was not stored as the token's: the first request's retry still gets its thing
        status, again = _post(fresh, b'{"name": "one"}', "tok-m")
    finally:
        fresh.close()
    assert status == 201
    with engine.connect() as conn:
        assert again["uuid"] == conn.execute(select(things.c.uuid)).scalar_one()
    assert from_store[0] == from_db[0] == mismatch_status
    codes = {from_store[1]["errors"][0]["code"], from_db[1]["errors"][0]["code"]}
    assert codes == {"idempotency.fingerprint-mismatch"}
    assert count(engine, things) == 1


def test_check_token_looks_the_token_up_before_the_apps_checks(db: tuple[Engine, Table, Table]) -> None:
    """``check_token``: nothing for a new token; the first resource, or the reuse answer, for a
    recorded one -- so an app can answer a retry before checks the first create changed."""
    engine, tokens, things = db
    assert check_token(engine, tokens, token("look")) is None
    first = create(engine, tokens, things, token("look"), "one")
    with pytest.raises(AlreadyCreated) as caught:
        check_token(engine, tokens, token("look"))
    assert caught.value.resource_id == first
    other = ClientToken("project-a", "look", FP_B, mismatch_status=422)
    with engine.connect() as conn, pytest.raises(TokenReused) as reused:
        check_token(conn, tokens, other)
    assert (reused.value.status, reused.value.code) == (422, "idempotency.fingerprint-mismatch")
    assert other.reused is True
    assert check_token(engine, tokens, token("look", scope="project-b")) is None


# -- a retry answered from the database is a replay too ---------------------------------------


class _IronicRequestId(RequestId):
    """Ironic's request_id middleware, which sits inside apimw under Ironic's hook."""

    compat_headers = ["openstack-request-id"]


def _checked_things_app(engine: Engine, tokens: Table, things: Table) -> Any:
    """Creates a thing per POST under the guard; a retry whose thing was deleted gets ``gone()``."""
    import json

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        body = json.loads(environ["wsgi.input"].read())
        new_uuid = str(uuid.uuid4())
        tok = client_token(environ)

        def once(conn: Connection) -> None:
            if tok is not None:
                record_token(conn, tokens, tok, kind="thing", resource_id=new_uuid)
            conn.execute(things.insert(), {"uuid": new_uuid, "name": body["name"]})

        try:
            run_create(engine, once)
        except AlreadyCreated as done:
            with engine.connect() as conn:
                found = conn.execute(select(things.c.uuid).where(things.c.uuid == done.resource_id)).first()
            if found is None:
                raise done.gone() from None
            new_uuid = done.resource_id
        start_response("201 Created", [("Content-Type", "application/json"), ("Location", f"/t/{new_uuid}")])
        return [json.dumps({"uuid": new_uuid}).encode()]

    return app


def test_a_retry_answered_from_the_database_is_marked_as_a_replay(db: tuple[Engine, Table, Table]) -> None:
    """The store forgot the token (a new, empty memory store); the database guard answers the
    retry with the first thing: ``Idempotent-Replayed: true`` as a store replay, and a request
    id of its own."""
    engine, tokens, things = db
    seen: list[Any] = []
    mw = IdempotencyMiddleware(_IronicRequestId(_checked_things_app(engine, tokens, things)), scope="shared")

    def pipeline(environ: dict[str, Any], start_response: Any) -> Any:
        result = mw(environ, start_response)
        seen.append(environ.get(ENVIRON_REPLAYED))
        return result

    body = b'{"name": "one"}'
    try:
        first = call(pipeline, environ_for("/things", body=body, token="tok-db"))
        mw.store.close()
        mw.store = open_store("memory://")  # the store lost every record
        from_db = call(pipeline, environ_for("/things", body=body, token="tok-db"))
        from_store = call(pipeline, environ_for("/things", body=body, token="tok-db"))
    finally:
        mw.close()
    assert first.status == from_db.status == from_store.status == 201
    assert first.json == from_db.json == from_store.json
    assert count(engine, things) == 1
    assert [a.header("Idempotent-Replayed") for a in (first, from_db, from_store)] == [None, "true", "true"]
    assert seen == [False, True, True]
    ids = [a.header("X-OpenStack-Request-Id") for a in (first, from_db, from_store)]
    assert all(i and i.startswith("req-") for i in ids) and len(set(ids)) == 3
    assert [a.header("OpenStack-Request-Id") for a in (first, from_db, from_store)] == ids


def test_a_deleted_resources_409_from_the_database_is_not_a_replay(db: tuple[Engine, Table, Table]) -> None:
    engine, tokens, things = db
    mw = IdempotencyMiddleware(_checked_things_app(engine, tokens, things), scope="shared")
    body = b'{"name": "gone"}'
    try:
        assert call(mw, environ_for("/things", body=body, token="tok-gone")).status == 201
        with engine.begin() as conn:
            conn.execute(things.delete())
        mw.store.close()
        mw.store = open_store("memory://")
        again = call(mw, environ_for("/things", body=body, token="tok-gone"))
    finally:
        mw.close()
    assert (again.status, again.code) == (409, "idempotency.resource-gone")
    assert again.header("Idempotent-Replayed") is None
