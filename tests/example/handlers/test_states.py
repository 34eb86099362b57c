"""Provision and power state changes: 202 + Location, carried out by the conductor worker."""

from __future__ import annotations

import pytest

from .conftest import Api, error_of


def _provision(api: Api, uuid: str, target: str, **kw: object) -> None:
    resp = api.put(f"/v1/nodes/{uuid}/states/provision", {"target": target, **kw})
    assert resp.status_code == 202, resp.text
    assert resp.content == b""
    assert resp.headers["Location"] == f"{api.url}/v1/nodes/{uuid}/states"


def _settled(api: Api, uuid: str, state: str) -> dict[str, object]:
    return api.wait_for(
        f"/v1/nodes/{uuid}/states",
        lambda d: d["provision_state"] == state and d["target_provision_state"] is None,
    )


def test_manage_provide_deploy_undeploy(api: Api) -> None:
    uuid = api.node(name="life")["uuid"]
    _provision(api, uuid, "manage")
    _settled(api, uuid, "manageable")
    _provision(api, uuid, "provide")
    _settled(api, uuid, "available")
    _provision(api, uuid, "active")
    _settled(api, uuid, "active")
    blocked = api.delete(f"/v1/nodes/{uuid}")
    assert blocked.status_code == 409
    assert 'while it is in provision state "active"' in error_of(blocked)["faultstring"]
    _provision(api, uuid, "deleted")
    _settled(api, uuid, "available")
    assert api.delete(f"/v1/nodes/{uuid}").status_code == 204


def test_inspect_and_clean(api: Api) -> None:
    uuid = api.node()["uuid"]
    _provision(api, uuid, "manage")
    _settled(api, uuid, "manageable")
    _provision(api, uuid, "inspect")
    _settled(api, uuid, "manageable")
    steps = [{"interface": "deploy", "step": "erase_devices_metadata"}]
    _provision(api, uuid, "clean", clean_steps=steps)
    _settled(api, uuid, "manageable")


def test_invalid_transition_names_the_allowed_ones(api: Api) -> None:
    uuid = api.node()["uuid"]
    resp = api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "provide"})
    assert resp.status_code == 400
    err = error_of(resp)
    assert err["faultstring"].startswith(
        f'The requested action "provide" can not be performed on node "{uuid}" while it is in state "enroll".'
    )
    assert "manage" in resp.json()["errors"][0]["allowed_targets"]


def test_verb_newer_than_the_request_is_406(api: Api) -> None:
    uuid = api.node()["uuid"]
    resp = api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "manage"}, version="1.3")
    assert resp.status_code == 406
    assert (
        api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "deploy"}, version="1.72").status_code == 406
    )


@pytest.mark.parametrize("body", [{"target": 5}, {}, {"target": "manage", "bogus": 1}])
def test_bad_provision_bodies_are_400(api: Api, body: dict[str, object]) -> None:
    uuid = api.node()["uuid"]
    assert api.put(f"/v1/nodes/{uuid}/states/provision", body).status_code == 400


def test_power_on_off_reboot(api: Api) -> None:
    uuid = api.node()["uuid"]
    for target, expected in (("power on", "power on"), ("power off", "power off"), ("rebooting", "power on")):
        resp = api.put(f"/v1/nodes/{uuid}/states/power", {"target": target})
        assert resp.status_code == 202, resp.text
        assert resp.headers["Location"] == f"{api.url}/v1/nodes/{uuid}/states"
        api.wait_for(
            f"/v1/nodes/{uuid}/states",
            lambda d, e=expected: d["power_state"] == e and d["target_power_state"] is None,
        )
    timed = api.put(f"/v1/nodes/{uuid}/states/power", {"target": "power off", "timeout": 10}, version="1.26")
    assert timed.status_code == 406
    assert api.put(f"/v1/nodes/{uuid}/states/power", {"target": "sideways"}).status_code == 400


def test_states_document(api: Api) -> None:
    uuid = api.node()["uuid"]
    doc = api.get(f"/v1/nodes/{uuid}/states").json()
    assert doc["provision_state"] == "enroll"
    assert {
        "power_state",
        "target_power_state",
        "target_provision_state",
        "last_error",
        "console_enabled",
        "provision_updated_at",
    } <= set(doc)


def test_validate_and_maintenance(api: Api) -> None:
    uuid = api.node()["uuid"]
    result = api.get(f"/v1/nodes/{uuid}/validate").json()
    assert result["power"]["result"] is True
    assert api.put(f"/v1/nodes/{uuid}/maintenance", {"reason": "disk"}).status_code == 202
    node = api.get(f"/v1/nodes/{uuid}").json()
    assert node["maintenance"] is True and node["maintenance_reason"] == "disk"
    assert api.get("/v1/nodes?maintenance=true").json()["nodes"][0]["uuid"] == uuid
    assert api.delete(f"/v1/nodes/{uuid}/maintenance").status_code == 202
    node = api.get(f"/v1/nodes/{uuid}").json()
    assert node["maintenance"] is False and node["maintenance_reason"] is None
