"""A SELECT compiled once and run on the database driver's own cursor (the hot reads).

SQLAlchemy Core's ``Connection.execute`` costs about 60–80 µs per call on top of the
driver (execution context, compiled-cache lookup, result metadata, row objects) —
more than the SQLite query itself for a one-row lookup by UUID.  :class:`DriverSelect`
does that work once: it compiles the statement for the engine's dialect, remembers
the SQL string, the bind parameter order and each column's result processor (the
dialect's own, so a SQLite ``DATETIME`` string or a JSON text comes back exactly as
through SQLAlchemy), then each call is a pool checkout, ``cursor.execute``, the fetch
and the processors.

What SQLAlchemy's execution does around an error is kept: a driver error becomes the
same ``sqlalchemy.exc.DBAPIError`` subclass (the API answers a database outage with 503
from those), and a disconnect invalidates the connection so the pool does not hand the
dead one out again.  On PostgreSQL the read runs in autocommit (no BEGIN/ROLLBACK round
trips), as the service's Core reader engine does.

``Database(fast_reads=False)`` (``BAREMETAL_FAST_READS=false``) reads through
SQLAlchemy Core instead; tests compare the two on both backends, and
docs/performance.md has the measured factor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine


class DriverSelect:
    """*stmt* compiled for *engine*'s dialect; :meth:`rows` runs it on a pooled driver cursor."""

    def __init__(self, engine: Engine, stmt: sa.Select[Any]) -> None:
        dialect = engine.dialect
        compiled = stmt.compile(dialect=dialect)
        self.engine = engine
        self.sql: str = compiled.string
        positional = compiled.positiontup
        self._order: tuple[str, ...] | None = tuple(positional) if positional is not None else None
        self.keys: tuple[str, ...] = tuple(c.key for c in stmt.selected_columns)
        processors: list[tuple[int, Callable[[Any], Any]]] = []
        for index, column in enumerate(stmt.selected_columns):
            proc = column.type.dialect_impl(dialect).result_processor(dialect, None)
            if proc is not None:
                processors.append((index, proc))
        self._processors = tuple(processors)
        self._postgres = dialect.name == "postgresql"
        self._dbapi_error: type[Exception] = dialect.loaded_dbapi.Error

    def _params(self, params: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        if self._order is None:
            return params
        return tuple(params[name] for name in self._order)

    def rows(self, params: Mapping[str, Any], *, limit: int | None = None) -> list[dict[str, Any]]:
        """The result rows as dicts keyed by column key (at most *limit* fetched)."""
        bound = self._params(params)
        try:
            fairy = self.engine.raw_connection()
        except self._dbapi_error as err:  # connecting failed: as SQLAlchemy reports it
            raise sa.exc.DBAPIError.instance(self.sql, bound, err, self._dbapi_error) from err
        driver = fairy.driver_connection
        invalidated = False
        try:
            if self._postgres:
                driver.autocommit = True  # type: ignore[union-attr]
            cursor = fairy.cursor()
            try:
                cursor.execute(self.sql, bound)
                fetched = cursor.fetchall() if limit is None else cursor.fetchmany(limit)
            finally:
                cursor.close()
        except self._dbapi_error as err:
            invalidated = self.engine.dialect.is_disconnect(err, fairy.dbapi_connection, None)
            if invalidated:
                fairy.invalidate(err)
            raise sa.exc.DBAPIError.instance(
                self.sql, bound, err, self._dbapi_error, connection_invalidated=invalidated
            ) from err
        finally:
            # back to the pool as it was taken (a failed read too): never in autocommit
            if self._postgres and not invalidated:
                try:
                    driver.autocommit = False  # type: ignore[union-attr]
                except self._dbapi_error as err:
                    fairy.invalidate(err)
            fairy.close()
        keys, processors = self.keys, self._processors
        out = []
        for raw in fetched:
            if processors:
                values = list(raw)
                for index, proc in processors:
                    values[index] = proc(values[index])
                out.append(dict(zip(keys, values, strict=True)))
            else:
                out.append(dict(zip(keys, raw, strict=True)))
        return out
