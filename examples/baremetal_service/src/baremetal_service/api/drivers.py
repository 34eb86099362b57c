"""``/v1/drivers`` and ``/v1/drivers/{name}``: the enabled hardware types."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from apimw import Version

from . import serialize
from .common import api_version, base_url, json_response, parse_bool, require
from .context import service

bp = Blueprint("drivers", __name__)

DYNAMIC_DRIVERS = Version(1, 30)
_INTERFACES = ("boot", "deploy", "inspect", "management", "power")


def _doc(driver: Any, detail: bool) -> dict[str, Any]:
    base = base_url()
    name = serialize.get(driver, "name")
    doc: dict[str, Any] = {"hosts": list(serialize.get(driver, "hosts") or [])}
    doc["name"] = name
    served = api_version()
    if served >= DYNAMIC_DRIVERS:
        doc["type"] = "dynamic"
        if detail:
            for iface in _INTERFACES:
                doc[f"default_{iface}_interface"] = serialize.get(driver, f"default_{iface}_interface")
                enabled = serialize.get(driver, f"enabled_{iface}_interfaces")
                doc[f"enabled_{iface}_interfaces"] = list(enabled or [])
    doc["links"] = [
        {"href": f"{base}/v1/drivers/{name}", "rel": "self"},
        {"href": f"{base}/drivers/{name}", "rel": "bookmark"},
    ]
    if served >= Version(1, 14):
        doc["properties"] = [
            {"href": f"{base}/v1/drivers/{name}/properties", "rel": "self"},
            {"href": f"{base}/drivers/{name}/properties", "rel": "bookmark"},
        ]
    return doc


@bp.route("/v1/drivers", methods=["GET"])
def list_drivers() -> Response:
    detail = parse_bool("detail", request.args.get("detail"))
    if detail is not None:
        require("The 'detail' parameter on drivers", DYNAMIC_DRIVERS)
    kind = request.args.get("type")
    if kind is not None:
        require("Filtering drivers by type", DYNAMIC_DRIVERS)
    drivers = [] if kind == "classic" else service().list_drivers()
    return json_response({"drivers": [_doc(d, bool(detail)) for d in drivers]})


@bp.route("/v1/drivers/<name>", methods=["GET"])
def get_driver(name: str) -> Response:
    return json_response(_doc(service().get_driver(name), True))


@bp.route("/v1/drivers/<name>/properties", methods=["GET"])
def get_driver_properties(name: str) -> Response:
    return json_response(service().driver_properties(name))
