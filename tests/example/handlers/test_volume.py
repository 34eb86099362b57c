"""Volume connectors and targets over HTTP (SQLite and PostgreSQL), against Ironic 39's answers.

The expected statuses and texts were captured from a real Ironic 39.0 (fake-hardware)
with the same requests; where this service deliberately differs it says so.
"""

from __future__ import annotations

import uuid
from typing import Any

from .conftest import Api, error_of

IQN = "iqn.2017-07.org.openstack:01:d9a51732c3f"


def _powered_off(api: Api, **fields: Any) -> dict[str, Any]:
    node = api.node(**fields)
    resp = api.put(f"/v1/nodes/{node['uuid']}/states/power", {"target": "power off"})
    assert resp.status_code == 202, resp.text
    return api.wait_for(f"/v1/nodes/{node['uuid']}", lambda n: n["power_state"] == "power off")


def _connector(api: Api, node: dict[str, Any], connector_id: str = IQN, **extra: Any) -> dict[str, Any]:
    body = {"node_uuid": node["uuid"], "type": "iqn", "connector_id": connector_id, **extra}
    resp = api.post("/v1/volume/connectors", body)
    assert resp.status_code == 201, resp.text
    return resp.json()


def _target(api: Api, node: dict[str, Any], boot_index: int = 0, **extra: Any) -> dict[str, Any]:
    body = {
        "node_uuid": node["uuid"],
        "volume_type": "iscsi",
        "volume_id": f"vol-{boot_index}",
        "boot_index": boot_index,
        **extra,
    }
    resp = api.post("/v1/volume/targets", body)
    assert resp.status_code == 201, resp.text
    return resp.json()


# -- the version gate and the index --------------------------------------------------------------


def test_volume_exists_from_1_32_and_is_404_below(api: Api) -> None:
    node = api.node(name="v-gate")
    for path in (
        "/v1/volume",
        "/v1/volume/connectors",
        "/v1/volume/targets",
        f"/v1/nodes/{node['uuid']}/volume",
        f"/v1/nodes/{node['uuid']}/volume/connectors",
    ):
        assert api.get(path, version="1.31").status_code == 404, path  # Ironic: 404
        assert api.get(path, version="1.32").status_code == 200, path
    body = {"node_uuid": node["uuid"], "type": "iqn", "connector_id": IQN}
    assert api.post("/v1/volume/connectors", body, version="1.31").status_code == 404  # Ironic: 404
    assert api.get("/v1/volume/connectors").json() == {"connectors": []}


def test_index_links_and_v1_lists_volume_from_1_32(api: Api) -> None:
    doc = api.get("/v1/volume").json()
    assert set(doc) == {"links", "connectors", "targets"}  # Ironic's keys
    assert doc["connectors"][0]["href"].endswith("/v1/volume/connectors")
    assert doc["targets"][1] == {"href": f"{api.url}/volume/targets", "rel": "bookmark"}
    node = api.node(name="v-index")
    per_node = api.get(f"/v1/nodes/{node['uuid']}/volume").json()
    assert per_node["connectors"][0]["href"].endswith(f"/v1/nodes/{node['uuid']}/volume/connectors")
    assert api.get("/v1/nodes/nope/volume").status_code == 404
    assert "volume" in api.get("/v1/", version="1.32").json()
    assert "volume" not in api.get("/v1/", version="1.31").json()
    assert "inspection_rules" in api.get("/v1/", version="1.96").json()
    assert "inspection_rules" not in api.get("/v1/", version="1.95").json()


# -- CRUD, etags, tokens -------------------------------------------------------------------------


