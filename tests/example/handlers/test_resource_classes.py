"""Resource classes (1.117): idempotent PUT per the placement spec; POST kept."""

from __future__ import annotations

import pytest

from .conftest import Api, error_of


def test_put_creates_then_confirms(api: Api) -> None:
    first = api.request("PUT", "/v1/resource_classes/CUSTOM_GOLD")
    assert first.status_code == 201
    assert first.content == b""
    assert first.headers["Location"] == f"{api.url}/v1/resource_classes/CUSTOM_GOLD"
    again = api.request("PUT", "/v1/resource_classes/CUSTOM_GOLD")
    assert again.status_code == 204 and again.content == b""
    shown = api.get("/v1/resource_classes/CUSTOM_GOLD").json()
    assert shown["name"] == "CUSTOM_GOLD"
    names = [rc["name"] for rc in api.get("/v1/resource_classes").json()["resource_classes"]]
    assert names.count("CUSTOM_GOLD") == 1


@pytest.mark.parametrize("body", [b"{}", b'{"name": "CUSTOM_NEW"}', b"not json"])
def test_put_with_a_body_is_400(api: Api, body: bytes) -> None:
    resp = api.request("PUT", "/v1/resource_classes/CUSTOM_BODY", data=body)
    assert resp.status_code == 400
    assert api.get("/v1/resource_classes/CUSTOM_BODY").status_code == 404


@pytest.mark.parametrize("name", ["GOLD", "CUSTOM_", "CUSTOM_lower", "CUSTOM_A-B", "CUSTOM_" + "A" * 300])
def test_invalid_names_are_400(api: Api, name: str) -> None:
    resp = api.request("PUT", f"/v1/resource_classes/{name}")
    assert resp.status_code == 400
    assert error_of(resp)["code"] == "baremetal.invalid-resource-class"


def test_post_kept_with_409_when_it_exists(api: Api) -> None:
    created = api.post("/v1/resource_classes", {"name": "CUSTOM_SILVER"})
    assert created.status_code == 201
    assert created.json()["name"] == "CUSTOM_SILVER"
    assert api.post("/v1/resource_classes", {"name": "CUSTOM_SILVER"}).status_code == 409
    assert api.post("/v1/resource_classes", {"name": "silver"}).status_code == 400
    assert api.post("/v1/resource_classes", {"name": "CUSTOM_X", "extra": 1}).status_code == 400


def test_delete_and_version_gate(api: Api) -> None:
    api.request("PUT", "/v1/resource_classes/CUSTOM_TMP")
    assert api.delete("/v1/resource_classes/CUSTOM_TMP").status_code == 204
    assert api.get("/v1/resource_classes/CUSTOM_TMP").status_code == 404
    assert api.request("PUT", "/v1/resource_classes/CUSTOM_OLD", version="1.116").status_code == 404
    assert api.get("/v1/resource_classes", version="1.115").status_code == 404


def test_if_match_on_resource_classes(api: Api) -> None:
    # Resource classes carry no etag: a tag never matches (412, nothing written); "*" means "exists".
    path = "/v1/resource_classes/CUSTOM_COND"
    assert api.request("PUT", path, headers={"If-Match": '"abc"'}).status_code == 412
    assert api.request("PUT", path, headers={"If-Match": "*"}).status_code == 412
    assert api.get(path).status_code == 404
    assert api.request("PUT", path).status_code == 201
    assert api.request("PUT", path, headers={"If-Match": "*"}).status_code == 204
    assert api.delete(path, headers={"If-Match": '"abc"'}).status_code == 412
    assert api.delete(path, headers={"If-Match": "*"}).status_code == 204
    assert api.get(path).status_code == 404
