"""Session fixtures: real servers on loopback, started once and stopped at the end."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.servers import MemcachedServer, PostgresServer, RedisServer, Server, make_workdir


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
