"""JSON schemas of request bodies (unknown fields and wrong types are a 400).

JSON schemas of allocations, deploy templates and runbooks (Ironic's, from its controllers).

Ironic's request bodies of volume connectors and targets (1.32).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final


def object_schema(
    properties: Mapping[str, Any], required: Iterable[str] = (), *, additional: bool = False
) -> dict[str, Any]:
    """A JSON object with these *properties* (the *required* ones present); no other
    property unless *additional*."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    schema["additionalProperties"] = additional
    return schema

_STR_OR_NULL: Final = {"type": ["string", "null"], "maxLength": 255}
_IFACE: Final = {"type": ["string", "null"], "maxLength": 255}
_OBJ: Final = {"type": "object"}
_OBJ_OR_NULL: Final = {"type": ["object", "null"]}
_UUID: Final = {"type": "string", "format": "uuid", "pattern": "^[0-9a-fA-F-]{32,36}$"}
_UUID_OR_NULL: Final = {"type": ["string", "null"], "pattern": "^[0-9a-fA-F-]{32,36}$"}
_BOOL: Final = {"type": "boolean"}
_BOOL_OR_NULL: Final = {"type": ["boolean", "null"]}
# Ironic: names are RFC 3986 unreserved characters, at most 255 long.
NAME_PATTERN: Final = r"^[a-zA-Z0-9\-._~]+$"
_NAME: Final = {"type": ["string", "null"], "maxLength": 255, "pattern": NAME_PATTERN}

#: Free-form JSON fields: besides their schema, each must nest at most MAX_JSON_DEPTH deep
#: and serialize to at most MAX_JSON_FIELD_BYTES (handlers/common.py), on create and after a PATCH.
FREEFORM_FIELDS: Final = (
    "driver_info", "extra", "properties", "instance_info", "network_data", "local_link_connection",
)  # fmt: skip

NODE_INTERFACES: Final = (
    "bios_interface", "boot_interface", "console_interface", "deploy_interface", "firmware_interface",
    "inspect_interface", "management_interface", "network_interface", "power_interface",
    "raid_interface", "rescue_interface", "storage_interface", "vendor_interface",
)  # fmt: skip

NODE_PROPERTIES: Final[dict[str, Any]] = {
    "uuid": _UUID,
    "name": _NAME,
    "description": {"type": ["string", "null"], "maxLength": 4096},
    "driver": {"type": "string", "minLength": 1, "maxLength": 255},
    "driver_info": _OBJ,
    "extra": _OBJ,
    "properties": _OBJ,
    "instance_info": _OBJ,
    "instance_uuid": _UUID_OR_NULL,
    "chassis_uuid": _UUID_OR_NULL,
    "resource_class": {"type": ["string", "null"], "maxLength": 80},
    "maintenance": _BOOL,
    "maintenance_reason": _STR_OR_NULL,
    "automated_clean": _BOOL_OR_NULL,
    "conductor_group": {"type": "string", "maxLength": 255, "pattern": r"^[a-zA-Z0-9_\-\.:]*$"},
    "protected": _BOOL,
    "protected_reason": _STR_OR_NULL,
    "owner": _STR_OR_NULL,
    "lessee": _STR_OR_NULL,
    "retired": _BOOL,
    "retired_reason": _STR_OR_NULL,
    "network_data": _OBJ,
    "shard": _STR_OR_NULL,
    "parent_node": _STR_OR_NULL,
    "disable_power_off": _BOOL,
    "instance_name": _STR_OR_NULL,
    **{iface: _IFACE for iface in NODE_INTERFACES},
}

NODE_CREATE: Final[dict[str, Any]] = object_schema(NODE_PROPERTIES, ("driver",))

#: What a node looks like after a PATCH: the same rules, applied to the patched document.
NODE_PATCHED: Final[dict[str, Any]] = NODE_CREATE

PATCH: Final[dict[str, Any]] = {
    "type": "array",
    "items": object_schema(
        {
            "op": {"type": "string", "enum": ["add", "replace", "remove"]},
            "path": {"type": "string", "pattern": "^(/[\\w~\\-.:]+)+$"},
            "value": {},
        },
        ("op", "path"),
    ),
}

