"""The data API: every read and write of the service's tables, through SQLAlchemy Core.

Resources are plain dicts ("documents") keyed by Ironic field names, with the
resolved references (``chassis_uuid``, ``node_uuid``, ``portgroup_uuid``) and
datetimes as ISO 8601 strings in UTC (``2026-11-22T10:37:50.208515+00:00``).
Documents read here also carry the internal keys in :data:`INTERNAL_KEYS`
(``id``, ``node_id``, ``pending_action``...); :func:`public` drops them.

Writes are compare-and-swap on the stored etag, in one function per shape
(:meth:`Database.insert`, :meth:`Database.update`, :meth:`Database.delete`):

1. read the current document (one indexed SELECT);
2. evaluate the caller's If-Match against it (412 when stale) and let the caller
   compute its changes from it (state checks run here);
3. ``UPDATE ... SET ..., etag=:new WHERE id=:id AND etag=:read`` (plus the caller's
   lease/queue conditions) in a transaction that also inserts the event record; 0 rows
   means somebody else wrote in between: go back to 1 (where a stale If-Match now fails
   with 412).

So a conditional write is atomic with the check on every backend (one UPDATE
statement decides), and the etag is recomputed for every create and modify in
exactly one place (:meth:`Database._new_etag`, from :mod:`baremetal_service.db.etags`).

Every statement is built once per shape with its values as bound parameters, so
SQLAlchemy's compiled-statement cache serves it from the second call on.  Reads are
single statements with joins (a 100-node page is one query).  The tables and their
documents are described in :mod:`.kinds`; conductors and resource classes
(:mod:`.conductors`) and the conductor's node leases (:mod:`.leases`) are parts of
:class:`Database` of their own.
"""

from __future__ import annotations

import builtins
import datetime as dt
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from apimw.errors import ApimwError
from apimw.etag import CanonicalizationError, ETagGenerator, IfMatch, parse_if_match
from apimw.etag_db import is_retryable, write_attempts
from apimw.idempotency import ClientToken
from apimw.idempotency_db import (
    AlreadyCreated,
    TokenReused,
    check_token,
    purge_tokens,
    record_token,
    run_create,
)
from baremetal_service import exceptions as exc
from baremetal_service.db import events, history, migrate
from baremetal_service.db.conductors import ConductorQueries, ResourceClassQueries
from baremetal_service.db.engine import WalCheckpointer, create_engine
from baremetal_service.db.etags import make_generator
from baremetal_service.db.events import EventQueries
from baremetal_service.db.integrity import DATA_ERROR, raise_integrity
from baremetal_service.db.kinds import (
    ALLOCATIONS,
    CHASSIS,
    CLIENT_TOKENS,
    CONDITIONS,
    CONDUCTORS,
    DEPLOY_TEMPLATES,
    EVENTS,
    INSPECTION_RULES,
    INTERNAL_KEYS,
    KINDS,
    MAX_LIMIT,
    NODE_FILTERS,
    NODES,
    PORTGROUPS,
    PORTS,
    POWER_OFF,
    REFS,
    RESOURCE_CLASSES,
    RUNBOOKS,
    VOLUME_CONNECTORS,
    VOLUME_DELETE_STATES,
    VOLUME_TARGETS,
    Filter,
    Kind,
    is_uuid_like,
    iso,
    like_escaped,
    list_statement,
    node_filter_shapes,
    public,
    utcnow,
)
from baremetal_service.db.leases import LeaseQueries

__all__ = [
    "ALLOCATIONS",
    "CHASSIS",
    "CLIENT_TOKENS",
    "CONDITIONS",
    "CONDUCTORS",
    "DEPLOY_TEMPLATES",
    "EVENTS",
    "INSPECTION_RULES",
    "INTERNAL_KEYS",
    "KINDS",
    "NODES",
    "NODE_FILTERS",
    "PORTGROUPS",
    "PORTS",
    "POWER_OFF",
    "REFS",
    "RESOURCE_CLASSES",
    "RUNBOOKS",
    "VOLUME_CONNECTORS",
    "VOLUME_DELETE_STATES",
    "VOLUME_TARGETS",
    "CreatedBefore",
    "Database",
    "Filter",
    "IfMatchArg",
    "is_uuid_like",
    "iso",
    "like_escaped",
    "public",
    "utcnow",
]

