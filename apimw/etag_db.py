"""Conditional writes for etag'd rows with SQLAlchemy 2 (Core): the atomic half of If-Match.

The middleware's pre-check is only an optimisation: between it and the write another
client may commit.  These helpers make the write itself conditional::

    UPDATE nodes SET ..., etag = :new WHERE uuid = :uuid AND etag = :read

where ``:read`` is the etag of the row they just read and checked against If-Match, and
``:new`` is the etag of the merged row, so the stored etag is always the etag of the
stored state.  ``rowcount == 0`` is then told apart by a second look: no row -> 404
(:class:`ResourceGone`), any row -> 412 (:class:`StaleEtag`) when the client sent If-Match,
otherwise the read-modify-write is retried.  A row that now holds the very state this
writer was about to write is *not* a success: another client's write moved it there, and
the If-Match of this one no longer held when it wrote (two clients that read the same
state and computed the same new state must not both win).  Success is decided by the
matched-row count alone; SQLAlchemy's MySQL dialects count matched rows
(``CLIENT_FOUND_ROWS``), so a no-op UPDATE counts too.  RFC 9110's "already applied" 2xx is
the explicit opt-in ``already_applied=True`` of :func:`update_if_match`, never a default.

Serialization failures and deadlocks (PostgreSQL 40001/40P01 under REPEATABLE READ or
SERIALIZABLE, MySQL 1213/1205, SQLite "database is locked") are retried a bounded number
of times with jittered backoff, then answered with 412 (409 without If-Match) -- never a
500.  A database that cannot be reached, or that drops the session (a restart, a failover, no
pooled connection free in time), is :class:`DatabaseUnavailable`: 503 ``etag.database-unavailable``
when nothing was written, 503 ``etag.write-outcome-unknown`` when the session was lost during the
``COMMIT`` (the write may have happened; a client that retries with its If-Match gets 412 if
it did).  When a helper evaluated the request's :class:`~apimw.etag.IfMatch` it calls
``if_match.mark_enforced()``, which is the acknowledgement the middleware waits for.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from apimw.errors import ApimwError, HTTPProblem, explain_missing
from apimw.etag import IfMatch, StaleEtag

try:
    from sqlalchemy import and_, delete, select, update
    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout
except ImportError as exc:  # one line naming the extra
    explain_missing(exc, "apimw.etag_db", module="sqlalchemy", library="SQLAlchemy", extra="sqlalchemy")
    raise

if TYPE_CHECKING:
    from sqlalchemy import ColumnElement, Connection, Engine, Table

__all__ = [
    "ConcurrentUpdate",
    "DatabaseUnavailable",
    "ResourceGone",
    "StaleEtag",
    "cas_update",
    "delete_if_match",
    "is_retryable",
    "is_unavailable",
    "update_if_match",
    "write_attempts",
]

DEFAULT_RETRIES: Final = 5
DEFAULT_BACKOFF: Final = 0.005
_PG_RETRYABLE: Final = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
_MYSQL_RETRYABLE: Final = frozenset({1213, 1205})  # ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT
_SQLITE_RETRYABLE: Final = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
#: SQLSTATE classes of a database that cannot serve now: connection exception, insufficient
#: resources (too many connections...), operator intervention (admin/crash shutdown, starting up)
_UNAVAILABLE_SQLSTATES: Final = ("08", "53", "57P")
#: MySQL client/server codes of the same: can't connect (2002, 2003), server gone away or lost
#: (2006, 2013), too many connections (1040), shutdown in progress (1053)
_MYSQL_UNAVAILABLE: Final = frozenset({2002, 2003, 2006, 2013, 1040, 1053})


class ResourceGone(HTTPProblem):
    """404: no row for the key (it never existed, or was deleted meanwhile)."""

    def __init__(self, detail: str = "The resource does not exist (or was deleted meanwhile).") -> None:
        super().__init__(404, "etag.not-found", detail)


class ConcurrentUpdate(HTTPProblem):
    """409: an unconditional write lost every retry to concurrent writers."""

    def __init__(self, attempts: int) -> None:
        super().__init__(
            409,
            "etag.concurrent-update",
            f"The resource kept changing under concurrent updates ({attempts} attempts); retry later.",
        )


class DatabaseUnavailable(HTTPProblem):
    """503: the database could not be used (down, restarting, no connection free in time).

    ``outcome_unknown``: the session was lost while the write was being committed, so it
    may have been applied (only the acknowledgement may have been lost).
    """

    def __init__(self, *, outcome_unknown: bool = False, retry_after: int = 1) -> None:
        self.outcome_unknown = outcome_unknown
        if outcome_unknown:
            code = "etag.write-outcome-unknown"
            detail = (
                "The database connection was lost while the write was being committed: it may or "
                "may not have been applied. Fetch the resource to see; a retry with the same "
                "If-Match gets 412 if it was applied."
            )
        else:
            code = "etag.database-unavailable"
            detail = "The database is unavailable; nothing was written. Retry later."
        super().__init__(503, code, detail, headers=[("Retry-After", str(retry_after))])


def is_unavailable(exc: BaseException) -> bool:
    """The database cannot be used right now (down, restarting, the session cut, no pooled
    connection free in time) rather than a bug or a conflict."""
    if isinstance(exc, PoolTimeout):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated or isinstance(exc, InterfaceError):
        return True
    if not isinstance(exc, OperationalError) or is_retryable(exc):
        return False
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate is not None:
        return str(sqlstate).startswith(_UNAVAILABLE_SQLSTATES)
    if type(orig).__module__.startswith("psycopg"):
        return True  # psycopg's client-side failures (connection refused, closed) carry no SQLSTATE
    args: tuple[Any, ...] = tuple(getattr(orig, "args", ()))
    return bool(args) and isinstance(args[0], int) and args[0] in _MYSQL_UNAVAILABLE


def is_retryable(exc: BaseException) -> bool:
    """A serialization failure, deadlock or lock timeout that a fresh transaction may pass."""
    if not isinstance(exc, DBAPIError):
        return False
    orig = exc.orig
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate in _PG_RETRYABLE:
        return True
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int) and (code & 0xFF) in _SQLITE_RETRYABLE:
        return True
    args: tuple[Any, ...] = tuple(getattr(orig, "args", ()))
    return bool(args) and isinstance(args[0], int) and args[0] in _MYSQL_RETRYABLE


def _where(table: Table, key: Mapping[str, Any]) -> ColumnElement[bool]:
    if not key:
        raise ApimwError("a conditional write needs a non-empty key")
    return and_(*(table.c[name] == value for name, value in key.items()))


def _read(conn: Connection, table: Table, key: Mapping[str, Any]) -> dict[str, Any] | None:
    row = conn.execute(select(table).where(_where(table, key))).mappings().first()
    return None if row is None else dict(row)


def _current_etag(conn: Connection, table: Table, key: Mapping[str, Any], etag_column: str) -> Any:
    return conn.execute(select(table.c[etag_column]).where(_where(table, key))).first()


def cas_update(
    conn: Connection,
    table: Table,
    key: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    expected: Collection[str],
    etag_column: str = "etag",
) -> Literal["updated", "gone", "stale"]:
    """One compare-and-swap in the caller's transaction, no retry.

    ``UPDATE table SET values WHERE key AND etag IN expected``.  *values* should set the
    new etag.  Returns ``"updated"`` when the UPDATE matched the row; else looks again and
    returns ``"gone"`` (no row) or ``"stale"`` -- also when the row already holds
    *values*: whoever wrote it, this compare-and-swap did not happen.
    """
    if not expected:
        return "gone" if _current_etag(conn, table, key, etag_column) is None else "stale"
    stmt = (
        update(table)
        .where(_where(table, key), table.c[etag_column].in_(list(expected)))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    result = conn.execute(stmt)
    if result.rowcount == 1:
        return "updated"
    if result.rowcount > 1:
        raise ApimwError(f"conditional update matched {result.rowcount} rows: the key is not unique")
    return "gone" if _current_etag(conn, table, key, etag_column) is None else "stale"


#: Returned by one attempt of a conditional write that lost a race without If-Match: try again.
_AGAIN: Final = object()


def _retrying(
    engine: Engine, once: Callable[[Connection], object], *, retries: int, backoff: float
) -> object:
    """Run ``once(conn)`` in its own transaction until it returns something other than
    :data:`_AGAIN`, retrying serialization failures and deadlocks (``is_retryable``) with
    backoff, at most ``retries + 1`` times; :data:`_AGAIN` if every attempt asked again.

    A database that cannot be used is :class:`DatabaseUnavailable`, its ``outcome_unknown``
    set when the session failed in the ``COMMIT`` (``once`` had returned).
    """
    for _attempt in write_attempts(retries, backoff):
        committing = False
        try:
            with engine.begin() as conn:
                result = once(conn)
                committing = True
            if result is not _AGAIN:
                return result
        except (DBAPIError, PoolTimeout) as exc:
            if is_retryable(exc):
                continue  # rolled back, even in the COMMIT (a serialization failure there)
            if is_unavailable(exc):
                raise DatabaseUnavailable(outcome_unknown=committing) from exc
            raise
    return _AGAIN


def write_attempts(retries: int = DEFAULT_RETRIES, backoff: float = DEFAULT_BACKOFF) -> Iterator[int]:
    """The attempt numbers of a bounded read-check-write loop, with jittered backoff between.

    Yields ``0 .. retries`` (at least one attempt) and sleeps ``backoff * 2**n``, at most
    0.2 s (times a random factor in [0.5, 1.5)), before attempt ``n + 1``, so writers that lost a race
    do not retry in lock step.  For applications that write their own CAS loop around
    :func:`cas_update` (extra conditions, events in the same transaction)::

        for _ in write_attempts():
            row = read(...)
            ...check If-Match against row["etag"]...
            with engine.begin() as conn:
                if cas_update(conn, table, key, values, expected=(row["etag"],)) == "updated":
                    return ...
        raise ConcurrentUpdate(DEFAULT_RETRIES + 1)
    """
    attempts = max(1, retries + 1)
    for attempt in range(attempts):
        if attempt:
            _backoff(attempt - 1, backoff)
        yield attempt


def _backoff(attempt: int, base: float, cap: float = 0.2) -> None:
    if base > 0:
        time.sleep(min(base * 2 ** min(attempt, 30), cap) * (0.5 + random.random()))  # noqa: S311 - jitter only


def _applied(
    row: dict[str, Any],
    changes: Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]],
    etag_of: Callable[[Mapping[str, Any]], str],
    etag_column: str,
) -> bool:
    """Would applying *changes* to *row* leave its etag (its hashed state) as it is?"""
    try:
        new_values = dict(changes(dict(row)) if callable(changes) else changes)
    except HTTPProblem:
        return False  # the change does not even apply to the current state: stale
    new_values.pop(etag_column, None)
    return bool(etag_of({**row, **new_values}) == row[etag_column])


def update_if_match(
    engine: Engine,
    table: Table,
    key: Mapping[str, Any],
    changes: Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]],
    *,
    if_match: IfMatch | None,
    etag_of: Callable[[Mapping[str, Any]], str],
    etag_column: str = "etag",
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
    already_applied: bool = False,
) -> dict[str, Any]:
    """Read the row, check *if_match*, apply *changes*, and write it back atomically.

    :param key: column -> value naming one row (``{"uuid": ...}``).
    :param changes: the column values to set, or a function of the current row (a copy)
        returning them -- e.g. applying a JSON patch.  It may run more than once (on
        retries) so it must not have side effects; an :class:`HTTPProblem` it raises (400
        for a bad patch) propagates.
    :param if_match: the request's parsed If-Match (``environ["apimw.etag.if_match"]``);
        ``None`` for an unconditional write (still atomic: no lost update of the etag).
    :param etag_of: the etag to store for the merged row, e.g.
        ``lambda row: generator.etag(row, "node")``.
    :param already_applied: when If-Match does not match but applying *changes* to the
        current row would change nothing, succeed without writing (RFC 9110 §13.1.1: the
        server MAY answer 2xx "if the request appears to have already been applied", e.g.
        a client retrying after a lost response).  Off by default.
    :returns: the merged row as written, with its new etag.
    :raises ResourceGone: 404.  :raises StaleEtag: 412.  :raises ConcurrentUpdate: 409
        (only without If-Match).  :raises DatabaseUnavailable: 503.
    """
    def once(conn: Connection) -> dict[str, Any] | object:
        row = _read(conn, table, key)
        if row is None:
            raise ResourceGone()
        current = row[etag_column]
        if if_match is not None:
            if_match.mark_enforced()
            if not if_match.matches(current):
                if already_applied and _applied(row, changes, etag_of, etag_column):
                    return row
                raise StaleEtag()
        new_values = dict(changes(dict(row)) if callable(changes) else changes)
        new_values.pop(etag_column, None)
        merged = {**row, **new_values}
        new_etag = etag_of(merged)
        merged[etag_column] = new_etag
        new_values[etag_column] = new_etag
        outcome = cas_update(conn, table, key, new_values, expected=(current,), etag_column=etag_column)
        if outcome == "updated":
            return merged
        if outcome == "gone":
            raise ResourceGone()
        if if_match is not None:
            # Someone committed between our read and our write: the client's tag is stale now.
            raise StaleEtag()
        return _AGAIN

    result = _retrying(engine, once, retries=retries, backoff=backoff)
    if result is not _AGAIN:
        return cast("dict[str, Any]", result)
    attempts = max(1, retries + 1)
    if if_match is not None:
        raise StaleEtag(
            f"The resource kept changing under concurrent updates ({attempts} attempts): your "
            "If-Match etag cannot be confirmed. Fetch the resource again, then retry."
        )
    raise ConcurrentUpdate(attempts)


def delete_if_match(
    engine: Engine,
    table: Table,
    key: Mapping[str, Any],
    *,
    if_match: IfMatch | None,
    etag_column: str = "etag",
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
) -> dict[str, Any]:
    """Delete the row if *if_match* holds (``DELETE ... WHERE key AND etag = :read``).

    :returns: the deleted row.  :raises ResourceGone: 404.  :raises StaleEtag: 412.
    :raises DatabaseUnavailable: 503.
    """
    def once(conn: Connection) -> dict[str, Any] | object:
        row = _read(conn, table, key)
        if row is None:
            raise ResourceGone()
        current = row[etag_column]
        if if_match is not None:
            if_match.mark_enforced()
            if not if_match.matches(current):
                raise StaleEtag()
        result = conn.execute(delete(table).where(_where(table, key), table.c[etag_column] == current))
        if result.rowcount == 1:
            return row
        if result.rowcount > 1:
            raise ApimwError(f"conditional delete matched {result.rowcount} rows: the key is not unique")
        if _current_etag(conn, table, key, etag_column) is None:
            raise ResourceGone()
        if if_match is not None:
            raise StaleEtag()
        return _AGAIN

    deleted = _retrying(engine, once, retries=retries, backoff=backoff)
    if deleted is not _AGAIN:
        return cast("dict[str, Any]", deleted)
    attempts = max(1, retries + 1)
    if if_match is not None:
        raise StaleEtag()
    raise ConcurrentUpdate(attempts)
