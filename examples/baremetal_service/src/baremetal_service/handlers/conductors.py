"""``/v1/conductors`` (Ironic 1.49): the live conductor hosts.

Declared (fields, versions, sort keys) in :mod:`baremetal_service.objects.conductors`.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from apimw.errors import HTTPProblem
from baremetal_service import versions
from baremetal_service.handlers.common import (
    api_version,
    bad_request,
    check_args,
    json_response,
    make_links,
    next_link,
    parse_bool,
    parse_fields,
    parse_paging,
    require,
    select,
)
from baremetal_service.handlers.context import service
from baremetal_service.handlers.resources import GET_ARGS, LIST_ARGS
from baremetal_service.objects.conductors import CONDUCTORS

bp = Blueprint("conductors", __name__)


def _gate() -> None:
    if api_version() < versions.CONDUCTORS:
        raise HTTPProblem(404, "request.not-found", "The resource could not be found.")


def _doc(conductor: dict[str, Any]) -> dict[str, Any]:
    doc = {k: conductor[k] for k in ("created_at", "updated_at", "hostname", "conductor_group", "drivers")}
    doc["links"] = make_links("conductors", conductor["hostname"])
    doc["alive"] = conductor["alive"]
    return doc


@bp.route("/v1/conductors", methods=["GET"])
def list_conductors() -> Response:
    _gate()
    check_args(LIST_ARGS | {"detail"})
    fields = parse_fields(CONDUCTORS.fields, "conductor")
    detail = parse_bool("detail", request.args.get("detail"))
    if detail is not None:
        require("The 'detail' parameter", versions.DETAIL_QUERY)
        if detail and fields is not None:
            raise bad_request("Can not specify ?detail=True and fields in the same request.")
    paging = parse_paging(CONDUCTORS.sort_keys)
    items = service().conductors.list_conductors(
        limit=paging["limit"], marker=paging["marker"], sort_key=paging["sort_key"],
        sort_dir=paging["sort_dir"],
    )  # fmt: skip
    shown = None if detail else (fields or list(CONDUCTORS.list_fields))
    out: dict[str, Any] = {"conductors": [select(_doc(c), shown) for c in items]}
    full = items and len(items) >= paging["limit"]  # a full page: there may be more
    nxt = next_link(items[-1]["hostname"] if full else None, "conductors", paging, shown or [])
    if nxt:
        out["next"] = nxt
    return json_response(out)


@bp.route("/v1/conductors/<hostname>", methods=["GET"])
def get_conductor(hostname: str) -> Response:
    _gate()
    check_args(GET_ARGS)
    fields = parse_fields(CONDUCTORS.fields, "conductor")
    return json_response(select(_doc(service().conductors.get_conductor(hostname)), fields))
