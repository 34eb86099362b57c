"""The tables as the data API reads them: one :class:`Kind` per resource kind.

A kind knows its SELECT (with the joins that resolve references: a port's ``node_uuid``,
a node's ``chassis_uuid`` and ``allocation_uuid``), its lookups by uuid or name (scoped to
a project or not), how its rows become documents (datetimes as ISO 8601 strings in UTC),
its list filters, sortable columns and column limits.  Also here: the small helpers every
module of the data API shares (:func:`utcnow`, :func:`iso`, :func:`is_uuid_like`,
:func:`public`, :func:`items_changed`) and the named write conditions (:data:`CONDITIONS`).
"""

from __future__ import annotations

import builtins
import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final, cast

import sqlalchemy as sa

from baremetal_service import exceptions as exc
from baremetal_service.db.models import (
    Allocation,
    Chassis,
    ClientTokenRecord,
    ConductorRecord,
    DeployTemplate,
    InspectionRule,
    Node,
    NodeEvent,
    Port,
    Portgroup,
    ResourceClass,
    Runbook,
    VolumeConnector,
    VolumeTarget,
)

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
INTERNAL_TUPLE: Final = tuple(INTERNAL_KEYS)
MAX_LIMIT: Final = 1000

#: A list filter's shape (:meth:`.api.Database.list`), its value a bound parameter:
#: ``("eq", column)`` (``eq_<column>``), ``("in", column, n)`` (``in_<column>_0``...),
#: ``("either", column, other)`` (either column equals ``either_<column>``),
#: ``("contains", column)`` (case-insensitive substring ``contains_<column>``, LIKE-escaped
#: with ``/`` by :func:`like_escaped`), ``("is", column, None | True | False)`` and
#: ``("is_not", column)`` (IS NOT NULL).
Filter = tuple[Any, ...]


def like_escaped(text: str) -> str:
    """*text* with LIKE's wildcards escaped by ``/`` (what SQLAlchemy's ``autoescape`` does)."""
    return text.replace("/", "//").replace("%", "/%").replace("_", "/_")


def filter_clause(table: sa.Table, spec: Filter) -> sa.ColumnElement[bool]:
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


def utcnow() -> dt.datetime:
    """Naive UTC with microseconds: what both backends store and give back unchanged."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def iso(value: dt.datetime | None) -> str | None:
    """A stored (naive UTC) datetime as the document's ISO 8601 string."""
    return None if value is None else value.isoformat() + "+00:00"


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
    for key in INTERNAL_TUPLE:
        out.pop(key, None)
    return out


def _base_type(column: sa.ColumnElement[Any]) -> Any:
    kind = column.type
    return kind.impl if isinstance(kind, sa.types.TypeDecorator) else kind


class Kind:
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
        #: ``(column, scoped, internal)`` -> the SELECT of one row by uuid or name; without
        #: ``internal`` it leaves the internal keys out (a document to show: nothing to drop)
        self.lookups: dict[tuple[str, bool, bool], sa.Select[Any]] = {}
        shown = select.with_only_columns(*(c for c in select.selected_columns if c.key not in INTERNAL_KEYS))
        for column in ("uuid", "name") if has_name else ("uuid",):
            for internal, base in ((True, select), (False, shown)):
                stmt = base.where(table.c[column] == sa.bindparam("ident"))
                self.lookups[(column, False, internal)] = stmt
                self.lookups[(column, True, internal)] = stmt if scope is None else stmt.where(scope)
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

    def to_doc(self, keys: Iterable[str], row: Sequence[Any]) -> dict[str, Any]:
        """One row (its values in the order of *keys*, the result's keys) as a document."""
        doc = dict(zip(keys, row, strict=True))
        for key in self.datetimes:
            value = doc.get(key)
            if value is not None:
                doc[key] = value.isoformat() + "+00:00"
        return doc

    def to_docs(self, result: sa.CursorResult[Any]) -> builtins.list[dict[str, Any]]:
        """Every row of *result* as a document: one dict per row, built from the row tuple,
        then its datetime values (the result's datetime keys, found once) as ISO 8601 strings."""
        keys = tuple(result.keys())
        dates = [k for k in keys if k in self.datetimes]
        docs = [dict(zip(keys, row, strict=True)) for row in result.all()]
        for key in dates:
            for doc in docs:
                value = doc[key]
                if value is not None:
                    doc[key] = value.isoformat() + "+00:00"
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


