"""Secrets never leave the service in clear.

A node carries secrets under every spelling a driver uses, nested in objects and in
lists, inside URLs and free text, in ``driver_info``, ``instance_info`` (``configdrive``,
``image_url``) and ``driver_internal_info``.  Every secret value contains ``sekrit``, so
a test asserts the bytes of each answer that renders a node never contain it: GET one
node (with and without ``?fields``), lists with ``fields``, detail lists,
a chassis' node list, the POST and PATCH answers and the replayed POST -- at every
microversion.  What is not a
secret stays readable, and a client that sends a masked value back keeps the stored one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import sqlalchemy as sa
from oslo_utils import strutils
from werkzeug.test import Client

from apimw import Version
from baremetal_service import versions
from baremetal_service.db.models import Node
from baremetal_service.deploy import build_app
from baremetal_service.handlers import masking

ALL_VERSIONS = [Version(1, minor) for minor in range(1, versions.MAX_VERSION.minor + 1)]
LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}

#: (key, value) of driver_info: every value must come back masked.  Ironic's oslo-based
#: masking shows 6 of these 16 (passwd, pass, pwd, kg, ssh_key_contents, community,
#: credentials, a key in upper case...); the example masks all of them.
SECRET_DRIVER_INFO: list[tuple[str, Any]] = [
    ("ipmi_password", "sekrit-01"),
    ("redfish_password", "sekrit-02"),
    ("ilo_passwd", "sekrit-03"),
    ("drac_pass", "sekrit-04"),
    ("ssh_passphrase", "sekrit-05"),
    ("snmp_auth_key", "sekrit-06"),
    ("snmp_priv_key", "sekrit-07"),
    ("ssh_key_contents", "-----BEGIN OPENSSH PRIVATE KEY----- sekrit-08"),
    ("private_key", "sekrit-09"),
    ("ipmi_kg", "sekrit-10"),
    ("agent_token", "sekrit-11"),
    ("client_secret", "sekrit-12"),
    ("snmp_community", "sekrit-13"),
    ("irmc_credentials", {"user": "admin", "password": "sekrit-14"}),  # a whole object
    ("IPMI_PASSWORD", "sekrit-15"),
    ("xclarity_pwd", 16016),  # a number (sekrit-less: checked by value below)
]
#: Readable values: not secrets (kept as they are).
PLAIN_DRIVER_INFO: dict[str, Any] = {
    "ipmi_address": "10.0.0.1",
    "ipmi_username": "admin",
    "redfish_auth_type": "basic",
    "pxe_passthrough": "yes",
    "deploy_kernel": "https://images.example.com/kernel",
    "ipmi_port": 623,
}


def _driver_info() -> dict[str, Any]:
    return {
        **dict(SECRET_DRIVER_INFO),
        **PLAIN_DRIVER_INFO,
        # nested objects and lists, any depth
        "bmc": {"login": {"password": "sekrit-n1", "user": "root"}, "tls": [{"client_key": "sekrit-n2"}]},
        "consoles": [{"user": "u", "passwd": "sekrit-l1"}, [{"token": "sekrit-l2"}]],
        # credentials in URLs, and free text oslo's mask_password knows
        "deploy_ramdisk": "https://builder:sekrit-u1@images.example.com/ramdisk?x=1",
        "rescue_url": "http://images.example.com/r.iso?temp_url_sig=sekrit-u2&temp_url_expires=9",
        "kernel_append_params": "console=ttyS0 password=sekrit-t1 nofb",
        "empty_password": "",
        "unset_token": None,
    }


def _instance_info() -> dict[str, Any]:
    return {
        "image_source": "https://glance:sekrit-i1@glance.example.com/v2/images/1",
        "image_url": "https://swift.example.com/v1/AUTH_x/img?temp_url_sig=sekrit-i2",
        "configdrive": {"meta_data": {"public_keys": {"0": "ssh-rsa sekrit-i3"}}, "user_data": "sekrit-i4"},
        "rescue_password": "sekrit-i5",
        "root_gb": 10,
        "capabilities": {"boot_mode": "uefi"},
    }


def _internal_info() -> dict[str, Any]:
    return {
        "agent_secret_token": "sekrit-d1",
        "agent_url": "http://agent:sekrit-d2@10.0.0.9:9999",
        "clean_steps": [{"step": "erase", "args": {"password": "sekrit-d3"}}],
        "is_whole_disk_image": True,
    }


def _check_shown(node: dict[str, Any], internal_set: bool = True) -> None:
    """*node*'s masked fields as shown: secrets masked, the rest readable (*internal_set*:
    its ``driver_internal_info`` was written)."""
    info = node.get("driver_info")
    if info is not None:
        for key, _value in SECRET_DRIVER_INFO:
            assert info[key] == masking.MASK, key
        for key, value in PLAIN_DRIVER_INFO.items():
            assert info[key] == value, key
        assert info["bmc"] == {
            "login": {"password": "******", "user": "root"},
            "tls": [{"client_key": "******"}],
        }
        assert info["consoles"] == [{"user": "u", "passwd": "******"}, [{"token": "******"}]]
        assert info["deploy_ramdisk"] == "https://builder:******@images.example.com/ramdisk?x=1"
        assert info["rescue_url"] == "http://images.example.com/r.iso?temp_url_sig=******&temp_url_expires=9"
        assert info["kernel_append_params"] == "console=ttyS0 password=****** nofb"
        assert info["empty_password"] == "" and info["unset_token"] is None
    shown = node.get("instance_info")
    if shown is not None:
        assert shown == {
            "image_source": "https://glance:******@glance.example.com/v2/images/1",
            "image_url": "******",
            "configdrive": "******",
            "rescue_password": "******",
            "root_gb": 10,
            "capabilities": {"boot_mode": "uefi"},
        }
    internal = node.get("driver_internal_info")
    if internal is not None and internal_set:
        assert internal == {
            "agent_secret_token": "******",
            "agent_url": "http://agent:******@10.0.0.9:9999",
            "clean_steps": [{"step": "erase", "args": {"password": "******"}}],
            "is_whole_disk_image": True,
        }


def _clear(body: bytes) -> None:
    assert b"sekrit" not in body and b"16016" not in body, body[:2000]


def test_every_path_that_renders_a_node_masks_every_secret(database_url: str) -> None:
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        db = app.service.db
        chassis = client.post("/v1/chassis", json={}, headers=LATEST).json["uuid"]
        body = {"driver": "fake-hardware", "name": "vault", "driver_info": _driver_info(),
                "instance_info": _instance_info(), "chassis_uuid": chassis}  # fmt: skip
        created = client.post("/v1/nodes", json=body, headers={**LATEST, "X-Client-Token": "t-1"})
        assert created.status_code == 201, created.get_data()
        _clear(created.get_data())
        _check_shown(created.json, internal_set=False)
        replayed = client.post("/v1/nodes", json=body, headers={**LATEST, "X-Client-Token": "t-1"})
        assert replayed.headers.get("Idempotent-Replayed") == "true"
        assert replayed.get_data() == created.get_data()
        uuid = created.json["uuid"]
        with db.engine.begin() as conn:  # driver_internal_info is written by the conductor only
            conn.execute(
                sa.update(Node).where(Node.uuid == uuid).values(driver_internal_info=_internal_info())
            )
        # the stored node keeps every secret as it was given
        stored = app.service.get_node(uuid)
        assert stored["driver_info"] == _driver_info() and stored["instance_info"] == _instance_info()
        paths = [
            f"/v1/nodes/{uuid}",
            "/v1/nodes/vault",
            f"/v1/nodes/{uuid}?fields=uuid,driver_info,instance_info,driver_internal_info",
            "/v1/nodes?fields=uuid,driver_info,instance_info,driver_internal_info",
            "/v1/nodes?fields=driver_info",
            "/v1/nodes/detail",
            "/v1/nodes/detail?limit=1",
            "/v1/nodes?detail=true",
            f"/v1/chassis/{chassis}/nodes?fields=driver_info,instance_info",
        ]
        checked = 0
        for version in ALL_VERSIONS:
            headers = {"X-OpenStack-Ironic-API-Version": str(version)}
            for path in paths:
                resp = client.get(path, headers=headers)
                if resp.status_code != 200:  # (fields, detail=: too new at this version)
                    assert resp.status_code in (400, 406), (path, version, resp.get_data())
                    continue
                _clear(resp.get_data())
                doc = resp.json
                for node in doc.get("nodes", [doc]):
                    _check_shown(node)
                checked += 1
        assert checked > 750
        patched = client.patch(f"/v1/nodes/{uuid}", json=[{"op": "add", "path": "/extra/a", "value": 1}],
                               headers=LATEST)  # fmt: skip
        assert patched.status_code == 200, patched.get_data()
        _clear(patched.get_data())
        _check_shown(patched.json)
        assert patched.headers["ETag"] == patched.json["etag"]
    finally:
        app.close()


def test_a_masked_value_sent_back_keeps_the_stored_secret(database_url: str) -> None:
    """A client that reads a node and writes back what it read (replace /driver_info with
    the masked object, one value changed) keeps every stored secret, nested ones and URL
    passwords too; a value it really changes is written."""
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        body = {"driver": "fake-hardware", "driver_info": _driver_info(), "instance_info": _instance_info()}
        uuid = client.post("/v1/nodes", json=body, headers=LATEST).json["uuid"]
        shown = client.get(f"/v1/nodes/{uuid}", headers=LATEST).json
        info = shown["driver_info"]
        info["ipmi_address"] = "10.0.0.2"
        info["bmc"]["login"]["password"] = "new-one"
        instance = dict(shown["instance_info"], root_gb=20)
        patch = [{"op": "replace", "path": "/driver_info", "value": info},
                 {"op": "replace", "path": "/instance_info", "value": instance}]  # fmt: skip
        resp = client.patch(f"/v1/nodes/{uuid}", json=patch, headers=LATEST)
        assert resp.status_code == 200, resp.get_data()
        stored = app.service.get_node(uuid)
        expected = _driver_info()
        expected["ipmi_address"] = "10.0.0.2"
        expected["bmc"]["login"]["password"] = "new-one"
        assert stored["driver_info"] == expected
        assert stored["instance_info"] == dict(_instance_info(), root_gb=20)
    finally:
        app.close()


@pytest.mark.parametrize("key", sorted(strutils._SANITIZE_KEYS))
def test_every_key_oslo_masks_is_masked_here(key: str) -> None:
    """At least what Ironic masks: every key of oslo.utils' list (``mask_dict_password``),
    in any case, nested and in a list."""
    info = {key: "x", key.upper(): "y", "n": {key: "z"}, "l": [{key: "w"}]}
    assert masking.mask_driver_info(info) == {key: "******", key.upper(): "******", "n": {key: "******"},
                                              "l": [{key: "******"}]}  # fmt: skip
    assert strutils.mask_dict_password(info, "******")[key] == "******"


def test_masking_copies_only_what_it_changes() -> None:
    """A document without secrets is shown as it is (no copy); the stored one is never changed."""
    info = {"ipmi_address": "10.0.0.1", "nested": {"a": [1, {"b": "c"}]}}
    assert masking.mask_driver_info(info) is info
    secret = {"n": {"password": "p"}, "l": [{"token": "t"}], "k": "v"}
    shown = masking.mask_driver_info(secret)
    assert shown == {"n": {"password": "******"}, "l": [{"token": "******"}], "k": "v"}
    assert secret == {"n": {"password": "p"}, "l": [{"token": "t"}], "k": "v"}
    assert json.dumps(masking.mask_driver_info({"a": "x"}, frozenset({"a"}))) == '{"a": "******"}'


def test_volume_targets_deploy_templates_and_runbooks_mask_as_ironic_does(database_url: str) -> None:
    """Ironic also masks a volume target's ``properties`` (iSCSI CHAP ``auth_password``...)
    and the ``args`` of deploy template and runbook steps: every answer that shows them,
    and a PATCH that writes the shown value back keeps the stored secret."""
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        node = client.post("/v1/nodes", json={"driver": "fake-hardware"}, headers=LATEST).json["uuid"]
        with app.service.db.engine.begin() as conn:  # a volume target changes only while powered off
            conn.execute(sa.update(Node).where(Node.uuid == node).values(power_state="power off"))
        secret_args = {
            "settings": [{"name": "a", "value": "b"}],
            "password": "sekrit-s1",
            "bmc_token": "sekrit-s2",
        }
        created = {
            "volume/targets": {"node_uuid": node, "volume_type": "iscsi", "volume_id": "v0", "boot_index": 0,
                               "properties": {"auth_username": "u", "auth_password": "sekrit-v1",
                                              "target_portal": "iscsi://u:sekrit-v2@10.0.0.3:3260"}},
            "deploy_templates": {"name": "CUSTOM_VAULT", "steps": [
                {"interface": "bios", "step": "apply_configuration", "args": secret_args, "priority": 150}]},
            "runbooks": {"name": "CUSTOM_VAULT", "steps": [
                {"interface": "bios", "step": "apply_configuration", "args": secret_args, "order": 1}]},
        }  # fmt: skip
        for collection, body in created.items():
            resp = client.post(f"/v1/{collection}", json=body, headers=LATEST)
            assert resp.status_code == 201, resp.get_data()
            _clear(resp.get_data())
            uuid = resp.json["uuid"]
            for path in (
                f"/v1/{collection}/{uuid}",
                f"/v1/{collection}?detail=true",
            ):
                shown = client.get(path, headers=LATEST)
                assert shown.status_code == 200, (path, shown.get_data())
                _clear(shown.get_data())
            field = "properties" if collection == "volume/targets" else "steps"
            doc = client.get(f"/v1/{collection}/{uuid}", headers=LATEST).json
            if field == "steps":
                masked = {
                    "settings": [{"name": "a", "value": "b"}],
                    "password": "******",
                    "bmc_token": "******",
                }
                assert doc["steps"][0]["args"] == masked
            else:
                assert doc["properties"] == {"auth_username": "u", "auth_password": "******",
                                             "target_portal": "iscsi://u:******@10.0.0.3:3260"}  # fmt: skip
            patch = [{"op": "replace", "path": f"/{field}", "value": doc[field]},
                     {"op": "add", "path": "/extra/k", "value": 1}]  # fmt: skip
            patched = client.patch(f"/v1/{collection}/{uuid}", json=patch, headers=LATEST)
            assert patched.status_code == 200, patched.get_data()
            _clear(patched.get_data())
            kind = {"volume/targets": "target", "deploy_templates": "deploy_template", "runbooks": "runbook"}
            stored = app.service.crud[kind[collection]].get(uuid)
            if field == "steps":
                assert stored["steps"][0]["args"] == secret_args
            else:
                assert stored["properties"] == body["properties"]
    finally:
        app.close()
