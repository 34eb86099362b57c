"""Values that must never be stored, walked over every route that takes them.

* Every string field with a schema ``pattern``, in every request body the OpenAPI
  document publishes, with a valid value plus a trailing newline (Python's ``$``
  matches before one; ECMA-262's, which JSON Schema means, does not): 400 with a JSON
  error body, nothing stored -- on create and on PATCH.
* Every create/update route with values that cannot go into a header or a URL
  (``\\n``, ``\\r``, control characters, non-ASCII) in its path and in its body's pattern
  fields: a 4xx before any write, never a 500 after one.
* A hostile Host header, names that cannot be reached by URL (``.``, ``..``, ``detail``),
  a body that says it is not JSON.

Part of the hostile-input suite CI runs (with tests/example/handlers/test_hostile_input.py).
"""

from __future__ import annotations

import copy
import functools
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
import requests
from hypothesis import find
from hypothesis import strategies as st

from baremetal_service import openapi, versions
from baremetal_service.handlers.json_schema import ecma_regex, ecma_source

from .conftest import Api, error_of

LATEST = openapi.document(versions.MAX_VERSION)

#: What cannot appear in a header (or must be percent-encoded in a URL).
HOSTILE_SUFFIXES = ["\n", "\r", "\r\nX-Injected: 1", "\x00", "\x01", "\x7f", "\u00e9", "\u2028", " "]


# -- walking the published schemas ------------------------------------------------------------------