PROVISION: Final[dict[str, Any]] = object_schema(
    {
        "target": {"type": "string"},
        "configdrive": {"type": ["object", "string", "null"]},
        "clean_steps": {"type": "array", "items": {"type": "object"}},
        "deploy_steps": {"type": "array", "items": {"type": "object"}},
        "service_steps": {"type": "array", "items": {"type": "object"}},
        "rescue_password": {"type": "string"},
        "disable_ramdisk": {"type": "boolean"},
        "runbook": {"type": "string"},
    },
    ("target",),
)

POWER: Final[dict[str, Any]] = object_schema(
    {
        "target": {"type": "string"},
        "timeout": {"type": ["integer", "null"], "minimum": 1},
    },
    ("target",),
)

MAINTENANCE: Final[dict[str, Any]] = {
    "type": ["object", "null"],
    "properties": {"reason": {"type": ["string", "null"], "maxLength": 255}},
    "additionalProperties": False,
}

MAC_PATTERN: Final = r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$"

PORT_PROPERTIES: Final[dict[str, Any]] = {
    "uuid": _UUID,
    "address": {"type": "string", "pattern": MAC_PATTERN},
    "node_uuid": {"type": "string", "minLength": 1, "maxLength": 255},
    "portgroup_uuid": _UUID_OR_NULL,
    "extra": _OBJ,
    "local_link_connection": _OBJ,
    "pxe_enabled": _BOOL,
    "physical_network": _STR_OR_NULL,
    "is_smartnic": _BOOL,
    "name": _NAME,
    "description": {"type": ["string", "null"], "maxLength": 255},
    "vendor": _STR_OR_NULL,
    "category": _STR_OR_NULL,
    "available_for_dynamic_portgroup": _BOOL,
}

PORT_CREATE: Final[dict[str, Any]] = object_schema(PORT_PROPERTIES, ("address", "node_uuid"))

PORTGROUP_PROPERTIES: Final[dict[str, Any]] = {
    "uuid": _UUID,
    "name": _NAME,
    "address": {"type": ["string", "null"], "pattern": MAC_PATTERN},
    "node_uuid": {"type": "string", "minLength": 1, "maxLength": 255},
    "extra": _OBJ,
    "standalone_ports_supported": _BOOL,
    "mode": _STR_OR_NULL,
    "properties": _OBJ,
    "physical_network": _STR_OR_NULL,
    "category": _STR_OR_NULL,
}

PORTGROUP_CREATE: Final[dict[str, Any]] = object_schema(PORTGROUP_PROPERTIES, ("node_uuid",))

CHASSIS_PROPERTIES: Final[dict[str, Any]] = {
    "uuid": _UUID,
    "description": {"type": ["string", "null"], "maxLength": 255},
    "extra": _OBJ,
}

CHASSIS_CREATE: Final[dict[str, Any]] = object_schema(CHASSIS_PROPERTIES)

#: Placement's rule for custom resource class names (bounded length).
RESOURCE_CLASS_NAME: Final = r"^CUSTOM_[A-Z0-9_]+$"
RESOURCE_CLASS_MAX_LENGTH: Final = 255

RESOURCE_CLASS_CREATE: Final[dict[str, Any]] = object_schema(
    {"name": {"type": "string", "pattern": RESOURCE_CLASS_NAME, "maxLength": RESOURCE_CLASS_MAX_LENGTH}},
    ("name",),
)


#: A trait: ``CUSTOM_[A-Z0-9_]+`` (Ironic also accepts os-traits' standard names).
TRAIT: Final[dict[str, Any]] = {
    "type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^CUSTOM_[A-Z0-9_]+$",
}  # fmt: skip
_ORDER: Final[dict[str, Any]] = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "minLength": 1, "pattern": "^[0-9]+$"},
    ]
}
_LOGICAL_NAME: Final[dict[str, Any]] = {"type": ["string", "null"], "maxLength": 255, "pattern": NAME_PATTERN}

ALLOCATION_CREATE: Final[dict[str, Any]] = object_schema(
    {
        "candidate_nodes": {"type": ["array", "null"], "items": {"type": "string", "maxLength": 255}},
        "extra": {"type": ["object", "null"]},
        "name": _LOGICAL_NAME,
        "node": {"type": ["string", "null"], "maxLength": 255},
        "owner": {"type": ["string", "null"], "maxLength": 255},
        "resource_class": {"type": ["string", "null"], "maxLength": 80},
        "traits": {"type": ["array", "null"], "items": TRAIT},
        "uuid": {"type": ["string", "null"]},
    },
)

