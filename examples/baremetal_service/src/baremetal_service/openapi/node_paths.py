"""The node's own operations: states and verbs, management through its driver, traits, VIFs,
virtual media, firmware, its allocation and its history (the generic node CRUD is the
builder's, from the node declaration)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from baremetal_service import schemas, versions
from baremetal_service.db import history
from baremetal_service.handlers import node_features, serialize
from baremetal_service.handlers import node_management as nm
from baremetal_service.openapi.builder import Builder
from baremetal_service.openapi.declarations import (
    LINKS,
    OBJECT,
    OBJECT_OR_NULL,
    READ_ERRORS,
    STR_OR_NULL,
    STRINGS,
    UUID_PATTERN,
    WRITE_ERRORS,
)


def node_paths(b: Builder) -> None:
    """``/v1/nodes/{node_ident}/...``: states, verbs, maintenance and the node's sub-resources."""
    node = b.decls["nodes"]
    item = "/v1/nodes/{node_ident}"
    empty = {202: b.response(202, "Accepted", location=True)}
    states = b.visible(node, serialize.NODE_STATE_FIELDS)
    b.add(f"{item}/states", "get", {
        "tags": ["nodes"], "operationId": "get_node_states",
        "responses": b.responses({200: b.response(200, "The state fields", {
            "type": "object",
            "properties": {n: b.field_schema(node, n) for n in states},
            "required": states, "additionalProperties": False})}, READ_ERRORS),
    })  # fmt: skip
    verbs = ["active", "deleted", "rebuild", "inspect", "manage", "provide", "abort", "clean", "adopt",
             "rescue", "unrescue", "deploy", "undeploy"]  # fmt: skip
    provision = copy.deepcopy(schemas.PROVISION)
    provision["properties"]["target"] = {
        "type": "string",
        "enum": [v for v in verbs if versions.VERB_VERSIONS.get(v, versions.MIN_VERSION) <= b.version],
    }
    b.add(f"{item}/states/provision", "put", b.if_match({
        "tags": ["nodes"], "operationId": "set_node_provision_state",
        "requestBody": {"required": True, "content": {"application/json": {"schema": provision}}},
        "responses": b.responses(empty, WRITE_ERRORS, conditional=True),
    }))  # fmt: skip
    power = copy.deepcopy(schemas.POWER)
    targets = ["power on", "power off", "rebooting"]
    if b.version >= versions.SOFT_POWER_OFF:
        targets += ["soft power off", "soft rebooting"]
    else:
        del power["properties"]["timeout"]
    power["properties"]["target"] = {"type": "string", "enum": targets}
    b.add(f"{item}/states/power", "put", b.if_match({
        "tags": ["nodes"], "operationId": "set_node_power_state",
        "requestBody": {"required": True, "content": {"application/json": {"schema": power}}},
        "responses": b.responses(empty, WRITE_ERRORS, conditional=True),
    }))  # fmt: skip
    b.add(f"{item}/validate", "get", {
        "tags": ["nodes"], "operationId": "validate_node",
        "responses": b.responses({200: b.response(200, "Interface checks", OBJECT)}, READ_ERRORS),
    })  # fmt: skip
    accepted = {202: b.response(202, "Accepted")}
    b.add(f"{item}/maintenance", "put", b.if_match({
        "tags": ["nodes"], "operationId": "set_node_maintenance",
        "requestBody": {"required": False,
                        "content": {"application/json": {"schema": copy.deepcopy(schemas.MAINTENANCE)}}},
        "responses": b.responses(accepted, WRITE_ERRORS, conditional=True),
    }))  # fmt: skip
    b.add(f"{item}/maintenance", "delete", b.if_match({
        "tags": ["nodes"], "operationId": "unset_node_maintenance",
        "responses": b.responses(accepted, WRITE_ERRORS, conditional=True),
    }))  # fmt: skip
    feature_paths(b, item)
    management_paths(b, item)
    history_paths(b, item)

