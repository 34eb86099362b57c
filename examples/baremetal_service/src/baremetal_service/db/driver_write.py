"""An INSERT, UPDATE or DELETE compiled once and run on the driver's cursor, in a Core transaction.

Every write of the data API runs several fixed-shape statements (a node's DELETE: its
ports, its portgroups, the node under its etag condition, the event record).  Through
``Connection.execute`` each one pays SQLAlchemy's statement coercions, cache key,
execution context and parameter processing again: more than SQLite's own work.
:class:`DriverWrite` does that once: it compiles the statement for the engine's dialect,
remembers the SQL string, the bind parameter order and each parameter's bind processor
(the dialect's own, so a JSON value, a datetime or a boolean is sent exactly as through
SQLAlchemy), then each call is ``cursor.execute`` on the DBAPI connection of the caller's
:class:`~sqlalchemy.engine.Connection`: the statement is part of that connection's
transaction (``engine.begin()`` still begins, commits and rolls back), so a write and its
event record stay atomic.

What SQLAlchemy's execution does around an error is kept: a driver error becomes the same
``sqlalchemy.exc.DBAPIError`` subclass (``IntegrityError`` for a duplicate, the API's 503
for an outage), and a disconnect invalidates the connection so the pool does not hand the
dead one out again.  Row counts are the driver's (exact on SQLite and psycopg).

``Database(fast_writes=False)`` (``BAREMETAL_FAST_WRITES=false``) writes through
SQLAlchemy Core instead; tests compare the two on both backends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

__all__ = ["DriverWrite"]


class DriverWrite:
    """*stmt* compiled for *dialect*; :meth:`run` executes it in a Core connection's transaction.

    Every bind parameter must be given by name to :meth:`run` (``column_keys`` names the
    columns an INSERT or UPDATE sets: their parameters are named after the columns).
    *returning_id*: the statement's first returned column (PostgreSQL ``RETURNING id``) or,
    without a RETURNING clause, the driver's ``lastrowid`` (SQLite) is what :meth:`run` gives back.
    """

    def __init__(
        self,
        dialect: Dialect,
        stmt: sa.Insert | sa.Update | sa.Delete,
        *,
        column_keys: list[str] | None = None,
        returning_id: bool = False,
    ) -> None:
        compiled = stmt.compile(dialect=dialect, column_keys=column_keys)
        self.dialect = dialect
        self.sql: str = compiled.string
        positional = compiled.positiontup
        self._positional = positional is not None
        names = tuple(positional) if positional is not None else tuple(compiled.binds)
        self.names: tuple[str, ...] = names
        if compiled.insert_prefetch or compiled.update_prefetch:  # Python-side defaults
            missing = [c.name for c in (*compiled.insert_prefetch, *compiled.update_prefetch)]
            raise ValueError(f"a DriverWrite takes every value from run(); name {missing} in column_keys")
        processors: list[tuple[int, Callable[[Any], Any]]] = []
        for index, name in enumerate(names):
            bind = compiled.binds[name]
            if (bind.value is not None and not bind.required) or bind.callable is not None:
                raise ValueError(f"{name}: a DriverWrite takes every value from run(), no literal values")
            proc = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if proc is not None:
                processors.append((index, proc))
        self._processors = tuple(processors)
        self._returning = returning_id and bool(getattr(compiled, "effective_returning", None))
        self._lastrowid = returning_id and not self._returning
        self._dbapi_error: type[Exception] = dialect.loaded_dbapi.Error

    def run(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Execute with *params* in *conn*'s transaction: the row count, or the new row's id
        when built with ``returning_id``."""
        values = [params[name] for name in self.names]
        for index, proc in self._processors:
            values[index] = proc(values[index])
        bound: Any = tuple(values) if self._positional else dict(zip(self.names, values, strict=True))
        fairy = conn.connection
        cursor = fairy.cursor()
        try:
            cursor.execute(self.sql, bound)
            if self._returning:
                row = cursor.fetchone()
                return -1 if row is None else int(row[0])
            if self._lastrowid:
                return int(cursor.lastrowid)
            return int(cursor.rowcount)
        except self._dbapi_error as err:
            invalidated = self.dialect.is_disconnect(err, fairy.dbapi_connection, cursor)
            if invalidated:
                conn.invalidate(err)
            raise sa.exc.DBAPIError.instance(
                self.sql,
                bound,
                err,
                self._dbapi_error,
                connection_invalidated=invalidated,
                dialect=self.dialect,
            ) from err
        finally:
            with contextlib.suppress(self._dbapi_error):  # a dead connection's cursor: said above
                cursor.close()
