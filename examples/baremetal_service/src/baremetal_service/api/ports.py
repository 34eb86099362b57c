"""``/v1/ports`` and ``/v1/nodes/{node}/ports``, ``/v1/portgroups/{pg}/ports``."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from apimw._version import Version

from . import schemas, serialize, versions
from .context import project_id, service
from .resources import Resource

bp = Blueprint("ports", __name__)

PORTS = Resource(
    kind="port",
    collection="ports",
    field_versions=versions.PORT_FIELD_VERSIONS,
    fields=serialize.PORT_FIELDS,
    list_fields=serialize.PORT_LIST_FIELDS,
    create_schema=schemas.PORT_CREATE,
    patchable=(
        "address",
        "node_uuid",
        "portgroup_uuid",
        "extra",
        "local_link_connection",
        "pxe_enabled",
        "physical_network",
        "is_smartnic",
        "name",
        "description",
    ),  # fmt: skip
    sort_keys=("uuid", "address", "created_at", "updated_at", "name", "pxe_enabled"),
    filters=(
        ("node", Version(1, 1)),
        ("node_uuid", Version(1, 1)),
        ("address", Version(1, 1)),
        ("portgroup", versions.PORTGROUPS_SUBCONTROLLERS),
    ),
    # openstacksdk's ports(node_id=...) sends ?node_uuid=; the service filters by "node".
    filter_kwargs={"node_uuid": "node"},
)


@bp.route("/v1/ports", methods=["GET"])
def list_ports() -> Response:
    return PORTS.index()


@bp.route("/v1/ports/detail", methods=["GET"])
def list_ports_detail() -> Response:
    return PORTS.index(True, path="ports/detail")


@bp.route("/v1/ports", methods=["POST"])
def create_port() -> Response:
    return PORTS.create()


@bp.route("/v1/ports/<ident>", methods=["GET"])
def get_port(ident: str) -> Response:
    return PORTS.get(ident)


@bp.route("/v1/ports/<ident>", methods=["PATCH"])
def patch_port(ident: str) -> Response:
    return PORTS.patch(ident)


@bp.route("/v1/ports/<ident>", methods=["DELETE"])
def delete_port(ident: str) -> Response:
    return PORTS.delete(ident)


def _node_scope(node_ident: str) -> dict[str, Any]:
    node = service().get_node(node_ident, project_id=project_id())
    return {"node": serialize.get(node, "uuid")}


@bp.route("/v1/nodes/<node_ident>/ports", methods=["GET"])
def list_node_ports(node_ident: str) -> Response:
    return PORTS.index(scope=_node_scope(node_ident), path=f"nodes/{node_ident}/ports")


@bp.route("/v1/nodes/<node_ident>/ports/detail", methods=["GET"])
def list_node_ports_detail(node_ident: str) -> Response:
    return PORTS.index(True, scope=_node_scope(node_ident), path=f"nodes/{node_ident}/ports/detail")
