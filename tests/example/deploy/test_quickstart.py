"""The README's quick start: ``baremetal-service`` with no options, as a newcomer runs it."""

from __future__ import annotations

from pathlib import Path

import requests

from tests.servers import baremetal_service


def test_quickstart_service_serves_the_healthcheck(tmp_path: Path) -> None:
    """docs/example/production.md: /healthcheck is served by default, unauthenticated, outside the API."""
    with baremetal_service(tmp_path, host=False, ready_path="/healthcheck") as service:
        url = service.url
        resp = requests.get(url + "/healthcheck", headers={"Accept": "application/json"}, timeout=5)
        assert resp.status_code == 200, resp.text
        assert resp.json()["reasons"] == ["database: OK; idempotency store: OK"]
        # no microversion, auth or request id layer in front of it: a bad version is no concern of it
        spam = {"X-OpenStack-Ironic-API-Version": "spam"}
        head = requests.head(url + "/healthcheck", headers=spam, timeout=5)
        assert head.status_code == 204
        # and the API next to it still answers as before
        nodes = requests.get(url + "/v1/nodes", timeout=5)
        assert nodes.status_code == 200 and nodes.json() == {"nodes": []}
    assert service.proc is not None and service.proc.returncode == 0, service.output()
