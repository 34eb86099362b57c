"""What the OpenAPI generator reads beyond the resource declarations: the types of the fields
no create schema states, the values a filter takes, the operations served later than their
resource.

The resources themselves are their declarations (:class:`~baremetal_service.objects.resource.Resource`:
kind, collection, fields and the version each appeared in, create schema, patchable fields, sort
keys, filters...), read as they are from :func:`baremetal_service.objects.catalog.declarations`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from apimw import Version
from baremetal_service import versions
from baremetal_service.handlers import nodes
from baremetal_service.objects.catalog import declarations
from baremetal_service.objects.nodes import NODES
from baremetal_service.objects.resource import Resource
from baremetal_service.schemas import RUNBOOK_CREATE

ERROR_STATUSES: Final = (400, 403, 404, 406, 409, 412, 413, 415)
READ_ERRORS: Final = (400, 403, 404, 406)
WRITE_ERRORS: Final = (400, 403, 404, 406, 409, 413, 415)

# -- field types that no create schema states (read-only fields) -------------------------------------

LINK: Final = {
    "type": "object",
    "properties": {"href": {"type": "string"}, "rel": {"type": "string"}, "type": {"type": "string"}},
    "required": ["href", "rel"],
}
LINKS: Final = {"type": "array", "items": {"$ref": "#/components/schemas/Link"}}
STR_OR_NULL: Final = {"type": ["string", "null"]}
OBJECT: Final = {"type": "object"}
OBJECT_OR_NULL: Final = {"type": ["object", "null"]}
STRINGS: Final = {"type": "array", "items": {"type": "string"}}
TIME: Final = {"type": ["string", "null"]}
UUID_PATTERN: Final = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"

#: Response types of fields no create schema declares (by name, for every resource).
READ_ONLY_TYPES: Final[dict[str, dict[str, Any]]] = {
    "uuid": {"type": "string", "pattern": UUID_PATTERN},
    "created_at": TIME,
    "updated_at": TIME,
    "links": LINKS,
    "etag": {"type": "string", "minLength": 1},
    "internal_info": OBJECT,
    "driver_internal_info": OBJECT,
    "clean_step": OBJECT,
    "deploy_step": OBJECT,
    "service_step": OBJECT,
    "raid_config": OBJECT,
    "target_raid_config": OBJECT,
    "console_enabled": {"type": "boolean"},
    "power_state": STR_OR_NULL,
    "target_power_state": STR_OR_NULL,
    "provision_state": STR_OR_NULL,
    "target_provision_state": STR_OR_NULL,
    "provision_updated_at": TIME,
    "inspection_started_at": TIME,
    "inspection_finished_at": TIME,
    "last_error": STR_OR_NULL,
    "reservation": STR_OR_NULL,
    "fault": STR_OR_NULL,
    "conductor": STR_OR_NULL,
    "allocation_uuid": STR_OR_NULL,
    "boot_mode": STR_OR_NULL,
    "secure_boot": {"type": ["boolean", "null"]},
    "health": STR_OR_NULL,
    "traits": STRINGS,
    "dynamic_portgroup": {"type": "boolean"},
    "state": {"type": "string"},
    "node_uuid": STR_OR_NULL,
    "candidate_nodes": STRINGS,
}

#: Operations served later than their resource (Ironic's numbers): (collection, operation) -> version.
OPERATION_SINCE: Final[dict[tuple[str, str], Version]] = {
    ("allocations", "patch"): versions.ALLOCATION_UPDATE,
    ("portgroups", "sub:ports"): versions.PORTGROUPS_SUBCONTROLLERS,
    ("nodes", "sub:portgroups"): versions.PORTGROUPS_SUBCONTROLLERS,
}


def filter_schema(collection: str, name: str) -> dict[str, Any]:
    """The query schema of a list filter: the values the node list checks, or any string."""
    if collection == "nodes":
        if name == "provision_state":
            return {"type": "string", "enum": sorted(nodes.PROVISION_STATES)}
        if name == "fault":
            return {"type": "string", "enum": list(nodes.FAULTS)}
        if name == "shard":  # a comma-separated list: any of them
            return {"type": "array", "items": {"type": "string"}, "minItems": 1}
    return {"type": "string"}


def create_schema_at(decl: Resource, version: Version) -> Mapping[str, Any]:
    """The create body a version checks (a declaration states the newest one)."""
    if decl.collection == "runbooks" and version < versions.RUNBOOK_TRAITS:
        return RUNBOOK_CREATE  # before 1.112 the name is a trait (the service checks it so)
    return decl.create_schema


def declared() -> tuple[Resource, ...]:
    """The resources the generic paths document: every declaration but those served by their own
    controller (conductors: documented by hand in :mod:`.paths`), the nodes excepted (their
    controller serves the generic paths, their declaration states them)."""
    return (NODES, *(decl for decl in declarations() if not decl.own_controller))
