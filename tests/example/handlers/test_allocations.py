"""/v1/allocations (Ironic 1.52; PATCH 1.57; backfill 1.58; owner 1.60) over HTTP."""

from __future__ import annotations

import uuid
from typing import Any

from .conftest import Api, error_of


def available_node(api: Api, **fields: Any) -> dict[str, Any]:
    node = api.node(**fields)
    path = f"/v1/nodes/{node['uuid']}"
    for target, state in (("manage", "manageable"), ("provide", "available")):
        assert api.put(f"{path}/states/provision", {"target": target}).status_code == 202
        api.wait_for(path, lambda d, s=state: d["provision_state"] == s)
    # allocations take only nodes with a known power state (as the sdk's own tests arrange)
    assert api.put(f"{path}/states/power", {"target": "power off"}).status_code == 202
    return api.wait_for(path, lambda d: d["power_state"] == "power off" and d["reservation"] is None)


def allocate(api: Api, **body: Any) -> dict[str, Any]:
    resp = api.post("/v1/allocations", body)
    assert resp.status_code == 201, resp.text
    assert resp.json()["state"] == "allocating"
    return api.wait_for(f"/v1/allocations/{resp.json()['uuid']}", lambda d: d["state"] != "allocating")


def test_allocation_takes_a_matching_node_and_delete_frees_it(api: Api) -> None:
    other = available_node(api, name="other", resource_class="rc-other")
    node = available_node(api, name="n1", resource_class="rc-a")
    done = allocate(api, resource_class="rc-a", name="a1")
    assert done["state"] == "active" and done["node_uuid"] == node["uuid"] and done["last_error"] is None
    taken = api.get(f"/v1/nodes/{node['uuid']}").json()
    assert taken["allocation_uuid"] == done["uuid"] and taken["instance_uuid"] == done["uuid"]
    assert api.get(f"/v1/nodes/{other['uuid']}").json()["allocation_uuid"] is None
    assert api.get(f"/v1/nodes/{node['uuid']}/allocation").json()["uuid"] == done["uuid"]
    # the node is taken: a second allocation of the class fails with Ironic's text
    failed = allocate(api, resource_class="rc-a")
    assert (
        failed["state"] == "error"
        and "no available nodes match the resource class rc-a" in failed["last_error"]
    )
    listed = api.get("/v1/allocations", params={"state": "active"}).json()["allocations"]
    assert [a["uuid"] for a in listed] == [done["uuid"]]
    assert [a["uuid"] for a in api.get("/v1/allocations", params={"node": "n1"}).json()["allocations"]] == [
        done["uuid"]
    ]
    stale = done["etag"]
    renamed = api.patch(f"/v1/allocations/{done['uuid']}", [{"op": "add", "path": "/name", "value": "a2"}])
    assert renamed.status_code == 200 and renamed.json()["name"] == "a2"
    assert api.delete("/v1/allocations/a2", headers={"If-Match": stale}).status_code == 412
    assert api.delete("/v1/allocations/a2").status_code == 204
    freed = api.get(f"/v1/nodes/{node['uuid']}").json()
    assert freed["allocation_uuid"] is None and freed["instance_uuid"] is None
    assert api.delete(f"/v1/nodes/{node['uuid']}").status_code == 204


def test_traits_and_candidates_narrow_the_choice(api: Api) -> None:
    available_node(api, name="plain", resource_class="rc-t")
    nt = api.put("/v1/nodes/plain/traits/CUSTOM_GPU")  # node traits (1.37) when the service has them
    if nt.status_code == 204:
        available_node(api, name="other", resource_class="rc-t")
        done = allocate(api, resource_class="rc-t", traits=["CUSTOM_GPU"])
        assert done["node_uuid"] == api.get("/v1/nodes/plain").json()["uuid"]
    missing = allocate(api, resource_class="rc-t", traits=["CUSTOM_NONE"], name="none")
    assert missing["state"] == "error" and "CUSTOM_NONE" in missing["last_error"]
    bad = api.post("/v1/allocations", {"resource_class": "rc-t", "candidate_nodes": ["nope"]})
    assert bad.status_code == 400


