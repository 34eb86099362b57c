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

A statement may carry values of its own (SQLAlchemy's ``LIMIT ? OFFSET ?`` on SQLite
binds the offset 0): they are sent as compiled; every other parameter goes through its
type's bind processor (a datetime marker on SQLite becomes the stored text), as
SQLAlchemy would send it.  *post* adds a step after a column's result processor, called
with every value, None too (the data API turns datetimes into its ISO 8601 strings there).
Rows are processed a column at a time (``map`` over the column: no Python loop per value).

``Database(fast_reads=False)`` (``BAREMETAL_FAST_READS=false``) reads through
SQLAlchemy Core instead; tests compare the two on both backends, and
docs/performance.md has the measured factor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine


class DriverSelect:
    """*stmt* compiled for *engine*'s dialect; :meth:`rows` runs it on a pooled driver cursor."""

    def __init__(
        self,
        engine: Engine,
        stmt: sa.Select[Any],
        post: Mapping[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        dialect = engine.dialect
        compiled = stmt.compile(dialect=dialect)
        self.engine = engine
        self.sql: str = compiled.string
        positional = compiled.positiontup
        self._order: tuple[str, ...] | None = tuple(positional) if positional is not None else None
        # every parameter the SQL names: (name, required, compiled value, bind processor)
        binds = []
        for name, value in compiled.params.items():
            param = compiled.binds[name]
            bind_proc = param.type.dialect_impl(dialect).bind_processor(dialect)
            binds.append((name, param.required, value, bind_proc))
        self._binds = tuple(binds)
        self.keys: tuple[str, ...] = tuple(c.key for c in stmt.selected_columns)
        processors: list[tuple[int, tuple[Callable[[Any], Any], ...]]] = []
        for index, column in enumerate(stmt.selected_columns):
            proc = column.type.dialect_impl(dialect).result_processor(dialect, None)
            after = None if post is None or column.key is None else post.get(column.key)
            steps = tuple(step for step in (proc, after) if step is not None)
            if steps:
                processors.append((index, steps))
        self._processors = tuple(processors)
        self._postgres = dialect.name == "postgresql"
        self._dbapi_error: type[Exception] = dialect.loaded_dbapi.Error

    def _params(self, params: Mapping[str, Any]) -> Sequence[Any] | Mapping[str, Any]:
        bound: dict[str, Any] = {}
        for name, required, value, proc in self._binds:
            if required or name in params:
                value = params[name]
            bound[name] = value if proc is None else proc(value)
        if self._order is None:
            return bound
        return tuple(bound[name] for name in self._order)

    def _run(self, params: Mapping[str, Any], limit: int | None) -> list[Any]:
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
                fetched = list(cursor.fetchall() if limit is None else cursor.fetchmany(limit))
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
        return fetched

    def _processed(self, fetched: list[Any]) -> Iterable[Sequence[Any]]:
        if not self._processors or not fetched:
            return fetched
        columns: list[Iterable[Any]] = list(zip(*fetched, strict=True))
        for index, steps in self._processors:
            for step in steps:
                columns[index] = map(step, columns[index])
        return zip(*columns, strict=True)

    def rows(self, params: Mapping[str, Any], *, limit: int | None = None) -> list[dict[str, Any]]:
        """The result rows as dicts keyed by column key (at most *limit* fetched)."""
        keys = self.keys
        return [dict(zip(keys, row, strict=True)) for row in self._processed(self._run(params, limit))]

    def tuples(self, params: Mapping[str, Any], *, limit: int | None = None) -> list[tuple[Any, ...]]:
        """The result rows as tuples in the SELECT's column order (at most *limit* fetched)."""
        return [tuple(row) for row in self._processed(self._run(params, limit))]
