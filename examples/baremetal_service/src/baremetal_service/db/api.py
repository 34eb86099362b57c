"""The data API: every read and write of the service's tables.

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
3. ``UPDATE ... SET ..., etag=:new WHERE id=:id AND etag=:read`` (through
   :func:`apimw.etag_db.cas_update`, plus the caller's lease/queue conditions) in a
   transaction that also inserts the event record; 0 rows means somebody else wrote
   in between: go back to 1 (where a stale If-Match now fails with 412).

So a conditional write is atomic with the check on every backend (one UPDATE
statement decides), and the etag is recomputed for every create and modify in
exactly one place (:func:`_new_etag`, from :mod:`baremetal_service.db.etags`).

Reads are single statements with joins (a 100-node page is one query).
"""

from __future__ import annotations

import builtins
import datetime as dt
import re
import uuid as uuidlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from apimw.errors import ApimwError
from apimw.etag import CanonicalizationError, ETagGenerator, IfMatch, parse_if_match
from apimw.etag_db import cas_update, is_retryable, write_attempts
from apimw.idempotency import ClientToken
from apimw.idempotency_db import (
    AlreadyCreated,
    TokenReused,
    check_token,
    purge_tokens,
    record_token,
    run_create,
)

from .. import exceptions as exc
from . import history, migrate
from .driver_select import DriverSelect, RowCode, with_source
from .driver_write import DriverWrite
from .engine import WalCheckpointer, create_engine
from .etags import make_generator
from .models import Chassis, Node, NodeEvent, Port, Portgroup, ResourceClass, UTCDateTime
from .models_client_tokens import ClientTokenRecord
from .models_collections_a import Allocation, ConductorRecord, DeployTemplate, Runbook
from .models_collections_b import InspectionRule, VolumeConnector, VolumeTarget

__all__ = [
    "INTERNAL_KEYS",
    "CreatedBefore",
    "Database",
    "IfMatchArg",
    "is_uuid_like",
    "public",
    "utcnow",
]

#: ``None`` (no precondition), the etag middleware's parsed :class:`apimw.etag.IfMatch`
#: (``environ["apimw.etag.if_match"]``), ``"*"`` / a raw header value, or a list of etags.
IfMatchArg = IfMatch | str | Sequence[str] | None

NODES: Final = cast(sa.Table, Node.__table__)
PORTS: Final = cast(sa.Table, Port.__table__)
PORTGROUPS: Final = cast(sa.Table, Portgroup.__table__)
CHASSIS: Final = cast(sa.Table, Chassis.__table__)
RESOURCE_CLASSES: Final = cast(sa.Table, ResourceClass.__table__)
EVENTS: Final = cast(sa.Table, NodeEvent.__table__)
ALLOCATIONS: Final = cast(sa.Table, Allocation.__table__)
DEPLOY_TEMPLATES: Final = cast(sa.Table, DeployTemplate.__table__)
RUNBOOKS: Final = cast(sa.Table, Runbook.__table__)
VOLUME_CONNECTORS: Final = cast(sa.Table, VolumeConnector.__table__)
VOLUME_TARGETS: Final = cast(sa.Table, VolumeTarget.__table__)
INSPECTION_RULES: Final = cast(sa.Table, InspectionRule.__table__)
CONDUCTORS: Final = cast(sa.Table, ConductorRecord.__table__)
CLIENT_TOKENS: Final = cast(sa.Table, ClientTokenRecord.__table__)

INTERNAL_KEYS: Final = frozenset(
    {"id", "chassis_id", "node_id", "portgroup_id", "reserved_at", "pending_action",
     "_owner", "_lessee"}
)  # fmt: skip
_INTERNAL_TUPLE: Final = tuple(INTERNAL_KEYS)
_EVENT_INSERT: Final = EVENTS.insert()
_EVENT_COLUMNS: Final = ["event_type", "resource_type", "resource_uuid", "payload", "created_at", "etag"]
#: Keys never copied into event payloads (secrets may live there).
#: (an inspection rule's conditions and actions may hold secrets: its ``sensitive`` flag)
_PAYLOAD_EXCLUDED: Final = INTERNAL_KEYS | {
    "driver_info", "driver_internal_info", "instance_info", "conditions", "actions",
}  # fmt: skip
MAX_WRITE_ATTEMPTS: Final = 20
#: First pause between write attempts (doubling, jittered: :func:`apimw.etag_db.write_attempts`).
WRITE_BACKOFF: Final = 0.002
MAX_LIMIT: Final = 1000
#: List statement shapes kept compiled (:meth:`Database.list`); beyond, built per call.
MAX_LIST_SHAPES: Final = 512

#: A list filter's shape (:meth:`Database.list`), its value a bound parameter:
#: ``("eq", column)`` (``eq_<column>``), ``("in", column, n)`` (``in_<column>_0``...),
#: ``("either", column, other)`` (either column equals ``either_<column>``),
#: ``("contains", column)`` (case-insensitive substring ``contains_<column>``, LIKE-escaped
#: with ``/`` by :func:`like_escaped`), ``("is", column, None | True | False)`` and
#: ``("is_not", column)`` (IS NOT NULL).
Filter = tuple[Any, ...]


def like_escaped(text: str) -> str:
    """*text* with LIKE's wildcards escaped by ``/`` (what SQLAlchemy's ``autoescape`` does)."""
    return text.replace("/", "//").replace("%", "/%").replace("_", "/_")


def _filter_clause(table: sa.Table, spec: Filter) -> sa.ColumnElement[bool]:
    op, name = spec[0], spec[1]
    col = table.c[name]
    if op == "eq":
        return col == sa.bindparam(f"eq_{name}")
    if op == "in":
        return col.in_([sa.bindparam(f"in_{name}_{i}") for i in range(spec[2])])
    if op == "either":
        either: sa.BindParameter[Any] = sa.bindparam(f"either_{name}")
        return sa.or_(col == either, table.c[spec[2]] == either)
    if op == "contains":
        return col.icontains(sa.bindparam(f"contains_{name}"), escape="/")
    if op == "is":
        return col.is_(spec[2])
    if op == "is_not":
        return col.is_not(None)
    raise ValueError(f"unknown list filter {spec!r}")


class CreatedBefore(Exception):  # noqa: N818 - an outcome, not an error
    """An earlier execution of this create (same client token, same request) made ``doc``.

    Raised by :meth:`Database.insert` after its transaction rolled back: the caller answers
    with ``doc`` (the resource as it is now) as the first execution did, without running
    its after-create steps again.
    """

    def __init__(self, doc: dict[str, Any]) -> None:
        super().__init__(doc.get("uuid"))
        self.doc = doc


def utcnow() -> dt.datetime:
    """Naive UTC with microseconds: what both backends store and give back unchanged."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


@with_source('None if _v_ is None else _v_.isoformat() + "+00:00"')
def iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat() + "+00:00"


@with_source(
    'None if _v_ is None else _v_[:10] + "T" + _v_[11:19]'
    ' + ("" if _v_[20:] == "000000" else _v_[19:]) + "+00:00"'
    ' if _v_.__class__ is str and len(_v_) == 26 and _v_[10] == " " and _v_[19] == "." else _p_(_v_)'
)
def sqlite_iso(value: Any) -> str | None:
    """A SQLite ``UTCDateTime`` column's text as the document's ISO 8601 string in one step
    (what its result processor, ``datetime.fromisoformat``, then :func:`iso` give).  Its
    source reads SQLAlchemy's storage format (``2026-11-22 10:37:50.208515``) as text:
    ``isoformat`` leaves out a zero microsecond; any other text is parsed."""
    return iso(dt.datetime.fromisoformat(value) if isinstance(value, str) else value)


#: A UUID in its canonical hyphenated form (any case): what ``str(UUID(v)) == v.lower()`` accepts.
_CANONICAL_UUID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
).fullmatch


def is_uuid_like(value: str) -> bool:
    """True for a UUID in canonical hyphenated form, any case (one regex match, no UUID object)."""
    return isinstance(value, str) and _CANONICAL_UUID(value) is not None


def public(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of *doc* without the internal keys."""
    out = dict(doc)
    for key in _INTERNAL_TUPLE:
        out.pop(key, None)
    return out


