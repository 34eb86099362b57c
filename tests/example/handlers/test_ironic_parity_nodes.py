"""Node list filters, query checks and state rules, as real Ironic 39.0 answers them.

Ironic's own source is the reference (ironic/api/controllers/v1/node.py ``get_all``,
utils.py ``check_*``, ironic/common/args.py ``validate`` for "Unexpected arguments",
ironic/db/sqlalchemy/api.py ``_add_nodes_filters``), checked side by side against
an all-in-one Ironic 39.0 (SQLite, fake-hardware, noauth: tests/test_ironic_hook.py starts one).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import Api


def _uuids(resp: Any) -> list[str]:
    assert resp.status_code == 200, resp.text
    return sorted(n["uuid"] for n in resp.json()["nodes"])


def _fault(resp: Any) -> str:
    return str(json.loads(resp.json()["error_message"])["faultstring"])


# -- filters Ironic applies (the example ignored them and returned everything) ---------------------


def test_project_filter_matches_owner_or_lessee(api: Api) -> None:
    owned = api.node(owner="p1")["uuid"]
    leased = api.node(lessee="p1")["uuid"]
    api.node(owner="p2")
    assert _uuids(api.get("/v1/nodes?project=p1")) == sorted([owned, leased])
    assert _uuids(api.get("/v1/nodes?project=nobody")) == []
    # no version gate in Ironic (only the list policy)
    assert _uuids(api.get("/v1/nodes?project=p1", version="1.1")) == sorted([owned, leased])


def test_conductor_filter(api: Api) -> None:
    node = api.node()
    host = node["conductor"]
    assert _uuids(api.get(f"/v1/nodes?conductor={host}")) == [node["uuid"]]
    assert _uuids(api.get("/v1/nodes?conductor=no-such-host")) == []
    # Ironic: 406 below 1.49
    assert api.get("/v1/nodes?conductor=x", version="1.48").status_code == 406
    assert api.get("/v1/nodes?conductor=x", version="1.49").status_code == 200


def test_sharded_filter(api: Api) -> None:
    sharded = api.node(shard="s1")["uuid"]
    plain = api.node()["uuid"]
    assert _uuids(api.get("/v1/nodes?sharded=true")) == [sharded]
    assert _uuids(api.get("/v1/nodes?sharded=false")) == [plain]
    assert api.get("/v1/nodes?sharded=true", version="1.81").status_code == 406
    bad = api.get("/v1/nodes?sharded=maybe")
    assert bad.status_code == 400
    assert "sharded" in _fault(bad)


def test_shard_filter_takes_a_list(api: Api) -> None:
    # Ironic: shard=args.string_list (shard_in)
    one = api.node(shard="s1")["uuid"]
    two = api.node(shard="s2")["uuid"]
    api.node(shard="s3")
    assert _uuids(api.get("/v1/nodes?shard=s1,s2")) == sorted([one, two])


def test_parent_node_filter_and_children_hidden_by_default(api: Api) -> None:
    parent = api.node()["uuid"]
    child = api.node()["uuid"]
    resp = api.patch(f"/v1/nodes/{child}", [{"op": "add", "path": "/parent_node", "value": parent}])
    assert resp.status_code == 200, resp.text
    # Ironic's database filter: without include_children, child nodes are left out
    assert _uuids(api.get("/v1/nodes")) == [parent]
    assert _uuids(api.get("/v1/nodes?include_children=true")) == sorted([parent, child])
    assert _uuids(api.get(f"/v1/nodes?parent_node={parent}")) == [child]
    assert _uuids(api.get("/v1/nodes?parent_node=no-such-node")) == []
    assert api.get(f"/v1/nodes?parent_node={parent}", version="1.82").status_code == 406
    assert api.get("/v1/nodes?include_children=true", version="1.82").status_code == 406


def test_instance_name_filter(api: Api) -> None:
    # Ironic's PATCH rule: an instance_info change with display_name fills an empty instance_name
    node = api.node()
    patch = [{"op": "add", "path": "/instance_info", "value": {"display_name": "vm-1"}}]
    assert api.patch(f"/v1/nodes/{node['uuid']}", patch).json()["instance_name"] == "vm-1"
    assert _uuids(api.get("/v1/nodes?instance_name=vm-1")) == [node["uuid"]]
    assert _uuids(api.get("/v1/nodes?instance_name=other")) == []
    assert api.get("/v1/nodes?instance_name=vm-1", version="1.103").status_code == 406


# -- bad query parameters: 400 like Ironic ---------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/nodes", "/v1/nodes/detail"])
def test_unknown_query_parameter_is_400(api: Api, path: str) -> None:
    resp = api.get(f"{path}?bogus=1")
    assert resp.status_code == 400, resp.text
    assert _fault(resp) == "Unexpected arguments: bogus"
    resp = api.get(f"{path}?zeta=1&alpha=2")
    assert _fault(resp) == "Unexpected arguments: zeta, alpha"  # the request's order


def test_unknown_query_parameter_on_one_node_is_400(api: Api) -> None:
    node = api.node()
    resp = api.get(f"/v1/nodes/{node['uuid']}?bogus=1")
    assert resp.status_code == 400, resp.text
    assert _fault(resp) == "Unexpected arguments: bogus"
    assert api.get(f"/v1/nodes/{node['uuid']}?fields=uuid").status_code == 200


def test_every_filter_ironic_knows_is_accepted(api: Api) -> None:
    query = (
        "chassis_uuid=1be26c0b-03f2-4d2e-ae87-c02d7f33c123&instance_uuid=1be26c0b-03f2-4d2e-ae87-"
        "c02d7f33c124&associated=false&maintenance=false&retired=false&provision_state=enroll&limit=5"
        "&sort_key=id&sort_dir=asc&driver=fake-hardware&resource_class=x&fault=power%20failure"
        "&conductor_group=g&conductor=c&owner=o&description_contains=d&lessee=l&project=p&shard=s"
        "&sharded=false&include_children=true&parent_node=x&instance_name=i"
    )
    resp = api.get(f"/v1/nodes?{query}")
    # the chassis does not exist: Ironic answers 404 for it, and nothing else is refused
    assert resp.status_code == 404, resp.text
    assert "Unexpected arguments" not in resp.text


def test_invalid_provision_state_filter_is_400(api: Api) -> None:
    api.node()
    resp = api.get("/v1/nodes?provision_state=bogus")
    assert resp.status_code == 400
    assert _fault(resp) == 'Provision state "bogus" is not valid'
    assert api.get("/v1/nodes?provision_state=clean%20failed").status_code == 200


def test_invalid_fault_filter_is_400(api: Api) -> None:
    resp = api.get("/v1/nodes?fault=zzz")
    assert resp.status_code == 400
    assert _fault(resp) == (
        "Unrecognized fault \"zzz\" is specified, allowed faults are ('power failure', "
        "'clean failure', 'rescue abort failure', 'service failure')"
    )
    assert api.get("/v1/nodes?fault=power%20failure").status_code == 200


# -- state rules -----------------------------------------------------------------------------------


def _settle(api: Api, uuid: str) -> dict[str, Any]:
    return api.wait_for(f"/v1/nodes/{uuid}", lambda d: d["target_provision_state"] is None)


def _manageable(api: Api) -> str:
    uuid = api.node()["uuid"]
    assert api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "manage"}).status_code == 202
    assert _settle(api, uuid)["provision_state"] == "manageable"
    return uuid


def test_manual_clean_with_an_unsupported_step_ends_in_clean_failed(api: Api) -> None:
    # Ironic 39.0, fake-hardware: "clean failed" and this last_error
    uuid = _manageable(api)
    steps = [{"interface": "deploy", "step": "no_such_step"}]
    resp = api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "clean", "clean_steps": steps})
    assert resp.status_code == 202
    node = _settle(api, uuid)
    assert node["provision_state"] == "clean failed"
    assert node["last_error"] == (
        f"Cannot clean node {uuid}: node does not support this clean step: "
        "{'interface': 'deploy', 'step': 'no_such_step'}"
    )


def test_manual_clean_with_a_supported_step_ends_in_manageable(api: Api) -> None:
    uuid = _manageable(api)
    steps = [{"interface": "bios", "step": "factory_reset"}]
    assert api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "clean", "clean_steps": steps}).ok
    node = _settle(api, uuid)
    assert (node["provision_state"], node["last_error"]) == ("manageable", None)


def test_retirement_rules(api: Api) -> None:
    # Regression guard (already right before this file): Ironic 39.0 answers the same.
    uuid = _manageable(api)
    patch = [
        {"op": "add", "path": "/retired", "value": True},
        {"op": "add", "path": "/retired_reason", "value": "old"},
    ]
    assert api.patch(f"/v1/nodes/{uuid}", patch).json()["retired_reason"] == "old"
    node = api.patch(f"/v1/nodes/{uuid}", [{"op": "replace", "path": "/retired", "value": False}]).json()
    assert (node["retired"], node["retired_reason"]) == (False, None)
    assert api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "provide"}).status_code == 202
    assert _settle(api, uuid)["provision_state"] == "available"
    resp = api.patch(f"/v1/nodes/{uuid}", [{"op": "add", "path": "/retired", "value": True}])
    assert resp.status_code == 409
    assert _fault(resp) == (
        f"Node {uuid} can not have 'retired' set in provision state 'available', "
        "the current state is 'available'"
    )
