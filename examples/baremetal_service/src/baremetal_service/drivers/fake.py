"""``fake-hardware``: an in-process, instant hardware type (Ironic's fake interfaces).

Power changes are recorded on the node itself (``get_power_state`` answers the
node's recorded ``power_state``, as Ironic's fake power interface does), deploy,
tear down, clean and inspect succeed at once without touching anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from baremetal_service.drivers.base import (
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
    VendorMethod,
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
        # Ironic's fake management answers PXE, not persistent, until told otherwise
        return dict(stored) if stored else {"boot_device": "pxe", "persistent": False}

    def get_supported_indicators(self, task: Task) -> dict[str, dict[str, dict[str, Any]]]:
        # Ironic's FakeManagement: a read-only chassis LED and a system LED
        return {
            "chassis": {"led-0": {"readonly": True, "states": ["off", "on"]}},
            "system": {"led": {"readonly": False, "states": ["blinking", "off", "on"]}},
        }

    def get_indicator_state(self, task: Task, component: str, indicator: str) -> str:
        indicators = self.get_supported_indicators(task)
        if component not in indicators:
            raise DriverError(f"Invalid component {component} specified.")
        if indicator not in indicators[component]:
            raise DriverError(f"Invalid indicator {indicator} specified.")
        return "on"  # Ironic's fake answers "on" for every indicator (and cannot set one)


def _bar_is(method: str, expected: str) -> Any:
    """Ironic's FakeVendorB methods: 'bar' is required; the answer is whether it equals *expected*."""

    def call(task: Task, data: Mapping[str, Any]) -> bool:
        bar = data.get("bar")
        if not bar:
            raise DriverError(f"Parameter 'bar' not passed to method '{method}'.")
        return bool(bar == expected)

    return call


def _log_passthrough(task: Task, data: Mapping[str, Any]) -> None:
    return None


#: Ironic's fake vendor interface (FakeVendorB): its four passthru methods.
FAKE_VENDOR_METHODS: Mapping[str, VendorMethod] = {
    "fourth_method_shared_lock": VendorMethod(
        "Test if the value of bar is woof", _bar_is("fourth_method_shared_lock", "woof"),
        require_exclusive_lock=False,
    ),
    "log_passthrough": VendorMethod("Test pass-through to wait.", _log_passthrough),
    "second_method": VendorMethod("Test if the value of bar is kazoo", _bar_is("second_method", "kazoo")),
    "third_method_sync": VendorMethod(
        "Test if the value of bar is meow", _bar_is("third_method_sync", "meow"), async_call=False
    ),
}  # fmt: skip


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

    def vendor_methods(self) -> Mapping[str, VendorMethod]:
        return FAKE_VENDOR_METHODS

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
        for kind in ("bios", "console", "firmware", "inspect", "raid", "rescue", "vendor"):
            enabled[f"{kind}_interface"] = ("fake", f"no-{kind}")
        return enabled
