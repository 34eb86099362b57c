"""deploy.build_app / deploy.build / the CLI wire the enabled hardware types and the periodic power sync."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from webob import Request

from apimw.errors import ConfigError
from baremetal_service import settings
from baremetal_service.cli import configure, parse_args, read_etag_key
from baremetal_service.deploy import build, build_app
from tests.wsgi import run

LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}


def _power_sync_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "power-sync" and t.is_alive()]


def test_enabled_hardware_types_reach_the_drivers_api(tmp_path: Path) -> None:
    app = build_app(
        f"sqlite:///{tmp_path / 'a.sqlite'}",
        enabled_hardware_types=["fake-hardware", "redfish"],
        power_sync_interval=0,
    )
    try:
        names = {d["name"] for d in run(app, Request.blank("/v1/drivers", headers=LATEST)).json["drivers"]}
        assert names == {"fake-hardware", "redfish"}
        resp = run(app, Request.blank("/v1/drivers/redfish", headers=LATEST))
        assert resp.status_int == 200
    finally:
        app.close()


def test_default_service_enables_only_fake_hardware(tmp_path: Path) -> None:
    app = build_app(f"sqlite:///{tmp_path / 'b.sqlite'}", power_sync_interval=0)
    try:
        resp = run(app, Request.blank("/v1/drivers/redfish", headers=LATEST))
        assert resp.status_int == 404
    finally:
        app.close()


def test_power_sync_runs_with_the_conductor_and_stops_on_close(tmp_path: Path) -> None:
    before = len(_power_sync_threads())
    app = build_app(f"sqlite:///{tmp_path / 'c.sqlite'}", power_sync_interval=0.05)
    try:
        assert len(_power_sync_threads()) == before + 1
        sync = app._closers[0].sync  # the closer wraps the running PowerSync
        deadline = time.monotonic() + 10
        while sync.passes < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sync.passes >= 2
    finally:
        app.close()
    assert len(_power_sync_threads()) == before


def test_no_conductor_means_no_power_sync(tmp_path: Path) -> None:
    before = len(_power_sync_threads())
    app = build_app(f"sqlite:///{tmp_path / 'd.sqlite'}", run_conductor=False, power_sync_interval=0.05)
    try:
        assert len(_power_sync_threads()) == before
    finally:
        app.close()


def test_cli_options() -> None:
    args = parse_args(["--enabled-hardware-types", "fake-hardware, redfish", "--power-sync-interval", "0"])
    assert args.enabled_hardware_types == "fake-hardware, redfish"
    assert args.power_sync_interval == 0
    conf = configure(args)
    assert conf["enabled_hardware_types"] == ["fake-hardware", "redfish"]
    assert conf["power_sync_interval"] == 0


def test_the_environment_builds_the_same_stack_with_power_sync(tmp_path: Path) -> None:
    # gunicorn's workers (deploy.application) run the power sync next to their conductor too
    before = len(_power_sync_threads())
    conf = {**settings.from_environ({}), "database": f"sqlite:///{tmp_path / 'f.sqlite'}",
            "power_sync_interval": 0.05}  # fmt: skip
    app = build(conf)
    try:
        assert len(_power_sync_threads()) == before + 1
        assert run(app, Request.blank("/healthcheck")).status_int == 200
    finally:
        app.close()
    assert len(_power_sync_threads()) == before


def _request(app: object, method: str, path: str, body: object = None, etag: str | None = None) -> Any:
    headers = dict(LATEST)
    if etag:
        headers["If-Match"] = etag
    req = Request.blank(path, method=method, headers=headers)
    if body is not None:
        req.json_body = body
    return run(app, req)


def test_processes_sharing_an_etag_key_agree_on_etags(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'e.sqlite'}"
    key = b"k" * 32
    first = build_app(url, etag_key=key, run_conductor=False, power_sync_interval=0)
    try:
        created = _request(first, "POST", "/v1/nodes", {"driver": "fake-hardware", "name": "n1"}).json
    finally:
        first.close()
    # a second process (fresh app, same key) changes the node and changes it back
    second = build_app(url, etag_key=key, run_conductor=False, power_sync_interval=0)
    try:
        add = [{"op": "add", "path": "/description", "value": "x"}]
        patched = _request(second, "PATCH", "/v1/nodes/n1", add, etag=created["etag"])
        assert patched.status_int == 200 and patched.json["etag"] != created["etag"]
        back = _request(second, "PATCH", "/v1/nodes/n1", [{"op": "remove", "path": "/description"}],
                        etag=patched.json["etag"])  # fmt: skip
        assert back.json["etag"] == created["etag"]
    finally:
        second.close()


def test_etag_key_comes_from_a_file_or_the_environment(tmp_path: Path) -> None:
    keyfile = tmp_path / "etag.key"
    keyfile.write_text("  s3cret-s3cret-s3cret \n")
    assert read_etag_key(str(keyfile), {}) == "s3cret-s3cret-s3cret"
    assert read_etag_key(None, {"BAREMETAL_ETAG_KEY": "from-env-from-env"}) == "from-env-from-env"
    assert read_etag_key(None, {}) is None
    keyfile.write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        read_etag_key(str(keyfile), {})
    keyfile.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_etag_key(str(keyfile), {})


def test_the_example_uses_only_apimws_public_api() -> None:
    """The showcase imports no private apimw module (``apimw._*``), in any file."""
    import ast
    from pathlib import Path

    import baremetal_service

    offenders = []
    for path in Path(baremetal_service.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith("apimw.") and "._" in n]
    assert offenders == []
