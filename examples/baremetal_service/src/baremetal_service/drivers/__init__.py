"""Drivers (hardware types) and the registry of the enabled ones.

``DriverRegistry(enabled=("fake-hardware",), extra=(MyHardware(),))`` knows the
in-tree ``fake-hardware``, any hardware type given in *extra* and those published
under the ``baremetal_service.hardware_types`` entry point group (a Redfish
hardware type plugs in there); only the *enabled* ones can be used by
nodes.  See :mod:`baremetal_service.drivers.base` for the interface.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any, Final

from apimw.errors import ConfigError
from baremetal_service import exceptions as exc
from baremetal_service.drivers.base import (
    POWER_OFF,
    POWER_ON,
    POWER_TARGETS,
    REBOOT,
    SOFT_POWER_OFF,
    SOFT_REBOOT,
    DeployInterface,
    DriverError,
    DriverValidationError,
    HardwareType,
    InspectInterface,
    ManagementInterface,
    NotSupportedByDriver,
    PowerInterface,
    Task,
    VendorMethod,
)
from baremetal_service.drivers.fake import FakeHardware

__all__ = [
    "ENTRY_POINT_GROUP",
    "POWER_OFF",
    "POWER_ON",
    "POWER_TARGETS",
    "REBOOT",
    "SOFT_POWER_OFF",
    "SOFT_REBOOT",
    "DeployInterface",
    "DriverError",
    "DriverRegistry",
    "DriverValidationError",
    "FakeHardware",
    "HardwareType",
    "InspectInterface",
    "ManagementInterface",
    "NotSupportedByDriver",
    "PowerInterface",
    "Task",
    "UnsupportedDriverExtension",
    "VendorMethod",
]

ENTRY_POINT_GROUP: Final = "baremetal_service.hardware_types"
_INTERFACE_KINDS: Final = (
    "bios", "boot", "console", "deploy", "firmware", "inspect", "management", "network", "power",
    "raid", "rescue", "storage", "vendor",
)  # fmt: skip


class UnsupportedDriverExtension(exc.NotFound):
    """Ironic's answer (404 on the API) for an interface a driver does not implement."""

    error_code = "baremetal.unsupported-driver-extension"

    def __init__(self, driver: str, extension: str) -> None:
        super().__init__(f"Driver {driver} does not support {extension} (disabled or not implemented).")


class DriverRegistry:
    """The enabled hardware types, by name."""

    def __init__(
        self,
        enabled: Iterable[str] = ("fake-hardware",),
        *,
        extra: Iterable[HardwareType] = (),
        host: str | None = None,
    ) -> None:
        known: dict[str, Any] = {FakeHardware.name: FakeHardware}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            known.setdefault(ep.name, ep)
        instances: dict[str, HardwareType] = {hw.name: hw for hw in extra}
        self._types: dict[str, HardwareType] = {}
        for name in enabled:
            if name in instances:
                self._types[name] = instances[name]
                continue
            factory = known.get(name)
            if factory is None:
                raise ConfigError(
                    f"unknown hardware type {name!r}; known: {', '.join(sorted({*known, *instances}))}"
                )
            if hasattr(factory, "load"):
                factory = factory.load()
            self._types[name] = factory()
        self.host = host or socket.gethostname()

    def names(self) -> list[str]:
        return sorted(self._types)

    def get(self, name: str) -> HardwareType:
        """The enabled hardware type *name*; 404 DriverNotFound otherwise."""
        try:
            return self._types[name]
        except KeyError:
            raise exc.DriverNotFound(name) from None

    def for_node(self, name: str) -> HardwareType:
        """The hardware type a node may use; 400 NoValidHost (Ironic's wording) otherwise."""
        try:
            return self._types[name]
        except KeyError:
            raise exc.NoValidHost(name) from None

    def secret_fields(self, name: str) -> frozenset[str]:
        hw = self._types.get(name)
        return hw.secret_fields if hw is not None else frozenset()

    def default_interfaces(self, name: str) -> dict[str, str]:
        return dict(self.for_node(name).interface_names)

    def check_interfaces(self, name: str, values: Mapping[str, Any]) -> None:
        """400 if a ``*_interface`` value is not the one the hardware type implements."""
        enabled = self.for_node(name).enabled_interfaces
        for key, value in values.items():
            if key in enabled and value is not None and value not in enabled[key]:
                raise exc.InterfaceNotFound(key.removesuffix("_interface"), str(value), list(enabled[key]))

    def describe(self, name: str) -> dict[str, Any]:
        """The driver document of ``GET /v1/drivers/{name}`` (without links)."""
        hw = self.get(name)
        doc: dict[str, Any] = {"name": hw.name, "hosts": [self.host], "type": "dynamic"}
        names = hw.interface_names
        enabled = hw.enabled_interfaces
        for kind in _INTERFACE_KINDS:
            value = names.get(f"{kind}_interface")
            doc[f"default_{kind}_interface"] = value
            doc[f"enabled_{kind}_interfaces"] = list(enabled.get(f"{kind}_interface", ())) if value else []
        return doc

    def properties(self, name: str) -> dict[str, str]:
        """``GET /v1/drivers/{name}/properties``: driver_info fields and descriptions."""
        return self.get(name).properties()

    def raid_logical_disk_properties(self, name: str) -> dict[str, str]:
        """``GET /v1/drivers/{name}/raid/logical_disk_properties`` (404 without a RAID interface)."""
        found = self.get(name).raid_logical_disk_properties()
        if found is None:
            raise UnsupportedDriverExtension(name, "raid")
        return found
