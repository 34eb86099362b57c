"""The driver interface: what a hardware type must provide to the conductor.

A *hardware type* (Ironic's name for a driver) bundles four interfaces:

==============  =====================================================================
``power``       read and change the power state (``power on``, ``power off``, reboot)
``management``  boot device (where the protocol allows it)
``deploy``      deploy / tear down an instance and clean the node
``inspect``     discover hardware properties (cpus, memory_mb, ...)
==============  =====================================================================

Every interface method receives a :class:`Task`: a snapshot of the node
(``task.node``, a read-only mapping with Ironic field names, ``driver_info``
unmasked), a mutable ``task.driver_internal_info`` the conductor persists after
the step, and ``task.deadline`` (a ``time.monotonic()`` value) that a driver
talking to a real BMC must respect (a Redfish driver waits for the BMC
to apply a power change, up to a configurable timeout, never past the deadline).

Methods are blocking and called from conductor worker threads, one node at a
time (the node's database lease guarantees no other worker acts on it).  They
report failure by raising :class:`DriverError` (the message lands in the node's
``last_error`` and the node goes to the failed state of its transition);
``validate`` raises :class:`DriverValidationError` with the reason.  Any other
exception is treated as a driver failure too, with its text.

A hardware type declares:

* ``name`` (``fake-hardware``, ``redfish``...), ``description``;
* ``driver_info_properties``: ``{field: description}``; a description starting
  with ``"Required."`` marks the field required by ``validate``;
* ``secret_fields``: ``driver_info`` keys whose values the API masks
  (``redfish_password``) and that are never logged;
* ``interface_names``: the name of each interface it implements (shown as the
  node's ``power_interface`` etc. and ``GET /v1/drivers/{name}``).

Register extra hardware types with :class:`baremetal_service.drivers.DriverRegistry`
(or the ``baremetal_service.hardware_types`` entry point group).
"""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import jsonschema

__all__ = [
    "BOOT_DEVICES",
    "RAID_CONFIG_SCHEMA",
    "CleanStepNotSupported",
    "NotSupportedByDriver",
    "VendorMethod",
    "POWER_OFF",
    "POWER_ON",
    "REBOOT",
    "SOFT_POWER_OFF",
    "SOFT_REBOOT",
    "DeployInterface",
    "DriverError",
    "DriverValidationError",
    "HardwareType",
    "InspectInterface",
    "Interface",
    "ManagementInterface",
    "PowerInterface",
    "Task",
]

POWER_ON: Final = "power on"
POWER_OFF: Final = "power off"
REBOOT: Final = "rebooting"
SOFT_POWER_OFF: Final = "soft power off"
SOFT_REBOOT: Final = "soft rebooting"
#: Power state transitions a node can be asked for (``PUT .../states/power``).
POWER_TARGETS: Final = (POWER_ON, POWER_OFF, REBOOT, SOFT_POWER_OFF, SOFT_REBOOT)
BOOT_DEVICES: Final = ("pxe", "disk", "cdrom", "bios", "safe")

#: Ironic's logical disk properties of a RAID interface (ironic/common/raid.py, its schema).
RAID_LOGICAL_DISK_PROPERTIES: Final[Mapping[str, str]] = {
    "raid_level": "RAID level for the logical disk. Valid values are 'JBOD', '0', '1', '2', '5', "
    "'6', '1+0', '5+0' and '6+0'. Required.",
    "size_gb": "Size in GiB (Integer) for the logical disk. Use 'MAX' as size_gb if this logical "
    "disk is supposed to use the rest of the space available. Required.",
    "volume_name": "Name of the volume to be created. If this is not specified, it will be "
    "auto-generated. Optional.",
    "is_root_volume": "Specifies whether this disk is a root volume. By default, this is False. "
    "Optional.",
    "share_physical_disks": "Specifies whether other logical disks can share physical disks with "
    "this logical disk. By default, this is False. Optional.",
    "disk_type": "The type of disk preferred. Valid values are 'hdd' and 'ssd'. If this is not "
    "specified, disk type will not be a selection criterion for choosing backing physical disks. "
    "Optional.",
    "interface_type": "The interface type of disk. Valid values are 'sata', 'scsi' and 'sas'. If "
    "this is not specified, interface type will not be a selection criterion for choosing backing "
    "physical disks. Optional.",
    "number_of_physical_disks": "Number of physical disks to use for this logical disk. By "
    "default, the driver uses the minimum number of disks required for that RAID level. Optional.",
    "controller": "Controller to use for this logical disk. If not specified, the driver will "
    "choose a suitable RAID controller on the bare metal node. Optional.",
    "physical_disks": "The physical disks to use for this logical disk. If not specified, the "
    "driver will choose suitable physical disks to use. Optional.",
}


