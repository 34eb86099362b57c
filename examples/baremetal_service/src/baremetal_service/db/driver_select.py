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

:meth:`DriverSelect.raw` gives the rows as the driver fetched them and :attr:`DriverSelect.code`
says how each column becomes its value (:class:`RowCode`): a caller that compiles its own
code per statement (the API's list renderer) turns a row into its final document in one
step.  A step may carry its Python source (:func:`with_source`): it is then inlined there.

``Database(fast_reads=False)`` (``BAREMETAL_FAST_READS=false``) reads through
SQLAlchemy Core instead; tests compare the two on both backends, and
docs/performance.md has the measured factor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Engine, processors

_F = TypeVar("_F", bound=Callable[..., Any])
#: The attribute :func:`with_source` sets.
SOURCE_ATTR = "row_source"


def with_source(source: str) -> Callable[[_F], _F]:
    """Mark a result step with the Python expression it computes: ``_v_`` stands for the
    value (a local name: it may be read more than once), ``_p_`` for the step itself
    (a fallback call).  The expression must give exactly what the step returns."""

    def mark(step: _F) -> _F:
        setattr(step, SOURCE_ATTR, source)
        return step

    return mark


#: SQLAlchemy's SQLite ``Boolean`` result processor, as source.
_KNOWN_SOURCES: dict[Any, str] = {processors.int_to_boolean: "(None if _v_ is None else bool(_v_))"}


@dataclass(frozen=True, eq=False)
class RowCode:
    """How a raw row of a :class:`DriverSelect` becomes its values, as Python source.

    ``keys[i]`` names column *i*; ``steps[i]`` are expressions applied in turn to it
    (``_v_`` the value so far); ``namespace`` holds the names they use.  Compared (and
    hashed) by identity: one per compiled statement, a fine cache key.
    """

    keys: tuple[str, ...]
    steps: tuple[tuple[str, ...], ...]
    namespace: Mapping[str, Any]

    def statements(self, index: int, var: str) -> list[str]:
        """Statements turning local *var* (column *index*'s raw value) into its value."""
        return [f"{var} = {step.replace('_v_', var)}" for step in self.steps[index]]


class DriverSelect:
    """*stmt* compiled for *engine*'s dialect; :meth:`rows` runs it on a pooled driver cursor."""

    def __init__(
        self,
        engine: Engine,
        stmt: sa.Select[Any],
        post: Mapping[str, Callable[[Any], Any]] | None = None,
        fused: Mapping[str, Callable[[Any], Any]] | None = None,
    ) -> None:
        """*fused*: by column key, one step that does what the column's result processor
        then its *post* do (with a source of its own, :func:`with_source`): :attr:`code`
        uses it instead of the two."""
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
        sources: list[tuple[str, ...]] = []
        namespace: dict[str, Any] = {}
        for index, column in enumerate(stmt.selected_columns):
            proc = column.type.dialect_impl(dialect).result_processor(dialect, None)
            after = None if post is None or column.key is None else post.get(column.key)
            steps = tuple(step for step in (proc, after) if step is not None)
            if steps:
                processors.append((index, steps))
            column_sources = []
            one = None if fused is None or column.key is None else fused.get(column.key)
            for number, step in enumerate(steps if one is None else (one,)):
                name = f"_p{index}_{number}"
                namespace[name] = step
                source = getattr(step, SOURCE_ATTR, None) or _KNOWN_SOURCES.get(step) or "_p_(_v_)"
                column_sources.append("(" + source.replace("_p_", name) + ")")
            sources.append(tuple(column_sources))
        self._processors = tuple(processors)
        #: the processing of each column as source (:meth:`raw` rows)
        self.code = RowCode(self.keys, tuple(sources), namespace)
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

    def raw(self, params: Mapping[str, Any]) -> list[Any]:
        """The result rows as the driver gives them (:attr:`code` says how to read them)."""
        return self._run(params, None)

    def raw_first(self, params: Mapping[str, Any]) -> list[Any]:
        """:meth:`raw`, at most one row fetched (a lookup by a unique key)."""
        return self._run(params, 1)

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
