"""Hostile request bodies: lone surrogates, deep nesting, non-finite numbers, huge bodies
and fields, mandatory fields removed by PATCH.  Each is a 4xx in Ironic's envelope,
never a 500, and nothing that could not be read back or updated is ever stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from baremetal_service.handlers.common import MAX_BODY_BYTES, MAX_JSON_DEPTH, MAX_JSON_FIELD_BYTES

from .conftest import Api, error_of


@pytest.fixture
def things(api: Api) -> dict[str, str]:
    """One node, port, portgroup and chassis: the paths to PATCH."""
    node = api.node(name="n0")
    pg = api.post("/v1/portgroups", {"node_uuid": node["uuid"], "address": "52:54:00:ab:00:01"}).json()
    port = api.post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:ab:00:02"}).json()
    chassis = api.post("/v1/chassis", {"description": "c"}).json()
    return {
        "nodes": node["uuid"],
        "ports": port["uuid"],
        "portgroups": pg["uuid"],
        "chassis": chassis["uuid"],
        "node_uuid": node["uuid"],
    }


def _create_body(kind: str, things: dict[str, str], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "nodes": {"driver": "fake-hardware"},
        "ports": {"node_uuid": things["node_uuid"], "address": "52:54:00:ab:00:09"},
        "portgroups": {"node_uuid": things["node_uuid"]},
        "chassis": {},
    }[kind]
    return {**base, **fields}


def _raw(api: Api, method: str, path: str, body: str | bytes, **headers: str) -> requests.Response:
    data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return api.request(method, path, data=data, headers=headers)


def _assert_400(resp: requests.Response, code: str | None = None) -> dict[str, Any]:
    assert resp.status_code == 400, (resp.status_code, resp.text[:500])
    assert resp.headers["Content-Type"] == "application/json"
    err = error_of(resp)
    if code is not None:
        assert err["code"] == code, err
    return err


KINDS = ("nodes", "ports", "portgroups", "chassis")

# -- lone surrogates -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_lone_surrogate_is_400_on_create_and_patch(api: Api, things: dict[str, str], kind: str) -> None:
    body = json.dumps(_create_body(kind, things, extra={"k": "x"}))
    escaped = body.replace('"x"', '"\\ud800"')
    assert "\\ud800" in escaped
    _assert_400(_raw(api, "POST", f"/v1/{kind}", escaped), "request.invalid-unicode")
    in_key = body.replace('"k"', '"\\udfff"')
    _assert_400(_raw(api, "POST", f"/v1/{kind}", in_key), "request.invalid-unicode")
    # raw surrogate bytes are not UTF-8 at all
    raw = body.encode().replace(b'"x"', b'"\xed\xa0\x80"')
    _assert_400(_raw(api, "POST", f"/v1/{kind}", raw), "request.malformed-json")
    patch = '[{"op": "add", "path": "/extra/s", "value": "a\\udbffb"}]'
    _assert_400(_raw(api, "PATCH", f"/v1/{kind}/{things[kind]}", patch), "request.invalid-unicode")
    # a surrogate *pair* is a real character
    ok = _raw(api, "PATCH", f"/v1/{kind}/{things[kind]}", patch.replace("\\udbffb", "\\ud83d\\ude00"))
    assert ok.status_code == 200, ok.text
    assert ok.json()["extra"]["s"] == "a\U0001f600"


def test_lone_surrogate_in_description_of_a_node(api: Api) -> None:
    resp = _raw(api, "POST", "/v1/nodes", '{"driver":"fake-hardware","description":"\\ud800"}')
    err = _assert_400(resp, "request.invalid-unicode")
    assert "surrogate" in err["faultstring"]
    assert api.get("/v1/nodes").json()["nodes"] == []


# -- non-finite numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "code"),
    [
        ("NaN", "request.malformed-json"),  # not JSON at all
        ("Infinity", "request.malformed-json"),
        ("-Infinity", "request.malformed-json"),
        ("1e400", "request.number-out-of-range"),  # JSON, but no float holds it
        ("-1e999", "request.number-out-of-range"),
    ],
)
def test_non_finite_numbers_are_400(api: Api, number: str, code: str) -> None:
    resp = _raw(api, "POST", "/v1/nodes", f'{{"driver": "fake-hardware", "extra": {{"n": {number}}}}}')
    _assert_400(resp, code)


# -- numbers beyond 64 bits -----------------------------------------------------------------------

#: Numbers no answer can carry as they were sent: integers beyond 64 bits (below -2**63, above
#: 2**64 - 1), and floats past that range (an integral float is stored as the integer it says).
OUT_OF_RANGE = [
    "18446744073709551616",  # 2**64
    "-9223372036854775809",  # -(2**63) - 1
    "1" + "0" * 400,
    "1e20",
    "-1e19",
    "1.8446744073709552e19",  # the float 2**64
]


@pytest.mark.parametrize("number", OUT_OF_RANGE)
@pytest.mark.parametrize("kind", KINDS)
def test_number_beyond_64_bits_is_400_on_create_and_patch(
    api: Api, things: dict[str, str], kind: str, number: str
) -> None:
    body = json.dumps(_create_body(kind, things, extra={"n": 0})).replace('"n": 0', f'"n": {number}')
    err = _assert_400(_raw(api, "POST", f"/v1/{kind}", body), "request.number-out-of-range")
    assert "out of range" in err["faultstring"]
    path = f"/v1/{kind}/{things[kind]}"
    patch = f'[{{"op": "add", "path": "/extra/n", "value": {{"a": [1, {number}]}}}}]'
    _assert_400(_raw(api, "PATCH", path, patch), "request.number-out-of-range")
    got = api.get(path)
    assert got.status_code == 200, got.text[:300]
    assert got.json()["extra"] == {}
    listed = api.get(f"/v1/{kind}/detail" if kind != "chassis" else "/v1/chassis/detail")
    assert listed.status_code == 200, listed.text[:300]


@pytest.mark.parametrize("field", ["extra", "properties", "driver_info", "instance_info"])
@pytest.mark.parametrize(
    "value",
    [
        pytest.param(2**70, id="2**70"),
        pytest.param(-(2**65), id="-2**65"),
        pytest.param(1e300, id="1e300"),
        pytest.param("\ud800", id="lone-surrogate"),
        pytest.param({"k": ["a\udfffb"]}, id="nested-lone-surrogate"),
    ],
)
def test_a_node_never_stores_what_its_answer_cannot_carry(api: Api, field: str, value: Any) -> None:
    node = api.node(name="n1", **{field: {"ok": 1}})
    path = f"/v1/nodes/{node['uuid']}"
    _assert_400(api.patch(path, [{"op": "add", "path": f"/{field}/a", "value": value}]))
    _assert_400(api.patch(path, [{"op": "replace", "path": f"/{field}", "value": {"a": value}}]))
    _assert_400(api.post("/v1/nodes", {"driver": "fake-hardware", "name": "n2", field: {"a": value}}))
    got = api.get(path)
    assert got.status_code == 200, got.text[:300]
    assert got.json()[field] == node[field]
    for listing in ("/v1/nodes", "/v1/nodes/detail"):
        listed = api.get(listing)
        assert listed.status_code == 200, listed.text[:300]
        assert [n["uuid"] for n in listed.json()["nodes"]] == [node["uuid"]]


def test_numbers_at_the_64_bit_bounds_are_stored_and_read_back(api: Api) -> None:
    extra = {"max": 2**64 - 1, "min": -(2**63), "big_float": 1.8e19, "low_float": -9.2e18, "tiny": 5e-324}
    created = api.post("/v1/nodes", {"driver": "fake-hardware", "extra": extra})
    assert created.status_code == 201, created.text[:300]
    path = f"/v1/nodes/{created.json()['uuid']}"
    assert api.get(path).json()["extra"] == extra
    patched = api.patch(path, [{"op": "add", "path": "/extra/again", "value": [2**64 - 1, -(2**63)]}])
    assert patched.status_code == 200, patched.text[:300]
    assert api.get(path).json()["extra"] == {**extra, "again": [2**64 - 1, -(2**63)]}


# -- deep nesting ----------------------------------------------------------------------------------


def _nested(levels: int) -> str:
    """A JSON value *levels* deep: ``{"a": {"a": ... 1}}``."""
    return '{"a": ' * levels + "1" + "}" * levels


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, 100, 500, 1000, 5000, 100_000])
@pytest.mark.parametrize("kind", KINDS)
def test_deep_nesting_is_400_on_create(api: Api, things: dict[str, str], kind: str, levels: int) -> None:
    body = json.dumps(_create_body(kind, things, extra={"x": 0}))
    resp = _raw(api, "POST", f"/v1/{kind}", body.replace('{"x": 0}', _nested(levels)))
    _assert_400(resp, "request.too-deep")


def test_deep_arrays_and_unbalanced_brackets_are_400(api: Api) -> None:
    _assert_400(_raw(api, "POST", "/v1/nodes", "[" * 100_000 + "]" * 100_000), "request.too-deep")
    resp = _raw(api, "POST", "/v1/nodes", "[" * 100_000)
    assert resp.status_code == 400, resp.text[:300]
    resp = _raw(api, "POST", "/v1/nodes", '{"driver": "fake-hardware", "extra": {"s": "' + "[" * 5000 + '"}}')
    assert resp.status_code == 201, resp.text[:300]  # brackets inside strings are not nesting


def test_deepest_accepted_node_can_still_be_patched(api: Api) -> None:
    # the resource is level 1, extra level 2: the deepest extra the limit allows
    body = '{"driver": "fake-hardware", "extra": ' + _nested(MAX_JSON_DEPTH - 1) + "}"
    resp = _raw(api, "POST", "/v1/nodes", body)
    assert resp.status_code == 201, resp.text[:300]
    uuid = resp.json()["uuid"]
    ok = api.patch(f"/v1/nodes/{uuid}", [{"op": "replace", "path": "/description", "value": "d"}])
    assert ok.status_code == 200, ok.text[:300]
    # one level more, through a patch path: refused, and nothing changed
    deeper = "/extra" + "/a" * (MAX_JSON_DEPTH - 1)
    resp = api.patch(f"/v1/nodes/{uuid}", [{"op": "replace", "path": deeper, "value": {"b": 1}}])
    _assert_400(resp, "request.too-deep")
    assert api.get(f"/v1/nodes/{uuid}").json()["description"] == "d"


@pytest.mark.parametrize("kind", KINDS)
def test_patch_cannot_grow_a_document_past_the_depth_limit(
    api: Api, things: dict[str, str], kind: str
) -> None:
    path = f"/v1/{kind}/{things[kind]}"
    half = MAX_JSON_DEPTH // 2
    value = json.loads(_nested(half))
    assert api.patch(path, [{"op": "add", "path": "/extra/a", "value": value}]).status_code == 200
    grow = "/extra/a" + "/a" * (half - 1)
    resp = api.patch(path, [{"op": "replace", "path": grow, "value": value}])
    _assert_400(resp, "request.too-deep")
    for levels in (600, 1000, 3000):
        patch = '[{"op": "add", "path": "/extra/b", "value": ' + _nested(levels) + "}]"
        _assert_400(_raw(api, "PATCH", path, patch), "request.too-deep")
    assert api.patch(path, [{"op": "add", "path": "/extra/c", "value": 1}]).status_code == 200


def test_deep_body_with_a_client_token_is_not_a_server_error(api: Api) -> None:
    resp = _raw(
        api, "POST", "/v1/nodes", '{"driver": "fake-hardware", "extra": ' + _nested(3000) + "}",
        **{"X-Client-Token": "deep-1"},
    )  # fmt: skip
    assert resp.status_code == 400, resp.text[:300]


# -- body size -------------------------------------------------------------------------------------


def test_body_over_the_limit_is_413_from_content_length(api: Api) -> None:
    body = json.dumps({"driver": "fake-hardware", "extra": {"blob": "x" * MAX_BODY_BYTES}})
    resp = _raw(api, "POST", "/v1/nodes", body)
    assert resp.status_code == 413, resp.text[:300]
    assert resp.headers["Content-Type"] == "application/json"
    err = error_of(resp)
    assert err["code"] == "request.body-too-large"
    assert str(MAX_BODY_BYTES) in err["faultstring"]
    assert api.get("/v1/nodes").json()["nodes"] == []


def test_chunked_body_over_the_limit_is_413(api: Api) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"driver": "fake-hardware", "extra": {"blob": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"x" * 65536
        yield b'"}}'

    resp = api.session.post(
        f"{api.url}/v1/nodes",
        data=chunks(),
        headers={"Content-Type": "application/json", "X-OpenStack-Ironic-API-Version": "latest"},
        timeout=10,
    )
    assert resp.status_code == 413, resp.text[:300]
    assert error_of(resp)["code"] == "request.body-too-large"
    assert api.get("/v1/nodes").json()["nodes"] == []


def test_body_just_under_the_limit_is_read(api: Api) -> None:
    # a big body is fine as long as each free-form field stays under its own limit
    fields = {k: {"blob": "x" * (MAX_JSON_FIELD_BYTES - 100)} for k in ("extra", "properties")}
    resp = api.post("/v1/nodes", {"driver": "fake-hardware", **fields})
    assert resp.status_code == 201, resp.text[:300]


@pytest.mark.parametrize(
    ("kind", "field"),
    [
        ("nodes", "extra"),
        ("nodes", "properties"),
        ("nodes", "driver_info"),
        ("nodes", "instance_info"),
        ("ports", "extra"),
        ("ports", "local_link_connection"),
        ("portgroups", "extra"),
        ("portgroups", "properties"),
        ("chassis", "extra"),
    ],
)
def test_free_form_field_over_its_limit_is_400(
    api: Api, things: dict[str, str], kind: str, field: str
) -> None:
    big = {"blob": "é" * (MAX_JSON_FIELD_BYTES // 2)}  # two UTF-8 bytes each: over the byte limit
    err = _assert_400(api.post(f"/v1/{kind}", _create_body(kind, things, **{field: big})))
    assert err["code"] == "request.field-too-large"
    assert field in err["faultstring"]
    # growing it by PATCH, one piece at a time, stops at the limit too
    path = f"/v1/{kind}/{things[kind]}"
    piece = "y" * (MAX_JSON_FIELD_BYTES // 4)
    statuses = [
        api.patch(path, [{"op": "add", "path": f"/{field}/p{i}", "value": piece}]).status_code
        for i in range(5)
    ]
    assert statuses[:3] == [200, 200, 200] and statuses[4] == 400, statuses
    stored = api.get(path).json()[field]
    assert len(json.dumps(stored)) <= MAX_JSON_FIELD_BYTES


# -- error bodies quote a short prefix ------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"driver": "fake-hardware", "name": "n" * 240_000}, id="long-name"),
        pytest.param({"driver": "fake-hardware", "name": "é" * 1000}, id="bad-name"),
        pytest.param({"driver": "d" * 100_000}, id="long-driver"),
        pytest.param({"driver": "fake-hardware", "extra": "e" * 100_000}, id="wrong-type"),
        pytest.param({"driver": "fake-hardware", "k" * 100_000: 1}, id="long-unknown-key"),
        pytest.param(["x" * 100_000], id="list-body"),
    ],
)
def test_error_bodies_quote_a_short_prefix(api: Api, body: Any) -> None:
    resp = api.post("/v1/nodes", body)
    _assert_400(resp)
    assert len(resp.content) < 4096, len(resp.content)


def test_not_found_quotes_a_short_prefix(api: Api) -> None:
    resp = api.get("/v1/nodes/" + "n" * 5000)
    assert resp.status_code == 404
    assert len(resp.content) < 2048, len(resp.content)


# -- mandatory fields ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "field"), [("ports", "node_uuid"), ("ports", "address"), ("portgroups", "node_uuid")]
)
def test_removing_a_mandatory_field_says_so(api: Api, things: dict[str, str], kind: str, field: str) -> None:
    path = f"/v1/{kind}/{things[kind]}"
    before = api.get(path).json()
    for op in ({"op": "remove", "path": f"/{field}"}, {"op": "replace", "path": f"/{field}", "value": None}):
        err = _assert_400(api.patch(path, [op]))
        assert (
            f"'{field}' is a required property" in err["faultstring"]
            or "is not of type" in err["faultstring"]
        )
        assert "constraint" not in err["faultstring"] and "ports." not in err["faultstring"]
    assert api.get(path).json()[field] == before[field]


def test_removing_the_driver_of_a_node_says_so(api: Api, things: dict[str, str]) -> None:
    err = _assert_400(api.patch(f"/v1/nodes/{things['nodes']}", [{"op": "remove", "path": "/driver"}]))
    assert "driver" in err["faultstring"]


def test_database_not_null_error_is_worded_in_api_terms(service_server: Any, things: dict[str, str]) -> None:
    # below the API's schema check: the service itself asked to null a port's node
    from baremetal_service.exceptions import InvalidParameterValue

    with pytest.raises(InvalidParameterValue) as caught:
        service_server.app.service.crud["port"].update(things["ports"], {"node_uuid": None})
    text = caught.value.detail
    assert "'node_uuid'" in text and "mandatory" in text
    assert "constraint failed" not in text and "node_id" not in text and "null value" not in text
