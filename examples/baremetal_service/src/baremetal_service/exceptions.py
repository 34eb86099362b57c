"""Domain errors of the bare-metal service.

Every error is an :class:`apimw.errors.HTTPProblem`: it carries the HTTP status,
a stable machine-readable ``code`` (``baremetal.<what>``) and Ironic's own
message text as ``detail`` (so ``faultstring`` reads exactly as Ironic's).
The API layer can let them propagate to an apimw middleware, or render them with
:func:`apimw.errors.respond_with_problem`.  ``extra`` carries structured details
(``allowed_targets`` for an invalid transition, ``field`` for a duplicate...).

Hierarchy::

    BaremetalError(HTTPProblem)
    ├── NotFound (404)              NodeNotFound, PortNotFound, PortgroupNotFound,
    │                               ChassisNotFound, ResourceClassNotFound, DriverNotFound,
    │                               AllocationNotFound, DeployTemplateNotFound, RunbookNotFound
    ├── Conflict (409)              NodeNameExists, NodeUuidExists, InstanceAssociated,
    │                               MACAlreadyExists, PortNameExists, PortgroupNameExists,
    │                               PortgroupMACExists, ChassisUuidExists, PortUuidExists,
    │                               PortgroupUuidExists, ResourceClassExists, ResourceClassInUse,
    │                               NodeLocked, NodeDeleteForbidden, NodeAssociated,
    │                               AllocationDuplicate, AllocationNodeTaken, InvalidState,
    │                               DeployTemplateDuplicate, RunbookDuplicate
    ├── NodeProtected (403)         undeploy, rebuild or delete of a protected node
    ├── PolicyForbidden (403)       a tenancy rule (Ironic's default policy) denies the write
    ├── Invalid (400)               InvalidParameterValue, InvalidStateRequested, NoValidHost,
    │                               ChassisNotEmpty, PortgroupNotEmpty, NodeInMaintenance,
    │                               InvalidResourceClassName, InterfaceNotFound
    ├── PreconditionFailed (412)    a stale If-Match on a write
    └── DatabaseUnavailable (503)   the database cannot be reached now (down, restarting)

A referenced resource that does not exist inside a request body (``node_uuid`` of
a new port, ``chassis_uuid`` of a node) is the *NotFound* error with status 400, as
Ironic answers it (``NodeNotFound(uuid, status=400)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apimw.errors import HTTPProblem

__all__ = [
    "BaremetalError",
    "ChassisNotEmpty",
    "ChassisNotFound",
    "ChassisUuidExists",
    "Conflict",
    "DatabaseUnavailable",
    "DriverNotFound",
    "InstanceAssociated",
    "InterfaceNotFound",
    "Invalid",
    "InvalidParameterValue",
    "InvalidResourceClassName",
    "InvalidStateRequested",
    "MACAlreadyExists",
    "NoValidHost",
    "NodeAssociated",
    "NodeDeleteForbidden",
    "NodeInMaintenance",
    "NodeLocked",
    "NodeNameExists",
    "NodeProtected",
    "NodeNotFound",
    "NodeUuidExists",
    "NotFound",
    "PolicyForbidden",
    "PortNameExists",
    "PortNotFound",
    "PortUuidExists",
    "PortgroupMACExists",
    "PortgroupNameExists",
    "PortgroupNotEmpty",
    "PortgroupNotFound",
    "PortgroupUuidExists",
    "PreconditionFailed",
    "ResourceClassExists",
    "ResourceClassInUse",
    "ResourceClassNotFound",
    "AllocationDuplicate",
    "AllocationNodeTaken",
    "AllocationNotFound",
    "DeployTemplateDuplicate",
    "DeployTemplateNotFound",
    "InvalidState",
    "RunbookDuplicate",
    "RunbookNotFound",
    "InspectionRuleNotFound",
    "InspectionRuleUuidExists",
    "NodeStateForbidsAction",
    "VolumeConnectorNotFound",
    "VolumeConnectorTypeAndIdExists",
    "VolumeConnectorUuidExists",
    "VolumeTargetBootIndexExists",
    "VolumeTargetNotFound",
    "VolumeTargetUuidExists",
]


#: Longest quotation of a client-supplied value in a message (longer ones are cut, with "...").
MAX_QUOTED_CHARS = 100


def _cut(value: object) -> str:
    """*value* as text, cut to :data:`MAX_QUOTED_CHARS`: an error never echoes a whole input."""
    text = str(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[:MAX_QUOTED_CHARS] + "..."


class BaremetalError(HTTPProblem):
    """Base of every domain error: ``status``, ``code``, ``detail`` (Ironic's text)."""

    status_code: int = 500
    error_code: str = "baremetal.error"

    def __init__(self, detail: str, *, status: int | None = None, **extra: Any) -> None:
        super().__init__(status or self.status_code, self.error_code, detail, extra=extra)


class NotFound(BaremetalError):
    status_code = 404
    error_code = "baremetal.not-found"


class Conflict(BaremetalError):
    status_code = 409
    error_code = "baremetal.conflict"


class Invalid(BaremetalError):
    status_code = 400
    error_code = "baremetal.invalid"


class PreconditionFailed(BaremetalError):
    """The If-Match etag(s) do not match the resource's current etag (checked atomically).

    Same code as the etag middleware's own 412 (``etag.precondition-failed``), so a
    client sees one code whichever layer caught the stale etag.
    """

    status_code = 412
    error_code = "etag.precondition-failed"

    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(
            f"The {kind} {_cut(ident)} was modified since you read it: the If-Match etag does not "
            "match its current etag. Fetch it again, then retry with the new etag.",
            resource=kind,
        )


class DatabaseUnavailable(BaremetalError):
    """The database cannot be used now (down, restarting, out of connections): retry later.

    The API answers it for the database errors :func:`baremetal_service.db.engine.is_unavailable`
    recognises, instead of a 500: nothing about the server leaks into the body.  A create
    retried with the same ``X-Client-Token`` cannot run twice (the recorded client token).
    """

    status_code = 503
    error_code = "baremetal.database-unavailable"
    #: seconds, the Retry-After header
    retry_after = 2

    def __init__(self) -> None:
        HTTPProblem.__init__(
            self, self.status_code, self.error_code,
            "The database is temporarily unavailable. Retry later.",
            headers=[("Retry-After", str(self.retry_after))],
        )  # fmt: skip


# -- 404 ---------------------------------------------------------------------


class NodeNotFound(NotFound):
    error_code = "baremetal.node-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Node {_cut(ident)} could not be found.", status=status)


