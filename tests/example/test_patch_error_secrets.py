"""Defects found by trying the service from outside, as a client would."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from werkzeug.test import Client

from baremetal_service.db.models import Node
from baremetal_service.deploy import build_app

LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}


@pytest.mark.parametrize(
    "patch",
    [
        # jsonpointer: "member 'absent' not found in {...the stored driver_info...}"
        [{"op": "replace", "path": "/driver_info/absent/x", "value": 1}],
        [{"op": "add", "path": "/driver_info/bmc/absent/x", "value": 1}],
        [{"op": "remove", "path": "/instance_info/absent/x"}],
        [{"op": "replace", "path": "/driver_info/ipmi_password/x", "value": 1}],  # into a string
        [{"op": "add", "path": "/driver_info/consoles/7/x", "value": 1}],
    ],
)
def test_a_patch_that_cannot_apply_does_not_quote_the_stored_secrets(database_url: str, patch: list) -> None:
    """A PATCH whose path misses (400 request.invalid-patch) says where, without quoting
    the stored object it missed in: jsonpointer's message carries the whole object,
    secrets in clear."""
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        body = {
            "driver": "fake-hardware",
            "driver_info": {"ipmi_password": "sekrit-1", "bmc": {"password": "sekrit-2"},
                            "consoles": [{"passwd": "sekrit-3"}], "url": "http://u:sekrit-4@h/x"},
            "instance_info": {"configdrive": "sekrit-5", "image_source": "http://g:sekrit-6@h/i"},
        }  # fmt: skip
        uuid = client.post("/v1/nodes", json=body, headers=LATEST).json["uuid"]
        resp = client.patch(f"/v1/nodes/{uuid}", json=patch, headers=LATEST)
        assert resp.status_code == 400, resp.get_data()
        assert resp.json["errors"][0]["code"] == "request.invalid-patch"
        assert b"sekrit" not in resp.get_data(), resp.get_data()
    finally:
        app.close()


def test_a_volume_target_patch_that_cannot_apply_does_not_quote_its_secrets(database_url: str) -> None:
    """The same for the other resources' PATCH (a volume target's iSCSI CHAP password)."""
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        node = client.post("/v1/nodes", json={"driver": "fake-hardware"}, headers=LATEST).json["uuid"]
        with app.service.db.engine.begin() as conn:  # a volume target changes only while powered off
            conn.execute(sa.update(Node).where(Node.uuid == node).values(power_state="power off"))
        body = {"node_uuid": node, "volume_type": "iscsi", "volume_id": "v0", "boot_index": 0,
                "properties": {"auth_username": "u", "auth_password": "sekrit-v1"}}  # fmt: skip
        resp = client.post("/v1/volume/targets", json=body, headers=LATEST)
        assert resp.status_code == 201, resp.get_data()
        patch = [{"op": "replace", "path": "/properties/absent/x", "value": 1}]
        resp = client.patch(f"/v1/volume/targets/{resp.json['uuid']}", json=patch, headers=LATEST)
        assert resp.status_code == 400, resp.get_data()
        assert b"sekrit" not in resp.get_data(), resp.get_data()
    finally:
        app.close()


@pytest.mark.parametrize("path", ["/vifs/vif-1", "/vmedia", "/vmedia?device_types=cdrom"])
def test_an_if_match_detach_is_conditional(database_url: str, path: str) -> None:
    """The service declares that it enforces If-Match on every write (``enforces = *``),
    so a detach that carries one is checked against the node's etag: a stale one is 412,
    the current one is 204 -- never the middleware's 500 ``etag.precondition-not-enforced``
    after the detach ran."""
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        node = client.post("/v1/nodes", json={"driver": "fake-hardware"}, headers=LATEST)
        uuid, etag = node.json["uuid"], node.headers["ETag"]
        stale = client.delete(f"/v1/nodes/{uuid}{path}", headers={**LATEST, "If-Match": 'W/"stale"'})
        assert stale.status_code == 412, stale.get_data()
        assert stale.json["errors"][0]["code"] == "etag.precondition-failed"
        current = client.delete(f"/v1/nodes/{uuid}{path}", headers={**LATEST, "If-Match": etag})
        assert current.status_code == 204, current.get_data()
    finally:
        app.close()


def test_a_resource_class_412_has_the_code_of_every_other_412(database_url: str) -> None:
    """A client tells a stale etag by ``etag.precondition-failed``, whichever resource."""
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        assert client.put("/v1/resource_classes/CUSTOM_GOLD", headers=LATEST).status_code in (200, 201, 204)
        for method in ("PUT", "DELETE"):
            resp = client.open("/v1/resource_classes/CUSTOM_GOLD", method=method,
                               headers={**LATEST, "If-Match": 'W/"any"'})  # fmt: skip
            assert resp.status_code == 412, resp.get_data()
            assert resp.json["errors"][0]["code"] == "etag.precondition-failed"
        assert client.get("/v1/resource_classes/CUSTOM_GOLD", headers=LATEST).status_code == 200
    finally:
        app.close()
