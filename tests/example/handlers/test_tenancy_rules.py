"""Tenancy rules under noauth, over HTTP (SQLite and PostgreSQL): nobody hands a node away.

Ironic's defaults (ironic/common/policy.py, ironic/api/controllers/v1/node.py):

* ``baremetal:node:create:self_owned_node``: a project-scoped caller creates nodes owned
  by its own project; another ``owner`` is 400 ("Cannot create a node as a project
  scoped admin with an owner other than your own project.");
* ``baremetal:node:update:owner`` is system-only: any PATCH of ``/owner`` by a
  project-scoped caller is 403 ("Access was denied to the following resource: ...");
* ``baremetal:node:update:lessee`` is owner-only: a lessee cannot change the lessee;
* ``baremetal:node:delete`` and every port/portgroup write need the node's owner (a
  lessee reads them only); a port cannot be moved to a node the caller does not own.

An unscoped caller (no ``X-Project-Id``: the noauth admin) may still set anything.
The project is read once: ``X-Project-Id``, else the legacy ``X-Tenant-Id`` alias, for
the data and for the X-Client-Token replay scope alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from baremetal_service import exceptions as exc
from baremetal_service.objects.service import BaremetalService

from .conftest import Api, error_of

CREATE_OTHER_OWNER = (
    "Cannot create a node as a project scoped admin with an owner other than your own project."
)


def denied(resp: requests.Response, rule: str) -> None:
    """A 403 in Ironic's envelope naming the policy rule, with the stable code."""
    assert resp.status_code == 403, resp.text
    err = error_of(resp)
    assert err["faultstring"] == f"Access was denied to the following resource: {rule}"
    assert err["code"] == "baremetal.forbidden"


def uuids(resp: requests.Response, key: str = "nodes") -> list[str]:
    assert resp.status_code == 200, resp.text
    return [item["uuid"] for item in resp.json()[key]]


# -- nodes ----------------------------------------------------------------------------------------


