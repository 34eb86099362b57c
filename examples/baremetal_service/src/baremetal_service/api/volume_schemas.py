"""Ironic's request bodies of volume connectors and targets (1.32)."""

from __future__ import annotations

from typing import Final

_INT32: Final = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
_UUID_PATTERN: Final = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
_UUID: Final = {"type": "string", "pattern": _UUID_PATTERN}
_UUID_OR_NULL: Final = {"type": ["string", "null"], "pattern": _UUID_PATTERN}
_OBJ_OR_NULL: Final = {"type": ["object", "null"]}

#: Ironic's request bodies (ironic/api/schemas/v1/volume_connector.py, volume_target.py).
CONNECTOR_CREATE: Final = {
    "type": "object",
    "properties": {
        "uuid": _UUID_OR_NULL,
        "node_uuid": _UUID,
        "type": {"type": "string", "minLength": 1, "maxLength": 32},
        "connector_id": {"type": "string", "minLength": 1, "maxLength": 255},
        "extra": _OBJ_OR_NULL,
    },
    "required": ["connector_id", "node_uuid", "type"],
    "additionalProperties": False,
}
TARGET_CREATE: Final = {
    "type": "object",
    "properties": {
        "uuid": _UUID_OR_NULL,
        "node_uuid": _UUID,
        "volume_type": {"type": "string", "minLength": 1, "maxLength": 64},
        "volume_id": {"type": "string", "minLength": 1, "maxLength": 36},
        "boot_index": _INT32,
        "properties": _OBJ_OR_NULL,
        "extra": _OBJ_OR_NULL,
    },
    "required": ["boot_index", "node_uuid", "volume_id", "volume_type"],
    "additionalProperties": False,
}
