"""The ``redfish`` hardware type against a real Redfish BMC: sushy-tools' emulator on loopback.

Real power changes are slow on purpose (the emulator applies a reset 1-11 s
later), so only ``test_power_on_and_reboot_wait_until_the_bmc_reports_it`` waits for
real ones (two); the timeout path is made deterministic with
:func:`start_of_second` (see there).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from apimw.errors import ConfigError
from baremetal_service.drivers import DriverRegistry
from baremetal_service.drivers.base import POWER_OFF, POWER_ON, DriverError, DriverValidationError, Task
from baremetal_service.drivers.redfish import RedfishHardware, parse_driver_info
from tests.example.redfish_emulator import (
    PASSWORD,
    SYSTEMS,
    USERNAME,
    RedfishEmulator,
    closed_port_address,
    serve,
    silent_bmc,
    start_of_second,
)

pytestmark = pytest.mark.xdist_group(__name__)  # module fixtures set up once


@pytest.fixture(scope="module")
def emulator() -> Iterator[RedfishEmulator]:
    yield from serve("redfish-driver")


@pytest.fixture
def hw() -> RedfishHardware:
    return RedfishHardware(power_timeout=20, poll_interval=0.2)


def make_task(emulator: RedfishEmulator, system_id: str | None = None, **info: Any) -> Task:
    driver_info = {
        "redfish_address": emulator.url,
        "redfish_system_id": system_id if system_id is not None else emulator.system_id(),
        "redfish_username": USERNAME,
        "redfish_password": PASSWORD,
        **info,
    }
    return Task(node={"uuid": "3a1c2b7e-0000-4000-8000-000000000001", "driver_info": driver_info})


# -- driver_info ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "field"),
    [
        pytest.param({}, "redfish_address", id="missing-address"),
        pytest.param({"redfish_address": "ftp://bmc"}, "redfish_address", id="bad-scheme"),
        pytest.param({"redfish_address": "https://"}, "redfish_address", id="no-host"),
        pytest.param({"redfish_address": "https://bmc:99999"}, "redfish_address", id="bad-port"),
        pytest.param(
            {"redfish_address": "https://root:calvin@bmc"}, "redfish_address", id="credentials-in-url"
        ),
        pytest.param(
            {"redfish_address": "bmc", "redfish_verify_ca": "maybe"}, "redfish_verify_ca", id="verify"
        ),
        pytest.param(
            {"redfish_address": "bmc", "redfish_auth_type": "digest"}, "redfish_auth_type", id="auth"
        ),
        pytest.param(
            {"redfish_address": "bmc", "redfish_power_timeout": "soon"}, "redfish_power_timeout", id="t"
        ),
        pytest.param(
            {"redfish_address": "bmc", "redfish_power_timeout": -1}, "redfish_power_timeout", id="t<0"
        ),
        pytest.param({"redfish_address": "bmc", "redfish_username": 7}, "redfish_username", id="user-type"),
    ],
)
def test_invalid_driver_info_names_the_field(info: dict[str, Any], field: str) -> None:
    with pytest.raises(DriverValidationError, match=field):
        parse_driver_info(info)
    # the conductor's verify step and GET .../validate go through these
    hw = RedfishHardware()
    with pytest.raises(DriverValidationError, match=field):
        hw.validate_driver_info(Task(node={"uuid": "x", "driver_info": info}))


def test_driver_info_is_normalised_like_ironic() -> None:
    info = parse_driver_info(
        {
            "redfish_address": "bmc.example.com:8443/",
            "redfish_system_id": "System.Embedded.1",
            "redfish_username": "root",
            "redfish_password": "calvin",
            "redfish_verify_ca": "False",
        }
    )
    assert info.address == "https://bmc.example.com:8443"  # https assumed, as Ironic does
    assert info.system_id == "/redfish/v1/Systems/System.Embedded.1"
    assert info.verify_ca is False
    assert info.auth_type == "auto"
    assert "calvin" not in repr(info)
    assert parse_driver_info({"redfish_address": "http://b", "redfish_system_id": "/x/y"}).system_id == "/x/y"


def test_hardware_type_metadata_and_registry() -> None:
    registry = DriverRegistry(("fake-hardware", "redfish"))  # found through the entry point
    assert registry.names() == ["fake-hardware", "redfish"]
    assert registry.secret_fields("redfish") == frozenset({"redfish_password"})
    props = registry.properties("redfish")
    assert {"redfish_address", "redfish_system_id", "redfish_username", "redfish_password",
            "redfish_verify_ca"} <= set(props)  # fmt: skip
    assert props["redfish_address"].startswith("Required.")
    doc = registry.describe("redfish")
    assert doc["default_power_interface"] == "redfish"
    assert doc["default_management_interface"] == "redfish"
    with pytest.raises(ConfigError, match="power_timeout"):
        RedfishHardware(power_timeout=0)


def test_service_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAREMETAL_REDFISH_POWER_TIMEOUT", "7.5")
    monkeypatch.setenv("BAREMETAL_REDFISH_READ_TIMEOUT", "3")
    hw = DriverRegistry(("redfish",)).get("redfish")  # enabled by name: built by the entry point
    assert isinstance(hw, RedfishHardware)
    assert (hw.settings.power_timeout, hw.settings.read_timeout, hw.settings.connect_timeout) == (
        7.5,
        3.0,
        5.0,
    )
    monkeypatch.setenv("BAREMETAL_REDFISH_CONNECT_TIMEOUT", "soon")
    with pytest.raises(ConfigError, match="BAREMETAL_REDFISH_CONNECT_TIMEOUT='soon'"):
        DriverRegistry(("redfish",))
    with pytest.raises(ConfigError, match="poll_interval"):
        RedfishHardware.from_environ({"BAREMETAL_REDFISH_POLL_INTERVAL": "-1"})


# -- power ------------------------------------------------------------------------------


def test_get_power_state_reads_the_bmc(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    task = make_task(emulator)
    assert hw.power.get_power_state(task) == POWER_OFF


@pytest.mark.serial  # measured against the clock
def test_power_on_and_reboot_wait_until_the_bmc_reports_it(
    emulator: RedfishEmulator, hw: RedfishHardware
) -> None:
    system = emulator.system_id()
    task = make_task(emulator, system)
    assert emulator.power_state(system) == "Off"
    hw.power.set_power_state(task, POWER_ON)
    # returned only once the BMC applied the change (the emulator applies it 1-11 s later)
    assert emulator.power_state(system) == "On"
    assert hw.power.get_power_state(task) == POWER_ON
    # already on: nothing to wait for
    started = time.monotonic()
    hw.power.set_power_state(task, POWER_ON)
    assert time.monotonic() - started < 2
    # reboot of a running node: ForceRestart (the emulator reports Off at once, On 1-11 s later)
    hw.power.reboot(task)
    assert emulator.power_state(system) == "On"


@pytest.mark.serial  # measured against the clock
def test_power_change_times_out_with_a_clear_error(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    system = emulator.system_id()
    task = make_task(emulator, system)
    start_of_second()
    started = time.monotonic()
    with pytest.raises(DriverError) as info:
        hw.power.set_power_state(task, POWER_ON, timeout=0.3)
    elapsed = time.monotonic() - started
    assert elapsed < 3
    text = str(info.value)
    assert "Timed out after 0.3 s" in text
    assert "power on" in text and emulator.url in text
    assert emulator.power_state(system) == "Off"  # the BMC had not applied it yet


def test_driver_info_power_timeout_is_used(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    task = make_task(emulator, redfish_power_timeout="0.25")
    start_of_second()
    with pytest.raises(DriverError, match=r"Timed out after 0.25 s"):
        hw.power.set_power_state(task, POWER_ON)


@pytest.mark.serial  # measured against the clock
def test_power_wait_never_passes_the_task_deadline(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    task = make_task(emulator)
    start_of_second()
    task.deadline = time.monotonic() + 0.4  # the conductor's step deadline is shorter than any timeout
    started = time.monotonic()
    with pytest.raises(DriverError, match="Timed out"):
        hw.power.set_power_state(task, POWER_ON, timeout=30)
    assert time.monotonic() - started < 3


def test_unsupported_power_target(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    with pytest.raises(DriverError, match="Unsupported power state"):
        hw.power.set_power_state(make_task(emulator), "dimmed")


# -- failures: credentials, unreachable, hung, unknown system ---------------------------


def test_wrong_password_is_a_clear_error(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    wrong = "not-the-password-42"
    for auth_type in ("auto", "basic", "session"):
        task = make_task(emulator, redfish_password=wrong, redfish_auth_type=auth_type)
        with pytest.raises(DriverError) as info:
            hw.power.get_power_state(task)
        text = str(info.value)
        assert "refused the credentials" in text and "'admin'" in text, text
        assert wrong not in text and PASSWORD not in text


@pytest.mark.serial  # measured against the clock
def test_unreachable_bmc_fails_fast(hw: RedfishHardware) -> None:
    address = closed_port_address()
    task = Task(node={"uuid": "n", "driver_info": {"redfish_address": address, "redfish_password": PASSWORD}})
    started = time.monotonic()
    with pytest.raises(DriverError) as info:
        hw.power.get_power_state(task)
    assert time.monotonic() - started < 3  # no retry loop
    assert str(info.value).startswith(f"cannot reach the Redfish BMC at {address}")
    assert "connection refused" in str(info.value)


@pytest.mark.serial  # measured against the clock
def test_hung_bmc_hits_the_read_timeout() -> None:
    hw = RedfishHardware(read_timeout=1, connect_timeout=1)
    with silent_bmc() as address:
        task = Task(node={"uuid": "n", "driver_info": {"redfish_address": address}})
        started = time.monotonic()
        with pytest.raises(DriverError, match="timed out"):
            hw.power.get_power_state(task)
        assert time.monotonic() - started < 5


def test_unknown_system_names_redfish_system_id(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    with pytest.raises(DriverError, match="redfish_system_id"):
        hw.power.get_power_state(make_task(emulator, "no-such-system"))
    # several systems and no redfish_system_id: the driver cannot guess
    task = make_task(emulator, "")
    with pytest.raises(DriverError, match=rf"manages {SYSTEMS} systems: set redfish_system_id"):
        hw.power.get_power_state(task)


def test_no_log_line_contains_the_password(
    emulator: RedfishEmulator, hw: RedfishHardware, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-pw-never-logged"
    caplog.set_level(logging.DEBUG)  # sushy and urllib3 log every request at DEBUG
    system = emulator.system_id()
    hw.power.get_power_state(make_task(emulator, system, redfish_auth_type="auto"))  # session, then basic
    hw.management.set_boot_device(make_task(emulator, system), "pxe")
    with pytest.raises(DriverError):
        hw.power.get_power_state(make_task(emulator, system, redfish_password=wrong))
    messages = [record.getMessage() for record in caplog.records]
    assert any("SessionService" in m for m in messages)  # the session request (with its body) was logged
    for message in messages:
        assert PASSWORD not in message and wrong not in message


# -- management -------------------------------------------------------------------------


def test_boot_device_round_trip(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    system = emulator.system_id()
    task = make_task(emulator, system)
    assert hw.management.get_supported_boot_devices(task) == ["pxe", "disk", "cdrom"]  # the emulator's
    hw.management.set_boot_device(task, "pxe")
    assert emulator.boot_override(system)["BootSourceOverrideTarget"] == "Pxe"
    # the driver reports what the BMC says; sushy-emulator ignores BootSourceOverrideEnabled
    # (it always answers "Continuous"), so a one-time override reads back as persistent here
    assert hw.management.get_boot_device(task) == {
        "boot_device": "pxe",
        "persistent": emulator.boot_override(system)["BootSourceOverrideEnabled"] == "Continuous",
    }
    hw.management.set_boot_device(task, "cdrom", persistent=True)
    assert emulator.boot_override(system)["BootSourceOverrideTarget"] == "Cd"
    assert hw.management.get_boot_device(task) == {"boot_device": "cdrom", "persistent": True}


def test_boot_device_the_bmc_does_not_offer(emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    with pytest.raises(DriverError, match=r"cannot boot from 'bios' \(supported: pxe, disk, cdrom\)"):
        hw.management.set_boot_device(make_task(emulator), "bios")


def test_auto_auth_remembers_a_bmc_without_sessions(
    emulator: RedfishEmulator, hw: RedfishHardware, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="sushy")
    task = make_task(emulator)
    assert hw.power.get_power_state(task) == POWER_OFF
    assert any("SessionService" in r.getMessage() for r in caplog.records)  # tried a session first
    caplog.clear()
    assert hw.power.get_power_state(task) == POWER_OFF
    assert not any("SessionService" in r.getMessage() for r in caplog.records)  # straight to basic
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


# -- TLS: redfish_verify_ca -------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_emulator() -> Iterator[RedfishEmulator]:
    yield from serve("redfish-tls", tls=True)


def test_verify_ca_against_a_bmc_with_a_self_signed_certificate(
    tls_emulator: RedfishEmulator, hw: RedfishHardware
) -> None:
    assert tls_emulator.url.startswith("https://")
    system = tls_emulator.system_id()
    # verified by default: the BMC's certificate is not trusted by the system CAs
    with pytest.raises(DriverError, match="TLS certificate verification failed"):
        hw.power.get_power_state(make_task(tls_emulator, system))
    # trusted through redfish_verify_ca = the CA bundle path
    task = make_task(tls_emulator, system, redfish_verify_ca=str(tls_emulator.ca_file))
    assert hw.power.get_power_state(task) == POWER_OFF


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_verify_ca_false_skips_verification(tls_emulator: RedfishEmulator, hw: RedfishHardware) -> None:
    task = make_task(tls_emulator, redfish_verify_ca="false")
    assert hw.power.get_power_state(task) == POWER_OFF
