"""``/v1/portgroups`` (from 1.23) and ``/v1/nodes/{node}/portgroups`` (from 1.24)."""

from __future__ import annotations

from flask import Blueprint, Response

from apimw._version import Version

from . import schemas, serialize, versions
from .common import require
from .context import project_id, service
from .ports import PORTS
from .resources import Resource

bp = Blueprint("portgroups", __name__)

PORTGROUPS = Resource(
    kind="portgroup",
    collection="portgroups",
    field_versions=versions.PORTGROUP_FIELD_VERSIONS,
    fields=serialize.PORTGROUP_FIELDS,
    list_fields=serialize.PORTGROUP_LIST_FIELDS,
    create_schema=schemas.PORTGROUP_CREATE,
    patchable=(
        "address",
        "name",
        "node_uuid",
        "extra",
        "standalone_ports_supported",
        "mode",
        "properties",
        "physical_network",
        "category",
    ),  # fmt: skip
    sort_keys=("uuid", "address", "name", "created_at", "updated_at"),
    since=versions.PORTGROUPS,
    sublinks=("ports",),
    filters=(("node", Version(1, 23)), ("address", Version(1, 23))),
    filter_kwargs={"node_uuid": "node"},
)


@bp.route("/v1/portgroups", methods=["GET"])
def list_portgroups() -> Response:
    return PORTGROUPS.index()


@bp.route("/v1/portgroups/detail", methods=["GET"])
def list_portgroups_detail() -> Response:
    return PORTGROUPS.index(True, path="portgroups/detail")


@bp.route("/v1/portgroups", methods=["POST"])
def create_portgroup() -> Response:
    return PORTGROUPS.create()


@bp.route("/v1/portgroups/<ident>", methods=["GET"])
def get_portgroup(ident: str) -> Response:
    return PORTGROUPS.get(ident)


@bp.route("/v1/portgroups/<ident>", methods=["PATCH"])
def patch_portgroup(ident: str) -> Response:
    return PORTGROUPS.patch(ident)


@bp.route("/v1/portgroups/<ident>", methods=["DELETE"])
def delete_portgroup(ident: str) -> Response:
    return PORTGROUPS.delete(ident)


@bp.route("/v1/portgroups/<ident>/ports", methods=["GET"])
def list_portgroup_ports(ident: str) -> Response:
    PORTGROUPS.gate()
    require("Portgroup sub-resource ports", versions.PORTGROUPS_SUBCONTROLLERS)
    pg = service().get_portgroup(ident, project_id=project_id())
    return PORTS.index(scope={"portgroup": serialize.get(pg, "uuid")}, path=f"portgroups/{ident}/ports")


@bp.route("/v1/nodes/<node_ident>/portgroups", methods=["GET"])
def list_node_portgroups(node_ident: str) -> Response:
    PORTGROUPS.gate()
    require("Node sub-resource portgroups", versions.PORTGROUPS_SUBCONTROLLERS)
    node = service().get_node(node_ident, project_id=project_id())
    return PORTGROUPS.index(
        scope={"node": serialize.get(node, "uuid")}, path=f"nodes/{node_ident}/portgroups"
    )
