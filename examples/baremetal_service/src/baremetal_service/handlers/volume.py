"""``/v1/volume``: volume connectors and targets (microversion 1.32), as Ironic serves them.

* ``GET /v1/volume`` and ``GET /v1/nodes/{node}/volume``: links to the two collections;
* ``/v1/volume/connectors`` and ``/v1/volume/targets``: CRUD (PATCH with JSON Patch),
  lists filtered by ``?node=`` (UUID or name), ``?detail=`` (from 1.32), ``?fields=``,
  paging; ETag/If-Match and ``X-Client-Token`` as every resource here;
* ``/v1/nodes/{node}/volume/connectors|targets``: the node's lists; anything else under
  a node (one item, a create) is Ironic's 400 "Malformed request URI.".

Below 1.32 every one of them is 404.  Declared in :mod:`baremetal_service.objects.volume`;
the power rules live in :mod:`baremetal_service.objects.volume`.
"""

from __future__ import annotations

from typing import Final

from flask import Blueprint, Response

from apimw.errors import HTTPProblem
from baremetal_service import versions
from baremetal_service.handlers import serialize
from baremetal_service.handlers.common import (
    UUID_RE,
    api_version,
    bad_request,
    base_url,
    check_args,
    json_response,
)
from baremetal_service.handlers.context import node_scope, project_id, service
from baremetal_service.handlers.resources import GET_ARGS, endpoints
from baremetal_service.objects.volume import CONNECTORS as CONNECTOR_DECLARATION
from baremetal_service.objects.volume import TARGETS as TARGET_DECLARATION
from baremetal_service.schemas import CONNECTOR_CREATE, TARGET_CREATE

__all__ = ["CONNECTORS", "CONNECTOR_CREATE", "TARGETS", "TARGET_CREATE", "bp"]

bp = Blueprint("volume", __name__)

CONNECTORS = endpoints(CONNECTOR_DECLARATION)
TARGETS = endpoints(TARGET_DECLARATION)
_BY_NAME: Final = {"connectors": CONNECTORS, "targets": TARGETS}


def _gate() -> None:
    if api_version() < versions.VOLUME:
        raise HTTPProblem(404, "request.not-found", "The resource could not be found.")


def _links(path: str) -> list[dict[str, str]]:
    base = base_url()
    return [{"href": f"{base}/v1/{path}", "rel": "self"}, {"href": f"{base}/{path}", "rel": "bookmark"}]


def _index(prefix: str) -> Response:
    return json_response(
        {
            "links": _links(f"{prefix}/"),
            "connectors": _links(f"{prefix}/connectors"),
            "targets": _links(f"{prefix}/targets"),
        }
    )


def _check_uuid(name: str, ident: str) -> None:
    """Ironic types these identifiers as UUIDs (no names): anything else is a 400."""
    if not UUID_RE.match(ident):
        raise bad_request(f"Expected UUID for {name}: {ident[:100]}", "request.invalid-parameter")


@bp.route("/v1/volume", methods=["GET"])
def volume_index() -> Response:
    _gate()
    return _index("volume")


@bp.route("/v1/nodes/<node_ident>/volume", methods=["GET"])
def node_volume_index(node_ident: str) -> Response:
    _gate()
    node = service().get_node(node_ident, project_id=project_id())
    return _index(f"nodes/{serialize.get(node, 'uuid')}/volume")


@bp.route("/v1/volume/<any(connectors, targets):what>", methods=["GET"])
def list_volume(what: str) -> Response:
    return _BY_NAME[what].index()


@bp.route("/v1/volume/<any(connectors, targets):what>", methods=["POST"])
def create_volume(what: str) -> Response:
    return _BY_NAME[what].create()


@bp.route("/v1/volume/<any(connectors, targets):what>/<ident>", methods=["GET"])
def get_volume(what: str, ident: str) -> Response:
    _gate()
    check_args(GET_ARGS)  # Ironic's first check
    _check_uuid(f"{what[:-1]}_uuid", ident)
    return _BY_NAME[what].get(ident)


@bp.route("/v1/volume/<any(connectors, targets):what>/<ident>", methods=["PATCH"])
def patch_volume(what: str, ident: str) -> Response:
    _gate()
    _check_uuid(f"{what[:-1]}_uuid", ident)
    return _BY_NAME[what].patch(ident)


@bp.route("/v1/volume/<any(connectors, targets):what>/<ident>", methods=["DELETE"])
def delete_volume(what: str, ident: str) -> Response:
    _gate()
    _check_uuid(f"{what[:-1]}_uuid", ident)
    return _BY_NAME[what].delete(ident)


@bp.route("/v1/nodes/<node_ident>/volume/<any(connectors, targets):what>", methods=["GET"])
def list_node_volume(node_ident: str, what: str) -> Response:
    _gate()
    return _BY_NAME[what].index(
        scope=lambda: node_scope(node_ident), path=f"nodes/{node_ident}/volume/{what}"
    )


@bp.route("/v1/nodes/<node_ident>/volume/<any(connectors, targets):what>", methods=["POST"])
@bp.route(
    "/v1/nodes/<node_ident>/volume/<any(connectors, targets):what>/<ident>",
    methods=["GET", "PATCH", "DELETE"],
)
def node_volume_item(node_ident: str, what: str, ident: str | None = None) -> Response:
    _gate()
    node_scope(node_ident)
    raise bad_request("Malformed request URI.", "request.malformed-uri")