class PortNotFound(NotFound):
    error_code = "baremetal.port-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Port {_cut(ident)} could not be found.", status=status)


class PortgroupNotFound(NotFound):
    error_code = "baremetal.portgroup-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Portgroup {_cut(ident)} could not be found.", status=status)


class ChassisNotFound(NotFound):
    error_code = "baremetal.chassis-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Chassis {_cut(ident)} could not be found.", status=status)


class ResourceClassNotFound(NotFound):
    error_code = "baremetal.resource-class-not-found"

    def __init__(self, name: str) -> None:
        super().__init__(f"No such resource class {_cut(name)}.")


class DriverNotFound(NotFound):
    error_code = "baremetal.driver-not-found"

    def __init__(self, name: str) -> None:
        super().__init__(f"Could not find the following driver(s) or hardware type(s): {_cut(name)}.")


# -- 409 ---------------------------------------------------------------------


class NodeNameExists(Conflict):
    error_code = "baremetal.node-duplicate-name"

    def __init__(self, name: str) -> None:
        super().__init__(f"A node with name {_cut(name)} already exists.", field="name")


class NodeUuidExists(Conflict):
    error_code = "baremetal.node-duplicate-uuid"

    def __init__(self, uuid: str) -> None:
        super().__init__(f"A node with UUID {_cut(uuid)} already exists.", field="uuid")


class InstanceAssociated(Conflict):
    error_code = "baremetal.instance-associated"

    def __init__(self, instance_uuid: str, node: str) -> None:
        super().__init__(
            f"Instance {_cut(instance_uuid)} is already associated with a node, "
            f"it cannot be associated with this other node {_cut(node)}",
            field="instance_uuid",
        )


class NodeAssociated(Conflict):
    error_code = "baremetal.node-associated"

    def __init__(self, node: str, instance: str) -> None:
        super().__init__(f"Node {_cut(node)} is associated with instance {_cut(instance)}.")


class MACAlreadyExists(Conflict):
    error_code = "baremetal.port-duplicate-mac"

    def __init__(self, mac: str) -> None:
        super().__init__(f"A port with MAC address {_cut(mac)} already exists.", field="address")


class PortUuidExists(Conflict):
    error_code = "baremetal.port-duplicate-uuid"

    def __init__(self, uuid: str) -> None:
        super().__init__(f"A port with UUID {_cut(uuid)} already exists.", field="uuid")


class PortNameExists(Conflict):
    error_code = "baremetal.port-duplicate-name"

    def __init__(self, name: str) -> None:
        super().__init__(f"A port with name {_cut(name)} already exists.", field="name")


class PortgroupNameExists(Conflict):
    error_code = "baremetal.portgroup-duplicate-name"

    def __init__(self, name: str) -> None:
        super().__init__(f"A portgroup with name {_cut(name)} already exists.", field="name")


class PortgroupMACExists(Conflict):
    error_code = "baremetal.portgroup-duplicate-mac"

    def __init__(self, mac: str) -> None:
        super().__init__(f"A portgroup with MAC address {_cut(mac)} already exists.", field="address")


