"""``fake-hardware``: an in-process, instant hardware type (Ironic's fake interfaces).

Power changes are recorded on the node itself (``get_power_state`` answers the
node's recorded ``power_state``, as Ironic's fake power interface does), deploy,
tear down, clean and inspect succeed at once without touching anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .base import (
    POWER_OFF,
    POWER_ON,
    SOFT_POWER_OFF,
    DeployInterface,
    DriverError,
    HardwareType,
    InspectInterface,
    ManagementInterface,
    PowerInterface,
    Task,
)

__all__ = ["FakeHardware"]


class FakePower(PowerInterface):
    name = "fake"

    def get_power_state(self, task: Task) -> str:
        return task.node.get("power_state")  # type: ignore[return-value]

    def set_power_state(self, task: Task, state: str, timeout: float | None = None) -> None:
        if state not in (POWER_ON, POWER_OFF, SOFT_POWER_OFF):
            raise DriverError(f"Unsupported power state {state!r}")


class FakeManagement(ManagementInterface):
    name = "fake"

    def set_boot_device(self, task: Task, device: str, persistent: bool = False) -> None:
        if device not in self.get_supported_boot_devices(task):
            raise DriverError(f"Unsupported boot device {device!r}")
        task.driver_internal_info["fake_boot_device"] = {"boot_device": device, "persistent": persistent}

    def get_boot_device(self, task: Task) -> dict[str, Any]:
        stored = task.node.get("driver_internal_info", {}).get("fake_boot_device")
        return dict(stored) if stored else {"boot_device": None, "persistent": None}


class FakeDeploy(DeployInterface):
    name = "fake"

    def deploy(self, task: Task) -> None:
        return None

    def tear_down(self, task: Task) -> None:
        return None

    def clean(self, task: Task, clean_steps: list[dict[str, Any]] | None = None) -> None:
        return None


class FakeInspect(InspectInterface):
    name = "fake"

    def inspect(self, task: Task) -> dict[str, Any]:
        return {}


class FakeHardware(HardwareType):
    name: ClassVar[str] = "fake-hardware"
    description: ClassVar[str] = "Fake hardware: in-process, every operation succeeds instantly."
    #: Ironic's fake vendor interface documents two (vendor method) properties.
    interface_properties: ClassVar[Mapping[str, str]] = {
        "B1": "B1 description. Required.",
        "B2": "B2 description. Required.",
    }
    #: Ironic's fake interfaces' clean steps, plus the deploy interface's standard erase steps.
    clean_steps: ClassVar[frozenset[tuple[str, str]] | None] = frozenset({
        ("bios", "apply_configuration"), ("bios", "factory_reset"), ("bios", "cache_bios_settings"),
        ("firmware", "update"), ("raid", "create_configuration"), ("raid", "delete_configuration"),
        ("vendor", "log_passthrough"), ("deploy", "erase_devices"), ("deploy", "erase_devices_metadata"),
    })  # fmt: skip

    def __init__(self) -> None:
        self.power = FakePower()
        self.management = FakeManagement()
        self.deploy = FakeDeploy()
        self.inspect = FakeInspect()

    @property
    def interface_names(self) -> dict[str, str]:
        # Ironic's fake-hardware defaults (as the wire capture of Ironic 39 shows them)
        names = dict.fromkeys(super().interface_names, "fake")
        names["network_interface"] = "noop"
        names["storage_interface"] = "noop"
        return names

    @property
    def enabled_interfaces(self) -> dict[str, tuple[str, ...]]:
        # Interfaces without behaviour here may also be switched off, as the Ironic
        # deployments' fake-hardware allows (e.g. firmware_interface="no-firmware").
        enabled = super().enabled_interfaces
        for kind in ("bios", "console", "firmware", "raid", "rescue", "vendor"):
            enabled[f"{kind}_interface"] = ("fake", f"no-{kind}")
        return enabled
