"""Per-node endpoints Ironic serves beyond CRUD and states, answered through the node's driver.

* ``GET/PUT /v1/nodes/{id}/management/boot_device`` and ``.../boot_device/supported``:
  the hardware type's management interface (fake-hardware keeps the device in
  ``driver_internal_info``; redfish asks the BMC).
* ``GET /v1/nodes/{id}/bios`` (1.40): the BIOS settings the service caches (none: no
  driver here reads BIOS settings, as Ironic's fake BIOS interface before a clean step).
* ``GET /v1/nodes/{id}/children`` (1.83): the nodes whose ``parent_node`` is this one.
* ``GET/PUT /v1/nodes/{id}/states/console``: the console state; enabling or disabling
  (202) sets ``console_enabled`` on the node, as Ironic's fake console does (its
  ``console_info`` is ``{}`` while enabled); a node with ``no-console`` is 400.
* ``PUT /v1/nodes/{id}/states/raid`` (1.12): the driver validates the RAID configuration
  (Ironic's schema, one root volume at most) and the node stores it as
  ``target_raid_config``; ``{}`` clears it; a node with ``no-raid`` is 404.
* ``PUT /v1/nodes/{id}/states/boot_mode`` and ``.../states/secure_boot`` (1.76, 404 below):
  202, and the management interface is asked to change it (fake-hardware cannot: the node's
  ``last_error`` says so, as Ironic's conductor writes it); 409 while the node is in a
  transitional provision state.  ``PUT`` on any other ``.../states/<name>`` is 405.
* ``GET /v1/nodes/{id}/management/indicators`` and ``GET/PUT .../indicators/{name@component}``:
  the management interface's indicators (fake-hardware: Ironic's two fake LEDs, always
  ``on``, none settable).
* ``GET /v1/nodes/{id}/vendor_passthru/methods`` and ``/v1/nodes/{id}/vendor_passthru?method=``:
  the vendor interface's passthru methods (fake-hardware: Ironic's FakeVendorB); a
  synchronous method answers 200 with its return value, an asynchronous one 202.
* ``GET /v1/shards`` (1.82): node counts per shard, Ironic's ``"None"`` for unsharded nodes.
* ``POST /v1/events`` (1.54): external (network) events, checked against Ironic's schema,
  logged and answered 204 -- what Ironic 39.0 does with them.
"""

from __future__ import annotations

import logging
import re
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

import jsonschema
from flask import Blueprint, Response, request
from werkzeug.exceptions import MethodNotAllowed, NotFound

from apimw import Version
from apimw.errors import HTTPProblem
from baremetal_service import exceptions as exc
from baremetal_service import versions
from baremetal_service.conductor.states import STEPS
from baremetal_service.drivers import DriverError, NotSupportedByDriver, Task
from baremetal_service.handlers import serialize
from baremetal_service.handlers.common import (
    api_version,
    bad_request,
    base_url,
    empty_response,
    json_body,
    json_response,
    location,
    require,
    validate,
)
from baremetal_service.handlers.context import if_match, project_id, service

LOG = logging.getLogger(__name__)

bp = Blueprint("node_management", __name__)

BIOS: Version = Version(1, 40)
RAID: Final = Version(1, 12)

BOOT_DEVICE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"boot_device": {"type": "string"}, "persistent": {"type": "boolean"}},
    "required": ["boot_device"],
    "additionalProperties": False,
}


def _gate(needed: Version) -> None:
    # Ironic's sub-controllers answer 404 below their version.
    if api_version() < needed:
        raise NotFound()


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
    validate(body, BOOT_DEVICE_SCHEMA, "boot device")
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
    enabled = bool(serialize.get(node, "console_enabled"))
    # Ironic's fake console answers {} for get_console while the console is on
    return json_response({"console_enabled": enabled, "console_info": {} if enabled else None})


@bp.route("/v1/shards", methods=["GET"])
def list_shards() -> Response:
    _gate(versions.SHARDS)
    nodes = service().list_nodes(project_id=project_id(), filters={}, fields={"shard"})
    counts = Counter(str(n.get("shard")) for n in nodes)  # None -> "None", as Ironic shows it
    return json_response(
        {"shards": [{"name": name, "count": count} for name, count in sorted(counts.items())]}
    )


