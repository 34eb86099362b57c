"""Projects never see each other's nodes; If-Match and X-Client-Token end to end."""

from __future__ import annotations

import uuid

from .conftest import Api, error_of


def test_projects_see_only_their_own_nodes(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    mine = alice.node(name="alice-node")
    assert [n["uuid"] for n in alice.get("/v1/nodes").json()["nodes"]] == [mine["uuid"]]
    assert bob.get("/v1/nodes").json()["nodes"] == []
    assert bob.get(f"/v1/nodes/{mine['uuid']}").status_code == 404
    assert (
        bob.patch(f"/v1/nodes/{mine['uuid']}", [{"op": "add", "path": "/extra/x", "value": 1}]).status_code
        == 404
    )
    assert bob.delete(f"/v1/nodes/{mine['uuid']}").status_code == 404
    assert alice.get(f"/v1/nodes/{mine['uuid']}").status_code == 200


def test_etag_in_header_and_body_from_1_116(api: Api) -> None:
    node = api.node(name="tagged")
    resp = api.get(f"/v1/nodes/{node['uuid']}")
    assert resp.headers["ETag"] == resp.json()["etag"]
    assert resp.json()["etag"].startswith('W/"')
    old = api.get(f"/v1/nodes/{node['uuid']}", version="1.115")
    assert "ETag" not in old.headers and "etag" not in old.json()
    listed = api.get("/v1/nodes/detail").json()["nodes"][0]
    assert listed["etag"] == resp.json()["etag"]


def test_if_match_stale_is_412_and_fresh_applies(api: Api) -> None:
    node = api.node(name="cas")
    etag = api.get(f"/v1/nodes/{node['uuid']}").headers["ETag"]
    ok = api.patch(
        f"/v1/nodes/{node['uuid']}",
        [{"op": "add", "path": "/extra/a", "value": 1}],
        headers={"If-Match": etag},
    )
    assert ok.status_code == 200, ok.text
    assert ok.headers["ETag"] != etag
    stale = api.patch(
        f"/v1/nodes/{node['uuid']}",
        [{"op": "add", "path": "/extra/b", "value": 2}],
        headers={"If-Match": etag},
    )
    assert stale.status_code == 412
    assert api.get(f"/v1/nodes/{node['uuid']}").json()["extra"] == {"a": 1}
    assert api.delete(f"/v1/nodes/{node['uuid']}", headers={"If-Match": etag}).status_code == 412
    fresh = ok.headers["ETag"]
    assert api.delete(f"/v1/nodes/{node['uuid']}", headers={"If-Match": fresh}).status_code == 204


def test_if_match_before_1_116_is_406(api: Api) -> None:
    node = api.node(name="old-client")
    resp = api.patch(
        f"/v1/nodes/{node['uuid']}",
        [{"op": "add", "path": "/extra/a", "value": 1}],
        headers={"If-Match": '"x"'},
        version="1.115",
    )
    assert resp.status_code == 406
    assert api.get(f"/v1/nodes/{node['uuid']}").json()["extra"] == {}


def test_driver_internal_info_and_updated_at_do_not_change_the_etag(api: Api) -> None:
    node = api.node(name="stable")
    before = api.get(f"/v1/nodes/{node['uuid']}").json()["etag"]
    # power on touches power_state and updated_at only through the conductor; the etag follows the
    # data: power_state changed, so it changes; a maintenance no-op round trip restores data.
    api.put(f"/v1/nodes/{node['uuid']}/maintenance", {"reason": "r"})
    api.delete(f"/v1/nodes/{node['uuid']}/maintenance")
    after = api.get(f"/v1/nodes/{node['uuid']}").json()
    assert after["updated_at"] is not None
    assert after["etag"] == before


def test_client_token_replays_the_first_answer(api: Api) -> None:
    token = f"tok-{uuid.uuid4()}"
    body = {"driver": "fake-hardware", "name": "once"}
    first = api.post("/v1/nodes", body, headers={"X-Client-Token": token})
    again = api.post("/v1/nodes", body, headers={"X-Client-Token": token})
    assert first.status_code == again.status_code == 201
    assert again.json()["uuid"] == first.json()["uuid"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert len(api.get("/v1/nodes").json()["nodes"]) == 1
    other = api.post(
        "/v1/nodes", {"driver": "fake-hardware", "name": "other"}, headers={"X-Client-Token": token}
    )
    assert other.status_code == 409
    assert error_of(other)["code"].startswith("idempotency.")


def test_client_tokens_are_scoped_per_project(api: Api) -> None:
    token = f"tok-{uuid.uuid4()}"
    alice, bob = api.as_project("alice"), api.as_project("bob")
    a = alice.post("/v1/nodes", {"driver": "fake-hardware", "name": "a"}, headers={"X-Client-Token": token})
    b = bob.post("/v1/nodes", {"driver": "fake-hardware", "name": "b"}, headers={"X-Client-Token": token})
    assert a.status_code == b.status_code == 201
    assert a.json()["uuid"] != b.json()["uuid"]


def test_if_match_on_ports_and_state_changes(api: Api) -> None:
    node = api.node(name="pm")
    port = api.post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:00:00:aa"}).json()
    stale = port["etag"]
    assert (
        api.patch(
            f"/v1/ports/{port['uuid']}",
            [{"op": "add", "path": "/extra/a", "value": 1}],
            headers={"If-Match": stale},
        ).status_code
        == 200
    )
    assert (
        api.patch(
            f"/v1/ports/{port['uuid']}",
            [{"op": "add", "path": "/extra/b", "value": 2}],
            headers={"If-Match": stale},
        ).status_code
        == 412
    )
    node_etag = api.get(f"/v1/nodes/{node['uuid']}").headers["ETag"]
    api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/extra/x", "value": 1}])
    moved = api.put(
        f"/v1/nodes/{node['uuid']}/states/provision", {"target": "manage"}, headers={"If-Match": node_etag}
    )
    assert moved.status_code == 412
    assert api.get(f"/v1/nodes/{node['uuid']}").json()["provision_state"] == "enroll"


def test_every_create_post_is_replay_safe(api: Api) -> None:
    node = api.node(name="rp")
    token = {"X-Client-Token": f"port-{uuid.uuid4()}"}
    body = {"node_uuid": node["uuid"], "address": "52:54:00:00:00:bb"}
    first = api.post("/v1/ports", body, headers=token)
    again = api.post("/v1/ports", body, headers=token)
    assert first.status_code == again.status_code == 201
    assert first.json()["uuid"] == again.json()["uuid"]
    chassis_token = {"X-Client-Token": f"chassis-{uuid.uuid4()}"}
    c1 = api.post("/v1/chassis", {"description": "c"}, headers=chassis_token)
    c2 = api.post("/v1/chassis", {"description": "c"}, headers=chassis_token)
    assert c1.json()["uuid"] == c2.json()["uuid"]
    assert len(api.get("/v1/chassis").json()["chassis"]) == 1


def test_malformed_project_header_is_400(api: Api) -> None:
    resp = api.get("/v1/nodes", headers={"X-Project-Id": "bad project/../x"})
    assert resp.status_code == 400
    assert error_of(resp)["code"] == "auth.invalid-project"


def test_a_project_owns_what_it_creates(api: Api) -> None:
    alice = api.as_project("alice")
    node = alice.node(name="owned")
    assert node["owner"] == "alice"
    # An unscoped (admin / noauth) caller sees every project's nodes.
    assert [n["uuid"] for n in api.get("/v1/nodes").json()["nodes"]] == [node["uuid"]]
    port = alice.post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:00:02:01"})
    assert port.status_code == 201
    assert api.as_project("bob").get(f"/v1/ports/{port.json()['uuid']}").status_code == 404
