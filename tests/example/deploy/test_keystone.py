"""``baremetal-service --auth-strategy keystone``: the command a deployer runs, as Ironic's.

The real command, with keystonemiddleware's auth_token configured from the
``[keystone_authtoken]`` of ``--config-file`` (tokens cached in a real memcached).  No
Keystone runs: a request without a token is refused before auth_token would ask one, and
the discovery documents and ``/healthcheck`` are served without a token.  The documented
configuration logs no warning.  Ironic's rules are listed by oslo.policy's own tools.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.servers import Server, baremetal_service, free_port

pytestmark = [pytest.mark.slow]

LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}


def write_config(path: Path, memcached: str) -> Path:
    """The configuration docs/production.md shows (Keystone on a loopback port nobody serves)."""
    keystone = f"http://127.0.0.1:{free_port()}/v3"
    path.write_text(
        "[keystone_authtoken]\n"
        f"www_authenticate_uri = {keystone}\n"
        f"auth_url = {keystone}\n"
        "auth_type = password\n"
        "username = baremetal\n"
        "password = secret\n"
        "project_name = service\n"
        "user_domain_name = Default\n"
        "project_domain_name = Default\n"
        f"memcached_servers = {memcached}\n"
        "\n[oslo_policy]\n"
        "enforce_scope = true\n"
        "enforce_new_defaults = true\n"
    )
    return path


def test_keystone_strategy_guards_the_api_and_leaves_discovery_open(
    tmp_path: Path, memcached_server: Server
) -> None:
    conf = write_config(tmp_path / "baremetal.conf", f"127.0.0.1:{memcached_server.port}")
    database = f"sqlite:///{tmp_path / 'service.db'}"
    args = (
        "--database",
        database,
        "--no-conductor",
        "--auth-strategy",
        "keystone",
        "--config-file",
        str(conf),
    )
    with baremetal_service(tmp_path, *args) as service:
        for path in ("/", "/v1", "/v1/", "/healthcheck"):
            resp = requests.get(service.url + path, headers=LATEST, timeout=10)
            assert resp.status_code == 200, (path, resp.text)
        assert requests.get(service.url + "/v1", timeout=10).json()["id"] == "v1"
        # no token: 401 and where to get one, whatever identity headers the client made up
        forged = {
            **LATEST,
            "X-Roles": "admin",
            "OpenStack-System-Scope": "all",
            "X-Identity-Status": "Confirmed",
        }
        for method, path in (("GET", "/v1/nodes"), ("POST", "/v1/nodes"), ("GET", "/v1/chassis")):
            resp = requests.request(method, service.url + path, headers=forged, json={}, timeout=10)
            assert resp.status_code == 401, (method, path, resp.text)
            assert resp.headers["WWW-Authenticate"].startswith("Keystone uri=")
    service.assert_no_traceback()
    log = service.output()
    assert "is not known to keystonemiddleware" not in log, log
    assert "in-process token cache" not in log, log
    assert "WARNING" not in log, log


def test_a_missing_configuration_file_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.conf"
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "baremetal_service.cli", "--database", f"sqlite:///{tmp_path / 'db'}",
         "--auth-strategy", "keystone", "--config-file", str(missing)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"baremetal-service: cannot start: keystone: the configuration file {str(missing)!r} does not exist"
    )


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("oslopolicy-sample-generator", '#"baremetal:node:create": "(role:admin and system_scope:all)'),
        ("oslopolicy-policy-generator", '"baremetal:node:list": "(role:reader) or (role:service)"'),
    ],
)
def test_oslo_policy_tools_list_the_rules(tool: str, expected: str) -> None:
    script = Path(sys.executable).parent / tool
    done = subprocess.run(
        [str(script), "--namespace", "baremetal"], capture_output=True, text=True, timeout=120
    )  # noqa: S603
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout, done.stdout[:2000]
    assert "baremetal:port:create" in done.stdout
