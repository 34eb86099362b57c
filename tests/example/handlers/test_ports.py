"""Ports, portgroups and chassis: CRUD with the node conventions."""

from __future__ import annotations

from .conftest import Api, error_of


def test_port_crud_and_unique_mac(api: Api) -> None:
    node = api.node(name="pn")
    resp = api.post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:aa:bb:01"})
    assert resp.status_code == 201, resp.text
    port = resp.json()
    assert resp.headers["Location"] == f"{api.url}/v1/ports/{port['uuid']}"
    assert port["node_uuid"] == node["uuid"] and port["pxe_enabled"] is True
    dup = api.post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:aa:bb:01"})
    assert dup.status_code == 409
    assert error_of(dup)["faultstring"] == "A port with MAC address 52:54:00:aa:bb:01 already exists."
    assert api.get("/v1/ports").json()["ports"] == [
        {"uuid": port["uuid"], "address": "52:54:00:aa:bb:01", "links": port["links"]}
    ]
    assert [p["uuid"] for p in api.get(f"/v1/nodes/{node['uuid']}/ports").json()["ports"]] == [port["uuid"]]
    patched = api.patch(f"/v1/ports/{port['uuid']}", [{"op": "add", "path": "/extra/rack", "value": "r1"}])
    assert patched.status_code == 200 and patched.json()["extra"] == {"rack": "r1"}
    old = api.get(f"/v1/ports/{port['uuid']}", version="1.1").json()
    assert set(old) == {"uuid", "created_at", "updated_at", "address", "extra", "node_uuid", "links"}
    assert api.delete(f"/v1/ports/{port['uuid']}").status_code == 204
    assert api.get(f"/v1/ports/{port['uuid']}").status_code == 404


def test_port_bad_input(api: Api) -> None:
    node = api.node()
    assert api.post("/v1/ports", {"node_uuid": node["uuid"], "address": "nope"}).status_code == 400
    assert api.post("/v1/ports", {"address": "52:54:00:aa:bb:02"}).status_code == 400
    missing = api.post(
        "/v1/ports", {"node_uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "address": "52:54:00:aa:bb:03"}
    )
    assert missing.status_code == 400


def test_portgroups_from_1_23(api: Api) -> None:
    node = api.node()
    assert api.get("/v1/portgroups", version="1.22").status_code == 404
    resp = api.post(
        "/v1/portgroups", {"node_uuid": node["uuid"], "name": "bond0", "address": "52:54:00:aa:cc:01"}
    )
    assert resp.status_code == 201, resp.text
    pg = resp.json()
    port = api.post(
        "/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:aa:cc:02", "portgroup_uuid": pg["uuid"]}
    ).json()
    assert port["portgroup_uuid"] == pg["uuid"]
    listed = api.get(f"/v1/portgroups/{pg['uuid']}/ports").json()["ports"]
    assert [p["uuid"] for p in listed] == [port["uuid"]]
    assert [g["uuid"] for g in api.get(f"/v1/nodes/{node['uuid']}/portgroups").json()["portgroups"]] == [
        pg["uuid"]
    ]
    renamed = api.patch(
        f"/v1/portgroups/{pg['uuid']}", [{"op": "replace", "path": "/name", "value": "bond1"}]
    )
    assert renamed.json()["name"] == "bond1"
    assert api.delete(f"/v1/ports/{port['uuid']}").status_code == 204
    assert api.delete(f"/v1/portgroups/{pg['uuid']}").status_code == 204


def test_chassis_crud(api: Api) -> None:
    resp = api.post("/v1/chassis", {"description": "rack 1"})
    assert resp.status_code == 201, resp.text
    chassis = resp.json()
    assert chassis["description"] == "rack 1"
    node = api.node(chassis_uuid=chassis["uuid"])
    assert node["chassis_uuid"] == chassis["uuid"]
    assert api.delete(f"/v1/chassis/{chassis['uuid']}").status_code == 400  # not empty
    assert api.delete(f"/v1/nodes/{node['uuid']}").status_code == 204
    patched = api.patch(
        f"/v1/chassis/{chassis['uuid']}", [{"op": "replace", "path": "/description", "value": "rack 2"}]
    )
    assert patched.json()["description"] == "rack 2"
    assert api.delete(f"/v1/chassis/{chassis['uuid']}").status_code == 204
    assert api.post("/v1/chassis", {"bogus": 1}).status_code == 400


def test_drivers(api: Api) -> None:
    drivers = api.get("/v1/drivers").json()["drivers"]
    assert "fake-hardware" in [d["name"] for d in drivers]
    one = api.get("/v1/drivers/fake-hardware")
    assert one.status_code == 200 and one.json()["name"] == "fake-hardware"
    assert api.get("/v1/drivers/nope").status_code == 404
