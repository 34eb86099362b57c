"""Bad input is a clear 4xx in Ironic's envelope, never a 500."""

from __future__ import annotations

import json

import pytest

from .conftest import Api, error_of


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b'{"driver": ', id="truncated"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(b"[1, 2", id="truncated-list"),
        pytest.param(b"NaN-ish", id="garbage"),
    ],
)
def test_malformed_json_is_400_not_500(api: Api, body: bytes) -> None:
    resp = api.request("POST", "/v1/nodes", data=body)
    assert resp.status_code == 400
    assert resp.headers["Content-Type"] == "application/json"
    assert error_of(resp)["code"] == "request.malformed-json"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        pytest.param(
            {"driver": "fake-hardware", "bogus_field": 1}, "'bogus_field' was unexpected", id="unknown"
        ),
        pytest.param({}, "'driver' is a required property", id="missing-driver"),
        pytest.param({"driver": 5}, "is not of type 'string'", id="wrong-type"),
        pytest.param({"driver": "fake-hardware", "extra": []}, "is not of type 'object'", id="extra-list"),
        pytest.param(["driver"], "is not of type 'object'", id="list-body"),
    ],
)
def test_schema_errors_are_400(api: Api, body: object, fragment: str) -> None:
    resp = api.post("/v1/nodes", body)
    assert resp.status_code == 400
    err = error_of(resp)
    assert err["code"] == "request.schema"
    assert err["faultstring"].startswith("Schema error for node: ")
    assert fragment in err["faultstring"]


def test_unknown_driver_is_400(api: Api) -> None:
    resp = api.post("/v1/nodes", {"driver": "no-such-driver"})
    assert resp.status_code == 400
    assert "No valid host was found" in error_of(resp)["faultstring"]


def test_unknown_path_is_404_json(api: Api) -> None:
    resp = api.get("/v1/nosuchcollection")
    assert resp.status_code == 404
    assert json.loads(resp.json()["error_message"])["faultcode"] == "Client"


def test_ironicclient_can_decode_every_error(api: Api) -> None:
    # python-ironicclient reads error_message, json-decodes it and shows faultstring.
    resp = api.get("/v1/nodes/no-such-node")
    inner = json.loads(resp.json()["error_message"])
    assert inner["faultstring"] == "Node no-such-node could not be found."
    assert resp.headers["X-OpenStack-Ironic-API-Version"] == "1.117"


def test_non_json_accept_is_406(api: Api) -> None:
    resp = api.get("/v1/nodes", headers={"Accept": "application/xml"})
    assert resp.status_code == 406
    assert error_of(resp)["code"] == "request.not-acceptable"
    assert api.get("/v1/nodes", headers={"Accept": "application/json, */*;q=0.5"}).status_code == 200


def test_wrong_method_is_405_with_allow(api: Api) -> None:
    # PUT: Ironic answers DELETE/PATCH on the collection with 400 (a missing node_ident)
    resp = api.put("/v1/nodes", {})
    assert resp.status_code == 405
    assert "GET" in resp.headers["Allow"] and "POST" in resp.headers["Allow"]
