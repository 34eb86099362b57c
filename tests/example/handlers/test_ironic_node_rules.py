"""Node rules over HTTP, as Ironic 39.0 (fake-hardware) answers them: protection, the fake
hardware's interfaces and boot device, and the provision state a 1.1 client sees."""

from __future__ import annotations

from .conftest import Api, error_of
from .test_allocations import available_node


def protect(api: Api, uuid: str, value: bool, reason: str | None = None) -> dict:  # type: ignore[type-arg]
    patch = [{"op": "replace", "path": "/protected", "value": value}]
    if reason is not None:
        patch.append({"op": "replace", "path": "/protected_reason", "value": reason})
    resp = api.patch(f"/v1/nodes/{uuid}", patch)
    return {"status": resp.status_code, "body": resp.json()}


def test_a_node_is_protected_only_when_active_and_unprotecting_clears_the_reason(api: Api) -> None:
    node = available_node(api)
    refused = api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "replace", "path": "/protected", "value": True}])
    assert refused.status_code == 409, refused.text
    assert error_of(refused)["faultstring"] == (
        f"Node {node['uuid']} can only be made protected in provision states 'active' or 'rescue', "
        "the current state is 'available'"
    )
    assert api.get(f"/v1/nodes/{node['uuid']}").json()["protected"] is False
    path = f"/v1/nodes/{node['uuid']}"
    assert api.put(f"{path}/states/provision", {"target": "active"}).status_code == 202
    api.wait_for(path, lambda d: d["provision_state"] == "active")
    protected = protect(api, node["uuid"], True, "production")
    assert protected["status"] == 200
    assert (protected["body"]["protected"], protected["body"]["protected_reason"]) == (True, "production")
    unprotected = protect(api, node["uuid"], False)
    assert unprotected["status"] == 200
    assert (unprotected["body"]["protected"], unprotected["body"]["protected_reason"]) == (False, None)
    reason_alone = api.patch(path, [{"op": "replace", "path": "/protected_reason", "value": "x"}])
    assert reason_alone.status_code == 400
    assert error_of(reason_alone)["faultstring"] == (
        "The protected_reason field can only be set when protected is True"
    )


def test_fake_hardware_takes_no_inspect_and_boots_from_pxe(api: Api) -> None:
    node = api.node(inspect_interface="no-inspect")
    assert node["inspect_interface"] == "no-inspect"
    other = api.node()
    changed = api.patch(f"/v1/nodes/{other['uuid']}", [
        {"op": "replace", "path": "/inspect_interface", "value": "no-inspect"},
    ])  # fmt: skip
    assert changed.status_code == 200 and changed.json()["inspect_interface"] == "no-inspect"
    boot = api.get(f"/v1/nodes/{other['uuid']}/management/boot_device")
    assert boot.status_code == 200 and boot.json() == {"boot_device": "pxe", "persistent": False}


def test_a_node_created_at_1_1_shows_one_provision_state(api: Api) -> None:
    created = api.post("/v1/nodes", {"driver": "fake-hardware"}, version="1.1")
    assert created.status_code == 201
    states = api.get(f"/v1/nodes/{created.json()['uuid']}/states", version="1.1").json()
    assert created.json()["provision_state"] is None  # AVAILABLE was NOSTATE before 1.2
    assert states["provision_state"] == created.json()["provision_state"]
    later = api.get(f"/v1/nodes/{created.json()['uuid']}/states", version="1.2").json()
    assert later["provision_state"] == "available"


def test_the_allocation_of_a_missing_node_is_a_bad_request(api: Api) -> None:
    shown = api.get("/v1/nodes/None/allocation")
    assert shown.status_code == 400
    assert error_of(shown)["faultstring"] == "Node None could not be found."
    assert api.delete("/v1/nodes/None/allocation").status_code == 404
    node = api.node()
    assert api.get(f"/v1/nodes/{node['uuid']}/allocation").status_code == 404  # the node has none


def test_requests_right_after_a_power_action_find_it_done(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}"
    connector = api.post("/v1/volume/connectors", {
        "node_uuid": node["uuid"], "type": "iqn", "connector_id": "iqn.2026-11.org.example:n1",
    }).json()  # fmt: skip
    # no wait in between: Ironic's second request waits for the node's lock, so does ours
    assert api.put(f"{path}/states/power", {"target": "power on"}).status_code == 202
    assert api.put(f"{path}/states/power", {"target": "power off"}).status_code == 202
    renamed = api.patch(f"/v1/volume/connectors/{connector['uuid']}", [
        {"op": "replace", "path": "/connector_id", "value": "iqn.2026-11.org.example:n2"},
    ])  # fmt: skip
    assert renamed.status_code == 200, renamed.text
    assert api.get(path).json()["power_state"] == "power off"