#: Deploy interfaces (Ironic's DEPLOYING_INTERFACE_PRIORITY) and cleaning ones (runbooks).
DEPLOY_INTERFACES: Final = ("bios", "deploy", "firmware", "management", "network", "power", "raid", "storage")
CLEAN_INTERFACES: Final = ("bios", "deploy", "firmware", "management", "network", "power", "raid")

DEPLOY_STEP: Final[dict[str, Any]] = object_schema(
    {
        "args": {"type": "object"},
        "interface": {"type": "string", "enum": list(DEPLOY_INTERFACES)},
        "priority": _ORDER,
        "step": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    ("interface", "step", "args", "priority"),
)

RUNBOOK_STEP: Final[dict[str, Any]] = object_schema(
    {
        "args": {"type": "object"},
        "interface": {"type": "string", "enum": list(CLEAN_INTERFACES)},
        "order": _ORDER,
        "step": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    ("interface", "step", "order"),
)

DEPLOY_TEMPLATE_CREATE: Final[dict[str, Any]] = object_schema(
    {
        "description": {"type": ["string", "null"], "maxLength": 255},
        "extra": {"type": ["object", "null"]},
        "name": TRAIT,
        "steps": {"type": "array", "items": DEPLOY_STEP, "minItems": 1},
        "uuid": {"type": ["string", "null"]},
    },
    ("steps", "name"),
)

_RUNBOOK_PROPERTIES: Final[dict[str, Any]] = {
    "uuid": {"type": ["string", "null"]},
    "name": TRAIT,
    "steps": {"type": "array", "items": RUNBOOK_STEP, "minItems": 1},
    "disable_ramdisk": {"type": ["boolean", "null"]},
    "extra": {"type": ["object", "null"]},
    "public": {"type": ["boolean", "null"]},
    "owner": {"type": ["string", "null"], "maxLength": 255},
}
#: Before 1.112: the name is a trait.
RUNBOOK_CREATE: Final[dict[str, Any]] = object_schema(_RUNBOOK_PROPERTIES, ("steps", "name"))
#: From 1.112 (and for every PATCH, as Ironic does): any logical name, and a description.
RUNBOOK_CREATE_112: Final[dict[str, Any]] = {
    **RUNBOOK_CREATE,
    "properties": {
        **_RUNBOOK_PROPERTIES,
        "name": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": NAME_PATTERN},
        "description": {"type": ["string", "null"], "maxLength": 255},
    },
}
RUNBOOK_TRAITS: Final[dict[str, Any]] = object_schema({"traits": {"type": "array", "items": TRAIT}})


_INT32: Final = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
_UUID_PATTERN: Final = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
_UUID: Final = {"type": "string", "pattern": _UUID_PATTERN}
_UUID_OR_NULL: Final = {"type": ["string", "null"], "pattern": _UUID_PATTERN}
_OBJ_OR_NULL: Final = {"type": ["object", "null"]}



def _volume_body(own: Mapping[str, Any], required: Iterable[str]) -> dict[str, Any]:
    """A volume connector's or target's body: its uuid, its node's, its own properties, extra."""
    return object_schema({"uuid": _UUID_OR_NULL, "node_uuid": _UUID, **own, "extra": _OBJ_OR_NULL}, required)


#: Ironic's request bodies (ironic/api/schemas/v1/volume_connector.py, volume_target.py).
CONNECTOR_CREATE: Final = _volume_body(
    {
        "type": {"type": "string", "minLength": 1, "maxLength": 32},
        "connector_id": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    ("connector_id", "node_uuid", "type"),
)
TARGET_CREATE: Final = _volume_body(
    {
        "volume_type": {"type": "string", "minLength": 1, "maxLength": 64},
        "volume_id": {"type": "string", "minLength": 1, "maxLength": 36},
        "boot_index": _INT32,
        "properties": _OBJ_OR_NULL,
    },
    ("boot_index", "node_uuid", "volume_id", "volume_type"),
)
