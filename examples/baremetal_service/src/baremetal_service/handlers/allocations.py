"""``/v1/allocations`` (Ironic 1.52; PATCH 1.57; backfill 1.58; owner 1.60) and
``/v1/nodes/{node}/allocation``.

Declared in :mod:`baremetal_service.objects.allocations`; the generic endpoints
serve it, create checks the version rules first (``node`` needs 1.58).  The allocation process itself lives in
:mod:`baremetal_service.objects.allocations`.
"""

from __future__ import annotations

from typing import Final

from flask import Blueprint, Response, request

from apimw import VersionGate
from baremetal_service import versions
from baremetal_service.handlers.common import (
    api_version,
    bad_request,
    check_args,
    empty_response,
    json_body,
    json_response,
    parse_fields,
    require,
    validate,
)
from baremetal_service.handlers.context import if_match, project_id, service
from baremetal_service.handlers.resources import GET_ARGS, NOT_FOUND, VERSION_DENIED, endpoints, item_routes
from baremetal_service.objects.allocations import ALLOCATIONS as DECLARATION
from baremetal_service.schemas import ALLOCATION_CREATE

bp = Blueprint("allocations", __name__)

ALLOCATIONS = endpoints(DECLARATION)
#: PATCH from 1.57 (405 before, on a route that exists)
UPDATE: Final = VersionGate.method(
    versions.ALLOCATION_UPDATE, what="updating allocations", detail=VERSION_DENIED
)
#: a node's allocation, from 1.52 (404 before, whatever the method)
NODE_ALLOCATION: Final = VersionGate.route(versions.ALLOCATIONS, what="A node's allocation", detail=NOT_FOUND)


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
    if body.get("owner") is not None:
        require("The allocation field 'owner'", versions.ALLOCATION_OWNER)
    return ALLOCATIONS.create()


def patch_allocation(ident: str) -> Response:
    ALLOCATIONS.gate()
    UPDATE.check(request.environ)
    return ALLOCATIONS.patch(ident)


item_routes(bp, ALLOCATIONS, patch=patch_allocation)


@bp.route("/v1/nodes/<node_ident>/allocation", methods=["GET"])
def get_node_allocation(node_ident: str) -> Response:
    NODE_ALLOCATION.check(request.environ)
    check_args(GET_ARGS)
    fields = parse_fields(ALLOCATIONS.fields, "allocation")
    obj = service().allocations.get_node_allocation(node_ident, project_id=project_id())
    return json_response(ALLOCATIONS.doc(obj, fields), headers=ALLOCATIONS.etag_headers(obj))


@bp.route("/v1/nodes/<node_ident>/allocation", methods=["DELETE"])
def delete_node_allocation(node_ident: str) -> Response:
    NODE_ALLOCATION.check(request.environ)
    service().allocations.delete_node_allocation(node_ident, project_id=project_id(), if_match=if_match())
    return empty_response(204)
