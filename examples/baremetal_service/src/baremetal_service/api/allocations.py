"""``/v1/allocations`` (Ironic 1.52; PATCH 1.57; backfill 1.58; owner 1.60) and
``/v1/nodes/{node}/allocation``.

Reads, PATCH and DELETE go through :class:`~.resources.Resource`; create checks the
version rules first (``node`` needs 1.58).  The allocation process itself lives in
:mod:`baremetal_service.services_allocations`.
"""

from __future__ import annotations

from flask import Blueprint, Response

from . import serialize, versions
from .collections_a_schemas import ALLOCATION_CREATE
from .common import (
    api_version,
    bad_request,
    empty_response,
    json_body,
    json_response,
    parse_fields,
    validate,
)
from .context import project_id, service
from .resources import Resource

bp = Blueprint("allocations", __name__)

FIELDS = (
    "uuid", "created_at", "updated_at", "candidate_nodes", "extra", "last_error", "name", "owner",
    "resource_class", "state", "traits", "links", "node_uuid", "etag",
)  # fmt: skip
serialize.register("allocation", versions.ALLOCATION_FIELD_VERSIONS, FIELDS, defaults={"candidate_nodes": []})

ALLOCATIONS = Resource(
    kind="allocation",
    collection="allocations",
    field_versions=versions.ALLOCATION_FIELD_VERSIONS,
    fields=FIELDS,
    list_fields=FIELDS,
    create_schema=ALLOCATION_CREATE,
    patchable=("name", "extra"),
    sort_keys=("uuid", "name", "created_at", "updated_at", "state", "resource_class"),
    since=versions.ALLOCATIONS,
    filters=(
        ("node", versions.ALLOCATIONS),
        ("resource_class", versions.ALLOCATIONS),
        ("state", versions.ALLOCATIONS),
        ("owner", versions.ALLOCATION_OWNER),
    ),
    backend="allocations",
)


def _method_not_allowed(detail: str) -> Exception:
    from apimw.errors import HTTPProblem

    return HTTPProblem(405, "request.method-not-allowed", detail)


@bp.route("/v1/allocations", methods=["GET"])
def list_allocations() -> Response:
    return ALLOCATIONS.index()


@bp.route("/v1/allocations", methods=["POST"])
def create_allocation() -> Response:
    ALLOCATIONS.gate()
    body = json_body()
    validate(body, ALLOCATION_CREATE, "allocation")
    if body.get("node") is not None and api_version() < versions.ALLOCATION_BACKFILL:
        raise bad_request("Cannot set node when creating an allocation in this API version")
    if body.get("owner") is not None and api_version() < versions.ALLOCATION_OWNER:
        from .common import not_acceptable

        raise not_acceptable("The allocation field 'owner'", versions.ALLOCATION_OWNER)
    return ALLOCATIONS.create()


@bp.route("/v1/allocations/<ident>", methods=["GET"])
def get_allocation(ident: str) -> Response:
    return ALLOCATIONS.get(ident)


@bp.route("/v1/allocations/<ident>", methods=["PATCH"])
def patch_allocation(ident: str) -> Response:
    ALLOCATIONS.gate()
    if api_version() < versions.ALLOCATION_UPDATE:
        raise _method_not_allowed("The API version does not allow updating allocations")
    return ALLOCATIONS.patch(ident)


@bp.route("/v1/allocations/<ident>", methods=["DELETE"])
def delete_allocation(ident: str) -> Response:
    return ALLOCATIONS.delete(ident)


@bp.route("/v1/nodes/<node_ident>/allocation", methods=["GET"])
def get_node_allocation(node_ident: str) -> Response:
    ALLOCATIONS.gate()
    fields = parse_fields(ALLOCATIONS.field_versions, ALLOCATIONS.fields, "allocation")
    obj = service().allocations.get_node_allocation(node_ident, project_id=project_id())
    return json_response(ALLOCATIONS.doc(obj, fields), headers=ALLOCATIONS.etag_headers(obj))


@bp.route("/v1/nodes/<node_ident>/allocation", methods=["DELETE"])
def delete_node_allocation(node_ident: str) -> Response:
    ALLOCATIONS.gate()
    service().allocations.delete_node_allocation(node_ident, project_id=project_id())
    return empty_response(204)
