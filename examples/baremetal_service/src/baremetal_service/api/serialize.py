"""Domain objects -> Ironic-shaped JSON documents, per microversion.

Field order follows Ironic's bodies.  The set of fields visible at a version is
computed once per version and cached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any, Final

from apimw import Version

from ..db.driver_select import RowCode
from . import versions
from .masking import mask_driver_info, mask_instance_info, mask_json

NODE_FIELDS: Final = (
    "uuid", "created_at", "updated_at", "automated_clean", "bios_interface", "boot_interface",
    "boot_mode", "clean_step", "conductor_group", "console_enabled", "console_interface",
    "disable_power_off", "deploy_interface", "deploy_step", "description", "driver", "driver_info",
    "driver_internal_info", "extra", "fault", "firmware_interface", "health", "inspection_finished_at",
    "inspection_started_at", "inspect_interface", "instance_info", "instance_name", "instance_uuid",
    "last_error", "lessee", "maintenance", "maintenance_reason", "management_interface", "name",
    "network_data", "network_interface", "owner", "parent_node", "power_interface", "power_state",
    "properties", "protected", "protected_reason", "provision_state", "provision_updated_at",
    "raid_config", "raid_interface", "rescue_interface", "reservation", "resource_class", "retired",
    "retired_reason", "secure_boot", "service_step", "shard", "storage_interface",
    "target_power_state", "target_provision_state", "target_raid_config", "traits",
    "vendor_interface", "links", "conductor", "allocation_uuid", "chassis_uuid", "ports", "states",
    "portgroups", "volume", "etag",
)  # fmt: skip

#: Fields a node list shows without ?fields= (Ironic's default list fields).
NODE_LIST_FIELDS: Final = ("instance_uuid", "maintenance", "power_state", "provision_state", "uuid", "name")
#: Node fields that are links to sub-resources rather than data.
NODE_SUBLINKS: Final = frozenset({"ports", "states", "portgroups", "volume"})
NODE_STATE_FIELDS: Final = (
    "console_enabled", "last_error", "power_state", "provision_state", "target_power_state",
    "target_provision_state", "provision_updated_at", "raid_config", "target_raid_config",
    "boot_mode", "secure_boot",
)  # fmt: skip

PORT_FIELDS: Final = (
    "uuid", "created_at", "updated_at", "address", "extra", "internal_info", "is_smartnic",
    "local_link_connection", "physical_network", "pxe_enabled", "node_uuid", "name", "description",
    "vendor", "category", "available_for_dynamic_portgroup", "links", "portgroup_uuid", "etag",
)  # fmt: skip
PORT_LIST_FIELDS: Final = ("uuid", "address")

PORTGROUP_FIELDS: Final = (
    "uuid", "created_at", "updated_at", "address", "extra", "internal_info", "mode", "name",
    "node_uuid", "properties", "standalone_ports_supported", "physical_network", "category",
    "dynamic_portgroup", "links", "ports", "etag",
)  # fmt: skip
PORTGROUP_LIST_FIELDS: Final = ("uuid", "address", "name")

CHASSIS_FIELDS: Final = ("uuid", "created_at", "updated_at", "description", "extra", "links", "nodes", "etag")
CHASSIS_LIST_FIELDS: Final = ("uuid", "description")

_DICT_FIELDS: Final = frozenset({
    "clean_step", "deploy_step", "driver_info", "driver_internal_info", "extra", "instance_info",
    "network_data", "properties", "raid_config", "target_raid_config", "service_step", "internal_info",
    "local_link_connection",
})  # fmt: skip
_FALSE_FIELDS: Final = frozenset({
    "console_enabled", "disable_power_off", "maintenance", "protected", "retired", "is_smartnic",
    "dynamic_portgroup",
})  # fmt: skip
_TRUE_FIELDS: Final = frozenset(
    {"pxe_enabled", "available_for_dynamic_portgroup", "standalone_ports_supported"}
)
_DEFAULTS: Final[dict[str, Any]] = {"conductor_group": "", "traits": []}


@lru_cache(maxsize=512)
def visible(kind: str, version: Version) -> tuple[str, ...]:
    table, order = _TABLES[kind]
    return versions.fields_at(table, order, version)


_TABLES: Final[dict[str, tuple[dict[str, Version], tuple[str, ...]]]] = {
    "node": (versions.NODE_FIELD_VERSIONS, NODE_FIELDS),
    "port": (versions.PORT_FIELD_VERSIONS, PORT_FIELDS),
    "portgroup": (versions.PORTGROUP_FIELD_VERSIONS, PORTGROUP_FIELDS),
    "chassis": (versions.CHASSIS_FIELD_VERSIONS, CHASSIS_FIELDS),
}


def register(
    kind: str,
    field_versions: Mapping[str, Version],
    fields: Sequence[str],
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Declare a resource kind: its fields in Ironic's order, the version each appears in,
    and the value an absent field shows (by field name, as for the built-in kinds)."""
    _TABLES[kind] = (dict(field_versions), tuple(fields))
    for name, value in (defaults or {}).items():
        _DEFAULTS.setdefault(name, value)
    visible.cache_clear()
    _plan.cache_clear()


