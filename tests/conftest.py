"""Session fixtures: real servers on loopback, started once (per xdist worker) and stopped at
the end; and how the suite is spread over xdist workers (``pytest -n N --dist loadgroup``)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.servers import MemcachedServer, PostgresServer, RedisServer, Server, make_workdir


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` the modules holding a ``slow`` test are handed out first, so
    that the longest work does not start last.  (Without xdist the order is left as it is.)

    A module whose tests share an expensive module fixture (a gunicorn cluster, a scenario's
    result, built wheels, an emulator) marks itself ``xdist_group(<its path>)``: its tests then
    run on one worker, which sets the fixture up once."""
    # xdist's workers see dist "no" and loadgroup True; its controller does not collect
    if not getattr(config.option, "loadgroup", False):
        return
    slow_modules = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::", 1)[0] not in slow_modules)


def pytest_collection_finish(session: pytest.Session) -> None:
    """pytest-xdist applies a group by appending ``@group`` to the node id; a pytest it cannot do
    that with (9.2 keeps node ids elsewhere) would spread a group silently: say so instead."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]  # fmt: skip
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist did not apply the xdist_group of {lost[0]} (and {len(lost) - 1} more)"
        )


def _serve(server: Server) -> Iterator[Server]:
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Server]:
    """A real redis-server on 127.0.0.1 (``.url``, ``.stop()``, ``.start()``, ``.kill()``)."""
    yield from _serve(RedisServer(make_workdir("redis")))


@pytest.fixture(scope="session")
def memcached_server() -> Iterator[Server]:
    """A real memcached on 127.0.0.1."""
    yield from _serve(MemcachedServer(make_workdir("memcached")))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Server]:
    """A real PostgreSQL 15 on 127.0.0.1 with a throwaway cluster."""
    yield from _serve(PostgresServer(make_workdir("postgres")))