KINDS: Final[dict[str, Kind]] = {
    "node": Kind("node", NODES, _NODE_SELECT, exc.NodeNotFound, has_name=True,
                  owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "port": Kind("port", PORTS, _PORT_SELECT, exc.PortNotFound, has_name=True,
                  owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "portgroup": Kind("portgroup", PORTGROUPS, _PORTGROUP_SELECT, exc.PortgroupNotFound,
                       has_name=True, owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "chassis": Kind("chassis", CHASSIS, _CHASSIS_SELECT, exc.ChassisNotFound, has_name=False,
                     owner_cols=None),
    "allocation": Kind("allocation", ALLOCATIONS, _ALLOCATION_SELECT, exc.AllocationNotFound,
                        has_name=True, owner_cols=(ALLOCATIONS.c.owner, ALLOCATIONS.c.owner)),
    "deploy_template": Kind("deploy_template", DEPLOY_TEMPLATES, sa.select(DEPLOY_TEMPLATES),
                             exc.DeployTemplateNotFound, has_name=True, owner_cols=None),
    # a project sees its own runbooks and the public ones
    "runbook": Kind("runbook", RUNBOOKS, sa.select(RUNBOOKS), exc.RunbookNotFound, has_name=True,
                     owner_cols=(RUNBOOKS.c.owner, RUNBOOKS.c.owner), public_col=RUNBOOKS.c.public),
    "volume_connector": Kind("volume_connector", VOLUME_CONNECTORS,
                              _node_child_select(VOLUME_CONNECTORS), exc.VolumeConnectorNotFound,
                              has_name=False, owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "volume_target": Kind("volume_target", VOLUME_TARGETS, _node_child_select(VOLUME_TARGETS),
                           exc.VolumeTargetNotFound, has_name=False,
                           owner_cols=(NODES.c.owner, NODES.c.lessee)),
    "inspection_rule": Kind("inspection_rule", INSPECTION_RULES, sa.select(INSPECTION_RULES),
                             exc.InspectionRuleNotFound, has_name=False, owner_cols=None),
}  # fmt: skip

#: Node list filters that are column equalities (:meth:`.api.Database.list_nodes`).
NODE_EQUALS: Final = {
    name: NODES.c[name]
    for name in ("provision_state", "driver", "resource_class", "conductor_group", "owner", "lessee",
                 "shard", "fault", "instance_uuid", "instance_name")
}  # fmt: skip
#: Every node list filter :meth:`.api.Database.list_nodes` takes.
NODE_FILTERS: Final = frozenset(
    {*NODE_EQUALS, "maintenance", "retired", "associated", "chassis_uuid", "description_contains",
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
REFS: Final[dict[str, dict[str, tuple[str, str]]]] = {
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
    if kind is dict or kind is list:
        if kind is dict and any("\x00" in key for key in value):
            raise exc.InvalidParameterValue(f"The {field} of a {kind_name} cannot contain NUL characters")
        return items_changed(value, lambda item: _integral_floats_as_ints(item, field, kind_name))
    return value


def items_changed(value: Any, change: Callable[[Any], Any]) -> Any:
    """*value* (a dict or a list) with each item replaced by ``change(item)``: *value*
    itself when ``change`` returned every item unchanged (the same object), else a shallow
    copy with the changed items, so a walk over a JSON document copies only what it changes."""
    out: Any = None
    for key, item in value.items() if value.__class__ is dict else enumerate(value):
        new = change(item)
        if new is not item:
            if out is None:
                out = value.copy()
            out[key] = new
    return value if out is None else out


def after_marker(
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


def node_filter_shapes(
    filters: Mapping[str, Any] | None, chassis_id: Callable[[str], int]
) -> tuple[builtins.list[Filter], dict[str, Any]]:
    """Ironic's node list *filters* as :meth:`.api.Database.list`'s filter shapes and their
    values (*chassis_id*: the row id of a chassis uuid, NotFound if none)."""
    shape: builtins.list[Filter] = []
    params: dict[str, Any] = {}
    for name, value in (filters or {}).items():
        if value is None:
            continue
        if name == "shard" and isinstance(value, list):  # Ironic takes a comma-separated list
            shape.append(("in", "shard", len(value)))
            params.update({f"in_shard_{i}": v for i, v in enumerate(value)})
        elif name in NODE_EQUALS or name == "parent_node":
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
            params["eq_chassis_id"] = chassis_id(str(value))
        elif name == "description_contains":
            shape.append(("contains", "description"))
            params["contains_description"] = like_escaped(str(value))
        else:
            raise exc.InvalidParameterValue(f"Unknown node filter {name!r}")
    return shape, params


def list_statement(kind: Kind, key: tuple[Any, ...]) -> sa.Select[Any]:
    """The list statement of shape *key* (see :meth:`.api.Database.list`), values as bound parameters."""
    _name, filters, scoped, after, sort_key, sort_dir, fields, internal = key
    table = kind.table
    stmt = kind.select if fields is None else kind.narrowed(fields)
    if not internal:
        stmt = stmt.with_only_columns(*(c for c in stmt.selected_columns if c.key not in INTERNAL_KEYS))
    stmt = stmt.where(*(filter_clause(table, f) for f in filters))
    if scoped:
        stmt = stmt.where(kind.scope_of(sa.bindparam("project")))
    col = table.c[sort_key]
    if after is not None:
        value: Any = None if after[1] else sa.bindparam("m_value")
        stmt = stmt.where(after_marker(col, table.c.id, value, sa.bindparam("m_id"), sort_dir))
    if sort_dir == "asc":
        order = [col.asc().nulls_first(), table.c.id.asc()]
    else:
        order = [col.desc().nulls_last(), table.c.id.desc()]
    if sort_key == "id":
        order = order[1:]
    return stmt.order_by(*order).limit(sa.bindparam("limit", type_=sa.Integer))
