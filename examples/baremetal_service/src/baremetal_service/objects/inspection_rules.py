"""Inspection rules (Ironic's ``/v1/inspection_rules``, microversion 1.96).

A rule is ``description``, ``priority`` (0..9999), ``sensitive``, ``phase``
(``main``), ``conditions`` and ``actions`` (lists of ``{"op", "args", ...}``).
Validated as Ironic validates them (``ironic.common.inspection_rules.validation``):
the JSON schema (API layer), then the phase, the priority range, and each
condition's and action's arguments against the operator's signature -- ``args``
as a list (positional, Ironic's deprecated form) or an object (named).  Where
Ironic answers a bad argument list with a 500, this service answers 400
``baremetal.invalid-parameter`` ("Invalid parameters for action operator
set-attribute: missing required argument(s): value").

``sensitive`` rules never show their conditions and actions (``null`` in every
answer) and cannot be made non-sensitive again (400).  Documents returned here are
what the API shows: conditions show ``loop``/``multiple`` only with a loop, actions
``loop`` only when set (Ironic's ``convert_conditions``/``convert_actions``); the
stored rule keeps everything it was given.

Inspection rules are system resources: a project-scoped caller gets 403
``baremetal.forbidden`` (Ironic's default policy: ``baremetal:inspection_rule:*``
is system-only).  The CRUD is the generic one, from the declaration
(:data:`RULES`); this module also holds the rules' validation and presentation (the
declaration's hooks).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from baremetal_service import exceptions as exc
from baremetal_service import versions
from baremetal_service.db.api import public
from baremetal_service.objects.resource import Resource
from baremetal_service.versions import ETAG_VERSION, FIRST, Fields

__all__ = ['ACTIONS', 'OPERATORS', 'PHASES', 'check_create', 'check_rule', 'check_update', 'shown']

PHASES: Final = ("main",)
MAX_PRIORITY: Final = 9999

#: Condition operators -> (required, optional) argument names (Ironic 39's signatures).
OPERATORS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "eq": (("values",), ("force_strings",)),
    "lt": (("values",), ("force_strings",)),
    "gt": (("values",), ("force_strings",)),
    "is-empty": (("value",), ()),
    "in-net": (("address", "subnet"), ()),
    "matches": (("value", "regex"), ()),
    "contains": (("value", "regex"), ()),
    "one-of": (("value",), ("values",)),
    "is-none": (("value",), ()),
    "is-true": (("value",), ()),
    "is-false": (("value",), ()),
}
#: Actions -> (required, optional) argument names; ``plugin_data`` is supplied by Ironic.
ACTIONS: Final[dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    "fail": (("msg",), ()),
    "log": (("msg",), ("level",)),
    "set-attribute": (("path", "value"), ()),
    "extend-attribute": (("path", "value"), ("unique",)),
    "del-attribute": (("path",), ()),
    "set-capability": (("name", "value"), ()),
    "unset-capability": (("name",), ()),
    "add-trait": (("name",), ()),
    "remove-trait": (("name",), ()),
    "set-plugin-data": (("path", "value", "plugin_data"), ()),
    "extend-plugin-data": (("path", "value", "plugin_data"), ("unique",)),
    "unset-plugin-data": (("path", "plugin_data"), ()),
    "set-port-attribute": (("port_id", "path", "value"), ()),
    "extend-port-attribute": (("port_id", "path", "value"), ("unique",)),
    "del-port-attribute": (("port_id", "path"), ()),
    "api-call": (("url",), ("headers", "proxies", "timeout", "retries", "backoff_factor")),
}
_IMPLICIT: Final = frozenset({"plugin_data"})


def _check_args(signature: tuple[tuple[str, ...], tuple[str, ...]], args: Any) -> str | None:
    """What is wrong with *args* for an operator of *signature* (None when fine)."""
    required = [n for n in signature[0] if n not in _IMPLICIT]
    optional = list(signature[1])
    if isinstance(args, list):
        if len(args) < len(required):
            return f"Not enough arguments provided. Missing: {', '.join(required[len(args) :])}"
        return None
    if not isinstance(args, dict):
        return "args must be either a list or dictionary"
    provided = set(args)
    problems = []
    missing = [n for n in required if n not in provided]
    unexpected = sorted(provided - set(required) - set(optional) - _IMPLICIT)
    if missing:
        problems.append(f"missing required argument(s): {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected argument(s): {', '.join(unexpected)}")
    return "; ".join(problems) or None


def check_rule(rule: Mapping[str, Any]) -> None:
    """Ironic's ``validate_rule`` beyond the JSON schema: 400 with all problems at once."""
    errors: list[str] = []
    phase = rule.get("phase") or "main"
    if phase not in PHASES:
        errors.append(f"Invalid phase: {phase}. Valid phases are: {', '.join(PHASES)}")
    priority = rule.get("priority") or 0
    if priority < 0:
        errors.append("Priority cannot be negative for user-defined rules.")
    if priority > MAX_PRIORITY:
        errors.append(f"Priority must be between 0 and {MAX_PRIORITY} for user-defined rules.")
    for condition in rule.get("conditions") or ():
        op = str(condition["op"]).removeprefix("!")
        problem = _check_args(OPERATORS[op], condition.get("args"))
        if problem:
            errors.append(f"Invalid parameters for condition operator {op}: {problem}")
    for action in rule.get("actions") or ():
        problem = _check_args(ACTIONS[action["op"]], action.get("args"))
        if problem:
            errors.append(f"Invalid parameters for action operator {action['op']}: {problem}")
    if len(errors) == 1:
        raise exc.InvalidParameterValue(errors[0])
    if errors:
        raise exc.InvalidParameterValue(f"Multiple validation errors occurred: {'; '.join(errors)}")


def _shown_steps(steps: Any, *, multiple: bool) -> list[dict[str, Any]]:
    """Conditions or actions as the API shows them: op and args, the loop when there is one
    (and, for a condition, how many loop items must match: ``multiple``, default "any")."""
    out = []
    for step in steps or ():
        item = {"op": step.get("op"), "args": step.get("args")}
        if step.get("loop"):
            item["loop"] = step["loop"]
            if multiple:
                item["multiple"] = step.get("multiple", "any")
        out.append(item)
    return out


def shown(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The API's view of a stored rule (Ironic's convert_* and sanitize)."""
    out = public(doc)
    if out.get("sensitive"):
        out["conditions"] = None
        out["actions"] = None
        return out
    if "conditions" in out:
        out["conditions"] = _shown_steps(out["conditions"], multiple=True)
    if "actions" in out:
        out["actions"] = _shown_steps(out["actions"], multiple=False)
    return out


def check_create(crud: Any, row: dict[str, Any], project_id: str | None) -> None:
    check_rule(row)


def check_update(crud: Any, current: dict[str, Any], changes: dict[str, Any], project_id: str | None) -> None:
    if current.get("sensitive") and changes.get("sensitive") is False:
        raise exc.InvalidParameterValue("Inspection rules cannot have the sensitive flag unset.")
    check_rule({**current, **changes})


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
    fields=Fields({
        "uuid": FIRST, "created_at": FIRST, "updated_at": FIRST, "description": FIRST,
        "priority": FIRST, "sensitive": FIRST, "phase": FIRST, "conditions": FIRST, "actions": FIRST,
        "links": FIRST, "etag": ETAG_VERSION,
    }),  # fmt: skip
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
    routes=False,  # handlers/inspection_rules.py: 405 below 1.96 for writes, UUID-only paths
)
DECLARED: Final = (RULES,)
