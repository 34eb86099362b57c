"""One settings source: the CLI, the WSGI entry point, the paste pipeline and the in-code
pipeline start from the same defaults (baremetal_service.settings), and the environment is
read (and checked) in one place, settings.from_environ."""

from __future__ import annotations

import configparser
import inspect
from pathlib import Path

import pytest

import baremetal_service
from baremetal_service import cli, deploy, settings

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


def test_the_wsgi_entry_point_defaults_are_the_settings() -> None:
    conf = settings.from_environ({})
    assert (conf["database"], conf["store"]) == (None, None)  # not named: the defaults (or a paste file's)
    assert (conf["auth_strategy"], conf["htpasswd"]) == (settings.AUTH_STRATEGY, settings.HTPASSWD)
    assert conf["enabled_hardware_types"] == list(settings.HARDWARE_TYPES)
    assert conf["power_sync_interval"] == settings.POWER_SYNC_INTERVAL


def test_the_paste_pipeline_defaults_are_the_settings() -> None:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(INI)
    defaults = parser.defaults()
    assert defaults["database"] == settings.DATABASE
    assert defaults["store"] == settings.STORE
    assert defaults["run_conductor"] == str(settings.RUN_CONDUCTOR).lower()
    built = inspect.signature(deploy.build_app).parameters
    assert built["enabled_hardware_types"].default == settings.HARDWARE_TYPES
    assert built["power_sync_interval"].default == settings.POWER_SYNC_INTERVAL
    assert built["run_conductor"].default is settings.RUN_CONDUCTOR


def test_a_paste_file_naming_no_store_or_database_gets_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What load_paste_app falls back to when neither the caller nor the file's [DEFAULT] names one."""
    ini = tmp_path / "bare.ini"
    ini.write_text(
        "[pipeline:main]\npipeline = noauth idempotency baremetal\n\n"
        "[filter:noauth]\npaste.filter_factory = baremetal_service.handlers.noauth:filter_factory\n\n"
        "[filter:idempotency]\nuse = egg:apimw#idempotency\nstore = %(store)s\n\n"
        "[app:baremetal]\npaste.app_factory = baremetal_service.deploy:app_factory\n"
        "database = %(database)s\nrun_conductor = false\n"
    )
    monkeypatch.chdir(tmp_path)  # the default database is a SQLite file in the current directory
    built = deploy.load_paste_app(ini, run_conductor=False)
    try:
        assert deploy.replay_store(built).name == settings.STORE
        assert (tmp_path / settings.DATABASE.removeprefix("sqlite:///")).exists()
    finally:
        built.close()


def test_the_idempotency_lease_default_is_the_middleware_default() -> None:
    from apimw.idempotency import IdempotencyMiddleware

    assert IdempotencyMiddleware(lambda environ, start_response: []).rules.lease == settings.IDEMPOTENCY_LEASE
    assert settings.from_environ({})["idempotency_lease"] == settings.IDEMPOTENCY_LEASE
    assert inspect.signature(deploy.wrap).parameters["lease"].default == settings.IDEMPOTENCY_LEASE


def test_the_idempotency_lease_is_read_from_the_environment(tmp_path: Path) -> None:
    from apimw.idempotency import IdempotencyMiddleware

    assert settings.from_environ({"BAREMETAL_IDEMPOTENCY_LEASE": " 2.5 "})["idempotency_lease"] == 2.5
    built = deploy.make_application({
        "BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 'lease.db'}",
        "BAREMETAL_IDEMPOTENCY_LEASE": "3",
        "BAREMETAL_CONDUCTOR_WORKERS": "0",
    })  # fmt: skip
    try:
        middlewares = [c for c in built._closers if isinstance(c, IdempotencyMiddleware)]
        assert [m.rules.lease for m in middlewares] == [3.0]
    finally:
        built.close()


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_a_bad_idempotency_lease_is_one_sentence(value: str) -> None:
    from apimw.errors import ConfigError

    with pytest.raises(ConfigError, match="BAREMETAL_IDEMPOTENCY_LEASE must be a"):
        settings.from_environ({"BAREMETAL_IDEMPOTENCY_LEASE": value})


# -- garbage fails at start, in every auth mode -------------------------------------------