def _base_type(column: sa.ColumnElement[Any]) -> Any:
    kind = column.type
    return kind.impl if isinstance(kind, sa.types.TypeDecorator) else kind


class _Kind:
    """How one resource kind is read: the SELECT, its joins, datetime columns, errors."""

    def __init__(
        self,
        name: str,
        table: sa.Table,
        select: sa.Select[Any],
        not_found: Callable[..., exc.BaremetalError],
        *,
        has_name: bool,
        owner_cols: tuple[sa.ColumnElement[Any], sa.ColumnElement[Any]] | None,
        public_col: sa.ColumnElement[Any] | None = None,
    ) -> None:
        self.name = name
        self.table = table
        self.select = select
        self.not_found = not_found
        self.has_name = has_name
        self.owner_cols = owner_cols
        #: a boolean column: rows with it true are visible to every project (public runbooks)
        self.public_col = public_col
        self.datetimes = tuple(c.name for c in table.c if isinstance(_base_type(c), sa.DateTime))
        #: the datetime columns whose SQLite text :func:`sqlite_iso` reads
        self.sqlite_datetimes = tuple(c.name for c in table.c if isinstance(c.type, UTCDateTime))
        self.json_cols = frozenset(c.name for c in table.c if isinstance(_base_type(c), sa.JSON))
        self.columns = frozenset(c.name for c in table.c)
        #: document keys a read joins in from other tables (``chassis_uuid``, ``allocation_uuid``...)
        self.joined = tuple(c.key for c in select.selected_columns if c.key not in self.columns)
        #: VARCHAR limits, checked on every backend (SQLite would not enforce them).
        self.max_lengths = {
            c.name: int(c.type.length)
            for c in table.c
            if isinstance(c.type, sa.String) and not isinstance(c.type, sa.Text) and c.type.length
        }
        self._narrowed: dict[frozenset[str], sa.Select[Any]] = {}
        #: every column a create sets (all but ``id``), with its default: ``(name, value,
        #: callable or None)`` (a callable default, such as ``dict``, gives each row its own value)
        defaults: builtins.list[tuple[str, Any, Callable[[Any], Any] | None]] = []
        for column in table.c:
            if column.name in ("id", "etag"):
                continue
            default = column.default
            if default is not None and default.is_callable:
                defaults.append((column.name, None, default.arg))  # type: ignore[attr-defined]
            elif default is not None:
                defaults.append((column.name, default.arg, None))  # type: ignore[attr-defined]
            else:
                defaults.append((column.name, None, None))
        self.insert_defaults = tuple(defaults)
        #: the columns an INSERT of this kind names (all but the generated ``id``)
        self.insert_columns = [c.name for c in table.c if c.name != "id"]
        # Prebuilt lookups: bound parameters, so SQLAlchemy's compiled cache hits every time.
        scope: sa.ColumnElement[bool] | None = None
        if owner_cols is not None:
            project: sa.BindParameter[Any] = sa.bindparam("project")
            scope = self.scope_of(project)
        self.lookups: dict[tuple[str, bool], sa.Select[Any]] = {}
        for column in ("uuid", "name") if has_name else ("uuid",):
            stmt = select.where(table.c[column] == sa.bindparam("ident"))
            self.lookups[(column, False)] = stmt
            self.lookups[(column, True)] = stmt if scope is None else stmt.where(scope)
        self.sortable = frozenset(
            c.name for c in table.c
            if c.name not in self.json_cols and c.name not in INTERNAL_KEYS - {"id"}
        )  # fmt: skip

    def scope_of(self, project: Any) -> sa.ColumnElement[bool]:
        """The rows *project* may see (its owner or lessee columns, or public)."""
        assert self.owner_cols is not None  # noqa: S101 - only called for scoped kinds
        owner, lessee = self.owner_cols
        clauses = [owner == project] if owner is lessee else [owner == project, lessee == project]
        if self.public_col is not None:
            clauses.append(self.public_col.is_(True))
        return sa.or_(*clauses)

    def normalise_json(self, values: dict[str, Any]) -> dict[str, Any]:
        """JSON column values as the database gives them back (in place; returns *values*).

        PostgreSQL's JSONB stores numbers as ``numeric``: an integral float (``1e20``,
        ``4.0``) comes back as an int.  Converting before the write keeps the document
        we return, the etag we compute and every later read identical on both backends.
        NUL characters, which PostgreSQL cannot store in text or JSONB, and strings
        longer than their column are refused on both backends alike (400).
        """
        for key, value in values.items():
            if value.__class__ is str:
                if "\x00" in value:
                    raise exc.InvalidParameterValue(
                        f"The {key} of a {self.name} cannot contain NUL characters"
                    )
                limit = self.max_lengths.get(key)
                if limit is not None and len(value) > limit:
                    raise exc.InvalidParameterValue(
                        f"The {key} of a {self.name} is longer than {limit} characters"
                    )
        for key in self.json_cols:
            value = values.get(key)
            if value is not None:
                values[key] = _integral_floats_as_ints(value, key, self.name)
        return values

    def narrowed(self, fields: Iterable[str]) -> sa.Select[Any]:
        """The SELECT of this kind restricted to *fields* (and ``uuid``, ``id``)."""
        wanted = frozenset(fields) | {"uuid", "id"}
        stmt = self._narrowed.get(wanted)
        if stmt is None:
            columns = [c for c in self.select.selected_columns if c.key in wanted]
            stmt = self.select.with_only_columns(*columns)
            if len(self._narrowed) < 256:
                self._narrowed[wanted] = stmt
        return stmt

    def fused_posts(self, dialect: str) -> dict[str, Callable[[Any], Any]] | None:
        """Per datetime column, :func:`sqlite_iso` on SQLite (:class:`.driver_select.DriverSelect`'s
        *fused*: the column's processing and :meth:`iso_posts` in one step); None elsewhere."""
        if dialect != "sqlite":
            return None
        return dict.fromkeys(self.sqlite_datetimes, sqlite_iso)

    def iso_posts(self) -> dict[str, Callable[[Any], Any]]:
        """Per datetime column, the step that makes a read value the document's ISO string
        (what :meth:`to_doc` does), for :class:`.driver_select.DriverSelect`'s *post*."""
        return dict.fromkeys(self.datetimes, iso)

    def to_doc(self, row: Any) -> dict[str, Any]:
        doc: dict[str, Any] = dict(row)
        for key in self.datetimes:
            value = doc.get(key)
            if value is not None:
                doc[key] = value.isoformat() + "+00:00"
        return doc

    def to_docs(self, result: sa.CursorResult[Any], *, internal: bool) -> builtins.list[dict[str, Any]]:
        """Every row of *result* as a document (without the internal keys unless *internal*)."""
        keys = tuple(result.keys())
        dates = [k for k in keys if k in self.datetimes]
        drop = () if internal else [k for k in keys if k in INTERNAL_KEYS]
        docs = []
        for row in result.all():
            doc = dict(zip(keys, row, strict=True))
            for key in dates:
                value = doc[key]
                if value is not None:
                    doc[key] = value.isoformat() + "+00:00"
            for key in drop:
                del doc[key]
            docs.append(doc)
        return docs


