"""Portgroups: ``/v1/portgroups/{pg}/ports`` and ``/v1/nodes/{node}/portgroups`` (from 1.24).

The portgroup is declared in :mod:`baremetal_service.objects.portgroups`;
``/v1/portgroups`` itself (from 1.23) is served by the generic routes of
:mod:`.resources` from that declaration.  This module adds the sub-collections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response

from baremetal_service import versions
from baremetal_service.handlers import serialize
from baremetal_service.handlers.common import require
from baremetal_service.handlers.context import node_scope, project_id, service
from baremetal_service.handlers.ports import PORTS
from baremetal_service.handlers.resources import Endpoints, endpoints
from baremetal_service.objects.portgroups import PORTGROUPS as DECLARATION

bp = Blueprint("portgroups", __name__)

PORTGROUPS = endpoints(DECLARATION)


def _sub_list(what: str, listed: Endpoints, scope: Callable[[], dict[str, Any]], path: str) -> Response:
    """A sub-collection added with portgroups (1.24): the ports of a portgroup, the
    portgroups of a node; *scope* is read after the version and argument checks."""
    PORTGROUPS.gate()
    require(f"{what} sub-resource {listed.collection}", versions.PORTGROUPS_SUBCONTROLLERS)
    return listed.index(scope=scope, path=path)


def _portgroup_scope(ident: str) -> dict[str, Any]:
    pg = service().crud["portgroup"].get(ident, project_id=project_id())
    return {"portgroup": serialize.get(pg, "uuid")}


@bp.route("/v1/portgroups/<ident>/ports", methods=["GET"])
def list_portgroup_ports(ident: str) -> Response:
    return _sub_list("Portgroup", PORTS, lambda: _portgroup_scope(ident), f"portgroups/{ident}/ports")


@bp.route("/v1/nodes/<node_ident>/portgroups", methods=["GET"])
def list_node_portgroups(node_ident: str) -> Response:
    return _sub_list("Node", PORTGROUPS, lambda: node_scope(node_ident), f"nodes/{node_ident}/portgroups")