# -- helpers for the driver-backed actions -------------------------------------------------------


def _unsupported(node: dict[str, Any], kind: str) -> bool:
    """The node's *kind* interface is a ``no-`` one (Ironic's UnsupportedDriverExtension)."""
    return str(node.get(f"{kind}_interface") or "").startswith("no-")


def _driver_problem(error: DriverError, status: int = 400) -> HTTPProblem:
    code = (
        "baremetal.unsupported-driver-extension"
        if isinstance(error, NotSupportedByDriver)
        else "baremetal.driver-error"
    )
    return HTTPProblem(status, code, str(error))


def _ironic_bool(name: str, value: Any) -> bool:
    """Ironic's ``args.boolean``: a JSON boolean or one of its strings."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "t", "true", "on", "y", "yes"):
        return True
    if text in ("0", "f", "false", "off", "n", "no"):
        return False
    raise bad_request(
        f"Invalid {name}: Unrecognized value {str(value)[:64]!r}, acceptable values are: '0', '1', "
        "'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'",
        "request.invalid-parameter",
    )


def _write_unlocked(node: dict[str, Any], changes: dict[str, Any], event_type: str) -> None:
    """Store *changes* on an unreserved node (Ironic's exclusive task: 409 when locked)."""

    def locked(current: dict[str, Any]) -> None:
        if current.get("reservation"):
            raise exc.NodeLocked(current["uuid"], current["reservation"])

    def mutate(current: dict[str, Any]) -> dict[str, Any]:
        locked(current)
        return changes

    service().db.update(
        "node", node["uuid"], mutate, if_match=if_match(), project_id=project_id(),
        event_type=event_type, match={"reservation": None}, on_conflict=locked,
    )  # fmt: skip


# -- console ---------------------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/states/console", methods=["PUT"])
def set_console(ident: str) -> Response:
    body = json_body()
    if not isinstance(body, dict) or "enabled" not in body:
        raise bad_request("Missing mandatory parameter: enabled", "request.missing-parameter")
    enabled = _ironic_bool("enabled", body["enabled"])
    node = service().db.get("node", ident, project_id=project_id())
    if _unsupported(node, "console"):
        raise _driver_problem(NotSupportedByDriver(node["driver"], "console"))
    # Already in that state: nothing is written, but the node lock and If-Match are still
    # checked (an empty change set writes nothing), as Ironic takes the node's lock first.
    changes = {"console_enabled": enabled} if bool(node.get("console_enabled")) != enabled else {}
    _write_unlocked(node, changes, "baremetal.node.console_set.end")
    return empty_response(202, [location("nodes", ident, "states", "console")])


# -- RAID ------------------------------------------------------------------------------------------


@bp.route("/v1/nodes/<ident>/states/raid", methods=["PUT"])
def set_raid(ident: str) -> Response:
    require("Setting the target RAID configuration", RAID)
    config = json_body()
    if not isinstance(config, dict):
        raise bad_request(
            f"Expected types <class 'dict'> for target_raid_config: {str(config)[:200]}",
            "request.invalid-parameter",
        )
    hw, task, node = _task(ident)
    if _unsupported(node, "raid"):
        raise _driver_problem(NotSupportedByDriver(node["driver"], "raid"), 404)
    if config:  # Ironic validates only a non-empty configuration
        try:
            hw.validate_raid_config(task, config)
        except DriverError as error:
            raise _driver_problem(error) from None
    _write_unlocked(node, {"target_raid_config": config}, "baremetal.node.raid_config.set")
    return empty_response(204)


@bp.route("/v1/nodes/<ident>/states/<name>", methods=["PUT"])
def put_other_state(ident: str, name: str) -> Response:
    # Ironic's states controller takes PUT on its named states only
    raise MethodNotAllowed(valid_methods=[])


# -- boot mode and secure boot (1.76) -------------------------------------------------------------

BOOT_MODES: Final = ("bios", "uefi")
_INVALID: Final = "request.invalid-parameter"
#: The provision states a node leaves by itself (the conductor's): no boot change meanwhile.
_TRANSITIONAL: Final = frozenset(STEPS)


def _state_target() -> Any:
    body = json_body()
    if not isinstance(body, dict) or body.get("target") is None:
        raise bad_request("Missing mandatory parameter: target", "request.missing-parameter")
    return body["target"]


def _boot_change(ident: str, change: str) -> tuple[Any, Task, dict[str, Any]]:
    """The node's driver, task and row, once Ironic's checks pass (version, state)."""
    hw, task, node = _task(ident)
    if api_version() < versions.NODE_CHANGE_BOOT_MODE:
        raise exc.NotFound(
            f"This endpoint is supported starting with the API version {versions.NODE_CHANGE_BOOT_MODE}"
        )
    if node.get("provision_state") in _TRANSITIONAL:
        raise exc.InvalidState(
            f"Node is in {node['provision_state']} state. Since node is transitioning, the {change} "
            "will not be set as this may interfere with ongoing changes and result in erroneous "
            "modification. Try again later."
        )
    return hw, task, node


@bp.route("/v1/nodes/<ident>/states/boot_mode", methods=["PUT"])
def set_boot_mode(ident: str) -> Response:
    target = _state_target()
    if not isinstance(target, str):
        raise bad_request(f"Invalid target: Expected string, got {str(target)[:64]!r}", _INVALID)
    hw, task, node = _boot_change(ident, "boot mode")
    if target not in BOOT_MODES:
        allowed = ", ".join(BOOT_MODES)
        message = f"Invalid boot mode {target[:64]} requested for node. Allowed boot modes are: {allowed}"
        raise bad_request(message, _INVALID)
    return _boot_setting(
        ident, node, lambda: hw.management.set_boot_mode(task, target), "boot_mode", target,
        f"Failed to change boot mode to '{target}",
    )  # fmt: skip


@bp.route("/v1/nodes/<ident>/states/secure_boot", methods=["PUT"])
def set_secure_boot(ident: str) -> Response:
    target = _ironic_bool("target", _state_target())
    hw, task, node = _boot_change(ident, "boot mode")
    return _boot_setting(
        ident, node, lambda: hw.management.set_secure_boot_state(task, target), "secure_boot", target,
        f"Failed to change secure_boot state to '{target}'",
    )  # fmt: skip


def _boot_setting(
    ident: str, node: dict[str, Any], apply: Callable[[], None], field: str, target: Any, failure: str
) -> Response:
    """Apply a boot setting through the driver and record it (or, when the driver cannot,
    ``last_error`` as ``<failure>: <error>``, Ironic's wording): 202."""
    try:
        apply()
        changes: dict[str, Any] = {field: target, "last_error": None}
    except DriverError as error:
        changes = {"last_error": f"{failure}: {error}"}
    _write_unlocked(node, changes, f"baremetal.node.{field}.set")
    return empty_response(202, [location("nodes", ident, "states")])


# -- indicators ------------------------------------------------------------------------------------


def _indicator_links(uuid: str, name: str) -> list[dict[str, str]]:
    base = base_url()
    path = f"nodes/{uuid}/management/indicators/{name}"
    return [{"href": f"{base}/v1/{path}", "rel": "self"}, {"href": f"{base}/{path}", "rel": "bookmark"}]


def _split_indicator(unique: str) -> tuple[str, str]:
    name, sep, component = unique.partition("@")
    if not sep:
        raise bad_request(f'Malformed indicator name "{unique[:255]}"', "request.invalid-parameter")
    return name, component


@bp.route("/v1/nodes/<ident>/management/indicators", methods=["GET"])
def list_indicators(ident: str) -> Response:
    hw, task, node = _task(ident)
    found = []
    for component, names in hw.management.get_supported_indicators(task).items():
        for name, info in names.items():
            unique = f"{name}@{component}"
            found.append({
                "name": unique, "component": component,
                "readonly": info.get("readonly", True), "states": list(info.get("states", [])),
                "links": _indicator_links(ident, unique),
            })  # fmt: skip
    return json_response({"indicators": found})


@bp.route("/v1/nodes/<ident>/management/indicators/<indicator>", methods=["GET"])
def get_indicator(ident: str, indicator: str) -> Response:
    hw, task, _node = _task(ident)
    name, component = _split_indicator(indicator)
    try:
        return json_response({"state": hw.management.get_indicator_state(task, component, name)})
    except DriverError as error:
        raise _driver_problem(error) from None


@bp.route("/v1/nodes/<ident>/management/indicators/<indicator>", methods=["PUT"])
def set_indicator(ident: str, indicator: str) -> Response:
    body = json_body()
    state = body.get("state") if isinstance(body, dict) else None
    if not isinstance(state, str):
        raise bad_request("Missing mandatory parameter: state", "request.missing-parameter")
    hw, task, _node = _task(ident)
    name, component = _split_indicator(indicator)
    try:
        hw.management.set_indicator_state(task, component, name, state)
    except DriverError as error:
        raise _driver_problem(error) from None
    return empty_response(204)


# -- vendor passthru -------------------------------------------------------------------------------


def _vendor_methods(hw: Any, node: dict[str, Any]) -> Any:
    if _unsupported(node, "vendor"):
        raise _driver_problem(NotSupportedByDriver(node["driver"], "vendor"))
    return hw.vendor_methods()


@bp.route("/v1/nodes/<ident>/vendor_passthru/methods", methods=["GET"])
def vendor_methods(ident: str) -> Response:
    hw, _task_, node = _task(ident)
    methods = _vendor_methods(hw, node)
    return json_response({name: m.metadata() for name, m in sorted(methods.items())})


@bp.route("/v1/nodes/<ident>/vendor_passthru", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
def vendor_passthru(ident: str) -> Response:
    name = request.args.get("method")
    if not name:
        raise bad_request("Missing mandatory parameter: method", "request.missing-parameter")
    data = json_body(allow_empty=True) if request.method != "GET" else None
    hw, task, node = _task(ident)
    method = _vendor_methods(hw, node).get(name)
    if method is None:
        raise bad_request(f"No handler for method {name[:255]}", "baremetal.no-vendor-handler")
    if request.method not in method.http_methods:
        raise bad_request(
            f"The method {name} does not support HTTP {request.method}", "baremetal.vendor-http-method"
        )
    try:
        result = method.call(task, data if isinstance(data, dict) else {})
    except DriverError as error:
        raise _driver_problem(error) from None
    if method.async_call:
        return empty_response(202)
    return json_response(result)


# -- events ----------------------------------------------------------------------------------------

#: Ironic's schema for POST /v1/events (ironic/api/schemas/v1/event.py).
EVENTS_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "events": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "event": {
                        "type": "string",
                        "enum": ["network.bind_port", "network.unbind_port", "network.delete_port"],
                    },
                    "port_id": {"type": "string", "format": "uuid"},
                    "mac_address": {"type": "string", "format": "mac-address"},
                    "status": {"type": "string"},
                    "device_id": {"type": ["string", "null"], "format": "uuid"},
                    "binding:host_id": {"type": ["string", "null"], "format": "uuid"},
                    "binding:vnic_type": {"type": ["string", "null"]},
                },
                "required": ["event", "port_id", "mac_address", "status"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["events"],
    "additionalProperties": False,
}
_FORMATS = jsonschema.FormatChecker()


@_FORMATS.checks("mac-address")
def _is_mac(value: object) -> bool:
    return not isinstance(value, str) or bool(re.fullmatch(r"([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}", value))


@_FORMATS.checks("uuid")
def _is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        uuidlib.UUID(value)
    except ValueError:
        return False
    return True


_EVENTS_VALIDATOR: Final = jsonschema.Draft4Validator(EVENTS_SCHEMA, format_checker=_FORMATS)


@bp.route("/v1/events", methods=["POST"])
def post_events() -> Response:
    if api_version() < versions.EVENTS:
        raise HTTPProblem(404, "request.not-found", "The API is not supported for this version")
    body = json_body()
    error = jsonschema.exceptions.best_match(_EVENTS_VALIDATOR.iter_errors(body))
    if error is not None:
        raise bad_request(f"Schema error: {error.message[:500]}", "request.schema")
    for event in body["events"]:
        LOG.debug("Received external event: %s %s", event["event"], event["port_id"])
    return empty_response(204)