#: ``None`` (no precondition), the etag middleware's parsed :class:`apimw.etag.IfMatch`
#: (``environ["apimw.etag.if_match"]``), ``"*"`` / a raw header value, or a list of etags.
IfMatchArg = IfMatch | str | Sequence[str] | None

#: A node's ports and portgroups, deleted with it (in the node's DELETE transaction).
_DELETE_NODE_CHILDREN: Final = tuple(
    table.delete().where(table.c.node_id == sa.bindparam("node_id")) for table in (PORTS, PORTGROUPS)
)
MAX_WRITE_ATTEMPTS: Final = 20
#: First pause between write attempts (doubling, jittered: :func:`apimw.etag_db.write_attempts`).
WRITE_BACKOFF: Final = 0.002
#: Statement shapes kept built (lists, markers, compare-and-swap writes); beyond, built per call.
MAX_SHAPES: Final = 512


class CreatedBefore(Exception):  # noqa: N818 - an outcome, not an error
    """An earlier execution of this create (same client token, same request) made ``doc``.

    Raised by :meth:`Database.insert` after its transaction rolled back: the caller answers
    with ``doc`` (the resource as it is now) as the first execution did, without running
    its after-create steps again.
    """

    def __init__(self, doc: dict[str, Any]) -> None:
        super().__init__(doc.get("uuid"))
        self.doc = doc


def _matches(if_match: IfMatchArg, current: str | None) -> bool:
    """Evaluate If-Match against the *current* etag (weak comparison, as apimw.etag does).

    A parsed :class:`apimw.etag.IfMatch` is marked enforced: the write that follows is
    conditional on it (the CAS on the etag column), which the middleware waits for.
    """
    if if_match is None:
        return True
    if isinstance(if_match, str):
        if_match = parse_if_match(if_match, accept_unquoted=True)
        if if_match is None:
            return True
    if isinstance(if_match, IfMatch):
        if_match.mark_enforced()
        return if_match.matches(current)
    if current is None:
        return False
    opaque = current.removeprefix("W/")
    return any(c == "*" or c.removeprefix("W/") == opaque for c in if_match)


class _LostRace(Exception):
    """A concurrent write changed the row between our read and our UPDATE: roll back, retry."""


