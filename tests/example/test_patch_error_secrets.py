"""A PATCH that cannot apply says where it missed, without quoting the stored object (its secrets)."""

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