#: Ironic's RAID configuration schema (ironic/drivers/raid_config_schema.json, its rules).
RAID_CONFIG_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "logical_disks": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "raid_level": {
                        "type": "string",
                        "enum": ["JBOD", "0", "1", "2", "5", "6", "1+0", "5+0", "6+0"],
                    },
                    "size_gb": {
                        "anyOf": [
                            {"type": "integer", "minimum": 0},
                            {"type": "string", "enum": ["MAX"]},
                        ]
                    },
                    "volume_name": {"type": "string"},
                    "is_root_volume": {"type": "boolean"},
                    "share_physical_disks": {"type": "boolean"},
                    "disk_type": {"type": "string", "enum": ["hdd", "ssd"]},
                    "interface_type": {"type": "string", "enum": ["sata", "scsi", "sas"]},
                    "number_of_physical_disks": {"type": "integer", "exclusiveMinimum": 0},
                    "controller": {"type": "string"},
                    "physical_disks": {
                        "anyOf": [
                            {"type": "array", "items": {"type": "string"}},
                            {"type": "array", "items": {"type": "object"}, "minItems": 2},
                        ]
                    },
                },
                "required": ["raid_level", "size_gb"],
                "additionalProperties": False,
                "dependencies": {"physical_disks": ["controller"]},
            },
        },
    },
    "required": ["logical_disks"],
    "additionalProperties": False,
}


class DriverError(Exception):
    """A driver operation failed; ``str(error)`` becomes the node's ``last_error``."""


class NotSupportedByDriver(DriverError):
    """Ironic's UnsupportedDriverExtension: the node's interface lacks this operation."""

    def __init__(self, driver: str, extension: str) -> None:
        self.extension = extension
        super().__init__(f"Driver {driver} does not support {extension} (disabled or not implemented).")


@dataclass(frozen=True)
class VendorMethod:
    """A vendor passthru method (Ironic's ``@base.passthru``): its metadata and its code.

    *call* gets the task and the request body; it raises DriverError for bad arguments
    (400) and returns the JSON answer of a synchronous method (asynchronous ones answer
    202 with no body)."""

    description: str
    call: Any  # Callable[[Task, Mapping[str, Any]], Any]
    http_methods: tuple[str, ...] = ("POST",)
    async_call: bool = True
    attach: bool = False
    require_exclusive_lock: bool = True

    def metadata(self) -> dict[str, Any]:
        return {
            "http_methods": list(self.http_methods),
            "async": self.async_call,
            "description": self.description,
            "attach": self.attach,
            "require_exclusive_lock": self.require_exclusive_lock,
        }


class CleanStepNotSupported(DriverError):
    """A manual clean step the node's interfaces do not have; its text is the whole last_error."""

    verbatim: ClassVar[bool] = True

    def __init__(self, node: str, step: Mapping[str, Any]) -> None:
        shown = {k: step[k] for k in ("interface", "step") if k in step}
        super().__init__(f"Cannot clean node {node}: node does not support this clean step: {shown!r}")


class DriverValidationError(DriverError):
    """The node's configuration cannot work with this interface (missing driver_info...)."""


