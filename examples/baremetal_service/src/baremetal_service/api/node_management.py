"""Per-node endpoints Ironic serves beyond CRUD and states, answered through the node's driver.

* ``GET/PUT /v1/nodes/{id}/management/boot_device`` and ``.../boot_device/supported``:
  the hardware type's management interface (fake-hardware keeps the device in
  ``driver_internal_info``; redfish asks the BMC).
* ``GET /v1/nodes/{id}/bios`` (1.40): the BIOS settings the service caches (none: no
  driver here reads BIOS settings, as Ironic's fake BIOS interface before a clean step).
* ``GET /v1/nodes/{id}/children`` (1.83): the nodes whose ``parent_node`` is this one.
* ``GET /v1/nodes/{id}/states/console``: the console state (no console interface here
  starts a console: ``console_enabled`` as stored, ``console_info`` null).
* ``GET /v1/shards`` (1.82): node counts per shard, Ironic's ``"None"`` for unsharded nodes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from flask import Blueprint, Response

from apimw._version import Version

from ..drivers import DriverError, Task
from . import serialize, versions
from .common import api_version, bad_request, base_url, empty_response, json_body, json_response, validate
from .context import if_match, project_id, service

bp = Blueprint("node_management", __name__)

BIOS: Version = Version(1, 40)

_BOOT_DEVICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"boot_device": {"type": "string"}, "persistent": {"type": "boolean"}},
    "required": ["boot_device"],
    "additionalProperties": False,
}


def _not_found() -> Any:
    from werkzeug.exceptions import NotFound

    return NotFound()


def _gate(needed: Version) -> None:
    # Ironic's sub-controllers answer 404 below their version.
    if api_version() < needed:
        raise _not_found()


def _task(ident: str) -> tuple[Any, Task, dict[str, Any]]:
    svc = service()
    node = svc.db.get("node", ident, project_id=project_id())
    hw = svc.drivers.for_node(node["driver"])
    return hw, Task(node=node, driver_internal_info=dict(node.get("driver_internal_info") or {})), node


@bp.route("/v1/nodes/<ident>/management/boot_device", methods=["GET"])
def get_boot_device(ident: str) -> Response:
    hw, task, _node = _task(ident)
    try:
        return json_response(hw.management.get_boot_device(task))
    except DriverError as error:
        raise bad_request(str(error), "baremetal.driver-error") from None


@bp.route("/v1/nodes/<ident>/management/boot_device/supported", methods=["GET"])
def get_supported_boot_devices(ident: str) -> Response:
    hw, task, _node = _task(ident)
    return json_response({"supported_boot_devices": hw.management.get_supported_boot_devices(task)})


@bp.route("/v1/nodes/<ident>/management/boot_device", methods=["PUT"])
def set_boot_device(ident: str) -> Response:
    body = json_body()
    validate(body, _BOOT_DEVICE_SCHEMA, "boot device")
    hw, task, node = _task(ident)
    device, persistent = body["boot_device"], bool(body.get("persistent", False))
    if device not in hw.management.get_supported_boot_devices(task):
        raise bad_request(
            f"Invalid boot device {device} specified for node {node['uuid']}.",
            "baremetal.invalid-boot-device",
        )

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        step = Task(node=current, driver_internal_info=dict(current.get("driver_internal_info") or {}))
        try:
            hw.management.set_boot_device(step, device, persistent)
        except DriverError as error:
            raise bad_request(str(error), "baremetal.driver-error") from None
        return {"driver_internal_info": step.driver_internal_info}

    service().db.update(
        "node", node["uuid"], mutate, if_match=if_match(), project_id=project_id(),
        event_type="baremetal.node.boot_device.set",
    )  # fmt: skip
    return empty_response(204)


@bp.route("/v1/nodes/<ident>/bios", methods=["GET"])
def list_bios(ident: str) -> Response:
    _gate(BIOS)
    service().db.get("node", ident, project_id=project_id())
    return json_response({"bios": []})


@bp.route("/v1/nodes/<ident>/children", methods=["GET"])
def list_children(ident: str) -> Response:
    _gate(versions.PARENT_NODE)
    svc = service()
    node = svc.db.get("node", ident, project_id=project_id())
    uuid = node["uuid"]
    children = svc.list_nodes(project_id=project_id(), filters={"parent_node": uuid}, fields={"uuid"})
    return json_response(
        {
            "children": [c["uuid"] for c in children],
            "links": {"href": f"{base_url()}/v1/nodes?parent_node={uuid}", "rel": "children"},
        }
    )


@bp.route("/v1/nodes/<ident>/states/console", methods=["GET"])
def get_console(ident: str) -> Response:
    node = service().db.get("node", ident, project_id=project_id())
    return json_response(
        {"console_enabled": bool(serialize.get(node, "console_enabled")), "console_info": None}
    )


@bp.route("/v1/shards", methods=["GET"])
def list_shards() -> Response:
    _gate(versions.SHARDS)
    nodes = service().list_nodes(project_id=project_id(), filters={}, fields={"shard"})
    counts = Counter(str(n.get("shard")) for n in nodes)  # None -> "None", as Ironic shows it
    return json_response(
        {"shards": [{"name": name, "count": count} for name, count in sorted(counts.items())]}
    )