def management_paths(b: Builder, item: str) -> None:
    """Node management through the node's driver (handlers/node_management.py)."""

    def obj(props: dict[str, Any], required: Iterable[str] | None = None) -> dict[str, Any]:
        return {"type": "object", "properties": props, "additionalProperties": False,
                "required": list(props if required is None else required)}  # fmt: skip

    def body(schema: Mapping[str, Any], required: bool = True) -> dict[str, Any]:
        content = {"application/json": {"schema": copy.deepcopy(dict(schema))}}
        return {"required": required, "content": content}

    no_content = {204: b.response(204, "Done")}
    b.add(f"{item}/management/boot_device", "get", {
        "tags": ["nodes"], "operationId": "get_node_boot_device",
        "responses": b.responses({200: b.response(200, "The boot device (null when unknown)", obj({
            "boot_device": STR_OR_NULL, "persistent": {"type": ["boolean", "null"]}}))}, READ_ERRORS),
    })  # fmt: skip
    b.add(f"{item}/management/boot_device", "put", b.if_match({
        "tags": ["nodes"], "operationId": "set_node_boot_device",
        "description": "400 when the device is not one of the supported ones.",
        "requestBody": body(nm.BOOT_DEVICE_SCHEMA),
        "responses": b.responses(no_content, WRITE_ERRORS, conditional=True),
    }))  # fmt: skip
    b.add(f"{item}/management/boot_device/supported", "get", {
        "tags": ["nodes"], "operationId": "list_node_supported_boot_devices",
        "responses": b.responses({200: b.response(200, "The supported boot devices", obj({
            "supported_boot_devices": STRINGS}))}, READ_ERRORS),
    })  # fmt: skip
    indicator = obj({"name": {"type": "string", "pattern": "^[^@]+@[^@]+$"},
                     "component": {"type": "string"}, "readonly": {"type": "boolean"},
                     "states": STRINGS, "links": LINKS})  # fmt: skip
    b.add(f"{item}/management/indicators", "get", {
        "tags": ["nodes"], "operationId": "list_node_indicators",
        "responses": b.responses({200: b.response(200, "The indicators (name@component)", obj({
            "indicators": {"type": "array", "items": indicator}}))}, READ_ERRORS),
    })  # fmt: skip
    b.add(f"{item}/management/indicators/{{indicator}}", "get", {
        "tags": ["nodes"], "operationId": "get_node_indicator",
        "description": "The indicator is `name@component` (400 when malformed or unknown).",
        "responses": b.responses({200: b.response(200, "Its state", obj({
            "state": {"type": "string", "enum": ["on", "off", "blinking", "unknown"]}}))}, READ_ERRORS),
    })  # fmt: skip
    b.add(f"{item}/management/indicators/{{indicator}}", "put", {
        "tags": ["nodes"], "operationId": "set_node_indicator",
        "description": "400 when the driver cannot set it (fake-hardware sets none).",
        "requestBody": body(obj({"state": {"type": "string"}})),
        "responses": b.responses(no_content, WRITE_ERRORS),
    })  # fmt: skip
    b.add(f"{item}/bios", "get", {
        "tags": ["nodes"], "operationId": "list_node_bios",
        "responses": b.responses({200: b.response(200, "The cached BIOS settings", obj({
            "bios": {"type": "array", "items": OBJECT}}))}, READ_ERRORS),
    }, nm.BIOS)  # fmt: skip
    b.add(f"{item}/children", "get", {
        "tags": ["nodes"], "operationId": "list_node_children",
        "responses": b.responses({200: b.response(200, "The child nodes' UUIDs", obj({
            "children": {"type": "array", "items": {"type": "string", "pattern": UUID_PATTERN}},
            "links": {"$ref": "#/components/schemas/Link"}}))}, READ_ERRORS),
    }, versions.PARENT_NODE)  # fmt: skip
    b.add(f"{item}/states/console", "get", {
        "tags": ["nodes"], "operationId": "get_node_console",
        "responses": b.responses({200: b.response(200, "The console state", obj({
            "console_enabled": {"type": "boolean"}, "console_info": OBJECT_OR_NULL}))}, READ_ERRORS),
    })  # fmt: skip
    b.add(f"{item}/states/console", "put", b.if_match({
        "tags": ["nodes"], "operationId": "set_node_console",
        "description": "`enabled`: a boolean or one of Ironic's boolean strings; 400 for a node "
                       "without a console interface.",
        "requestBody": body(obj({"enabled": {"type": ["boolean", "string"]}})),
        "responses": b.responses({202: b.response(202, "Accepted", location=True)}, WRITE_ERRORS,
                                    conditional=True),
    }))  # fmt: skip
    b.add(f"{item}/states/raid", "put", b.if_match({
        "tags": ["nodes"], "operationId": "set_node_target_raid_config",
        "description": "The target RAID configuration, validated by the driver (Ironic's RAID schema, "
                       "one root volume at most); `{}` clears it; 404 for a node without a RAID "
                       "interface.",
        "requestBody": body({"type": "object", "properties": {
            "logical_disks": {"type": "array", "items": OBJECT}}}),
        "responses": b.responses(no_content, WRITE_ERRORS, conditional=True),
    }), nm.RAID)  # fmt: skip
    for name, target, what in (("boot_mode", {"type": "string", "enum": list(nm.BOOT_MODES)}, "boot mode"),
                               ("secure_boot", {"type": ["boolean", "string"]}, "secure boot state")):
        b.add(f"{item}/states/{name}", "put", {
            "tags": ["nodes"], "operationId": f"set_node_{name}",
            "description": f"Asks the management interface to change the {what} (fake-hardware cannot: "
                           "the node's `last_error` says so); 409 while the node is transitioning.",
            "requestBody": body(obj({"target": target})),
            "responses": b.responses({202: b.response(202, "Accepted", location=True)}, WRITE_ERRORS),
        }, versions.NODE_CHANGE_BOOT_MODE)  # fmt: skip
    method_info = obj({"http_methods": STRINGS, "async": {"type": "boolean"},
                       "description": {"type": "string"}, "attach": {"type": "boolean"},
                       "require_exclusive_lock": {"type": "boolean"}})  # fmt: skip
    b.add(f"{item}/vendor_passthru/methods", "get", {
        "tags": ["nodes"], "operationId": "list_node_vendor_methods",
        "responses": b.responses({200: b.response(200, "The vendor methods by name", {
            "type": "object", "additionalProperties": method_info})}, READ_ERRORS),
    })  # fmt: skip
    for method in ("get", "post", "put", "patch", "delete"):
        op: dict[str, Any] = {
            "tags": ["nodes"], "operationId": f"node_vendor_passthru_{method}",
            "description": "Calls a vendor method: a synchronous one answers 200 with its return "
                           "value, an asynchronous one 202; 400 for an unknown method or HTTP verb.",
            "parameters": [b.query("method", {"type": "string", "minLength": 1})],
            "responses": b.responses({
                200: b.response(200, "The method's return value", {}),
                202: b.response(202, "Accepted (asynchronous method)")}, WRITE_ERRORS),
        }  # fmt: skip
        op["parameters"][0]["required"] = True
        if method != "get":
            op["requestBody"] = body({"type": "object"}, required=False)
        b.add(f"{item}/vendor_passthru", method, op)

