"""Node history (``/v1/nodes/{id}/history``, microversion 1.78) as Ironic 39.0 serves it.

Ironic's source: ironic/api/controllers/v1/node.py (NodeHistoryController: standard fields
uuid, created_at, severity, event; ``detail=true`` and the single entry add event_type,
conductor, user, project (1.113), state, target_provision_state, duration_seconds (1.115));
ironic/conductor/utils.py ``node_history_record`` (an ERROR entry whenever a failure sets
``last_error``, recorded with the state the node was in).  Compared side by side with Ironic
39.0 (fake-hardware): a fresh node's history is ``[]``; after a manual clean with an unknown
step, one entry::

    {"uuid": ..., "created_at": ..., "severity": "ERROR", "event_type": "cleaning",
     "event": "Cannot clean node <uuid>: node does not support this clean step: {...}",
     "conductor": "<host>", "user": null, "project": null, "state": "cleaning",
     "target_provision_state": "manageable", "duration_seconds": 0, "links": [self]}

Below 1.78 the path is 404; an unknown entry is 404 "Node history record X could not be
found."; ``limit=0`` is 400 "Limit must be positive"; unknown parameters 400.
"""

from __future__ import annotations

from typing import Any

from .conftest import Api, error_of


def _settle(api: Api, uuid: str) -> dict[str, Any]:
    return api.wait_for(f"/v1/nodes/{uuid}", lambda d: d["target_provision_state"] is None)


def _failed_clean(api: Api) -> str:
    uuid = api.node()["uuid"]
    assert api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "manage"}).status_code == 202
    assert _settle(api, uuid)["provision_state"] == "manageable"
    steps = [{"interface": "deploy", "step": "bogus"}]
    resp = api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "clean", "clean_steps": steps})
    assert resp.status_code == 202
    assert _settle(api, uuid)["provision_state"] == "clean failed"
    return uuid


def test_fresh_node_has_no_history_and_the_path_needs_1_78(api: Api) -> None:
    uuid = api.node()["uuid"]
    resp = api.get(f"/v1/nodes/{uuid}/history")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"history": []}
    assert api.get(f"/v1/nodes/{uuid}/history", version="1.77").status_code == 404
    assert api.get("/v1/nodes/no-such-node/history").status_code == 404


def test_failed_clean_records_an_error_entry(api: Api) -> None:
    uuid = _failed_clean(api)
    history = api.get(f"/v1/nodes/{uuid}/history").json()["history"]
    assert len(history) == 1
    entry = history[0]
    assert set(entry) == {"uuid", "created_at", "severity", "event", "links"}
    assert entry["severity"] == "ERROR"
    assert entry["event"] == (
        f"Cannot clean node {uuid}: node does not support this clean step: "
        "{'interface': 'deploy', 'step': 'bogus'}"
    )
    assert entry["links"] == [
        {"href": f"{api.url}/v1/nodes/{uuid}/history/{entry['uuid']}", "rel": "self"}
    ]
    # the event is the node's last_error, as node_history_record sets it
    assert api.get(f"/v1/nodes/{uuid}").json()["last_error"] == entry["event"]

    detail = api.get(f"/v1/nodes/{uuid}/history?detail=true").json()["history"][0]
    assert list(detail) == [
        "uuid", "created_at", "severity", "event_type", "event", "conductor", "user", "project",
        "state", "target_provision_state", "duration_seconds", "links",
    ]  # fmt: skip
    assert detail["event_type"] == "cleaning"
    assert detail["state"] == "cleaning"
    assert detail["target_provision_state"] == "manageable"
    assert detail["user"] is None and detail["project"] is None
    assert isinstance(detail["conductor"], str) and detail["conductor"]
    assert isinstance(detail["duration_seconds"], int) and detail["duration_seconds"] >= 0

    one = api.get(f"/v1/nodes/{uuid}/history/{entry['uuid']}")
    assert one.status_code == 200
    assert one.json() == detail


def test_history_fields_follow_ironic_versions(api: Api) -> None:
    uuid = _failed_clean(api)
    event = api.get(f"/v1/nodes/{uuid}/history").json()["history"][0]["uuid"]
    # 1.113 adds project, 1.115 state/target_provision_state/duration_seconds
    at_112 = api.get(f"/v1/nodes/{uuid}/history/{event}", version="1.112").json()
    assert "project" not in at_112 and "state" not in at_112 and "event_type" in at_112
    at_114 = api.get(f"/v1/nodes/{uuid}/history?detail=true", version="1.114").json()["history"][0]
    assert "project" in at_114 and "duration_seconds" not in at_114


def test_history_errors_as_ironic(api: Api) -> None:
    uuid = api.node()["uuid"]
    missing = api.get(f"/v1/nodes/{uuid}/history/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404
    assert error_of(missing)["faultstring"] == (
        "Node history record 00000000-0000-0000-0000-000000000000 could not be found."
    )
    assert api.get(f"/v1/nodes/{uuid}/history/notauuid").status_code == 404
    zero = api.get(f"/v1/nodes/{uuid}/history?limit=0")
    assert zero.status_code == 400 and error_of(zero)["faultstring"] == "Limit must be positive"
    bogus = api.get(f"/v1/nodes/{uuid}/history?bogus=1")
    assert bogus.status_code == 400 and error_of(bogus)["faultstring"] == "Unexpected arguments: bogus"
    assert api.get(f"/v1/nodes/{uuid}/history?detail=maybe").status_code == 400


def test_history_of_another_node_is_not_found(api: Api) -> None:
    uuid = _failed_clean(api)
    event = api.get(f"/v1/nodes/{uuid}/history").json()["history"][0]["uuid"]
    other = api.node()["uuid"]
    assert api.get(f"/v1/nodes/{other}/history/{event}").status_code == 404


def test_history_pages_with_limit_and_goes_with_the_node(api: Api) -> None:
    uuid = _failed_clean(api)
    # a second failure: clean again from clean failed -> manage, then a bad clean
    assert api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "manage"}).status_code == 202
    assert _settle(api, uuid)["provision_state"] == "manageable"
    steps = [{"interface": "deploy", "step": "other"}]
    assert api.put(
        f"/v1/nodes/{uuid}/states/provision", {"target": "clean", "clean_steps": steps}
    ).status_code == 202
    assert _settle(api, uuid)["provision_state"] == "clean failed"
    page = api.get(f"/v1/nodes/{uuid}/history?limit=1").json()
    assert len(page["history"]) == 1 and "next" in page
    rest = api.get(page["next"].replace(api.url, "")).json()
    assert len(rest["history"]) == 1 and rest["history"][0]["uuid"] != page["history"][0]["uuid"]
    assert "other" in rest["history"][0]["event"]
    # the entries go with the node (the delete would break the foreign key otherwise)
    assert api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "manage"}).status_code == 202
    assert _settle(api, uuid)["provision_state"] == "manageable"
    assert api.delete(f"/v1/nodes/{uuid}").status_code == 204
    assert api.get(f"/v1/nodes/{uuid}/history").status_code == 404