class PortgroupUuidExists(Conflict):
    error_code = "baremetal.portgroup-duplicate-uuid"

    def __init__(self, uuid: str) -> None:
        super().__init__(f"A portgroup with UUID {_cut(uuid)} already exists.", field="uuid")


class ChassisUuidExists(Conflict):
    error_code = "baremetal.chassis-duplicate-uuid"

    def __init__(self, uuid: str) -> None:
        super().__init__(f"A chassis with UUID {_cut(uuid)} already exists.", field="uuid")


class ResourceClassExists(Conflict):
    error_code = "baremetal.resource-class-exists"

    def __init__(self, name: str) -> None:
        super().__init__(f"Resource class {_cut(name)} already exists.")


class ResourceClassInUse(Conflict):
    error_code = "baremetal.resource-class-in-use"

    def __init__(self, name: str) -> None:
        super().__init__(f"Resource class {_cut(name)} is in use by one or more nodes and cannot be deleted.")


class NodeLocked(Conflict):
    error_code = "baremetal.node-locked"

    def __init__(self, node: str, host: str) -> None:
        super().__init__(
            f"Node {_cut(node)} is locked by host {_cut(host)}, "
            "please retry after the current operation is completed."
        )


#: Ironic's list, printed as a Python tuple in its message.
DELETE_ALLOWED_STATES = ("manageable", "enroll", "adopt failed", "available")


class NodeDeleteForbidden(Conflict):
    error_code = "baremetal.node-delete-forbidden"

    def __init__(self, node: str, state: str) -> None:
        super().__init__(
            f'Can not delete node "{_cut(node)}" while it is in provision state "{state}". '
            f'Valid provision states to perform deletion are: "{DELETE_ALLOWED_STATES}", '
            "or set the node into maintenance mode",
            provision_state=state,
            allowed_states=list(DELETE_ALLOWED_STATES),
        )


# -- 403 ---------------------------------------------------------------------


class NodeProtected(BaremetalError):
    status_code = 403
    error_code = "baremetal.node-protected"

    def __init__(self, node: str) -> None:
        super().__init__(f"Node {_cut(node)} is protected and cannot be undeployed, rebuilt or deleted")


class PolicyForbidden(BaremetalError):
    """Ironic's policy denial: the caller may see the resource but not make this write.

    *rule* is the name of Ironic's policy rule (``baremetal:node:update:owner``...), in
    the text as Ironic words it and in ``extra["rule"]``.
    """

    status_code = 403
    error_code = "baremetal.forbidden"

    def __init__(self, rule: str) -> None:
        super().__init__(f"Access was denied to the following resource: {rule}", rule=rule)


# -- 400 ---------------------------------------------------------------------


class InvalidParameterValue(Invalid):
    error_code = "baremetal.invalid-parameter"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail, **extra)


class InvalidStateRequested(Invalid):
    """A provision action not allowed from the node's state; names the allowed ones."""

    error_code = "baremetal.invalid-state-transition"

    def __init__(self, action: str, node: str, state: str, allowed: Iterable[str]) -> None:
        allowed = sorted(allowed)
        names = ", ".join(allowed) if allowed else "none"
        super().__init__(
            f'The requested action "{action}" can not be performed on node "{_cut(node)}" '
            f'while it is in state "{state}". Allowed actions from this state: {names}.',
            action=action,
            provision_state=state,
            allowed_targets=allowed,
        )


class NoValidHost(Invalid):
    """Unknown or not-enabled driver on create/update (Ironic's wording)."""

    error_code = "baremetal.unknown-driver"

    def __init__(self, driver: str) -> None:
        super().__init__(
            "No valid host was found. Reason: No conductor service registered which "
            f'supports driver {_cut(driver)} for conductor group "". Ensure the driver is '
            "valid and enabled.",
            driver=driver,
        )


class InterfaceNotFound(Invalid):
    error_code = "baremetal.unknown-interface"

    def __init__(self, kind: str, value: str, valid: Iterable[str]) -> None:
        super().__init__(
            f"Could not find the following interface in the "
            f"'ironic.hardware.interfaces.{kind}' entrypoint: {_cut(value)}. "
            f"Valid interfaces are {sorted(valid)}.",
            interface=kind,
        )


class ChassisNotEmpty(Invalid):
    error_code = "baremetal.chassis-not-empty"

    def __init__(self, chassis: str) -> None:
        super().__init__(
            f"Cannot complete the requested action because chassis {_cut(chassis)} contains nodes."
        )


class PortgroupNotEmpty(Invalid):
    error_code = "baremetal.portgroup-not-empty"

    def __init__(self, portgroup: str) -> None:
        super().__init__(
            f"Cannot complete the requested action because portgroup {_cut(portgroup)} contains ports."
        )


