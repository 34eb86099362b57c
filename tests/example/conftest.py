"""Fixtures of the example service's tests: a clean database per test, on SQLite and PostgreSQL.

``database_url`` is parametrized: ``sqlite`` (a file in the test's tmp dir) and
``postgresql`` (a fresh database on the real server of the ``postgres_server``
session fixture).  Each test gets an empty, fully migrated database: a copy of a
template migrated once per session (a file copy for SQLite, ``CREATE DATABASE ...
TEMPLATE`` for PostgreSQL).  On PostgreSQL one database serves the session and is
emptied (``TRUNCATE ... RESTART IDENTITY``) before each test -- much faster than a
database per test -- unless something still holds a connection to it (a service or
worker process an earlier test left behind): then the test gets a fresh copy of the
template, so no leftover conductor can act on its nodes.  ``empty_database_url`` gives
a database without any table (for the migration tests).
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from baremetal_service.db.engine import create_engine
from baremetal_service.db.migrate import upgrade
from baremetal_service.db.models import Base
from tests.servers import Server

PG_TEMPLATE = "baremetal_template"
BACKENDS = ("sqlite", "postgresql")


def pg_admin_dsn(server: Server) -> str:
    return f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres"


def pg_url(server: Server, dbname: str) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/{dbname}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("baremetal-template") / "template.db"
    engine = create_engine(f"sqlite:///{path}")
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return path


@pytest.fixture(scope="session")
def pg_template(postgres_server: Server) -> str:
    with psycopg.connect(pg_admin_dsn(postgres_server), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PG_TEMPLATE}")
        conn.execute(f"CREATE DATABASE {PG_TEMPLATE}")
    engine = create_engine(pg_url(postgres_server, PG_TEMPLATE))
    try:
        upgrade(engine)
    finally:
        engine.dispose()
    return PG_TEMPLATE


def new_pg_database(server: Server, template: str = "template0") -> str:
    name = f"bm_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(pg_admin_dsn(server), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name} TEMPLATE {template}")
    return name


def drop_pg_database(server: Server, name: str) -> None:
    with psycopg.connect(pg_admin_dsn(server), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


_TABLES = ", ".join(t.name for t in reversed(Base.metadata.sorted_tables))


def empty_pg_database(url: str) -> None:
    dsn = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '20s'")
        conn.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY CASCADE")


class _PgDatabases:
    """The session's reusable PostgreSQL database, replaced when something still uses it."""

    def __init__(self, server: Server, template: str) -> None:
        self.server = server
        self.template = template
        self.current: str | None = None

    def clean(self) -> str:
        """A migrated, empty database: the current one emptied, or a fresh copy of the template
        when another connection (a service a previous test left running) still uses it."""
        if self.current is not None and not self._in_use(self.current):
            empty_pg_database(pg_url(self.server, self.current))
            return pg_url(self.server, self.current)
        self.current = new_pg_database(self.server, self.template)
        return pg_url(self.server, self.current)

    def _in_use(self, name: str) -> bool:
        with psycopg.connect(pg_admin_dsn(self.server), autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()
        return bool(row and row[0])


@pytest.fixture(scope="session")
def pg_databases(postgres_server: Server, pg_template: str) -> _PgDatabases:
    return _PgDatabases(postgres_server, pg_template)


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A clean, migrated database for this test: ``sqlite:///...`` or ``postgresql+psycopg://...``."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        target = tmp_path / "baremetal.db"
        shutil.copyfile(template, target)
        yield f"sqlite:///{target}"
        return
    databases: _PgDatabases = request.getfixturevalue("pg_databases")
    yield databases.clean()


@pytest.fixture(params=BACKENDS)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all (for migration tests)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    server: Server = request.getfixturevalue("postgres_server")
    name = new_pg_database(server)
    try:
        yield pg_url(server, name)
    finally:
        drop_pg_database(server, name)
