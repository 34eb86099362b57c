"""Per-node endpoints and collections Ironic 39.0 serves, answered through the node's driver.

Ironic's source: ironic/api/controllers/v1/node.py (NodeManagementController,
BootDeviceController, NodeBiosController at 1.40, NodeChildrenController at 1.83,
NodeStatesController.console), shard.py (1.82); compared side by side with Ironic 39.0
(fake-hardware): a fresh node answers ``{"bios": []}``, ``{"children": [], ...}``,
``{"console_enabled": false, "console_info": null}``, boot device PUT 204 then GET.
"""

from __future__ import annotations

from .conftest import Api


def test_boot_device_through_the_driver(api: Api) -> None:
    uuid = api.node()["uuid"]
    supported = api.get(f"/v1/nodes/{uuid}/management/boot_device/supported")
    assert supported.status_code == 200, supported.text
    assert "pxe" in supported.json()["supported_boot_devices"]
    resp = api.put(f"/v1/nodes/{uuid}/management/boot_device", {"boot_device": "pxe", "persistent": True})
    assert resp.status_code == 204, resp.text
    assert api.get(f"/v1/nodes/{uuid}/management/boot_device").json() == {
        "boot_device": "pxe",
        "persistent": True,
    }
    bad = api.put(f"/v1/nodes/{uuid}/management/boot_device", {"boot_device": "floppy"})
    assert bad.status_code == 400
    assert api.get("/v1/nodes/no-such/management/boot_device").status_code == 404


def test_bios_is_empty_for_fake_hardware_at_1_40(api: Api) -> None:
    uuid = api.node()["uuid"]
    assert api.get(f"/v1/nodes/{uuid}/bios").json() == {"bios": []}
    assert api.get(f"/v1/nodes/{uuid}/bios", version="1.39").status_code == 404


def test_children(api: Api) -> None:
    parent = api.node()["uuid"]
    child = api.node()["uuid"]
    api.patch(f"/v1/nodes/{child}", [{"op": "add", "path": "/parent_node", "value": parent}])
    doc = api.get(f"/v1/nodes/{parent}/children").json()
    assert doc["children"] == [child]
    assert api.get(f"/v1/nodes/{parent}/children", version="1.82").status_code == 404


def test_console_state(api: Api) -> None:
    uuid = api.node()["uuid"]
    assert api.get(f"/v1/nodes/{uuid}/states/console").json() == {
        "console_enabled": False,
        "console_info": None,
    }


def test_console_put_honours_if_match_even_when_the_console_is_already_in_that_state(api: Api) -> None:
    """Found by the reliability harness's schemathesis run: a PUT that changed nothing never
    checked its If-Match, so the etag middleware refused the 2xx with a 500."""
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/states/console"
    etag = api.get(f"/v1/nodes/{node['uuid']}").headers["ETag"]
    for if_match in ("*", etag):
        resp = api.put(path, {"enabled": False}, headers={"If-Match": if_match})
        assert resp.status_code == 202, resp.text
    stale = api.put(path, {"enabled": False}, headers={"If-Match": '"not-the-etag"'})
    assert stale.status_code == 412, stale.text
    assert api.get(f"/v1/nodes/{node['uuid']}").headers["ETag"] == etag  # nothing was written


def test_shards(api: Api) -> None:
    api.node(shard="s1")
    api.node(shard="s1")
    api.node()
    shards = api.get("/v1/shards").json()["shards"]
    assert {"name": "s1", "count": 2} in shards
    assert {"name": "None", "count": 1} in shards  # Ironic names the unsharded group "None"
    assert api.get("/v1/shards", version="1.81").status_code == 404


def test_shards_linked_from_v1_at_1_82(api: Api) -> None:
    # Ironic lists "shards" in GET /v1/ from 1.82
    assert "shards" in api.get("/v1/", version="1.82").json()
    assert "shards" not in api.get("/v1/", version="1.81").json()