class NodeInMaintenance(Invalid):
    error_code = "baremetal.node-in-maintenance"

    def __init__(self, op: str, node: str) -> None:
        super().__init__(
            f"The {op} operation can't be performed on node {_cut(node)} because it's in maintenance mode."
        )


class InvalidResourceClassName(Invalid):
    error_code = "baremetal.invalid-resource-class"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"Invalid resource class name {_cut(repr(name))}: custom resource classes must match "
            "CUSTOM_[A-Z0-9_]+ and be at most 255 characters long."
        )


# -- allocations, deploy templates, runbooks (Ironic's texts) -----------------------------------


class AllocationNotFound(NotFound):
    error_code = "baremetal.allocation-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Allocation {_cut(ident)} could not be found.", status=status)


class DeployTemplateNotFound(NotFound):
    error_code = "baremetal.deploy-template-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Deploy template {_cut(ident)} could not be found.", status=status)


class RunbookNotFound(NotFound):
    error_code = "baremetal.runbook-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Runbook {_cut(ident)} could not be found.", status=status)


class AllocationDuplicate(Conflict):
    error_code = "baremetal.allocation-duplicate"

    def __init__(self, value: object) -> None:
        super().__init__(f"An allocation with name or UUID {_cut(value)} already exists.")


class AllocationNodeTaken(Conflict):
    """Another allocation holds the node (the unique ``allocations.node_id`` decided)."""

    error_code = "baremetal.node-associated"

    def __init__(self, value: object) -> None:
        super().__init__("The node is already associated with another allocation.")


class DeployTemplateDuplicate(Conflict):
    error_code = "baremetal.deploy-template-duplicate"

    def __init__(self, value: object) -> None:
        super().__init__(f"A deploy template with name or UUID {_cut(value)} already exists.")


class RunbookDuplicate(Conflict):
    error_code = "baremetal.runbook-duplicate"

    def __init__(self, value: object) -> None:
        super().__init__(f"A runbook with name or UUID {_cut(value)} already exists.")


class InvalidState(Conflict):
    error_code = "baremetal.invalid-state"


# -- volume connectors and targets, inspection rules (Ironic's texts) ---------------------------


class VolumeConnectorNotFound(NotFound):
    error_code = "baremetal.volume-connector-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Volume connector {_cut(ident)} could not be found.", status=status)


class VolumeTargetNotFound(NotFound):
    error_code = "baremetal.volume-target-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Volume target {_cut(ident)} could not be found.", status=status)


class InspectionRuleNotFound(NotFound):
    error_code = "baremetal.inspection-rule-not-found"

    def __init__(self, ident: str, *, status: int | None = None) -> None:
        super().__init__(f"Rule {_cut(ident)} could not be found.", status=status)


class VolumeConnectorUuidExists(Conflict):
    error_code = "baremetal.volume-connector-duplicate-uuid"

    def __init__(self, uuid: object) -> None:
        super().__init__(f"A volume connector with UUID {_cut(uuid)} already exists.")


class VolumeConnectorTypeAndIdExists(Conflict):
    """Another connector has this ``(type, connector_id)`` (built from the whole document)."""

    error_code = "baremetal.volume-connector-duplicate"

    def __init__(self, doc: Any) -> None:
        super().__init__(
            f"A volume connector with type {_cut(doc.get('type'))} and connector ID "
            f"{_cut(doc.get('connector_id'))} already exists."
        )


class VolumeTargetUuidExists(Conflict):
    error_code = "baremetal.volume-target-duplicate-uuid"

    def __init__(self, uuid: object) -> None:
        super().__init__(f"A volume target with UUID {_cut(uuid)} already exists.")


class VolumeTargetBootIndexExists(Conflict):
    error_code = "baremetal.volume-target-duplicate-boot-index"

    def __init__(self, boot_index: object) -> None:
        super().__init__(
            f"A volume target with boot index '{_cut(boot_index)}' for the same node already exists."
        )


class InspectionRuleUuidExists(Conflict):
    error_code = "baremetal.inspection-rule-duplicate"

    def __init__(self, uuid: object) -> None:
        super().__init__(f"An inspection rule with UUID {_cut(uuid)} already exists.")


class NodeStateForbidsAction(Invalid):
    """Ironic's InvalidStateRequested for a node-bound action (no provision verbs to list).

    Volume connectors and targets change only while their node is powered off (and
    are deleted only then, or while the node is enroll/manageable/adopt failed).
    """

    error_code = "baremetal.invalid-node-state"

    def __init__(self, action: str, node: str, state: object) -> None:
        super().__init__(
            f'The requested action "{action}" can not be performed on node "{_cut(node)}" '
            f'while it is in state "{state}".',
            action=action,
            state=state,
        )
