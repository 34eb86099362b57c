"""The document renderer (handlers/serialize.py) gives, byte for byte, what its per-field
predecessor gave: every microversion, the default list fields, ``?fields=`` selections,
detail documents, datetimes, defaults, masked driver_info, the pre-1.2 provision state,
objects as well as dicts; and the API's list, detail and one-node answers (every version,
every scope) are those documents.

:func:`_reference` is the renderer this module had before (commit e31dda9): one Python
step per field, following the plan's ``(name, action, default)`` list.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from werkzeug.test import Client

from apimw import Version
from baremetal_service import versions
from baremetal_service.db.models import UTCDateTime
from baremetal_service.deploy import build_app
from baremetal_service.handlers import serialize
from baremetal_service.objects.chassis import CHASSIS_FIELDS
from baremetal_service.objects.nodes import NODE_FIELDS, NODE_LIST_FIELDS, NODE_SUBLINKS
from baremetal_service.objects.portgroups import PORTGROUP_FIELDS
from baremetal_service.objects.ports import PORT_FIELDS

BASE = "http://127.0.0.1:6385"
LOCAL = "http://localhost"  # the test client's
ALL_VERSIONS = [Version(1, minor) for minor in range(1, versions.MAX_VERSION.minor + 1)]


def _reference(
    plan: serialize.Plan, obj: Any, base: str, resource: str, secrets: frozenset[str] = frozenset()
) -> dict[str, Any]:
    actions = plan.actions
    source = obj if isinstance(obj, dict) else {n: getattr(obj, n, None) for n, _a, _d in actions}
    value_of = source.get
    uuid = str(value_of("uuid"))
    doc: dict[str, Any] = {}
    for name, action, default in actions:
        if action in (serialize._PLAIN, serialize._PLAIN_COPY):
            value = value_of(name)
            if value is None:
                doc[name] = default.copy() if action == serialize._PLAIN_COPY else default
            elif not isinstance(value, dt.datetime):
                doc[name] = value
            else:
                doc[name] = value.isoformat()
        elif action == serialize._LINKS:
            doc[name] = serialize.links(base, resource, uuid)
        elif action == serialize._SUBLINKS:
            doc[name] = serialize.links(base, resource, uuid, name)
        elif action == serialize._MASKED:
            doc[name] = serialize.mask_field(name, value_of(name), secrets)
        else:
            value = value_of(name)
            doc[name] = None if value == "available" else value
    return doc


def _same(new: dict[str, Any], old: dict[str, Any]) -> None:
    """Equal and in the same key order at every level (the JSON bytes are the same)."""
    assert json.dumps(new) == json.dumps(old)
    assert new == old


def _node_sources() -> list[Any]:
    when = dt.datetime(2026, 11, 22, 10, 37, 50, 208515)
    full = {name: None for name in NODE_FIELDS.names}
    return [
        {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"},  # every other field absent: defaults
        dict(full, uuid="2be26c0b-03f2-4d2e-ae87-c02d7f33c123"),  # every field None
        {  # a node as the data API returns it
            "uuid": "3be26c0b-03f2-4d2e-ae87-c02d7f33c123", "name": "n-3", "driver": "ipmi",
            "driver_info": {"ipmi_password": "p", "ipmi_address": "10.0.0.1", "x_token": "",
                            "deploy_key": None, "secret_thing": 3},
            "extra": {"a": [1, {"b": None}]}, "properties": {"cpus": 4}, "traits": ["CUSTOM_A"],
            "provision_state": "available", "power_state": "power on", "maintenance": True,
            "created_at": "2026-11-22T10:37:50.208515+00:00", "updated_at": None,
            "conductor_group": "g", "conductor": "host-1", "chassis_uuid": None, "etag": 'W/"ab"',
            "retired": None, "description": "", "network_data": {"links": []},
        },  # fmt: skip
        {  # datetimes as datetime objects (and a subclass), other odd types
            "uuid": "4be26c0b-03f2-4d2e-ae87-c02d7f33c123", "created_at": when,
            "updated_at": type("Sub", (dt.datetime,), {})(2026, 1, 2, 3, 4, 5),
            "inspection_started_at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
            "provision_updated_at": when.isoformat(), "extra": {"t": (1, 2)}, "name": ("tuple",),
            "provision_state": "active", "driver_info": {}, "traits": [],
        },  # fmt: skip
    ]


def test_node_documents_render_as_before_at_every_version_and_field_selection() -> None:
    rng = random.Random(13)
    sources = _node_sources()
    sources.append(SimpleNamespace(**sources[2]))  # an object: its attributes
    sources.append(type("D", (dict,), {})(sources[3]))  # a dict subclass
    secrets = frozenset({"ipmi_address"})
    checked = 0
    for version in ALL_VERSIONS:
        visible = serialize.visible("node", version)
        selections: list[list[str] | None] = [None, [f for f in NODE_LIST_FIELDS if f in visible]]
        selections += [rng.sample(visible, min(len(visible), k)) for k in (1, 3, 8, 20)]
        selections += [["driver_info", "provision_state", "uuid"], ["links"], ["ports", "states", "name"]]
        for fields in selections:
            plan = serialize._plan("node", version, None if fields is None else tuple(fields),
                                   NODE_SUBLINKS)  # fmt: skip
            render = serialize.node_renderer(version, BASE, fields)
            render_documents = serialize.node_renderer(version, BASE, fields, iso_strings=True)
            for n, (source, secret) in enumerate(itertools.product(sources, (frozenset(), secrets))):
                old = _reference(plan, source, BASE, "nodes", secret)
                _same(serialize.node_doc(source, version, BASE, fields, secret), old)
                _same(render(source, secret), old)
                if n // 2 in (0, 1, 2):  # documents as the data API gives them: no datetime objects
                    _same(render_documents(source, secret), old)
                checked += 1
    assert checked > 2000


@pytest.mark.parametrize("kind,resource,sublinks", [
    ("port", "ports", ()), ("portgroup", "portgroups", ("ports",)), ("chassis", "chassis", ("nodes",)),
])  # fmt: skip
def test_other_documents_render_as_before(kind: str, resource: str, sublinks: tuple[str, ...]) -> None:
    fields_of = {"port": PORT_FIELDS, "portgroup": PORTGROUP_FIELDS,
                 "chassis": CHASSIS_FIELDS}[kind].names  # fmt: skip
    sources: list[Any] = [
        {"uuid": "5be26c0b-03f2-4d2e-ae87-c02d7f33c123"},
        {name: None for name in fields_of} | {"uuid": "6be26c0b-03f2-4d2e-ae87-c02d7f33c123"},
        {"uuid": "7be26c0b-03f2-4d2e-ae87-c02d7f33c123", "address": "52:54:00:00:00:01",
         "extra": {"k": 1}, "created_at": dt.datetime(2026, 1, 1), "pxe_enabled": False,
         "local_link_connection": {"switch_id": "x"}, "description": "d", "name": "p"},
    ]  # fmt: skip
    sources.append(SimpleNamespace(**sources[2]))
    for version in ALL_VERSIONS:
        for fields in (None, ["uuid"], ["extra", "created_at", "links"], list(fields_of[:5])):
            selected = None if fields is None else tuple(fields)
            plan = serialize._plan(kind, version, selected, frozenset(sublinks))
            for source in sources:
                old = _reference(plan, source, BASE, resource)
                _same(serialize.simple_doc(kind, resource, source, version, BASE, fields, sublinks), old)


def test_the_api_answers_lists_detail_and_nodes_with_those_documents(database_url: str) -> None:
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        latest = {"X-OpenStack-Ironic-API-Version": "latest"}
        for i in range(7):
            body: dict[str, Any] = {"driver": "fake-hardware", "name": f"n{i}", "extra": {"i": i},
                                    "driver_info": {"ipmi_password": "pw", "ipmi_address": "a"}}  # fmt: skip
            assert client.post("/v1/nodes", json=body, headers=latest).status_code == 201
        db, host = app.service.db, app.service.drivers.host
        secrets = app.service.secret_fields("fake-hardware")
        stored = [dict(n, conductor=host) for n in db.list_nodes(internal=False, filters={"children": False})]
        for version in (Version(1, 1), Version(1, 8), Version(1, 52), Version(1, 65), versions.MAX_VERSION):
            headers = {"X-OpenStack-Ironic-API-Version": str(version)}
            cases: list[tuple[str, list[str] | None]] = [
                ("/v1/nodes/detail", None),
                ("/v1/nodes", [f for f in NODE_LIST_FIELDS
                               if f in serialize.visible("node", version)]),  # fmt: skip
            ]
            if version >= versions.FIELDS_SELECTOR:
                cases.append(("/v1/nodes?fields=uuid,driver_info,extra,created_at", ["uuid", "driver_info",
                                                                                    "extra", "created_at"]))
            if version >= versions.CONDUCTORS:
                cases.append(("/v1/nodes?fields=name,conductor", ["name", "conductor"]))
            for path, fields in cases:
                resp = client.get(path, headers=headers)
                assert resp.status_code == 200, resp.get_data()
                plan = serialize._plan("node", version, None if fields is None else tuple(fields),
                                       NODE_SUBLINKS)  # fmt: skip
                expected = {"nodes": [_reference(plan, n, LOCAL, "nodes", secrets) for n in stored]}
                assert json.loads(resp.get_data()) == expected
                assert json.dumps(json.loads(resp.get_data())) == json.dumps(expected)  # and the key order
            resp = client.get(f"/v1/nodes/{stored[3]['uuid']}", headers=headers)
            plan = serialize._plan("node", version, None, NODE_SUBLINKS)
            one = db.get("node", stored[3]["uuid"], internal=False) | {"conductor": host}
            assert json.dumps(resp.json) == json.dumps(_reference(plan, one, LOCAL, "nodes", secrets))
    finally:
        app.close()


def test_one_node_answers_its_document_at_every_version_and_scope(database_url: str) -> None:
    """GET /v1/nodes/{ident}: by uuid (any case) and by name, unscoped and scoped to the owner,
    the lessee, another project (404), masked secrets, the pre-1.2 provision state, a datetime
    without microseconds; at every microversion the body is the reference document of the node
    (byte for byte) and the ETag header its etag."""
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        latest = {"X-OpenStack-Ironic-API-Version": "latest"}
        chassis = client.post("/v1/chassis", json={"description": "c"}, headers=latest).json["uuid"]
        uuids = []
        for i in range(3):
            body: dict[str, Any] = {"driver": "fake-hardware", "name": f"one-{i}"}
            if i:
                body.update(
                    driver_info={"ipmi_password": "pw", "ipmi_address": "a", "x_token": "", "n": None},
                    extra={"i": i, "l": [None, "é\u2028"]}, properties={"cpus": i}, owner="p-own",
                    lessee="p-lease", maintenance=True, chassis_uuid=chassis, description="d\x01é",
                )  # fmt: skip
            resp = client.post("/v1/nodes", json=body, headers=latest)
            assert resp.status_code == 201, resp.get_data()
            uuids.append(resp.json["uuid"])
        assert client.put(f"/v1/nodes/{uuids[1]}/traits", json={"traits": ["CUSTOM_A"]},
                          headers=latest).status_code == 204  # fmt: skip
        db, host = app.service.db, app.service.drivers.host
        secrets = app.service.secret_fields("fake-hardware")
        nodes = sa.table("nodes", sa.column("name"), sa.column("provision_state"),
                         sa.column("inspection_started_at", UTCDateTime()))  # fmt: skip
        with db.engine.begin() as conn:  # AVAILABLE (null before 1.2), a datetime without microseconds
            when = dt.datetime(2026, 1, 2, 3, 4, 5)
            conn.execute(nodes.update().where(nodes.c.name == "one-2").values(
                provision_state="available", inspection_started_at=when))  # fmt: skip
        missing = "5be26c0b-03f2-4d2e-ae87-c02d7f33c999"
        idents = [uuids[0], uuids[1].upper(), "one-1", "one-2", "one-9", missing]
        projects: list[str | None] = [None, "p-own", "p-lease", "p-other"]
        statuses: dict[tuple[str, str | None], int] = {}
        for version in ALL_VERSIONS:
            plan = serialize._plan("node", version, None, NODE_SUBLINKS)
            for ident, project in itertools.product(idents, projects):
                headers = {"X-OpenStack-Ironic-API-Version": str(version)}
                if project is not None:
                    headers["X-Project-Id"] = project
                resp = client.get(f"/v1/nodes/{ident}", headers=headers)
                statuses[(ident, project)] = resp.status_code
                if resp.status_code == 404:
                    assert resp.json["errors"][0]["detail"] == f"Node {ident} could not be found."
                    continue
                assert resp.status_code == 200, resp.get_data()
                stored = db.get("node", ident, internal=False) | {"conductor": host}
                expected = _reference(plan, stored, LOCAL, "nodes", secrets)
                assert json.dumps(json.loads(resp.get_data())) == json.dumps(expected)  # and the key order
                etag = stored["etag"] if version >= versions.ETAG_VERSION else None
                assert resp.headers.get("ETag") == etag
                if ident != uuids[0]:
                    assert resp.json["driver_info"]["ipmi_password"] == "******"
                if ident == "one-2":
                    state = resp.json["provision_state"]
                    assert state == (None if version < versions.AVAILABLE_STATE else "available")
        assert statuses[(uuids[0], None)] == statuses[("one-1", "p-own")] == 200
        assert statuses[("one-2", "p-lease")] == statuses[(uuids[1].upper(), "p-lease")] == 200
        assert statuses[(uuids[0], "p-own")] == statuses[("one-1", "p-other")] == 404
        assert statuses[("one-9", None)] == statuses[(missing, None)] == 404
        resp = client.get(f"/v1/nodes/{uuids[1]}?fields=uuid,driver_info", headers=latest)
        assert resp.json["driver_info"]["ipmi_password"] == "******" and set(resp.json) == {
            "uuid", "driver_info", "links"}  # fmt: skip
    finally:
        app.close()
