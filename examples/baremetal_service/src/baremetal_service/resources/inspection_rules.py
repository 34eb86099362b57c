"""Inspection rules (``/v1/inspection_rules``, Ironic 1.96): system resources (403 for a project).

Validation (operators and their arguments, phase, priority) and the ``sensitive``
presentation are :mod:`baremetal_service.services_inspection_rules`'.
"""

from __future__ import annotations

from typing import Any, Final

from ..api import versions
from ..services_inspection_rules import ACTIONS, OPERATORS, check_create, check_update, shown
from . import Resource

_ARGS: Final = {"type": ["array", "object"]}
_LOOP: Final = {"type": ["array", "object"]}

#: Ironic's request body (ironic/api/schemas/v1/inspection_rule.py), plus a UUID pattern.
RULE_CREATE: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "uuid": {
            "type": ["string", "null"],
            "pattern": "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$",
        },
        "description": {"type": ["string", "null"], "maxLength": 255},
        "priority": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
        "sensitive": {"type": ["boolean", "null"]},
        "phase": {"type": ["string", "null"], "maxLength": 16},
        "conditions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["op", "args"],
                "properties": {
                    "op": {"enum": [*OPERATORS, *(f"!{op}" for op in OPERATORS)]},
                    "args": _ARGS,
                    "multiple": {"enum": ["any", "all", "first", "last"]},
                    "loop": _LOOP,
                },
                "additionalProperties": True,
            },
        },
        "actions": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["op", "args"],
                "properties": {"op": {"enum": list(ACTIONS)}, "args": _ARGS, "loop": _LOOP},
                "additionalProperties": True,
            },
        },
    },
    "required": ["actions"],
    "additionalProperties": False,
}

RULES: Final = Resource(
    kind="inspection_rule",
    collection="inspection_rules",
    field_versions={"etag": versions.ETAG_VERSION},
    fields=(
        "uuid",
        "created_at",
        "updated_at",
        "description",
        "priority",
        "sensitive",
        "phase",
        "conditions",
        "actions",
        "links",
        "etag",
    ),  # fmt: skip
    list_fields=("uuid", "priority", "phase", "description"),
    create_schema=RULE_CREATE,
    patchable=("description", "priority", "sensitive", "phase", "conditions", "actions"),
    sort_keys=("uuid", "priority", "description", "sensitive", "phase", "created_at", "updated_at"),
    since=versions.INSPECTION_RULES,
    filters=(("phase", versions.INSPECTION_RULES),),
    detail_since=versions.INSPECTION_RULES,
    scope="system",
    policy="baremetal:inspection_rule",
    list_filters={"phase": "phase"},
    null_defaults={"conditions": [], "sensitive": False, "phase": "main", "priority": 0},
    check_create=check_create,
    check_update=check_update,
    present=shown,
    present_needs=("sensitive",),
    routes=False,  # api/inspection_rules.py: 405 below 1.96 for writes, UUID-only paths
)
DECLARED: Final = (RULES,)
