"""Portgroups: ``/v1/portgroups/{pg}/ports`` and ``/v1/nodes/{node}/portgroups`` (from 1.24).

The portgroup is declared in :mod:`baremetal_service.objects.portgroups`;
``/v1/portgroups`` itself (from 1.23) is served by the generic routes of
:mod:`.resources` from that declaration.  This module adds the sub-collections.
"""

from __future__ import annotations

from flask import Blueprint, Response

from baremetal_service import versions
from baremetal_service.handlers import serialize
from baremetal_service.handlers.common import check_args, require
from baremetal_service.handlers.context import project_id, service
from baremetal_service.handlers.ports import PORTS
from baremetal_service.handlers.resources import endpoints
from baremetal_service.objects.portgroups import PORTGROUPS as DECLARATION

bp = Blueprint("portgroups", __name__)

PORTGROUPS = endpoints(DECLARATION)


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
