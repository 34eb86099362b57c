"""One settings source: the CLI, the WSGI entry point, the paste pipeline and the in-code
pipeline start from the same defaults (baremetal_service.settings)."""

from __future__ import annotations

import configparser
import inspect
from pathlib import Path

import baremetal_service
import pytest
from baremetal_service import app, cli, settings, wsgi

INI = Path(baremetal_service.__file__).parent / "api-paste.ini"
ENV = ("BAREMETAL_DATABASE", "BAREMETAL_STORE", "BAREMETAL_AUTH_STRATEGY", "BAREMETAL_HTPASSWD")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def test_the_cli_defaults_are_the_settings(clean_env: None) -> None:
    args = cli.parse_args([])
    assert (args.host, args.port, args.database, args.store) == (
        settings.HOST, settings.PORT, settings.DATABASE, settings.STORE,
    )  # fmt: skip
    assert (args.auth_strategy, args.htpasswd, args.threads) == (
        settings.AUTH_STRATEGY, settings.HTPASSWD, settings.THREADS,
    )  # fmt: skip
    assert args.enabled_hardware_types == ",".join(settings.HARDWARE_TYPES)
    assert args.power_sync_interval == settings.POWER_SYNC_INTERVAL
    assert args.request_id == settings.REQUEST_ID


def test_the_wsgi_entry_point_defaults_are_the_settings() -> None:
    conf = wsgi.settings({})
    assert (conf["database"], conf["store"], conf["auth_strategy"], conf["htpasswd"]) == (
        settings.DATABASE, settings.STORE, settings.AUTH_STRATEGY, settings.HTPASSWD,
    )  # fmt: skip
    assert conf["request_id"] == settings.REQUEST_ID


def test_the_paste_pipeline_defaults_are_the_settings() -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(INI)
    defaults = parser.defaults()
    assert defaults["database"] == settings.DATABASE
    assert defaults["store"] == settings.STORE
    assert defaults["run_conductor"] == str(settings.RUN_CONDUCTOR).lower()
    # and what the paste app factory falls back to when the ini says nothing
    loader = inspect.signature(app.load_paste_app).parameters
    assert loader["database_url"].default == settings.DATABASE
    assert loader["store_url"].default == settings.STORE
    built = inspect.signature(app.build_app).parameters
    assert built["enabled_hardware_types"].default == settings.HARDWARE_TYPES
    assert built["power_sync_interval"].default == settings.POWER_SYNC_INTERVAL
    assert built["run_conductor"].default is settings.RUN_CONDUCTOR
    assert built["request_id"].default == settings.REQUEST_ID


def test_the_idempotency_lease_default_is_the_middleware_default() -> None:
    from apimw.idempotency import IdempotencyMiddleware

    assert inspect.signature(IdempotencyMiddleware).parameters["lease"].default == settings.IDEMPOTENCY_LEASE
    assert wsgi.settings({})["idempotency_lease"] == settings.IDEMPOTENCY_LEASE
    assert inspect.signature(app.wrap).parameters["lease"].default == settings.IDEMPOTENCY_LEASE


def test_the_idempotency_lease_is_read_from_the_environment(tmp_path: Path) -> None:
    from apimw.idempotency import IdempotencyMiddleware

    assert wsgi.settings({"BAREMETAL_IDEMPOTENCY_LEASE": " 2.5 "})["idempotency_lease"] == 2.5
    built = wsgi.make_application({
        "BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 'lease.db'}",
        "BAREMETAL_IDEMPOTENCY_LEASE": "3",
        "BAREMETAL_CONDUCTOR_WORKERS": "0",
    })  # fmt: skip
    try:
        middlewares = [c for c in built._closers if isinstance(c, IdempotencyMiddleware)]
        assert [m._lease for m in middlewares] == [3.0]
    finally:
        built.close()


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_a_bad_idempotency_lease_is_one_sentence(value: str) -> None:
    from apimw.errors import ConfigError

    with pytest.raises(ConfigError, match="BAREMETAL_IDEMPOTENCY_LEASE must be a"):
        wsgi.settings({"BAREMETAL_IDEMPOTENCY_LEASE": value})
