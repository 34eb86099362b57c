"""Engine setup: SQLite files (WAL, busy timeout, foreign keys) and PostgreSQL (psycopg 3).

``sqlite:///path/to/file.db`` and ``postgresql+psycopg://user@host:port/db`` are
supported; anything else is a :class:`apimw.errors.ConfigError` at startup.
An in-memory SQLite database is refused: the conductor workers and the API use
several connections, which must see one database.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from apimw.errors import ConfigError

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "create_engine",
    "is_postgres",
    "is_sqlite",
    "is_unavailable",
    "make_sessionmaker",
]

SQLITE_BUSY_TIMEOUT_MS = 30_000


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


#: PostgreSQL error classes that mean "not reachable now": connection exception (08),
#: insufficient resources (53: too many connections...), operator intervention (57P:
#: shutting down, crashed, starting up).
_UNAVAILABLE_SQLSTATES = ("08", "53", "57P")


def is_unavailable(error: BaseException) -> bool:
    """Whether *error* means the database cannot be used right now (down, restarting, out of
    connections, locked) rather than a bug: the API answers it 503, and a retry may succeed.

    The pool's connections from before a restart are dropped by SQLAlchemy when one of
    them fails (``connection_invalidated``), so the next request reconnects.
    """
    if isinstance(error, sa.exc.TimeoutError):  # no pooled connection came free in time
        return True
    if not isinstance(error, sa.exc.OperationalError | sa.exc.InterfaceError):
        return bool(isinstance(error, sa.exc.DBAPIError) and error.connection_invalidated)
    if error.connection_invalidated or isinstance(error, sa.exc.InterfaceError):
        return True
    orig = error.orig
    if isinstance(orig, sqlite3.OperationalError):
        return "locked" in str(orig) or "busy" in str(orig)
    sqlstate = getattr(orig, "sqlstate", None)  # psycopg: None for a client-side connection failure
    return sqlstate is None or str(sqlstate).startswith(_UNAVAILABLE_SQLSTATES)


def _sqlite_wal(cursor: Any) -> None:
    """Put the file in WAL mode (persistent: a no-op once any connection has done it).

    The switch needs an exclusive lock, and SQLite answers "database is locked" at once,
    without the busy wait, when another connection holds the write lock (connections
    racing on a new file: several services starting together). Retry, bounded by the
    busy timeout; the writer's lock is short.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
                return
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        _sqlite_wal(cursor)
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _psycopg_json(dbapi_connection: Any, _record: Any) -> None:
    from psycopg.types.json import set_json_loads

    from .models import fast_json_loads

    set_json_loads(fast_json_loads, dbapi_connection)


def create_engine(url: str, *, pool_size: int = 10, echo: bool = False) -> Engine:
    """An engine for *url* with the per-backend settings this service relies on."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigError(f"invalid database URL {url!r}: {exc}") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:") or (parsed.database or "").startswith("file::memory"):
            raise ConfigError("the SQLite database must be a file (sqlite:///path/to/file.db)")
        engine = sa.create_engine(
            parsed,
            echo=echo,
            pool_size=pool_size,
            max_overflow=pool_size * 2,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        )
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            raise ConfigError(f"use postgresql+psycopg:// (psycopg 3); got {url!r}")
        engine = sa.create_engine(parsed, echo=echo, pool_size=pool_size, max_overflow=pool_size * 2)
        sa.event.listen(engine, "connect", _psycopg_json)
        return engine
    raise ConfigError(f"unsupported database URL {url!r}: use sqlite:///file or postgresql+psycopg://")


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """ORM sessions on *engine* (the models in ``db.models``), for scripts and admin tools.

    The service's own hot paths use SQLAlchemy Core through ``db.api`` (no identity
    map, no per-row object construction); anything that writes a resource through an
    ORM session must keep its ``etag`` right itself, so prefer ``db.api`` for writes.
    """
    return sessionmaker(engine, expire_on_commit=False)
