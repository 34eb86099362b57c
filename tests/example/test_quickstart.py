"""The README's quick start: ``baremetal-service`` with no options, as a newcomer runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.servers import HOST, free_port


def test_quickstart_service_serves_the_healthcheck(tmp_path: Path) -> None:
    """docs/production.md: /healthcheck is served by default, unauthenticated, outside the API."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    log = tmp_path / "service.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "baremetal_service.cli", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        resp = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                resp = requests.get(url + "/healthcheck", headers={"Accept": "application/json"}, timeout=5)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        assert resp is not None, log.read_text()
        assert resp.status_code == 200, resp.text
        assert resp.json()["reasons"] == ["database: OK; idempotency store: OK"]
        # no microversion, auth or request id layer in front of it: a bad version is no concern of it
        spam = {"X-OpenStack-Ironic-API-Version": "spam"}
        head = requests.head(url + "/healthcheck", headers=spam, timeout=5)
        assert head.status_code == 204
        # and the API next to it still answers as before
        nodes = requests.get(url + "/v1/nodes", timeout=5)
        assert nodes.status_code == 200 and nodes.json() == {"nodes": []}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text()
