"""If-Match on the writes beside PATCH: a detach and a resource class are conditional, and a
stale etag is ``etag.precondition-failed`` on each."""

from __future__ import annotations

import pytest
from werkzeug.test import Client

from baremetal_service.deploy import build_app

LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}


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