def default_for(name: str) -> Any:
    if name in _DICT_FIELDS:
        return {}
    if name in _FALSE_FIELDS:
        return False
    if name in _TRUE_FIELDS:
        return True
    default = _DEFAULTS.get(name)
    return list(default) if isinstance(default, list) else default


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def get(obj: Any, name: str) -> Any:
    """Read *name* from a mapping or an object; the Ironic default when absent or None."""
    value = obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)
    if value is None:
        return default_for(name)
    return _iso(value)


#: Masking function: ``mask(value, secrets)`` (*secrets*: the keys the node's driver declares).
Mask = Callable[[Any, frozenset[str]], Any]

#: Fields shown masked (:mod:`.masking`), by kind: what Ironic 39 masks (``node_sanitize``;
#: a volume target's ``properties``, deploy template and runbook step ``args``) and more.
MASKED: Final[dict[str, dict[str, Mask]]] = {
    "node": {
        "driver_info": mask_driver_info,
        "driver_internal_info": mask_json,
        "instance_info": mask_instance_info,
    },
    "target": {"properties": mask_json},
    "deploy_template": {"steps": mask_json},
    "runbook": {"steps": mask_json},
}
#: Node fields shown masked.
MASKED_FIELDS: Final = MASKED["node"]


def mask_field(name: str, value: Any, secrets: frozenset[str] = frozenset(), kind: str = "node") -> Any:
    """Field *name* of a *kind* document (one of :data:`MASKED`) as shown; its default when empty."""
    if not value:
        return default_for(name)
    return MASKED[kind][name](value, secrets)


def links(base: str, resource: str, ident: str, sub: str | None = None) -> list[dict[str, str]]:
    path = f"{resource}/{ident}" + (f"/{sub}" if sub else "")
    return [
        {"href": f"{base}/v1/{path}", "rel": "self"},
        {"href": f"{base}/{path}", "rel": "bookmark"},
    ]


# A plan is, per (kind, version, fields), the list of (name, action) to produce a document:
# action 0 = plain value, 1 = "links", 2 = sub-resource links, 3 = masked (MASKED_FIELDS),
# 4 = provision_state before 1.2, 5 = plain value whose default (a dict or list) is copied.
# Plans are cached, and so is what rendering needs from them (the field names in order,
# the defaults to fill in, which links to build), so a document is a few C-level steps:
# a copy of the plan's template (every field, in order, None), updated with the source
# in one call (unless that added keys: the source holds other fields, so field by field),
# then only the fields that need more than their value.
_PLAIN, _LINKS, _SUBLINKS, _MASKED, _OLD_STATE, _PLAIN_COPY = range(6)


@dataclass(frozen=True, slots=True)
class Plan:
    """How to render one kind at one version with one field selection."""

    #: ``(name, action, default)`` per field, in document order
    actions: tuple[tuple[str, int, Any], ...]
    #: every field name, in document order
    names: tuple[str, ...]
    #: ``dict.fromkeys(names)``: a document starts as a copy (its keys in order)
    template: dict[str, Any]
    #: the fields read from the source (all but the links)
    read: tuple[str, ...]
    #: plain fields (their value as it is, datetimes as ISO 8601)
    plain: tuple[str, ...]
    #: ``(name, default, copy)`` of the plain fields whose default (when None) is not None
    defaults: tuple[tuple[str, Any, bool], ...]
    #: their values in a document, as a tuple (one C call tells whether any is None);
    #: None when there are fewer than two
    default_values: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None
    links: bool
    #: sub-resource link fields (``ports``, ``states``...)
    sublinks: tuple[str, ...]
    #: the fields shown masked, with their masking function (:data:`MASKED`)
    masked: tuple[tuple[str, Mask], ...]
    old_state: bool


