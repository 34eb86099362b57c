"""``/v1/drivers`` and ``/v1/drivers/{name}``: the enabled hardware types."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from apimw import Version
from baremetal_service import versions
from baremetal_service.handlers import serialize
from baremetal_service.handlers.common import api_version, base_url, json_response, parse_bool, require
from baremetal_service.handlers.context import service

bp = Blueprint("drivers", __name__)

DYNAMIC_DRIVERS = Version(1, 30)
RAID_CONFIG = Version(1, 12)
#: Every interface kind of a driver document and the version it appears at (Ironic's
#: ``hide_fields_in_newer_versions``); the others are there from 1.30 (dynamic drivers).
_INTERFACES: tuple[tuple[str, Version], ...] = (
    ("bios", Version(1, 40)), ("boot", DYNAMIC_DRIVERS), ("console", DYNAMIC_DRIVERS),
    ("deploy", DYNAMIC_DRIVERS), ("firmware", versions.NODE_FIRMWARE), ("inspect", DYNAMIC_DRIVERS),
    ("management", DYNAMIC_DRIVERS), ("network", DYNAMIC_DRIVERS), ("power", DYNAMIC_DRIVERS),
    ("raid", DYNAMIC_DRIVERS), ("rescue", Version(1, 38)), ("storage", Version(1, 33)),
    ("vendor", DYNAMIC_DRIVERS),
)  # fmt: skip


def _doc(driver: Any, detail: bool) -> dict[str, Any]:
    base = base_url()
    name = serialize.get(driver, "name")
    doc: dict[str, Any] = {"hosts": list(serialize.get(driver, "hosts") or [])}
    doc["name"] = name
    served = api_version()
    if served >= DYNAMIC_DRIVERS:
        doc["type"] = "dynamic"
        if detail:
            for iface, since in _INTERFACES:
                if served < since:
                    continue
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


@bp.route("/v1/drivers/<name>/raid/logical_disk_properties", methods=["GET"])
def get_raid_logical_disk_properties(name: str) -> Response:
    require("RAID logical disk properties", RAID_CONFIG)
    return json_response(service().drivers.raid_logical_disk_properties(name))
