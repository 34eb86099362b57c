"""Ironic's access rules over real HTTP: readers, members and admins of the system and of projects.

The service runs the shipped ``api-paste.ini`` with ``auth_strategy = keystone`` (SQLite) and no
keystonemiddleware in front: each request carries the identity headers auth_token would
set from a token (``X-Roles``, ``X-Project-Id``, ``OpenStack-System-Scope``, ``X-Identity-Status``),
so every persona of Ironic's default policy is one set of headers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from baremetal_service.deploy import load_paste_app
from baremetal_service.handlers.authorize import ROUTES
from baremetal_service.handlers.routes import create_flask_app
from baremetal_service.openapi import install
from tests.example.handlers.conftest import Api, Server, error_of, fresh_api

OWNER, LESSEE, OTHER = "owner-project", "lessee-project", "other-project"


def persona(roles: str, *, project: str | None = None, system: bool = False) -> dict[str, str]:
    """The headers auth_token sets for a token with *roles* on *project* (or the system)."""
    headers = {
        "X-Roles": roles,
        "X-Identity-Status": "Confirmed",
        "X-User-Id": f"user-{uuid.uuid4().hex[:8]}",
    }
    if system:
        headers["OpenStack-System-Scope"] = "all"
    if project:
        headers["X-Project-Id"] = project
    return headers


SYSTEM_ADMIN = persona("admin,member,reader", system=True)
SYSTEM_MEMBER = persona("member,reader", system=True)
SYSTEM_READER = persona("reader", system=True)
OWNER_ADMIN = persona("admin,manager,member,reader", project=OWNER)
OWNER_MEMBER = persona("member,reader", project=OWNER)
OWNER_READER = persona("reader", project=OWNER)
LESSEE_ADMIN = persona("admin,manager,member,reader", project=LESSEE)
LESSEE_MEMBER = persona("member,reader", project=LESSEE)
LESSEE_READER = persona("reader", project=LESSEE)
OTHER_MEMBER = persona("member,reader", project=OTHER)


def denied(resp: requests.Response, rule: str) -> None:
    assert resp.status_code == 403, resp.text
    assert error_of(resp)["faultstring"] == f"Access was denied to the following resource: {rule}"


@pytest.fixture(scope="module")
def rbac_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("rbac")
    app = load_paste_app(
        database_url=f"sqlite:///{tmp / 'rbac.db'}", store_url="memory://", run_conductor=False,
        auth_strategy="keystone",
    )  # fmt: skip
    server = Server(app).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def api(rbac_server: Server) -> Iterator[Api]:
    yield from fresh_api(rbac_server)


def make_node(api: Api, **fields: Any) -> dict[str, Any]:
    resp = api.post("/v1/nodes", {"driver": "fake-hardware", **fields}, headers=SYSTEM_ADMIN)
    assert resp.status_code == 201, resp.text
    return resp.json()


@pytest.fixture
def nodes(api: Api) -> dict[str, dict[str, Any]]:
    """A node owned by OWNER and leased to LESSEE, and one of nobody's."""
    return {
        "leased": make_node(api, name="leased", owner=OWNER, lessee=LESSEE),
        "free": make_node(api, name="free"),
    }


# -- creating and deleting nodes ----------------------------------------------------------------


@pytest.mark.parametrize(
    "who", [SYSTEM_MEMBER, SYSTEM_READER, OWNER_MEMBER, OWNER_READER],
    ids=["system-member", "system-reader", "project-member", "project-reader"],
)  # fmt: skip
def test_only_admins_create_nodes(api: Api, who: dict[str, str]) -> None:
    denied(api.post("/v1/nodes", {"driver": "fake-hardware"}, headers=who), "baremetal:node:create")
    listed = api.get("/v1/nodes", headers=SYSTEM_READER).json()["nodes"]
    assert listed == []


def test_a_project_admin_creates_a_node_its_project_owns(api: Api) -> None:
    resp = api.post("/v1/nodes", {"driver": "fake-hardware"}, headers=OWNER_ADMIN)
    assert resp.status_code == 201, resp.text
    assert resp.json()["owner"] == OWNER
    shown = api.get(f"/v1/nodes/{resp.json()['uuid']}", headers=OWNER_READER)
    assert shown.status_code == 200


def test_readers_and_members_cannot_delete(api: Api, nodes: dict[str, Any]) -> None:
    uuid_ = nodes["leased"]["uuid"]
    for who in (SYSTEM_READER, SYSTEM_MEMBER, OWNER_MEMBER):
        denied(api.delete(f"/v1/nodes/{uuid_}", headers=who), "baremetal:node:delete:self_owned_node")
    assert api.get(f"/v1/nodes/{uuid_}", headers=SYSTEM_READER).status_code == 200
    assert api.delete(f"/v1/nodes/{uuid_}", headers=OWNER_ADMIN).status_code == 204
    assert api.delete(f"/v1/nodes/{nodes['free']['uuid']}", headers=SYSTEM_ADMIN).status_code == 204


