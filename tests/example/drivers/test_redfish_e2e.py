"""End to end: the service over real HTTP drives a node on a real Redfish BMC (sushy-emulator).

enroll -> manage -> provide -> power on -> power off -> deploy -> undeploy, through
the whole middleware stack (request id, noauth, microversion, idempotency, etag)
and the conductor worker thread, the way a client would.  Four real power changes
(the emulator applies each 1-11 s later): this file takes about half a minute.
Failures (wrong credentials, a hung BMC) land in ``last_error`` while the API
keeps answering.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from baremetal_service.deploy import wrap
from baremetal_service.drivers.redfish import RedfishHardware
from baremetal_service.handlers.routes import create_flask_app
from baremetal_service.objects.service import BaremetalService
from tests.example.redfish_emulator import PASSWORD, USERNAME, RedfishEmulator, serve, silent_bmc
from tests.wsgi import LoopbackWaitress

pytestmark = pytest.mark.xdist_group(__name__)  # module fixtures set up once

VERSION_HEADER = "X-OpenStack-Ironic-API-Version"


@pytest.fixture(scope="module")
def emulator() -> Iterator[RedfishEmulator]:
    yield from serve("redfish-e2e")


class Service:
    """The bare-metal service with redfish enabled, on waitress in a thread, on loopback."""

    def __init__(self, database_url: str) -> None:
        self.service = BaremetalService(
            database_url,
            enabled_hardware_types=("fake-hardware", "redfish"),
            extra_hardware_types=(
                RedfishHardware(power_timeout=20, read_timeout=3, connect_timeout=2, poll_interval=0.2),
            ),
            conductor_workers=2,
            poll_interval=0.05,
        )
        self.app = wrap(create_flask_app(self.service).wsgi_app, store_url="memory://")
        self.server: LoopbackWaitress | None = None
        self.url = ""
        self.session = requests.Session()
        self.session.headers[VERSION_HEADER] = "latest"
        self.answered_meanwhile = 0

    def start(self) -> Service:
        self.server = LoopbackWaitress(self.app, name="waitress-redfish", threads=4)
        self.url = self.server.url
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self.session.get(self.url + "/", timeout=1)
                return self
            except requests.ConnectionError:
                time.sleep(0.02)
        raise RuntimeError("service did not start")

    def stop(self) -> None:
        self.session.close()
        if self.server is not None:
            self.server.stop()
        self.service.close()

    def request(self, method: str, path: str, body: Any = None) -> requests.Response:
        return self.session.request(method, self.url + path, json=body, timeout=5)

    def wait(self, uuid: str, done: Callable[[dict[str, Any]], bool], timeout: float = 20) -> dict[str, Any]:
        """Poll GET /v1/nodes/{uuid} until *done* (bounded); ``answered_meanwhile`` counts the
        GETs answered before it was done (the API answering while the conductor works)."""
        deadline = time.monotonic() + timeout
        self.answered_meanwhile = 0
        while True:
            response = self.request("GET", f"/v1/nodes/{uuid}")
            assert response.status_code == 200, response.text
            node: dict[str, Any] = response.json()
            if done(node):
                return node
            self.answered_meanwhile += 1
            assert time.monotonic() < deadline, f"timed out; last: {node}"
            time.sleep(0.1)

    def provision(self, uuid: str, target: str, expect: str) -> dict[str, Any]:
        response = self.request("PUT", f"/v1/nodes/{uuid}/states/provision", {"target": target})
        assert response.status_code == 202, response.text
        return self.wait(
            uuid, lambda n: n["target_provision_state"] is None and n["provision_state"] == expect
        )

    def power(self, uuid: str, target: str) -> dict[str, Any]:
        response = self.request("PUT", f"/v1/nodes/{uuid}/states/power", {"target": target})
        assert response.status_code == 202, response.text
        return self.wait(uuid, lambda n: n["target_power_state"] is None)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Service]:
    service = Service(f"sqlite:///{tmp_path / 'e2e.sqlite'}").start()
    try:
        yield service
    finally:
        service.stop()


def create_node(api: Service, **driver_info: Any) -> dict[str, Any]:
    response = api.request("POST", "/v1/nodes", {"driver": "redfish", "driver_info": driver_info})
    assert response.status_code == 201, response.text
    assert PASSWORD not in response.text
    assert PASSWORD not in response.headers.get("ETag", "")
    node: dict[str, Any] = response.json()
    return node


def test_node_lifecycle_on_a_redfish_bmc(
    api: Service, emulator: RedfishEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    system = emulator.system_id()
    props = api.request("GET", "/v1/drivers/redfish/properties").json()
    assert props["redfish_address"].startswith("Required.")

    node = create_node(
        api,
        redfish_address=emulator.url,
        redfish_system_id=system,
        redfish_username=USERNAME,
        redfish_password=PASSWORD,
        redfish_verify_ca=False,
    )
    uuid = node["uuid"]
    assert node["provision_state"] == "enroll"
    assert node["driver_info"]["redfish_password"] == "******"
    assert node["driver_info"]["redfish_username"] == USERNAME
    assert node["power_interface"] == "redfish"

    node = api.provision(uuid, "manage", "manageable")  # verify: reads the power state from the BMC
    assert node["power_state"] == "power off" and node["last_error"] is None
    node = api.provision(uuid, "provide", "available")

    node = api.power(uuid, "power on")
    assert (node["power_state"], node["last_error"]) == ("power on", None)
    assert emulator.power_state(system) == "On"

    node = api.power(uuid, "power off")
    assert (node["power_state"], node["last_error"]) == ("power off", None)
    assert emulator.power_state(system) == "Off"

    node = api.provision(uuid, "active", "active")  # deploy: PXE boot override, power on
    assert (node["power_state"], node["last_error"]) == ("power on", None)
    assert emulator.power_state(system) == "On"
    assert emulator.boot_override(system)["BootSourceOverrideTarget"] == "Pxe"

    node = api.provision(uuid, "deleted", "available")  # undeploy: tear down, power off, clean
    assert (node["power_state"], node["last_error"]) == ("power off", None)
    assert emulator.power_state(system) == "Off"

    listed = api.request("GET", "/v1/nodes/detail").text
    assert PASSWORD not in listed
    assert all(PASSWORD not in record.getMessage() for record in caplog.records)


def test_bmc_failures_land_in_last_error_and_the_api_stays_responsive(
    api: Service, emulator: RedfishEmulator
) -> None:
    wrong = create_node(
        api,
        redfish_address=emulator.url,
        redfish_system_id=emulator.system_id(),
        redfish_username=USERNAME,
        redfish_password="wrong-password-123",
    )
    with silent_bmc() as address:
        hung = create_node(api, redfish_address=address, redfish_username=USERNAME, redfish_password=PASSWORD)
        for node in (wrong, hung):
            response = api.request("PUT", f"/v1/nodes/{node['uuid']}/states/provision", {"target": "manage"})
            assert response.status_code == 202, response.text
        # a conductor worker is stuck on the hung BMC for its 3 s read timeout: the API answers
        # GETs of that very node meanwhile (an order, not a duration: a GET that hung with the
        # conductor would first answer after the node is done)
        hung = api.wait(hung["uuid"], lambda n: n["target_provision_state"] is None)
        assert api.answered_meanwhile >= 1, "the API stalled while the conductor works"
    wrong = api.wait(wrong["uuid"], lambda n: n["target_provision_state"] is None)
    assert wrong["provision_state"] == "enroll"
    assert "refused the credentials" in wrong["last_error"]
    assert "wrong-password-123" not in wrong["last_error"]
    assert hung["provision_state"] == "enroll"
    assert "timed out" in hung["last_error"]
    # a power request with the wrong credentials fails the same way (and is not retried forever)
    response = api.request("PUT", f"/v1/nodes/{wrong['uuid']}/states/power", {"target": "power on"})
    assert response.status_code == 202, response.text
    node = api.wait(wrong["uuid"], lambda n: n["target_power_state"] is None)
    assert "refused the credentials" in node["last_error"]
