"""Every list endpoint with every filter it documents (and some it does not): never a 5xx.

Also the query parameters and path identifiers a hostile client can send: integer
parameters that are not ASCII digits, NUL characters (which PostgreSQL cannot
compare with), surrogates, very long values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from .conftest import Api, error_of

MAC1, MAC2, MAC3 = "52:54:00:aa:f0:01", "52:54:00:aa:f0:02", "52:54:00:aa:f0:03"


@pytest.fixture
def world(api: Api) -> dict[str, Any]:
    """A chassis, two nodes (one in the chassis), ports on both, a portgroup on the first."""
    chassis = api.post("/v1/chassis", {"description": "rack"}).json()
    one = api.node(name="one", chassis_uuid=chassis["uuid"], resource_class="gold", owner="p1")
    two = api.node(name="two", description="second node")
    pg = api.post("/v1/portgroups", {"node_uuid": one["uuid"], "name": "bond0", "address": MAC3}).json()
    p1 = api.post("/v1/ports", {"node_uuid": one["uuid"], "address": MAC1, "portgroup_uuid": pg["uuid"]})
    p2 = api.post("/v1/ports", {"node_uuid": two["uuid"], "address": MAC2})
    assert p1.status_code == p2.status_code == 201, (p1.text, p2.text)
    return {"chassis": chassis, "one": one, "two": two, "pg": pg, "p1": p1.json(), "p2": p2.json()}


def _uuids(resp: requests.Response, key: str) -> list[str]:
    assert resp.status_code == 200, resp.text
    return [item["uuid"] for item in resp.json()[key]]


def _assert_error_envelope(resp: requests.Response) -> None:
    assert resp.status_code < 500, (resp.request.url, resp.status_code, resp.text[:300])
    if resp.status_code >= 400:
        assert resp.headers["Content-Type"].startswith("application/json"), resp.text[:300]
        inner = json.loads(resp.json()["error_message"])
        assert isinstance(inner["faultstring"], str)


# -- the openstacksdk filter that crashed -------------------------------------------------------


def test_ports_filtered_by_node_uuid(api: Api, world: dict[str, Any]) -> None:
    # openstacksdk's conn.baremetal.ports(node_id=...) sends ?node_uuid=<uuid>
    one, two = world["one"], world["two"]
    assert _uuids(api.get(f"/v1/ports?node_uuid={one['uuid']}"), "ports") == [world["p1"]["uuid"]]
    assert _uuids(api.get(f"/v1/ports/detail?node_uuid={two['uuid']}"), "ports") == [world["p2"]["uuid"]]
    assert _uuids(api.get("/v1/ports?node=two"), "ports") == [world["p2"]["uuid"]]
    # an unknown node: Ironic answers 404 (Node ... could not be found)
    missing = api.get("/v1/ports?node_uuid=1be26c0b-03f2-4d2e-ae87-c02d7f33c123")
    assert missing.status_code == 404
    # node_uuid is typed as a UUID
    assert api.get("/v1/ports?node_uuid=one").status_code == 400


def test_portgroups_filtered_by_node(api: Api, world: dict[str, Any]) -> None:
    assert _uuids(api.get(f"/v1/portgroups?node={world['one']['uuid']}"), "portgroups") == [
        world["pg"]["uuid"]
    ]
    assert _uuids(api.get("/v1/portgroups?node=two"), "portgroups") == []
    assert _uuids(api.get(f"/v1/portgroups?address={MAC3}"), "portgroups") == [world["pg"]["uuid"]]


def test_node_filters_select_the_right_nodes(api: Api, world: dict[str, Any]) -> None:
    one, two = world["one"]["uuid"], world["two"]["uuid"]
    assert _uuids(api.get("/v1/nodes?resource_class=gold"), "nodes") == [one]
    assert _uuids(api.get(f"/v1/nodes?chassis_uuid={world['chassis']['uuid']}"), "nodes") == [one]
    assert _uuids(api.get("/v1/nodes?description_contains=SECOND"), "nodes") == [two]
    assert _uuids(api.get("/v1/nodes?owner=p1"), "nodes") == [one]
    assert _uuids(api.get("/v1/nodes?associated=false&maintenance=false"), "nodes") == [one, two]
    assert _uuids(api.get("/v1/nodes?provision_state=enroll&driver=fake-hardware"), "nodes") == [one, two]


# -- every endpoint x every filter ----------------------------------------------------------------

LIST_ENDPOINTS = (
    "/v1/nodes",
    "/v1/nodes/detail",
    "/v1/ports",
    "/v1/ports/detail",
    "/v1/portgroups",
    "/v1/portgroups/detail",
    "/v1/chassis",
    "/v1/chassis/detail",
    "/v1/drivers",
    "/v1/resource_classes",
    "/v1/nodes/{one}/ports",
    "/v1/nodes/{one}/ports/detail",
    "/v1/nodes/{one}/portgroups",
    "/v1/portgroups/{pg}/ports",
    "/v1/chassis/{chassis}/nodes",
)

#: Documented by Ironic on some list (api-ref), plus undocumented / made-up ones.
FILTERS = (
    "node", "node_uuid", "address", "portgroup", "chassis_uuid", "instance_uuid", "associated",
    "maintenance", "retired", "provision_state", "driver", "resource_class", "conductor_group",
    "fault", "owner", "lessee", "shard", "sharded", "description_contains", "include_children",
    "parent_node", "conductor_groups", "detail", "fields", "type", "limit", "marker", "sort_key",
    "sort_dir", "name", "uuid", "bogus", "",
)  # fmt: skip


def _values(world: dict[str, Any]) -> list[str]:
    """Raw (already percent-encoded) values: valid ones and hostile ones."""
    return [
        world["one"]["uuid"],
        "one",
        MAC1,
        "true",
        "gold",
        "",
        "%00",
        "a%00b",
        "%ED%A0%80",  # a UTF-8 encoded lone surrogate (invalid UTF-8)
        "%C2%B2",  # superscript two
        "%FF%FE",
        "-1",
        "9" * 400,
        "x" * 5000,
        "%E2%80%AE%F0%9F%92%A5",
        "uuid,name",
        "a'b%22c%5C",
    ]


@pytest.mark.parametrize("endpoint", LIST_ENDPOINTS)
def test_no_filter_value_is_a_server_error(api: Api, world: dict[str, Any], endpoint: str) -> None:
    path = endpoint.format(one=world["one"]["uuid"], pg=world["pg"]["uuid"], chassis=world["chassis"]["uuid"])
    failures = []
    values = _values(world)
    for i, name in enumerate(FILTERS):
        # each filter with a valid-looking value and two hostile ones, rotating through the list
        for value in (
            values[i % 5],
            values[5 + i % (len(values) - 5)],
            values[5 + (i + 7) % (len(values) - 5)],
        ):
            resp = api.get(f"{path}?{name}={value}")
            try:
                _assert_error_envelope(resp)
            except (AssertionError, KeyError, ValueError) as error:
                failures.append(f"{name}={value[:40]}: {resp.status_code} {str(error)[:200]}")
    assert not failures, "\n".join(failures[:40])


# -- integer parameters -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("%C2%B2", id="superscript-two"),
        pytest.param("%D9%A3", id="arabic-indic-three"),
        pytest.param("9" * 5000, id="5000-digits"),
        pytest.param("1" * 30, id="30-digits"),
        pytest.param("1.5", id="decimal"),
        pytest.param("0x10", id="hex"),
        pytest.param("%00", id="nul"),
        pytest.param("-3", id="negative"),
        pytest.param("0", id="zero"),
    ],
)
@pytest.mark.parametrize("collection", ["nodes", "ports", "portgroups", "chassis"])
def test_limit_must_be_ascii_digits(api: Api, collection: str, raw: str) -> None:
    resp = api.get(f"/v1/{collection}?limit={raw}")
    assert resp.status_code == 400, resp.text[:300]
    err = error_of(resp)
    assert err["code"] == "request.invalid-parameter"
    assert len(err["faultstring"]) < 300


def test_large_limit_is_capped_not_refused(api: Api) -> None:
    assert api.get("/v1/nodes?limit=1000000").status_code == 200
    assert api.get("/v1/nodes?limit=%2012%20").status_code == 200


# -- NUL and friends in identifiers and string filters -------------------------------------------

IDENT_KINDS = ("nodes", "ports", "portgroups", "chassis")


@pytest.mark.parametrize("ident", ["%00", "a%00b", "1be26c0b-03f2-4d2e-ae87-c02d7f33c12%00", "%ED%A0%80"])
@pytest.mark.parametrize("kind", IDENT_KINDS)
def test_hostile_identifier_is_not_found(api: Api, world: dict[str, Any], kind: str, ident: str) -> None:
    # Ironic looks a port up by UUID, MAC address or name, and refuses anything else as a bad
    # request ("Expected UUID or name for port_ident"); the other kinds are simply not found.
    expected = 400 if kind == "ports" else 404
    patch = [{"op": "replace", "path": "/extra/a", "value": 1}]
    for resp in (
        api.get(f"/v1/{kind}/{ident}"),
        api.patch(f"/v1/{kind}/{ident}", patch),
        api.delete(f"/v1/{kind}/{ident}"),
    ):
        assert resp.status_code == expected, (resp.request.method, resp.text[:300])
        _assert_error_envelope(resp)


@pytest.mark.parametrize(
    "query",
    [
        "nodes?driver=%00",
        "nodes?provision_state=a%00",
        "nodes?resource_class=%00",
        "nodes?conductor_group=%00",
        "nodes?owner=%00",
        "nodes?lessee=%00",
        "nodes?shard=%00",
        "nodes?fault=%00",
        "nodes?description_contains=%00",
        "nodes?instance_uuid=%00",
        "nodes?chassis_uuid=%00",
        "nodes?marker=%00",
        "ports?address=%00",
        "ports?node=%00",
        "ports?portgroup=%00",
        "portgroups?address=%00",
        "portgroups?node=%00",
    ],
)
def test_nul_in_string_filter_is_a_client_error(api: Api, query: str) -> None:
    resp = api.get(f"/v1/{query}")
    assert resp.status_code in (400, 404), resp.text[:300]
    _assert_error_envelope(resp)


def test_node_sub_collection_of_unknown_node_is_404(api: Api) -> None:
    for path in ("/v1/nodes/%00/ports", "/v1/nodes/nope/portgroups", "/v1/chassis/%00/nodes"):
        resp = api.get(path)
        assert resp.status_code == 404, resp.text[:300]
        _assert_error_envelope(resp)