@dataclass
class Task:
    """What an interface method works on: one node, leased by the calling worker."""

    node: Mapping[str, Any]
    driver_internal_info: dict[str, Any] = field(default_factory=dict)
    deadline: float = field(default_factory=lambda: time.monotonic() + 60.0)

    @property
    def uuid(self) -> str:
        return str(self.node["uuid"])

    @property
    def driver_info(self) -> Mapping[str, Any]:
        return self.node.get("driver_info") or {}

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())


class Interface(abc.ABC):  # noqa: B024 - each kind declares its abstract methods
    """One interface of a hardware type (power, management, deploy, inspect)."""

    #: what the node's ``<kind>_interface`` field shows
    name: ClassVar[str] = "fake"

    def validate(self, task: Task) -> None:  # noqa: B027 - optional hook
        """Raise DriverValidationError if the node's settings do not let this interface work
        (driver_info; for a deploy interface instance_info too)."""


class PowerInterface(Interface):
    """Reads and switches the node's power."""

    @abc.abstractmethod
    def get_power_state(self, task: Task) -> str:
        """The node's actual power state: ``power on`` or ``power off``."""

    @abc.abstractmethod
    def set_power_state(self, task: Task, state: str, timeout: float | None = None) -> None:
        """Switch to ``power on`` / ``power off`` (or the soft variant) and wait for it."""

    def reboot(self, task: Task, timeout: float | None = None) -> None:
        """Power cycle; the default is off then on."""
        self.set_power_state(task, POWER_OFF, timeout)
        self.set_power_state(task, POWER_ON, timeout)


class ManagementInterface(Interface):
    """The boot device and the indicators (LEDs)."""

    def get_supported_boot_devices(self, task: Task) -> list[str]:
        return list(BOOT_DEVICES)

    @abc.abstractmethod
    def set_boot_device(self, task: Task, device: str, persistent: bool = False) -> None:
        """Boot from *device* next time (or always, if *persistent*)."""

    @abc.abstractmethod
    def get_boot_device(self, task: Task) -> dict[str, Any]:
        """``{"boot_device": "pxe" | ... | None, "persistent": bool | None}``."""

    def get_supported_indicators(self, task: Task) -> dict[str, dict[str, dict[str, Any]]]:
        """``{component: {name: {"readonly": bool, "states": [...]}}}``; none by default."""
        return {}

    def get_indicator_state(self, task: Task, component: str, indicator: str) -> str:
        """One of ``on``, ``off``, ``blinking``, ``unknown``."""
        raise NotSupportedByDriver(str(task.node.get("driver")), "get_indicator_state")

    def set_indicator_state(self, task: Task, component: str, indicator: str, state: str) -> None:
        raise NotSupportedByDriver(str(task.node.get("driver")), "set_indicator_state")

    def set_boot_mode(self, task: Task, mode: str) -> None:
        """Boot in *mode* (``bios`` or ``uefi``) from now on."""
        raise NotSupportedByDriver(str(task.node.get("driver")), "set_boot_mode")

    def set_secure_boot_state(self, task: Task, state: bool) -> None:
        """Turn UEFI secure boot on or off."""
        raise NotSupportedByDriver(str(task.node.get("driver")), "set_secure_boot_state")


class DeployInterface(Interface):
    """Writes the instance, removes it, cleans the node."""

    @abc.abstractmethod
    def deploy(self, task: Task) -> None:
        """Write the instance image and make the node boot it (ends powered on)."""

    @abc.abstractmethod
    def tear_down(self, task: Task) -> None:
        """Stop the instance (ends powered off)."""

    @abc.abstractmethod
    def clean(self, task: Task, clean_steps: list[dict[str, Any]] | None = None) -> None:
        """Automated cleaning (``clean_steps is None``) or the given manual steps."""


class InspectInterface(Interface):
    """Discovers the node's hardware."""

    @abc.abstractmethod
    def inspect(self, task: Task) -> dict[str, Any]:
        """Discover hardware; returns properties to merge into the node's ``properties``."""


