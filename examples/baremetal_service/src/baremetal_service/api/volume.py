"""``/v1/volume``: volume connectors and targets (microversion 1.32), as Ironic serves them.

* ``GET /v1/volume`` and ``GET /v1/nodes/{node}/volume``: links to the two collections;
* ``/v1/volume/connectors`` and ``/v1/volume/targets``: CRUD (PATCH with JSON Patch),
  lists filtered by ``?node=`` (UUID or name), ``?detail=`` (from 1.32), ``?fields=``,
  paging; ETag/If-Match and ``X-Client-Token`` as every resource here;
* ``/v1/nodes/{node}/volume/connectors|targets``: the node's lists; anything else under
  a node (one item, a create) is Ironic's 400 "Malformed request URI.".

Below 1.32 every one of them is 404.  The rules (tenancy, power state, uniqueness)
live in :mod:`baremetal_service.services_volume`.
"""

from __future__ import annotations

from typing import Any, Final

from flask import Blueprint, Response

from apimw.errors import HTTPProblem

from . import serialize, versions
from .common import UUID_RE, api_version, bad_request, base_url, json_response
from .context import project_id, service
from .resources import Resource

bp = Blueprint("volume", __name__)

_INT32: Final = {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1}
_UUID_PATTERN: Final = "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
_UUID: Final = {"type": "string", "pattern": _UUID_PATTERN}
_UUID_OR_NULL: Final = {"type": ["string", "null"], "pattern": _UUID_PATTERN}
_OBJ_OR_NULL: Final = {"type": ["object", "null"]}

#: Ironic's request bodies (ironic/api/schemas/v1/volume_connector.py, volume_target.py).
CONNECTOR_CREATE: Final = {
    "type": "object",
    "properties": {
        "uuid": _UUID_OR_NULL,
        "node_uuid": _UUID,
        "type": {"type": "string", "minLength": 1, "maxLength": 32},
        "connector_id": {"type": "string", "minLength": 1, "maxLength": 255},
        "extra": _OBJ_OR_NULL,
    },
    "required": ["connector_id", "node_uuid", "type"],
    "additionalProperties": False,
}
TARGET_CREATE: Final = {
    "type": "object",
    "properties": {
        "uuid": _UUID_OR_NULL,
        "node_uuid": _UUID,
        "volume_type": {"type": "string", "minLength": 1, "maxLength": 64},
        "volume_id": {"type": "string", "minLength": 1, "maxLength": 36},
        "boot_index": _INT32,
        "properties": _OBJ_OR_NULL,
        "extra": _OBJ_OR_NULL,
    },
    "required": ["boot_index", "node_uuid", "volume_id", "volume_type"],
    "additionalProperties": False,
}

_COMMON_VERSIONS: Final = {"etag": versions.ETAG_VERSION}
CONNECTOR_FIELDS: Final = (
    "uuid", "created_at", "updated_at", "connector_id", "extra", "type", "links", "node_uuid", "etag",
)  # fmt: skip
TARGET_FIELDS: Final = (
    "uuid", "created_at", "updated_at", "boot_index", "extra", "properties", "volume_id",
    "volume_type", "links", "node_uuid", "etag",
)  # fmt: skip
serialize.register("connector", _COMMON_VERSIONS, CONNECTOR_FIELDS)
serialize.register("target", _COMMON_VERSIONS, TARGET_FIELDS)

CONNECTORS = Resource(
    kind="connector",
    collection="volume/connectors",
    field_versions=_COMMON_VERSIONS,
    fields=CONNECTOR_FIELDS,
    list_fields=("uuid", "node_uuid", "type", "connector_id"),
    create_schema=CONNECTOR_CREATE,
    patchable=("type", "connector_id", "node_uuid", "extra"),
    sort_keys=("uuid", "type", "connector_id", "created_at", "updated_at"),
    since=versions.VOLUME,
    filters=(("node", versions.VOLUME),),
    service_name="connector",
    backend="volumes",
    list_key="connectors",
    detail_since=versions.VOLUME,
)
TARGETS = Resource(
    kind="target",
    collection="volume/targets",
    field_versions=_COMMON_VERSIONS,
    fields=TARGET_FIELDS,
    list_fields=("uuid", "node_uuid", "volume_type", "boot_index", "volume_id"),
    create_schema=TARGET_CREATE,
    patchable=("volume_type", "properties", "boot_index", "volume_id", "node_uuid", "extra"),
    sort_keys=("uuid", "volume_type", "boot_index", "volume_id", "created_at", "updated_at"),
    since=versions.VOLUME,
    filters=(("node", versions.VOLUME),),
    service_name="target",
    backend="volumes",
    list_key="targets",
    detail_since=versions.VOLUME,
)
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


def _node_scope(node_ident: str) -> dict[str, Any]:
    node = service().get_node(node_ident, project_id=project_id())
    return {"node": serialize.get(node, "uuid")}


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
    scope = _node_scope(node_ident)
    return _BY_NAME[what].index(scope=scope, path=f"nodes/{node_ident}/volume/{what}")


@bp.route("/v1/nodes/<node_ident>/volume/<any(connectors, targets):what>", methods=["POST"])
@bp.route(
    "/v1/nodes/<node_ident>/volume/<any(connectors, targets):what>/<ident>",
    methods=["GET", "PATCH", "DELETE"],
)
def node_volume_item(node_ident: str, what: str, ident: str | None = None) -> Response:
    _gate()
    _node_scope(node_ident)
    raise bad_request("Malformed request URI.", "request.malformed-uri")