# -- what each caller sees ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "names"),
    [
        (SYSTEM_READER, ["free", "leased"]),
        (OWNER_READER, ["leased"]),
        (LESSEE_READER, ["leased"]),
        (OTHER_MEMBER, []),
    ],
    ids=["system-reader", "owner-reader", "lessee-reader", "other-project"],
)
def test_lists_show_what_the_caller_owns_or_leases(
    api: Api, nodes: dict[str, Any], who: dict[str, str], names: list[str]
) -> None:
    for path in ("/v1/nodes", "/v1/nodes/detail"):
        resp = api.get(path, headers=who)
        assert resp.status_code == 200, resp.text
        assert sorted(n["name"] for n in resp.json()["nodes"]) == names


def test_a_node_the_caller_may_not_read_does_not_exist_for_it(api: Api, nodes: dict[str, Any]) -> None:
    leased, free = nodes["leased"]["uuid"], nodes["free"]["uuid"]
    assert api.get(f"/v1/nodes/{free}", headers=OWNER_READER).status_code == 404
    assert api.get(f"/v1/nodes/{leased}", headers=OTHER_MEMBER).status_code == 404
    assert api.patch(f"/v1/nodes/{leased}", [{"op": "add", "path": "/extra/a", "value": 1}],
                     headers=OTHER_MEMBER).status_code == 404  # fmt: skip
    assert api.get(f"/v1/nodes/{leased}", headers=LESSEE_READER).status_code == 200
    assert api.get(f"/v1/nodes/{free}", headers=SYSTEM_READER).status_code == 200


def test_a_token_without_a_role_sees_nothing(api: Api, nodes: dict[str, Any]) -> None:
    nobody = persona("", project=OWNER)
    denied(api.get("/v1/nodes", headers=nobody), "baremetal:node:list")
    assert api.get(f"/v1/nodes/{nodes['leased']['uuid']}", headers=nobody).status_code == 404


# -- writes -----------------------------------------------------------------------------------


EXTRA = [{"op": "add", "path": "/extra/colour", "value": "blue"}]


@pytest.mark.parametrize(
    "who",
    [SYSTEM_READER, OWNER_READER, LESSEE_READER],
    ids=["system-reader", "owner-reader", "lessee-reader"],
)
def test_readers_cannot_write(api: Api, nodes: dict[str, Any], who: dict[str, str]) -> None:
    node = nodes["leased"]["uuid"]
    denied(api.patch(f"/v1/nodes/{node}", EXTRA, headers=who), "baremetal:node:update_extra")
    denied(api.put(f"/v1/nodes/{node}/states/power", {"target": "power on"}, headers=who),
           "baremetal:node:set_power_state")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/states/provision", {"target": "manage"}, headers=who),
           "baremetal:node:set_provision_state")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/maintenance", {"reason": "r"}, headers=who),
           "baremetal:node:set_maintenance")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/traits", {"traits": ["CUSTOM_A"]}, headers=who),
           "baremetal:node:traits:set")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/management/boot_device", {"boot_device": "pxe"}, headers=who),
           "baremetal:node:set_boot_device")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/states/console", {"enabled": True}, headers=who),
           "baremetal:node:set_console_state")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/states/boot_mode", {"target": "uefi"}, headers=who),
           "baremetal:node:set_boot_mode")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/states/secure_boot", {"target": True}, headers=who),
           "baremetal:node:set_secure_boot")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node}/states/raid", {"logical_disks": []}, headers=who),
           "baremetal:node:set_raid_state")  # fmt: skip
    shown = api.get(f"/v1/nodes/{node}", headers=SYSTEM_READER).json()
    assert shown["extra"] == {} and shown["maintenance"] is False and shown["power_state"] is None


