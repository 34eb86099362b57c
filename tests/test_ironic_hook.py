"""Real OpenStack Ironic 39.0, unchanged, with apimw enabled through Ironic's own hook.

Ironic 39 loads ``[api] middleware = a,b,c`` from the stevedore namespace
``ironic.api.middleware`` (callables ``plugin(app) -> app``, first name innermost).
apimw's wheel declares ``apimw_microversion``, ``apimw_idempotency`` and ``apimw_etag``
there.  This module installs ``ironic==39.0.0`` from PyPI into a virtual environment of
its own (reused between runs: ``APIMW_TEST_IRONIC_VENV``, default ``build/ironic-venv``),
installs apimw's built wheel into it (``APIMW_TEST_WHEELS`` under scripts/test, else built
here), and starts one all-in-one Ironic (SQLite, noauth, fake-hardware, loopback) for the
module with the ``conf`` blocks of docs/adopting.md as its configuration: the
``ironic.conf`` block appended to the deployment's own ironic.conf, the
``ironic.conf.d/`` blocks in a ``--config-dir``, so the middlewares must read the host's
whole configuration object, not one file.  A failed install is a failure, not a skip.

openstacksdk's functional suite through this Ironic is not run here: 3-6 minutes, and
the all-in-one Ironic on SQLite fails allocation tests of its own on a loaded machine;
docs/adopting.md has the commands and the figures.

What a user of that Ironic checks: a retried POST is replayed (one node), the same token
with another body gets the documented mismatch status (and openstacksdk gives up at once),
8 concurrent same-token POSTs make one node, ``latest`` is labelled *and served* at the
configured ``max_version``, and an If-Match write Ironic cannot enforce is refused before
Ironic applies it.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.servers import HOST, Server, free_port, make_workdir

REPO = Path(__file__).resolve().parents[1]
ADOPTING = REPO / "docs" / "adopting.md"
IRONIC_VERSION = "39.0.0"
#: Ironic 39.0's own maximum microversion
IRONIC_MAX = (1, 115)
VENV = Path(os.environ.get("APIMW_TEST_IRONIC_VENV", REPO / "build" / "ironic-venv"))

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]  # one Ironic venv and server

# -- the configuration: an all-in-one deployment's base + the doc's blocks -----------------------

#: Minimum for an all-in-one Ironic to start and run nodes without hardware, neutron or
#: keystone (the peers script's configuration, found by reading Ironic's start-up errors).
BASE_CONF = """\
[DEFAULT]
auth_strategy = noauth
rpc_transport = none
host = apimw-ironic
enabled_hardware_types = fake-hardware
enabled_bios_interfaces = fake,no-bios
enabled_boot_interfaces = fake
enabled_console_interfaces = fake,no-console
enabled_deploy_interfaces = fake
enabled_firmware_interfaces = fake,no-firmware
enabled_inspect_interfaces = fake,no-inspect
enabled_management_interfaces = fake
enabled_network_interfaces = noop
enabled_power_interfaces = fake
enabled_raid_interfaces = fake,no-raid
enabled_rescue_interfaces = fake,no-rescue
enabled_storage_interfaces = fake,noop
enabled_vendor_interfaces = fake,no-vendor
default_network_interface = noop
use_stderr = true

[api]
host_ip = {host}
port = {port}

[database]
connection = sqlite:///{workdir}/ironic.db

[dhcp]
dhcp_provider = none

[conductor]
automated_clean = false

[oslo_concurrency]
lock_path = {workdir}/locks
"""

_CONF_FENCE = re.compile(r"^```conf\s*\n(.*?)^```\s*$", re.M | re.S)

#: the files docs/adopting.md's conf blocks are (named on each block's first line)
MAIN = "/etc/ironic/ironic.conf"
GROUPS = "/etc/ironic/ironic.conf.d/apimw.conf"
CAP = "/etc/ironic/ironic.conf.d/max-version.conf"  # the optional one: max_version below Ironic's


def doc_conf_blocks() -> dict[str, str]:
    """docs/adopting.md's ``conf`` blocks by file, in the order Ironic reads them.

    ironic.conf (``--config-file``) first, then the ``--config-dir`` files by name.
    """
    blocks: dict[str, str] = {}
    for text in _CONF_FENCE.findall(ADOPTING.read_text(encoding="utf-8")):
        first = text.splitlines()[0]
        match = re.match(r"#\s*(/etc/ironic/\S+)", first)
        assert match, f"docs/adopting.md: a conf block must name its file on its first line: {first!r}"
        assert match.group(1) not in blocks, f"docs/adopting.md: two blocks for {match.group(1)}"
        blocks[match.group(1)] = text
    return dict(sorted(blocks.items(), key=lambda item: (item[0] != MAIN, item[0])))


def _ini_value(text: str, group: str, key: str) -> str | None:
    section = re.search(rf"^\[{re.escape(group)}\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = section and re.search(rf"^{re.escape(key)}\s*=\s*(\S+)", section.group(1), re.M)
    return found.group(1) if found else None


def configured(group: str, key: str, blocks: dict[str, str]) -> str:
    """The value Ironic's configuration ends with: that of the last file (read order) setting it."""
    values = [v for text in blocks.values() if (v := _ini_value(text, group, key)) is not None]
    assert values, f"no {key} in [{group}] of {list(blocks)}"
    return values[-1]