@lru_cache(maxsize=1024)
def _plan(
    kind: str,
    version: Version,
    fields: tuple[str, ...] | None,
    sublinks: frozenset[str],
) -> Plan:
    names = visible(kind, version)
    maskers = MASKED.get(kind, {})
    if fields is not None:
        wanted = set(fields)
        wanted.add("links")
        names = tuple(n for n in names if n in wanted)
    plan: list[tuple[str, int, Any]] = []
    for name in names:
        if name == "links":
            plan.append((name, _LINKS, None))
        elif name in sublinks:
            if fields is None:
                plan.append((name, _SUBLINKS, None))
        elif name in maskers:
            plan.append((name, _MASKED, default_for(name)))
        elif name == "provision_state" and version < versions.AVAILABLE_STATE:
            plan.append((name, _OLD_STATE, None))
        else:
            default = default_for(name)
            plan.append((name, _PLAIN_COPY if isinstance(default, dict | list) else _PLAIN, default))
    plain = tuple((n, a, d) for n, a, d in plan if a in (_PLAIN, _PLAIN_COPY))
    defaults = tuple((n, d, a == _PLAIN_COPY) for n, a, d in plain if d is not None)
    getter = itemgetter(*(n for n, _d, _c in defaults)) if len(defaults) > 1 else None
    read = tuple(n for n, a, _d in plan if a not in (_LINKS, _SUBLINKS))
    return Plan(
        actions=tuple(plan),
        names=tuple(n for n, _a, _d in plan),
        template=dict.fromkeys(n for n, _a, _d in plan),
        read=read,
        plain=tuple(n for n, _a, _d in plain),
        defaults=defaults,
        default_values=getter,
        links=any(a == _LINKS for _n, a, _d in plan),
        sublinks=tuple(n for n, a, _d in plan if a == _SUBLINKS),
        masked=tuple((n, maskers[n]) for n, a, _d in plan if a == _MASKED),
        old_state=any(a == _OLD_STATE for _n, a, _d in plan),
    )


#: Value types rendered as they are (no datetime check).
_PASS: Final = frozenset({str, int, bool, float, dict, list, type(None)})


def _render_source(
    plan: Plan,
    source: Mapping[str, Any],
    self_prefix: str,
    bookmark_prefix: str,
    secrets: frozenset[str],
    iso_strings: bool = False,
) -> dict[str, Any]:
    """The document of *source* (a dict); links are ``<prefix><uuid>[/<sub>]``.

    *iso_strings*: *source* holds no datetime objects (a data API document, whose
    datetimes are ISO 8601 strings), so its values need no type check.
    """
    value_of = source.get
    doc: dict[str, Any] | None = None
    if source.__class__ is dict and len(source) <= len(plan.template):  # (absent fields: None)
        doc = plan.template.copy()
        doc.update(source)  # (the values of link fields are replaced below)
        if len(doc) != len(plan.template):  # the source held other keys too
            doc = None
    if doc is None:  # field by field
        doc = plan.template.copy()
        read = plan.read
        doc.update(zip(read, map(value_of, read), strict=True))
    if not iso_strings and not _PASS.issuperset(map(type, doc.values())):  # a datetime among them?
        for name in plan.plain:
            value = doc[name]
            if isinstance(value, datetime):
                doc[name] = value.isoformat()
    if plan.default_values is None or None in plan.default_values(doc):
        for name, default, copy in plan.defaults:
            if doc[name] is None:  # an immutable default is shared, a dict or list copied
                doc[name] = default.copy() if copy else default
    uuid = str(value_of("uuid"))
    if plan.links:
        doc["links"] = [
            {"href": self_prefix + uuid, "rel": "self"},
            {"href": bookmark_prefix + uuid, "rel": "bookmark"},
        ]
    for sub in plan.sublinks:
        doc[sub] = [
            {"href": f"{self_prefix}{uuid}/{sub}", "rel": "self"},
            {"href": f"{bookmark_prefix}{uuid}/{sub}", "rel": "bookmark"},
        ]
    for name, mask in plan.masked:
        value = value_of(name)
        doc[name] = mask(value, secrets) if value else default_for(name)
    if plan.old_state and doc["provision_state"] == "available":
        doc["provision_state"] = None  # before 1.2 AVAILABLE was called NOSTATE (null)
    return doc


