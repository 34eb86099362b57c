"""Per-node sub-resources: ``/traits`` (1.37), ``/vifs`` (1.28), ``/vmedia`` (1.89), ``/firmware`` (1.86).

Each answers as Ironic 39.0 does below its version: traits with 406 (Ironic's
``allow_traits`` check), the others with 404 (an unknown path at that version).
The behaviour is :mod:`baremetal_service.objects.nodes`; trait writes are node
writes (the node's etag changes; ``If-Match`` is honoured from 1.116, 412 when stale).
"""

from __future__ import annotations

from typing import Any, Final

from flask import Blueprint, Response, request
from werkzeug.exceptions import MethodNotAllowed, NotFound

from apimw import Version, VersionGate
from baremetal_service import versions
from baremetal_service.handlers import common
from baremetal_service.handlers.context import if_match, project_id, service
from baremetal_service.objects.nodes import VMEDIA_DEVICES
from baremetal_service.schemas import object_schema

bp = Blueprint("node_features", __name__)

_TRAITS_USAGE: Final = (
    "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, "
    "or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of "
    "traits specified in the request body."
)

TRAITS_BODY: Final = object_schema({"traits": {"type": "array", "items": {"type": "string"}}})
VIF_BODY: Final = object_schema(
    {
        "id": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[a-zA-Z0-9\-._~]+$"},
        "port_uuid": {"type": "string"},
        "portgroup_uuid": {"type": "string"},
    },
    ("id",),
    additional=True,
)
VMEDIA_BODY: Final = object_schema(
    {
        "device_type": {"type": "string", "enum": list(VMEDIA_DEVICES)},
        "image_url": {"type": "string", "maxLength": 4096},
        "image_download_source": {"type": "string", "enum": ["http", "local", "swift"]},
    },
    ("device_type", "image_url"),
)


#: Below 1.37 Ironic has no traits sub-resource: reading it is its 406 (``allow_traits``), a PUT
#: lands on the node (405), a DELETE on no route (404).
TRAITS_PUT: Final = VersionGate.method(versions.NODE_TRAITS, what="Setting node traits")
TRAITS_DELETE: Final = VersionGate.route(versions.NODE_TRAITS, what="Removing node traits")


def _since(needed: Version) -> None:
    """404 below *needed*: the sub-resource does not exist at the served version."""
    if common.api_version() < needed:
        raise NotFound()


def _features() -> Any:
    return service().node_features


def _etag_headers(node: Any) -> list[tuple[str, str]]:
    etag = node.get("etag") if isinstance(node, dict) else None
    if etag and common.api_version() >= versions.ETAG_VERSION:
        return [("ETag", etag)]
    return []


# -- traits ---------------------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/traits", methods=["GET"])
def list_traits(ident: str) -> Response:
    common.require("Node traits", versions.NODE_TRAITS)
    return common.json_response({"traits": _features().list_traits(ident, project_id=project_id())})


@bp.route("/v1/nodes/<ident>/traits", methods=["PUT"])
def set_traits(ident: str) -> Response:
    TRAITS_PUT.check(request.environ)
    body = common.json_body(allow_empty=True)
    if body is not None:
        common.validate(body, TRAITS_BODY, "body")
    if not body or "traits" not in body:
        raise common.bad_request(_TRAITS_USAGE)
    node = _features().set_traits(ident, body["traits"], project_id=project_id(), if_match=if_match())
    return common.empty_response(204, _etag_headers(node))


@bp.route("/v1/nodes/<ident>/traits/<path:trait>", methods=["PUT"])
def add_trait(ident: str, trait: str) -> Response:
    TRAITS_PUT.check(request.environ)
    if common.raw_body().strip():
        body = common.json_body()
        if body:
            raise common.bad_request(
                _TRAITS_USAGE
                if isinstance(body, dict) and "traits" in body
                else "No body should be provided when adding a trait"
            )
    node = _features().add_trait(ident, trait, project_id=project_id(), if_match=if_match())
    headers = [common.location("nodes", ident, "traits", trait), *_etag_headers(node)]
    return common.empty_response(204, headers)


@bp.route("/v1/nodes/<ident>/traits", methods=["DELETE"])
def remove_traits(ident: str) -> Response:
    TRAITS_DELETE.check(request.environ)
    node = _features().remove_trait(ident, None, project_id=project_id(), if_match=if_match())
    return common.empty_response(204, _etag_headers(node))


@bp.route("/v1/nodes/<ident>/traits/<path:trait>", methods=["DELETE"])
def remove_trait(ident: str, trait: str) -> Response:
    TRAITS_DELETE.check(request.environ)
    node = _features().remove_trait(ident, trait, project_id=project_id(), if_match=if_match())
    return common.empty_response(204, _etag_headers(node))


# -- VIFs -----------------------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/vifs", methods=["GET"])
def list_vifs(ident: str) -> Response:
    _since(versions.NODE_VIFS)
    return common.json_response({"vifs": _features().list_vifs(ident, project_id=project_id())})


@bp.route("/v1/nodes/<ident>/vifs", methods=["POST"])
def attach_vif(ident: str) -> Response:
    _since(versions.NODE_VIFS)
    body = common.json_body()
    common.validate(body, VIF_BODY, "vif")
    if common.api_version() >= versions.VIF_ATTACH_PORT and "port_uuid" in body and "portgroup_uuid" in body:
        raise common.bad_request("Cannot specify both port_uuid and portgroup_uuid")
    _features().attach_vif(ident, body, project_id=project_id())
    return common.empty_response(204)


@bp.route("/v1/nodes/<ident>/vifs/<vif_id>", methods=["DELETE"])
def detach_vif(ident: str, vif_id: str) -> Response:
    _since(versions.NODE_VIFS)
    _features().detach_vif(ident, vif_id, project_id=project_id(), if_match=if_match())
    return common.empty_response(204)


# -- virtual media --------------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/vmedia", methods=["POST"])
def attach_vmedia(ident: str) -> Response:
    _since(versions.NODE_VMEDIA)
    body = common.json_body()
    common.validate(body, VMEDIA_BODY, "vmedia")
    _features().attach_vmedia(
        ident, body["device_type"], body["image_url"], body.get("image_download_source", "local"),
        project_id=project_id(),
    )  # fmt: skip
    return common.empty_response(204)


@bp.route("/v1/nodes/<ident>/vmedia", methods=["DELETE"])
def detach_vmedia(ident: str) -> Response:
    _since(versions.NODE_VMEDIA)
    raw = request.args.getlist("device_types")
    device_types = [d.strip() for value in raw for d in value.split(",") if d.strip()] or None
    _features().detach_vmedia(ident, device_types, project_id=project_id(), if_match=if_match())
    return common.empty_response(204)


@bp.route("/v1/nodes/<ident>/vmedia", methods=["GET", "PUT", "PATCH"])
def other_vmedia(ident: str) -> Response:
    # a path that exists from 1.89 only: below it every method is a 404, as Ironic answers
    _since(versions.NODE_VMEDIA)
    raise MethodNotAllowed(valid_methods=["POST", "DELETE"])


# -- firmware components --------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/firmware", methods=["GET"])
def list_firmware(ident: str) -> Response:
    _since(versions.NODE_FIRMWARE)
    return common.json_response({"firmware": _features().list_firmware(ident, project_id=project_id())})
