"""/v1/deploy_templates (Ironic 1.55) over HTTP on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .conftest import Api, error_of

STEPS = [{"interface": "bios", "step": "apply_configuration", "args": {"settings": []}, "priority": 150}]


def template(api: Api, name: str = "CUSTOM_T1", **kw: Any) -> dict[str, Any]:
    resp = api.post("/v1/deploy_templates", {"name": name, "steps": STEPS, **kw})
    assert resp.status_code == 201, resp.text
    return resp.json()


def test_crud_with_etags_and_ironic_fields(api: Api) -> None:
    created = template(api, extra={"a": 1})
    assert created["steps"] == STEPS and created["extra"] == {"a": 1} and created["etag"].startswith('W/"')
    listed = api.get("/v1/deploy_templates").json()["deploy_templates"]
    assert [set(t) for t in listed] == [{"uuid", "name", "links"}]
    by_name = api.get("/v1/deploy_templates/CUSTOM_T1")
    assert by_name.json()["uuid"] == created["uuid"] and by_name.headers["ETag"] == created["etag"]
    stale = created["etag"]
    patched = api.patch(
        "/v1/deploy_templates/CUSTOM_T1", [{"op": "add", "path": "/extra/answer", "value": 42}]
    )
    assert patched.status_code == 200 and patched.json()["extra"] == {"a": 1, "answer": 42}
    assert patched.json()["etag"] != stale
    refused = api.patch(
        f"/v1/deploy_templates/{created['uuid']}",
        [{"op": "replace", "path": "/name", "value": "CUSTOM_T2"}],
        headers={"If-Match": stale},
    )
    assert refused.status_code == 412
    assert (
        api.delete(f"/v1/deploy_templates/{created['uuid']}", headers={"If-Match": stale}).status_code == 412
    )
    assert (
        api.delete(
            f"/v1/deploy_templates/{created['uuid']}", headers={"If-Match": patched.json()["etag"]}
        ).status_code
        == 204
    )
    assert api.get(f"/v1/deploy_templates/{created['uuid']}").status_code == 404


def test_client_token_replays_the_create(api: Api) -> None:
    token = f"tok-{uuid.uuid4()}"
    body = {"name": "CUSTOM_ONCE", "steps": STEPS}
    first = api.post("/v1/deploy_templates", body, headers={"X-Client-Token": token})
    again = api.post("/v1/deploy_templates", body, headers={"X-Client-Token": token})
    assert first.status_code == again.status_code == 201
    assert again.json()["uuid"] == first.json()["uuid"]
    assert len(api.get("/v1/deploy_templates").json()["deploy_templates"]) == 1


def test_version_gate(api: Api) -> None:
    assert api.get("/v1/deploy_templates", version="1.54").status_code == 404
    assert api.get("/v1/deploy_templates", version="1.55").status_code == 200
    assert "deploy_templates" not in api.get("/v1/", version="1.54").json()
    assert "deploy_templates" in api.get("/v1/", version="1.55").json()
    old = api.post("/v1/deploy_templates", {"name": "CUSTOM_OLD", "steps": STEPS}, version="1.55")
    assert old.status_code == 201 and "etag" not in old.json()


@pytest.mark.parametrize(
    "body",
    [
        {"name": "not-a-trait", "steps": STEPS},
        {"name": "CUSTOM_X", "steps": []},
        {"name": "CUSTOM_X"},
        {"name": "CUSTOM_X", "steps": [{**STEPS[0], "interface": "nope"}]},
        {"name": "CUSTOM_X", "steps": [{**STEPS[0], "priority": -1}]},
        {"name": "CUSTOM_X", "steps": [{k: v for k, v in STEPS[0].items() if k != "args"}]},
        {"name": "CUSTOM_X", "steps": STEPS + STEPS},  # duplicate (interface, step)
        {"name": "CUSTOM_X", "steps": STEPS, "bogus": 1},
        {"name": "CUSTOM_X", "steps": STEPS, "uuid": "nope"},
    ],
)
def test_bad_input_is_400(api: Api, body: dict[str, Any]) -> None:
    resp = api.post("/v1/deploy_templates", body)
    assert resp.status_code == 400, resp.text
    assert error_of(resp)["code"]


def test_duplicate_name_is_409_and_bad_patch_400(api: Api) -> None:
    template(api)
    dup = api.post("/v1/deploy_templates", {"name": "CUSTOM_T1", "steps": STEPS})
    assert dup.status_code == 409 and error_of(dup)["code"] == "baremetal.deploy-template-duplicate"
    bad = api.patch("/v1/deploy_templates/CUSTOM_T1", [{"op": "replace", "path": "/name", "value": "x"}])
    assert bad.status_code == 400
    assert (
        api.patch("/v1/deploy_templates/CUSTOM_T1", [{"op": "remove", "path": "/steps"}]).status_code == 400
    )
    ro = api.patch("/v1/deploy_templates/CUSTOM_T1", [{"op": "replace", "path": "/uuid", "value": "x"}])
    assert ro.status_code == 400
