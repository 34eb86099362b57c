"""Ironic's paths over HTTP: without a version, with a ``.json`` suffix, the console alias.

As Ironic 39.0 serves them (and ironic-tempest-plugin's client calls them): a path that does
not start with ``/v1`` is served as the same path under ``/v1``; below 1.91 ``<ident>.json``
names the item ``<ident>`` when showing, updating or deleting nodes, port groups, deploy
templates and allocations (a 404 from 1.91); ``/v1/nodes/states/console/<ident>`` is the
node's console.
"""

from __future__ import annotations

import pytest

from .conftest import Api
from .test_allocations import allocate, available_node

MAC = "52:54:00:12:34:56"


def test_paths_without_a_version_are_served_as_under_v1(api: Api) -> None:
    node = api.node(name="unversioned")
    assert api.post("/v1/ports", {"node_uuid": node["uuid"], "address": MAC}).status_code == 201
    instance = "8a0b4cbd-5dfa-4b4c-a3b4-0a2c1e0b6d11"
    assert api.patch(f"/v1/nodes/{node['uuid']}", [
        {"op": "add", "path": "/instance_uuid", "value": instance},
    ]).status_code == 200  # fmt: skip
    properties = api.get("/drivers/fake-hardware/properties")
    assert properties.status_code == 200
    assert properties.json() == api.get("/v1/drivers/fake-hardware/properties").json()
    by_instance = api.get(f"/nodes/detail?instance_uuid={instance}")
    assert by_instance.status_code == 200
    assert [n["uuid"] for n in by_instance.json()["nodes"]] == [node["uuid"]]
    by_address = api.get(f"/ports/detail?address={MAC}")
    assert by_address.status_code == 200
    assert [p["address"] for p in by_address.json()["ports"]] == [MAC]
    # the answers carry the version headers, as every answer under /v1
    assert (
        by_address.headers["X-OpenStack-Ironic-API-Version"]
        == by_instance.headers["X-OpenStack-Ironic-API-Version"]
    )
    assert api.get("/nodes/nope").status_code == 404


def test_a_nodes_allocation_without_a_version_in_the_path(api: Api) -> None:
    node = available_node(api, resource_class="rc-path")
    done = allocate(api, resource_class="rc-path")
    shown = api.get(f"/nodes/{node['uuid']}/allocation")
    assert shown.status_code == 200, shown.text
    assert shown.json() == api.get(f"/v1/nodes/{node['uuid']}/allocation").json()
    assert shown.json()["uuid"] == done["uuid"]


def test_the_console_alias_shows_the_nodes_console(api: Api) -> None:
    node = api.node()
    alias = api.get(f"/v1/nodes/states/console/{node['uuid']}")
    assert alias.status_code == 200, alias.text
    assert alias.json() == api.get(f"/v1/nodes/{node['uuid']}/states/console").json()


@pytest.mark.parametrize(("version", "suffixed"), [("1.90", True), ("1.91", False)])
def test_a_json_suffix_names_the_item_below_1_91(api: Api, version: str, suffixed: bool) -> None:
    node = api.node(name="suffixed")
    path = f"/v1/nodes/{node['uuid']}.json"
    shown = api.get(path, version=version)
    updated = api.patch(path, [{"op": "add", "path": "/extra/a", "value": "b"}], version=version)
    if not suffixed:
        assert (shown.status_code, updated.status_code) == (404, 404)
        assert api.delete(path, version=version).status_code == 404
        return
    assert shown.status_code == 200 and shown.json()["uuid"] == node["uuid"]
    assert updated.status_code == 200 and updated.json()["extra"] == {"a": "b"}
    assert api.get("/v1/nodes/suffixed.json", version=version).json()["uuid"] == node["uuid"]
    portgroup = api.post("/v1/portgroups", {"node_uuid": node["uuid"], "name": "pg"}).json()
    assert api.get(f"/v1/portgroups/{portgroup['uuid']}.json", version=version).json()["name"] == "pg"
    assert api.delete(f"/v1/portgroups/{portgroup['uuid']}.json", version=version).status_code == 204
    template = api.post("/v1/deploy_templates", {
        "name": "CUSTOM_SUFFIX", "steps": [{"interface": "bios", "step": "apply_configuration",
                                            "args": {}, "priority": 10}],
    }).json()  # fmt: skip
    assert api.get(f"/v1/deploy_templates/{template['uuid']}.json", version=version).status_code == 200
    assert api.delete(f"/v1/deploy_templates/{template['uuid']}.json", version=version).status_code == 204
    assert api.delete(path, version=version).status_code == 204
    assert api.get(f"/v1/nodes/{node['uuid']}").status_code == 404
