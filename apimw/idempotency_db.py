"""The durable half of ``X-Client-Token``: the token recorded in the app's create transaction.

The idempotency middleware's replay store is a cache: a restarted memcached forgets every
record, an evicted or expired record is gone, and a claim whose completion write failed
runs again after its lease.  A retry whose record is gone would create a second resource.
An app that creates rows closes that gap with one more INSERT in the transaction that
creates the row::

    from apimw.idempotency import client_token
    from apimw.idempotency_db import AlreadyCreated, record_token, run_create

    token = client_token(environ)            # None without X-Client-Token

    def create(conn):
        if token is not None:                 # first, so a duplicate stops before any work
            record_token(conn, TOKENS, token, kind="node", resource_id=new_uuid)
        conn.execute(NODES.insert(), row)

    try:
        run_create(engine, create)            # engine.begin(), retried on serialization failures
    except AlreadyCreated as done:           # an earlier execution created it: answer with it
        node = read_node(done.resource_id)   # (done.gone() is the 409 if it was deleted since)
        return created(node)                 # 201 + Location, as a replay would

The table (:func:`client_tokens_table`) is unique per ``(scope, token)``: of two
transactions that record one token, on any number of processes, exactly one commits; the
other's INSERT waits for it (PostgreSQL) or for the database lock (SQLite), then finds its
row, raises :class:`AlreadyCreated` (same fingerprint) or :class:`TokenReused` (409
``idempotency.fingerprint-mismatch``, another request), and its transaction rolls back
with everything it wrote.  At REPEATABLE READ or SERIALIZABLE (PostgreSQL) the waiting
INSERT fails with a serialization failure instead; :func:`run_create` runs the transaction
again (bounded), and the fresh transaction finds the row.  Rows older than the retention
are removed by :func:`purge_tokens`, which a deployment calls periodically.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from apimw.errors import ApimwError, HTTPProblem, explain_missing
from apimw.etag_db import DEFAULT_BACKOFF, DEFAULT_RETRIES, is_retryable, write_attempts

try:
    from sqlalchemy import (
        Column,
        DateTime,
        Engine,
        Index,
        MetaData,
        PrimaryKeyConstraint,
        String,
        Table,
        delete,
        select,
    )
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert
    from sqlalchemy.exc import DBAPIError, IntegrityError
except ImportError as exc:  # one line naming the extra
    explain_missing(
        exc, "apimw.idempotency_db", module="sqlalchemy", library="SQLAlchemy", extra="sqlalchemy"
    )
    raise

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from apimw.idempotency import ClientToken

__all__ = [
    "DEFAULT_RETENTION",
    "DEFAULT_TABLE",
    "AlreadyCreated",
    "CreateContended",
    "TokenReused",
    "check_token",
    "client_tokens_table",
    "purge_tokens",
    "record_token",
    "run_create",
]

_T = TypeVar("_T")

DEFAULT_TABLE: Final = "apimw_client_tokens"
#: Seconds a recorded token is kept (7 days): longer than the store's retention (1 day by
#: default), so a record the store still replays is always backed by a row.
DEFAULT_RETENTION: Final = 7 * 86400.0
#: The longest scope stored as is; a longer one is stored as ``sha256:<hex>``.
MAX_SCOPE: Final = 255


def client_tokens_table(metadata: MetaData, name: str = DEFAULT_TABLE) -> Table:
    """The token table in *metadata*::

        scope          VARCHAR(255) NOT NULL  -- the middleware's scope (the project by default)
        token          VARCHAR(255) NOT NULL  -- the client's token
        fingerprint    VARCHAR(64)  NOT NULL  -- sha256 hex of the request's identity
        resource_kind  VARCHAR(64)  NOT NULL  -- what was created ("node")
        resource_id    VARCHAR(255) NOT NULL  -- its identity (a UUID)
        created_at     TIMESTAMP    NOT NULL  -- UTC, for purge_tokens
        PRIMARY KEY (scope, token); INDEX (created_at)

    An app with its own migrations declares the same columns (any extra columns need
    defaults).
    """
    return Table(
        name, metadata,
        Column("scope", String(MAX_SCOPE), nullable=False),
        Column("token", String(255), nullable=False),
        Column("fingerprint", String(64), nullable=False),
        Column("resource_kind", String(64), nullable=False),
        Column("resource_id", String(255), nullable=False),
        Column("created_at", DateTime(), nullable=False),
        PrimaryKeyConstraint("scope", "token", name=f"{name}_pkey"),
        Index(f"{name}_created_at_idx", "created_at"),
    )  # fmt: skip


class AlreadyCreated(ApimwError):
    """An earlier execution of this request (same token, same fingerprint) created a resource.

    Raised inside the app's transaction, which it rolls back: answer with the resource
    named by ``kind`` and ``resource_id`` as it is now (201 and Location, as a replay
    would), or with :meth:`gone` when it was deleted since.
    """

    def __init__(self, kind: str, resource_id: str, created_at: dt.datetime | None) -> None:
        super().__init__(f"this X-Client-Token already created {kind} {resource_id}")
        self.kind = kind
        self.resource_id = resource_id
        self.created_at = created_at

    def gone(self) -> HTTPProblem:
        """409 ``idempotency.resource-gone``: the resource this token created was deleted since."""
        return HTTPProblem(
            409, "idempotency.resource-gone",
            f"The request with this X-Client-Token created a {self.kind} that was deleted since; "
            "use a new token to create another.",
        )  # fmt: skip


class TokenReused(HTTPProblem):
    """The token was recorded for another request (a different fingerprint).

    *status* is the middleware's ``mismatch_status`` (409, or 422 as the IETF draft says),
    which :func:`record_token` takes from the request's :class:`~apimw.idempotency.ClientToken`:
    the answer is the one the middleware gives when its store still has the record.
    """

    def __init__(self, status: int = 409) -> None:
        super().__init__(
            status, "idempotency.fingerprint-mismatch",
            "This X-Client-Token was already used for a different request "
            "(method, path, query, body or microversion differ).",
        )  # fmt: skip


class CreateContended(HTTPProblem):
    """409 + ``Retry-After``: every attempt of the create transaction lost to concurrent writers."""

    def __init__(self, attempts: int) -> None:
        super().__init__(
            409, "idempotency.create-contended",
            f"The create kept conflicting with concurrent transactions ({attempts} attempts); retry later.",
            headers=[("Retry-After", "1")],
        )  # fmt: skip


class _NotVisibleYet(ApimwError):
    """The token's row exists (the INSERT conflicted) but this transaction's snapshot cannot
    see it (REPEATABLE READ on a database that does not raise a serialization failure for
    it): a fresh transaction will."""


def _scope_key(scope: str) -> str:
    if len(scope) <= MAX_SCOPE and len(scope.encode("utf-8", "surrogatepass")) <= MAX_SCOPE:
        return scope
    return "sha256:" + hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _insert_if_absent(conn: Connection, table: Table, values: dict[str, Any]) -> bool:
    """INSERT the row unless its key exists (waiting for a concurrent inserter); True if inserted."""
    dialect = conn.dialect.name
    if dialect == "postgresql":
        pg_stmt = pg_insert(table).values(**values).on_conflict_do_nothing().returning(table.c.token)
        return conn.execute(pg_stmt).first() is not None
    if dialect == "sqlite":
        lite_stmt = sqlite_insert(table).values(**values).on_conflict_do_nothing()
        return bool(conn.execute(lite_stmt).rowcount == 1)
    # other databases: a savepoint, so a duplicate does not abort the app's transaction
    try:
        with conn.begin_nested():
            conn.execute(table.insert().values(**values))
    except IntegrityError:
        return False
    return True


def _found(row: Any, token: ClientToken) -> AlreadyCreated:
    """The answer to a token found recorded: raises TokenReused, returns AlreadyCreated to raise."""
    if row.fingerprint != token.fingerprint:
        token.reused = True  # the middleware releases its claim: the token stays the first request's
        raise TokenReused(token.mismatch_status)
    token.replayed = True  # the app answers with what the first execution made: a replay
    return AlreadyCreated(row.resource_kind, row.resource_id, row.created_at)


def _lookup(conn: Connection, table: Table, scope: str, token: str) -> Any:
    return conn.execute(
        select(table.c.fingerprint, table.c.resource_kind, table.c.resource_id, table.c.created_at).where(
            table.c.scope == scope, table.c.token == token
        )
    ).first()


def check_token(bind: Engine | Connection, table: Table, token: ClientToken) -> None:
    """Raise if *token* is already recorded; return ``None`` if it is not (one SELECT).

    Call it before the app's own checks whose outcome the first execution itself may have
    changed: a name that now exists (the first execution's), a referenced resource whose
    owner or state changed since, or was deleted.  Without it, a retry whose store record
    is gone gets that check's error instead of the resource it created.  It decides
    nothing on its own: :func:`record_token` in the create transaction still does (a
    concurrent first execution may commit between the two).

    :raises AlreadyCreated: :raises TokenReused: as :func:`record_token`.
    """
    scope = _scope_key(token.scope)
    if isinstance(bind, Engine):
        with bind.connect() as conn:
            row = _lookup(conn, table, scope, token.token)
    else:
        row = _lookup(bind, table, scope, token.token)
    if row is not None:
        raise _found(row, token)


def record_token(
    conn: Connection,
    table: Table,
    token: ClientToken,
    *,
    kind: str,
    resource_id: str,
) -> None:
    """Record *token* as having created *kind* *resource_id*, in the transaction of *conn*.

    Call it in the transaction that creates the resource, before the resource's own
    INSERT when its identity is known by then (a duplicate then stops before any work).
    One INSERT when the token is new.  When the token is already recorded (committed by
    an earlier execution, or by a concurrent one that this INSERT waited for):

    :raises AlreadyCreated: same fingerprint: answer with that resource.
    :raises TokenReused: another request used this token (409, or the middleware's
        ``mismatch_status``).

    Either way the caller's transaction must roll back (both propagate out of
    ``engine.begin()``, which does).
    """
    scope = _scope_key(token.scope)
    values = {
        "scope": scope,
        "token": token.token,
        "fingerprint": token.fingerprint,
        "resource_kind": kind,
        "resource_id": str(resource_id),
        "created_at": _utcnow(),
    }
    if _insert_if_absent(conn, table, values):
        return
    row = _lookup(conn, table, scope, token.token)
    if row is None:  # committed after this transaction's snapshot, or purged meanwhile
        raise _NotVisibleYet("the recorded client token is not visible to this transaction; retry it")
    raise _found(row, token)


def run_create(
    engine: Engine,
    create: Callable[[Connection], _T],
    *,
    retries: int = DEFAULT_RETRIES,
    backoff: float = DEFAULT_BACKOFF,
) -> _T:
    """Run ``create(conn)`` in a transaction of its own, retried when the database refuses it.

    *create* calls :func:`record_token` and inserts the resource.  Under PostgreSQL's
    REPEATABLE READ or SERIALIZABLE isolation, the INSERT of a token that a concurrent
    transaction committed meanwhile fails with a serialization failure (SQLSTATE 40001)
    rather than finding the row; deadlocks (40P01, MySQL 1213), lock timeouts and SQLite's
    "database is locked" are alike (:func:`apimw.etag_db.is_retryable`).  The whole
    transaction is then run again, at most ``retries + 1`` times with jittered backoff
    (:func:`apimw.etag_db.write_attempts`); the retry sees the committed row, so it raises
    :class:`AlreadyCreated` or :class:`TokenReused` like any retry.  *create* may therefore
    run more than once: keep side effects outside it.

    :returns: what *create* returned.
    :raises AlreadyCreated: :raises TokenReused: from :func:`record_token`.
    :raises CreateContended: 409 with ``Retry-After`` when every attempt was refused.
    """
    attempts = max(1, retries + 1)
    for _attempt in write_attempts(retries, backoff):
        try:
            with engine.begin() as conn:
                return create(conn)
        except DBAPIError as exc:
            if not is_retryable(exc):
                raise
        except _NotVisibleYet:
            pass
    raise CreateContended(attempts)


def purge_tokens(
    bind: Engine | Connection,
    table: Table,
    *,
    older_than: float = DEFAULT_RETENTION,
) -> int:
    """Delete the tokens recorded more than *older_than* seconds ago; the number deleted.

    Call it periodically (a cron job, a conductor's periodic task).  Keep *older_than*
    above the idempotency store's ``retention`` (and above how long clients retry): a
    token purged while its client still retries would create again.
    """
    if not older_than >= 0:
        raise ValueError(f"older_than must be >= 0 seconds, got {older_than!r}")
    stmt = delete(table).where(table.c.created_at < _utcnow() - dt.timedelta(seconds=older_than))
    if isinstance(bind, Engine):
        with bind.begin() as conn:
            return int(conn.execute(stmt).rowcount)
    return int(bind.execute(stmt).rowcount)