class HardwareType(abc.ABC):
    """A driver: four interfaces plus the metadata the API shows."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: driver_info fields and their descriptions ("Required. ..." marks mandatory ones).
    driver_info_properties: ClassVar[Mapping[str, str]] = {}
    #: driver_info keys whose values never leave the service (masked by the API).
    secret_fields: ClassVar[frozenset[str]] = frozenset()
    #: Properties its other interfaces document (vendor method arguments...): shown by
    #: ``GET /v1/drivers/{name}/properties`` with the driver_info ones, never required by
    #: ``validate`` (Ironic's ``HardwareType.get_properties`` merges every interface's).
    interface_properties: ClassVar[Mapping[str, str]] = {}
    #: ``(interface, step)`` pairs a manual clean may name; None accepts any.
    clean_steps: ClassVar[frozenset[tuple[str, str]] | None] = None

    power: PowerInterface
    management: ManagementInterface
    deploy: DeployInterface
    inspect: InspectInterface

    @property
    def interface_names(self) -> dict[str, str]:
        """``{"power_interface": "fake", ...}`` for the node fields and the driver doc."""
        return {
            "power_interface": self.power.name,
            "management_interface": self.management.name,
            "deploy_interface": self.deploy.name,
            "inspect_interface": self.inspect.name,
            "boot_interface": self.deploy.name,
            "bios_interface": "no-bios",
            "console_interface": "no-console",
            "firmware_interface": "no-firmware",
            "network_interface": "noop",
            "raid_interface": "no-raid",
            "rescue_interface": "no-rescue",
            "storage_interface": "noop",
            "vendor_interface": "no-vendor",
        }

    @property
    def enabled_interfaces(self) -> dict[str, tuple[str, ...]]:
        """Every implementation a node of this type may choose per interface (the default first)."""
        return {key: (name,) for key, name in self.interface_names.items()}

    def properties(self) -> dict[str, str]:
        """``GET /v1/drivers/{name}/properties``: every interface's documented properties."""
        return {**self.interface_properties, **self.driver_info_properties}

    def vendor_methods(self) -> Mapping[str, VendorMethod]:
        """The vendor passthru methods of its default vendor interface (none by default)."""
        return {}

    def validate_raid_config(self, task: Task, config: Mapping[str, Any]) -> None:
        """Ironic's ``RAIDInterface.validate_raid_config``: the schema, then one root volume
        at most.  Raises DriverError with Ironic's text."""
        try:
            jsonschema.validate(config, RAID_CONFIG_SCHEMA)
        except jsonschema.ValidationError as error:
            raise DriverError(f"RAID config validation error: {error.message}") from None
        roots = [d for d in config.get("logical_disks", []) if d.get("is_root_volume")]
        if len(roots) > 1:
            raise DriverError(
                f"Raid config cannot have more than one root volume. {len(roots)} root volumes "
                "were specified"
            )

    def raid_logical_disk_properties(self) -> dict[str, str] | None:
        """The logical disk properties of its RAID interface; None without one (``no-raid``)."""
        raid = self.interface_names.get("raid_interface", "no-raid")
        return None if raid.startswith("no-") else dict(RAID_LOGICAL_DISK_PROPERTIES)

    def check_clean_steps(self, task: Task, steps: list[dict[str, Any]]) -> None:
        """Raise CleanStepNotSupported for the first manual step it does not have (Ironic's
        conductor checks them before cleaning: the node ends in ``clean failed``)."""
        if self.clean_steps is None:
            return
        for step in steps:
            if (step.get("interface"), step.get("step")) not in self.clean_steps:
                raise CleanStepNotSupported(task.uuid, step)

    def required_driver_info(self) -> list[str]:
        return sorted(k for k, v in self.driver_info_properties.items() if v.startswith("Required."))

    def validate_driver_info(self, task: Task) -> None:
        missing = [k for k in self.required_driver_info() if task.driver_info.get(k) in (None, "")]
        if missing:
            raise DriverValidationError(
                f"Missing the following {self.name} properties in node's driver_info: " + ", ".join(missing)
            )
