"""``/v1/portgroups`` (from 1.23), ``/v1/portgroups/{pg}/ports`` and ``/v1/nodes/{node}/portgroups``
(from 1.24).  Declared in :mod:`baremetal_service.resources.portgroups`."""

from __future__ import annotations

from flask import Blueprint, Response

from ..resources.portgroups import PORTGROUPS as DECLARATION
from . import serialize, versions
from .common import require
from .context import project_id, service
from .ports import PORTS
from .resources import check_args, endpoints

bp = Blueprint("portgroups", __name__)

PORTGROUPS = endpoints(DECLARATION)


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
    check_args(PORTS.list_args)

    def scope() -> dict[str, str]:
        pg = service().crud["portgroup"].get(ident, project_id=project_id())
        return {"portgroup": serialize.get(pg, "uuid")}

    return PORTS.index(scope=scope, path=f"portgroups/{ident}/ports")


@bp.route("/v1/nodes/<node_ident>/portgroups", methods=["GET"])
def list_node_portgroups(node_ident: str) -> Response:
    PORTGROUPS.gate()
    require("Node sub-resource portgroups", versions.PORTGROUPS_SUBCONTROLLERS)
    check_args(PORTGROUPS.list_args)

    def scope() -> dict[str, str]:
        node = service().get_node(node_ident, project_id=project_id())
        return {"node": serialize.get(node, "uuid")}

    return PORTGROUPS.index(scope=scope, path=f"nodes/{node_ident}/portgroups")