def _resolve(schema: Any) -> Any:
    if isinstance(schema, dict) and "$ref" in schema:
        return LATEST["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _pattern_fields(schema: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    """``(path, pattern)`` of every string with a pattern in *schema*; ``0`` in a path is a list item."""
    schema = _resolve(schema)
    if not isinstance(schema, dict):
        return
    if "pattern" in schema:
        yield path, schema["pattern"]
    for name, sub in schema.get("properties", {}).items():
        yield from _pattern_fields(sub, (*path, name))
    if "items" in schema:
        yield from _pattern_fields(schema["items"], (*path, 0))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key, []):
            yield from _pattern_fields(sub, path)


def _bodies() -> list[tuple[str, str, tuple[Any, ...], str]]:
    """(method, path, field path, pattern) of every request body field with a pattern
    (PATCH bodies aside: a patch's fields are checked on the patched resource, below)."""
    found = []
    for path, item in LATEST["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or method == "patch" or "requestBody" not in op:
                continue
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            for field, pattern in _pattern_fields(schema):
                found.append((method.upper(), path, field, pattern))
    return found


BODY_FIELDS = _bodies()


#: Values most patterns take; a pattern none fits gets Hypothesis's simplest example.
_LIKELY = ("0b5e7c9c-0c1e-4bd8-9d53-3a4c0e1d8f20", "CUSTOM_X", "52:54:00:00:00:01", "x1", "1")


@functools.lru_cache
def example(pattern: str) -> str:
    """A string *pattern* accepts (with ECMA-262's ``$``)."""
    regex = ecma_regex(pattern)
    for value in _LIKELY:
        if regex.search(value):
            return value
    return find(st.from_regex(ecma_source(pattern), fullmatch=True), lambda _s: True)


# -- the world each request needs -----------------------------------------------------------------


@pytest.fixture
def world(api: Api) -> dict[str, str]:
    node = api.node(name="n0")
    runbook = api.post("/v1/runbooks", {**_base("POST", "/v1/runbooks", {}), "name": "CUSTOM_WORLD"})
    assert runbook.status_code == 201, runbook.text
    return {"node": node["uuid"], "runbook": runbook.json()["uuid"]}


def _base(method: str, path: str, world: dict[str, str]) -> dict[str, Any]:
    """A body *path* accepts as it is (the test checks it does)."""
    node = world.get("node", "")
    step = {"interface": "deploy", "step": "s", "args": {}}
    return {
        ("POST", "/v1/allocations"): {"resource_class": "rc", "name": "a0", "traits": ["CUSTOM_A"]},
        ("POST", "/v1/chassis"): {"uuid": "0b5e7c9c-0c1e-4bd8-9d53-3a4c0e1d8f20"},
        ("POST", "/v1/deploy_templates"): {"name": "CUSTOM_DT", "steps": [{**step, "priority": "10"}]},
        ("POST", "/v1/inspection_rules"): {
            "uuid": "6f1a3e5c-6b55-4b1e-9b44-2f0e3a0c9d11", "actions": [{"op": "log", "args": {"msg": "x"}}],
        },  # fmt: skip
        ("POST", "/v1/nodes"): {
            "driver": "fake-hardware", "uuid": "1d4c7a1e-3c34-4b8e-8f4e-0d6a2a1b9c01", "name": "n1",
            "instance_uuid": "2e5d8b2f-4d45-4c9f-9f5f-1e7b3b2c0d12", "conductor_group": "g1",
        },  # fmt: skip
        ("POST", "/v1/nodes/{node_ident}/vifs"): {"id": "vif1"},
        ("POST", "/v1/portgroups"): {"node_uuid": node, "name": "pg1", "address": "52:54:00:00:00:01"},
        ("POST", "/v1/ports"): {"node_uuid": node, "address": "52:54:00:00:00:02", "name": "p1"},
        ("POST", "/v1/resource_classes"): {"name": "CUSTOM_RC"},
        ("POST", "/v1/runbooks"): {"name": "CUSTOM_RB", "steps": [{**step, "order": "1"}]},
        ("PUT", "/v1/runbooks/{runbook_ident}/traits"): {"traits": ["CUSTOM_T"]},
        ("POST", "/v1/volume/connectors"): {"node_uuid": node, "type": "iqn", "connector_id": "iqn.1"},
        ("POST", "/v1/volume/targets"): {
            "node_uuid": node, "volume_type": "iscsi", "volume_id": "v1", "boot_index": 0,
        },  # fmt: skip
    }[(method, path)]


def _fill(path: str, world: dict[str, str]) -> str:
    return path.replace("{node_ident}", world["node"]).replace("{runbook_ident}", world["runbook"])


def _get_in(doc: Any, field: tuple[Any, ...]) -> Any:
    for key in field:
        doc = doc[key]
    return doc


def _set_in(doc: Any, field: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    target = doc
    for key in field[:-1]:
        target = target[key]
    target[field[-1]] = value
    return doc


def _stored(api: Api, path: str) -> Any:
    """What a create on *path* would have added to: the collection it lists."""
    resp = api.get(path)
    assert resp.status_code == 200, (path, resp.text)
    doc = resp.json()
    return sorted(json.dumps(item, sort_keys=True) for key, items in doc.items() if key != "next"
                  for item in (items if isinstance(items, list) else [items]))  # fmt: skip


def _refused(resp: requests.Response, what: str) -> dict[str, Any]:
    assert 400 <= resp.status_code < 500, (what, resp.status_code, resp.text[:300])
    assert resp.headers["Content-Type"].startswith("application/json"), (what, resp.text[:300])
    return error_of(resp)


def _valid_value(method: str, path: str, field: tuple[Any, ...], pattern: str, world: dict[str, str]) -> str:
    try:
        value = _get_in(_base(method, path, world), field)
    except (KeyError, IndexError):
        value = example(pattern)
    assert isinstance(value, str)
    return value


# -- trailing newlines: every pattern field, over HTTP --------------------------------------------


def test_the_walk_found_the_fields_of_the_issue() -> None:
    fields = {(m, p, ".".join(map(str, f))) for m, p, f, _ in BODY_FIELDS}
    assert {
        ("POST", "/v1/nodes", "name"), ("POST", "/v1/nodes", "conductor_group"),
        ("POST", "/v1/ports", "address"), ("POST", "/v1/resource_classes", "name"),
        ("POST", "/v1/deploy_templates", "name"), ("POST", "/v1/allocations", "traits.0"),
    } <= fields  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "field", "pattern"),
    [pytest.param(*e, id=f"{e[0]} {e[1]} {'.'.join(map(str, e[2]))}") for e in BODY_FIELDS],
)
def test_a_trailing_newline_in_a_pattern_field_is_refused(
    api: Api, world: dict[str, str], method: str, path: str, field: tuple[Any, ...], pattern: str
) -> None:
    url = _fill(path, world)  # the collection a create adds to, listed by a GET on the same path
    before = _stored(api, url)
    base = _base(method, path, world)
    value = _valid_value(method, path, field, pattern, world)
    for suffix in HOSTILE_SUFFIXES:
        resp = api.request(method, url, json=_set_in(base, field, value + suffix))
        _refused(resp, f"{field} = {value + suffix!r}")
        assert resp.status_code == 400, resp.text
        assert _stored(api, url) == before, f"{value + suffix!r} was stored"
    # the body as it is (the values above come from it, or from the pattern): accepted
    resp = api.request(method, url, json=base)
    assert resp.status_code in (200, 201, 204), resp.text


def _patchable(collection: str) -> set[str]:
    """The fields a PATCH of one item of *collection* may change (its published path pattern)."""
    for path, item in LATEST["paths"].items():
        one_item = path.startswith(collection + "/{") and path.count("/") == collection.count("/") + 1
        if one_item and "patch" in item:
            schema = _resolve(item["patch"]["requestBody"]["content"]["application/json"]["schema"])
            pattern = _resolve(schema["items"])["properties"]["path"]["pattern"]  # ^/(a|b|c)(/...)*$
            return set(pattern.split("(", 1)[1].split(")", 1)[0].split("|"))
    return set()


#: PATCH: the resource created from the base body, then each of its pattern fields the
#: patch may change, replaced by its value plus a newline.
PATCHABLE = [
    (path, field, pattern)
    for method, path, field, pattern in BODY_FIELDS
    if method == "POST" and len(field) == 1 and "{" not in path and field[0] in _patchable(path)
]


def test_patch_fields_were_found() -> None:
    assert {(p, f[0]) for p, f, _ in PATCHABLE} >= {("/v1/nodes", "name"), ("/v1/ports", "address")}


@pytest.mark.parametrize(
    ("path", "field", "pattern"), [pytest.param(*e, id=f"PATCH {e[0]} {e[1][0]}") for e in PATCHABLE]
)
def test_a_trailing_newline_is_refused_by_patch(
    api: Api, world: dict[str, str], path: str, field: tuple[Any, ...], pattern: str
) -> None:
    created = api.post(path, _base("POST", path, world))
    assert created.status_code == 201, created.text
    item = created.headers["Location"]
    before = api.get(item[len(api.url):]).json()
    value = _valid_value("POST", path, field, pattern, world)
    for suffix in HOSTILE_SUFFIXES:
        patch = [{"op": "replace", "path": f"/{field[0]}", "value": value + suffix}]
        resp = api.patch(item[len(api.url):], patch)
        assert _refused(resp, repr(value + suffix))["code"] == "request.schema"
        after = api.get(item[len(api.url):]).json()
        assert after[field[0]] == before[field[0]]


def test_a_duplicate_mac_with_a_newline_is_not_a_new_port(api: Api, world: dict[str, str]) -> None:
    mac = "52:54:00:12:34:56"
    assert api.post("/v1/ports", {"node_uuid": world["node"], "address": mac}).status_code == 201
    resp = api.post("/v1/ports", {"node_uuid": world["node"], "address": mac + "\n"})
    assert resp.status_code == 400, resp.text
    assert [p["address"] for p in api.get("/v1/ports").json()["ports"]] == [mac]
    # the same MAC as it is: Ironic's 409
    assert api.post("/v1/ports", {"node_uuid": world["node"], "address": mac}).status_code == 409


# -- values that reach a URL or a header: every create/update route's path ----------------------------


def _writes_with_path_values() -> list[tuple[str, str]]:
    """(method, path) of every PUT/POST/PATCH whose path holds a value besides a node or runbook."""
    out = []
    for path, item in LATEST["paths"].items():
        for method in item:
            if method in ("put", "post", "patch") and path.count("{") and not path.endswith(
                ("{node_ident}", "{runbook_ident}")
            ):
                out.append((method.upper(), path))
    return out


WRITE_ROUTES = _writes_with_path_values()


def test_the_walk_found_the_routes_of_the_issue() -> None:
    assert ("PUT", "/v1/resource_classes/{resource_class}") in WRITE_ROUTES
    assert ("PUT", "/v1/nodes/{node_ident}/traits/{trait}") in WRITE_ROUTES


def _snapshot(api: Api, world: dict[str, str]) -> list[Any]:
    node, runbook = world["node"], world["runbook"]
    return [
        _stored(api, "/v1/resource_classes"), _stored(api, f"/v1/nodes/{node}/traits"),
        _stored(api, f"/v1/runbooks/{runbook}/traits"), _stored(api, "/v1/nodes"),
        _stored(api, f"/v1/nodes/{node}/vifs"),
    ]  # fmt: skip


@pytest.mark.parametrize(("method", "path"), [pytest.param(m, p, id=f"{m} {p}") for m, p in WRITE_ROUTES])
def test_values_that_cannot_be_in_a_header_are_refused_before_any_write(
    api: Api, world: dict[str, str], method: str, path: str
) -> None:
    before = _snapshot(api, world)
    last = path.rsplit("{", 1)[1].split("}")[0]
    for suffix in HOSTILE_SUFFIXES:
        value = quote("CUSTOM_X" + suffix, safe="")
        url = _fill(path.replace("{" + last + "}", value), world)
        resp = api.request(method, url, data=b"" if method == "PUT" else b"{}")
        _refused(resp, f"{method} {url}")
        assert _snapshot(api, world) == before, f"{method} {url} wrote something"


def test_put_resource_class_with_a_newline_is_a_400_and_stores_nothing(api: Api) -> None:
    # the row was written, then the Location header failed (500)
    for method, url, body in [
        ("PUT", "/v1/resource_classes/CUSTOM_X%0A", None),
        ("POST", "/v1/resource_classes", {"name": "CUSTOM_X\n"}),
    ]:
        resp = api.request(method, url, json=body)
        assert resp.status_code == 400, resp.text
        assert error_of(resp)["code"] == "baremetal.invalid-resource-class"
    assert api.get("/v1/resource_classes").json()["resource_classes"] == []


# -- names that no URL reaches -----------------------------------------------------------------------


@pytest.mark.parametrize("name", [".", "..", "detail", "validate"])
@pytest.mark.parametrize("kind", ["nodes", "ports", "portgroups", "runbooks"])
def test_names_no_url_can_reach_are_refused(api: Api, world: dict[str, str], kind: str, name: str) -> None:
    base = {
        "nodes": {"driver": "fake-hardware"},
        "ports": {"node_uuid": world["node"], "address": "52:54:00:00:00:09"},
        "portgroups": {"node_uuid": world["node"]},
        "runbooks": {"steps": [{"interface": "deploy", "step": "s", "args": {}, "order": 1}]},
    }[kind]
    before = _stored(api, f"/v1/{kind}")
    resp = api.post(f"/v1/{kind}", {**base, "name": name})
    assert resp.status_code == 400, resp.text
    assert "reserved" in error_of(resp)["faultstring"]
    assert _stored(api, f"/v1/{kind}") == before
    # ...and on rename
    created = api.post(f"/v1/{kind}", {**base, "name": "plain"})
    assert created.status_code == 201, created.text
    ident = created.json()["uuid"]
    resp = api.patch(f"/v1/{kind}/{ident}", [{"op": "replace", "path": "/name", "value": name}])
    assert resp.status_code == 400, resp.text
    assert api.get(f"/v1/{kind}/{ident}").json()["name"] == "plain"


def test_names_with_dots_inside_are_still_names(api: Api) -> None:
    assert api.node(name="rack.1..a")["name"] == "rack.1..a"
    assert api.get("/v1/nodes/rack.1..a").status_code == 200


# -- a body that says it is not JSON ------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml", "text/json"]
)
def test_a_body_that_is_not_json_by_its_content_type_is_a_415(api: Api, content_type: str) -> None:
    resp = api.request("POST", "/v1/nodes", data=b'{"driver": "fake-hardware"}',
                       headers={"Content-Type": content_type})  # fmt: skip
    assert resp.status_code == 415, resp.text
    assert error_of(resp)["code"] == "request.unsupported-media-type"
    assert api.get("/v1/nodes").json()["nodes"] == []


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON",
                     "application/merge-patch+json", None],
)  # fmt: skip
def test_json_content_types_and_none_are_read_as_json(api: Api, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    resp = requests.post(api.url + "/v1/nodes", data=b'{"driver": "fake-hardware"}', timeout=10,
                         headers={"X-OpenStack-Ironic-API-Version": "latest", **headers})  # fmt: skip
    assert resp.status_code == 201, resp.text


# -- the Host header ----------------------------------------------------------------------------------


def _raw(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    data = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)  # with "Connection: close": the answer ends where the stream does
        for _ in range(1000):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize(
    "host", [b"evil\x01.example", b"a b", b'x"y', b"x/y", b"user@x", "h\u00e9st".encode("latin-1"), b"<x>"]
)
def test_a_hostile_host_header_is_refused_before_anything_is_written(api: Api, host: bytes) -> None:
    body = b'{"name": "CUSTOM_HOST"}'
    head = [
        b"POST /v1/resource_classes HTTP/1.1", b"Host: " + host, b"X-OpenStack-Ironic-API-Version: latest",
        b"Content-Type: application/json", b"Connection: close", b"Content-Length: %d" % len(body),
    ]  # fmt: skip
    status, headers, answer = _raw(api.url, b"\r\n".join(head) + b"\r\n\r\n" + body)
    assert status == 400, answer
    assert headers["Content-Type"].startswith("application/json")
    assert json.loads(json.loads(answer)["error_message"])["faultstring"].startswith("The Host header")
    assert api.get("/v1/resource_classes").json()["resource_classes"] == []


def test_a_plain_host_header_still_makes_the_links(api: Api) -> None:
    resp = api.request("POST", "/v1/resource_classes", json={"name": "CUSTOM_H"},
                       headers={"Host": "bm.example:6385"})  # fmt: skip
    assert resp.status_code == 201, resp.text
    assert resp.headers["Location"] == "http://bm.example:6385/v1/resource_classes/CUSTOM_H"


# -- the public endpoint (Ironic's public_endpoint) ---------------------------------------------------


@pytest.mark.parametrize("shape", ["code", "paste", "wsgi"])
def test_a_public_endpoint_makes_the_links_whatever_the_host(tmp_path: Any, shape: str) -> None:
    from werkzeug.test import Client

    from baremetal_service.deploy import build_app, load_paste_app, make_application

    endpoint = "https://bm.example.com:6385/baremetal"
    database = f"sqlite:///{tmp_path / 'endpoint.db'}"
    built: Any
    if shape == "code":
        built = build_app(database, run_conductor=False, public_endpoint=endpoint + "/")
    elif shape == "paste":
        built = load_paste_app(database_url=database, run_conductor=False, public_endpoint=endpoint)
    else:
        built = make_application({"BAREMETAL_DATABASE": database, "BAREMETAL_CONDUCTOR_WORKERS": "0",
                                  "BAREMETAL_PUBLIC_ENDPOINT": endpoint})  # fmt: skip
    try:
        client = Client(built)
        headers = {"X-OpenStack-Ironic-API-Version": "latest", "Host": "evil.example"}
        created = client.post("/v1/nodes", json={"driver": "fake-hardware"}, headers=headers)
        assert created.status_code == 201, created.get_data()
        uuid = created.json["uuid"]
        assert created.headers["Location"] == f"{endpoint}/v1/nodes/{uuid}"
        assert created.json["links"][0]["href"] == f"{endpoint}/v1/nodes/{uuid}"
        root = client.get("/", headers=headers).json
        assert root["default_version"]["links"][0]["href"].startswith(endpoint + "/v1")
        # a Host that is not a host is no matter then: it goes nowhere
        assert client.get("/v1/nodes", headers={**headers, "Host": "a b"}).status_code == 200
    finally:
        built.close()
