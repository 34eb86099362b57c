"""The client layer and bmctl against a real OpenStack Ironic 39.0 (not part of CI).

Ironic has no etags and ignores client tokens: the client must say so clearly, and
everything else must work.  Start an all-in-one Ironic 39.0 (SQLite, fake-hardware, noauth;
tests/test_ironic_hook.py installs and starts one that way), set ``PEER_DIR`` to the
directory it runs from, and point the tests at it::

    APIMW_TEST_IRONIC=http://127.0.0.1:6399 PEER_DIR=/path/to/ironic \
        python -m pytest tests/test_client_ironic.py

Without ``APIMW_TEST_IRONIC``, or without the ``PEER_DIR`` directory, every test skips.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from apimw.client_resources import EtagUnsupported, FeatureUnsupported

IRONIC = os.environ.get("APIMW_TEST_IRONIC", "")
pytestmark = pytest.mark.skipif(
    not IRONIC or not Path(os.environ.get("PEER_DIR", "/tmp/peer")).is_dir(),  # noqa: S108
    reason="real Ironic tests need APIMW_TEST_IRONIC=<url of a running Ironic 39.0> and its PEER_DIR",
)


@pytest.fixture
def client() -> Iterator[object]:
    pytest.importorskip("baremetal_service")
    from baremetal_service.bmctl.client import BaremetalClient

    with BaremetalClient(IRONIC) as made:
        yield made


def test_crud_works_and_etags_are_refused_clearly(client, caplog):
    nodes = client.nodes
    name = f"apimw-{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.WARNING, logger="apimw.client_resources"):
        node = nodes.create({"driver": "fake-hardware", "name": name})
    assert "replay is not guaranteed" in caplog.text
    assert node.client_token and node.replay_guaranteed is False and node.etag is None
    assert client.session.server_range().max_version < client.nodes.etag_version
    try:
        new = node.update([{"op": "add", "path": "/extra/a", "value": 1}])
        assert new.extra == {"a": 1}
        with pytest.raises(EtagUnsupported, match="does not support etags"):
            new.update([{"op": "add", "path": "/extra/a", "value": 2}], etag=True)
        with pytest.raises(EtagUnsupported):
            nodes.delete(node.uuid, etag='W/"x"')
        assert nodes.get(name).extra == {"a": 1}
        with pytest.raises(FeatureUnsupported, match="resource classes need microversion 1.117"):
            client.resource_classes.list()
        client.provision(name, "manage")
        client.wait_for(name, field="provision_state", expected="manageable",
                        target_field="target_provision_state", timeout=60)
    finally:
        nodes.delete(node.uuid)


def test_bmctl_against_ironic():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env["OS_ENDPOINT"] = IRONIC

    def bmctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "baremetal_service.bmctl", *args], capture_output=True,
                              text=True, env=env, timeout=120, check=False)

    name = f"apimw-{uuid.uuid4().hex[:8]}"
    made = bmctl("node", "create", "--driver", "fake-hardware", "--name", name, "-f", "value", "-c", "uuid")
    assert made.returncode == 0 and "replay is not guaranteed" in made.stderr
    try:
        refused = bmctl("node", "set", name, "--extra", "a=1", "--etag")
        assert refused.returncode == 1 and "does not support etags" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        assert bmctl("node", "set", name, "--extra", "a=1").returncode == 0
        assert bmctl("node", "manage", name, "--wait", "60").returncode == 0
        assert bmctl("node", "provide", name, "--wait", "60").returncode == 0
        assert bmctl("node", "power", "on", name, "--wait", "60").returncode == 0
        pinned = bmctl("--os-baremetal-api-version", "1.116", "node", "list")
        assert pinned.returncode == 1 and "maximum 1.115" in pinned.stderr
    finally:
        bmctl("node", "delete", name)