# -- Ironic's install and the apimw wheel ----------------------------------------------------


def _pip(python: Path, *args: str, timeout: float = 900) -> None:
    result = subprocess.run(  # noqa: S603 - our venv's pip, fixed arguments
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"pip install {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


def _installed_ironic(python: Path) -> str | None:
    if not python.exists():
        return None
    result = subprocess.run(  # noqa: S603 - our venv's interpreter
        [str(python), "-c", "import importlib.metadata as m; print(m.version('ironic'))"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    return result.stdout.strip() if result.returncode == 0 else None


def _apimw_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("APIMW_TEST_WHEELS")
    if where:
        folder = Path(where)
    else:
        folder = tmp_path_factory.mktemp("apimw-wheel")
        subprocess.run(  # noqa: S603 - our interpreter's pip, building this repository
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
             str(folder), str(REPO)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    (wheel,) = folder.glob("apimw-*.whl")
    return wheel


@pytest.fixture(scope="module")
def ironic_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ironic==39.0.0 from PyPI and this apimw's wheel (no Ironic code changed)."""
    python = VENV / "bin" / "python"
    if _installed_ironic(python) != IRONIC_VERSION:
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=120)  # noqa: S603
        # --no-compile: byte-compiling all of Ironic's dependencies doubles the install time;
        # Ironic's start compiles only what it imports
        _pip(python, "--no-compile", f"ironic=={IRONIC_VERSION}")
        assert _installed_ironic(python) == IRONIC_VERSION
    # exactly this build of apimw, whatever the venv held before (apimw needs nothing Ironic lacks)
    _pip(python, "--no-deps", "--force-reinstall", str(_apimw_wheel(tmp_path_factory)), timeout=120)
    return VENV


# -- one Ironic for the module ---------------------------------------------------------------


class IronicServer(Server):
    """``ironic`` (API + conductor in one process) with ``--config-file`` and ``--config-dir``."""

    start_timeout = 120.0  # ~10 s on an idle machine, much more on a loaded one

    def __init__(self, venv: Path, workdir: Path, blocks: dict[str, str]) -> None:
        super().__init__("ironic", free_port(), workdir)
        self.venv = venv
        self.blocks = blocks
        self.conf = workdir / "ironic.conf"
        self.conf_dir = workdir / "ironic.conf.d"

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def write_config(self) -> None:
        base = BASE_CONF.format(workdir=self.workdir, host=HOST, port=self.port)
        self.conf_dir.mkdir(exist_ok=True)
        for path, text in self.blocks.items():
            if path == "/etc/ironic/ironic.conf":
                base += "\n" + text
            else:
                assert path.startswith("/etc/ironic/ironic.conf.d/"), f"where does {path} go?"
                (self.conf_dir / Path(path).name).write_text(text)
        self.conf.write_text(base)

    def command(self) -> list[str]:
        # written here: a start retried on another port (see Server.start) needs it in the file
        self.write_config()
        if not (self.workdir / "ironic.db").exists():
            subprocess.run(  # noqa: S603 - the venv's own tool
                [str(self.venv / "bin" / "ironic-dbsync"), "--config-file", str(self.conf), "create_schema"],
                check=True, capture_output=True, timeout=300,
            )  # fmt: skip
        return [str(self.venv / "bin" / "ironic"), "--config-file", str(self.conf),
                "--config-dir", str(self.conf_dir)]  # fmt: skip

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/", timeout=2) as answer:  # noqa: S310 - loopback
                return bool(answer.status == 200)
        except OSError:
            return False

    def log_tail(self) -> str:
        log = self.workdir / f"{self.name}.log"  # Ironic logs to stderr, Server keeps it here
        return log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)"


@pytest.fixture(scope="module")
def ironic(ironic_venv: Path) -> Iterator[IronicServer]:
    """The wrapped Ironic the tests share (each test uses nodes of its own), with every block."""
    server = IronicServer(ironic_venv, make_workdir("ironic"), doc_conf_blocks())
    try:
        server.start()
    except RuntimeError as exc:
        message = f"{exc}\n{server.log_tail()}"
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)
        raise RuntimeError(message) from None
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


# -- helpers ---------------------------------------------------------------------------------

#: a version every test may use (at or below the documented max_version)
V = {"X-OpenStack-Ironic-API-Version": "1.80"}


def post_node(base: str, body: dict[str, Any], token: str | None = None) -> requests.Response:
    headers = {**V, **({"X-Client-Token": token} if token else {})}
    return requests.post(f"{base}/v1/nodes", json=body, headers=headers, timeout=60)


def nodes_named(base: str, name: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{base}/v1/nodes", params={"fields": "uuid,name"}, headers=V, timeout=60)
    assert answer.status_code == 200, answer.text
    return [n for n in answer.json()["nodes"] if n["name"] == name]


def new_node(base: str, **fields: Any) -> dict[str, Any]:
    answer = post_node(base, {"driver": "fake-hardware", "name": f"apimw-{uuid.uuid4().hex[:12]}", **fields})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def error_code(answer: requests.Response) -> str:
    """The stable code of an apimw error, after checking it is in Ironic's envelope (the
    ``error_message`` that python-ironicclient and openstacksdk parse)."""
    assert answer.headers["Content-Type"].startswith("application/json"), answer.headers
    body = answer.json()
    assert json.loads(body["error_message"])["faultstring"], body
    return str(body["errors"][0]["code"])


def version_tuple(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def test_the_wheel_declares_the_three_hook_entry_points() -> None:
    import apimw.etag
    import apimw.idempotency
    import apimw.microversion

    found = {ep.name: ep for ep in entry_points(group="ironic.api.middleware") if ep.dist
             and ep.dist.name == "apimw"}  # fmt: skip
    assert sorted(found) == ["apimw_etag", "apimw_idempotency", "apimw_microversion"]
    assert found["apimw_etag"].load() is apimw.etag.oslo_hook
    assert found["apimw_idempotency"].load() is apimw.idempotency.ironic_hook
    assert found["apimw_microversion"].load() is apimw.microversion.oslo_hook


def test_the_documented_configuration_spans_two_sources() -> None:
    blocks = doc_conf_blocks()
    assert list(blocks) == [MAIN, GROUPS, CAP]
    # the hook and one group in ironic.conf, the others only in --config-dir files
    assert _ini_value(blocks[MAIN], "api", "middleware") == "apimw_etag,apimw_idempotency,apimw_microversion"
    assert _ini_value(blocks[MAIN], "apimw_idempotency", "scope") == "shared"
    assert "[apimw_idempotency]" not in blocks[GROUPS] + blocks[CAP]
    assert "[apimw_microversion]" in blocks[GROUPS] and "[apimw_microversion]" not in blocks[MAIN]
    # the full range by default; the optional file lowers it (the later file wins)
    assert version_tuple(_ini_value(blocks[GROUPS], "apimw_microversion", "max_version") or "") == IRONIC_MAX
    assert version_tuple(configured("apimw_microversion", "max_version", blocks)) < IRONIC_MAX


def test_a_retried_post_is_replayed_and_makes_one_node(ironic: IronicServer) -> None:
    token = str(uuid.uuid4())
    body = {"driver": "fake-hardware", "name": f"apimw-replay-{token[:8]}"}
    first = post_node(ironic.url, body, token)
    assert first.status_code == 201, first.text
    assert "Idempotent-Replayed" not in first.headers
    again = post_node(ironic.url, body, token)
    assert again.status_code == 201, again.text
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    # a replay is a new request: Ironic's request id and its compat header are fresh
    for header in ("X-OpenStack-Request-Id", "OpenStack-Request-Id"):
        assert again.headers[header].startswith("req-"), again.headers
        assert again.headers[header] != first.headers[header], header
    assert [n["uuid"] for n in nodes_named(ironic.url, body["name"])] == [first.json()["uuid"]]


def test_the_same_token_with_another_body_gets_the_mismatch_status(ironic: IronicServer) -> None:
    token = str(uuid.uuid4())
    name = f"apimw-first-{token[:8]}"
    first = post_node(ironic.url, {"driver": "fake-hardware", "name": name}, token)
    assert first.status_code == 201, first.text
    other = post_node(ironic.url, {"driver": "fake-hardware", "name": f"apimw-other-{token[:8]}"}, token)
    mismatch_status = configured("apimw_idempotency", "mismatch_status", doc_conf_blocks())
    assert other.status_code == int(mismatch_status) == 422
    assert "Idempotent-Replayed" not in other.headers
    assert error_code(other) == "idempotency.fingerprint-mismatch"
    assert nodes_named(ironic.url, f"apimw-other-{token[:8]}") == []
    assert len(nodes_named(ironic.url, name)) == 1


# openstacksdk 4.x warns about its own internals (InfluxDB defaults); not ours to fix
@pytest.mark.serial  # measured against the clock
@pytest.mark.filterwarnings("ignore::openstack.warnings._RemovedInSDKWarning")
def test_openstacksdk_gives_up_at_once_on_a_reused_token(ironic: IronicServer) -> None:
    """openstacksdk retries a 409 from Ironic (five times, 15 s); the documented 422 it does not."""
    import openstack

    conn = openstack.connect(auth_type="none", baremetal_endpoint_override=ironic.url)
    try:
        token = str(uuid.uuid4())
        headers = {**V, "X-Client-Token": token}
        made = conn.baremetal.post("/nodes", json={"driver": "fake-hardware"}, headers=headers)
        assert made.status_code == 201, made.text
        started = time.monotonic()
        other = {"driver": "fake-hardware", "name": "other"}
        refused = conn.baremetal.post("/nodes", json=other, headers=headers)
        assert refused.status_code == 422, refused.text
        assert time.monotonic() - started < 10  # a 409 it would retry with back-off for 15.5 s
    finally:
        conn.close()


def test_eight_concurrent_posts_with_one_token_make_one_node(ironic: IronicServer) -> None:
    token = str(uuid.uuid4())
    body = {"driver": "fake-hardware", "name": f"apimw-race-{token[:8]}"}
    barrier = threading.Barrier(8, timeout=30)

    def one(_: int) -> requests.Response:
        barrier.wait()
        return post_node(ironic.url, body, token)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(8)))
    statuses = sorted(a.status_code for a in answers)
    # the one that ran, replays of it, and 409 "in flight" for those that came while it ran
    assert set(statuses) <= {201, 409}, [(a.status_code, a.text) for a in answers]
    created = [a for a in answers if a.status_code == 201]
    assert len([a for a in created if "Idempotent-Replayed" not in a.headers]) == 1
    assert {a.json()["uuid"] for a in created} == {created[0].json()["uuid"]}
    assert [n["uuid"] for n in nodes_named(ironic.url, body["name"])] == [created[0].json()["uuid"]]


def test_latest_is_labelled_and_served_at_the_configured_max_version(ironic: IronicServer) -> None:
    max_version = configured("apimw_microversion", "max_version", doc_conf_blocks())
    assert version_tuple(max_version) < IRONIC_MAX
    node = new_node(ironic.url)
    url = f"{ironic.url}/v1/nodes/{node['uuid']}"
    latest = requests.get(url, headers={"X-OpenStack-Ironic-API-Version": "latest"}, timeout=60)
    assert latest.status_code == 200, latest.text
    assert latest.headers["X-OpenStack-Ironic-API-Version"] == max_version
    assert latest.headers["OpenStack-API-Version"] == f"baremetal {max_version}"
    assert latest.headers["X-OpenStack-Ironic-API-Maximum-Version"] == max_version
    served = latest.json()
    # served, not only labelled: 1.95's field is there, 1.104's and 1.109's (newer than 1.100) are not
    assert "disable_power_off" in served
    assert "instance_name" not in served and "health" not in served
    pinned = requests.get(url, headers={"X-OpenStack-Ironic-API-Version": max_version}, timeout=60)
    assert set(pinned.json()) == set(served)
    # Ironic itself would serve 1.115; apimw refuses above its max
    above = requests.get(url, headers={"X-OpenStack-Ironic-API-Version": "1.115"}, timeout=60)
    assert above.status_code == 406, above.text
    assert error_code(above) == "microversion.unsupported"


def test_an_if_match_patch_ironic_cannot_enforce_is_refused_unapplied(ironic: IronicServer) -> None:
    node = new_node(ironic.url, description="before")
    url = f"{ironic.url}/v1/nodes/{node['uuid']}"
    patch = [{"op": "replace", "path": "/description", "value": "after"}]
    refused = requests.patch(url, json=patch, headers={**V, "If-Match": 'W/"0123456789abcdef"'}, timeout=60)
    assert refused.status_code == 400, refused.text
    assert error_code(refused) == "etag.if-match-unsupported"
    assert requests.get(url, headers=V, timeout=60).json()["description"] == "before"
    # a write without If-Match is Ironic's as before
    done = requests.patch(url, json=patch, headers=V, timeout=60)
    assert done.status_code == 200, done.text
    assert requests.get(url, headers=V, timeout=60).json()["description"] == "after"
