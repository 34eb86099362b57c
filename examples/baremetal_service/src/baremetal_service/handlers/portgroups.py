"""Portgroups: ``/v1/portgroups/{pg}/ports[/detail]`` and ``/v1/nodes/{node}/portgroups[/detail]``
(from 1.24; 404 before, as Ironic answers a path it does not have yet).

The portgroup is declared in :mod:`baremetal_service.objects.portgroups`;
``/v1/portgroups`` itself (from 1.23) is served by the generic routes of
:mod:`.resources` from that declaration.  This module adds the sub-collections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from flask import Blueprint, Response, request

from apimw import VersionGate
from baremetal_service import versions
from baremetal_service.handlers import serialize
from baremetal_service.handlers.context import node_scope, project_id, service
from baremetal_service.handlers.ports import PORTS
from baremetal_service.handlers.resources import NOT_FOUND, Endpoints, endpoints
from baremetal_service.objects.portgroups import PORTGROUPS as DECLARATION

bp = Blueprint("portgroups", __name__)

PORTGROUPS = endpoints(DECLARATION)
SUB_RESOURCES: Final = VersionGate.route(
    versions.PORTGROUPS_SUBCONTROLLERS, what="Portgroup sub-resources", detail=NOT_FOUND
)


def _sub_list(
    listed: Endpoints, scope: Callable[[], dict[str, Any]], path: str, detail: bool = False
) -> Response:
    """A sub-collection added with portgroups (1.24): the ports of a portgroup, the
    portgroups of a node; *scope* is read after the version and argument checks."""
    PORTGROUPS.gate()
    SUB_RESOURCES.check(request.environ)
    return listed.index(detail, scope=scope, path=path)


def _portgroup_scope(ident: str) -> dict[str, Any]:
    pg = service().crud["portgroup"].get(ident, project_id=project_id())
    return {"portgroup": serialize.get(pg, "uuid")}


@bp.route("/v1/portgroups/<ident>/ports", methods=["GET"])
def list_portgroup_ports(ident: str) -> Response:
    return _sub_list(PORTS, lambda: _portgroup_scope(ident), f"portgroups/{ident}/ports")


@bp.route("/v1/portgroups/<ident>/ports/detail", methods=["GET"])
def list_portgroup_ports_detail(ident: str) -> Response:
    return _sub_list(PORTS, lambda: _portgroup_scope(ident), f"portgroups/{ident}/ports/detail", True)


@bp.route("/v1/nodes/<node_ident>/portgroups", methods=["GET"])
def list_node_portgroups(node_ident: str) -> Response:
    return _sub_list(PORTGROUPS, lambda: node_scope(node_ident), f"nodes/{node_ident}/portgroups")


@bp.route("/v1/nodes/<node_ident>/portgroups/detail", methods=["GET"])
def list_node_portgroups_detail(node_ident: str) -> Response:
    return _sub_list(
        PORTGROUPS, lambda: node_scope(node_ident), f"nodes/{node_ident}/portgroups/detail", True
    )
