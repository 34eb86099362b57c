"""Per-node features over HTTP (SQLite and PostgreSQL), as Ironic 39.0 answers them.

Traits (1.37), VIFs (1.28), virtual media (1.89), firmware components (1.86),
retirement (1.61) and instance names (1.104).  The expected statuses and texts were
captured from a real Ironic 39.0 (fake-hardware, noop network interface) with the
same requests.  Trait writes are node writes: they move the node's etag and honour
If-Match (1.116); a project cannot read or change another project's node's features.
"""

from __future__ import annotations

from typing import Any

import pytest
import requests

from .conftest import Api, error_of

VIF = "200712fc-fdfb-47da-89a6-2d19f76c7618"
MISSING = "5c9dcd04-2073-49bc-9618-99ae634d8971"
USAGE = (
    "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, "
    "or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of "
    "traits specified in the request body."
)


def traits(api: Api, ident: str, **kw: Any) -> list[str]:
    resp = api.get(f"/v1/nodes/{ident}/traits", **kw)
    assert resp.status_code == 200, resp.text
    return list(resp.json()["traits"])


def status(resp: requests.Response, expected: int) -> requests.Response:
    assert resp.status_code == expected, resp.text
    return resp


# -- traits ---------------------------------------------------------------------------------------


def test_traits_add_set_remove_and_the_node_field(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/traits"
    assert node["traits"] == [] and traits(api, node["uuid"]) == []
    resp = status(api.put(f"{path}/CUSTOM_FAKE", version="1.37"), 204)
    assert resp.headers["Location"].endswith(f"/v1/nodes/{node['uuid']}/traits/CUSTOM_FAKE")
    status(api.put(f"{path}/CUSTOM_FAKE"), 204)  # idempotent
    status(api.put(f"{path}/HW_CPU_X86_AVX"), 204)  # a standard os-traits name
    assert traits(api, node["uuid"]) == ["CUSTOM_FAKE", "HW_CPU_X86_AVX"]
    assert api.get(f"/v1/nodes/{node['uuid']}").json()["traits"] == ["CUSTOM_FAKE", "HW_CPU_X86_AVX"]
    assert api.get(f"/v1/nodes/{node['uuid']}?fields=traits").json()["traits"] == [
        "CUSTOM_FAKE", "HW_CPU_X86_AVX",
    ]  # fmt: skip
    # replace all (duplicates collapse, sorted), remove one, remove all
    status(api.put(path, {"traits": ["CUSTOM_B", "CUSTOM_A", "CUSTOM_A"]}), 204)
    assert traits(api, node["uuid"]) == ["CUSTOM_A", "CUSTOM_B"]
    status(api.delete(f"{path}/CUSTOM_A"), 204)
    assert traits(api, node["uuid"]) == ["CUSTOM_B"]
    resp = status(api.delete(f"{path}/CUSTOM_NOPE"), 404)
    assert error_of(resp) == {
        "faultstring": f"Node {node['uuid']} doesn't have a trait 'CUSTOM_NOPE'",
        "code": "baremetal.node-trait-not-found",
    }
    status(api.delete(path), 204)
    assert traits(api, node["uuid"]) == []
    # by name too
    named = api.node(name="traity")
    status(api.put("/v1/nodes/traity/traits/CUSTOM_X"), 204)
    assert traits(api, named["uuid"]) == ["CUSTOM_X"]


def test_traits_are_hidden_and_refused_below_1_37(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/traits"
    assert "traits" not in api.get(f"/v1/nodes/{node['uuid']}", version="1.36").json()
    # Ironic 39.0: reading is its 406, a PUT lands on the node (405), a DELETE on no route (404)
    for resp, expected in (
        (api.get(path, version="1.36"), 406),
        (api.get(f"/v1/nodes/{node['uuid']}?fields=traits", version="1.36"), 406),
        (api.put(f"{path}/CUSTOM_A", version="1.36"), 405),
        (api.put(path, {"traits": ["CUSTOM_A"]}, version="1.36"), 405),
        (api.delete(path, version="1.36"), 404),
        (api.delete(f"{path}/CUSTOM_A", version="1.36"), 404),
    ):
        status(resp, expected)
    assert traits(api, node["uuid"]) == []


@pytest.mark.parametrize(
    ("method", "suffix", "body", "detail"),
    [
        ("PUT", "/BOGUS", None, "Schema error for trait: 'BOGUS' is not valid under any of the given"),
        ("PUT", "/custom_lower", None, "Schema error for trait: 'custom_lower' is not valid"),
        ("PUT", "/CUSTOM_" + "A" * 250, None, "is too long"),
        ("PUT", "", {"traits": ["BAD"]}, "Schema error for body: 'BAD' is not valid"),
        ("PUT", "", {"traits": "CUSTOM_A"}, "is not of type 'array'"),
        ("PUT", "", {"traits": ["CUSTOM_A"], "x": 1}, "Additional properties are not allowed"),
        ("PUT", "", ["CUSTOM_A"], "is not of type 'object'"),
        ("PUT", "", {}, USAGE),
        ("PUT", "", None, USAGE),
        ("PUT", "/CUSTOM_X", {"traits": ["CUSTOM_A"]}, USAGE),
        ("PUT", "", {"traits": [f"CUSTOM_T{i}" for i in range(51)]}, "(51 vs. 50)"),
    ],
)
def test_bad_traits_are_400_and_change_nothing(
    api: Api, method: str, suffix: str, body: Any, detail: str
) -> None:
    node = api.node()
    before = api.get(f"/v1/nodes/{node['uuid']}").headers["ETag"]
    resp = api.request(method, f"/v1/nodes/{node['uuid']}/traits{suffix}", json=body)
    status(resp, 400)
    assert detail in error_of(resp)["faultstring"]
    assert traits(api, node["uuid"]) == []
    assert api.get(f"/v1/nodes/{node['uuid']}").headers["ETag"] == before


def test_traits_cannot_be_patched_or_created_with_the_node(api: Api) -> None:
    node = api.node()
    resp = api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/traits", "value": ["CUSTOM_X"]}])
    status(resp, 400)
    assert error_of(resp)["faultstring"].startswith("Cannot patch /traits.")
    status(api.post("/v1/nodes", {"driver": "fake-hardware", "traits": ["CUSTOM_X"]}), 400)


def test_trait_writes_move_the_etag_and_honour_if_match(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/traits"
    etag0 = node["etag"]
    resp = status(api.put(f"{path}/CUSTOM_A", headers={"If-Match": etag0}), 204)
    etag1 = resp.headers["ETag"]
    current = api.get(f"/v1/nodes/{node['uuid']}")
    assert etag1 != etag0 and current.headers["ETag"] == etag1 == current.json()["etag"]
    # a stale etag: 412 and nothing changes, for each kind of trait write
    for resp in (
        api.put(f"{path}/CUSTOM_B", headers={"If-Match": etag0}),
        api.put(path, {"traits": ["CUSTOM_C"]}, headers={"If-Match": etag0}),
        api.delete(f"{path}/CUSTOM_A", headers={"If-Match": etag0}),
        api.delete(path, headers={"If-Match": etag0}),
    ):
        status(resp, 412)
    assert traits(api, node["uuid"]) == ["CUSTOM_A"]
    # a no-op write keeps the etag; the node's PATCH then sees the trait change's etag
    assert status(api.put(f"{path}/CUSTOM_A", headers={"If-Match": etag1}), 204).headers["ETag"] == etag1
    etag2 = status(api.delete(path, headers={"If-Match": etag1}), 204).headers["ETag"]
    assert etag2 != etag1
    assert etag2 == etag0  # the same state as at creation: the same etag (updated_at is ignored)
    status(api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/extra/a", "value": 1}],
                     headers={"If-Match": etag1}), 412)  # fmt: skip
    status(api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/extra/a", "value": 1}],
                     headers={"If-Match": etag2}), 200)  # fmt: skip


def test_a_project_cannot_see_or_touch_another_projects_node_features(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    node = alice.node()
    path = f"/v1/nodes/{node['uuid']}"
    for resp in (
        bob.get(f"{path}/traits"),
        bob.put(f"{path}/traits/CUSTOM_X"),
        bob.put(f"{path}/traits", {"traits": ["CUSTOM_X"]}),
        bob.delete(f"{path}/traits"),
        bob.get(f"{path}/vifs"),
        bob.post(f"{path}/vifs", {"id": VIF}),
        bob.delete(f"{path}/vifs/{VIF}"),
        bob.post(f"{path}/vmedia", {"device_type": "cdrom", "image_url": "http://image"}),
        bob.delete(f"{path}/vmedia"),
        bob.get(f"{path}/firmware"),
    ):
        assert resp.status_code == 404, resp.text
        assert error_of(resp)["code"] == "baremetal.node-not-found"
    status(alice.put(f"{path}/traits/CUSTOM_MINE"), 204)
    assert traits(alice, node["uuid"]) == ["CUSTOM_MINE"]
    # the lessee sees the traits but only the owner sets or removes them
    status(api.patch(path, [{"op": "add", "path": "/lessee", "value": "bob"}]), 200)
    assert traits(bob, node["uuid"]) == ["CUSTOM_MINE"]
    for resp in (bob.put(f"{path}/traits/CUSTOM_X"), bob.delete(f"{path}/traits/CUSTOM_MINE")):
        status(resp, 403)
        assert error_of(resp)["code"] == "baremetal.forbidden"
    assert traits(api, node["uuid"]) == ["CUSTOM_MINE"]


# -- VIFs -----------------------------------------------------------------------------------------


def test_vifs_with_the_noop_network_interface_are_accepted_and_list_nothing(api: Api) -> None:
    node = api.node(network_interface="noop")
    path = f"/v1/nodes/{node['uuid']}/vifs"
    status(api.post(path, {"id": VIF}, version="1.28"), 204)
    status(api.post(path, {"id": VIF}), 204)
    status(api.post(path, {"id": "a-logical-name"}), 204)
    assert status(api.get(path), 200).json() == {"vifs": []}  # Ironic's noop records nothing
    status(api.delete(f"{path}/{VIF}"), 204)
    status(api.delete(f"{path}/{VIF}"), 204)
    # the node's etag is untouched (nothing about the node changed)
    assert api.get(f"/v1/nodes/{node['uuid']}").json()["etag"] == node["etag"]


def test_vifs_are_404_below_1_28_and_for_a_missing_node(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/vifs"
    for resp in (
        api.get(path, version="1.27"),
        api.post(path, {"id": VIF}, version="1.27"),
        api.delete(f"{path}/{VIF}", version="1.27"),
    ):
        status(resp, 404)
    for resp in (
        api.get(f"/v1/nodes/{MISSING}/vifs"),
        api.post(f"/v1/nodes/{MISSING}/vifs", {"id": VIF}),
        api.delete(f"/v1/nodes/{MISSING}/vifs/{VIF}"),
    ):
        status(resp, 404)
        assert error_of(resp)["faultstring"] == f"Node {MISSING} could not be found."


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({}, "'id' is a required property"),
        ({"id": VIF, "port_uuid": VIF, "portgroup_uuid": VIF}, "Cannot specify both port_uuid and"),
        ({"id": 5}, "is not of type 'string'"),
        ([VIF], "is not of type 'object'"),
    ],
)
def test_bad_vif_attach_is_400(api: Api, body: Any, detail: str) -> None:
    node = api.node()
    resp = status(api.post(f"/v1/nodes/{node['uuid']}/vifs", body), 400)
    assert detail in error_of(resp)["faultstring"]


# -- virtual media ----------------------------------------------------------------------------------


def test_vmedia_attach_and_detach_at_1_89_and_404_below(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/vmedia"
    body = {"device_type": "cdrom", "image_url": "http://image"}
    status(api.post(path, body, version="1.88"), 404)
    status(api.delete(path, version="1.88"), 404)
    status(api.post(path, body, version="1.89"), 204)
    status(api.post(path, {**body, "image_download_source": "http"}), 204)
    status(api.delete(path), 204)
    status(api.delete(f"{path}?device_types=cdrom,disk"), 204)
    status(api.post(f"/v1/nodes/{MISSING}/vmedia", body), 404)
    status(api.delete(f"/v1/nodes/{MISSING}/vmedia"), 404)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"device_type": "cdrom", "image_url": "ftp://image"}, "Unsupported or missing URL scheme: ftp"),
        ({"device_type": "floppyx", "image_url": "http://i"}, "is not one of ['disk', 'cdrom', 'floppy']"),
        ({"device_type": "cdrom"}, "'image_url' is a required property"),
        ({"device_type": "cdrom", "image_url": "http://i", "image_download_source": "zzz"}, "is not one of"),
        ({"device_type": "cdrom", "image_url": "http://i", "x": 1}, "Additional properties are not allowed"),
    ],
)
def test_bad_vmedia_attach_is_400(api: Api, body: Any, detail: str) -> None:
    node = api.node()
    resp = status(api.post(f"/v1/nodes/{node['uuid']}/vmedia", body), 400)
    assert detail in error_of(resp)["faultstring"]