def test_connector_crud_with_ironic_fields(api: Api) -> None:
    node = _powered_off(api, name="vc-crud")
    created = api.post(
        "/v1/volume/connectors",
        {"node_uuid": node["uuid"], "type": "iqn", "connector_id": IQN, "extra": {"a": 1}},
        version="1.115",
    )
    assert created.status_code == 201
    doc = created.json()
    # Ironic 39's body, in its order
    assert list(doc) == [
        "uuid", "created_at", "updated_at", "connector_id", "extra", "type", "links", "node_uuid",
    ]  # fmt: skip
    assert created.headers["Location"].endswith(f"/v1/volume/connectors/{doc['uuid']}")
    assert doc["links"][0]["href"].endswith(f"/v1/volume/connectors/{doc['uuid']}")
    listed = api.get("/v1/volume/connectors", version="1.115").json()["connectors"]
    assert [list(c) for c in listed] == [["uuid", "connector_id", "type", "links", "node_uuid"]]
    fields = api.get(f"/v1/volume/connectors/{doc['uuid']}", params={"fields": "uuid,extra"}).json()
    assert set(fields) == {"uuid", "extra", "links"}
    patched = api.patch(
        f"/v1/volume/connectors/{doc['uuid']}", [{"op": "add", "path": "/extra/answer", "value": 42}]
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["extra"] == {"a": 1, "answer": 42}
    assert patched.json()["connector_id"] == IQN
    assert api.delete(f"/v1/volume/connectors/{doc['uuid']}").status_code == 204
    gone = api.get(f"/v1/volume/connectors/{doc['uuid']}")
    assert gone.status_code == 404
    assert error_of(gone) == {
        "faultstring": f"Volume connector {doc['uuid']} could not be found.",
        "code": "baremetal.volume-connector-not-found",
    }


def test_target_crud_and_detail_at_1_32(api: Api) -> None:
    node = _powered_off(api, name="vt-crud")
    target = _target(api, node, properties={"p": 1})
    assert target["properties"] == {"p": 1} and target["extra"] == {}
    listed = api.get("/v1/volume/targets", version="1.32").json()["targets"]
    assert set(listed[0]) == {"uuid", "node_uuid", "volume_type", "boot_index", "volume_id", "links"}
    detail = api.get("/v1/volume/targets", params={"detail": "true"}, version="1.32")
    assert detail.status_code == 200  # Ironic takes ?detail= on volume lists from 1.32
    assert detail.json()["targets"][0]["properties"] == {"p": 1}
    both = api.get("/v1/volume/targets", params={"detail": "true", "fields": "uuid"})
    assert both.status_code == 400  # Ironic: 400 "Can't fetch a subset of fields with 'detail' set"
    moved = api.patch(
        f"/v1/volume/targets/{target['uuid']}",
        [{"op": "replace", "path": "/boot_index", "value": 3}, {"op": "remove", "path": "/properties"}],
    )
    assert moved.status_code == 200, moved.text
    assert (moved.json()["boot_index"], moved.json()["properties"]) == (3, {})
    assert api.delete(f"/v1/volume/targets/{target['uuid']}").status_code == 204
    assert api.get("/v1/volume/targets").json() == {"targets": []}


def test_etag_if_match_412_and_client_token_replay(api: Api) -> None:
    node = _powered_off(api, name="vc-etag")
    token = f"tok-{uuid.uuid4()}"
    body = {"node_uuid": node["uuid"], "type": "iqn", "connector_id": IQN}
    first = api.post("/v1/volume/connectors", body, headers={"X-Client-Token": token})
    again = api.post("/v1/volume/connectors", body, headers={"X-Client-Token": token})
    assert first.status_code == again.status_code == 201
    assert again.json()["uuid"] == first.json()["uuid"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert len(api.get("/v1/volume/connectors").json()["connectors"]) == 1

    path = f"/v1/volume/connectors/{first.json()['uuid']}"
    got = api.get(path)
    etag = got.headers["ETag"]
    assert got.json()["etag"] == etag == first.headers["ETag"] and etag.startswith('W/"')
    assert "etag" not in api.get(path, version="1.115").json()
    ok = api.patch(path, [{"op": "add", "path": "/extra/a", "value": 1}], headers={"If-Match": etag})
    assert ok.status_code == 200 and ok.headers["ETag"] != etag
    stale = api.patch(path, [{"op": "add", "path": "/extra/b", "value": 2}], headers={"If-Match": etag})
    assert stale.status_code == 412
    assert api.delete(path, headers={"If-Match": etag}).status_code == 412
    assert api.get(path).json()["extra"] == {"a": 1}
    assert api.delete(path, headers={"If-Match": ok.headers["ETag"]}).status_code == 204

    target = _target(api, node)
    tpath = f"/v1/volume/targets/{target['uuid']}"
    tag = api.get(tpath).headers["ETag"]
    assert api.patch(tpath, [{"op": "replace", "path": "/volume_id", "value": "x"}]).status_code == 200
    assert api.delete(tpath, headers={"If-Match": tag}).status_code == 412


def test_lists_filter_by_node_name_or_uuid_and_page(api: Api) -> None:
    one, two = _powered_off(api, name="vc-one"), _powered_off(api, name="vc-two")
    c1 = _connector(api, one, "iqn.one")
    c2 = _connector(api, two, "iqn.two")
    c3 = _connector(api, two, "iqn.three")

    def ids(path: str, **params: Any) -> list[str]:
        return [c["uuid"] for c in api.get(path, params=params).json()["connectors"]]

    assert ids("/v1/volume/connectors", node=one["uuid"]) == [c1["uuid"]]
    assert ids("/v1/volume/connectors", node="vc-two") == [c2["uuid"], c3["uuid"]]
    assert ids("/v1/nodes/vc-two/volume/connectors") == [c2["uuid"], c3["uuid"]]
    missing = api.get("/v1/volume/connectors", params={"node": "nope"})
    assert missing.status_code == 404  # Ironic: 404 "Node nope could not be found."
    page = api.get("/v1/volume/connectors", params={"limit": 2}).json()
    assert [c["uuid"] for c in page["connectors"]] == [c1["uuid"], c2["uuid"]]
    assert "/v1/volume/connectors?" in page["next"] and f"marker={c2['uuid']}" in page["next"]
    rest = api.get(page["next"].removeprefix(api.url)).json()
    assert [c["uuid"] for c in rest["connectors"]] == [c3["uuid"]]
    # Ironic: sort_key extra is an invalid field for sorting (400)
    assert api.get("/v1/volume/connectors", params={"sort_key": "extra"}).status_code == 400
    # one item or a create under a node: Ironic's 400 "Malformed request URI."
    bad = api.get(f"/v1/nodes/vc-one/volume/connectors/{c1['uuid']}")
    assert bad.status_code == 400 and error_of(bad)["faultstring"] == "Malformed request URI."


def test_deleting_a_node_deletes_its_connectors_and_targets(api: Api) -> None:
    node = _powered_off(api, name="vc-cascade")
    other = _powered_off(api, name="vc-stays")
    _connector(api, node, "iqn.gone")
    _target(api, node)
    kept = _target(api, other)
    assert api.delete(f"/v1/nodes/{node['uuid']}").status_code == 204  # Ironic: 204, targets gone
    assert api.get("/v1/volume/connectors").json() == {"connectors": []}
    assert [t["uuid"] for t in api.get("/v1/volume/targets").json()["targets"]] == [kept["uuid"]]


# -- Ironic's rules ------------------------------------------------------------------------------


def test_changes_need_the_node_powered_off(api: Api) -> None:
    node = api.node(name="vc-power")  # power state None, like a new Ironic node
    conn = _connector(api, node)  # creating has no state rule (Ironic's neither)
    path = f"/v1/volume/connectors/{conn['uuid']}"
    refused = api.patch(path, [{"op": "add", "path": "/extra/a", "value": 1}])
    assert refused.status_code == 400
    assert error_of(refused) == {  # Ironic 39's text
        "faultstring": f'The requested action "volume connector update" can not be performed on node '
        f'"{node["uuid"]}" while it is in state "None".',
        "code": "baremetal.invalid-node-state",
    }
    # deletion is allowed in enroll whatever the power state (Ironic: 204)
    assert api.delete(path).status_code == 204
    api.put(f"/v1/nodes/{node['uuid']}/states/power", {"target": "power off"})
    api.wait_for(f"/v1/nodes/{node['uuid']}", lambda n: n["power_state"] == "power off")
    target = _target(api, node)
    tpath = f"/v1/volume/targets/{target['uuid']}"
    assert api.patch(tpath, [{"op": "add", "path": "/extra/a", "value": 1}]).status_code == 200
    api.put(f"/v1/nodes/{node['uuid']}/states/power", {"target": "power on"})
    api.wait_for(f"/v1/nodes/{node['uuid']}", lambda n: n["power_state"] == "power on")
    on = api.patch(tpath, [{"op": "add", "path": "/extra/b", "value": 2}])
    assert on.status_code == 400
    assert 'while it is in state "power on"' in error_of(on)["faultstring"]
    assert api.get(tpath).json()["extra"] == {"a": 1}


def test_uniqueness_is_409_with_ironic_text(api: Api) -> None:
    node = _powered_off(api, name="vc-unique")
    other = _powered_off(api, name="vc-unique-2")
    _connector(api, node, "iqn.dup")
    dup = api.post(
        "/v1/volume/connectors", {"node_uuid": other["uuid"], "type": "iqn", "connector_id": "iqn.dup"}
    )
    assert dup.status_code == 409
    assert (
        error_of(dup)["faultstring"]
        == "A volume connector with type iqn and connector ID iqn.dup already exists."
    )
    # the same id with another type is another connector
    wwpn = {"node_uuid": node["uuid"], "type": "wwpn", "connector_id": "iqn.dup"}
    assert api.post("/v1/volume/connectors", wwpn).status_code == 201
    first = _target(api, node, 0)
    _target(api, other, 0)  # boot_index is unique per node only
    again = api.post(
        "/v1/volume/targets",
        {"node_uuid": node["uuid"], "volume_type": "iscsi", "volume_id": "v2", "boot_index": 0},
    )
    assert again.status_code == 409
    assert (
        error_of(again)["faultstring"]
        == "A volume target with boot index '0' for the same node already exists."
    )
    second = _target(api, node, 1)
    clash = api.patch(
        f"/v1/volume/targets/{second['uuid']}", [{"op": "replace", "path": "/boot_index", "value": 0}]
    )
    assert clash.status_code == 409  # Ironic: 409 on PATCH too
    assert api.get(f"/v1/volume/targets/{first['uuid']}").json()["boot_index"] == 0


def test_bad_input_is_400_like_ironic(api: Api) -> None:
    node = _powered_off(api, name="vc-bad")
    cases: list[tuple[str, dict[str, Any]]] = [
        ("connector_id", {"node_uuid": node["uuid"], "type": "iqn"}),  # required
        ("bogus", {"node_uuid": node["uuid"], "type": "iqn", "connector_id": "x", "bogus": 1}),
        ("type", {"node_uuid": node["uuid"], "type": 5, "connector_id": "x"}),
        ("node name", {"node_uuid": "vc-bad", "type": "iqn", "connector_id": "x"}),  # UUID only
        ("uuid", {"node_uuid": node["uuid"], "type": "iqn", "connector_id": "x", "uuid": "bad"}),
    ]
    for what, body in cases:
        resp = api.post("/v1/volume/connectors", body)
        assert resp.status_code == 400, (what, resp.text)
        assert "faultstring" in resp.json()["error_message"]
    unknown = api.post(
        "/v1/volume/connectors",
        {"node_uuid": "11111111-2222-3333-4444-555555555555", "type": "iqn", "connector_id": "x"},
    )
    assert unknown.status_code == 400  # Ironic: 400 (invalid input for node_uuid)
    for boot_index in ("x", True, 2**40):
        body = {"node_uuid": node["uuid"], "volume_type": "iscsi", "volume_id": "v", "boot_index": boot_index}
        assert api.post("/v1/volume/targets", body).status_code == 400, boot_index
    target = _target(api, node)
    path = f"/v1/volume/targets/{target['uuid']}"
    for patch in (
        [{"op": "replace", "path": "/uuid", "value": str(uuid.uuid4())}],  # Ironic: 400 read-only
        [{"op": "replace", "path": "/boot_index", "value": "z"}],
        [{"op": "remove", "path": "/volume_id"}],  # Ironic: 400 'volume_id' is a required property
    ):
        assert api.patch(path, patch).status_code == 400, patch
    assert api.get("/v1/volume/connectors/not-a-uuid").status_code == 400  # Ironic: Expected UUID
    assert api.get(f"/v1/volume/targets/{uuid.uuid4()}").status_code == 404
    assert api.get("/v1/volume/connectors", params={"fields": "uuid,bogus"}).status_code == 400


# -- tenancy -------------------------------------------------------------------------------------


def test_projects_see_only_the_volume_resources_of_their_nodes(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    mine = alice.node(name="alice-vol")
    theirs = bob.node(name="bob-vol")
    for node in (mine, theirs):
        api.put(f"/v1/nodes/{node['uuid']}/states/power", {"target": "power off"})
        api.wait_for(f"/v1/nodes/{node['uuid']}", lambda n: n["power_state"] == "power off")
    conn = _connector(alice, mine, "iqn.alice")
    target = _target(alice, mine)
    _connector(bob, theirs, "iqn.bob")
    assert [c["uuid"] for c in alice.get("/v1/volume/connectors").json()["connectors"]] == [conn["uuid"]]
    assert len(api.get("/v1/volume/connectors").json()["connectors"]) == 2  # unscoped sees all
    for path in (f"/v1/volume/connectors/{conn['uuid']}", f"/v1/volume/targets/{target['uuid']}"):
        assert bob.get(path).status_code == 404
        assert bob.patch(path, [{"op": "add", "path": "/extra/x", "value": 1}]).status_code == 404
        assert bob.delete(path).status_code == 404
    assert bob.get(f"/v1/nodes/{mine['uuid']}/volume/connectors").status_code == 404
    stolen = bob.post(
        "/v1/volume/connectors", {"node_uuid": mine["uuid"], "type": "iqn", "connector_id": "z"}
    )
    assert stolen.status_code == 400  # the node is not found for bob
    move = bob.patch(  # nor may bob move his connector onto alice's node
        f"/v1/volume/connectors/{bob.get('/v1/volume/connectors').json()['connectors'][0]['uuid']}",
        [{"op": "replace", "path": "/node_uuid", "value": mine["uuid"]}],
    )
    assert move.status_code == 400


def test_a_lessee_sees_but_does_not_change_volume_resources(api: Api) -> None:
    owner, lessee = api.as_project("owner-p"), api.as_project("lessee-p")
    node = owner.node(name="leased-vol")
    assert (
        owner.patch(
            f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/lessee", "value": "lessee-p"}]
        ).status_code
        == 200
    )
    api.put(f"/v1/nodes/{node['uuid']}/states/power", {"target": "power off"})
    api.wait_for(f"/v1/nodes/{node['uuid']}", lambda n: n["power_state"] == "power off")
    conn = _connector(owner, node, "iqn.leased")
    path = f"/v1/volume/connectors/{conn['uuid']}"
    assert lessee.get(path).status_code == 200
    assert [c["uuid"] for c in lessee.get("/v1/volume/connectors").json()["connectors"]] == [conn["uuid"]]
    etag = lessee.get(path).headers["ETag"]
    denied = lessee.patch(
        path, [{"op": "add", "path": "/extra/x", "value": 1}], headers={"If-Match": '"stale"'}
    )
    assert denied.status_code == 403  # the tenancy verdict before If-Match
    assert error_of(denied) == {
        "faultstring": "Access was denied to the following resource: baremetal:volume:update",
        "code": "baremetal.forbidden",
    }
    assert lessee.delete(path).status_code == 403
    created = lessee.post(
        "/v1/volume/connectors", {"node_uuid": node["uuid"], "type": "iqn", "connector_id": "l"}
    )
    assert created.status_code == 403
    assert (
        owner.patch(
            path, [{"op": "add", "path": "/extra/x", "value": 1}], headers={"If-Match": etag}
        ).status_code
        == 200
    )