def history_paths(b: Builder, item: str) -> None:
    """``/v1/nodes/{id}/history`` (handlers/node_history.py): fields by version."""

    since = versions.NODE_HISTORY
    if since > b.version:
        return
    types: dict[str, dict[str, Any]] = {
        "uuid": {"type": "string", "pattern": UUID_PATTERN}, "created_at": {"type": "string"},
        "severity": {"type": "string"}, "event_type": {"type": "string"}, "event": {"type": "string"},
        "duration_seconds": {"type": ["integer", "null"]},
    }  # fmt: skip
    later = {"project": versions.NODE_HISTORY_PROJECT, "state": versions.NODE_HISTORY_FIELDS,
             "target_provision_state": versions.NODE_HISTORY_FIELDS,
             "duration_seconds": versions.NODE_HISTORY_FIELDS}  # fmt: skip
    names = [n for n in history.FIELDS if later.get(n, since) <= b.version]
    props: dict[str, Any] = {
        n: {**types.get(n, STR_OR_NULL), "x-introduced-in": str(later.get(n, since))} for n in names
    }
    props["links"] = LINKS
    b.schemas["NodeHistoryEvent"] = {
        "type": "object", "properties": props, "required": [*names, "links"],
        "additionalProperties": False, "x-introduced-in": str(since),
    }  # fmt: skip
    b.schemas["NodeHistoryListed"] = {
        "type": "object",
        "description": "An entry as listed: uuid, created_at, severity, event (cut to 255 characters) "
                       "and links; every field with ?detail=true.",
        "properties": {n: {"$ref": f"#/components/schemas/NodeHistoryEvent/properties/{n}"}
                       for n in props},
        "required": ["uuid", "created_at", "severity", "event", "links"],
        "additionalProperties": False,
    }  # fmt: skip
    listed = {"type": "object", "properties": {
        "history": {"type": "array", "items": {"$ref": "#/components/schemas/NodeHistoryListed"}},
        "next": {"type": "string"}}, "required": ["history"], "additionalProperties": False}  # fmt: skip
    b.add(f"{item}/history", "get", {
        "tags": ["nodes"], "operationId": "list_node_history",
        "description": "Any other query parameter is 400 (Unexpected arguments).",
        "parameters": [
            b.query("detail", {"type": "boolean"}, since, "Show every field."),
            b.query("limit", {"type": "integer", "minimum": 1, "maximum": 999_999_999}, since),
            b.query("marker", {"type": "string"}, since, "The last UUID of the page."),
            b.query("sort_key", {"type": "string", "enum": list(history.FIELDS)}, since),
            b.query("sort_dir", {"type": "string", "enum": ["asc", "desc"]}, since),
        ],
        "responses": b.responses({200: b.response(200, "The node's history", listed)},
                                    READ_ERRORS),
    }, since)  # fmt: skip
    b.add(f"{item}/history/{{event_uuid}}", "get", {
        "tags": ["nodes"], "operationId": "get_node_history_event",
        "responses": b.responses({200: b.response(200, "One entry", {
            "$ref": "#/components/schemas/NodeHistoryEvent"})}, READ_ERRORS),
    }, since)  # fmt: skip