class Database(ResourceClassQueries, ConductorQueries, LeaseQueries, EventQueries):
    """The service's database: engine, migrations and the data API."""

    def __init__(
        self,
        url: str,
        *,
        etag_generator: ETagGenerator | None = None,
        pool_size: int = 10,
        echo: bool = False,
        background_checkpoints: bool = True,
    ) -> None:
        """*background_checkpoints* (SQLite): the WAL is checkpointed by a thread of its own
        (:class:`.engine.WalCheckpointer`), never inside a request's commit."""
        self.url = url
        self.engine: Engine = create_engine(
            url, pool_size=pool_size, echo=echo, background_checkpoints=background_checkpoints
        )
        #: SQLite: the WAL is checkpointed by a thread of its own, never by a request's commit
        self.checkpointer = (
            WalCheckpointer(self.engine)
            if background_checkpoints and self.engine.dialect.name == "sqlite"
            else None
        )
        #: list statements by shape (:meth:`list`), marker lookups, compare-and-swap writes
        self._list_queries: dict[tuple[Any, ...], sa.Select[Any]] = {}
        self._marker_queries: dict[tuple[str, str, bool], sa.Select[Any]] = {}
        self._cas_writes: dict[tuple[Any, ...], sa.Update | sa.Delete] = {}
        #: Reads run in autocommit on PostgreSQL: no BEGIN/ROLLBACK round trips around a
        #: SELECT (the SQLite driver already reads outside transactions).  Same pool.
        self.reader: Engine = (
            self.engine.execution_options(isolation_level="AUTOCOMMIT")
            if self.engine.dialect.name == "postgresql"
            else self.engine
        )
        self.etag_generator = etag_generator or make_generator()

    # -- lifecycle ----------------------------------------------------------------

    def upgrade(self) -> None:
        migrate.upgrade(self.engine)

    def dispose(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        self.engine.dispose()

    # -- reads --------------------------------------------------------------------

    def _fetch(
        self,
        conn: Connection,
        kind_name: str,
        ident: str,
        project_id: str | None = None,
        *,
        status: int | None = None,
        internal: bool = True,
    ) -> dict[str, Any]:
        """The document of *ident* (with the internal keys unless ``internal=False``, which
        does not select them); NotFound (*status*, 404 by default) if the caller sees none."""
        kind = KINDS[kind_name]
        column, ident_value = self._lookup_column(kind, ident, status)
        stmt = kind.lookups[(column, project_id is not None, internal)]
        result = conn.execute(stmt, {"ident": ident_value, "project": project_id})
        row = result.first()
        if row is None:
            raise kind.not_found(ident, status=status)
        return kind.to_doc(result.keys(), row)

    def _lookup_column(self, kind: Kind, ident: str, status: int | None = None) -> tuple[str, str]:
        """The column *ident* is looked up by (``uuid`` or ``name``) and the value; NotFound if none."""
        if not isinstance(ident, str) or "\x00" in ident:
            # No row can hold a NUL (writes refuse it), and PostgreSQL cannot even compare with one.
            raise kind.not_found(ident, status=status)
        if is_uuid_like(ident):
            return "uuid", ident.lower()
        if kind.has_name:
            return "name", ident
        raise kind.not_found(ident, status=status)

    def get(
        self, kind: str, ident: str, *, project_id: str | None = None, internal: bool = True
    ) -> dict[str, Any]:
        """One resource by UUID (or name, for nodes, ports, portgroups); NotFound otherwise."""
        with self.reader.connect() as conn:
            return self._fetch(conn, kind, ident, project_id, internal=internal)

    def _current(self, kind_name: str, ident: str, project_id: str | None) -> dict[str, Any]:
        """The document a write starts from (:meth:`get` with its internal keys)."""
        with self.reader.connect() as conn:
            return self._fetch(conn, kind_name, ident, project_id)

    def get_by_id(self, kind_name: str, row_id: int) -> dict[str, Any] | None:
        kind = KINDS[kind_name]
        with self.reader.connect() as conn:
            result = conn.execute(kind.select.where(kind.table.c.id == row_id))
            row = result.first()
        return None if row is None else kind.to_doc(result.keys(), row)

    def list(
        self,
        kind_name: str,
        *,
        where: Sequence[sa.ColumnElement[bool]] = (),
        equals: Mapping[str, Any] | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
        internal: bool = True,
        filters: Sequence[Filter] = (),
        params: Mapping[str, Any] | None = None,
    ) -> builtins.list[dict[str, Any]]:
        """A page of resources in one query, ordered by (*sort_key*, id).

        *fields* narrows the SELECT to those document fields (plus ``uuid``): a list
        that shows six fields does not fetch and decode sixty.  ``internal=False``
        leaves out the internal keys (what :func:`public` would do, without a copy).
        *equals* filters by column values (``{"node_id": 3, "address": "52:..."}``);
        *filters* are :data:`Filter` shapes whose values are in *params*; *where* takes
        SQL conditions (the data API's own queries only).

        The statement is built once per shape (kind, filters, scope, marker, sort, fields)
        with every value a bound parameter, the LIMIT too (SQLAlchemy's compiled cache then
        serves it); *where* conditions are added for the call.
        """
        kind = KINDS[kind_name]
        key, bound = self.list_shape(kind, filters, equals, project_id, limit, marker, sort_key, sort_dir,
                                      fields, internal, params)  # fmt: skip
        stmt = self.list_query(kind, key)
        if where:
            stmt = stmt.where(*where)
        with self.reader.connect() as conn:
            return kind.to_docs(conn.execute(stmt, bound))

    def list_shape(
        self,
        kind: Kind,
        filters: Sequence[Filter],
        equals: Mapping[str, Any] | None,
        project_id: str | None,
        limit: int | None,
        marker: str | None,
        sort_key: str,
        sort_dir: str,
        fields: Iterable[str] | None,
        internal: bool,
        params: Mapping[str, Any] | None,
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """A list's statement shape (the :meth:`_list_queries` key) and its bound values."""
        if sort_dir not in ("asc", "desc"):
            raise exc.InvalidParameterValue(
                f"Invalid sort direction: {sort_dir}. Acceptable values are 'asc' or 'desc'"
            )
        if sort_key not in kind.sortable:
            raise exc.InvalidParameterValue(f"The sort_key value {sort_key} is an invalid field for sorting")
        if limit is not None and limit < 0:
            raise exc.InvalidParameterValue(f"Limit must be positive, got {limit}")
        bound: dict[str, Any] = dict(params or {})
        bound["limit"] = MAX_LIMIT if not limit else min(limit, MAX_LIMIT)
        if equals:  # (``== None`` is SQL's IS NULL, as SQLAlchemy renders it)
            filters = (*filters, *(("eq", k) if v is not None else ("is", k, None)
                                   for k, v in equals.items()))  # fmt: skip
            bound.update({f"eq_{key}": value for key, value in equals.items() if value is not None})
        scoped = project_id is not None and kind.owner_cols is not None
        if scoped:
            bound["project"] = project_id
        after: tuple[str, bool] | None = None
        if marker is not None:
            value, row_id = self._marker(kind, sort_key, str(marker), project_id if scoped else None)
            after = ("after", value is None)
            bound["m_value"], bound["m_id"] = value, row_id
        key = (kind.name, tuple(filters), scoped, after, sort_key, sort_dir,
               None if fields is None else frozenset(fields), internal)  # fmt: skip
        return key, bound

    def list_query(self, kind: Kind, key: tuple[Any, ...]) -> sa.Select[Any]:
        """The list statement of shape *key*, built once per shape."""
        stmt = self._list_queries.get(key)
        if stmt is None:
            stmt = list_statement(kind, key)
            if len(self._list_queries) < MAX_SHAPES:
                self._list_queries[key] = stmt
        return stmt

    def _marker(self, kind: Kind, sort_key: str, marker: str, project_id: str | None) -> tuple[Any, int]:
        """(sort value, id) of the *marker* row; NotFound if it is not one the caller sees."""
        if not is_uuid_like(marker):
            raise kind.not_found(marker)
        key = (kind.name, sort_key, project_id is not None)
        stmt = self._marker_queries.get(key)
        if stmt is None:
            columns: builtins.list[sa.ColumnElement[Any]] = [kind.table.c[sort_key], kind.table.c.id]
            stmt = kind.select.with_only_columns(*columns).where(kind.table.c.uuid == sa.bindparam("ident"))
            if project_id is not None:
                stmt = stmt.where(kind.scope_of(sa.bindparam("project")))
            self._marker_queries[key] = stmt
        with self.reader.connect() as conn:
            row = conn.execute(stmt, {"ident": marker.lower(), "project": project_id}).first()
        if row is None:
            raise kind.not_found(marker)
        return row[0], row[1]

    def count(self, kind_name: str, **equals: Any) -> int:
        """How many rows of *kind_name* have these column values (``count("port", portgroup_id=3)``)."""
        table = KINDS[kind_name].table
        where = [table.c[k] == v for k, v in equals.items()]
        with self.reader.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one())

    # -- named queries of the service layer --------------------------------------------

    def list_nodes(
        self,
        *,
        filters: Mapping[str, Any] | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        fields: Iterable[str] | None = None,
        internal: bool = True,
    ) -> builtins.list[dict[str, Any]]:
        """A page of nodes matching Ironic's node list *filters* (see :data:`NODE_FILTERS`)."""
        shape, params = node_filter_shapes(filters, lambda uuid: self.get("chassis", uuid)["id"])
        return self.list(
            "node", filters=shape, params=params, project_id=project_id, limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=fields, internal=internal,
        )  # fmt: skip

    def allocation_candidates(
        self, resource_class: Any, candidate_nodes: Iterable[str] | None, owner: str | None
    ) -> builtins.list[dict[str, Any]]:
        """Nodes an allocation may take: *resource_class*, available, not in maintenance, a
        known power state, no instance and no allocation; among *candidate_nodes* (UUIDs) if
        given; owned or leased by *owner* if not None."""
        where: builtins.list[sa.ColumnElement[bool]] = [
            NODES.c.resource_class == resource_class,
            NODES.c.provision_state == "available",
            NODES.c.instance_uuid.is_(None),
            NODES.c.power_state.is_not(None),
            NODES.c.maintenance.is_(False),
            ALLOCATIONS.c.id.is_(None),  # the node select joins the node's allocation
        ]
        if candidate_nodes:
            where.append(NODES.c.uuid.in_(builtins.list(candidate_nodes)))
        return self.list("node", where=where, project_id=owner)

    def idle_nodes_page(self, *, after_id: int, limit: int) -> builtins.list[dict[str, Any]]:
        """Nodes with no lease, no queued work, no power target, not in maintenance, by id
        after *after_id* (keyset paging for the power sync)."""
        where = [
            NODES.c.maintenance.is_(False),
            NODES.c.reservation.is_(None),
            NODES.c.pending_action.is_(None),
            NODES.c.target_power_state.is_(None),
            NODES.c.id > after_id,
        ]
        return self.list("node", where=where, limit=limit)

    # -- the one write path -----------------------------------------------------------

    def _new_etag(self, kind: str, doc: Mapping[str, Any]) -> str:
        """THE place where a resource's etag is computed (create and every modify)."""
        try:
            return self.etag_generator.etag(public(doc), kind)
        except CanonicalizationError as error:
            raise exc.InvalidParameterValue(f"Invalid {kind}: {error}") from None

    def _resolve_refs(
        self, conn: Connection, kind: str, values: Mapping[str, Any], project_id: str | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Reference fields (uuids or names) -> ``(column values, canonical document values)``.

        A referenced resource that does not exist (or is not the caller's) is the
        NotFound error with status 400, as Ironic answers it.
        """
        columns: dict[str, Any] = {}
        docs: dict[str, Any] = {}
        for key, value in values.items():
            column, ref_kind = REFS[kind][key]
            if value is None:
                columns[column] = docs[key] = None
                continue
            ref = self._fetch(conn, ref_kind, str(value), project_id, status=400)
            columns[column] = ref["id"]
            docs[key] = ref["uuid"]
        return columns, docs

    def _db_values(self, kind: Kind, values: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in values.items():
            if key in kind.datetimes and isinstance(value, str):
                value = dt.datetime.fromisoformat(value).replace(tzinfo=None)
            if key in kind.columns:
                out[key] = value
        return out

    def _doc_values(self, kind: Kind, values: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: (iso(v) if k in kind.datetimes and isinstance(v, dt.datetime) else v)
            for k, v in values.items()
        }

    def insert(
        self,
        kind_name: str,
        values: Mapping[str, Any],
        *,
        project_id: str | None = None,
        token: ClientToken | None = None,
    ) -> dict[str, Any]:
        """Create a resource from document-style *values* (all columns defaulted here).

        *token*: the request's client token (``apimw.idempotency.client_token``), recorded
        in the same transaction (:func:`apimw.idempotency_db.record_token`): a create that
        an earlier execution already made raises :class:`CreatedBefore` with that resource
        (409 ``idempotency.resource-gone`` if it was deleted since), another request with
        the same token 409 ``idempotency.fingerprint-mismatch``.
        """
        kind = KINDS[kind_name]
        now = utcnow()
        row: dict[str, Any] = {
            name: value if make is None else make(None) for name, value, make in kind.insert_defaults
        }
        refs_of = REFS[kind_name]
        row.update({k: v for k, v in values.items() if k not in refs_of})
        kind.normalise_json(row)
        row["uuid"] = str(row.get("uuid") or uuidlib.uuid4()).lower()
        row["created_at"] = now
        row["updated_at"] = None
        refs = {k: values.get(k) for k in REFS[kind_name]}

        def once(conn: Connection) -> dict[str, Any]:
            if token is not None:  # first: a retry stops here, before any other check
                record_token(conn, CLIENT_TOKENS, token, kind=kind_name, resource_id=row["uuid"])
            columns, ref_docs = self._resolve_refs(conn, kind_name, refs, project_id)
            doc = {**self._doc_values(kind, row), **ref_docs}
            for key in kind.joined:  # what a read joins in (a new node has no allocation yet)
                doc.setdefault(key, None)
            etag = self._new_etag(kind_name, doc)
            db_row = {**self._db_values(kind, row), **columns, "etag": etag}
            inserted = conn.execute(kind.table.insert(), db_row).inserted_primary_key
            new_id = inserted[0] if inserted is not None else None
            doc.update(columns, id=new_id, etag=etag)
            events.record(conn, kind_name, doc, f"baremetal.{kind_name}.create.end", etag, now)
            return doc

        try:
            # a transaction of its own, run again after a serialization failure or deadlock
            # (REPEATABLE READ / SERIALIZABLE): the retry then finds a concurrent token's row
            doc = run_create(self.engine, once, retries=MAX_WRITE_ATTEMPTS - 1, backoff=WRITE_BACKOFF)
        except sa.exc.IntegrityError as error:
            raise_integrity(kind_name, error, row)
        except sa.exc.DataError:
            raise exc.InvalidParameterValue(f"Invalid {kind_name}: {DATA_ERROR}") from None
        except AlreadyCreated as done:
            raise CreatedBefore(self._created_before(kind_name, done, token)) from None
        return doc

    def created_before(self, kind_name: str, token: ClientToken | None) -> dict[str, Any] | None:
        """The resource an earlier execution of this create made (as it is now), ``None`` when
        *token* is new (or absent).  Callers ask first, before the checks that the first
        execution itself may have changed the outcome of (the referenced node's owner or
        existence): a retry whose store record is gone then gets what it created, as a
        replay would.  409 ``idempotency.resource-gone`` when it was deleted since, the
        fingerprint mismatch for another request.  :meth:`insert` still decides races.
        """
        if token is None:
            return None
        try:
            check_token(self.reader, CLIENT_TOKENS, token)
        except AlreadyCreated as done:
            return self._created_before(kind_name, done, token)
        return None

    def _created_before(
        self, kind_name: str, done: AlreadyCreated, token: ClientToken | None
    ) -> dict[str, Any]:
        """The resource an earlier execution of a create made, as it is now."""
        if done.kind != kind_name:  # the same fingerprint names the same path: never in practice
            if token is not None:
                token.reused = True
            raise TokenReused(409 if token is None else token.mismatch_status)
        try:
            return self.get(kind_name, done.resource_id)
        except exc.NotFound:
            raise done.gone() from None

    def purge_client_tokens(self, older_than: float) -> int:
        """Forget the client tokens recorded more than *older_than* seconds ago (periodic)."""
        return purge_tokens(self.engine, CLIENT_TOKENS, older_than=older_than)

    def update(
        self,
        kind_name: str,
        ident: str,
        mutate: Callable[[dict[str, Any]], Mapping[str, Any] | None],
        *,
        if_match: IfMatchArg = None,
        project_id: str | None = None,
        event_type: str | None = None,
        match: Mapping[str, Any] | None = None,
        conditions: Sequence[str] = (),
        on_conflict: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Change one resource: *mutate* gets the current document and returns the changes.

        Returns the new document.  ``mutate`` may raise a domain error (it sees the
        current state) and is called again if a concurrent write won the race.  An
        empty change set writes nothing (no etag change, no event).  *match* (column ->
        value, ``None`` meaning IS NULL) and *conditions* (names in :data:`CONDITIONS`)
        add conditions to the UPDATE; when they fail, *on_conflict* (given the current
        document) may raise a precise error before the next attempt.

        The write itself is one compare-and-swap (:meth:`_cas_write`: ``UPDATE ... WHERE id
        AND etag = :read AND`` the conditions) in the transaction that also records the event.
        """
        kind = KINDS[kind_name]

        def write(current: dict[str, Any]) -> dict[str, Any]:
            changes = mutate(dict(current))
            if not changes:
                return current
            changes = kind.normalise_json(dict(changes))
            now = utcnow()
            doc = {**current, **self._doc_values(kind, changes), "updated_at": iso(now)}
            try:
                with self.engine.begin() as conn:
                    refs = {k: v for k, v in changes.items() if k in REFS[kind_name]}
                    columns, ref_docs = self._resolve_refs(conn, kind_name, refs, project_id)
                    doc.update(columns)
                    doc.update(ref_docs)
                    etag = self._new_etag(kind_name, doc)
                    values = {**self._db_values(kind, changes), **columns}
                    values.update(updated_at=now, etag=etag)
                    if self._cas_write(conn, kind_name, current, match, conditions, values) != 1:
                        raise _LostRace
                    doc["etag"] = etag
                    events.record(
                        conn, kind_name, doc, event_type or f"baremetal.{kind_name}.update.end", etag, now
                    )
                    if kind_name == "node":  # a new last_error is a history entry (Ironic's)
                        history.record(conn, current, changes, now)
                    return doc
            except sa.exc.IntegrityError as error:
                raise_integrity(kind_name, error, {**current, **changes})
            except sa.exc.DataError:
                raise exc.InvalidParameterValue(f"Invalid {kind_name}: {DATA_ERROR}") from None

        return self._retry_cas(kind_name, ident, project_id, if_match, on_conflict, write)

    def delete(
        self,
        kind_name: str,
        ident: str,
        *,
        check: Callable[[dict[str, Any]], None] | None = None,
        if_match: IfMatchArg = None,
        project_id: str | None = None,
        match: Mapping[str, Any] | None = None,
        conditions: Sequence[str] = (),
        on_conflict: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Delete one resource (and a node's ports and portgroups) with the same CAS rules."""

        def write(current: dict[str, Any]) -> dict[str, Any]:
            if check is not None:
                check(current)
            now = utcnow()
            try:
                with self.engine.begin() as conn:
                    if kind_name == "node":  # its ports and portgroups go with it
                        for stmt in _DELETE_NODE_CHILDREN:
                            conn.execute(stmt, {"node_id": current["id"]})
                    if self._cas_write(conn, kind_name, current, match, conditions, None) != 1:
                        raise _LostRace
                    events.record(
                        conn, kind_name, current, f"baremetal.{kind_name}.delete.end", current["etag"], now
                    )
                    return current
            except sa.exc.IntegrityError as error:
                raise_integrity(kind_name, error, current)

        return self._retry_cas(kind_name, ident, project_id, if_match, on_conflict, write)

    def _retry_cas(
        self,
        kind_name: str,
        ident: str,
        project_id: str | None,
        if_match: IfMatchArg,
        on_conflict: Callable[[dict[str, Any]], None] | None,
        write: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> dict[str, Any]:
        """The compare-and-swap loop of :meth:`update` and :meth:`delete`.

        Each attempt reads the current document, checks *if_match* against its etag (412)
        and hands it to *write*, which returns the result or raises :class:`_LostRace` when
        its conditional write matched no row.  A lost race or a retryable database error
        (a serialization failure, a deadlock) means another attempt, after *on_conflict*
        (given the document as it is now) had its chance to raise a precise error; after
        the last one, 409.
        """
        for _attempt in write_attempts(MAX_WRITE_ATTEMPTS - 1, WRITE_BACKOFF):
            current = self._current(kind_name, ident, project_id)
            if not _matches(if_match, current["etag"]):
                raise exc.PreconditionFailed(kind_name, ident)
            try:
                return write(current)
            except _LostRace:
                pass
            except sa.exc.DBAPIError as error:
                if not is_retryable(error):
                    raise
            if on_conflict is not None:
                on_conflict(self._current(kind_name, ident, project_id))
        raise exc.Conflict(f"The {kind_name} {ident} is being modified concurrently; please retry.")

    def _cas_write(
        self,
        conn: Connection,
        kind_name: str,
        current: Mapping[str, Any],
        match: Mapping[str, Any] | None,
        conditions: Sequence[str],
        values: Mapping[str, Any] | None,
    ) -> int:
        """``UPDATE`` (*values*) or ``DELETE`` (``values=None``) of *current*'s row ``WHERE id
        AND etag = :read AND`` *match* (``None`` meaning IS NULL) ``AND`` the named
        *conditions*, in *conn*'s transaction; the matched row count (1 when the
        compare-and-swap held).  The statement is built once per shape, its values bound
        parameters (SQLAlchemy's compiled cache serves it from then on)."""
        match = match or {}
        nulls = tuple(sorted(k for k, v in match.items() if v is None))
        equals = tuple(sorted(k for k, v in match.items() if v is not None))
        columns = None if values is None else tuple(sorted(values))
        no_etag = current["etag"] is None  # a row from before migration 0002, not backfilled yet
        key = (kind_name, columns, nulls, equals, tuple(conditions), no_etag)
        stmt = self._cas_writes.get(key)
        if stmt is None:
            table = KINDS[kind_name].table
            where = [
                table.c.id == sa.bindparam("w_id"),
                table.c.etag.is_(None) if no_etag else table.c.etag == sa.bindparam("w_etag"),
                *(table.c[k].is_(None) for k in nulls),
                *(table.c[k] == sa.bindparam(f"w_{k}") for k in equals),
                *(CONDITIONS[name](table) for name in conditions),
            ]
            stmt = table.delete().where(*where) if values is None else table.update().where(*where)
            if len(self._cas_writes) < MAX_SHAPES:  # update shapes: bounded by the callers' change sets
                self._cas_writes[key] = stmt
        params = {"w_id": current["id"], **(values or {})}
        if not no_etag:
            params["w_etag"] = current["etag"]
        for name in equals:
            params[f"w_{name}"] = match[name]
        count = int(conn.execute(stmt, params).rowcount)
        if count > 1:  # as apimw.etag_db.cas_update: never with the primary key in the condition
            raise ApimwError(f"conditional write matched {count} rows: the key is not unique")
        return count

    # -- node history --------------------------------------------------

    def node_history(
        self,
        ident: str,
        *,
        project_id: str | None = None,
        limit: int,
        marker: str | None = None,
        sort_key: str = "created_at",
        sort_dir: str = "asc",
    ) -> tuple[dict[str, Any], builtins.list[dict[str, Any]]]:
        """The node and a page of its history entries (:mod:`.history`)."""
        with self.reader.connect() as conn:
            node = self._fetch(conn, "node", ident, project_id)
            entries = history.list_for_node(
                conn, node["id"], limit=limit, marker=marker, sort_key=sort_key, sort_dir=sort_dir
            )
        return node, entries

    def node_history_entry(
        self, ident: str, event: str, *, project_id: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The node and one of its history entries by uuid (404 for another node's)."""
        with self.reader.connect() as conn:
            node = self._fetch(conn, "node", ident, project_id)
            return node, history.get(conn, node["id"], event)

    # -- etag backfill (rows that predate migration 0002) --------------------------------

    def backfill_etags(self) -> int:
        """Compute the etag of every row that has none; returns how many were set."""
        done = 0
        for kind_name, kind in KINDS.items():
            with self.reader.connect() as conn:
                docs = kind.to_docs(conn.execute(kind.select.where(kind.table.c.etag.is_(None))))
            for doc in docs:
                etag = self._new_etag(kind_name, doc)
                with self.engine.begin() as conn:
                    done += conn.execute(
                        kind.table.update()
                        .where(kind.table.c.id == doc["id"], kind.table.c.etag.is_(None))
                        .values(etag=etag)
                    ).rowcount
        return done
