"""``memory://`` refuses several processes: judged on the store the built pipeline holds.

Two gunicorn workers that load a paste file whose ``[DEFAULT] store`` names Redis must not
each build a private memory:// store behind a guard that reads only
``BAREMETAL_STORE``.  A worker builds its application with ``wsgi.make_application``: these tests
build it the same way, with the environment a two-worker gunicorn gives it.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from webob import Request

from apimw.errors import ConfigError
from tests.servers import Server, free_port
from tests.wsgi import run

PIPELINE = """
[DEFAULT]
store = {default_store}

[pipeline:main]
pipeline = microversion noauth idempotency baremetal

[filter:microversion]
use = egg:apimw#microversion
service_type = baremetal
min_version = 1.1
max_version = 1.117
legacy_header = X-OpenStack-Ironic-API-Version

[filter:noauth]
paste.filter_factory = baremetal_service.handlers.noauth:filter_factory

[filter:idempotency]
use = egg:apimw#idempotency
{store_line}

[app:baremetal]
paste.app_factory = baremetal_service.deploy:app_factory
"""


def redis_url(server: Server) -> str:
    return f"{server.url.rstrip('/').rsplit('/', 1)[0]}/10"


def two_workers(tmp_path: Path, ini: str, store: str) -> dict[str, str]:
    path = tmp_path / "api-paste.ini"
    path.write_text(ini)
    return {
        "BAREMETAL_DATABASE": f"sqlite:///{tmp_path / 'baremetal.sqlite'}",
        "BAREMETAL_STORE": store,
        "BAREMETAL_PASTE_INI": str(path),
        "BAREMETAL_WORKER_PROCESSES": "2",  # what gunicorn_conf.py tells each of 2 workers
        "BAREMETAL_CONDUCTOR_WORKERS": "0",
    }


def test_a_paste_file_naming_redis_in_default_builds_redis(tmp_path: Path, redis_server: Server) -> None:
    import redis

    from baremetal_service.deploy import make_application

    url = redis_url(redis_server)
    client = redis.Redis.from_url(url)
    client.flushdb()
    ini = PIPELINE.format(default_store=url, store_line="store = %(store)s")
    app = make_application(two_workers(tmp_path, ini, url))
    try:
        headers = {"X-OpenStack-Ironic-API-Version": "latest", "X-Project-Id": "p1",
                   "X-Client-Token": uuid.uuid4().hex}  # fmt: skip
        create = Request.blank("/v1/nodes", method="POST", json={"driver": "fake-hardware"}, headers=headers)
        assert run(app, create).status_int == 201
        assert client.dbsize() > 0  # both workers would share this record
    finally:
        app.close()
        client.flushdb()
        client.close()


def test_a_pipeline_holding_memory_is_refused_whatever_the_environment_says(
    tmp_path: Path, redis_server: Server
) -> None:
    """The environment names Redis; the paste file overrides the store of its filter with
    ``set store = memory://`` (paste's way to give one section its own value)."""
    from baremetal_service.deploy import make_application

    url = redis_url(redis_server)
    ini = PIPELINE.format(default_store=url, store_line="set store = memory://")
    with pytest.raises(ConfigError, match=r"memory:// idempotency store cannot be used with 2 worker"):
        make_application(two_workers(tmp_path, ini, url))


def test_one_worker_with_memory_serves(tmp_path: Path, redis_server: Server) -> None:
    from baremetal_service.deploy import make_application

    ini = PIPELINE.format(default_store=redis_url(redis_server), store_line="set store = memory://")
    env: dict[str, Any] = {**two_workers(tmp_path, ini, redis_url(redis_server))}
    env["BAREMETAL_WORKER_PROCESSES"] = "1"
    app = make_application(env)
    try:
        from baremetal_service.deploy import replay_store

        assert replay_store(app).name == "memory://"
    finally:
        app.close()


def test_the_command_refuses_a_paste_file_building_memory_for_several_workers(
    tmp_path: Path, redis_server: Server
) -> None:
    """``baremetal-service --paste FILE --workers 2 --store redis://...``: the file's own store decides."""
    import subprocess
    import sys

    ini = tmp_path / "api-paste.ini"
    ini.write_text(PIPELINE.format(default_store=redis_url(redis_server), store_line="set store = memory://"))
    command = [sys.executable, "-m", "baremetal_service.cli", "--paste", str(ini), "--workers", "2",
               "--server", "granian", "--port", str(free_port()), "--store", redis_url(redis_server),
               "--database", f"sqlite:///{tmp_path / 'b.sqlite'}", "--no-conductor"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "cannot start: the memory:// idempotency store cannot be used with 2 worker" in out.stderr


@pytest.mark.parametrize("entry", ["make_application", "load_paste_app"])
def test_the_paste_files_own_store_wins_when_none_is_configured(
    tmp_path: Path, redis_server: Server, entry: str
) -> None:
    """No ``BAREMETAL_STORE``, no ``--store``: the paste file's ``[DEFAULT] store`` decides.

    The entry points used to pass the built-in default (``memory://``) as paste's global conf,
    which overrides the file's ``[DEFAULT]``: a file naming Redis silently got memory://."""
    from baremetal_service.deploy import load_paste_app, make_application, replay_store

    url = redis_url(redis_server)
    path = tmp_path / "api-paste.ini"
    path.write_text(PIPELINE.format(default_store=url, store_line="store = %(store)s"))
    if entry == "make_application":
        env = two_workers(tmp_path, path.read_text(), url)
        del env["BAREMETAL_STORE"]
        app: Any = make_application(env)
    else:
        app = load_paste_app(path, database_url=f"sqlite:///{tmp_path / 'b.sqlite'}", run_conductor=False)
    try:
        assert replay_store(app).name.startswith("redis:"), replay_store(app).name
    finally:
        app.close()


def test_a_configured_store_still_overrides_the_paste_file(tmp_path: Path, redis_server: Server) -> None:
    from baremetal_service.deploy import load_paste_app, replay_store

    path = tmp_path / "api-paste.ini"
    path.write_text(PIPELINE.format(default_store=redis_url(redis_server), store_line="store = %(store)s"))
    app = load_paste_app(path, database_url=f"sqlite:///{tmp_path / 'b.sqlite'}", store_url="memory://",
                         run_conductor=False)  # fmt: skip
    try:
        assert replay_store(app).name == "memory://"
    finally:
        app.close()
