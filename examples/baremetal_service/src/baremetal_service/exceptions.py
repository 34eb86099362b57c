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


def cut(value: object) -> str:
    """*value* as text, cut to :data:`MAX_QUOTED_CHARS`: an error never echoes a whole input."""
    text = str(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[:MAX_QUOTED_CHARS] + "..."


class BaremetalError(HTTPProblem):
    """Base of every domain error: ``status``, ``code``, ``detail`` (Ironic's text).

    A subclass names its code and, as Placement's errors do, its message: :attr:`msg_fmt`
    is formatted with the positional arguments (``{0}``, ``{1}``...), each cut to
    :data:`MAX_QUOTED_CHARS`; without one, the single positional argument is the message
    as given.  *status* overrides the class's status (a missing reference in a body is a
    400); keywords go to ``extra``, after the class's :attr:`field`.
    """

    status_code: int = 500
    error_code: str = "baremetal.error"
    #: the message, ``str.format``-ted with the (cut) positional arguments; "" = the message is given
    msg_fmt: str = ""
    #: the request field a duplicate is about: ``extra["field"]``
    field: str | None = None

    def __init__(self, *args: object, status: int | None = None, **extra: Any) -> None:
        if self.msg_fmt:
            detail = self.msg_fmt.format(*map(cut, args))
        else:
            (detail,) = args
        if self.field is not None:
            extra = {"field": self.field, **extra}
        super().__init__(status or self.status_code, self.error_code, str(detail), extra=extra)


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
            f"The {kind} {cut(ident)} was modified since you read it: the If-Match etag does not "
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
    msg_fmt = "Node {0} could not be found."


class PortNotFound(NotFound):
    error_code = "baremetal.port-not-found"
    msg_fmt = "Port {0} could not be found."


class PortgroupNotFound(NotFound):
    error_code = "baremetal.portgroup-not-found"
    msg_fmt = "Portgroup {0} could not be found."


class ChassisNotFound(NotFound):
    error_code = "baremetal.chassis-not-found"
    msg_fmt = "Chassis {0} could not be found."


class ResourceClassNotFound(NotFound):
    error_code = "baremetal.resource-class-not-found"
    msg_fmt = "No such resource class {0}."


class DriverNotFound(NotFound):
    error_code = "baremetal.driver-not-found"
    msg_fmt = "Could not find the following driver(s) or hardware type(s): {0}."


# -- 409 ---------------------------------------------------------------------


class NodeNameExists(Conflict):
    error_code = "baremetal.node-duplicate-name"
    msg_fmt = "A node with name {0} already exists."
    field = "name"


class NodeUuidExists(Conflict):
    error_code = "baremetal.node-duplicate-uuid"
    msg_fmt = "A node with UUID {0} already exists."
    field = "uuid"


class InstanceAssociated(Conflict):
    error_code = "baremetal.instance-associated"
    msg_fmt = (
        "Instance {0} is already associated with a node, it cannot be associated with this other node {1}"
    )
    field = "instance_uuid"


class NodeAssociated(Conflict):
    error_code = "baremetal.node-associated"
    msg_fmt = "Node {0} is associated with instance {1}."


class MACAlreadyExists(Conflict):
    error_code = "baremetal.port-duplicate-mac"
    msg_fmt = "A port with MAC address {0} already exists."
    field = "address"


class PortUuidExists(Conflict):
    error_code = "baremetal.port-duplicate-uuid"
    msg_fmt = "A port with UUID {0} already exists."
    field = "uuid"


class PortNameExists(Conflict):
    error_code = "baremetal.port-duplicate-name"
    msg_fmt = "A port with name {0} already exists."
    field = "name"


class PortgroupNameExists(Conflict):
    error_code = "baremetal.portgroup-duplicate-name"
    msg_fmt = "A portgroup with name {0} already exists."
    field = "name"


class PortgroupMACExists(Conflict):
    error_code = "baremetal.portgroup-duplicate-mac"
    msg_fmt = "A portgroup with MAC address {0} already exists."
    field = "address"


class PortgroupUuidExists(Conflict):
    error_code = "baremetal.portgroup-duplicate-uuid"
    msg_fmt = "A portgroup with UUID {0} already exists."
    field = "uuid"


class ChassisUuidExists(Conflict):
    error_code = "baremetal.chassis-duplicate-uuid"
    msg_fmt = "A chassis with UUID {0} already exists."
    field = "uuid"


class ResourceClassExists(Conflict):
    error_code = "baremetal.resource-class-exists"
    msg_fmt = "Resource class {0} already exists."


class ResourceClassInUse(Conflict):
    error_code = "baremetal.resource-class-in-use"
    msg_fmt = "Resource class {0} is in use by one or more nodes and cannot be deleted."


class NodeLocked(Conflict):
    error_code = "baremetal.node-locked"
    msg_fmt = "Node {0} is locked by host {1}, please retry after the current operation is completed."


#: Ironic's list, printed as a Python tuple in its message.
DELETE_ALLOWED_STATES = ("manageable", "enroll", "adopt failed", "available")


class NodeDeleteForbidden(Conflict):
    error_code = "baremetal.node-delete-forbidden"

    def __init__(self, node: str, state: str) -> None:
        super().__init__(
            f'Can not delete node "{cut(node)}" while it is in provision state "{state}". '
            f'Valid provision states to perform deletion are: "{DELETE_ALLOWED_STATES}", '
            "or set the node into maintenance mode",
            provision_state=state,
            allowed_states=list(DELETE_ALLOWED_STATES),
        )


# -- 403 ---------------------------------------------------------------------


class NodeProtected(BaremetalError):
    status_code = 403
    error_code = "baremetal.node-protected"
    msg_fmt = "Node {0} is protected and cannot be undeployed, rebuilt or deleted"


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


class InvalidStateRequested(Invalid):
    """A provision action not allowed from the node's state; names the allowed ones."""

    error_code = "baremetal.invalid-state-transition"

    def __init__(self, action: str, node: str, state: str, allowed: Iterable[str]) -> None:
        allowed = sorted(allowed)
        names = ", ".join(allowed) if allowed else "none"
        super().__init__(
            f'The requested action "{action}" can not be performed on node "{cut(node)}" '
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
            f'supports driver {cut(driver)} for conductor group "". Ensure the driver is '
            "valid and enabled.",
            driver=driver,
        )


class InterfaceNotFound(Invalid):
    error_code = "baremetal.unknown-interface"

    def __init__(self, kind: str, value: str, valid: Iterable[str]) -> None:
        super().__init__(
            f"Could not find the following interface in the "
            f"'ironic.hardware.interfaces.{kind}' entrypoint: {cut(value)}. "
            f"Valid interfaces are {sorted(valid)}.",
            interface=kind,
        )


class ChassisNotEmpty(Invalid):
    error_code = "baremetal.chassis-not-empty"
    msg_fmt = "Cannot complete the requested action because chassis {0} contains nodes."


class PortgroupNotEmpty(Invalid):
    error_code = "baremetal.portgroup-not-empty"
    msg_fmt = "Cannot complete the requested action because portgroup {0} contains ports."


class NodeInMaintenance(Invalid):
    error_code = "baremetal.node-in-maintenance"
    msg_fmt = "The {0} operation can't be performed on node {1} because it's in maintenance mode."


class InvalidResourceClassName(Invalid):
    error_code = "baremetal.invalid-resource-class"
    msg_fmt = (
        "Invalid resource class name {0}: custom resource classes must match CUSTOM_[A-Z0-9_]+ and be "
        "at most 255 characters long."
    )

    def __init__(self, name: str) -> None:
        super().__init__(repr(name))  # quoted as Python writes a string


# -- allocations, deploy templates, runbooks (Ironic's texts) -----------------------------------


class AllocationNotFound(NotFound):
    error_code = "baremetal.allocation-not-found"
    msg_fmt = "Allocation {0} could not be found."


class DeployTemplateNotFound(NotFound):
    error_code = "baremetal.deploy-template-not-found"
    msg_fmt = "Deploy template {0} could not be found."


class RunbookNotFound(NotFound):
    error_code = "baremetal.runbook-not-found"
    msg_fmt = "Runbook {0} could not be found."


class AllocationDuplicate(Conflict):
    error_code = "baremetal.allocation-duplicate"
    msg_fmt = "An allocation with name or UUID {0} already exists."


class AllocationNodeTaken(Conflict):
    """Another allocation holds the node (the unique ``allocations.node_id`` decided)."""

    error_code = "baremetal.node-associated"
    msg_fmt = "The node is already associated with another allocation."


class DeployTemplateDuplicate(Conflict):
    error_code = "baremetal.deploy-template-duplicate"
    msg_fmt = "A deploy template with name or UUID {0} already exists."


class RunbookDuplicate(Conflict):
    error_code = "baremetal.runbook-duplicate"
    msg_fmt = "A runbook with name or UUID {0} already exists."


class InvalidState(Conflict):
    error_code = "baremetal.invalid-state"


# -- volume connectors and targets, inspection rules (Ironic's texts) ---------------------------


class VolumeConnectorNotFound(NotFound):
    error_code = "baremetal.volume-connector-not-found"
    msg_fmt = "Volume connector {0} could not be found."


class VolumeTargetNotFound(NotFound):
    error_code = "baremetal.volume-target-not-found"
    msg_fmt = "Volume target {0} could not be found."


class InspectionRuleNotFound(NotFound):
    error_code = "baremetal.inspection-rule-not-found"
    msg_fmt = "Rule {0} could not be found."


class VolumeConnectorUuidExists(Conflict):
    error_code = "baremetal.volume-connector-duplicate-uuid"
    msg_fmt = "A volume connector with UUID {0} already exists."


class VolumeConnectorTypeAndIdExists(Conflict):
    """Another connector has this ``(type, connector_id)`` (built from the whole document)."""

    error_code = "baremetal.volume-connector-duplicate"
    msg_fmt = "A volume connector with type {0} and connector ID {1} already exists."

    def __init__(self, doc: Any) -> None:
        super().__init__(doc.get("type"), doc.get("connector_id"))


class VolumeTargetUuidExists(Conflict):
    error_code = "baremetal.volume-target-duplicate-uuid"
    msg_fmt = "A volume target with UUID {0} already exists."


class VolumeTargetBootIndexExists(Conflict):
    error_code = "baremetal.volume-target-duplicate-boot-index"
    msg_fmt = "A volume target with boot index '{0}' for the same node already exists."


class InspectionRuleUuidExists(Conflict):
    error_code = "baremetal.inspection-rule-duplicate"
    msg_fmt = "An inspection rule with UUID {0} already exists."


class NodeStateForbidsAction(Invalid):
    """Ironic's InvalidStateRequested for a node-bound action (no provision verbs to list).

    Volume connectors and targets change only while their node is powered off (and
    are deleted only then, or while the node is enroll/manageable/adopt failed).
    """

    error_code = "baremetal.invalid-node-state"

    def __init__(self, action: str, node: str, state: object) -> None:
        super().__init__(
            f'The requested action "{action}" can not be performed on node "{cut(node)}" '
            f'while it is in state "{state}".',
            action=action,
            state=state,
        )