def test_vmedia_detach_of_an_unknown_device_type_is_400(api: Api) -> None:
    node = api.node()
    resp = status(api.delete(f"/v1/nodes/{node['uuid']}/vmedia?device_types=zzz"), 400)
    assert error_of(resp)["faultstring"] == "Invalid device type(s) zzz (valid are disk, cdrom, floppy)"


# -- firmware -------------------------------------------------------------------------------------


def test_firmware_interface_no_firmware_and_the_firmware_list(api: Api) -> None:
    node = api.node(firmware_interface="no-firmware")
    assert node["firmware_interface"] == "no-firmware"
    path = f"/v1/nodes/{node['uuid']}/firmware"
    assert status(api.get(path, version="1.86"), 200).json() == {"firmware": []}
    status(api.get(path, version="1.85"), 404)
    status(api.get(f"/v1/nodes/{MISSING}/firmware"), 404)
    # the field and the value are 1.86's
    status(api.post("/v1/nodes", {"driver": "fake-hardware", "firmware_interface": "no-firmware"},
                    version="1.85"), 406)  # fmt: skip
    resp = api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "replace", "path": "/firmware_interface",
                                                    "value": "fake"}])  # fmt: skip
    assert status(resp, 200).json()["firmware_interface"] == "fake"
    resp = api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "replace", "path": "/firmware_interface",
                                                    "value": "bogus"}])  # fmt: skip
    status(resp, 400)


