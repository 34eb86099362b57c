"""``/v1/ports`` and ``/v1/nodes/{node}/ports`` (``/v1/portgroups/{pg}/ports``: api/portgroups.py).

The port is declared in :mod:`baremetal_service.resources.ports`; the handlers are
the generic ones (:mod:`.resources`).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from ..resources.ports import PORTS as DECLARATION
from . import serialize
from .context import project_id, service
from .resources import endpoints

bp = Blueprint("ports", __name__)

PORTS = endpoints(DECLARATION)


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
    return PORTS.index(scope=lambda: _node_scope(node_ident), path=f"nodes/{node_ident}/ports")


@bp.route("/v1/nodes/<node_ident>/ports/detail", methods=["GET"])
def list_node_ports_detail(node_ident: str) -> Response:
    return PORTS.index(True, scope=lambda: _node_scope(node_ident), path=f"nodes/{node_ident}/ports/detail")
