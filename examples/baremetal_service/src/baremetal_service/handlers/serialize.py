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
from baremetal_service import versions
from baremetal_service.handlers.masking import mask_driver_info, mask_instance_info, mask_json
from baremetal_service.objects.chassis import CHASSIS_FIELDS
from baremetal_service.objects.nodes import NODE_FIELDS, NODE_SUBLINKS
from baremetal_service.objects.portgroups import PORTGROUP_FIELDS
from baremetal_service.objects.ports import PORT_FIELDS

NODE_STATE_FIELDS: Final = (
    "console_enabled", "last_error", "power_state", "provision_state", "target_power_state",
    "target_provision_state", "provision_updated_at", "raid_config", "target_raid_config",
    "boot_mode", "secure_boot",
)  # fmt: skip




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
    return _TABLES[kind].at(version)


_TABLES: Final[dict[str, versions.Fields]] = {
    "node": NODE_FIELDS,
    "port": PORT_FIELDS,
    "portgroup": PORTGROUP_FIELDS,
    "chassis": CHASSIS_FIELDS,
}


def register(kind: str, fields: versions.Fields, defaults: Mapping[str, Any] | None = None) -> None:
    """Declare a resource kind: its fields (Ironic's order, the version each appears in) and
    the value an absent field shows (by field name, as for the built-in kinds)."""
    _TABLES[kind] = fields
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
    if plan.old_state:
        doc["provision_state"] = shown_provision_state(doc["provision_state"], before_available=True)
    return doc


def shown_provision_state(state: Any, *, before_available: bool) -> Any:
    """A provision state as shown at a version before 1.2 (*before_available*) or later:
    before 1.2 AVAILABLE was called NOSTATE (null)."""
    return None if before_available and state == "available" else state


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
