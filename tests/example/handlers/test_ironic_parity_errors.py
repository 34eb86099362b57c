"""Error bodies and statuses where real Ironic 39.0 answers differently from a plain router.

Facts from Ironic 39.0's wire format (its error body format, DELETE on the
collection), checked against Ironic 39.0 itself, side by side (ironic/api/controllers/v1/utils.py
``get_request_return_fields``; pecan's RestController for a collection without an id).
"""

from __future__ import annotations

import json

from .conftest import Api


def _inner(resp: object) -> dict[str, object]:
    return json.loads(resp.json()["error_message"])  # type: ignore[attr-defined,no-any-return]


def test_unknown_path_inner_error_has_code_and_title(api: Api) -> None:
    # Ironic: {"error_message": "{\"code\": 404, \"title\": \"Not Found\", \"description\": \"\"}"}
    resp = api.get("/v1/nosuchcollection")
    assert resp.status_code == 404
    inner = _inner(resp)
    assert inner["code"] == 404
    assert inner["title"] == "Not Found"
    assert "description" in inner
    # python-ironicclient reads faultstring or description: both still there
    assert inner["faultstring"]


def test_out_of_range_microversion_inner_error_has_code_and_title(api: Api) -> None:
    # Ironic: {"code": 406, "title": "Not Acceptable", "description": "Mutually exclusive versions
    # requested. Version 99.99 requested but not supported by this service. ..."}
    resp = api.get("/v1/nodes", version="99.99")
    assert resp.status_code == 406
    inner = _inner(resp)
    assert inner["code"] == 406
    assert inner["title"] == "Not Acceptable"
    assert str(inner["description"]).startswith(
        "Mutually exclusive versions requested. Version 99.99 requested but not supported"
    )


def test_unparsable_microversion_inner_error_has_code_and_title(api: Api) -> None:
    resp = api.get("/v1/nodes", version="spam")
    assert resp.status_code == 406
    inner = _inner(resp)
    assert (inner["code"], inner["title"]) == (406, "Not Acceptable")
    # Ironic's text, then the accepted range (ours adds it)
    assert str(inner["description"]).startswith("Invalid value for X-OpenStack-Ironic-API-Version header")


def test_detail_query_below_1_43_is_400_like_ironic(api: Api) -> None:
    # Ironic 39 at 1.42: 400 "Invalid query parameter ?detail=True received."
    resp = api.get("/v1/nodes?detail=true", version="1.42")
    assert resp.status_code == 400, resp.text
    assert _inner(resp)["faultstring"] == "Invalid query parameter ?detail=True received."
    resp = api.get("/v1/nodes?detail=false", version="1.42")
    assert resp.status_code == 400
    assert _inner(resp)["faultstring"] == "Invalid query parameter ?detail=False received."
    assert api.get("/v1/nodes?detail=true", version="1.43").status_code == 200


def test_delete_and_patch_on_the_node_collection_are_400_like_ironic(api: Api) -> None:
    # Ironic 39: 400 "Missing mandatory parameter: node_ident" (no 405)
    for resp in (api.delete("/v1/nodes"), api.patch("/v1/nodes", [])):
        assert resp.status_code == 400, resp.text
        inner = _inner(resp)
        assert inner["faultcode"] == "Client"
        assert inner["faultstring"] == "Missing mandatory parameter: node_ident"
        assert resp.json()["errors"][0]["code"] == "request.missing-parameter"
    # PUT on the collection stays 405, as in Ironic
    assert api.put("/v1/nodes", {}).status_code == 405
