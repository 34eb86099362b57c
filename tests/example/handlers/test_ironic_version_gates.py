"""The statuses below a resource's version, over HTTP, as Ironic 39.0 answers them.

A route a version does not have yet is a 404, whatever the method; on allocations (1.52),
deploy templates (1.55) and runbooks (1.92) a write below the version is a 405 "The API
version does not allow ..." while a read is a 404.  The heartbeat route exists from 1.22.
"""

from __future__ import annotations

import pytest

from .conftest import Api, error_of

MISSING = "5c9dcd04-2073-49bc-9618-99ae634d8971"


@pytest.mark.parametrize(
    ("collection", "version", "words"),
    [
        ("allocations", "1.51", "allocations"),
        ("allocations", "1.42", "allocations"),
        ("deploy_templates", "1.54", "deploy templates"),
        ("deploy_templates", "1.45", "deploy templates"),
        ("runbooks", "1.91", "runbooks"),
        ("runbooks", "1.82", "runbooks"),
    ],
)
def test_writes_below_the_version_are_not_allowed_reads_not_found(
    api: Api, collection: str, version: str, words: str
) -> None:
    base = f"/v1/{collection}"
    for resp in (
        api.post(base, {"name": "CUSTOM_X"}, version=version),
        api.patch(f"{base}/{MISSING}", [], version=version),
        api.delete(f"{base}/{MISSING}", version=version),
    ):
        assert resp.status_code == 405, resp.text
        assert error_of(resp)["faultstring"] == f"The API version does not allow {words}"
    for resp in (api.get(base, version=version), api.get(f"{base}/{MISSING}", version=version)):
        assert resp.status_code == 404, resp.text
    assert api.get(base).status_code == 200


def test_a_nodes_allocation_below_1_52_is_not_found_whatever_the_method(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/allocation"
    assert api.get(path, version="1.51").status_code == 404
    assert api.delete(path, version="1.51").status_code == 404


def test_vmedia_below_1_89_is_not_found_whatever_the_method(api: Api) -> None:
    node = api.node()
    path = f"/v1/nodes/{node['uuid']}/vmedia"
    body = {"device_type": "CDROM", "image_url": "http://image"}
    for version in ("1.88", "1.79"):
        assert api.put(path, body, version=version).status_code == 404
        assert api.post(path, body, version=version).status_code == 404
        assert api.delete(path, version=version).status_code == 404
    assert api.put(path, body, version="1.89").status_code == 405


def test_portgroup_sub_resources_from_1_24_with_their_detail(api: Api) -> None:
    node = api.node()
    portgroup = api.post("/v1/portgroups", {"node_uuid": node["uuid"], "name": "pg1"}).json()
    for path in (f"/v1/nodes/{node['uuid']}/portgroups", f"/v1/portgroups/{portgroup['uuid']}/ports"):
        for suffix in ("", "/detail"):
            assert api.get(path + suffix, version="1.23").status_code == 404
            assert api.get(path + suffix, version="1.24").status_code == 200
    detail = api.get(f"/v1/nodes/{node['uuid']}/portgroups/detail", version="1.24").json()["portgroups"]
    assert [p["uuid"] for p in detail] == [portgroup["uuid"]] and "mode" not in detail[0]
    assert "extra" in detail[0]  # the detail shows every field of the version
    summary = api.get(f"/v1/nodes/{node['uuid']}/portgroups", version="1.24").json()["portgroups"]
    assert "extra" not in summary[0]


def test_heartbeat_exists_from_1_22_and_refuses_what_no_agent_holds(api: Api) -> None:
    node = api.node()
    body = {"callback_url": "http://192.0.2.1:9999", "agent_version": "6.0", "agent_token": "token"}
    for version in ("1.21", "1.12"):
        assert (
            api.post("/v1/heartbeat", {"node_ident": node["uuid"], **body}, version=version).status_code
            == 404
        )
        assert api.post(f"/v1/heartbeat/{node['uuid']}", body, version=version).status_code == 404
    too_new = api.post("/v1/heartbeat", {"node_ident": node["uuid"], **body}, version="1.22")
    assert too_new.status_code == 400
    assert error_of(too_new)["faultstring"] == 'Field "agent_version" not recognised'
    no_version = api.post(
        f"/v1/heartbeat/{node['uuid']}", {"callback_url": "http://192.0.2.1"}, version="1.22"
    )
    assert error_of(no_version)["faultstring"].startswith("Agent did not transmit a version")
    no_token = api.post(f"/v1/heartbeat/{node['uuid']}", {**body, "agent_token": ""})
    assert error_of(no_token)["faultstring"] == "Agent token is required for heartbeat processing."
    wrong = api.post(f"/v1/heartbeat/{node['uuid']}", body)
    assert wrong.status_code == 400
    assert error_of(wrong)["faultstring"] == "Invalid or missing agent token received."
    assert api.post(f"/v1/heartbeat/{MISSING}", body).status_code == 404
    unexpected = api.post(f"/v1/heartbeat/{node['uuid']}", {**body, "bogus": 1})
    assert error_of(unexpected)["faultstring"] == "Unexpected arguments: bogus"