_NODE_SELECT = sa.select(
    NODES, CHASSIS.c.uuid.label("chassis_uuid"), ALLOCATIONS.c.uuid.label("allocation_uuid")
).select_from(
    NODES.outerjoin(CHASSIS, NODES.c.chassis_id == CHASSIS.c.id).outerjoin(
        ALLOCATIONS, ALLOCATIONS.c.node_id == NODES.c.id  # unique: at most one row
    )
)
_PORT_SELECT = sa.select(
    PORTS,
    NODES.c.uuid.label("node_uuid"),
    PORTGROUPS.c.uuid.label("portgroup_uuid"),
    NODES.c.owner.label("_owner"),
    NODES.c.lessee.label("_lessee"),
).select_from(
    PORTS.join(NODES, PORTS.c.node_id == NODES.c.id).outerjoin(
        PORTGROUPS, PORTS.c.portgroup_id == PORTGROUPS.c.id
    )
)
_PORTGROUP_SELECT = sa.select(
    PORTGROUPS,
    NODES.c.uuid.label("node_uuid"),
    NODES.c.owner.label("_owner"),
    NODES.c.lessee.label("_lessee"),
).select_from(PORTGROUPS.join(NODES, PORTGROUPS.c.node_id == NODES.c.id))
_CHASSIS_SELECT = sa.select(CHASSIS)
_ALLOCATION_SELECT = sa.select(ALLOCATIONS, NODES.c.uuid.label("node_uuid")).select_from(
    ALLOCATIONS.outerjoin(NODES, ALLOCATIONS.c.node_id == NODES.c.id)
)

def _node_child_select(table: sa.Table) -> sa.Select[Any]:
    """A node-bound resource with its node's uuid and the node's owner/lessee (scoping)."""
    return sa.select(
        table,
        NODES.c.uuid.label("node_uuid"),
        NODES.c.owner.label("_owner"),
        NODES.c.lessee.label("_lessee"),
    ).select_from(table.join(NODES, table.c.node_id == NODES.c.id))


