"""``bmctl`` end to end: the real command in a subprocess against the example service over HTTP.

One test per command family, outputs parsed back (json, yaml, csv, value), and the error
paths: one line on stderr, a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from baremetal_service.deploy import build_app
from tests.example.handlers.conftest import Server, reset
from tests.servers import free_port
from tests.test_client_resources import FaultProxy, Seen

pytest.importorskip("cliff")

LEGACY = "X-OpenStack-Ironic-API-Version"
STEPS = '[{"interface": "deploy", "step": "erase_devices"}]'


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db = tmp_path_factory.mktemp("bmctl") / "svc.db"
    server = Server(build_app(database_url=f"sqlite:///{db}", store_url="memory://")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def url(module_server: Server) -> str:
    reset(module_server.app)
    return module_server.url


class Run:
    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self) -> Any:
        return json.loads(self.out)


def bmctl(*args: str, endpoint: str | None, env: dict[str, str] | None = None) -> Run:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "BMCTL_"))}
    if endpoint is not None:
        clean["OS_ENDPOINT"] = endpoint
    clean.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "baremetal_service.bmctl", *args], capture_output=True,
                          text=True, env=clean, timeout=120, check=False)
    return Run(proc)


def ok(*args: str, endpoint: str | None) -> Run:
    run = bmctl(*args, endpoint=endpoint)
    assert run.rc == 0, (args, run.err)
    assert "Traceback" not in run.err
    return run


def fails(*args: str, endpoint: str | None, env: dict[str, str] | None = None) -> str:
    """Run a failing command; its stderr must be exactly one line, without a traceback."""
    run = bmctl(*args, endpoint=endpoint, env=env)
    assert run.rc != 0, (args, run.out)
    assert "Traceback" not in run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    return lines[0]


def server_node(url: str, ident: str) -> dict[str, Any]:
    resp = requests.get(f"{url}/v1/nodes/{ident}", headers={LEGACY: "1.117"}, timeout=10)
    with resp:
        return resp.json()  # type: ignore[no-any-return]


def new_node(url: str) -> str:
    run = ok("node", "create", "--driver", "fake-hardware", "-f", "value", "-c", "uuid", endpoint=url)
    return run.out.strip()


# -- nodes ------------------------------------------------------------------------------


def test_node_crud_with_etags_and_client_tokens(url):
    made = ok("node", "create", "--driver", "fake-hardware", "--name", "n1", "--property", "cpus=8",
              "--extra", "rack=r1", "--client-token", "tok-n1", "-f", "json", endpoint=url).json()
    assert made["name"] == "n1" and made["properties"] == {"cpus": 8} and made["extra"] == {"rack": "r1"}
    assert made["etag"].startswith('W/"')
    again = ok("node", "create", "--driver", "fake-hardware", "--name", "n1", "--property", "cpus=8",
               "--extra", "rack=r1", "--client-token", "tok-n1", "-f", "json", endpoint=url)
    assert again.json()["uuid"] == made["uuid"]  # replayed, not a duplicate-name 409
    assert "Replayed" in again.err and "tok-n1" in again.err
    auto = [ok("node", "create", "--driver", "fake-hardware", "-f", "value", "-c", "uuid",
               endpoint=url).out.strip() for _ in range(2)]
    assert len(set(auto)) == 2  # automatic tokens: one per create

    listed = ok("node", "list", "-f", "json", endpoint=url).json()
    assert {n["UUID"] for n in listed} == {made["uuid"], *auto}
    assert {n["Name"] for n in listed} == {"n1", None}
    shown = ok("node", "show", "n1", "-f", "json", endpoint=url).json()
    assert shown["etag"] == made["etag"] and "links" not in shown

    # --etag without a value: read first, send that etag
    new = ok("node", "set", "n1", "--extra", "owner=ops", "--description", "d", "--etag", "-f", "json",
             endpoint=url).json()
    assert new["extra"] == {"rack": "r1", "owner": "ops"} and new["description"] == "d"
    assert new["etag"] != made["etag"]
    # --etag <etag>: the one just shown
    unset = ok("node", "unset", "n1", "--extra", "rack", "--description", "--etag", new["etag"], "-f", "json",
               endpoint=url).json()
    assert unset["extra"] == {"owner": "ops"} and unset["description"] is None
    assert server_node(url, "n1")["etag"] == unset["etag"]

    out = ok("node", "delete", "n1", "--etag", unset["etag"], endpoint=url).out
    assert out.strip() == "Deleted node n1"
    assert "Node n1 could not be found" in fails("node", "show", "n1", endpoint=url)


def test_stale_etag_is_one_line_and_nothing_changes(url):
    ok("node", "create", "--driver", "fake-hardware", "--name", "s1", endpoint=url)
    old = ok("node", "show", "s1", "-f", "value", "-c", "etag", endpoint=url).out.strip()
    ok("node", "set", "s1", "--extra", "a=1", endpoint=url)
    current = server_node(url, "s1")["etag"]

    line = fails("node", "set", "s1", "--extra", "a=2", "--etag", old, endpoint=url)
    assert "stale etag" in line and "412" in line and f"current etag is {current}" in line
    line = fails("node", "delete", "s1", "--etag", old, endpoint=url)
    assert "stale etag" in line
    assert server_node(url, "s1")["extra"] == {"a": 1}


def test_read_first_etag_shows_the_diff_or_retries(url, module_server):
    """Another writer changes the node between bmctl's read and its PATCH (a proxy makes the
    change just before forwarding the PATCH): the error line carries the field-level diff;
    with --retry-on-conflict the change is re-applied on top of the other one."""
    ok("node", "create", "--driver", "fake-hardware", "--name", "r1", endpoint=url)

    owners = iter(["alice", "carol"])

    def interfere(req: Seen, n: int) -> str:
        if req.method == "PATCH" and n == 0:
            resp = requests.patch(f"{url}/v1/nodes/r1", headers={LEGACY: "1.117"}, timeout=10,
                                  json=[{"op": "add", "path": "/extra/owner", "value": next(owners)}])
            resp.close()
        return "pass"

    proxy = FaultProxy(url, interfere)
    try:
        line = fails("node", "set", "r1", "--extra", "owner=bob", "--etag", endpoint=proxy.url)
        assert 'changed on the server since it was read: /extra/owner: (absent) -> "alice"' in line
        assert server_node(url, "r1")["extra"] == {"owner": "alice"}
    finally:
        proxy.close()

    proxy = FaultProxy(url, interfere)
    try:
        new = ok("node", "set", "r1", "--property", "cpus=4", "--etag", "--retry-on-conflict", "2",
                 "-f", "json", endpoint=proxy.url).json()
        assert new["extra"] == {"owner": "carol"} and new["properties"] == {"cpus": 4}
        assert len(proxy.requests_to("PATCH", f"/v1/nodes/{new['uuid']}")) == 2
    finally:
        proxy.close()


def test_provision_verbs_wait_with_progress(url):
    ok("node", "create", "--driver", "fake-hardware", "--name", "p1", endpoint=url)
    for verb, state in (("manage", "manageable"), ("inspect", "manageable"), ("provide", "available"),
                        ("deploy", "active"), ("undeploy", "available"), ("manage", "manageable")):
        run = ok("node", verb, "p1", "--wait", "30", endpoint=url)
        assert f"node p1: {state}" in run.err  # the progress ends on the reached state
        assert server_node(url, "p1")["provision_state"] == state
    run = ok("node", "clean", "p1", "--clean-steps", STEPS, "--wait", endpoint=url)
    assert server_node(url, "p1")["provision_state"] == "manageable"
    line = fails("node", "clean", "p1", "--clean-steps", "{}", endpoint=url)
    assert "JSON list" in line
    line = fails("node", "deploy", "p1", endpoint=url)  # manageable -> deploy is refused
    assert line.startswith("400") and "p1" in line


def test_power_and_maintenance(url):
    ok("node", "create", "--driver", "fake-hardware", "--name", "w1", endpoint=url)
    ok("node", "power", "on", "w1", "--wait", endpoint=url)
    assert server_node(url, "w1")["power_state"] == "power on"
    ok("node", "power", "reboot", "w1", "--wait", endpoint=url)
    assert server_node(url, "w1")["power_state"] == "power on"
    ok("node", "power", "off", "w1", "--soft", "--wait", endpoint=url)
    assert server_node(url, "w1")["power_state"] == "power off"

    ok("node", "maintenance", "set", "w1", "--reason", "disk swap", endpoint=url)
    shown = ok("node", "show", "w1", "-f", "json", "-c", "maintenance", "-c", "maintenance_reason",
               endpoint=url).json()
    assert shown == {"maintenance": True, "maintenance_reason": "disk swap"}
    in_maintenance = ok("node", "list", "--maintenance", "-f", "json", endpoint=url).json()
    assert [n["Name"] for n in in_maintenance] == ["w1"]
    ok("node", "maintenance", "unset", "w1", endpoint=url)
    assert server_node(url, "w1")["maintenance"] is False


def test_output_formats_and_columns(url):
    for name in ("f1", "f2"):
        ok("node", "create", "--driver", "fake-hardware", "--name", name, endpoint=url)
    rows = list(csv.DictReader(io.StringIO(ok("node", "list", "-f", "csv", endpoint=url).out)))
    assert [r["Name"] for r in rows] == ["f1", "f2"]
    docs = yaml.safe_load(ok("node", "list", "-f", "yaml", "-c", "Name", endpoint=url).out)
    assert docs == [{"Name": "f1"}, {"Name": "f2"}]
    assert ok("node", "list", "-f", "value", "-c", "Name", endpoint=url).out.split() == ["f1", "f2"]
    table = ok("node", "list", endpoint=url).out
    assert "Provisioning State" in table and "| f1" in table
    long = ok("node", "list", "--long", "-f", "json", endpoint=url).json()
    assert {"driver", "etag", "properties"} <= set(long[0])
    picked = ok("node", "list", "--fields", "uuid", "driver", "-f", "json", endpoint=url).json()
    assert set(picked[0]) == {"uuid", "driver"}


# -- ports, port groups, chassis, resource classes --------------------------------------


def test_port_commands(url):
    node = new_node(url)
    port = ok("port", "create", "52:54:00:12:34:56", "--node", node, "--extra", "slot=1", "-f", "json",
              endpoint=url).json()
    assert port["address"] == "52:54:00:12:34:56" and port["node_uuid"] == node and port["etag"]
    listed = ok("port", "list", "--node", node, "-f", "json", endpoint=url).json()
    assert listed == [{"UUID": port["uuid"], "Address": "52:54:00:12:34:56"}]
    new = ok("port", "set", port["uuid"], "--extra", "slot=2", "--etag", "-f", "json", endpoint=url).json()
    assert new["extra"] == {"slot": 2}
    line = fails("port", "set", port["uuid"], "--extra", "slot=3", "--etag", port["etag"], endpoint=url)
    assert "stale etag" in line
    ok("port", "unset", port["uuid"], "--extra", "slot", endpoint=url)
    assert ok("port", "show", port["uuid"], "-f", "json", endpoint=url).json()["extra"] == {}
    assert "Conflict" in fails("port", "create", "52:54:00:12:34:56", "--node", node, endpoint=url)
    ok("port", "delete", port["uuid"], "--etag", endpoint=url)
    assert ok("port", "list", "-f", "json", endpoint=url).json() == []


def test_port_group_commands_and_alias(url):
    node = new_node(url)
    pg = ok("port", "group", "create", "--node", node, "--address", "52:54:00:00:00:01", "--name", "bond0",
            "-f", "json", endpoint=url).json()
    assert pg["name"] == "bond0" and pg["etag"]
    assert ok("portgroup", "list", "-f", "json", endpoint=url).json() == [
        {"UUID": pg["uuid"], "Address": "52:54:00:00:00:01", "Name": "bond0"}]
    ok("port", "group", "set", pg["uuid"], "--extra", "x=y", "--etag", endpoint=url)
    assert ok("portgroup", "show", pg["uuid"], "-f", "json", endpoint=url).json()["extra"] == {"x": "y"}
    line = fails("--os-baremetal-api-version", "1.20", "port", "group", "list", endpoint=url)
    assert "port groups need microversion 1.23" in line or "portgroups need microversion 1.23" in line
    ok("portgroup", "delete", pg["uuid"], endpoint=url)


def test_chassis_commands(url):
    ch = ok("chassis", "create", "--description", "rack 1", "--extra", "row=3", "-f", "json",
            endpoint=url).json()
    assert ch["description"] == "rack 1" and ch["extra"] == {"row": 3}
    listed = ok("chassis", "list", "-f", "json", endpoint=url).json()
    assert listed == [{"UUID": ch["uuid"], "Description": "rack 1"}]
    new = ok("chassis", "set", ch["uuid"], "--description", "rack 2", "--etag", ch["etag"], "-f", "json",
             endpoint=url).json()
    assert new["description"] == "rack 2"
    ok("chassis", "unset", ch["uuid"], "--extra", "row", endpoint=url)
    ok("chassis", "delete", ch["uuid"], endpoint=url)
    assert "could not be found" in fails("chassis", "show", ch["uuid"], endpoint=url)


def test_resource_class_commands_and_alias(url):
    first = ok("resource", "class", "create", "CUSTOM_GOLD", "-f", "json", endpoint=url)
    assert first.json()["name"] == "CUSTOM_GOLD" and "already existed" not in first.err
    again = ok("resource-class", "create", "CUSTOM_GOLD", "-f", "value", "-c", "name", endpoint=url)
    assert again.out.strip() == "CUSTOM_GOLD" and "already existed" in again.err
    assert ok("resource", "class", "list", "-f", "json", endpoint=url).json() == [{"Name": "CUSTOM_GOLD"}]
    shown = ok("resource-class", "show", "CUSTOM_GOLD", "-f", "json", endpoint=url).json()
    assert shown["name"] == "CUSTOM_GOLD"
    assert fails("resource", "class", "create", "gold", endpoint=url).startswith("400")
    ok("resource", "class", "delete", "CUSTOM_GOLD", endpoint=url)
    assert ok("resource", "class", "list", "-f", "json", endpoint=url).json() == []
    line = fails("--os-baremetal-api-version", "1.116", "resource", "class", "list", endpoint=url)
    assert "resource classes need microversion 1.117" in line


# -- error paths ------------------------------------------------------------------------


def test_version_errors_name_the_server_range(url):
    ok("node", "create", "--driver", "fake-hardware", "--name", "v1", endpoint=url)
    line = fails("--os-baremetal-api-version", "1.50", "node", "set", "v1", "--extra", "a=1", "--etag",
                 endpoint=url)
    assert "etags need microversion 1.116 or later" in line and "1.50" in line
    line = fails("--os-baremetal-api-version", "1.200", "node", "list", endpoint=url)
    assert "1.200" in line and "supports [1.1, 1.117]" in line
    line = fails("node", "list", endpoint=url, env={"OS_BAREMETAL_API_VERSION": "spam"})
    assert "invalid microversion 'spam'" in line
    # a pinned version inside the range works, from the environment too
    run = ok("node", "show", "v1", "-f", "json", endpoint=url)
    assert "etag" in run.json()
    pinned = bmctl("node", "show", "v1", "-f", "json", endpoint=url, env={"OS_BAREMETAL_API_VERSION": "1.50"})
    assert pinned.rc == 0 and "etag" not in pinned.json() and "owner" in pinned.json()


def test_conflict_not_found_and_connection_errors(url):
    ok("node", "create", "--driver", "fake-hardware", "--name", "dup", endpoint=url)
    line = fails("node", "create", "--driver", "fake-hardware", "--name", "dup", endpoint=url)
    assert line.startswith("409 Conflict") and "already exists" in line
    line = fails("node", "set", "nope", "--extra", "a=1", endpoint=url)
    assert line.startswith("404 Not Found") and "Node nope could not be found" in line
    assert "nothing to set" in fails("node", "set", "dup", endpoint=url)
    assert "no endpoint" in fails("node", "list", endpoint=None)
    line = fails("node", "list", endpoint=f"http://127.0.0.1:{free_port()}")
    assert line.startswith("no answer from") and "Connection refused" in line
    line = fails("node", "delete", "a", "b", "--etag", 'W/"x"', endpoint=url)
    assert "one resource" in line


def test_environment_options(url):
    """OS_ENDPOINT / --os-endpoint and --os-project-id (X-Project-Id scopes client tokens)."""
    def create(project: str) -> str:
        return ok("--os-project-id", project, "node", "create", "--driver", "fake-hardware",
                  "--client-token", "shared-token", "-f", "value", "-c", "uuid", endpoint=url).out.strip()

    a1, a2, b1 = create("p-a"), create("p-a"), create("p-b")
    assert a1 == a2 != b1  # the token is scoped per project
    run = bmctl("--os-endpoint", url, "node", "list", "-f", "value", "-c", "UUID", endpoint="http://127.0.0.1:1")
    assert run.rc == 0 and set(run.out.split()) == {a1, b1}


# -- arguments a user gets wrong --------------------------------------------------------


def test_bad_timeouts_are_argument_errors_never_a_traceback(url):
    """BMCTL_TIMEOUT=abc was a ValueError traceback before any parsing; --timeout 0/-1 reached
    requests ("Attempted to set connect timeout to -1.0"); --wait nan never timed out."""
    cases = [(("node", "list"), {"BMCTL_TIMEOUT": "abc"}), (("node", "list"), {"BMCTL_TIMEOUT": "0"})]
    cases += [(("--timeout", value, "node", "list"), None) for value in ("0", "-1", "nan", "inf")]
    for args, env in cases:
        run = bmctl(*args, endpoint=url, env=env)
        assert run.rc == 2, (args, env, run.err)
        assert "Traceback" not in run.err
        assert "positive number of seconds" in run.err and "BMCTL_TIMEOUT" in run.err, run.err
    assert ok("--timeout", "2.5", "node", "list", endpoint=url).rc == 0
    assert bmctl("node", "list", endpoint=url, env={"BMCTL_TIMEOUT": "7"}).rc == 0
    ok("node", "create", "--driver", "fake-hardware", "--name", "t1", endpoint=url)
    for value in ("-1", "nan", "inf"):
        run = bmctl("node", "manage", "t1", "--wait", value, endpoint=url)
        assert run.rc == 2 and "Traceback" not in run.err and "--wait" in run.err, (value, run.err)
    assert server_node(url, "t1")["provision_state"] == "enroll"  # nothing was sent


def test_options_that_would_silently_do_less_are_refused(url):
    """--retry-on-conflict without a bare --etag sent the PATCH without If-Match (a blind
    write, the opposite of what was asked); --client-token '' made a new random token (so
    running the command again made a second node)."""
    ok("node", "create", "--driver", "fake-hardware", "--name", "m1", endpoint=url)
    for extra in ((), ("--etag", 'W/"x"')):
        line = fails("node", "set", "m1", "--extra", "a=1", "--retry-on-conflict", "2", *extra, endpoint=url)
        assert "--retry-on-conflict" in line and "bare --etag" in line, line
    assert server_node(url, "m1")["extra"] == {}  # nothing was sent
    before = len(ok("node", "list", "-f", "json", endpoint=url).json())
    line = fails("node", "create", "--driver", "fake-hardware", "--client-token", "", endpoint=url)
    assert "--client-token" in line and "empty" in line
    assert len(ok("node", "list", "-f", "json", endpoint=url).json()) == before


def test_values_json_cannot_send_stay_strings(url):
    """``<key>=<value>`` values are JSON when they parse; Python's json also "parses" NaN,
    Infinity and 1e400 (an infinity), which no JSON body can carry: they stay strings instead
    of failing with "Out of range float values are not JSON compliant"."""
    ok("node", "create", "--driver", "fake-hardware", "--name", "v2", "--property", "p=NaN", endpoint=url)
    new = ok("node", "set", "v2", "--extra", "n=NaN", "--extra", "i=-Infinity", "--extra", "big=1e400",
             "--extra", 'obj={"x": Infinity}', "--extra", "ok=1.5", "-f", "json", endpoint=url).json()
    assert new["extra"] == {"n": "NaN", "i": "-Infinity", "big": "1e400", "obj": '{"x": Infinity}', "ok": 1.5}
    assert new["properties"] == {"p": "NaN"}
