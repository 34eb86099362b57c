"""Inspection rules over HTTP (SQLite and PostgreSQL), against Ironic 39's answers.

Statuses and texts were captured from a real Ironic 39.0 with the same requests;
where this service deliberately differs (a 400 where Ironic answers 500) it says so.
"""

from __future__ import annotations

import uuid
from typing import Any

from .conftest import Api, error_of

ACTIONS = [{"op": "set-attribute", "args": ["/driver", "idrac"]}]
CONDITIONS = [{"op": "eq", "args": ["node:memory_mb", 4096], "multiple": "all"}]


def _rule(api: Api, **fields: Any) -> dict[str, Any]:
    resp = api.post("/v1/inspection_rules", {"actions": ACTIONS, **fields})
    assert resp.status_code == 201, resp.text
    return resp.json()


def test_version_gate_404_for_get_405_otherwise(api: Api) -> None:
    assert api.get("/v1/inspection_rules", version="1.95").status_code == 404  # Ironic: 404
    post = api.post("/v1/inspection_rules", {"actions": ACTIONS}, version="1.95")
    assert post.status_code == 405  # Ironic: 405 "The API version does not allow inspection rules"
    assert error_of(post)["faultstring"] == "The API version does not allow inspection rules"
    assert api.get("/v1/inspection_rules", version="1.96").json() == {"inspection_rules": []}


def test_crud_in_ironic_shape(api: Api) -> None:
    created = api.post(
        "/v1/inspection_rules",
        {"actions": ACTIONS, "conditions": CONDITIONS, "description": "r1", "priority": 100},
        version="1.115",
    )
    assert created.status_code == 201, created.text
    rule = created.json()
    assert list(rule) == [  # Ironic 39's order and defaults
        "uuid", "created_at", "updated_at", "description", "priority", "sensitive", "phase",
        "conditions", "actions", "links",
    ]  # fmt: skip
    assert (rule["sensitive"], rule["phase"]) == (False, "main")
    # Ironic shows a condition's "multiple" only with a loop
    assert rule["conditions"] == [{"op": "eq", "args": ["node:memory_mb", 4096]}]
    assert rule["actions"] == ACTIONS
    assert created.headers["Location"].endswith(f"/v1/inspection_rules/{rule['uuid']}")
    listed = api.get("/v1/inspection_rules", version="1.115").json()["inspection_rules"]
    assert [sorted(r) for r in listed] == [["description", "links", "phase", "priority", "uuid"]]
    detail = api.get("/v1/inspection_rules", params={"detail": "true"}).json()["inspection_rules"]
    assert detail[0]["actions"] == ACTIONS
    only = api.get("/v1/inspection_rules", params={"fields": "uuid"}).json()["inspection_rules"]
    assert set(only[0]) == {"uuid", "links"}
    path = f"/v1/inspection_rules/{rule['uuid']}"
    new_actions = [{"op": "set-attribute", "args": ["/driver", "fake"]}]
    patched = api.patch(
        path,
        [
            {"op": "add", "path": "/actions", "value": new_actions},
            {"op": "replace", "path": "/priority", "value": 150},
        ],
    )
    assert patched.status_code == 200, patched.text
    assert (patched.json()["actions"], patched.json()["priority"]) == (new_actions, 150)
    assert patched.json()["description"] == "r1"
    assert api.get(path).json()["actions"] == new_actions
    assert api.patch(path, [{"op": "remove", "path": "/description"}]).json()["description"] is None
    assert api.delete(path).status_code == 204
    gone = api.get(path)
    assert gone.status_code == 404
    assert error_of(gone) == {
        "faultstring": f"Rule {rule['uuid']} could not be found.",
        "code": "baremetal.inspection-rule-not-found",
    }


def test_a_rule_with_actions_only_gets_the_defaults(api: Api) -> None:
    # Ironic 39 answers this one 500 ('NoneType' object is not iterable) after storing the rule
    rule = _rule(api)
    assert (rule["conditions"], rule["priority"], rule["description"]) == ([], 0, None)


def test_sensitive_rules_hide_conditions_and_actions_and_stay_sensitive(api: Api) -> None:
    rule = _rule(api, conditions=CONDITIONS, sensitive=True)
    assert (rule["conditions"], rule["actions"]) == (None, None)  # Ironic: null and null
    path = f"/v1/inspection_rules/{rule['uuid']}"
    assert api.get(path).json()["actions"] is None
    assert (
        api.get("/v1/inspection_rules", params={"detail": "true"}).json()["inspection_rules"][0]["conditions"]
        is None
    )
    unset = api.patch(path, [{"op": "replace", "path": "/sensitive", "value": False}])
    assert unset.status_code == 400  # Ironic: 400 "... cannot have the sensitive flag unset."
    assert "cannot have the sensitive flag unset" in error_of(unset)["faultstring"]
    other = _rule(api, description="made sensitive later")
    later = api.patch(
        f"/v1/inspection_rules/{other['uuid']}", [{"op": "replace", "path": "/sensitive", "value": True}]
    )
    assert later.status_code == 200 and later.json()["actions"] is None


