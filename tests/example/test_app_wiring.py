"""build_app / the CLI wire the enabled hardware types and the periodic power sync."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from baremetal_service.app import build_app
from baremetal_service.cli import parse_args
from webob import Request

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