# -- retirement -----------------------------------------------------------------------------------


def patch(api: Api, ident: str, *ops: tuple[str, str, Any], **kw: Any) -> requests.Response:
    body = [
        {"op": op, "path": path, **({} if value is None else {"value": value})} for op, path, value in ops
    ]
    return api.patch(f"/v1/nodes/{ident}", body, **kw)


def test_retired_rules(api: Api) -> None:
    node = api.node()
    uuid = node["uuid"]
    doc = status(patch(api, uuid, ("replace", "/retired", True)), 200).json()
    assert doc["retired"] is True and doc["retired_reason"] is None
    doc = status(patch(api, uuid, ("replace", "/retired_reason", "old")), 200).json()
    assert doc["retired_reason"] == "old"
    # retired=false clears the reason (Ironic's conductor does)
    doc = status(patch(api, uuid, ("replace", "/retired", False)), 200).json()
    assert doc["retired"] is False and doc["retired_reason"] is None
    assert api.get(f"/v1/nodes/{uuid}").json()["retired_reason"] is None
    # a reason without retired is 400
    resp = status(patch(api, uuid, ("replace", "/retired_reason", "why")), 400)
    assert error_of(resp)["faultstring"] == "The retired_reason field can only be set when retired is True"
    doc = status(patch(api, uuid, ("replace", "/retired", True), ("replace", "/retired_reason", "r")), 200)
    assert doc.json()["retired_reason"] == "r"
    # fields and filter at 1.61
    assert "retired" not in api.get(f"/v1/nodes/{uuid}", version="1.60").json()
    status(api.get("/v1/nodes?retired=true", version="1.60"), 406)
    status(patch(api, uuid, ("replace", "/retired", False), version="1.60"), 406)
    assert [n["uuid"] for n in api.get("/v1/nodes?retired=true").json()["nodes"]] == [uuid]
    other = api.node()
    assert [n["uuid"] for n in api.get("/v1/nodes?retired=false").json()["nodes"]] == [other["uuid"]]