#: One unusable value per setting the environment feeds.
GARBAGE = {
    "BAREMETAL_IDEMPOTENCY_LEASE": "soon",
    "BAREMETAL_CONDUCTOR_WORKERS": "many",
    "BAREMETAL_HEALTHCHECK": "sometimes",
    "BAREMETAL_WORKER_PROCESSES": "-1",
    "BAREMETAL_DEBUG_WORKER_HEADER": "perhaps",
    "BAREMETAL_AUTH_STRATEGY": "keystone-ish",
    "BAREMETAL_ETAG_KEY": "",
    "BAREMETAL_PUBLIC_ENDPOINT": "ftp://baremetal.example",
}

#: The three ways the CLI builds the service.
MODES = {
    "noauth": [],
    "http_basic": ["--auth-strategy", "http_basic"],
    "paste": ["--paste", str(INI)],
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_every_setting_refuses_garbage(name: str) -> None:
    from apimw.errors import ConfigError

    with pytest.raises(ConfigError, match=name) as refused:
        settings.from_environ({name: GARBAGE[name]})
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name", list(GARBAGE))
def test_the_cli_refuses_garbage_in_every_auth_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clean_env: None, mode: str, name: str
) -> None:
    # before: the noauth and paste modes never read these variables and started anyway
    from apimw.errors import ConfigError

    monkeypatch.setenv(name, GARBAGE[name])
    args = cli.parse_args(["--no-conductor", "--database", f"sqlite:///{tmp_path / 'x.db'}", *MODES[mode]])
    with pytest.raises(ConfigError, match=name):
        built = cli.build(args)
        built.close()  # (only reached if garbage was accepted)


def test_an_empty_etag_key_is_refused_and_an_unset_one_is_random() -> None:
    from apimw.errors import ConfigError

    with pytest.raises(ConfigError, match="BAREMETAL_ETAG_KEY is set but empty"):
        settings.from_environ({"BAREMETAL_ETAG_KEY": ""})
    with pytest.raises(ConfigError, match="BAREMETAL_ETAG_KEY is set but empty"):
        settings.from_environ({"BAREMETAL_ETAG_KEY": " \n"})
    assert settings.from_environ({})["etag_key"] is None
    assert settings.from_environ({"BAREMETAL_ETAG_KEY": "k3y"})["etag_key"] == "k3y"


@pytest.mark.parametrize("mode", list(MODES))
def test_garbage_at_start_is_one_line_and_exit_2(tmp_path: Path, mode: str) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "BAREMETAL_HEALTHCHECK": "maybe"}
    done = subprocess.run(  # noqa: S603 - our own entry point
        [sys.executable, "-m", "baremetal_service.cli", "--no-conductor", "--port", "1", *MODES[mode]],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.strip().splitlines() == [
        "baremetal-service: cannot start: BAREMETAL_HEALTHCHECK must be true or false, got 'maybe'"
    ]


# -- the public endpoint ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://bm.example.com:6385", "https://bm.example.com:6385"),
        ("https://bm.example.com/baremetal/", "https://bm.example.com/baremetal"),
        ("http://[::1]:6385", "http://[::1]:6385"),
        ("", None),
    ],
)
def test_a_public_endpoint_is_read(value: str, expected: str | None) -> None:
    assert settings.from_environ({"BAREMETAL_PUBLIC_ENDPOINT": value})["public_endpoint"] == expected
    assert settings.public_endpoint(value) == expected


@pytest.mark.parametrize(
    "value",
    ["bm.example.com", "ftp://bm.example.com", "https://", "https://bm.example.com/?a=1", "https://u:p@bm",
     "https://bm.example.com:99999", "https://bm example.com", "https://bm.example.com/\x00", "https://bé.com"],
)  # fmt: skip
def test_a_bad_public_endpoint_is_one_sentence(value: str) -> None:
    from apimw.errors import ConfigError

    with pytest.raises(ConfigError, match="BAREMETAL_PUBLIC_ENDPOINT"):
        settings.from_environ({"BAREMETAL_PUBLIC_ENDPOINT": value})


def test_a_bad_server_from_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BAREMETAL_SERVER", "apache")
    with pytest.raises(SystemExit) as done:
        cli.parse_args([])
    assert done.value.code == 2
    assert "BAREMETAL_SERVER must be one of granian, waitress, got 'apache'" in capsys.readouterr().err


def test_the_cli_checks_its_own_store_and_process_count(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clean_env: None
) -> None:
    # WEB_CONCURRENCY set for another server, a one-process CLI on memory://: not refused
    monkeypatch.setenv("WEB_CONCURRENCY", "4")
    built = cli.build(cli.parse_args(["--no-conductor", "--database", f"sqlite:///{tmp_path / 'x.db'}"]))
    built.close()
