"""The service facade as the API uses it: dicts in and out, domain errors, tenancy, etags."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from apimw.etag import parse_if_match
from baremetal_service import exceptions as exc
from baremetal_service.objects.service import BaremetalService

OTHER_UUID = "9d2b1a0e-3c4f-4e5a-8b6c-7d8e9f0a1b2c"


@pytest.fixture
def svc(database_url: str) -> Any:
    service = BaremetalService(database_url, etag_key=b"s" * 32, conductor_workers=1, poll_interval=0.02)
    yield service
    service.close()


def new(svc: BaremetalService, name: str = "n", **values: Any) -> dict[str, Any]:
    return svc.create_node({"name": name, "driver": "fake-hardware", **values})


def settle(svc: BaremetalService, ident: str) -> dict[str, Any]:
    return svc.wait_for_idle(ident, timeout=10)


# -- nodes -------------------------------------------------------------------------------------


def test_a_new_node_looks_like_ironics(svc: BaremetalService) -> None:
    node = new(svc, properties={"cpus": 8}, resource_class="baremetal")
    assert node["provision_state"] == "enroll"
    assert node["power_state"] is None and node["target_provision_state"] is None
    assert node["driver"] == "fake-hardware" and node["power_interface"] == "fake"
    assert node["network_interface"] == "noop" and node["conductor_group"] == ""
    assert node["maintenance"] is False and node["driver_internal_info"] == {}
    assert node["etag"].startswith('W/"') and node["created_at"].endswith("+00:00")
    assert node["conductor"] and "id" not in node and "pending_action" not in node
    assert svc.get_node(node["uuid"]) == svc.get_node("n") == node


def test_pre_1_11_nodes_start_available(svc: BaremetalService) -> None:
    assert new(svc, _initial_state="available")["provision_state"] == "available"


@pytest.mark.parametrize(
    ("values", "error", "status", "text"),
    [
        pytest.param({"driver": "no-such-driver"}, exc.NoValidHost, 400,
                     "No valid host was found. Reason: No conductor service registered which supports "
                     'driver no-such-driver for conductor group "". Ensure the driver is valid and enabled.',
                     id="unknown-driver"),
        pytest.param({"driver": "fake-hardware", "bogus": 1}, exc.InvalidParameterValue, 400,
                     "Unknown or read-only node field(s): bogus", id="unknown-field"),
        pytest.param({"driver": "fake-hardware", "provision_state": "active"}, exc.InvalidParameterValue,
                     400, "Unknown or read-only node field(s): provision_state", id="read-only-field"),
        pytest.param({"driver": "fake-hardware", "power_interface": "ipmitool"}, exc.InterfaceNotFound, 400,
                     None, id="unsupported-interface"),
        pytest.param({"driver": "fake-hardware", "uuid": "not-a-uuid"}, exc.InvalidParameterValue, 400,
                     None, id="bad-uuid"),
        pytest.param({"driver": "fake-hardware", "name": OTHER_UUID}, exc.InvalidParameterValue, 400,
                     None, id="uuid-as-name"),
        pytest.param({"driver": "fake-hardware", "chassis_uuid": OTHER_UUID}, exc.ChassisNotFound, 400,
                     f"Chassis {OTHER_UUID} could not be found.", id="missing-chassis"),
    ],
)  # fmt: skip
def test_bad_creates_are_4xx_with_ironic_text(
    svc: BaremetalService, values: dict[str, Any], error: type[Exception], status: int, text: str | None
) -> None:
    with pytest.raises(error) as info:
        svc.create_node(values)
    assert info.value.status == status  # type: ignore[attr-defined]
    if text is not None:
        assert info.value.detail == text  # type: ignore[attr-defined]
    assert svc.list_nodes() == []


def test_duplicate_name_and_instance_are_409(svc: BaremetalService) -> None:
    new(svc, "dup", instance_uuid=OTHER_UUID)
    with pytest.raises(exc.NodeNameExists) as info:
        new(svc, "dup")
    assert (info.value.status, info.value.code) == (409, "baremetal.node-duplicate-name")
    with pytest.raises(exc.InstanceAssociated) as info2:
        new(svc, "other", instance_uuid=OTHER_UUID)
    assert info2.value.status == 409


def test_not_found_text_is_ironics(svc: BaremetalService) -> None:
    with pytest.raises(exc.NodeNotFound) as info:
        svc.get_node("no-such-name")
    assert (info.value.status, info.value.detail) == (404, "Node no-such-name could not be found.")
    assert info.value.code == "baremetal.node-not-found"


def test_list_filters(svc: BaremetalService) -> None:
    new(svc, "a", resource_class="gold", instance_uuid=OTHER_UUID)
    new(svc, "b", resource_class="silver", maintenance=True, maintenance_reason="disk")
    new(svc, "c", _initial_state="available", description="Rack 7, row B")

    def names(**filters: Any) -> list[str]:
        return [n["name"] for n in svc.list_nodes(filters=filters)]

    assert names() == ["a", "b", "c"]
    assert names(provision_state="available") == ["c"]
    assert names(resource_class="gold") == ["a"]
    assert names(maintenance=True) == ["b"]
    assert names(maintenance=False) == ["a", "c"]
    assert names(associated=True) == ["a"]
    assert names(associated=False) == ["b", "c"]
    assert names(driver="fake-hardware") == ["a", "b", "c"]
    assert names(driver="other") == []
    assert names(description_contains="row B") == ["c"]
    assert names(description_contains="RACK 7") == ["c"]  # case-insensitive on every backend
    assert names(description_contains="%") == []
    assert [n["name"] for n in svc.list_nodes(sort_key="name", sort_dir="desc", limit=2)] == ["c", "b"]
    with pytest.raises(exc.InvalidParameterValue):
        svc.list_nodes(filters={"colour": "blue"})


def test_update_recomputes_the_etag_and_honours_if_match(svc: BaremetalService) -> None:
    node = new(svc, driver_info={"ipmi_password": "pw"})
    cond = parse_if_match(node["etag"])
    updated = svc.update_node("n", {"description": "d", "extra": {"a": 1}}, if_match=cond)
    assert cond is not None and cond.enforced
    assert updated["description"] == "d" and updated["etag"] != node["etag"]
    assert svc.get_node("n")["etag"] == updated["etag"]
    with pytest.raises(exc.PreconditionFailed) as info:
        svc.update_node("n", {"description": "lost"}, if_match=parse_if_match(node["etag"]))
    assert info.value.status == 412
    assert svc.get_node("n")["description"] == "d"
    # a no-op change writes nothing: same etag, no event
    assert svc.update_node("n", {"description": "d"})["etag"] == updated["etag"]
    # a change computed from the current node (JSON Patch style), unmasked secrets included
    patched = svc.update_node("n", lambda cur: {"driver_info": {**cur["driver_info"], "ipmi_address": "x"}})
    assert patched["driver_info"] == {"ipmi_password": "pw", "ipmi_address": "x"}


def test_update_validates_like_create(svc: BaremetalService) -> None:
    new(svc, "a")
    new(svc, "b")
    with pytest.raises(exc.NodeNameExists):
        svc.update_node("b", {"name": "a"})
    with pytest.raises(exc.NoValidHost):
        svc.update_node("b", {"driver": "nope"})
    with pytest.raises(exc.InvalidParameterValue):
        svc.update_node("b", {"provision_state": "active"})
    with pytest.raises(exc.ChassisNotFound) as info:
        svc.update_node("b", {"chassis_uuid": OTHER_UUID})
    assert info.value.status == 400
    chassis = svc.crud["chassis"].create({"description": "c1"})
    assert svc.update_node("b", {"chassis_uuid": chassis["uuid"]})["chassis_uuid"] == chassis["uuid"]
    assert svc.update_node("b", {"power_interface": None})["power_interface"] == "fake"
    off = svc.update_node("b", {"maintenance": True, "maintenance_reason": "r"})
    assert off["maintenance_reason"] == "r"
    assert svc.update_node("b", {"maintenance": False})["maintenance_reason"] is None


def test_delete_rules(svc: BaremetalService) -> None:
    new(svc, "gone")
    svc.delete_node("gone")
    with pytest.raises(exc.NodeNotFound):
        svc.get_node("gone")
    node = new(svc, "busy", _initial_state="available")
    svc.set_provision_state("busy", "active")
    assert settle(svc, "busy")["provision_state"] == "active"
    with pytest.raises(exc.NodeDeleteForbidden) as info:
        svc.delete_node("busy")
    assert info.value.status == 409
    assert info.value.detail == (
        f'Can not delete node "{node["uuid"]}" while it is in provision state "active". Valid provision '
        "states to perform deletion are: \"('manageable', 'enroll', 'adopt failed', 'available')\", "
        "or set the node into maintenance mode"
    )
    svc.set_maintenance("busy", True, "broken")
    svc.delete_node("busy")
    new(svc, "assoc", instance_uuid=OTHER_UUID)
    with pytest.raises(exc.NodeAssociated):
        svc.delete_node("assoc")
    new(svc, "guarded", _initial_state="available")
    svc.set_provision_state("guarded", "active")
    settle(svc, "guarded")
    svc.update_node("guarded", {"protected": True, "protected_reason": "prod"})
    with pytest.raises(exc.NodeProtected) as protected:
        svc.set_provision_state("guarded", "deleted")
    assert protected.value.status == 403
    svc.set_maintenance("guarded", True)  # maintenance allows deleting an active node, not a protected one
    with pytest.raises(exc.NodeProtected):
        svc.delete_node("guarded")
    assert svc.get_node("guarded")["provision_state"] == "active"


# -- states --------------------------------------------------------------------------------------


def test_invalid_transition_is_400_naming_the_allowed_actions(svc: BaremetalService) -> None:
    node = new(svc)
    with pytest.raises(exc.InvalidStateRequested) as info:
        svc.set_provision_state("n", "provide")
    problem = info.value
    assert (problem.status, problem.code) == (400, "baremetal.invalid-state-transition")
    assert problem.detail.startswith(
        f'The requested action "provide" can not be performed on node "{node["uuid"]}" while it is in '
        'state "enroll".'
    )
    assert problem.detail.endswith("Allowed actions from this state: manage.")
    assert problem.extra["allowed_targets"] == ["manage"]
    with pytest.raises(exc.InvalidStateRequested):
        svc.set_provision_state("n", "bogus")


def test_actions_are_asynchronous_and_a_busy_node_is_locked(svc: BaremetalService) -> None:
    svc.conductor.stop()  # keep the work queued
    new(svc)
    queued = svc.set_provision_state("n", "manage")
    assert (queued["provision_state"], queued["target_provision_state"]) == ("verifying", "manageable")
    with pytest.raises(exc.NodeLocked) as info:
        svc.set_power_state("n", "power on")
    assert info.value.status == 409
    with pytest.raises(exc.NodeLocked):
        svc.delete_node("n")
    svc.conductor.start()
    done = settle(svc, "n")
    assert (done["provision_state"], done["target_provision_state"]) == ("manageable", None)
    events = [e["event_type"] for e in svc.list_events(resource_uuid=done["uuid"])]
    assert events == [
        "baremetal.node.create.end", "baremetal.node.provision_set.start", "baremetal.node.conductor.end",
    ]  # fmt: skip


def test_maintenance_blocks_deploy_but_not_power(svc: BaremetalService) -> None:
    new(svc, _initial_state="available")
    on = svc.set_maintenance("n", True, "fan")
    assert (on["maintenance"], on["maintenance_reason"]) == (True, "fan")
    with pytest.raises(exc.NodeInMaintenance) as info:
        svc.set_provision_state("n", "active")
    assert info.value.status == 400
    svc.set_power_state("n", "power on")
    assert settle(svc, "n")["power_state"] == "power on"
    off = svc.set_maintenance("n", False)
    assert (off["maintenance"], off["maintenance_reason"]) == (False, None)


@pytest.mark.parametrize("target", ["sideways", "POWER ON", ""])
def test_bad_power_targets_are_400(svc: BaremetalService, target: str) -> None:
    new(svc)
    with pytest.raises(exc.InvalidParameterValue):
        svc.set_power_state("n", target)


def test_provision_state_change_honours_if_match(svc: BaremetalService) -> None:
    node = new(svc)
    svc.update_node("n", {"description": "changed"})
    with pytest.raises(exc.PreconditionFailed):
        svc.set_provision_state("n", "manage", if_match=node["etag"])
    assert svc.get_node("n")["provision_state"] == "enroll"


def test_validate(svc: BaremetalService) -> None:
    new(svc)
    result = svc.validate_node("n")
    assert result["power"] == {"result": True} and result["deploy"] == {"result": True}
    assert set(result) >= {"boot", "console", "deploy", "inspect", "management", "network", "power"}


# -- tenancy --------------------------------------------------------------------------------------


def test_projects_see_only_their_nodes_ports_and_portgroups(svc: BaremetalService) -> None:
    mine = svc.create_node({"name": "mine", "driver": "fake-hardware"}, project_id="p1")
    assert mine["owner"] == "p1"
    leased = svc.create_node({"name": "leased", "driver": "fake-hardware", "lessee": "p1"}, project_id="p2")
    svc.create_node({"name": "theirs", "driver": "fake-hardware"}, project_id="p2")
    port = svc.crud["port"].create({"node_uuid": "theirs", "address": "52:54:00:12:34:56"}, project_id="p2")
    assert [n["name"] for n in svc.list_nodes(project_id="p1")] == ["mine", "leased"]
    assert [n["name"] for n in svc.list_nodes()] == ["mine", "leased", "theirs"]
    assert leased["owner"] == "p2"
    with pytest.raises(exc.NodeNotFound):
        svc.get_node("theirs", project_id="p1")
    with pytest.raises(exc.NodeNotFound):
        svc.update_node("theirs", {"description": "x"}, project_id="p1")
    with pytest.raises(exc.NodeNotFound):
        svc.delete_node("theirs", project_id="p1")
    with pytest.raises(exc.PortNotFound):
        svc.crud["port"].get(port["uuid"], project_id="p1")
    assert svc.crud["port"].list(project_id="p1") == []
    with pytest.raises(exc.NodeNotFound) as info:
        svc.crud["port"].create({"node_uuid": "theirs", "address": "52:54:00:12:34:57"}, project_id="p1")
    assert info.value.status == 400


# -- ports, portgroups, chassis -------------------------------------------------------------------


def test_ports(svc: BaremetalService) -> None:
    node = new(svc)
    port = svc.crud["port"].create({"node_uuid": node["uuid"], "address": "52:54:00:AA:BB:01"})
    assert port["address"] == "52:54:00:aa:bb:01" and port["pxe_enabled"] is True
    assert port["node_uuid"] == node["uuid"] and port["portgroup_uuid"] is None
    with pytest.raises(exc.MACAlreadyExists) as info:
        svc.crud["port"].create({"node_uuid": "n", "address": "52:54:00:aa:bb:01"})
    assert info.value.detail == "A port with MAC address 52:54:00:aa:bb:01 already exists."
    with pytest.raises(exc.InvalidParameterValue):
        svc.crud["port"].create({"node_uuid": "n", "address": "not-a-mac"})
    with pytest.raises(exc.NodeNotFound) as missing:
        svc.crud["port"].create({"node_uuid": OTHER_UUID, "address": "52:54:00:aa:bb:02"})
    assert missing.value.status == 400
    assert [p["uuid"] for p in svc.crud["port"].list(node="n")] == [port["uuid"]]
    assert [p["uuid"] for p in svc.crud["port"].list(address="52:54:00:AA:BB:01")] == [port["uuid"]]
    updated = svc.crud["port"].update(port["uuid"], {"pxe_enabled": False}, if_match=port["etag"])
    assert updated["pxe_enabled"] is False and updated["etag"] != port["etag"]
    with pytest.raises(exc.PreconditionFailed):
        svc.crud["port"].delete(port["uuid"], if_match=port["etag"])
    svc.crud["port"].delete(port["uuid"], if_match=updated["etag"])
    with pytest.raises(exc.PortNotFound) as gone:
        svc.crud["port"].get(port["uuid"])
    assert gone.value.detail == f"Port {port['uuid']} could not be found."


def test_portgroups(svc: BaremetalService) -> None:
    new(svc, "a")
    new(svc, "b")
    pg = svc.crud["portgroup"].create({"node_uuid": "a", "name": "bond0", "address": "52:54:00:00:00:10"})
    with pytest.raises(exc.PortgroupNameExists):
        svc.crud["portgroup"].create({"node_uuid": "a", "name": "bond0"})
    ports = svc.crud["port"]
    port = ports.create({"node_uuid": "a", "address": "52:54:00:00:00:11", "portgroup_uuid": "bond0"})
    assert port["portgroup_uuid"] == pg["uuid"]
    with pytest.raises(exc.InvalidParameterValue):
        ports.create({"node_uuid": "b", "address": "52:54:00:00:00:12", "portgroup_uuid": pg["uuid"]})
    assert [p["uuid"] for p in svc.crud["port"].list(portgroup="bond0")] == [port["uuid"]]
    with pytest.raises(exc.PortgroupNotEmpty) as info:
        svc.crud["portgroup"].delete("bond0")
    assert info.value.status == 400
    svc.crud["port"].update(port["uuid"], {"portgroup_uuid": None})
    svc.crud["portgroup"].delete("bond0")
    assert svc.crud["portgroup"].list() == []


def test_chassis(svc: BaremetalService) -> None:
    chassis = svc.crud["chassis"].create({"description": "rack 1", "extra": {"row": 2}})
    assert svc.crud["chassis"].get(chassis["uuid"]) == chassis
    node = new(svc, chassis_uuid=chassis["uuid"])
    assert node["chassis_uuid"] == chassis["uuid"]
    assert [n["uuid"] for n in svc.list_nodes(filters={"chassis_uuid": chassis["uuid"]})] == [node["uuid"]]
    with pytest.raises(exc.ChassisNotEmpty) as info:
        svc.crud["chassis"].delete(chassis["uuid"])
    assert info.value.status == 400
    changed = svc.crud["chassis"].update(chassis["uuid"], {"description": "rack 2"})
    assert changed["etag"] != chassis["etag"]
    svc.delete_node("n")
    svc.crud["chassis"].delete(chassis["uuid"], if_match=changed["etag"])
    assert svc.crud["chassis"].list() == []


# -- resource classes ------------------------------------------------------------------------------


def test_resource_class_put_is_idempotent(svc: BaremetalService) -> None:
    assert svc.ensure_resource_class("CUSTOM_GPU") is True
    assert svc.ensure_resource_class("CUSTOM_GPU") is False
    with pytest.raises(exc.ResourceClassExists) as info:
        svc.create_resource_class("CUSTOM_GPU")
    assert info.value.status == 409
    assert svc.create_resource_class("CUSTOM_FPGA")["name"] == "CUSTOM_FPGA"
    assert [rc["name"] for rc in svc.list_resource_classes()] == ["CUSTOM_FPGA", "CUSTOM_GPU"]
    new(svc, resource_class="CUSTOM_GPU")
    with pytest.raises(exc.ResourceClassInUse):
        svc.delete_resource_class("CUSTOM_GPU")
    svc.delete_resource_class("CUSTOM_FPGA")
    with pytest.raises(exc.ResourceClassNotFound):
        svc.get_resource_class("CUSTOM_FPGA")


@pytest.mark.parametrize(
    "name",
    ["GPU", "custom_gpu", "CUSTOM_", "CUSTOM_gpu", "CUSTOM_G-PU", "CUSTOM_" + "X" * 249, "VCPU"],
)
def test_resource_class_names_are_validated(svc: BaremetalService, name: str) -> None:
    with pytest.raises(exc.InvalidResourceClassName) as info:
        svc.ensure_resource_class(name)
    assert info.value.status == 400
    assert svc.list_resource_classes() == []


def test_concurrent_puts_create_a_resource_class_once(svc: BaremetalService) -> None:
    results: list[bool] = []
    barrier = threading.Barrier(8, timeout=10)

    def put() -> None:
        barrier.wait()
        results.append(svc.ensure_resource_class("CUSTOM_RACE"))

    threads = [threading.Thread(target=put) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert sorted(results) == [False] * 7 + [True]


# -- drivers -----------------------------------------------------------------------------------------


def test_drivers(svc: BaremetalService) -> None:
    assert [d["name"] for d in svc.list_drivers()] == ["fake-hardware"]
    doc = svc.get_driver("fake-hardware")
    assert doc["default_power_interface"] == "fake" and doc["type"] == "dynamic" and doc["hosts"]
    with pytest.raises(exc.DriverNotFound) as info:
        svc.get_driver("ipmi")
    assert info.value.status == 404
    assert svc.secret_fields("fake-hardware") == frozenset()


def test_recorded_client_tokens_older_than_the_retention_are_purged(tmp_path: Any) -> None:
    """The service that runs the conductor purges old client-token rows by itself."""
    import datetime as dt
    import time

    import sqlalchemy as sa

    from apimw.idempotency import ClientToken
    from apimw.idempotency_db import record_token
    from baremetal_service.db.api import CLIENT_TOKENS

    svc = BaremetalService(
        f"sqlite:///{tmp_path / 'purge.db'}", conductor_workers=1, token_purge_interval=0.05,
        token_retention=3600,
    )  # fmt: skip
    try:
        with svc.db.engine.begin() as conn:
            record_token(conn, CLIENT_TOKENS, ClientToken("p1", "old", "f"), kind="node", resource_id="u1")
            record_token(conn, CLIENT_TOKENS, ClientToken("p1", "new", "f"), kind="node", resource_id="u2")
            # the first one was recorded two hours ago
            conn.execute(
                CLIENT_TOKENS.update()
                .where(CLIENT_TOKENS.c.token == "old")
                .values(created_at=dt.datetime.now(dt.UTC) - dt.timedelta(hours=2))
            )

        def tokens() -> set[str]:
            with svc.db.engine.connect() as conn:
                return set(conn.execute(sa.select(CLIENT_TOKENS.c.token)).scalars())

        deadline = time.monotonic() + 10
        while "old" in tokens() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert tokens() == {"new"}
        assert svc.token_purge.purged == 1
    finally:
        svc.close()


def test_only_the_service_that_runs_the_conductor_purges(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'two.db'}"
    api_only = BaremetalService(url, conductor_workers=0, token_purge_interval=0.01)
    with_conductor = BaremetalService(url, conductor_workers=1, token_purge_interval=0.01)
    try:
        assert not api_only.token_purge.running
        assert with_conductor.token_purge.running
    finally:
        api_only.close()
        with_conductor.close()
    assert not with_conductor.token_purge.running