def test_backfill_version_gate_and_bad_input(api: Api) -> None:
    assert api.get("/v1/allocations", version="1.51").status_code == 404
    assert api.post("/v1/allocations", {"resource_class": "x"}, version="1.51").status_code == 405
    created = api.post("/v1/allocations", {"resource_class": "x"}, version="1.56").json()
    assert "owner" not in created and "etag" not in created
    patch = [{"op": "add", "path": "/name", "value": "y"}]
    assert api.patch(f"/v1/allocations/{created['uuid']}", patch, version="1.56").status_code == 405
    assert (
        api.post("/v1/allocations", {"node": "x", "resource_class": "x"}, version="1.57").status_code == 400
    )
    assert api.post("/v1/allocations", {}).status_code == 400  # no resource class, no node
    assert api.post("/v1/allocations", {"resource_class": "x", "bogus": 1}).status_code == 400
    assert api.post("/v1/allocations", {"resource_class": "x", "traits": ["lower"]}).status_code == 400
    missing = api.post("/v1/allocations", {"node": "nope"})
    assert missing.status_code == 400 and error_of(missing)["code"] == "baremetal.node-not-found"
    read_only = api.patch(
        f"/v1/allocations/{created['uuid']}", [{"op": "replace", "path": "/state", "value": "active"}]
    )
    assert read_only.status_code == 400
    assert api.get("/v1/allocations/5c9dcd04-2073-49bc-9618-99ae634d8971").status_code == 404


def test_backfill_associates_an_active_node(api: Api) -> None:
    node = available_node(api, name="act", resource_class="rc-b")
    path = f"/v1/nodes/{node['uuid']}"
    assert api.put(f"{path}/states/provision", {"target": "active"}).status_code == 202
    api.wait_for(path, lambda d: d["provision_state"] == "active")
    resp = api.post("/v1/allocations", {"node": "act"})
    assert resp.status_code == 201, resp.text
    assert resp.json()["state"] == "active" and resp.json()["resource_class"] == "rc-b"
    assert api.get(path).json()["allocation_uuid"] == resp.json()["uuid"]
    refused = api.delete(f"/v1/allocations/{resp.json()['uuid']}")  # active node, not in maintenance
    assert refused.status_code == 409


def test_owner_scoping_and_token_replay(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    mine = alice.post("/v1/allocations", {"resource_class": "rc-o"}).json()
    assert mine["owner"] == "alice"
    assert bob.get(f"/v1/allocations/{mine['uuid']}").status_code == 404
    assert bob.get("/v1/allocations").json()["allocations"] == []
    assert bob.delete(f"/v1/allocations/{mine['uuid']}").status_code == 404
    assert alice.post("/v1/allocations", {"resource_class": "rc-o", "owner": "bob"}).status_code == 403
    token = f"tok-{uuid.uuid4()}"
    first = api.post("/v1/allocations", {"resource_class": "rc-o"}, headers={"X-Client-Token": token})
    again = api.post("/v1/allocations", {"resource_class": "rc-o"}, headers={"X-Client-Token": token})
    assert first.status_code == again.status_code == 201 and again.json()["uuid"] == first.json()["uuid"]


def test_a_node_allocation_delete_honours_if_match(api: Api) -> None:
    """DELETE /v1/nodes/{node}/allocation with If-Match: a stale etag is 412 and the
    allocation stays; the etag read from GET /v1/nodes/{node}/allocation deletes it (never
    the etag middleware's 500 ``etag.precondition-not-enforced`` after the delete ran)."""
    node = available_node(api, name="n1", resource_class="rc-a")
    done = allocate(api, resource_class="rc-a", name="a1")
    assert done["state"] == "active" and done["node_uuid"] == node["uuid"]
    path = f"/v1/nodes/{node['uuid']}/allocation"
    stale = api.delete(path, version="latest", headers={"If-Match": 'W/"stale"'})
    assert stale.status_code == 412, stale.text
    assert error_of(stale)["code"] == "etag.precondition-failed"
    current = api.get(path, version="latest")
    assert current.status_code == 200 and current.json()["uuid"] == done["uuid"]
    gone = api.delete(path, version="latest", headers={"If-Match": current.headers["ETag"]})
    assert gone.status_code == 204, gone.text
    assert api.get(path).status_code == 404