def test_retired_is_409_in_available_and_a_retired_node_is_not_provided(api: Api) -> None:
    available = api.node()
    uuid = available["uuid"]
    status(api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "manage"}), 202)
    api.wait_for(f"/v1/nodes/{uuid}", lambda d: d["provision_state"] == "manageable")
    # retired in manageable is fine; providing it then is 400
    status(patch(api, uuid, ("replace", "/retired", True)), 200)
    resp = status(api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "provide"}), 400)
    assert error_of(resp) == {
        "faultstring": f"The providing operation can't be performed on node {uuid} because it is retired.",
        "code": "baremetal.node-retired",
    }
    status(patch(api, uuid, ("replace", "/retired", False)), 200)
    status(api.put(f"/v1/nodes/{uuid}/states/provision", {"target": "provide"}), 202)
    api.wait_for(f"/v1/nodes/{uuid}", lambda d: d["provision_state"] == "available")
    etag = api.get(f"/v1/nodes/{uuid}").headers["ETag"]
    resp = status(patch(api, uuid, ("replace", "/retired", True)), 409)
    assert error_of(resp) == {
        "faultstring": f"Node {uuid} can not have 'retired' set in provision state 'available', "
        "the current state is 'available'",
        "code": "baremetal.invalid-state",
    }
    assert api.get(f"/v1/nodes/{uuid}").headers["ETag"] == etag


