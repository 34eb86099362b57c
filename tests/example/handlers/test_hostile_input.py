"""Hypothesis against the running service (SQLite and PostgreSQL): hostile bodies, patches,
paths, query strings and headers.  Never a 5xx, and every error is a JSON body in
Ironic's envelope (``{"error_message": "<json>"}``).

About 2,000 requests a run in all (both backends), well under a minute on two cores;
HOSTILE_EXAMPLES raises the number of examples per property.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any
from urllib.parse import quote

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import Api

#: Examples per property and backend (HOSTILE_EXAMPLES=5000 for a long local run).
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "200"))

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # no .hypothesis directory from CI runs
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

# -- strategies ------------------------------------------------------------------------------------

#: Any code point, lone surrogates (category Cs), NUL and control characters included.
any_char = st.characters(codec=None, blacklist_categories=())
hostile_text = st.one_of(
    st.text(any_char, max_size=20),
    st.sampled_from(
        ["", "\x00", "a\x00b", "\ud800", "\udfff", "\u202e", "\ufeff", "²", "..", "%00", "' OR 1=1"]
    ),
    # valid values plus what Python's "$" let through, names no URL reaches
    st.sampled_from(
        ["CUSTOM_X\n", "n1\n", "52:54:00:ac:00:09\n", "g1\r\n", "CUSTOM_X\r", "n\x7f", ".", "detail"]
    ),
    st.integers(0, 3).map(lambda n: "x" * 10**n),
)
huge_numbers = st.one_of(
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([2**63, -(2**63) - 1, 1e308, 5e-324]),
)
scalars = st.one_of(st.none(), st.booleans(), huge_numbers, hostile_text)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(hostile_text, inner, max_size=4)),
    max_leaves=12,
)

FIELDS = (
    "driver", "name", "uuid", "description", "extra", "properties", "driver_info", "instance_info",
    "instance_uuid", "chassis_uuid", "resource_class", "maintenance", "owner", "lessee", "network_data",
    "conductor_group", "protected", "retired", "shard", "parent_node", "boot_interface", "node_uuid",
    "address", "portgroup_uuid", "local_link_connection", "pxe_enabled", "physical_network", "mode",
    "standalone_ports_supported", "is_smartnic", "category", "target", "timeout", "reason",
)  # fmt: skip
field_names = st.one_of(st.sampled_from(FIELDS), hostile_text)


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _encoded_body(value: Any) -> bytes:
    # ensure_ascii escapes lone surrogates as \udXXX, which is what a hostile client sends
    return json.dumps(value, allow_nan=True).encode()


raw_bodies = st.one_of(
    json_values.map(_encoded_body),
    st.dictionaries(field_names, json_values, max_size=6).map(_encoded_body),
    st.integers(1, 3000).map(lambda n: _nested(n).encode()),
    st.integers(1, 3000).map(
        lambda n: ('{"driver": "fake-hardware", "extra": ' + '{"a":' * n + "1" + "}" * n + "}").encode()
    ),
    st.binary(max_size=64),
    st.sampled_from(
        [b"NaN", b"[Infinity]", b'{"a": 1e999}', b'"\\ud800"', b'{"\xed\xa0\x80": 1}', b"\xef\xbb\xbf{}"]
    ),
)


def _segment(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


path_segments = st.one_of(
    st.sampled_from(["{node}", "{port}", "{portgroup}", "{chassis}", "fake-hardware", "CUSTOM_X", "n0"]),
    hostile_text.filter(lambda t: t not in (".", "..")).map(_segment),
    st.sampled_from(["%00", "a%00b", "%ED%A0%80", "%FF", "%C2%B2", "x" * 1000]),
)
collections = st.sampled_from(
    ["nodes", "ports", "portgroups", "chassis", "drivers", "resource_classes", "", "v1", "nosuch",
     "runbooks", "deploy_templates", "allocations"]
)  # fmt: skip
suffixes = st.sampled_from(
    ["", "/detail", "/ports", "/portgroups", "/nodes", "/states", "/states/provision", "/states/power",
     "/validate", "/maintenance", "/properties", "/ports/detail", "/"]
)  # fmt: skip
QUERY_NAMES = (
    "limit", "marker", "sort_key", "sort_dir", "fields", "detail", "node", "node_uuid", "address",
    "portgroup", "chassis_uuid", "instance_uuid", "associated", "maintenance", "retired", "provision_state",
    "driver", "resource_class", "conductor_group", "owner", "lessee", "shard", "fault",
    "description_contains", "type",
)  # fmt: skip
query_strings = st.lists(
    st.tuples(
        st.one_of(st.sampled_from(QUERY_NAMES), hostile_text), st.one_of(hostile_text, huge_numbers.map(str))
    ),
    max_size=4,
).map(lambda pairs: "&".join(f"{_segment(k)}={_segment(v)}" for k, v in pairs))
methods = st.sampled_from(["GET", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "FOO", "TRACE"])
header_values = st.one_of(
    # (requests itself refuses leading whitespace and control characters in a header value)
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40).map(str.strip),
    st.sampled_from(
        ["latest", "1.1", "99.99", "1.0", "spam", "1.1.1", "", "*", '"x"', 'W/"x"', "baremetal 1.50"]
    ),
)
HEADER_NAMES = (
    "X-OpenStack-Ironic-API-Version", "OpenStack-API-Version", "If-Match", "If-None-Match", "Accept",
    "Content-Type", "X-Client-Token", "X-Project-Id", "X-Tenant-Id", "Content-Encoding", "Idempotency-Key",
    "Host",
)  # fmt: skip
headers = st.dictionaries(st.sampled_from(HEADER_NAMES), header_values, max_size=4)


# -- checks ----------------------------------------------------------------------------------------


def _check(resp: requests.Response) -> None:
    where = f"{resp.request.method} {resp.request.url[:200]}"
    assert resp.status_code < 500, (where, resp.status_code, resp.text[:500])
    if resp.status_code < 400 or resp.request.method == "HEAD":
        return
    assert resp.headers.get("Content-Type", "").startswith("application/json"), (where, resp.text[:300])
    inner = json.loads(resp.json()["error_message"])
    assert isinstance(inner.get("faultstring", inner.get("description")), str), (where, inner)


@pytest.fixture
def world(api: Api) -> dict[str, str]:
    node = api.node(name="n0")
    pg = api.post("/v1/portgroups", {"node_uuid": node["uuid"], "address": "52:54:00:ac:00:01"}).json()
    port = api.post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:ac:00:02"}).json()
    chassis = api.post("/v1/chassis", {}).json()
    return {"node": node["uuid"], "port": port["uuid"], "portgroup": pg["uuid"], "chassis": chassis["uuid"]}


def _fill(path: str, world: dict[str, str]) -> str:
    for key, value in world.items():
        path = path.replace("{" + key + "}", value)
    return path


# -- properties ------------------------------------------------------------------------------------


@SETTINGS
@given(
    kind=st.sampled_from(["nodes", "ports", "portgroups", "chassis", "resource_classes"]),
    body=raw_bodies,
    base=st.booleans(),
)
def test_create_with_hostile_bodies(
    api: Api, world: dict[str, str], kind: str, body: bytes, base: bool
) -> None:
    if base and body.startswith(b"{") and body.endswith(b"}") and len(body) > 2:
        # keep the mandatory fields so that the hostile ones are the ones checked
        valid = {"nodes": '"driver": "fake-hardware"', "ports": f'"node_uuid": "{world["node"]}"',
                 "portgroups": f'"node_uuid": "{world["node"]}"'}.get(kind)  # fmt: skip
        if valid:
            body = b"{" + valid.encode() + b", " + body[1:]
    _check(api.request("POST", f"/v1/{kind}", data=body))


patch_ops = st.fixed_dictionaries(
    {
        "op": st.sampled_from(["add", "replace", "remove", "move", "copy", "test", "bogus"]),
        "path": st.one_of(
            st.lists(field_names, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts)),
            st.sampled_from(["/extra/a", "/properties/x/y", "/node_uuid", "/driver", "/name", "/-", "", "/"]),
            st.integers(1, 300).map(lambda n: "/extra" + "/a" * n),
        ),
    },
    optional={"value": json_values, "from": st.sampled_from(["/extra", "/name", "/x"])},
)
patches = st.one_of(st.lists(patch_ops, max_size=3).map(_encoded_body), raw_bodies)


@SETTINGS
@given(kind=st.sampled_from(["node", "port", "portgroup", "chassis"]), body=patches)
def test_patch_with_hostile_bodies(api: Api, world: dict[str, str], kind: str, body: bytes) -> None:
    collection = "chassis" if kind == "chassis" else f"{kind}s"
    _check(api.request("PATCH", f"/v1/{collection}/{world[kind]}", data=body))
    # whatever was stored can still be read and patched
    _check(api.patch(f"/v1/{collection}/{world[kind]}", [{"op": "add", "path": "/extra/ok", "value": 1}]))


@SETTINGS
@given(
    method=methods,
    collection=collections,
    segment=st.one_of(st.just(""), path_segments.map(lambda s: "/" + s)),
    suffix=suffixes,
    query=query_strings,
    body=st.one_of(st.none(), raw_bodies),
)
def test_random_requests(
    api: Api,
    world: dict[str, str],
    method: str,
    collection: str,
    segment: str,
    suffix: str,
    query: str,
    body: bytes | None,
) -> None:
    path = _fill(f"/v1/{collection}{segment}{suffix}", world).replace("/v1/v1", "/v1")
    _check(api.request(method, f"{path}?{query}" if query else path, data=body))


@SETTINGS
@given(
    hdrs=headers,
    method=st.sampled_from(["GET", "POST", "PATCH", "DELETE"]),
    target=st.sampled_from(
        ["/v1/nodes", "/v1/nodes/{node}", "/v1/ports/{port}", "/v1", "/", "/v1/resource_classes"]
    ),
    body=st.one_of(st.none(), raw_bodies),
)
def test_hostile_headers(
    api: Api, world: dict[str, str], hdrs: dict[str, str], method: str, target: str, body: bytes | None
) -> None:
    resp = api.request(method, _fill(target, world), data=body, headers=hdrs, version=None)
    _check(resp)


def test_numbers_are_stored_as_sent_or_refused(api: Api) -> None:
    # not a property: the edge of the float range, which both backends must give back unchanged
    for value in (1e308, -1e308, 5e-324, 2**53 + 1, 10**30):
        resp = api.post("/v1/nodes", {"driver": "fake-hardware", "extra": {"n": value}})
        assert resp.status_code in (201, 400), resp.text[:300]
        if resp.status_code == 201:
            got = api.get(f"/v1/nodes/{resp.json()['uuid']}").json()["extra"]["n"]
            # an integral float comes back as the integer its JSON text says (1e308 -> 10**308)
            assert math.isclose(float(got), float(value), rel_tol=1e-15), (value, got)