KINDS: Final[dict[str, _Kind]] = {
    "node": _Kind("node", NODES, _NODE_SELECT, exc.NodeNotFound, has_name=True,
                  owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "port": _Kind("port", PORTS, _PORT_SELECT, exc.PortNotFound, has_name=True,
                  owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "portgroup": _Kind("portgroup", PORTGROUPS, _PORTGROUP_SELECT, exc.PortgroupNotFound,
                       has_name=True, owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "chassis": _Kind("chassis", CHASSIS, _CHASSIS_SELECT, exc.ChassisNotFound, has_name=False,
                     owner_cols=None),
    "allocation": _Kind("allocation", ALLOCATIONS, _ALLOCATION_SELECT, exc.AllocationNotFound,
                        has_name=True, owner_cols=(ALLOCATIONS.c.owner, ALLOCATIONS.c.owner)),
    "deploy_template": _Kind("deploy_template", DEPLOY_TEMPLATES, sa.select(DEPLOY_TEMPLATES),
                             exc.DeployTemplateNotFound, has_name=True, owner_cols=None),
    # a project sees its own runbooks and the public ones
    "runbook": _Kind("runbook", RUNBOOKS, sa.select(RUNBOOKS), exc.RunbookNotFound, has_name=True,
                     owner_cols=(RUNBOOKS.c.owner, RUNBOOKS.c.owner), public_col=RUNBOOKS.c.public),
    "volume_connector": _Kind("volume_connector", VOLUME_CONNECTORS,
                              _node_child_select(VOLUME_CONNECTORS), exc.VolumeConnectorNotFound,
                              has_name=False, owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "volume_target": _Kind("volume_target", VOLUME_TARGETS, _node_child_select(VOLUME_TARGETS),
                           exc.VolumeTargetNotFound, has_name=False,
                           owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "inspection_rule": _Kind("inspection_rule", INSPECTION_RULES, sa.select(INSPECTION_RULES),
                             exc.InspectionRuleNotFound, has_name=False, owner_cols=None),
}  # fmt: skip

#: Node list filters that are column equalities (:meth:`Database.list_nodes`).
_NODE_EQUALS: Final = {
    name: NODES.c[name]
    for name in ("provision_state", "driver", "resource_class", "conductor_group", "owner", "lessee",
                 "shard", "fault", "instance_uuid", "instance_name")
}  # fmt: skip
#: Every node list filter :meth:`Database.list_nodes` takes.
NODE_FILTERS: Final = frozenset(
    {*_NODE_EQUALS, "maintenance", "retired", "associated", "chassis_uuid", "description_contains",
     "project", "parent_node", "children", "sharded"}
)
#: Volume rules (Ironic's): a connector or target changes only while its node is powered off,
#: and is deleted only while it is off or enroll, manageable or adopt failed.
POWER_OFF: Final = "power off"
VOLUME_DELETE_STATES: Final = ("manageable", "enroll", "adopt failed")


def _node_powered_off(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.exists().where(NODES.c.id == table.c.node_id, NODES.c.power_state == POWER_OFF)


def _node_deletable(table: sa.Table) -> sa.ColumnElement[bool]:
    return sa.exists().where(
        NODES.c.id == table.c.node_id,
        sa.or_(NODES.c.power_state == POWER_OFF, NODES.c.provision_state.in_(VOLUME_DELETE_STATES)),
    )


#: Named conditions a write may carry (``update(..., conditions=("node_powered_off",))``): the
#: state they check is decided by the same UPDATE/DELETE statement, so it cannot change between
#: the check and the write (a node powered on meanwhile makes the write retry, then fail).
CONDITIONS: Final[dict[str, Callable[[sa.Table], sa.ColumnElement[bool]]]] = {
    "node_powered_off": _node_powered_off,
    "node_deletable": _node_deletable,
}

#: Reference fields in documents -> (db column, referenced kind).
_REFS: Final[dict[str, dict[str, tuple[str, str]]]] = {
    "node": {"chassis_uuid": ("chassis_id", "chassis")},
    "port": {"node_uuid": ("node_id", "node"), "portgroup_uuid": ("portgroup_id", "portgroup")},
    "portgroup": {"node_uuid": ("node_id", "node")},
    "chassis": {},
    "allocation": {"node_uuid": ("node_id", "node")},
    "deploy_template": {},
    "runbook": {},
    "volume_connector": {"node_uuid": ("node_id", "node")},
    "volume_target": {"node_uuid": ("node_id", "node")},
    "inspection_rule": {},
}

#: Which unique constraint -> which 409.
_DUPLICATES: Final[dict[tuple[str, str], Callable[[Any], exc.BaremetalError]]] = {
    ("nodes", "uuid"): exc.NodeUuidExists,
    ("nodes", "name"): exc.NodeNameExists,
    ("nodes", "instance_uuid"): lambda v: exc.InstanceAssociated(v, "(new)"),
    ("ports", "uuid"): exc.PortUuidExists,
    ("ports", "address"): exc.MACAlreadyExists,
    ("ports", "name"): exc.PortNameExists,
    ("portgroups", "uuid"): exc.PortgroupUuidExists,
    ("portgroups", "name"): exc.PortgroupNameExists,
    ("portgroups", "address"): exc.PortgroupMACExists,
    ("chassis", "uuid"): exc.ChassisUuidExists,
    ("resource_classes", "name"): exc.ResourceClassExists,
    ("allocations", "uuid"): exc.AllocationDuplicate,
    ("allocations", "name"): exc.AllocationDuplicate,
    ("allocations", "node_id"): exc.AllocationNodeTaken,
    ("deploy_templates", "uuid"): exc.DeployTemplateDuplicate,
    ("deploy_templates", "name"): exc.DeployTemplateDuplicate,
    ("runbooks", "uuid"): exc.RunbookDuplicate,
    ("runbooks", "name"): exc.RunbookDuplicate,
    ("volume_connectors", "uuid"): exc.VolumeConnectorUuidExists,
    ("volume_connectors", "type"): exc.VolumeConnectorTypeAndIdExists,  # (type, connector_id)
    ("volume_targets", "uuid"): exc.VolumeTargetUuidExists,
    ("volume_targets", "boot_index"): exc.VolumeTargetBootIndexExists,  # (boot_index, node_id)
    ("inspection_rules", "uuid"): exc.InspectionRuleUuidExists,
}
#: Unique constraints over several columns whose 409 names them all: built from the document.
_DUPLICATE_DOCS: Final = frozenset({("volume_connectors", "type")})


def _unique_violation(error: sa.exc.IntegrityError) -> tuple[str, str] | None:
    """``(table, column)`` of the unique constraint *error* is about, on either backend."""
    text = str(error.orig)
    for table, column in _DUPLICATES:
        if f"uniq_{table}0{column}" in text or f"{table}.{column}" in text:
            return table, column
    return None


#: Reference columns -> the API field a client sets (a NOT NULL violation names the column).
_FIELD_OF_COLUMN: Final = {
    "node_id": "node_uuid",
    "chassis_id": "chassis_uuid",
    "portgroup_id": "portgroup_uuid",
}
_DATA_ERROR: Final = "a value does not fit its database column (wrong type, out of range or too long)."
_NOT_NULL = (
    re.compile(r"NOT NULL constraint failed: \w+\.(\w+)"),  # SQLite
    re.compile(r'null value in column "(\w+)"'),  # PostgreSQL
)


def _not_null_violation(error: sa.exc.IntegrityError) -> str | None:
    """The column of the NOT NULL constraint *error* is about, on either backend."""
    text = str(error.orig)
    for pattern in _NOT_NULL:
        found = pattern.search(text)
        if found:
            return found.group(1)
    return None


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


def _event_payload(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in _PAYLOAD_EXCLUDED}


class Database:
    """The service's database: engine, migrations and the data API."""

    def __init__(
        self,
        url: str,
        *,
        etag_generator: ETagGenerator | None = None,
        pool_size: int = 10,
        echo: bool = False,
        fast_reads: bool = True,
        fast_writes: bool = True,
        background_checkpoints: bool = True,
    ) -> None:
        """*fast_reads*: one-row lookups (:meth:`get`, and the read before each write) and lists
        (:meth:`list`) on the driver's cursor with statements compiled once
        (:mod:`.driver_select`); ``False`` reads through SQLAlchemy Core.  *fast_writes*: the
        fixed-shape statements of :meth:`insert`, :meth:`update` and :meth:`delete` (and the event
        record) compiled once and run on the driver's cursor in the same transaction
        (:mod:`.driver_write`); ``False`` builds and runs them through SQLAlchemy Core.
        *background_checkpoints* (SQLite): the WAL is checkpointed by a thread of its own
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
        self.fast_reads = fast_reads
        self.fast_writes = fast_writes
        self._driver_lookups: dict[tuple[str, str, bool], DriverSelect] = {}
        #: :meth:`get_row`'s lookups (without the internal columns, datetimes as ISO strings)
        self._row_lookups: dict[tuple[str, str, bool], DriverSelect] = {}
        self._driver_writes: dict[Any, DriverWrite] = {}
        #: list statements by shape (:meth:`list`): the Core statement and its driver form
        self._list_queries: dict[tuple[Any, ...], tuple[sa.Select[Any], DriverSelect]] = {}
        self._marker_queries: dict[tuple[str, str, bool], tuple[sa.Select[Any], DriverSelect]] = {}
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
    ) -> dict[str, Any]:
        kind = KINDS[kind_name]
        column, ident_value = self._lookup_column(kind, ident, status)
        stmt = kind.lookups[(column, project_id is not None)]
        row = conn.execute(stmt, {"ident": ident_value, "project": project_id}).first()
        if row is None:
            raise kind.not_found(ident, status=status)
        return kind.to_doc(row._mapping)

    def _lookup_column(self, kind: _Kind, ident: str, status: int | None = None) -> tuple[str, str]:
        """The column *ident* is looked up by (``uuid`` or ``name``) and the value; NotFound if none."""
        if not isinstance(ident, str) or "\x00" in ident:
            # No row can hold a NUL (writes refuse it), and PostgreSQL cannot even compare with one.
            raise kind.not_found(ident, status=status)
        if is_uuid_like(ident):
            return "uuid", ident.lower()
        if kind.has_name:
            return "name", ident
        raise kind.not_found(ident, status=status)

    def _fetch_fast(self, kind_name: str, ident: str, project_id: str | None) -> dict[str, Any]:
        """:meth:`_fetch` on the driver's cursor (:class:`.driver_select.DriverSelect`)."""
        kind = KINDS[kind_name]
        column, value = self._lookup_column(kind, ident)
        scoped = project_id is not None
        query = self._driver_lookups.get((kind_name, column, scoped))
        if query is None:
            query = DriverSelect(self.engine, kind.lookups[(column, scoped)])
            self._driver_lookups[(kind_name, column, scoped)] = query
        rows = query.rows({"ident": value, "project": project_id}, limit=1)
        if not rows:
            raise kind.not_found(ident)
        return kind.to_doc(rows[0])

    def get(
        self, kind: str, ident: str, *, project_id: str | None = None, internal: bool = True
    ) -> dict[str, Any]:
        """One resource by UUID (or name, for nodes, ports, portgroups); NotFound otherwise."""
        if self.fast_reads:
            doc = self._fetch_fast(kind, ident, project_id)
        else:
            with self.reader.connect() as conn:
                doc = self._fetch(conn, kind, ident, project_id)
        if not internal:
            for key in _INTERNAL_TUPLE:
                doc.pop(key, None)
        return doc

    def get_row(
        self, kind_name: str, ident: str, *, project_id: str | None = None
    ) -> tuple[RowCode, Any] | None:
        """:meth:`get` (``internal=False``) as the driver fetched the row: ``(code, row)``, *code*
        (:class:`.driver_select.RowCode`, one per lookup statement) saying how the raw row's
        columns become the document's values, as :meth:`list_rows` does for a page.  NotFound as
        :meth:`get`; None without *fast_reads* (use :meth:`get`)."""
        if not self.fast_reads:
            return None
        kind = KINDS[kind_name]
        column, value = self._lookup_column(kind, ident)
        scoped = project_id is not None
        key = (kind_name, column, scoped)
        query = self._row_lookups.get(key)
        if query is None:
            stmt = kind.lookups[(column, scoped)]
            stmt = stmt.with_only_columns(*(c for c in stmt.selected_columns if c.key not in INTERNAL_KEYS))
            fused = kind.fused_posts(self.engine.dialect.name)
            query = self._row_lookups[key] = DriverSelect(self.engine, stmt, kind.iso_posts(), fused)
        rows = query.raw_first({"ident": value, "project": project_id})
        if not rows:
            raise kind.not_found(ident)
        return query.code, rows[0]

    def _current(self, kind_name: str, ident: str, project_id: str | None) -> dict[str, Any]:
        """The document a write starts from (:meth:`get` with its internal keys)."""
        if self.fast_reads:
            return self._fetch_fast(kind_name, ident, project_id)
        with self.reader.connect() as conn:
            return self._fetch(conn, kind_name, ident, project_id)

    def get_by_id(self, kind_name: str, row_id: int) -> dict[str, Any] | None:
        kind = KINDS[kind_name]
        with self.reader.connect() as conn:
            row = conn.execute(kind.select.where(kind.table.c.id == row_id)).mappings().first()
        return None if row is None else kind.to_doc(row)

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
        with every value a bound parameter, the LIMIT too; with *fast_reads* it runs on
        the driver's cursor (:class:`.driver_select.DriverSelect`), else through Core.
        A statement with *where* conditions is built for the call and runs through Core.
        """
        kind = KINDS[kind_name]
        key, bound = self._list_shape(kind, filters, equals, project_id, limit, marker, sort_key, sort_dir,
                                      fields, internal, params)  # fmt: skip
        if where:
            stmt = self._list_stmt(kind, key).where(*where)
            with self.reader.connect() as conn:
                return kind.to_docs(conn.execute(stmt, bound), internal=internal)
        shaped = self._list_query(kind, key)
        if self.fast_reads:
            return shaped[1].rows(bound)
        with self.reader.connect() as conn:
            return kind.to_docs(conn.execute(shaped[0], bound), internal=internal)

    def list_rows(
        self,
        kind_name: str,
        *,
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
    ) -> tuple[RowCode, builtins.list[Any]] | None:
        """:meth:`list`'s page as the driver fetched it: ``(code, rows)``, where *code*
        (:class:`.driver_select.RowCode`, one per statement shape) says, as Python source,
        how each raw row's columns become the values :meth:`list` would give (the API
        compiles its list renderer from it).  None without *fast_reads* (use :meth:`list`)."""
        if not self.fast_reads:
            return None
        kind = KINDS[kind_name]
        key, bound = self._list_shape(kind, filters, equals, project_id, limit, marker, sort_key, sort_dir,
                                      fields, internal, params)  # fmt: skip
        query = self._list_query(kind, key)[1]
        return query.code, query.raw(bound)

    def _list_shape(
        self,
        kind: _Kind,
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

    def _list_query(self, kind: _Kind, key: tuple[Any, ...]) -> tuple[sa.Select[Any], DriverSelect]:
        """The list statement of shape *key* and its driver form, compiled once per shape."""
        shaped = self._list_queries.get(key)
        if shaped is None:
            stmt = self._list_stmt(kind, key)
            fused = kind.fused_posts(self.engine.dialect.name)
            shaped = (stmt, DriverSelect(self.engine, stmt, kind.iso_posts(), fused))
            if len(self._list_queries) < MAX_LIST_SHAPES:
                self._list_queries[key] = shaped
        return shaped

    def _marker(self, kind: _Kind, sort_key: str, marker: str, project_id: str | None) -> tuple[Any, int]:
        """(sort value, id) of the *marker* row; NotFound if it is not one the caller sees."""
        if not is_uuid_like(marker):
            raise kind.not_found(marker)
        key = (kind.name, sort_key, project_id is not None)
        shaped = self._marker_queries.get(key)
        if shaped is None:
            stmt = kind.select.with_only_columns(kind.table.c[sort_key], kind.table.c.id).where(
                kind.table.c.uuid == sa.bindparam("ident")
            )
            if project_id is not None:
                stmt = stmt.where(kind.scope_of(sa.bindparam("project")))
            shaped = self._marker_queries[key] = (stmt, DriverSelect(self.engine, stmt))
        bound = {"ident": marker.lower(), "project": project_id}
        row: Any
        if self.fast_reads:
            rows = shaped[1].tuples(bound, limit=1)
            row = rows[0] if rows else None
        else:
            with self.reader.connect() as conn:
                row = conn.execute(shaped[0], bound).first()
        if row is None:
            raise kind.not_found(marker)
        return row[0], row[1]

    @staticmethod
    def _list_stmt(kind: _Kind, key: tuple[Any, ...]) -> sa.Select[Any]:
        """The list statement of shape *key* (see :meth:`list`), values as bound parameters."""
        _name, filters, scoped, after, sort_key, sort_dir, fields, internal = key
        table = kind.table
        stmt = kind.select if fields is None else kind.narrowed(fields)
        if not internal:
            stmt = stmt.with_only_columns(*(c for c in stmt.selected_columns if c.key not in INTERNAL_KEYS))
        stmt = stmt.where(*(_filter_clause(table, f) for f in filters))
        if scoped:
            stmt = stmt.where(kind.scope_of(sa.bindparam("project")))
        col = table.c[sort_key]
        if after is not None:
            value: Any = None if after[1] else sa.bindparam("m_value")
            stmt = stmt.where(_after(col, table.c.id, value, sa.bindparam("m_id"), sort_dir))
        if sort_dir == "asc":
            order = [col.asc().nulls_first(), table.c.id.asc()]
        else:
            order = [col.desc().nulls_last(), table.c.id.desc()]
        if sort_key == "id":
            order = order[1:]
        return stmt.order_by(*order).limit(sa.bindparam("limit", type_=sa.Integer))

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
        shape, params = self._node_filters(filters)
        return self.list(
            "node", filters=shape, params=params, project_id=project_id, limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=fields, internal=internal,
        )  # fmt: skip

    def list_node_rows(
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
    ) -> tuple[RowCode, builtins.list[Any]] | None:
        """:meth:`list_nodes` as :meth:`list_rows` gives it (None without *fast_reads*)."""
        if not self.fast_reads:
            return None
        shape, params = self._node_filters(filters)
        return self.list_rows(
            "node", filters=shape, params=params, project_id=project_id, limit=limit, marker=marker,
            sort_key=sort_key, sort_dir=sort_dir, fields=fields, internal=internal,
        )  # fmt: skip

    def _node_filters(
        self, filters: Mapping[str, Any] | None
    ) -> tuple[builtins.list[Filter], dict[str, Any]]:
        """Ironic's node list *filters* as :meth:`list`'s filter shapes and their values."""
        shape: builtins.list[Filter] = []
        params: dict[str, Any] = {}
        for name, value in (filters or {}).items():
            if value is None:
                continue
            if name == "shard" and isinstance(value, list):  # Ironic takes a comma-separated list
                shape.append(("in", "shard", len(value)))
                params.update({f"in_shard_{i}": v for i, v in enumerate(value)})
            elif name in _NODE_EQUALS or name == "parent_node":
                shape.append(("eq", name))
                params[f"eq_{name}"] = value
            elif name == "project":  # Ironic: owner or lessee
                shape.append(("either", "owner", "lessee"))
                params["either_owner"] = value
            elif name == "children":  # False: only nodes without a parent (Ironic's default)
                if not value:
                    shape.append(("is", "parent_node", None))
            elif name == "sharded":
                shape.append(("is_not", "shard") if value else ("is", "shard", None))
            elif name in ("maintenance", "retired"):
                shape.append(("is", name, bool(value)))
            elif name == "associated":
                shape.append(("is_not", "instance_uuid") if value else ("is", "instance_uuid", None))
            elif name == "chassis_uuid":
                shape.append(("eq", "chassis_id"))
                params["eq_chassis_id"] = self.get("chassis", str(value))["id"]
            elif name == "description_contains":
                shape.append(("contains", "description"))
                params["contains_description"] = like_escaped(str(value))
            else:
                raise exc.InvalidParameterValue(f"Unknown node filter {name!r}")
        return shape, params

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
            column, ref_kind = _REFS[kind][key]
            if value is None:
                columns[column] = docs[key] = None
                continue
            ref = self._fetch(conn, ref_kind, str(value), project_id, status=400)
            columns[column] = ref["id"]
            docs[key] = ref["uuid"]
        return columns, docs

    def _db_values(self, kind: _Kind, values: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in values.items():
            if key in kind.datetimes and isinstance(value, str):
                value = dt.datetime.fromisoformat(value).replace(tzinfo=None)
            if key in kind.columns:
                out[key] = value
        return out

    def _doc_values(self, kind: _Kind, values: Mapping[str, Any]) -> dict[str, Any]:
        return {
            k: (iso(v) if k in kind.datetimes and isinstance(v, dt.datetime) else v)
            for k, v in values.items()
        }

    def _raise_integrity(self, kind: str, error: sa.exc.IntegrityError, values: Mapping[str, Any]) -> None:
        found = _unique_violation(error)
        if found is not None:
            table, column = found
            value = values.get(column)
            if (table, column) == ("nodes", "instance_uuid"):
                raise exc.InstanceAssociated(str(value), str(values.get("uuid"))) from None
            raise _DUPLICATES[found](values if found in _DUPLICATE_DOCS else value) from None
        if kind == "chassis":
            raise exc.ChassisNotEmpty(str(values.get("uuid"))) from None
        if kind == "portgroup":
            raise exc.PortgroupNotEmpty(str(values.get("uuid"))) from None
        column = _not_null_violation(error)
        if column is not None:
            field = _FIELD_OF_COLUMN.get(column, column)
            raise exc.InvalidParameterValue(
                f"Missing mandatory field {field!r} of a {kind}: it cannot be removed or null.",
                field=field,
            ) from None
        # Never the driver's text: it quotes SQL, table names and sometimes the input.
        raise exc.InvalidParameterValue(f"Invalid {kind}: the values break a database constraint.") from None

    def _event(
        self,
        conn: Connection,
        kind: str,
        doc: Mapping[str, Any],
        event_type: str,
        etag: str | None,
        now: dt.datetime,
    ) -> None:
        values = {
            "event_type": event_type,
            "resource_type": kind,
            "resource_uuid": doc["uuid"],
            "payload": _event_payload(doc),
            "created_at": now,
            "etag": etag,
        }
        if self.fast_writes:
            self._driver_write(("event",), lambda: (EVENTS.insert(), _EVENT_COLUMNS)).run(conn, values)
        else:
            conn.execute(_EVENT_INSERT, values)

    def _driver_write(
        self,
        key: Any,
        build: Callable[[], tuple[sa.Insert | sa.Update | sa.Delete, builtins.list[str] | None]],
        *,
        returning_id: bool = False,
    ) -> DriverWrite:
        """The :class:`.driver_write.DriverWrite` of one statement shape, compiled on first use
        (*build* gives the statement and the columns it sets)."""
        write = self._driver_writes.get(key)
        if write is None:
            stmt, column_keys = build()
            write = DriverWrite(
                self.engine.dialect, stmt, column_keys=column_keys, returning_id=returning_id
            )
            if len(self._driver_writes) < 1024:  # update shapes: bounded by the callers' change sets
                self._driver_writes[key] = write
        return write

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
        refs_of = _REFS[kind_name]
        row.update({k: v for k, v in values.items() if k not in refs_of})
        kind.normalise_json(row)
        row["uuid"] = str(row.get("uuid") or uuidlib.uuid4()).lower()
        row["created_at"] = now
        row["updated_at"] = None
        refs = {k: values.get(k) for k in _REFS[kind_name]}

        def once(conn: Connection) -> dict[str, Any]:
            if token is not None:  # first: a retry stops here, before any other check
                record_token(conn, CLIENT_TOKENS, token, kind=kind_name, resource_id=row["uuid"])
            columns, ref_docs = self._resolve_refs(conn, kind_name, refs, project_id)
            doc = {**self._doc_values(kind, row), **ref_docs}
            for key in kind.joined:  # what a read joins in (a new node has no allocation yet)
                doc.setdefault(key, None)
            etag = self._new_etag(kind_name, doc)
            db_row = {**self._db_values(kind, row), **columns, "etag": etag}
            if self.fast_writes:
                new_id: Any = self._driver_write(
                    ("insert", kind_name), lambda: self._insert_statement(kind), returning_id=True
                ).run(conn, db_row)
            else:
                inserted = conn.execute(kind.table.insert(), db_row).inserted_primary_key
                new_id = inserted[0] if inserted is not None else None
            doc.update(columns, id=new_id, etag=etag)
            self._event(conn, kind_name, doc, f"baremetal.{kind_name}.create.end", etag, now)
            return doc

        try:
            # a transaction of its own, run again after a serialization failure or deadlock
            # (REPEATABLE READ / SERIALIZABLE): the retry then finds a concurrent token's row
            doc = run_create(self.engine, once, retries=MAX_WRITE_ATTEMPTS - 1, backoff=WRITE_BACKOFF)
        except sa.exc.IntegrityError as error:
            self._raise_integrity(kind_name, error, row)
        except sa.exc.DataError:
            raise exc.InvalidParameterValue(f"Invalid {kind_name}: {_DATA_ERROR}") from None
        except AlreadyCreated as done:
            raise CreatedBefore(self._created_before(kind_name, done, token)) from None
        return doc

    def _insert_statement(self, kind: _Kind) -> tuple[sa.Insert, builtins.list[str]]:
        """``INSERT`` of every column but ``id`` (PostgreSQL: ``RETURNING id``; SQLite: lastrowid)."""
        stmt = kind.table.insert()
        if self.engine.dialect.name == "postgresql":
            stmt = stmt.returning(kind.table.c.id)
        return stmt, kind.insert_columns

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
        where: Sequence[sa.ColumnElement[bool]] = (),
        conditions: Sequence[str] = (),
        on_conflict: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Change one resource: *mutate* gets the current document and returns the changes.

        Returns the new document.  ``mutate`` may raise a domain error (it sees the
        current state) and is called again if a concurrent write won the race.  An
        empty change set writes nothing (no etag change, no event).  *match* (column ->
        value, ``None`` meaning IS NULL), *conditions* (names in :data:`CONDITIONS`) and
        *where* (SQL, for the data API's own callers) add conditions to the UPDATE;
        when they fail, *on_conflict* (given the current document) may raise a precise
        error before the next attempt.

        The write itself is :func:`apimw.etag_db.cas_update` (``UPDATE ... WHERE id AND
        match AND etag IN (:read)``) in the transaction that also records the event;
        only writes with arbitrary *where* conditions build their own statement.
        """
        kind = KINDS[kind_name]
        where = [*where, *(CONDITIONS[name](kind.table) for name in conditions)]
        for _attempt in write_attempts(MAX_WRITE_ATTEMPTS - 1, WRITE_BACKOFF):
            current = self._current(kind_name, ident, project_id)
            if not _matches(if_match, current["etag"]):
                raise exc.PreconditionFailed(kind_name, ident)
            changes = mutate(dict(current))
            if not changes:
                return current
            changes = kind.normalise_json(dict(changes))
            now = utcnow()
            doc = {**current, **self._doc_values(kind, changes), "updated_at": iso(now)}
            try:
                with self.engine.begin() as conn:
                    refs = {k: v for k, v in changes.items() if k in _REFS[kind_name]}
                    columns, ref_docs = self._resolve_refs(conn, kind_name, refs, project_id)
                    doc.update(columns)
                    doc.update(ref_docs)
                    etag = self._new_etag(kind_name, doc)
                    values = {**self._db_values(kind, changes), **columns}
                    values.update(updated_at=now, etag=etag)
                    table = kind.table
                    if self.fast_writes and not where and current["etag"] is not None:
                        if self._cas_write(conn, kind_name, "update", current, match, values) != 1:
                            raise _LostRace
                    elif where or current["etag"] is None:
                        stmt = table.update().where(
                            table.c.id == current["id"],
                            _etag_is(table, current["etag"]),
                            *(table.c[k] == v for k, v in (match or {}).items()),
                            *where,
                        )
                        if conn.execute(stmt, values).rowcount != 1:
                            raise _LostRace
                    else:
                        key = {"id": current["id"], **(match or {})}
                        outcome = cas_update(conn, table, key, values, expected=(current["etag"],))
                        if outcome != "updated":
                            raise _LostRace
                    doc["etag"] = etag
                    self._event(
                        conn,
                        kind_name,
                        doc,
                        event_type or f"baremetal.{kind_name}.update.end",
                        etag,
                        now,
                    )
                    if kind_name == "node":  # a new last_error is a history entry (Ironic's)
                        history.record(conn, current, changes, now)
                    return doc
            except _LostRace:
                pass
            except sa.exc.IntegrityError as error:
                self._raise_integrity(kind_name, error, {**current, **changes})
            except sa.exc.DataError:
                raise exc.InvalidParameterValue(f"Invalid {kind_name}: {_DATA_ERROR}") from None
            except sa.exc.DBAPIError as error:
                if not is_retryable(error):
                    raise
            if on_conflict is not None:
                on_conflict(self._current(kind_name, ident, project_id))
        raise exc.Conflict(f"The {kind_name} {ident} is being modified concurrently; please retry.")

    def delete(
        self,
        kind_name: str,
        ident: str,
        *,
        check: Callable[[dict[str, Any]], None] | None = None,
        if_match: IfMatchArg = None,
        project_id: str | None = None,
        match: Mapping[str, Any] | None = None,
        where: Sequence[sa.ColumnElement[bool]] = (),
        conditions: Sequence[str] = (),
        on_conflict: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Delete one resource (and a node's ports and portgroups) with the same CAS rules."""
        kind = KINDS[kind_name]
        table = kind.table
        where = [*where, *(CONDITIONS[name](table) for name in conditions)]
        for _attempt in write_attempts(MAX_WRITE_ATTEMPTS - 1, WRITE_BACKOFF):
            current = self._current(kind_name, ident, project_id)
            if not _matches(if_match, current["etag"]):
                raise exc.PreconditionFailed(kind_name, ident)
            if check is not None:
                check(current)
            now = utcnow()
            try:
                with self.engine.begin() as conn:
                    if self.fast_writes and not where and current["etag"] is not None:
                        if kind_name == "node":
                            node_id = {"node_id": current["id"]}
                            self._driver_write(("delete-of-node", "port"), _delete_of_node(PORTS)).run(
                                conn, node_id
                            )
                            self._driver_write(
                                ("delete-of-node", "portgroup"), _delete_of_node(PORTGROUPS)
                            ).run(conn, node_id)
                        if self._cas_write(conn, kind_name, "delete", current, match, None) != 1:
                            raise _LostRace
                    else:
                        if kind_name == "node":
                            conn.execute(PORTS.delete().where(PORTS.c.node_id == current["id"]))
                            conn.execute(PORTGROUPS.delete().where(PORTGROUPS.c.node_id == current["id"]))
                        stmt = table.delete().where(
                            table.c.id == current["id"],
                            _etag_is(table, current["etag"]),
                            *(table.c[k] == v for k, v in (match or {}).items()),
                            *where,
                        )
                        if conn.execute(stmt).rowcount != 1:
                            raise _LostRace
                    self._event(
                        conn,
                        kind_name,
                        current,
                        f"baremetal.{kind_name}.delete.end",
                        current["etag"],
                        now,
                    )
                    return current
            except _LostRace:
                pass
            except sa.exc.IntegrityError as error:
                self._raise_integrity(kind_name, error, current)
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
        verb: str,
        current: Mapping[str, Any],
        match: Mapping[str, Any] | None,
        values: Mapping[str, Any] | None,
    ) -> int:
        """``UPDATE`` (*values*) or ``DELETE`` (``values=None``) of *current*'s row ``WHERE id
        AND etag = :read AND`` *match* (``None`` meaning IS NULL), on the driver's cursor in
        *conn*'s transaction; the matched row count (1 when the compare-and-swap held)."""
        match = match or {}
        nulls = tuple(sorted(k for k, v in match.items() if v is None))
        equals = tuple(sorted(k for k, v in match.items() if v is not None))
        columns = None if values is None else tuple(sorted(values))
        table = KINDS[kind_name].table

        def build() -> tuple[sa.Update | sa.Delete, builtins.list[str] | None]:
            conditions = [
                table.c.id == sa.bindparam("w_id"),
                table.c.etag == sa.bindparam("w_etag"),
                *(table.c[k].is_(None) for k in nulls),
                *(table.c[k] == sa.bindparam(f"w_{k}") for k in equals),
            ]
            if columns is None:
                return table.delete().where(*conditions), None
            return table.update().where(*conditions), builtins.list(columns)

        write = self._driver_write((verb, kind_name, columns, nulls, equals), build)
        params = {"w_id": current["id"], "w_etag": current["etag"], **(values or {})}
        for key in equals:
            params[f"w_{key}"] = match[key]
        count = write.run(conn, params)
        if count > 1:  # as apimw.etag_db.cas_update: never with the primary key in the condition
            raise ApimwError(f"conditional {verb} matched {count} rows: the key is not unique")
        return count

    # -- resource classes (no etag, no references) -------------------------------------

    def ensure_resource_class(self, name: str, *, must_create: bool) -> bool:
        """Create *name*; ``True`` if created, ``False`` if it existed (409 if *must_create*)."""
        from sqlalchemy.dialects import postgresql, sqlite

        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        stmt = (
            dialect.insert(RESOURCE_CLASSES)
            .values(name=name, created_at=utcnow())
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(RESOURCE_CLASSES.c.id)  # rowcount is -1 here with psycopg 3
        )
        with self.engine.begin() as conn:
            created = conn.execute(stmt).first() is not None
        if not created and must_create:
            raise exc.ResourceClassExists(name)
        return created

    def get_resource_class(self, name: str) -> dict[str, Any]:
        if "\x00" in name:
            raise exc.ResourceClassNotFound(name)
        with self.reader.connect() as conn:
            row = (
                conn.execute(sa.select(RESOURCE_CLASSES).where(RESOURCE_CLASSES.c.name == name))
                .mappings()
                .first()
            )
        if row is None:
            raise exc.ResourceClassNotFound(name)
        return {
            "name": row["name"],
            "created_at": iso(row["created_at"]),
            "updated_at": iso(row["updated_at"]),
        }

    def list_resource_classes(self) -> builtins.list[dict[str, Any]]:
        with self.reader.connect() as conn:
            rows = (
                conn.execute(sa.select(RESOURCE_CLASSES).order_by(RESOURCE_CLASSES.c.name)).mappings().all()
            )
        return [
            {"name": r["name"], "created_at": iso(r["created_at"]), "updated_at": iso(r["updated_at"])}
            for r in rows
        ]

    def delete_resource_class(self, name: str) -> None:
        if "\x00" in name:
            raise exc.ResourceClassNotFound(name)
        with self.engine.begin() as conn:
            in_use = conn.execute(
                sa.select(NODES.c.id).where(NODES.c.resource_class == name).limit(1)
            ).first()
            if in_use is not None:
                raise exc.ResourceClassInUse(name)
            if conn.execute(RESOURCE_CLASSES.delete().where(RESOURCE_CLASSES.c.name == name)).rowcount != 1:
                raise exc.ResourceClassNotFound(name)

    # -- conductors (a heartbeat table: no etag, no events) ----------------------------

    def conductor_heartbeat(
        self, hostname: str, *, conductor_group: str, drivers: Sequence[str], online: bool
    ) -> None:
        """Upsert *hostname*'s row (one statement; concurrent processes of a host agree)."""
        from sqlalchemy.dialects import postgresql, sqlite

        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        now = utcnow()
        values = {
            "hostname": hostname, "conductor_group": conductor_group, "drivers": builtins.list(drivers),
            "online": online, "created_at": now, "updated_at": now,
        }  # fmt: skip
        stmt = dialect.insert(CONDUCTORS).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["hostname"],
            set_={k: values[k] for k in ("conductor_group", "drivers", "online", "updated_at")},
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def get_conductor(self, hostname: str) -> dict[str, Any] | None:
        """The conductor row of *hostname* (datetimes as stored), or None."""
        if "\x00" in hostname:
            return None
        with self.reader.connect() as conn:
            stmt = sa.select(CONDUCTORS).where(CONDUCTORS.c.hostname == hostname)
            row = conn.execute(stmt).mappings().first()
        return None if row is None else dict(row)

    def list_conductors(
        self,
        *,
        limit: int | None = None,
        marker: str | None = None,
        sort_key: str = "id",
        sort_dir: str = "asc",
        not_found: Callable[[str], Exception] = LookupError,
    ) -> builtins.list[dict[str, Any]]:
        """A page of conductor rows by (*sort_key*, id) after the *marker* hostname."""
        col = CONDUCTORS.c[sort_key]
        id_col = CONDUCTORS.c.id
        order = [col.asc(), id_col.asc()] if sort_dir == "asc" else [col.desc(), id_col.desc()]
        stmt = sa.select(CONDUCTORS).order_by(*order).limit(min(limit or MAX_LIMIT, MAX_LIMIT))
        with self.reader.connect() as conn:
            if marker is not None:
                mrow = conn.execute(sa.select(col, id_col).where(CONDUCTORS.c.hostname == marker)).first()
                if mrow is None:
                    raise not_found(marker)
                value, row_id = mrow
                if sort_dir == "asc":
                    stmt = stmt.where(sa.or_(col > value, sa.and_(col == value, id_col > row_id)))
                else:
                    stmt = stmt.where(sa.or_(col < value, sa.and_(col == value, id_col < row_id)))
            return [dict(r) for r in conn.execute(stmt).mappings().all()]

    # -- events ---------------------------------------------------------------------

    def list_events(
        self, *, resource_uuid: str | None = None, limit: int = 100
    ) -> builtins.list[dict[str, Any]]:
        stmt = sa.select(EVENTS).order_by(EVENTS.c.id.desc()).limit(limit)
        if resource_uuid is not None:
            stmt = stmt.where(EVENTS.c.resource_uuid == resource_uuid)
        with self.reader.connect() as conn:
            rows = conn.execute(stmt).mappings().all()
        return [
            {"id": r["id"], "event_type": r["event_type"], "resource_type": r["resource_type"],
             "resource_uuid": r["resource_uuid"], "payload": r["payload"],
             "created_at": iso(r["created_at"]), "etag": r["etag"]}
            for r in reversed(rows)
        ]  # fmt: skip

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

    # -- conductor leases ------------------------------------------------------------

    def pending_nodes(
        self, *, lease_timeout: float, limit: int = 32, drivers: Iterable[str] | None = None
    ) -> builtins.list[tuple[int, str]]:
        """``(id, uuid)`` of nodes with queued work and no live lease, oldest first.

        *drivers* restricts them to nodes of those hardware types (a conductor only
        takes nodes whose driver it has enabled, as Ironic's hash ring does).
        """
        stale = utcnow() - dt.timedelta(seconds=lease_timeout)
        conditions = [
            NODES.c.pending_action.is_not(None),
            sa.or_(NODES.c.reservation.is_(None), NODES.c.reserved_at < stale),
        ]
        if drivers is not None:
            conditions.append(NODES.c.driver.in_(list(drivers)))
        stmt = (
            sa.select(NODES.c.id, NODES.c.uuid)
            .where(*conditions)
            .order_by(NODES.c.provision_updated_at.asc().nulls_first(), NODES.c.id)
            .limit(limit)
        )
        with self.reader.connect() as conn:
            return [(int(r[0]), str(r[1])) for r in conn.execute(stmt)]

    def claim_node(
        self, node_id: int, worker: str, *, lease_timeout: float, drivers: Iterable[str] | None = None
    ) -> bool:
        """Atomically take the lease of a node with queued work: one UPDATE decides."""
        now = utcnow()
        stale = now - dt.timedelta(seconds=lease_timeout)
        conditions = [
            NODES.c.id == node_id,
            NODES.c.pending_action.is_not(None),
            sa.or_(NODES.c.reservation.is_(None), NODES.c.reserved_at < stale),
        ]
        if drivers is not None:
            conditions.append(NODES.c.driver.in_(list(drivers)))
        stmt = NODES.update().where(*conditions).values(reservation=worker, reserved_at=now)
        with self.engine.begin() as conn:
            return conn.execute(stmt).rowcount == 1

    def renew_lease(self, node_id: int, worker: str) -> bool:
        stmt = (
            NODES.update()
            .where(NODES.c.id == node_id, NODES.c.reservation == worker)
            .values(reserved_at=utcnow())
        )
        with self.engine.begin() as conn:
            return conn.execute(stmt).rowcount == 1

    def release_lease(self, node_id: int, worker: str) -> None:
        """Drop a lease without finishing the work (it stays queued for another worker)."""
        stmt = (
            NODES.update()
            .where(NODES.c.id == node_id, NODES.c.reservation == worker)
            .values(reservation=None, reserved_at=None)
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    # -- etag backfill (rows that predate migration 0002) --------------------------------

    def backfill_etags(self) -> int:
        """Compute the etag of every row that has none; returns how many were set."""
        done = 0
        for kind_name, kind in KINDS.items():
            with self.reader.connect() as conn:
                rows = conn.execute(kind.select.where(kind.table.c.etag.is_(None))).mappings().all()
            for row in rows:
                doc = kind.to_doc(row)
                etag = self._new_etag(kind_name, doc)
                with self.engine.begin() as conn:
                    done += conn.execute(
                        kind.table.update()
                        .where(kind.table.c.id == doc["id"], kind.table.c.etag.is_(None))
                        .values(etag=etag)
                    ).rowcount
        return done


def _integral_floats_as_ints(value: Any, field: str, kind_name: str) -> Any:
    """*value* with every finite integral float replaced by the int (same object if none)."""
    kind = type(value)
    if kind is float:
        if not value.is_integer():
            return value
        # the number JSON text says (what PostgreSQL's numeric parses), not the binary value
        return int(value) if abs(value) < 2**53 else int(Decimal(repr(value)))
    if kind is str:
        if "\x00" in value:
            raise exc.InvalidParameterValue(f"The {field} of a {kind_name} cannot contain NUL characters")
        return value
    if kind is dict:
        out = None
        for key, item in value.items():
            if "\x00" in key:
                raise exc.InvalidParameterValue(f"The {field} of a {kind_name} cannot contain NUL characters")
            new = _integral_floats_as_ints(item, field, kind_name)
            if new is not item:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out
    if kind is list:
        items = None
        for index, item in enumerate(value):
            new = _integral_floats_as_ints(item, field, kind_name)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    return value


class _LostRace(Exception):
    """A concurrent write changed the row between our read and our UPDATE: roll back, retry."""


def _delete_of_node(table: sa.Table) -> Callable[[], tuple[sa.Delete, None]]:
    """``DELETE FROM table WHERE node_id = :node_id`` (a node's ports, its portgroups)."""
    return lambda: (table.delete().where(table.c.node_id == sa.bindparam("node_id")), None)


def _etag_is(table: sa.Table, etag: str | None) -> sa.ColumnElement[bool]:
    return table.c.etag.is_(None) if etag is None else table.c.etag == etag


def _after(
    col: sa.ColumnElement[Any],
    id_col: sa.ColumnElement[Any],
    value: Any,
    row_id: sa.BindParameter[Any],
    sort_dir: str,
) -> sa.ColumnElement[bool]:
    """Rows strictly after the marker in (col NULLS FIRST, id) asc, or its reverse for desc."""
    if col is id_col:
        return id_col > row_id if sort_dir == "asc" else id_col < row_id
    if sort_dir == "asc":
        if value is None:
            return sa.or_(sa.and_(col.is_(None), id_col > row_id), col.is_not(None))
        return sa.or_(col > value, sa.and_(col == value, id_col > row_id))
    if value is None:
        return sa.and_(col.is_(None), id_col < row_id)
    return sa.or_(col < value, sa.and_(col == value, id_col < row_id), col.is_(None))
