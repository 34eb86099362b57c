"""``/v1/inspection_rules`` (microversion 1.96), as Ironic serves it.

CRUD with JSON Patch, ``?detail=``, ``?fields=``, ``?phase=``, paging; ETag/If-Match
and ``X-Client-Token`` as every resource here.  Below 1.96 a GET is 404 and any
other method 405 (Ironic's answers).  Validation and the ``sensitive`` rules live in
:mod:`baremetal_service.services_inspection_rules`.

One deliberate difference: Ironic 39 links a rule as ``/v1/inspection/<uuid>``, a
path it does not serve; the links here point at ``/v1/inspection_rules/<uuid>``.
"""

from __future__ import annotations

from typing import Any, Final

from flask import Blueprint, Response, request

from apimw.errors import HTTPProblem

from ..services_inspection_rules import ACTIONS, OPERATORS
from . import serialize, versions
from .common import UUID_RE, api_version, bad_request
from .resources import Resource

bp = Blueprint("inspection_rules", __name__)

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

_VERSIONS: Final = {"etag": versions.ETAG_VERSION}
RULE_FIELDS: Final = (
    "uuid", "created_at", "updated_at", "description", "priority", "sensitive", "phase",
    "conditions", "actions", "links", "etag",
)  # fmt: skip
serialize.register("inspection_rule", _VERSIONS, RULE_FIELDS)

RULES = Resource(
    kind="inspection_rule",
    collection="inspection_rules",
    field_versions=_VERSIONS,
    fields=RULE_FIELDS,
    list_fields=("uuid", "priority", "phase", "description"),
    create_schema=RULE_CREATE,
    patchable=("description", "priority", "sensitive", "phase", "conditions", "actions"),
    sort_keys=("uuid", "priority", "description", "sensitive", "phase", "created_at", "updated_at"),
    since=versions.INSPECTION_RULES,
    filters=(("phase", versions.INSPECTION_RULES),),
    backend="inspection_rules",
    detail_since=versions.INSPECTION_RULES,
)


def _gate() -> None:
    if api_version() < versions.INSPECTION_RULES:
        status = 404 if request.method == "GET" else 405
        raise HTTPProblem(
            status,
            "request.not-found" if status == 404 else "request.method-not-allowed",
            "The API version does not allow inspection rules",
        )


def _check_uuid(ident: str) -> None:
    if not UUID_RE.match(ident):
        raise bad_request(
            f"Expected UUID for inspection_rule_uuid: {ident[:100]}", "request.invalid-parameter"
        )


@bp.route("/v1/inspection_rules", methods=["GET"])
def list_rules() -> Response:
    _gate()
    return RULES.index()


@bp.route("/v1/inspection_rules", methods=["POST"])
def create_rule() -> Response:
    _gate()
    return RULES.create()


@bp.route("/v1/inspection_rules/<ident>", methods=["GET"])
def get_rule(ident: str) -> Response:
    _gate()
    _check_uuid(ident)
    return RULES.get(ident)


@bp.route("/v1/inspection_rules/<ident>", methods=["PATCH"])
def patch_rule(ident: str) -> Response:
    _gate()
    _check_uuid(ident)
    return RULES.patch(ident)


@bp.route("/v1/inspection_rules/<ident>", methods=["DELETE"])
def delete_rule(ident: str) -> Response:
    _gate()
    _check_uuid(ident)
    return RULES.delete(ident)