def test_etag_if_match_412_and_client_token_replay(api: Api) -> None:
    token = f"tok-{uuid.uuid4()}"
    body = {"actions": ACTIONS, "description": "tokened"}
    first = api.post("/v1/inspection_rules", body, headers={"X-Client-Token": token})
    again = api.post("/v1/inspection_rules", body, headers={"X-Client-Token": token})
    assert first.status_code == again.status_code == 201
    assert again.json()["uuid"] == first.json()["uuid"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert len(api.get("/v1/inspection_rules").json()["inspection_rules"]) == 1
    path = f"/v1/inspection_rules/{first.json()['uuid']}"
    got = api.get(path)
    etag = got.headers["ETag"]
    assert got.json()["etag"] == etag == first.headers["ETag"]
    assert "etag" not in api.get(path, version="1.115").json()
    ok = api.patch(path, [{"op": "replace", "path": "/priority", "value": 5}], headers={"If-Match": etag})
    assert ok.status_code == 200 and ok.headers["ETag"] != etag
    assert (
        api.patch(
            path, [{"op": "replace", "path": "/priority", "value": 6}], headers={"If-Match": etag}
        ).status_code
        == 412
    )
    assert api.delete(path, headers={"If-Match": etag}).status_code == 412
    assert api.get(path).json()["priority"] == 5
    assert api.delete(path, headers={"If-Match": ok.headers["ETag"]}).status_code == 204


def test_bad_rules_are_400_like_ironic(api: Api) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"conditions": CONDITIONS}, "'actions' is a required property"),
        ({"actions": []}, "should be non-empty"),
        ({"actions": [{"op": "bogus", "args": []}]}, "is not one of"),
        ({"actions": ACTIONS, "bogus": 1}, "Additional properties are not allowed"),
        ({"actions": ACTIONS, "priority": -1}, "less than the minimum of 0"),
        (
            {"actions": ACTIONS, "conditions": [{"op": "eq", "args": [1], "multiple": "none"}]},
            "is not one of",
        ),
        ({"actions": ACTIONS, "phase": "early"}, "Invalid phase: early. Valid phases are: main"),
        (
            {"actions": ACTIONS, "priority": 10000},
            "Priority must be between 0 and 9999 for user-defined rules.",
        ),
        (
            {"actions": ACTIONS, "phase": "early", "priority": 10000},
            "Multiple validation errors occurred: Invalid phase: early. Valid phases are: main; "
            "Priority must be between 0 and 9999 for user-defined rules.",
        ),
        # Ironic 39 answers the next three 500; their texts are Ironic's plugin messages
        (
            {"actions": [{"op": "set-attribute", "args": ["/x"]}]},
            "Not enough arguments provided. Missing: value",
        ),
        (
            {"actions": [{"op": "set-attribute", "args": {"path": "/x"}}]},
            "missing required argument(s): value",
        ),
        (
            {"actions": [{"op": "set-attribute", "args": {"path": "/x", "value": 1, "z": 2}}]},
            "unexpected argument(s): z",
        ),
        ({"actions": ACTIONS, "conditions": [{"op": "!in-net", "args": {"address": "a"}}]}, "subnet"),
        ({"actions": ACTIONS, "uuid": "bad"}, "does not match"),
    ]
    for body, text in cases:
        resp = api.post("/v1/inspection_rules", body)
        assert resp.status_code == 400, (body, resp.text)
        assert text in error_of(resp)["faultstring"], (body, error_of(resp))
    # an inverted operator and named arguments are fine
    ok = {"actions": ACTIONS, "conditions": [{"op": "!eq", "args": {"values": [1, 2]}}]}
    assert api.post("/v1/inspection_rules", ok).status_code == 201
    rule = _rule(api)
    path = f"/v1/inspection_rules/{rule['uuid']}"
    for patch in (
        [{"op": "replace", "path": "/actions", "value": []}],  # Ironic: 400 should be non-empty
        [{"op": "replace", "path": "/uuid", "value": str(uuid.uuid4())}],  # Ironic: 404 (!)
        [{"op": "replace", "path": "/phase", "value": "later"}],
    ):
        assert api.patch(path, patch).status_code == 400, patch
    assert api.get("/v1/inspection_rules/nope").status_code == 400  # Ironic: 400 not a 'uuid'
    assert api.get("/v1/inspection_rules", params={"sort_key": "actions"}).status_code == 400  # Ironic: 400
    assert api.get(f"/v1/inspection_rules/{uuid.uuid4()}").status_code == 404


def test_paging_sorting_and_phase_filter(api: Api) -> None:
    rules = [_rule(api, priority=p) for p in (30, 10, 20)]
    by_priority = api.get("/v1/inspection_rules", params={"sort_key": "priority"}).json()["inspection_rules"]
    assert [r["priority"] for r in by_priority] == [10, 20, 30]
    page = api.get("/v1/inspection_rules", params={"limit": 2}).json()
    assert [r["uuid"] for r in page["inspection_rules"]] == [rules[0]["uuid"], rules[1]["uuid"]]
    assert "/v1/inspection_rules?" in page["next"]
    rest = api.get(page["next"].removeprefix(api.url)).json()["inspection_rules"]
    assert [r["uuid"] for r in rest] == [rules[2]["uuid"]]
    assert len(api.get("/v1/inspection_rules", params={"phase": "main"}).json()["inspection_rules"]) == 3
    assert api.get("/v1/inspection_rules", params={"phase": "other"}).json()["inspection_rules"] == []


def test_inspection_rules_are_for_system_callers_only(api: Api) -> None:
    rule = _rule(api)
    project = api.as_project("alice")
    for resp in (
        project.get("/v1/inspection_rules"),
        project.get(f"/v1/inspection_rules/{rule['uuid']}"),
        project.post("/v1/inspection_rules", {"actions": ACTIONS}),
        project.patch(
            f"/v1/inspection_rules/{rule['uuid']}", [{"op": "replace", "path": "/priority", "value": 1}]
        ),
        project.delete(f"/v1/inspection_rules/{rule['uuid']}"),
    ):
        assert resp.status_code == 403, resp.text  # Ironic's default policy: system scope only
        assert error_of(resp)["code"] == "baremetal.forbidden"
    assert api.get(f"/v1/inspection_rules/{rule['uuid']}").json()["priority"] == 0
