"""Node CRUD, lists, fields, paging, JSON Patch and the per-version representation."""

from __future__ import annotations

import json

import pytest

from .conftest import Api, error_of


def test_create_returns_201_location_and_full_body(api: Api) -> None:
    resp = api.post("/v1/nodes", {"driver": "fake-hardware", "name": "n1"})
    assert resp.status_code == 201
    node = resp.json()
    assert resp.headers["Location"] == f"{api.url}/v1/nodes/{node['uuid']}"
    assert node["name"] == "n1"
    assert node["provision_state"] == "enroll"
    assert node["power_state"] is None
    assert node["links"][0] == {"href": f"{api.url}/v1/nodes/{node['uuid']}", "rel": "self"}
    assert node["states"][0]["href"] == f"{api.url}/v1/nodes/{node['uuid']}/states"


def test_show_by_uuid_and_by_name(api: Api) -> None:
    node = api.node(name="by-name")
    assert api.get(f"/v1/nodes/{node['uuid']}").json()["name"] == "by-name"
    assert api.get("/v1/nodes/by-name").json()["uuid"] == node["uuid"]


def test_representation_follows_the_microversion(api: Api) -> None:
    node = api.node(name="v")
    old = api.get(f"/v1/nodes/{node['uuid']}", version="1.1").json()
    assert len(old) == 22  # Ironic's 1.1 body
    assert "name" not in old and "driver_internal_info" not in old
    at_ironic_max = api.get(f"/v1/nodes/{node['uuid']}", version="1.115").json()
    assert len(at_ironic_max) == 69  # Ironic 39's 1.115 body
    assert "etag" not in at_ironic_max
    assert "etag" in api.get(f"/v1/nodes/{node['uuid']}", version="1.116").json()


def test_field_newer_than_the_request_is_406(api: Api) -> None:
    resp = api.post("/v1/nodes", {"driver": "fake-hardware", "name": "too-new"}, version="1.1")
    assert resp.status_code == 406
    assert error_of(resp)["code"] == "microversion.feature-unavailable"
    assert resp.json()["errors"][0]["required_version"] == "1.5"
    desc = api.post("/v1/nodes", {"driver": "fake-hardware", "description": "d"}, version="1.50")
    assert desc.status_code == 406
    assert api.get("/v1/nodes?fields=uuid", version="1.7").status_code == 406


def test_fields_selects_a_subset(api: Api) -> None:
    node = api.node(name="f")
    doc = api.get(f"/v1/nodes/{node['uuid']}?fields=uuid,name,provision_state").json()
    assert set(doc) == {"uuid", "name", "provision_state", "links"}
    listed = api.get("/v1/nodes?fields=uuid,name").json()["nodes"]
    assert all(set(n) == {"uuid", "name", "links"} for n in listed)
    bad = api.get("/v1/nodes?fields=uuid,bogus")
    assert bad.status_code == 400


def test_list_detail_and_default_fields(api: Api) -> None:
    api.node(name="l1")
    api.node(name="l2")
    short = api.get("/v1/nodes").json()["nodes"]
    assert [n["name"] for n in short] == ["l1", "l2"]
    assert set(short[0]) == {
        "uuid",
        "instance_uuid",
        "maintenance",
        "power_state",
        "provision_state",
        "name",
        "links",
    }
    detail = api.get("/v1/nodes/detail").json()["nodes"]
    assert detail[0]["driver"] == "fake-hardware" and "properties" in detail[0]


def test_paging_with_limit_marker_and_next(api: Api) -> None:
    uuids = [api.node(name=f"p{i}")["uuid"] for i in range(5)]
    seen: list[str] = []
    url = "/v1/nodes?limit=2"
    for _ in range(5):
        page = api.get(url).json()
        seen += [n["uuid"] for n in page["nodes"]]
        if "next" not in page:
            break
        assert page["next"].startswith(f"{api.url}/v1/nodes?")
        assert f"marker={page['nodes'][-1]['uuid']}" in page["next"]
        url = page["next"][len(api.url) :]
    assert seen == uuids
    desc = api.get("/v1/nodes?sort_key=name&sort_dir=desc").json()["nodes"]
    assert [n["name"] for n in desc] == ["p4", "p3", "p2", "p1", "p0"]


@pytest.mark.parametrize("collection", ["nodes", "ports"])
def test_paging_with_fields_that_leave_out_uuid(api: Api, collection: str) -> None:
    # the next link's marker comes from the stored record, not the rendered subset
    for i in range(3):
        node = api.node(name=f"f{i}")
        if collection == "ports":
            api.post("/v1/ports", {"node_uuid": node["uuid"], "address": f"52:54:00:00:00:0{i}"})
    field = "name" if collection == "nodes" else "address"
    names: list[str] = []
    url = f"/v1/{collection}?fields={field}&limit=1&sort_key={field}"
    for _ in range(4):
        resp = api.get(url)
        assert resp.status_code == 200
        page = resp.json()
        assert all(set(doc) <= {field, "links"} for doc in page[collection])
        names += [doc[field] for doc in page[collection]]
        if "next" not in page:
            break
        assert f"fields={field}" in page["next"]
        url = page["next"][len(api.url) :]
    assert len(names) == 3 and names == sorted(names)


@pytest.mark.parametrize("query", ["limit=0", "limit=-1", "limit=abc", "sort_dir=up", "sort_key=bogus"])
def test_bad_paging_parameters_are_400(api: Api, query: str) -> None:
    assert api.get(f"/v1/nodes?{query}").status_code == 400


