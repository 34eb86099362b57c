"""Engine setup: SQLite files (WAL, busy timeout, foreign keys) and PostgreSQL (psycopg 3).

``sqlite:///path/to/file.db`` and ``postgresql+psycopg://user@host:port/db`` are
supported; anything else is a :class:`apimw.errors.ConfigError` at startup.
An in-memory SQLite database is refused: the conductor workers and the API use
several connections, which must see one database.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from apimw.errors import ConfigError
from baremetal_service.db.models import fast_json_loads

try:
    from psycopg.types.json import set_json_loads
except ImportError:  # without the ``postgres`` extra: SQLite only
    set_json_loads = None  # type: ignore[assignment]

__all__ = [
    "SQLITE_BUSY_TIMEOUT_MS",
    "WalCheckpointer",
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


def _no_autocheckpoint(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA wal_autocheckpoint=0")
    finally:
        cursor.close()


LOG = logging.getLogger(__name__)


class WalCheckpointer:
    """Checkpoints a SQLite WAL from a thread of its own, so that no request pays for it.

    By default SQLite checkpoints in the connection whose commit takes the WAL past
    1,000 pages: that commit then copies the WAL into the database file and waits for
    its ``fsync`` (about 20 ms on the disks measured here), once every few hundred
    writes (2 % of POSTs measured 15-20 ms instead of ~1.5 ms; docs/example/performance.md).
    With :func:`create_engine`'s ``background_checkpoints``, the engine's connections
    never checkpoint on commit, and this thread runs ``PRAGMA wal_checkpoint(PASSIVE)``
    every *interval* seconds: it neither waits for nor blocks readers and writers (the
    sqlite3 module releases the GIL while SQLite works).  Under a steady stream of
    writes a PASSIVE checkpoint never catches up with the last frames (writers append
    while it waits for its ``fsync``), and SQLite only starts the WAL over when one has:
    once the WAL holds more than *restart_frames* frames, the thread runs a RESTART
    checkpoint, which holds new writers back for that one checkpoint (much rarer than
    SQLite's own, every ~1,000 pages) and lets the next write start the WAL from the
    beginning, so the file stays bounded.  :meth:`stop` (the database's ``dispose``)
    ends the thread; it also ends by itself once the engine is garbage.
    """

    def __init__(self, engine: Engine, interval: float = 0.1, restart_frames: int = 16_000) -> None:
        self.interval = interval
        self.restart_frames = restart_frames
        self._engine = weakref.ref(engine)
        self._stop = threading.Event()
        self.checkpoints = 0
        self.restarts = 0
        self._thread = threading.Thread(target=self._run, name="sqlite-wal-checkpoint", daemon=True)
        self._thread.start()

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int] | None:
        """One checkpoint now (PASSIVE or RESTART): ``(busy, WAL frames, frames checkpointed)``;
        None once the engine is gone."""
        if mode not in ("PASSIVE", "RESTART"):
            raise ValueError(f"unknown checkpoint mode {mode!r}")
        engine = self._engine()
        if engine is None:
            return None
        fairy = engine.raw_connection()
        try:
            cursor = fairy.cursor()
            try:
                row = cursor.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
            finally:
                cursor.close()
        finally:
            fairy.close()
        self.checkpoints += 1
        return int(row[0]), int(row[1]), int(row[2])

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                done = self.checkpoint()
                if done is None:
                    return
                if done[1] > self.restart_frames:
                    self.restarts += 1
                    self.checkpoint("RESTART")
            except (sqlite3.Error, sa.exc.SQLAlchemyError) as error:  # the next interval tries again
                LOG.warning("WAL checkpoint failed: %s", type(error).__name__)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


def _psycopg_json(dbapi_connection: Any, _record: Any) -> None:
    if set_json_loads is not None:  # (only PostgreSQL engines listen: psycopg is there)
        set_json_loads(fast_json_loads, dbapi_connection)


def create_engine(
    url: str, *, pool_size: int = 10, echo: bool = False, background_checkpoints: bool = False
) -> Engine:
    """An engine for *url* with the per-backend settings this service relies on.

    *background_checkpoints* (SQLite): connections never checkpoint the WAL on commit; the
    caller must run a :class:`WalCheckpointer` on the engine (:class:`.api.Database` does).
    """
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
        if background_checkpoints:
            sa.event.listen(engine, "connect", _no_autocheckpoint)
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
