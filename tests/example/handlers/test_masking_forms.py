"""Secrets in the spellings a masker easily misses: a scheme-relative URL's password, an
``auth`` query parameter, and keys named ``creds``, ``pw`` and ``auth``.

Each form goes into a node's ``driver_info`` and ``instance_info``; the node as GET shows
it must not hold the secret (``sekrit``), and what is no secret stays readable.
"""

from __future__ import annotations

from typing import Any

import pytest
from werkzeug.test import Client

from baremetal_service.deploy import build_app
from baremetal_service.handlers import masking

LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}

FORMS = [
    pytest.param(
        "deploy_kernel",
        "//admin:sekrit-1@images.example.com/kernel",
        "//admin:******@images.example.com/kernel",
        id="scheme-relative-url",
    ),
    pytest.param(
        "deploy_ramdisk",
        "https://images.example.com/ramdisk?auth=sekrit-2&arch=x86_64",
        "https://images.example.com/ramdisk?auth=******&arch=x86_64",
        id="auth-query-value",
    ),
    pytest.param("creds", {"user": "admin", "password": "sekrit-3"}, "******", id="key-creds"),
    pytest.param("bmc_pw", "sekrit-4", "******", id="key-pw"),
    pytest.param("pw", "sekrit-5", "******", id="key-pw-alone"),
    pytest.param("auth", "Basic c2Vrcml0LTY=sekrit-6", "******", id="key-auth"),
    pytest.param(
        "bmc", {"auth": {"user": "root", "key": "sekrit-7"}}, {"auth": "******"}, id="key-auth-nested"
    ),
]

#: Near misses: kept as they are.
PLAIN: dict[str, Any] = {
    "redfish_auth_type": "basic",
    "author": "ops team",
    "pwr_cycle_delay": 3,
    "docs": "https://example.com/guide?author=ops",
    "path": "//not-a-url-without-credentials/",
}


@pytest.mark.parametrize(("key", "value", "shown"), FORMS)
def test_each_form_is_masked(database_url: str, key: str, value: Any, shown: Any) -> None:
    app = build_app(database_url, "memory://", run_conductor=False)
    try:
        client = Client(app)
        body = {
            "driver": "fake-hardware",
            "driver_info": {key: value, **PLAIN},
            "instance_info": {key: value},
        }
        created = client.post("/v1/nodes", json=body, headers=LATEST)
        assert created.status_code == 201, created.get_data()
        node = client.get(f"/v1/nodes/{created.json['uuid']}", headers=LATEST)
        for resp in (created, node):
            assert b"sekrit" not in resp.get_data()
            assert resp.json["driver_info"] == {key: shown, **PLAIN}
            assert resp.json["instance_info"] == {key: shown}
        assert masking.MASK in str(shown)
    finally:
        app.close()
