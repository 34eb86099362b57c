"""JSON schemas of allocations, deploy templates and runbooks (Ironic's, from its controllers)."""

from __future__ import annotations

from typing import Any, Final

from .schemas import NAME_PATTERN

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

ALLOCATION_CREATE: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "candidate_nodes": {"type": ["array", "null"], "items": {"type": "string", "maxLength": 255}},
        "extra": {"type": ["object", "null"]},
        "name": _LOGICAL_NAME,
        "node": {"type": ["string", "null"], "maxLength": 255},
        "owner": {"type": ["string", "null"], "maxLength": 255},
        "resource_class": {"type": ["string", "null"], "maxLength": 80},
        "traits": {"type": ["array", "null"], "items": TRAIT},
        "uuid": {"type": ["string", "null"]},
    },
    "additionalProperties": False,
}

#: Deploy interfaces (Ironic's DEPLOYING_INTERFACE_PRIORITY) and cleaning ones (runbooks).
DEPLOY_INTERFACES: Final = ("bios", "deploy", "firmware", "management", "network", "power", "raid", "storage")
CLEAN_INTERFACES: Final = ("bios", "deploy", "firmware", "management", "network", "power", "raid")

DEPLOY_STEP: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "args": {"type": "object"},
        "interface": {"type": "string", "enum": list(DEPLOY_INTERFACES)},
        "priority": _ORDER,
        "step": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    "required": ["interface", "step", "args", "priority"],
    "additionalProperties": False,
}

RUNBOOK_STEP: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "args": {"type": "object"},
        "interface": {"type": "string", "enum": list(CLEAN_INTERFACES)},
        "order": _ORDER,
        "step": {"type": "string", "minLength": 1, "maxLength": 255},
    },
    "required": ["interface", "step", "order"],
    "additionalProperties": False,
}

DEPLOY_TEMPLATE_CREATE: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "description": {"type": ["string", "null"], "maxLength": 255},
        "extra": {"type": ["object", "null"]},
        "name": TRAIT,
        "steps": {"type": "array", "items": DEPLOY_STEP, "minItems": 1},
        "uuid": {"type": ["string", "null"]},
    },
    "required": ["steps", "name"],
    "additionalProperties": False,
}

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
RUNBOOK_CREATE: Final[dict[str, Any]] = {
    "type": "object",
    "properties": _RUNBOOK_PROPERTIES,
    "required": ["steps", "name"],
    "additionalProperties": False,
}
#: From 1.112 (and for every PATCH, as Ironic does): any logical name, and a description.
RUNBOOK_CREATE_112: Final[dict[str, Any]] = {
    **RUNBOOK_CREATE,
    "properties": {
        **_RUNBOOK_PROPERTIES,
        "name": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": NAME_PATTERN},
        "description": {"type": ["string", "null"], "maxLength": 255},
    },
}
RUNBOOK_TRAITS: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {"traits": {"type": "array", "items": TRAIT}},
    "additionalProperties": False,
}
