"""Discovery documents and microversion headers, as openstacksdk and the CLI read them."""

from __future__ import annotations

from .conftest import Api


def test_root_document_names_the_supported_range(api: Api) -> None:
    resp = api.get("/", version=None)
    assert resp.status_code == 200
    doc = resp.json()
    assert doc["name"] == "OpenStack Ironic API"
    assert doc["default_version"]["min_version"] == "1.1"
    assert doc["default_version"]["version"] == "1.117"
    assert doc["default_version"]["links"] == [{"href": f"{api.url}/v1/", "rel": "self"}]
    assert doc["versions"] == [doc["default_version"]]
    assert resp.headers["X-OpenStack-Ironic-API-Minimum-Version"] == "1.1"
    assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.117"
    assert resp.headers["X-OpenStack-Ironic-API-Version"] == "1.1"
    assert resp.headers["x-openstack-request-id"].startswith("req-")


def test_v1_document_lists_resources_by_version(api: Api) -> None:
    old = api.get("/v1", version=None).json()
    assert {"chassis", "nodes", "ports", "drivers"} <= set(old)
    assert "portgroups" not in old and "resource_classes" not in old
    assert old["nodes"] == [
        {"href": f"{api.url}/v1/nodes/", "rel": "self"},
        {"href": f"{api.url}/nodes/", "rel": "bookmark"},
    ]
    assert old["media_types"]["type"] == "application/vnd.openstack.ironic.v1+json"
    new = api.get("/v1/", version="latest").json()
    assert "portgroups" in new and "resource_classes" in new
    assert new["version"]["version"] == "1.117"


def test_no_header_serves_the_minimum_and_latest_the_maximum(api: Api) -> None:
    assert api.get("/v1/nodes", version=None).headers["X-OpenStack-Ironic-API-Version"] == "1.1"
    assert api.get("/v1/nodes", version="LATEST").headers["X-OpenStack-Ironic-API-Version"] == "1.117"
    std = api.get("/v1/nodes", version=None, headers={"OpenStack-API-Version": "baremetal 1.50"})
    assert std.headers["X-OpenStack-Ironic-API-Version"] == "1.50"


def test_unsupported_version_is_406_with_the_range(api: Api) -> None:
    resp = api.get("/v1/nodes", version="99.99")
    assert resp.status_code == 406
    assert resp.headers["X-OpenStack-Ironic-API-Minimum-Version"] == "1.1"
    assert resp.headers["X-OpenStack-Ironic-API-Maximum-Version"] == "1.117"
    assert "X-OpenStack-Ironic-API-Version" not in resp.headers
    assert "[1.1, 1.117]" in resp.json()["error_message"]


def test_malformed_version_is_406(api: Api) -> None:
    resp = api.get("/v1/nodes", version="spam")
    assert resp.status_code == 406
    assert resp.json()["errors"][0]["code"] == "microversion.malformed"