def test_a_project_cannot_create_a_node_owned_by_another_project(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    resp = alice.post("/v1/nodes", {"driver": "fake-hardware", "name": "gift", "owner": "bob"})
    assert resp.status_code == 400, resp.text
    assert error_of(resp) == {"faultstring": CREATE_OTHER_OWNER, "code": "baremetal.invalid-parameter"}
    assert uuids(api.get("/v1/nodes")) == []
    assert uuids(bob.get("/v1/nodes")) == []
    # its own project as owner, or no owner at all: the node is the caller's
    assert alice.node(name="explicit", owner="alice")["owner"] == "alice"
    assert alice.node(name="implicit", owner=None)["owner"] == "alice"
    assert alice.node(name="defaulted")["owner"] == "alice"
    assert len(uuids(alice.get("/v1/nodes"))) == 3


def test_a_project_cannot_change_the_owner_of_its_node(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    node = alice.node(name="mine")
    path = f"/v1/nodes/{node['uuid']}"
    attempts = [
        [{"op": "replace", "path": "/owner", "value": "bob"}],
        [{"op": "add", "path": "/owner", "value": "bob"}],
        [{"op": "remove", "path": "/owner"}],
        [{"op": "replace", "path": "/owner", "value": "alice"}],  # a no-op is still an owner write
        [{"op": "add", "path": "/extra/x", "value": 1}, {"op": "replace", "path": "/owner", "value": "bob"}],
    ]
    for patch in attempts:
        denied(alice.patch(path, patch), "baremetal:node:update:owner")
    after = alice.get(path)
    assert after.status_code == 200
    assert after.json()["owner"] == "alice" and after.json()["extra"] == {}
    assert bob.get(path).status_code == 404
    assert uuids(bob.get("/v1/nodes")) == []
    # other fields still work
    ok = alice.patch(path, [{"op": "add", "path": "/extra/x", "value": 1}])
    assert ok.status_code == 200 and ok.json()["owner"] == "alice"


def test_a_lessee_cannot_take_the_node_or_drop_the_lease(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    node = api.node(name="leased", owner="alice", lessee="bob")
    path = f"/v1/nodes/{node['uuid']}"
    assert bob.get(path).status_code == 200
    for patch in (
        [{"op": "replace", "path": "/owner", "value": "bob"}],
        [{"op": "remove", "path": "/owner"}],
    ):
        denied(bob.patch(path, patch), "baremetal:node:update:owner")
    for patch in (
        [{"op": "replace", "path": "/lessee", "value": "carol"}],
        [{"op": "remove", "path": "/lessee"}],
        [{"op": "replace", "path": "/lessee", "value": "bob"}],
    ):
        denied(bob.patch(path, patch), "baremetal:node:update:lessee")
    denied(bob.delete(path), "baremetal:node:delete")
    current = alice.get(path)
    assert current.status_code == 200
    assert (current.json()["owner"], current.json()["lessee"]) == ("alice", "bob")
    assert current.json()["extra"] == {}
    # the lessee keeps its ordinary use of the node
    ok = bob.patch(path, [{"op": "add", "path": "/extra/tenant_note", "value": "mine for now"}])
    assert ok.status_code == 200, ok.text
    assert uuids(alice.get("/v1/nodes")) == [node["uuid"]]


def test_the_owner_sets_and_clears_the_lessee(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    node = alice.node(name="to-lease", lessee="bob")
    path = f"/v1/nodes/{node['uuid']}"
    assert node["lessee"] == "bob" and bob.get(path).status_code == 200
    cleared = alice.patch(path, [{"op": "remove", "path": "/lessee"}])
    assert cleared.status_code == 200 and cleared.json()["lessee"] is None
    assert bob.get(path).status_code == 404
    leased = alice.patch(path, [{"op": "add", "path": "/lessee", "value": "carol"}])
    assert leased.status_code == 200 and leased.json()["lessee"] == "carol"
    assert api.as_project("carol").get(path).status_code == 200
    assert alice.delete(path).status_code == 204


def test_an_unscoped_caller_may_set_any_owner_and_lessee(api: Api) -> None:
    node = api.node(name="admin-made", owner="bob", lessee="carol")
    assert (node["owner"], node["lessee"]) == ("bob", "carol")
    path = f"/v1/nodes/{node['uuid']}"
    moved = api.patch(
        path,
        [{"op": "replace", "path": "/owner", "value": "alice"}, {"op": "remove", "path": "/lessee"}],
    )
    assert moved.status_code == 200, moved.text
    assert (moved.json()["owner"], moved.json()["lessee"]) == ("alice", None)
    assert api.as_project("alice").get(path).status_code == 200
    assert api.as_project("bob").get(path).status_code == 404
    assert api.as_project("carol").get(path).status_code == 404


def test_a_denied_write_is_403_whatever_its_if_match(api: Api) -> None:
    """403 wins over 412 (RFC 9110 13.2.1): the tenancy verdict does not depend on the etag."""
    alice, bob = api.as_project("alice"), api.as_project("bob")
    node = api.node(name="etagged", owner="alice", lessee="bob")
    path = f"/v1/nodes/{node['uuid']}"
    stale = {"If-Match": 'W/"' + "0" * 128 + '"'}
    to_bob = [{"op": "replace", "path": "/owner", "value": "bob"}]
    denied(alice.patch(path, to_bob, headers=stale), "baremetal:node:update:owner")
    drop = [{"op": "remove", "path": "/lessee"}]
    denied(bob.patch(path, drop, headers=stale), "baremetal:node:update:lessee")
    denied(bob.delete(path, headers=stale), "baremetal:node:delete")
    port = api.post("/v1/ports", {"node_uuid": node["uuid"], "address": "52:54:00:77:01:01"}).json()
    port_path = f"/v1/ports/{port['uuid']}"
    denied(bob.patch(port_path, [{"op": "add", "path": "/extra/x", "value": 1}], headers=stale),
           "baremetal:port:update")  # fmt: skip
    denied(bob.delete(port_path, headers=stale), "baremetal:port:delete")
    # an allowed write with the stale etag is still 412
    note = [{"op": "add", "path": "/extra/x", "value": 1}]
    assert alice.patch(path, note, headers=stale).status_code == 412
    assert api.get(path).json()["owner"] == "alice"


# -- ports and portgroups follow their node -------------------------------------------------------


def _port(client: Api, node: dict[str, Any], mac: str, **extra: Any) -> requests.Response:
    return client.post("/v1/ports", {"node_uuid": node["uuid"], "address": mac, **extra})


def test_ports_and_portgroups_follow_their_node(api: Api) -> None:
    alice, bob = api.as_project("alice"), api.as_project("bob")
    own = alice.node(name="alice-own")
    leased = api.node(name="bob-leased-to-alice", owner="bob", lessee="alice")
    hidden = api.node(name="carol-only", owner="carol")

    # create on a node it only leases: 403; on a node it cannot see: 400 not found
    denied(_port(alice, leased, "52:54:00:77:00:01"), "baremetal:port:create")
    denied(alice.post("/v1/portgroups", {"node_uuid": leased["uuid"], "name": "pg-x"}),
           "baremetal:portgroup:create")  # fmt: skip
    assert _port(alice, hidden, "52:54:00:77:00:02").status_code == 400
    assert uuids(api.get("/v1/ports"), "ports") == []

    mine = _port(alice, own, "52:54:00:77:00:03")
    assert mine.status_code == 201, mine.text
    my_pg = alice.post("/v1/portgroups", {"node_uuid": own["uuid"], "name": "alice-pg"})
    assert my_pg.status_code == 201, my_pg.text
    theirs = _port(bob, leased, "52:54:00:77:00:04")
    assert theirs.status_code == 201, theirs.text
    their_pg = bob.post("/v1/portgroups", {"node_uuid": leased["uuid"], "name": "bob-pg"})
    assert their_pg.status_code == 201, their_pg.text
    port_path = f"/v1/ports/{mine.json()['uuid']}"
    pg_path = f"/v1/portgroups/{my_pg.json()['uuid']}"
    their_port = f"/v1/ports/{theirs.json()['uuid']}"
    their_pg_path = f"/v1/portgroups/{their_pg.json()['uuid']}"

    # hand its own port or portgroup to the leased node: 403; to a hidden node: 400
    to_leased = [{"op": "replace", "path": "/node_uuid", "value": leased["uuid"]}]
    denied(alice.patch(port_path, to_leased), "baremetal:port:update")
    denied(alice.patch(pg_path, to_leased), "baremetal:portgroup:update")
    to_hidden = [{"op": "replace", "path": "/node_uuid", "value": hidden["uuid"]}]
    assert alice.patch(port_path, to_hidden).status_code == 400
    assert alice.patch(pg_path, to_hidden).status_code == 400

    # the lessee reads the owner's port and portgroup, but cannot take, change or delete them
    assert alice.get(their_port).status_code == 200
    assert alice.get(their_pg_path).status_code == 200
    take = [{"op": "replace", "path": "/node_uuid", "value": own["uuid"]}]
    denied(alice.patch(their_port, take), "baremetal:port:update")
    denied(alice.patch(their_pg_path, take), "baremetal:portgroup:update")
    denied(alice.patch(their_port, [{"op": "add", "path": "/extra/x", "value": 1}]), "baremetal:port:update")
    denied(alice.delete(their_port), "baremetal:port:delete")
    denied(alice.delete(their_pg_path), "baremetal:portgroup:delete")

    # nothing moved
    assert api.get(port_path).json()["node_uuid"] == own["uuid"]
    assert api.get(pg_path).json()["node_uuid"] == own["uuid"]
    assert api.get(their_port).json()["node_uuid"] == leased["uuid"]
    assert api.get(their_port).json()["extra"] == {}
    assert api.get(their_pg_path).json()["node_uuid"] == leased["uuid"]
    assert bob.get(port_path).status_code == 404

    # the owner keeps full use; the unscoped caller may move anything anywhere
    assert alice.patch(port_path, [{"op": "add", "path": "/extra/x", "value": 1}]).status_code == 200
    assert bob.patch(their_port, [{"op": "add", "path": "/extra/x", "value": 1}]).status_code == 200
    moved = api.patch(port_path, [{"op": "replace", "path": "/node_uuid", "value": hidden["uuid"]}])
    assert moved.status_code == 200, moved.text
    assert alice.get(port_path).status_code == 404
    assert bob.delete(their_port).status_code == 204
    assert bob.delete(their_pg_path).status_code == 204
    assert alice.delete(pg_path).status_code == 204


# -- the facade itself, for callers that do not come through the HTTP API --------------------------


@pytest.fixture
def facade(database_url: str) -> Iterator[BaremetalService]:
    service = BaremetalService(database_url, etag_key=b"t" * 32, conductor_workers=0)
    yield service
    service.close()


def test_the_facade_checks_the_resulting_values(facade: BaremetalService) -> None:
    """``update_node`` with a plain change set (no JSON patch paths to look at)."""
    node = facade.create_node({"driver": "fake-hardware", "lessee": "bob"}, project_id="alice")
    ident = node["uuid"]
    with pytest.raises(exc.PolicyForbidden) as info:
        facade.update_node(ident, {"owner": "bob"}, project_id="alice")
    assert (info.value.status, info.value.code) == (403, "baremetal.forbidden")
    with pytest.raises(exc.PolicyForbidden):
        facade.update_node(ident, {"owner": None}, project_id="alice")
    for change in ({"owner": "bob"}, {"lessee": None}, {"lessee": "carol"}):
        with pytest.raises(exc.PolicyForbidden):
            facade.update_node(ident, change, project_id="bob")
    with pytest.raises(exc.PolicyForbidden):
        facade.delete_node(ident, project_id="bob")
    with pytest.raises(exc.InvalidParameterValue):
        facade.create_node({"driver": "fake-hardware", "owner": "bob"}, project_id="alice")
    # unchanged values are no change; the owner sets the lessee; unscoped sets anything
    facade.update_node(ident, {"owner": "alice", "description": "same owner"}, project_id="alice")
    assert facade.update_node(ident, {"lessee": "carol"}, project_id="alice")["lessee"] == "carol"
    assert facade.update_node(ident, {"owner": "bob"})["owner"] == "bob"
    with pytest.raises(exc.NodeNotFound):
        facade.get_node(ident, project_id="alice")


# -- one project for the data and for the replay scope --------------------------------------------


def test_x_tenant_id_is_the_project_for_data_and_replays_alike(api: Api) -> None:
    """Same X-Client-Token and body under every header combination: a replay is only ever
    served to the project that owns the node it names."""
    token = f"tok-{uuid.uuid4()}"
    body = {"driver": "fake-hardware"}
    anon = api.as_project(None)

    def post(headers: dict[str, str]) -> requests.Response:
        resp = anon.post("/v1/nodes", body, headers={"X-Client-Token": token, **headers})
        assert resp.status_code == 201, (headers, resp.text)
        return resp

    def sees(headers: dict[str, str], node_uuid: str) -> bool:
        return anon.get(f"/v1/nodes/{node_uuid}", headers=headers).status_code == 200

    combos: list[tuple[dict[str, str], str | None]] = [
        ({"X-Tenant-Id": "bob"}, "bob"),  # the legacy alias alone
        ({"X-Project-Id": "bob"}, "bob"),
        ({"X-Project-Id": "bob", "X-Tenant-Id": "bob"}, "bob"),
        ({"X-Project-Id": "alice", "X-Tenant-Id": "bob"}, "alice"),  # X-Project-Id wins
        ({"X-Tenant-Id": "alice"}, "alice"),
        ({}, None),  # unscoped: its own (shared) scope
        ({"X-Project-Id": "carol", "X-Tenant-Id": "bob"}, "carol"),
    ]
    first_for: dict[str | None, str] = {}
    for headers, project in combos:
        resp = post(headers)
        doc = resp.json()
        replayed = resp.headers.get("Idempotent-Replayed") == "true"
        assert doc["owner"] == project, (headers, doc["owner"])
        assert sees(headers, doc["uuid"]), headers
        if project in first_for:
            assert replayed and doc["uuid"] == first_for[project], headers
        else:
            assert not replayed, headers
            first_for[project] = doc["uuid"]
    assert len(uuids(api.get("/v1/nodes"))) == 4  # bob, alice, unscoped, carol
    # the alias scopes reads too
    assert uuids(anon.get("/v1/nodes", headers={"X-Tenant-Id": "bob"})) == [first_for["bob"]]


def test_a_malformed_legacy_tenant_header_is_400(api: Api) -> None:
    resp = api.as_project(None).get("/v1/nodes", headers={"X-Tenant-Id": "bad tenant/../x"})
    assert resp.status_code == 400
    assert error_of(resp)["code"] == "auth.invalid-project"