def test_members_write_what_their_role_allows(api: Api, nodes: dict[str, Any]) -> None:
    node = nodes["leased"]["uuid"]
    for who in (SYSTEM_MEMBER, OWNER_MEMBER, LESSEE_MEMBER):
        assert api.patch(f"/v1/nodes/{node}", EXTRA, headers=who).status_code == 200
    # traits: the owner's admins (and the system's members), not the owner's members
    denied(api.put(f"/v1/nodes/{node}/traits", {"traits": ["CUSTOM_A"]}, headers=OWNER_MEMBER),
           "baremetal:node:traits:set")  # fmt: skip
    assert (
        api.put(f"/v1/nodes/{node}/traits", {"traits": ["CUSTOM_A"]}, headers=OWNER_ADMIN).status_code == 204
    )
    # provision states: the owner's members, the lessee's admins -- not the lessee's members
    denied(
        api.put(f"/v1/nodes/{node}/maintenance", {}, headers=LESSEE_MEMBER), "baremetal:node:set_maintenance"
    )
    assert api.put(f"/v1/nodes/{node}/maintenance", {}, headers=LESSEE_ADMIN).status_code == 202
    # the owner field is the system's
    denied(api.patch(f"/v1/nodes/{node}", [{"op": "replace", "path": "/owner", "value": OTHER}],
                     headers=OWNER_ADMIN), "baremetal:node:update:owner")  # fmt: skip
    moved = api.patch(f"/v1/nodes/{node}", [{"op": "replace", "path": "/owner", "value": OTHER}],
                      headers=SYSTEM_MEMBER)  # fmt: skip
    assert moved.status_code == 200 and moved.json()["owner"] == OTHER


def test_ports_follow_their_node(api: Api, nodes: dict[str, Any]) -> None:
    node = nodes["leased"]["uuid"]
    body = {"node_uuid": node, "address": "52:54:00:00:00:01"}
    denied(api.post("/v1/ports", body, headers=LESSEE_ADMIN), "baremetal:port:create")
    denied(api.post("/v1/ports", body, headers=OWNER_MEMBER), "baremetal:port:create")
    created = api.post("/v1/ports", body, headers=OWNER_ADMIN)
    assert created.status_code == 201, created.text
    port = created.json()["uuid"]
    assert [p["uuid"] for p in api.get("/v1/ports", headers=LESSEE_READER).json()["ports"]] == [port]
    assert api.get("/v1/ports", headers=OTHER_MEMBER).json()["ports"] == []
    assert api.get(f"/v1/ports/{port}", headers=OTHER_MEMBER).status_code == 404
    denied(api.patch(f"/v1/ports/{port}", [{"op": "add", "path": "/extra/a", "value": 1}],
                     headers=OWNER_READER), "baremetal:port:update")  # fmt: skip
    denied(api.delete(f"/v1/ports/{port}", headers=SYSTEM_MEMBER), "baremetal:port:delete")
    assert api.delete(f"/v1/ports/{port}", headers=SYSTEM_ADMIN).status_code == 204


def test_system_only_resources_refuse_project_tokens(api: Api) -> None:
    denied(api.get("/v1/chassis", headers=OWNER_ADMIN), "baremetal:chassis:get")
    denied(api.get("/v1/drivers", headers=OWNER_ADMIN), "baremetal:driver:get")
    assert api.get("/v1/chassis", headers=SYSTEM_READER).status_code == 200
    denied(api.post("/v1/chassis", {}, headers=SYSTEM_MEMBER), "baremetal:chassis:create")
    assert api.post("/v1/chassis", {}, headers=SYSTEM_ADMIN).status_code == 201


def test_discovery_is_open_to_everyone(api: Api) -> None:
    for path in ("/", "/v1"):
        assert api.get(path, headers=persona("")).status_code == 200


# -- the replay scope of a system-scoped token --------------------------------------------------


def test_a_system_scope_is_a_tenant_of_its_own(api: Api) -> None:
    token = {"X-Client-Token": uuid.uuid4().hex}
    first = api.post("/v1/nodes", {"driver": "fake-hardware"}, headers={**SYSTEM_ADMIN, **token})
    again = api.post("/v1/nodes", {"driver": "fake-hardware"},
                     headers={**persona("admin", system=True), **token})  # fmt: skip
    assert first.status_code == again.status_code == 201
    assert again.json()["uuid"] == first.json()["uuid"]
    assert again.headers.get("Idempotent-Replayed") == "true"
    # the same token from a project is another tenant's: it runs, and makes its own node
    mine = api.post("/v1/nodes", {"driver": "fake-hardware"}, headers={**OWNER_ADMIN, **token})
    assert mine.status_code == 201 and mine.json()["uuid"] != first.json()["uuid"]
    assert mine.json()["owner"] == OWNER
    listed = api.get("/v1/nodes", headers=SYSTEM_READER).json()["nodes"]
    assert len(listed) == 2


# -- a policy file ------------------------------------------------------------------------------