def feature_paths(b: Builder, item: str) -> None:
    """Traits, VIFs, virtual media, firmware and the node's allocation (handlers/node_features.py)."""
    no_content = {204: b.response(204, "Done", etag=False)}
    traits = versions.NODE_TRAITS
    b.add(f"{item}/traits", "get", {
        "tags": ["nodes"], "operationId": "list_node_traits",
        "responses": b.responses({200: b.response(200, "The traits", {
            "type": "object", "properties": {"traits": STRINGS}, "required": ["traits"],
            "additionalProperties": False})}, READ_ERRORS),
    }, traits)  # fmt: skip
    b.add(f"{item}/traits", "put", b.if_match({
        "tags": ["nodes"], "operationId": "set_node_traits",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": copy.deepcopy(node_features.TRAITS_BODY)}}},
        "responses": b.responses(no_content, WRITE_ERRORS, conditional=True),
    }), traits)  # fmt: skip
    b.add(f"{item}/traits/{{trait}}", "put", b.if_match({
        "tags": ["nodes"], "operationId": "add_node_trait",
        "responses": b.responses({204: b.response(204, "Added", location=True)}, WRITE_ERRORS,
                                    conditional=True),
    }), traits)  # fmt: skip
    for path, op_id in ((f"{item}/traits", "remove_node_traits"), (f"{item}/traits/{{trait}}",
                                                                      "remove_node_trait")):
        b.add(path, "delete", b.if_match({
            "tags": ["nodes"], "operationId": op_id,
            "responses": b.responses(no_content, WRITE_ERRORS, conditional=True),
        }), traits)  # fmt: skip
    vifs = versions.NODE_VIFS
    b.add(f"{item}/vifs", "get", {
        "tags": ["nodes"], "operationId": "list_node_vifs",
        "responses": b.responses({200: b.response(200, "The VIFs", {
            "type": "object",
            "properties": {"vifs": {"type": "array", "items": {
                "type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}},
            "required": ["vifs"], "additionalProperties": False})}, READ_ERRORS),
    }, vifs)  # fmt: skip
    vif_body = copy.deepcopy(node_features.VIF_BODY)
    b.add(f"{item}/vifs", "post", {
        "tags": ["nodes"], "operationId": "attach_node_vif",
        "requestBody": {"required": True, "content": {"application/json": {"schema": vif_body}}},
        "responses": b.responses(no_content, WRITE_ERRORS),
    }, vifs)  # fmt: skip
    b.add(f"{item}/vifs/{{vif_id}}", "delete", {
        "tags": ["nodes"], "operationId": "detach_node_vif",
        "responses": b.responses(no_content, WRITE_ERRORS),
    }, vifs)  # fmt: skip
    vmedia = versions.NODE_VMEDIA
    b.add(f"{item}/vmedia", "post", {
        "tags": ["nodes"], "operationId": "attach_node_vmedia",
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": copy.deepcopy(node_features.VMEDIA_BODY)}}},
        "responses": b.responses(no_content, WRITE_ERRORS),
    }, vmedia)  # fmt: skip
    b.add(f"{item}/vmedia", "delete", {
        "tags": ["nodes"], "operationId": "detach_node_vmedia",
        "parameters": [b.query("device_types", {"type": "string"}, vmedia)],
        "responses": b.responses(no_content, WRITE_ERRORS),
    }, vmedia)  # fmt: skip
    b.add(f"{item}/firmware", "get", {
        "tags": ["nodes"], "operationId": "list_node_firmware",
        "responses": b.responses({200: b.response(200, "Firmware components", {
            "type": "object", "properties": {"firmware": {"type": "array", "items": OBJECT}},
            "required": ["firmware"], "additionalProperties": False})}, READ_ERRORS),
    }, versions.NODE_FIRMWARE)  # fmt: skip
    alloc = b.decls.get("allocations")
    if alloc is not None and alloc.since <= b.version:
        _full, partial = b.resource_schemas(alloc)
        b.add(f"{item}/allocation", "get", {
            "tags": ["nodes"], "operationId": "get_node_allocation",
            "parameters": b.fields_parameter(alloc),
            "responses": b.responses({200: b.response(
                200, "The node's allocation", {"$ref": f"#/components/schemas/{partial}"}, etag=True)},
                READ_ERRORS),
        }, alloc.since)  # fmt: skip
        b.add(f"{item}/allocation", "delete", {
            "tags": ["nodes"], "operationId": "delete_node_allocation",
            "responses": b.responses(no_content, (400, 403, 404, 406, 409)),
        }, alloc.since)  # fmt: skip