def test_filters(api: Api) -> None:
    a = api.node(name="fa", resource_class="gold")
    api.node(name="fb", resource_class="silver")
    got = api.get("/v1/nodes?resource_class=gold").json()["nodes"]
    assert [n["uuid"] for n in got] == [a["uuid"]]
    assert api.get("/v1/nodes?resource_class=gold", version="1.20").status_code == 406
    assert len(api.get("/v1/nodes?driver=fake-hardware").json()["nodes"]) == 2
    assert api.get("/v1/nodes?provision_state=enroll").json()["nodes"][0]["provision_state"] == "enroll"
    assert api.get("/v1/nodes?maintenance=true").json()["nodes"] == []
    assert len(api.get("/v1/nodes?associated=false").json()["nodes"]) == 2
    assert api.get("/v1/nodes?maintenance=maybe").status_code == 400


def test_patch_applies_rfc6902_and_returns_the_node(api: Api) -> None:
    node = api.node(name="pa")
    patch = [
        {"op": "replace", "path": "/description", "value": "sample"},
        {"op": "add", "path": "/extra/foo", "value": "bar"},
        {"op": "add", "path": "/properties/cpus", "value": 4},
    ]
    resp = api.patch(f"/v1/nodes/{node['uuid']}", patch)
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    assert doc["description"] == "sample"
    assert doc["extra"] == {"foo": "bar"}
    assert doc["properties"] == {"cpus": 4}
    assert doc["updated_at"] is not None
    removed = api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "remove", "path": "/extra/foo"}]).json()
    assert removed["extra"] == {}


@pytest.mark.parametrize(
    ("patch", "code"),
    [
        pytest.param(
            [{"op": "replace", "path": "/uuid", "value": "x"}], "request.read-only-field", id="uuid"
        ),
        pytest.param({"description": "x"}, "request.schema", id="not-a-list"),
        pytest.param([{"op": "move", "path": "/name"}], "request.schema", id="bad-op"),
        pytest.param([{"op": "remove", "path": "/extra/missing"}], "request.invalid-patch", id="missing"),
        pytest.param(
            [{"op": "replace", "path": "/maintenance", "value": "yes"}], "request.schema", id="wrong-type"
        ),
        pytest.param(
            [{"op": "replace", "path": "/name", "value": "bad name!"}], "request.schema", id="bad-name"
        ),
    ],
)
def test_bad_patches_are_400(api: Api, patch: object, code: str) -> None:
    node = api.node()
    resp = api.patch(f"/v1/nodes/{node['uuid']}", patch)
    assert resp.status_code == 400, resp.text
    assert error_of(resp)["code"] == code


def test_driver_info_secrets_are_masked_but_kept(api: Api) -> None:
    node = api.node(driver_info={"ipmi_password": "s3cret", "ipmi_address": "10.0.0.1"})
    assert node["driver_info"] == {"ipmi_password": "******", "ipmi_address": "10.0.0.1"}
    patched = api.patch(
        f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/driver_info/ipmi_username", "value": "admin"}]
    ).json()
    assert patched["driver_info"]["ipmi_password"] == "******"
    listed = api.get("/v1/nodes/detail").json()["nodes"][0]
    assert "s3cret" not in json.dumps(listed)


def test_delete_then_404(api: Api) -> None:
    node = api.node(name="gone")
    resp = api.delete(f"/v1/nodes/{node['uuid']}")
    assert resp.status_code == 204 and resp.content == b""
    missing = api.get(f"/v1/nodes/{node['uuid']}")
    assert missing.status_code == 404
    assert error_of(missing)["faultstring"] == f"Node {node['uuid']} could not be found."


def test_duplicate_name_is_409(api: Api) -> None:
    api.node(name="dup")
    resp = api.post("/v1/nodes", {"driver": "fake-hardware", "name": "dup"})
    assert resp.status_code == 409
    assert error_of(resp)["faultstring"] == "A node with name dup already exists."


def test_old_clients_get_old_initial_states(api: Api) -> None:
    # Before 1.11 a new node starts AVAILABLE; before 1.2 AVAILABLE is shown as NOSTATE (null).
    old = api.post("/v1/nodes", {"driver": "fake-hardware"}, version="1.10")
    assert old.status_code == 201
    assert old.json()["provision_state"] == "available"
    assert api.get(f"/v1/nodes/{old.json()['uuid']}", version="1.1").json()["provision_state"] is None
    new = api.post("/v1/nodes", {"driver": "fake-hardware"}, version="1.11")
    assert new.json()["provision_state"] == "enroll"


def test_port_fields_follow_ironic_versions(api: Api) -> None:
    node = api.node()
    body = {"node_uuid": node["uuid"], "address": "52:54:00:00:01:01", "name": "p0"}
    assert api.post("/v1/ports", body, version="1.87").status_code == 406  # port name: 1.88
    no_pxe = {"node_uuid": node["uuid"], "address": "52:54:00:00:01:02", "pxe_enabled": False}
    assert api.post("/v1/ports", no_pxe, version="1.18").status_code == 406  # pxe_enabled: 1.19
    created = api.post("/v1/ports", body, version="1.88")
    assert created.status_code == 201 and created.json()["name"] == "p0"
    assert "name" not in api.get(f"/v1/ports/{created.json()['uuid']}", version="1.87").json()
