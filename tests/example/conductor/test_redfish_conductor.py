"""Redfish nodes through the service facade and the conductor, against a real sushy-emulator.

The conductor runs in the test's thread here (``conductor_workers=0`` and
``run_once``/``drain``), so the timeout path can be lined up with the emulator's
clock (:func:`start_of_second`).  Only the power sync test waits for a real
power change (the out-of-band one).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from baremetal_service.conductor import drain
from baremetal_service.conductor.power_sync import EVENT_TYPE, PowerSync, _check_one, sync_power_states
from baremetal_service.drivers.redfish import RedfishHardware
from baremetal_service.objects.service import BaremetalService
from tests.example.redfish_emulator import (
    PASSWORD,
    USERNAME,
    RedfishEmulator,
    closed_port_address,
    serve,
    silent_bmc,
    start_of_second,
    wait_for_power,
)

pytestmark = pytest.mark.xdist_group(__name__)  # module fixtures set up once


@pytest.fixture(scope="module")
def emulator() -> Iterator[RedfishEmulator]:
    yield from serve("redfish-conductor")


@pytest.fixture
def service(database_url: str) -> Iterator[BaremetalService]:
    """The facade on SQLite and on the real PostgreSQL (tests/example/conftest.py), no worker threads."""
    svc = BaremetalService(
        database_url,
        enabled_hardware_types=("fake-hardware", "redfish"),
        extra_hardware_types=(RedfishHardware(power_timeout=20, read_timeout=1, connect_timeout=1),),
        conductor_workers=0,
    )
    try:
        yield svc
    finally:
        svc.close()


def redfish_node(emulator: RedfishEmulator, system_id: str | None = None, **info: Any) -> dict[str, Any]:
    return {
        "driver": "redfish",
        "driver_info": {
            "redfish_address": emulator.url,
            "redfish_system_id": system_id or emulator.system_id(),
            "redfish_username": USERNAME,
            "redfish_password": PASSWORD,
            "redfish_verify_ca": False,
            **info,
        },
    }


def provision(service: BaremetalService, uuid: str, *targets: str) -> dict[str, Any]:
    for target in targets:
        service.set_provision_state(uuid, target)
        drain(service.conductor, timeout=30)
    return service.get_node(uuid)


def test_verify_reads_the_power_state_from_the_bmc(
    service: BaremetalService, emulator: RedfishEmulator
) -> None:
    node = service.create_node(redfish_node(emulator))
    assert node["power_interface"] == "redfish"
    assert service.secret_fields("redfish") == frozenset({"redfish_password"})
    node = provision(service, node["uuid"], "manage", "provide")
    assert node["provision_state"] == "available"
    assert node["power_state"] == "power off"
    assert node["last_error"] is None
    result = service.validate_node(node["uuid"])
    assert result["power"] == {"result": True}
    assert result["management"] == {"result": True}


def test_wrong_credentials_leave_the_node_in_enroll_with_last_error(
    service: BaremetalService, emulator: RedfishEmulator
) -> None:
    wrong = "definitely-wrong-password"
    node = service.create_node(redfish_node(emulator, redfish_password=wrong))
    node = provision(service, node["uuid"], "manage")
    assert node["provision_state"] == "enroll"
    assert node["target_provision_state"] is None
    assert "refused the credentials" in node["last_error"]
    assert "check redfish_username and redfish_password" in node["last_error"]
    assert wrong not in node["last_error"]


def test_invalid_driver_info_fails_validation(service: BaremetalService, emulator: RedfishEmulator) -> None:
    node = service.create_node({"driver": "redfish", "driver_info": {"redfish_address": "ftp://bmc"}})
    result = service.validate_node(node["uuid"])
    assert result["power"]["result"] is False
    assert "redfish_address" in result["power"]["reason"]
    node = provision(service, node["uuid"], "manage")
    assert node["provision_state"] == "enroll"
    assert "redfish_address" in node["last_error"]


@pytest.mark.serial  # measured against the clock
def test_unreachable_and_hung_bmcs_land_in_last_error_in_bounded_time(service: BaremetalService) -> None:
    refused = service.create_node(
        {"driver": "redfish", "driver_info": {"redfish_address": closed_port_address()}}
    )
    with silent_bmc() as address:
        hung = service.create_node({"driver": "redfish", "driver_info": {"redfish_address": address}})
        service.set_provision_state(refused["uuid"], "manage")
        service.set_provision_state(hung["uuid"], "manage")
        started = time.monotonic()
        drain(service.conductor, timeout=20)
        assert time.monotonic() - started < 10  # read timeout 1 s: nothing hangs
    refused = service.get_node(refused["uuid"])
    hung = service.get_node(hung["uuid"])
    for node in (refused, hung):
        assert node["provision_state"] == "enroll"
        assert node["reservation"] is None
        assert node["last_error"].startswith("Failed to get power state for node")
    assert "connection refused" in refused["last_error"]
    assert "timed out" in hung["last_error"]


def test_power_timeout_lands_in_last_error(service: BaremetalService, emulator: RedfishEmulator) -> None:
    system = emulator.system_id()
    node = service.create_node(redfish_node(emulator, system, redfish_power_timeout=0.3))
    node = provision(service, node["uuid"], "manage", "provide")
    assert node["power_state"] == "power off"
    service.set_power_state(node["uuid"], "power on")
    start_of_second()  # the emulator applies the reset a second or more later
    service.conductor.run_once()
    node = service.get_node(node["uuid"])
    assert node["power_state"] == "power off"
    assert node["target_power_state"] is None
    assert "Timed out after 0.3 s waiting for the Redfish BMC" in node["last_error"]
    assert "'power on'" in node["last_error"]


def test_power_sync_records_out_of_band_changes(
    service: BaremetalService, emulator: RedfishEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    system = emulator.system_id()
    node = provision(
        service, service.create_node(redfish_node(emulator, system))["uuid"], "manage", "provide"
    )
    in_maintenance = provision(
        service, service.create_node(redfish_node(emulator))["uuid"], "manage", "provide"
    )
    service.set_maintenance(in_maintenance["uuid"], True, "hands off")
    gone = provision(service, service.create_node(redfish_node(emulator))["uuid"], "manage", "provide")
    service.update_node(gone["uuid"], {"driver_info": {"redfish_address": closed_port_address()}})
    fake = service.create_node({"driver": "fake-hardware"})
    assert node["power_state"] == "power off"

    # nothing changed yet: nothing recorded
    results = {r.uuid: r for r in sync_power_states(service.db, service.drivers, page_size=2)}  # 2 pages
    # not in maintenance (excluded), not the fake node (still in enroll: not verified yet)
    assert set(results) == {node["uuid"], gone["uuid"]}
    assert not results[node["uuid"]].changed
    assert fake["provision_state"] == "enroll"
    assert "connection refused" in (results[gone["uuid"]].error or "")
    assert service.get_node(gone["uuid"])["power_state"] == "power off"

    # somebody presses the power button at the BMC
    emulator.reset(system, "On")
    wait_for_power(emulator, system, "On")
    etag_before = service.get_node(node["uuid"])["etag"]

    sync = PowerSync(service.db, service.drivers, interval=0.1)
    sync.start()
    try:
        deadline = time.monotonic() + 10
        while service.get_node(node["uuid"])["power_state"] != "power on":
            assert time.monotonic() < deadline, "the periodic sync did not record the change"
            time.sleep(0.05)
    finally:
        sync.stop()
    after = service.get_node(node["uuid"])
    assert after["etag"] != etag_before
    assert after["provision_state"] == "available"
    events = [e for e in service.list_events(resource_uuid=node["uuid"]) if e["event_type"] == EVENT_TYPE]
    assert len(events) == 1
    assert events[0]["payload"]["power_state"] == "power on"
    assert events[0]["etag"] == after["etag"]
    # a node in maintenance is never synced
    assert service.get_node(in_maintenance["uuid"])["power_state"] == "power off"
    # nothing in the events or the logs reveals the password
    assert PASSWORD not in json.dumps(service.list_events(limit=1000))
    assert all(PASSWORD not in record.getMessage() for record in caplog.records)


def test_power_sync_never_overrides_queued_work(service: BaremetalService, emulator: RedfishEmulator) -> None:
    system = emulator.system_id()
    node = provision(
        service, service.create_node(redfish_node(emulator, system))["uuid"], "manage", "provide"
    )
    # the recorded state disagrees with the BMC (Off) ...
    service.db.update("node", node["uuid"], lambda current: {"power_state": "power on"})
    read_by_sync = service.db.get("node", node["uuid"])
    # ... but a power action gets queued between the sync's read and its write: hands off
    service.set_power_state(node["uuid"], "power off")
    assert _check_one(service.db, service.drivers, read_by_sync) is None
    assert sync_power_states(service.db, service.drivers) == []  # busy nodes are not even read
    after = service.get_node(node["uuid"])
    assert after["power_state"] == "power on"
    assert after["target_power_state"] == "power off"


def test_bmc_failure_during_deploy_lands_in_deploy_failed(
    service: BaremetalService, emulator: RedfishEmulator
) -> None:
    node = provision(service, service.create_node(redfish_node(emulator))["uuid"], "manage", "provide")
    assert node["provision_state"] == "available"
    # the BMC's password was changed behind our back
    info = dict(node["driver_info"], redfish_password="rotated-elsewhere")
    service.update_node(node["uuid"], {"driver_info": info})
    node = provision(service, node["uuid"], "active")
    assert node["provision_state"] == "deploy failed"
    assert node["target_provision_state"] is None
    assert node["last_error"].startswith("Failed to deploy. Error: the Redfish BMC at")
    assert "refused the credentials" in node["last_error"]
    assert node["power_state"] == "power off"
    assert node["reservation"] is None


def test_inspect_reads_what_the_bmc_reports(service: BaremetalService, emulator: RedfishEmulator) -> None:
    node = service.create_node({**redfish_node(emulator), "properties": {"cpus": 2}})
    node = provision(service, node["uuid"], "manage", "inspect")
    # the emulator's fake systems report neither a CPU count nor memory, nor a Processors
    # collection: inspection succeeds and keeps what the node had
    assert node["provision_state"] == "manageable"
    assert node["last_error"] is None
    assert node["properties"] == {"cpus": 2}
