"""/v1/runbooks (Ironic 1.92; traits, description and logical names at 1.112)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .conftest import Api, error_of

STEPS = [{"interface": "bios", "step": "apply_configuration", "args": {"settings": []}, "order": 150}]


def runbook(api: Api, name: str = "CUSTOM_R1", **kw: Any) -> dict[str, Any]:
    resp = api.post("/v1/runbooks", {"name": name, "steps": STEPS, **kw})
    assert resp.status_code == 201, resp.text
    return resp.json()


def test_crud_etags_and_fields_per_version(api: Api) -> None:
    created = runbook(api)
    assert created["public"] is False and created["owner"] is None and created["traits"] == []
    assert created["steps"] == STEPS and created["disable_ramdisk"] is False
    old = api.get("/v1/runbooks/CUSTOM_R1", version="1.111").json()
    assert "traits" not in old and "description" not in old and "etag" not in old
    patched = api.patch(
        "/v1/runbooks/CUSTOM_R1",
        [
            {"op": "add", "path": "/extra/answer", "value": 42},
            {"op": "add", "path": "/description", "value": "d"},
        ],
    )
    assert patched.status_code == 200 and patched.json()["extra"] == {"answer": 42}
    assert patched.json()["description"] == "d"
    stale = api.delete("/v1/runbooks/CUSTOM_R1", headers={"If-Match": created["etag"]})
    assert stale.status_code == 412
    assert (
        api.delete("/v1/runbooks/CUSTOM_R1", headers={"If-Match": patched.json()["etag"]}).status_code == 204
    )
    assert api.get(f"/v1/runbooks/{created['uuid']}").status_code == 404


def test_names_before_and_from_1_112(api: Api) -> None:
    old = api.post("/v1/runbooks", {"name": "enable-ht", "steps": STEPS}, version="1.111")
    assert old.status_code == 400
    assert runbook(api, "enable-ht")["name"] == "enable-ht"
    assert api.get("/v1/runbooks/enable-ht").status_code == 200
    assert api.get("/v1/runbooks", version="1.91").status_code == 404
    assert "runbooks" in api.get("/v1/", version="1.92").json()


def test_traits_sub_resource(api: Api) -> None:
    rb = runbook(api)
    base = f"/v1/runbooks/{rb['uuid']}/traits"
    assert api.put(f"{base}/CUSTOM_A").status_code == 204
    assert api.get(base).json() == {"traits": ["CUSTOM_A"]}
    etag = api.get(f"/v1/runbooks/{rb['uuid']}").json()["etag"]
    assert etag != rb["etag"]  # a trait change is a runbook change
    assert (
        api.put(base, {"traits": ["CUSTOM_B", "CUSTOM_C"]}, headers={"If-Match": rb["etag"]}).status_code
        == 412
    )
    assert api.put(base, {"traits": ["CUSTOM_B", "CUSTOM_C"]}, headers={"If-Match": etag}).status_code == 204
    assert set(api.get(base).json()["traits"]) == {"CUSTOM_B", "CUSTOM_C"}
    assert api.delete(f"{base}/CUSTOM_B").status_code == 204
    assert api.delete(f"{base}/CUSTOM_B").status_code == 204  # absent: a no-op, as Ironic
    assert api.get(base).json() == {"traits": ["CUSTOM_C"]}
    assert api.delete(base).status_code == 204 and api.get(base).json() == {"traits": []}
    assert api.put(f"{base}/lower").status_code == 400
    assert api.get(base, version="1.111").status_code == 404


def test_owner_and_public_rules(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    own = runbook(alice, "CUSTOM_ALICE")
    assert own["owner"] == "alice"
    shared = runbook(api, "CUSTOM_PUB", public=True)
    assert shared["owner"] is None
    assert {r["name"] for r in bob.get("/v1/runbooks").json()["runbooks"]} == {"CUSTOM_PUB"}
    assert {r["name"] for r in alice.get("/v1/runbooks").json()["runbooks"]} == {"CUSTOM_ALICE", "CUSTOM_PUB"}
    assert bob.get(f"/v1/runbooks/{own['uuid']}").status_code == 404
    assert bob.delete(f"/v1/runbooks/{own['uuid']}").status_code == 404
    assert bob.delete("/v1/runbooks/CUSTOM_PUB").status_code == 403
    assert (
        alice.patch(
            "/v1/runbooks/CUSTOM_ALICE", [{"op": "replace", "path": "/public", "value": True}]
        ).status_code
        == 403
    )
    assert alice.post("/v1/runbooks", {"name": "CUSTOM_X", "steps": STEPS, "owner": "bob"}).status_code == 400
    assert alice.post("/v1/runbooks", {"name": "CUSTOM_Y", "steps": STEPS, "public": True}).status_code == 400
    assert (
        api.post(
            "/v1/runbooks", {"name": "CUSTOM_Z", "steps": STEPS, "public": True, "owner": "x"}
        ).status_code
        == 400
    )
    made_public = api.patch(
        "/v1/runbooks/CUSTOM_ALICE", [{"op": "replace", "path": "/public", "value": True}]
    )
    assert made_public.json()["public"] is True and made_public.json()["owner"] is None


def test_client_token_replay(api: Api) -> None:
    token = f"tok-{uuid.uuid4()}"
    body = {"name": "CUSTOM_ONCE", "steps": STEPS}
    first = api.post("/v1/runbooks", body, headers={"X-Client-Token": token})
    again = api.post("/v1/runbooks", body, headers={"X-Client-Token": token})
    assert first.status_code == again.status_code == 201 and again.json()["uuid"] == first.json()["uuid"]


@pytest.mark.parametrize(
    "body",
    [
        {"name": "CUSTOM_X", "steps": [{**STEPS[0], "priority": 1}]},
        {"name": "CUSTOM_X", "steps": [{**STEPS[0], "interface": "storage"}]},
        {"name": "CUSTOM_X", "steps": STEPS + STEPS},
        {"name": "CUSTOM_X", "steps": STEPS, "traits": ["CUSTOM_A"]},
        {"name": "bad name", "steps": STEPS},
    ],
)
def test_bad_input_is_400(api: Api, body: dict[str, Any]) -> None:
    resp = api.post("/v1/runbooks", body)
    assert resp.status_code == 400, resp.text
    assert error_of(resp)["code"]