# -- instance names -------------------------------------------------------------------------------


def test_instance_name_field_filter_and_display_name(api: Api) -> None:
    one, two = api.node(name="node1"), api.node(name="node2")
    assert one["instance_name"] is None
    status(patch(api, one["uuid"], ("add", "/instance_name", "instance-1")), 200)
    status(patch(api, two["uuid"], ("add", "/instance_name", "instance-2")), 200)
    found = api.get("/v1/nodes/detail?instance_name=instance-1").json()["nodes"]
    assert [(n["uuid"], n["instance_name"]) for n in found] == [(one["uuid"], "instance-1")]
    assert api.get("/v1/nodes?instance_name=non-existent").json()["nodes"] == []
    status(api.get("/v1/nodes?instance_name=instance-1", version="1.103"), 406)
    assert "instance_name" not in api.get(f"/v1/nodes/{one['uuid']}", version="1.103").json()
    doc = status(patch(api, one["uuid"], ("remove", "/instance_name", None)), 200).json()
    assert doc["instance_name"] is None
    # instance_info.display_name fills an empty instance_name, never overrides one
    three = api.node()
    etag = three["etag"]
    doc = status(patch(api, three["uuid"], ("add", "/instance_info", {"display_name": "dn-1"})), 200).json()
    assert doc["instance_name"] == "dn-1" and doc["etag"] != etag
    assert api.get(f"/v1/nodes/{three['uuid']}").json()["instance_name"] == "dn-1"
    status(patch(api, three["uuid"], ("replace", "/instance_name", "explicit")), 200)
    doc = status(patch(api, three["uuid"], ("replace", "/instance_info", {"display_name": "dn-2"})), 200)
    assert doc.json()["instance_name"] == "explicit"
    assert api.get(f"/v1/nodes/{three['uuid']}").json()["instance_info"] == {"display_name": "dn-2"}
