"""keystonemiddleware's ``auth_token`` written into a paste pipeline in front of ``noauth``.

A deployer who puts auth_token in the shipped pipeline (and names no ``auth_strategy``)
gets Ironic's access rules for every token it validates: a token's roles and scope are
never ignored.  Real tokens over real HTTP: keystonemiddleware's own ``AuthTokenFixture``
answers its token validation (no Keystone runs); everything after it -- the headers
auth_token sets, ``noauth``, the rules -- is the service's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from keystoneauth1 import fixture as token_fixtures
from keystonemiddleware.fixture import AuthTokenFixture

from baremetal_service.deploy import load_paste_app
from tests.example.handlers.conftest import Api, Server, error_of, fresh_api

PIPELINE = """\
[DEFAULT]
run_conductor = false

[pipeline:main]
pipeline = healthcheck request_id microversion authtoken noauth idempotency etag baremetal

[filter:healthcheck]
paste.filter_factory = baremetal_service.health:filter_factory

[filter:request_id]
use = egg:oslo.middleware#request_id

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory
www_authenticate_uri = http://127.0.0.1:9/v3
auth_url = http://127.0.0.1:9/v3

[filter:noauth]
paste.filter_factory = baremetal_service.handlers.noauth:filter_factory

[filter:microversion]
use = egg:apimw#microversion
service_type = baremetal
min_version = 1.1
max_version = 1.117
legacy_header = X-OpenStack-Ironic-API-Version
error_profile = ironic

[filter:idempotency]
use = egg:apimw#idempotency
store = %(store)s
scope = baremetal_service.handlers.noauth:tenant_scope
missing_scope = reject

[filter:etag]
use = egg:apimw#etag
min_version = 1.116
enforces = *

[app:baremetal]
paste.app_factory = baremetal_service.deploy:app_factory
database = %(database)s
run_conductor = %(run_conductor)s
"""

PROJECT, OTHER = uuid.uuid4().hex, uuid.uuid4().hex


@pytest.fixture(scope="module")
def tokens() -> Iterator[AuthTokenFixture]:
    fixture = AuthTokenFixture()
    fixture.setUp()
    try:
        yield fixture
    finally:
        fixture.cleanUp()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory, tokens: AuthTokenFixture) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("authtoken")
    ini = tmp / "api-paste.ini"
    ini.write_text(PIPELINE)
    app = load_paste_app(ini, database_url=f"sqlite:///{tmp / 'db.sqlite'}", store_url="memory://")
    server = Server(app).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def api(token_server: Server) -> Iterator[Api]:
    yield from fresh_api(token_server)


def token(tokens: AuthTokenFixture, roles: str, *, project: str | None = None) -> dict[str, str]:
    """A Keystone token with *roles* on *project*, else on the system; its ``X-Auth-Token`` header."""
    data = token_fixtures.V3Token(user_id=uuid.uuid4().hex, user_name="someone", user_domain_id="default")
    if project:
        data.set_project_scope(id=project, name=f"name-{project[:6]}", domain_id="default")
    else:
        data.set_system_scope()
    for role in roles.split(","):
        data.add_role(name=role)
    return {"X-Auth-Token": tokens.add_token(data)}


def denied(resp: requests.Response, rule: str) -> None:
    assert resp.status_code == 403, resp.text
    assert error_of(resp)["faultstring"] == f"Access was denied to the following resource: {rule}"


def create(api: Api, headers: dict[str, str], **fields: Any) -> requests.Response:
    return api.post("/v1/nodes", {"driver": "fake-hardware", **fields}, headers=headers)


def test_a_system_reader_token_reads_and_cannot_write(api: Api, tokens: AuthTokenFixture) -> None:
    admin = token(tokens, "admin,member,reader")
    reader = token(tokens, "reader")
    node = create(api, admin, name="n1").json()
    denied(create(api, reader), "baremetal:node:create")
    denied(api.delete(f"/v1/nodes/{node['uuid']}", headers=reader), "baremetal:node:delete:self_owned_node")
    denied(api.patch(f"/v1/nodes/{node['uuid']}", [{"op": "add", "path": "/extra/a", "value": "b"}],
                     headers=reader), "baremetal:node:update_extra")  # fmt: skip
    denied(api.put(f"/v1/nodes/{node['uuid']}/states/provision", {"target": "manage"}, headers=reader),
           "baremetal:node:set_provision_state")  # fmt: skip
    assert [n["uuid"] for n in api.get("/v1/nodes", headers=reader).json()["nodes"]] == [node["uuid"]]


def test_a_system_member_writes_what_its_role_allows(api: Api, tokens: AuthTokenFixture) -> None:
    admin = token(tokens, "admin,member,reader")
    member = token(tokens, "member,reader")
    node = create(api, admin).json()
    denied(create(api, member), "baremetal:node:create")
    patch = [{"op": "add", "path": "/extra/a", "value": "b"}]
    resp = api.patch(f"/v1/nodes/{node['uuid']}", patch, headers=member)
    assert resp.status_code == 200, resp.text
    denied(api.delete(f"/v1/nodes/{node['uuid']}", headers=member), "baremetal:node:delete:self_owned_node")
    assert api.delete(f"/v1/nodes/{node['uuid']}", headers=admin).status_code == 204


def test_a_project_sees_and_changes_only_what_it_owns(api: Api, tokens: AuthTokenFixture) -> None:
    admin = token(tokens, "admin,member,reader")
    mine = create(api, admin, owner=PROJECT).json()
    theirs = create(api, admin, owner=OTHER).json()
    reader = token(tokens, "reader", project=PROJECT)
    member = token(tokens, "member,reader", project=PROJECT)
    project_admin = token(tokens, "admin,manager,member,reader", project=PROJECT)
    for who in (reader, member, project_admin):
        assert [n["uuid"] for n in api.get("/v1/nodes", headers=who).json()["nodes"]] == [mine["uuid"]]
        assert api.get(f"/v1/nodes/{theirs['uuid']}", headers=who).status_code == 404
    patch = [{"op": "add", "path": "/extra/a", "value": "b"}]
    denied(api.patch(f"/v1/nodes/{mine['uuid']}", patch, headers=reader), "baremetal:node:update_extra")
    assert api.patch(f"/v1/nodes/{mine['uuid']}", patch, headers=member).status_code == 200
    # a project admin creates a node its project then owns; a member cannot
    denied(create(api, member), "baremetal:node:create")
    made = create(api, project_admin)
    assert made.status_code == 201, made.text
    assert made.json()["owner"] == PROJECT


def test_a_request_without_a_valid_token_is_refused(api: Api) -> None:
    forged = {"X-Roles": "admin", "OpenStack-System-Scope": "all", "X-Identity-Status": "Confirmed"}
    assert create(api, forged).status_code == 401
    assert create(api, {"X-Auth-Token": uuid.uuid4().hex}).status_code == 401
