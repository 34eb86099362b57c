"""``GET /v1/nodes/{id}/history`` and ``.../history/{event}`` (microversion 1.78).

Ironic's NodeHistoryController (ironic/api/controllers/v1/node.py): the list shows
``uuid, created_at, severity, event`` (an event longer than 255 characters is cut to
251 plus ``...``); ``?detail=true`` and the single entry show every field, ``project``
from 1.113 and ``state``, ``target_provision_state``, ``duration_seconds`` from 1.115.
Parameters: ``detail``, ``limit``, ``marker``, ``sort_key`` (default ``created_at``),
``sort_dir``; anything else is 400 "Unexpected arguments".  The entries are recorded by
the data layer (:mod:`baremetal_service.db.history`) whenever a failure sets the node's
``last_error``.

One difference: Ironic's ``next`` link repeats ``fields=`` (which its own endpoint refuses
with 400) and ``marker=None``; ours is a link that works (``detail``, ``sort_key``,
``sort_dir``, ``limit``, ``marker``).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlencode

from flask import Blueprint, Response, request
from werkzeug.exceptions import NotFound

from baremetal_service import versions
from baremetal_service.db import history
from baremetal_service.handlers.common import (
    api_version,
    bad_request,
    base_url,
    check_args,
    json_response,
    parse_bool,
    parse_paging,
)
from baremetal_service.handlers.context import project_id, service

bp = Blueprint("node_history", __name__)

NODE_HISTORY: Final = versions.NODE_HISTORY
HISTORY_PROJECT: Final = versions.NODE_HISTORY_PROJECT
HISTORY_FIELDS: Final = versions.NODE_HISTORY_FIELDS

_STANDARD: Final = ("uuid", "created_at", "severity", "event")
_ARGS: Final = frozenset({"detail", "limit", "marker", "sort_key", "sort_dir"})


def _gate() -> None:
    if api_version() < NODE_HISTORY:
        raise NotFound()


def _render(node_uuid: str, entry: dict[str, Any], *, detail: bool) -> dict[str, Any]:
    served = api_version()
    if detail:
        names = list(history.FIELDS)
        if served < HISTORY_PROJECT:
            names.remove("project")
        if served < HISTORY_FIELDS:
            for name in ("state", "target_provision_state", "duration_seconds"):
                names.remove(name)
        doc = {n: entry[n] for n in names}
    else:
        doc = {n: entry[n] for n in _STANDARD}
        if len(doc["event"]) > 255:
            doc["event"] = doc["event"][:251] + "..."
    href = f"{base_url()}/v1/nodes/{node_uuid}/history/{entry['uuid']}"
    doc["links"] = [{"href": href, "rel": "self"}]
    return doc


def _detail() -> bool:
    return bool(parse_bool("detail", request.args.get("detail")))


@bp.route("/v1/nodes/<ident>/history", methods=["GET"])
def list_history(ident: str) -> Response:
    _gate()
    check_args(_ARGS)
    detail = _detail()
    args = request.args
    sort_key = args.get("sort_key", "created_at")
    if sort_key not in history.FIELDS:
        raise bad_request(
            f"The sort_key value {sort_key} is an invalid field for sorting", "request.invalid-parameter"
        )
    paging = parse_paging(history.FIELDS)
    node, entries = service().db.node_history(
        ident,
        project_id=project_id(),
        limit=paging["limit"],
        marker=paging["marker"],
        sort_key=sort_key,
        sort_dir=paging["sort_dir"],
    )
    doc: dict[str, Any] = {"history": [_render(node["uuid"], e, detail=detail) for e in entries]}
    if entries and len(entries) >= paging["limit"]:
        query = {"sort_key": sort_key, "sort_dir": paging["sort_dir"], "limit": str(paging["limit"])}
        if detail:
            query["detail"] = "True"
        query["marker"] = entries[-1]["uuid"]
        doc["next"] = f"{base_url()}/v1/nodes/{node['uuid']}/history?{urlencode(query)}"
    return json_response(doc)


@bp.route("/v1/nodes/<ident>/history/<event>", methods=["GET"])
def get_history_entry(ident: str, event: str) -> Response:
    _gate()
    check_args(frozenset())
    node, entry = service().db.node_history_entry(ident, event, project_id=project_id())
    return json_response(_render(node["uuid"], entry, detail=True))
