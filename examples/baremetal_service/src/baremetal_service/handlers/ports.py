"""Ports: ``/v1/nodes/{node}/ports`` (``/v1/portgroups/{pg}/ports``: handlers/portgroups.py).

The port is declared in :mod:`baremetal_service.objects.ports`; ``/v1/ports`` itself
(list, detail, create, get, PATCH, DELETE) is served by the generic routes of
:mod:`.resources` from that declaration.  This module adds the node's ports.
"""

from __future__ import annotations

from flask import Blueprint, Response

from baremetal_service.handlers.context import node_scope
from baremetal_service.handlers.resources import endpoints
from baremetal_service.objects.ports import PORTS as DECLARATION

bp = Blueprint("ports", __name__)

PORTS = endpoints(DECLARATION)


@bp.route("/v1/nodes/<node_ident>/ports", methods=["GET"])
def list_node_ports(node_ident: str) -> Response:
    return PORTS.index(scope=lambda: node_scope(node_ident), path=f"nodes/{node_ident}/ports")


@bp.route("/v1/nodes/<node_ident>/ports/detail", methods=["GET"])
def list_node_ports_detail(node_ident: str) -> Response:
    return PORTS.index(True, scope=lambda: node_scope(node_ident), path=f"nodes/{node_ident}/ports/detail")
