"""openstacksdk and the ``openstack baremetal`` CLI drive the service unchanged, over HTTP.

The CLI tests are few on purpose: each ``openstack`` call costs about a second of startup.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openstack
import pytest

from baremetal_service.deploy import build_app

from .conftest import Api, Server

# openstacksdk 4.x warns about its own internals (InfluxDB defaults, _compute_attributes)
# on every call; those are not ours to fix.  Our own warnings still fail the tests.
pytestmark = pytest.mark.filterwarnings(
    "ignore::openstack.warnings._RemovedInSDKWarning",
    "ignore::openstack.warnings.OpenStackDeprecationWarning",
)


@pytest.fixture
def conn(service_url: str) -> Any:
    connection = openstack.connect(auth_type="none", baremetal_endpoint_override=service_url)
    yield connection
    connection.close()


def test_sdk_node_lifecycle(conn: Any, service_url: str) -> None:
    node = conn.baremetal.create_node(driver="fake-hardware", name="sdk-1", properties={"cpus": 8})
    assert node.provision_state == "enroll"
    assert conn.baremetal.get_node("sdk-1").id == node.id
    assert [n.name for n in conn.baremetal.nodes()] == ["sdk-1"]
    updated = conn.baremetal.update_node(node, extra={"rack": "r1"})
    assert updated.extra == {"rack": "r1"}
    patched = conn.baremetal.patch_node(node, [{"op": "add", "path": "/description", "value": "from sdk"}])
    assert patched.description == "from sdk"
    node = conn.baremetal.set_node_provision_state(node, "manage", wait=True, timeout=30)
    assert node.provision_state == "manageable"
    node = conn.baremetal.set_node_provision_state(node, "provide", wait=True, timeout=30)
    assert node.provision_state == "available"
    conn.baremetal.set_node_power_state(node, "power on", wait=True, timeout=30)
    assert conn.baremetal.get_node(node.id).power_state == "power on"
    port = conn.baremetal.create_port(node_id=node.id, address="52:54:00:12:34:56")
    assert [p.id for p in conn.baremetal.ports(node=node.id)] == [port.id]
    conn.baremetal.delete_port(port)
    conn.baremetal.delete_node(node)
    assert list(conn.baremetal.nodes()) == []


def test_sdk_maps_errors_to_its_exceptions(service_url: str) -> None:
    # The SDK retries a 409 (Ironic's "node locked") with back-off; a duplicate name is final.
    conn = openstack.connect(
        auth_type="none", baremetal_endpoint_override=service_url, baremetal_status_code_retries=0
    )
    with pytest.raises(openstack.exceptions.NotFoundException):
        conn.baremetal.get_node("no-such-node")
    conn.baremetal.create_node(driver="fake-hardware", name="twice")
    with pytest.raises(openstack.exceptions.ConflictException):
        conn.baremetal.create_node(driver="fake-hardware", name="twice")
    with pytest.raises(openstack.exceptions.BadRequestException):
        conn.baremetal.create_node(driver="no-such-driver")
    conn.close()


def _openstack(url: str, *args: str) -> Any:
    exe = shutil.which("openstack")
    cmd = [exe] if exe else [sys.executable, "-m", "openstackclient.shell"]
    cmd += ["--os-auth-type", "none", "--os-endpoint", url, "baremetal", *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout) if "-f" in args else done.stdout


@pytest.fixture
def sqlite_service_url(tmp_path: Path) -> Iterator[str]:
    """Its own service on SQLite: the CLI checks the wire, not the backend (SDK tests run on both)."""
    server = Server(build_app(database_url=f"sqlite:///{tmp_path / 'cli.sqlite'}")).start()
    try:
        yield server.url
    finally:
        server.stop()


def test_cli_node_workflow(sqlite_service_url: str) -> None:
    url = sqlite_service_url
    created = _openstack(url, "node", "create", "--driver", "fake-hardware", "--name", "cli-1", "-f", "json")
    assert created["provision_state"] == "enroll"
    _openstack(url, "node", "set", "cli-1", "--extra", "rack=r7", "--description", "by cli")
    _openstack(url, "node", "manage", "cli-1", "--wait", "30")
    _openstack(url, "node", "provide", "cli-1", "--wait", "30")
    _openstack(url, "node", "power", "on", "cli-1", "--power-timeout", "30")
    _openstack(url, "port", "create", "52:54:00:ab:cd:ef", "--node", created["uuid"])
    shown = _openstack(url, "node", "show", "cli-1", "-f", "json")
    assert shown["extra"] == {"rack": "r7"} and shown["description"] == "by cli"
    assert shown["provision_state"] == "available"
    api = Api(url)
    api.wait_for(f"/v1/nodes/{created['uuid']}", lambda d: d["power_state"] == "power on")
    _openstack(url, "node", "unset", "cli-1", "--extra", "rack")
    listed = _openstack(url, "node", "list", "-f", "json")
    assert [(n["name"], n["provision_state"]) for n in listed] == [("cli-1", "available")]
    ports = api.get(f"/v1/nodes/{created['uuid']}/ports?fields=address").json()["ports"]
    assert [p["address"] for p in ports] == ["52:54:00:ab:cd:ef"]
    assert api.get(f"/v1/nodes/{created['uuid']}").json()["extra"] == {}
    _openstack(url, "node", "delete", "cli-1")
    assert api.get("/v1/nodes").json()["nodes"] == []