def _source(plan: Plan, obj: Any) -> Mapping[str, Any]:
    """*obj* as a dict to read fields from (a dict as it is, an object's attributes)."""
    if isinstance(obj, dict):
        return obj
    return {n: getattr(obj, n, None) for n in plan.names}


def _render(
    plan: Plan,
    obj: Any,
    base: str,
    resource: str,
    secrets: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    return _render_source(plan, _source(plan, obj), f"{base}/v1/{resource}/", f"{base}/{resource}/", secrets)


def node_doc(
    node: Any,
    version: Version,
    base: str,
    fields: Sequence[str] | None = None,
    secrets: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """A node at *version*; *fields* (already version-checked) narrows it, links always kept.

    *secrets*: the driver_info keys the node's driver declares secret (masked).
    """
    plan = _plan("node", version, None if fields is None else tuple(fields), NODE_SUBLINKS)
    return _render(plan, node, base, "nodes", secrets)


def node_renderer(
    version: Version, base: str, fields: Sequence[str] | None = None, *, iso_strings: bool = False
) -> Callable[..., dict[str, Any]]:
    """:func:`node_doc` for many nodes: ``render(node, secrets)`` with the plan and the
    link prefixes worked out once (a list renders a hundred nodes with it).

    *iso_strings*: the nodes are data API documents (:mod:`..db.api`: datetimes are
    ISO 8601 strings already), so their values need no datetime check.
    """
    plan = _plan("node", version, None if fields is None else tuple(fields), NODE_SUBLINKS)
    self_prefix, bookmark_prefix = f"{base}/v1/nodes/", f"{base}/nodes/"

    def render(node: Any, secrets: frozenset[str] = frozenset()) -> dict[str, Any]:
        source = node if node.__class__ is dict else _source(plan, node)
        return _render_source(plan, source, self_prefix, bookmark_prefix, secrets, iso_strings)

    return render


def simple_doc(
    kind: str,
    resource: str,
    obj: Any,
    version: Version,
    base: str,
    fields: Sequence[str] | None = None,
    sublinks: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A port, portgroup or chassis at *version*."""
    plan = _plan(kind, version, None if fields is None else tuple(fields), frozenset(sublinks))
    return _render(plan, obj, base, resource)


# -- lists rendered straight from the database driver's rows --------------------------------------

#: ``render(rows, self_prefix, bookmark_prefix, extra, secrets_of)``: the documents of the rows.
RowsRenderer = Callable[
    [Sequence[Sequence[Any]], str, str, Mapping[str, Any], Callable[[str], frozenset[str]]],
    list[dict[str, Any]],
]


def node_rows_renderer(
    version: Version, fields: Sequence[str] | None, code: RowCode, extra_keys: Sequence[str] = ()
) -> RowsRenderer:
    """:func:`node_renderer` for the raw rows of a list (:meth:`..db.api.Database.list_rows`),
    compiled once per (version, fields, statement, extra keys).

    Each row becomes its document in one pass: the columns' own processing
    (*code*: JSON text, datetimes as ISO 8601 strings, booleans) inlined, then the plan's
    defaults, links, masking.  The documents are what :func:`node_renderer` makes of the
    data API's documents of those rows (with *extra*'s values, the ``conductor``, added).
    """
    return _rows_renderer(
        "node", version, None if fields is None else tuple(fields), NODE_SUBLINKS, code, tuple(extra_keys)
    )


def _literal(value: Any) -> str | None:
    """*value* as Python source when it is a plain constant, else None."""
    if value is None or value.__class__ in (str, bool, int):
        return repr(value)
    return None


@lru_cache(maxsize=256)
def _rows_renderer(
    kind: str,
    version: Version,
    fields: tuple[str, ...] | None,
    sublinks: frozenset[str],
    code: RowCode,
    extra_keys: tuple[str, ...],
) -> RowsRenderer:
    plan = _plan(kind, version, fields, sublinks)
    namespace: dict[str, Any] = dict(code.namespace)
    namespace.update({f"_mask_{name}": mask for name, mask in plan.masked})
    namespace["_no_secrets"] = frozenset()
    column = {key: index for index, key in enumerate(code.keys)}
    used: set[int] = set()
    prologue: list[str] = []
    sources: dict[str, str] = {}  # field -> the local holding its value

    def value(name: str) -> str | None:
        """The local name holding *name*'s value, None when no row or extra has it."""
        if name in sources:
            return sources[name]
        var: str | None = None
        if name in extra_keys:
            var = f"x{extra_keys.index(name)}"
            prologue.append(f"    {var} = extra[{name!r}]")
        elif name in column:
            var = f"c{column[name]}"
            used.add(column[name])
        if var is not None:
            sources[name] = var
        return var

    uuid = value("uuid")
    uuid_expr = uuid if uuid is not None else repr("None")
    entries: list[str] = []
    for name, action, default in plan.actions:
        if action == _LINKS:
            entry = (f'[{{"href": self_prefix + {uuid_expr}, "rel": "self"}}, '
                     f'{{"href": bookmark_prefix + {uuid_expr}, "rel": "bookmark"}}]')  # fmt: skip
        elif action == _SUBLINKS:
            tail = repr(f"/{name}")
            entry = (f'[{{"href": self_prefix + {uuid_expr} + {tail}, "rel": "self"}}, '
                     f'{{"href": bookmark_prefix + {uuid_expr} + {tail}, "rel": "bookmark"}}]')  # fmt: skip
        elif action == _MASKED:
            var = value(name)
            if name == "driver_info":
                driver = value("driver")
                secrets = f"secrets_of({driver} or '')" if driver is not None else "secrets_of('')"
            else:
                secrets = "_no_secrets"
            empty = "[]" if isinstance(default, list) else "{}"
            entry = empty if var is None else f"(_mask_{name}({var}, {secrets}) if {var} else {empty})"
        elif action == _OLD_STATE:
            var = value(name)
            entry = "None" if var is None else f'(None if {var} == "available" else {var})'
        else:
            var = value(name)
            if default is None:
                fallback = "None"
            elif action == _PLAIN_COPY and not default:
                fallback = "{}" if isinstance(default, dict) else "[]"
            elif action == _PLAIN_COPY:
                namespace[f"_d_{name}"] = default
                fallback = f"_d_{name}.copy()"
            else:
                literal = _literal(default)
                if literal is None:
                    namespace[f"_d_{name}"] = default
                    literal = f"_d_{name}"
                fallback = literal
            if var is None:
                entry = fallback
            elif fallback == "None":
                entry = var
            else:
                entry = f"({fallback} if {var} is None else {var})"
        if entry != "None":  # (the template's value)
            entries.append(f"        doc[{name!r}] = {entry}")
    # A document is a copy of the plan's template (its keys in order, all None: a dict
    # copy is one allocation), then one store per field: cheaper than a dict display
    # of sixty-odd keys, which grows the dict as it goes.
    namespace["_new"] = plan.template.copy
    names = ", ".join(f"c{i}" if i in used else "_" for i in range(len(code.keys)))
    lines = ["def render(rows, self_prefix, bookmark_prefix, extra, secrets_of):", *prologue,
             "    out = []", "    append = out.append", f"    for ({names},) in rows:"]  # fmt: skip
    for index in sorted(used):
        lines += [f"        {statement}" for statement in code.statements(index, f"c{index}")]
    lines += ["        doc = _new()", *entries, "        append(doc)", "    return out"]
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<{kind} rows renderer>", "exec"), namespace)  # noqa: S102 - our own source
    render: RowsRenderer = namespace["render"]
    render.__source__ = source  # type: ignore[attr-defined]  # (for a reader of tracebacks)
    return render