def test_a_policy_file_overrides_a_rule(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text('"baremetal:node:create": "role:reader and system_scope:all"\n')
    (tmp_path / "baremetal.conf").write_text(f"[oslo_policy]\npolicy_file = {tmp_path / 'policy.yaml'}\n")
    app = load_paste_app(
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", store_url="memory://", run_conductor=False,
        auth_strategy="keystone", config_files=[str(tmp_path / "baremetal.conf")],
    )  # fmt: skip
    server = Server(app).start()
    client = Api(server.url)
    try:
        assert client.post("/v1/nodes", {"driver": "fake-hardware"}, headers=SYSTEM_READER).status_code == 201
        # the default let a system admin create; the file's rule asks for the reader role
        denied(client.post("/v1/nodes", {"driver": "fake-hardware"}, headers=persona("admin", system=True)),
               "baremetal:node:create")  # fmt: skip
    finally:
        client.close()
        server.stop()


def test_without_keystone_every_caller_is_an_operator(tmp_path: Path) -> None:
    """noauth (the default) enforces no rule, as Ironic without Keystone: a reader creates."""
    app = load_paste_app(
        database_url=f"sqlite:///{tmp_path / 'db.sqlite'}", store_url="memory://", run_conductor=False
    )
    server = Server(app).start()
    client = Api(server.url)
    try:
        resp = client.post("/v1/nodes", {"driver": "fake-hardware"}, headers=SYSTEM_READER)
        assert resp.status_code == 201, resp.text
    finally:
        client.close()
        server.stop()


def test_every_route_has_its_rule() -> None:
    app = install(create_flask_app(None))
    missing = sorted(
        f"{rule.endpoint} {method}"
        for rule in app.url_map.iter_rules()
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}
        if method not in ROUTES.get(rule.endpoint, {})
    )
    assert missing == []


# -- runbooks ------------------------------------------------------------------------------------


RUNBOOK_STEPS = [{"interface": "bios", "step": "apply_configuration", "args": {}, "order": 1}]


def test_runbooks_are_checked_by_owner_without_concealment(api: Api) -> None:
    """Ironic's runbook rules answer 403, never a concealing 404; a public runbook is everyone's
    to read, and only the system makes one public or changes an owner."""
    public = api.post("/v1/runbooks", {"name": "CUSTOM_PUBLIC", "steps": RUNBOOK_STEPS, "public": True},
                      headers=SYSTEM_ADMIN)  # fmt: skip
    assert public.status_code == 201, public.text
    private = api.post("/v1/runbooks", {"name": "CUSTOM_MINE", "steps": RUNBOOK_STEPS}, headers=OWNER_ADMIN)
    assert private.status_code == 201, private.text
    public_id, private_id = public.json()["uuid"], private.json()["uuid"]
    make_public = [{"op": "replace", "path": "/public", "value": True}]
    assert api.get(f"/v1/runbooks/{public_id}", headers=OTHER_MEMBER).status_code == 200
    denied(api.get(f"/v1/runbooks/{private_id}", headers=OTHER_MEMBER), "baremetal:runbook:get")
    denied(api.patch(f"/v1/runbooks/{public_id}", make_public, headers=OWNER_ADMIN),
           "baremetal:runbook:update:public")  # fmt: skip
    denied(api.patch(f"/v1/runbooks/{private_id}", make_public, headers=OWNER_ADMIN),
           "baremetal:runbook:update:public")  # fmt: skip
    denied(api.patch(f"/v1/runbooks/{private_id}", [{"op": "replace", "path": "/owner", "value": OTHER}],
                     headers=OWNER_ADMIN), "baremetal:runbook:update:owner")  # fmt: skip
    denied(api.delete(f"/v1/runbooks/{public_id}", headers=OWNER_ADMIN), "baremetal:runbook:delete")
    made = api.patch(f"/v1/runbooks/{private_id}", make_public, headers=SYSTEM_ADMIN)
    assert made.status_code == 200, made.text
    assert made.json()["public"] is True and made.json()["owner"] is None


# -- what the handler answers first ---------------------------------------------------------------


def test_an_unknown_object_gets_the_handlers_answer(api: Api) -> None:
    """Ironic checks the version and the identifier's form before its rules: an object that does
    not exist gets the answer the service gives without rules (405 below the version, 400 for
    a malformed identifier), not a 404 from the rules' own look-up."""
    old = api.delete("/v1/runbooks/fake_runbook", headers=SYSTEM_ADMIN, version="1.82")
    assert old.status_code == 405, old.text
    malformed = api.get("/v1/volume/connectors/fake_volume_connector", headers=SYSTEM_READER, version="1.32")
    assert malformed.status_code == 400, malformed.text
    assert api.get(f"/v1/nodes/{uuid.uuid4()}", headers=SYSTEM_READER).status_code == 404
