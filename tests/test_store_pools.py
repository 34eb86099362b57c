"""The network stores hold at most the connections their URL allows, and spend one round trip
per step of a protected request.

Every server here is a private one on loopback, so its connection and command counters see
only this test's store and the test's own observer connection.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from pymemcache.client.base import Client

from apimw._stores import open_store
from apimw._stores.aio import open_async_store
from apimw.errors import ConfigError, StoreError
from apimw.idempotency import IdempotencyMiddleware
from tests.asgi_support import flavours, layered, run_async
from tests.idempotency_support import ClusterRedisServer, CreateApp, SentinelServer, post
from tests.servers import HOST, MemcachedServer, RedisServer, Server, make_workdir

BOUND = 4
WORKERS = 32
ROUNDS = 10

pytest_generate_tests = flavours()


SERVERS: dict[str, Callable[[Any], Server]] = {
    "redis": RedisServer,
    "redis-cluster": ClusterRedisServer,
    "memcached": MemcachedServer,
}


@pytest.fixture(params=["redis", "memcached"])
def private(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server of this test's own: its counters see nobody else."""
    yield from serve(request.param)


@pytest.fixture(params=["redis", "redis-cluster", "redis-sentinel", "memcached"])
def any_private(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A server of this test's own, a one-node Redis Cluster and a Sentinel-watched master too."""
    if request.param != "redis-sentinel":
        yield from serve(request.param)
        return
    for master in serve("redis"):
        workdir = make_workdir("pool-sentinel")
        sentinel = SentinelServer(workdir, master)  # type: ignore[arg-type]
        sentinel.start()
        try:
            yield sentinel
        finally:
            sentinel.stop()
            shutil.rmtree(workdir, ignore_errors=True)


def serve(kind: str) -> Iterator[Server]:
    workdir = make_workdir(f"pool-{kind}")
    server = SERVERS[kind](workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


class Observer:
    """Connections of the test's own that read the server's connection and command counters."""

    def __init__(self, server: Server) -> None:
        self.redis = isinstance(server, RedisServer)
        if isinstance(server, SentinelServer):  # the store's commands go to the master it names
            server = server.master
        if self.redis:
            self.client: Any = redis.Redis(host=HOST, port=server.port, single_connection_client=True)
            self.seen: list[str] = []
            self.marks = 0
            self.monitoring = threading.Event()
            self.monitored = threading.Thread(target=self._monitor, args=(server,), daemon=True)
            self.monitored.start()
            assert self.monitoring.wait(10), "MONITOR did not start"
        else:
            self.client = Client((HOST, server.port), timeout=5)

    def _monitor(self, server: Server) -> None:
        """Every command the server runs for a client (MONITOR), until the observer closes."""
        with redis.Redis(host=HOST, port=server.port, socket_timeout=30).monitor() as monitor:
            self.monitoring.set()
            for command in monitor.listen():
                if command["client_type"] != "lua":  # commands a script ran are part of its EVALSHA
                    self.seen.append(command["command"])
                if command["command"] == "ECHO observer-closed":
                    return

    def _mark(self) -> int:
        """Send a marker through the monitor and wait for it: everything before it has been seen."""
        self.marks += 1
        marker = f"ECHO observer-mark-{self.marks}"
        self.client.echo(marker.removeprefix("ECHO "))
        for _ in range(500):  # bounded: the monitor sees the marker within milliseconds
            if marker in self.seen:
                return self.seen.index(marker)
            threading.Event().wait(0.01)
        raise AssertionError("the MONITOR connection never saw the marker")

    def connections(self) -> tuple[int, int]:
        """(connections open now, connections accepted since the server started)."""
        if self.redis:
            clients, stats = self.client.info("clients"), self.client.info("stats")
            return int(clients["connected_clients"]), int(stats["total_connections_received"])
        stats = self.client.stats()
        return int(stats[b"curr_connections"]), int(stats[b"total_connections"])

    def commands(self) -> int:
        """Commands (round trips) the server has run for others than this observer."""
        if self.redis:
            upto = self._mark()
            return sum(1 for c in self.seen[:upto] if not c.startswith(("ECHO observer-", "INFO")))
        stats = self.client.stats()
        return sum(int(stats[name]) for name in (b"cmd_get", b"cmd_set", b"cmd_touch"))

    def close(self) -> None:
        if self.redis:
            self.client.echo("observer-closed")
            self.monitored.join(5)
        self.client.close()


def bounded_url(server: Server) -> str:
    option = "max_connections" if isinstance(server, RedisServer) else "max_pool_size"
    return f"{server.url}?{option}={BOUND}"  # type: ignore[attr-defined]


def watch(observer: Observer, work: Callable[[], None]) -> tuple[int, int]:
    """Run *work* while sampling the server: (most connections open at once, connections opened)."""
    open_before, accepted_before = observer.connections()
    most = open_before
    done = threading.Event()

    def sample() -> None:
        nonlocal most
        while not done.wait(0.002):
            most = max(most, observer.connections()[0])

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        work()
    finally:
        done.set()
        sampler.join()
    open_after, accepted_after = observer.connections()
    return max(most, open_after) - open_before, accepted_after - accepted_before


def cycle(store: Any, worker: int, step: int) -> None:
    """A protected request's store calls: claim, a competitor's claim, completion, replay."""
    key = f"pool:{worker}:{step}:{uuid.uuid4().hex}"
    mine = b"%032dP{}\n" % worker
    assert store.claim(key, mine, 30) is None
    assert store.claim(key, b"x" * 32 + b"P{}\n", 30) == mine
    done = mine[:32] + b"C{}\nbody"
    assert store.complete(key, mine[:33], done, 30) is True
    assert store.get(key) == done


async def acycle(store: Any, worker: int, step: int) -> None:
    key = f"apool:{worker}:{step}:{uuid.uuid4().hex}"
    mine = b"%032dP{}\n" % worker
    assert await store.claim(key, mine, 30) is None
    assert await store.claim(key, b"x" * 32 + b"P{}\n", 30) == mine
    done = mine[:32] + b"C{}\nbody"
    assert await store.complete(key, mine[:33], done, 30) is True
    assert await store.get(key) == done


def test_32_threads_share_at_most_the_urls_connections(any_private: Server) -> None:
    store = open_store(bounded_url(any_private), timeout=10.0)
    observer = Observer(any_private)
    failures: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for step in range(ROUNDS):
                cycle(store, n, step)
        except BaseException as exc:  # reported below
            failures.append(exc)

    def hammer() -> None:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(WORKERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    try:
        most, opened = watch(observer, hammer)
    finally:
        store.close()
        observer.close()
    assert not failures, failures[:3]
    assert most <= BOUND, f"{most} connections open at once for a bound of {BOUND}"
    assert opened <= BOUND, f"{opened} connections opened for a bound of {BOUND}"


def test_32_asyncio_tasks_share_at_most_the_urls_connections(any_private: Server) -> None:
    store = open_async_store(bounded_url(any_private), timeout=10.0)
    observer = Observer(any_private)

    async def hammer() -> None:
        async def worker(n: int) -> None:
            for step in range(ROUNDS):
                await acycle(store, n, step)

        await asyncio.gather(*(worker(n) for n in range(WORKERS)))

    try:
        most, opened = watch(observer, lambda: run_async(hammer()))
    finally:
        run_async(store.aclose())
        observer.close()
    # a cluster client also opens one connection of its own to learn the slots (CLUSTER SLOTS)
    bound = BOUND + (1 if isinstance(any_private, ClusterRedisServer) else 0)
    assert most <= bound, f"{most} connections open at once for a bound of {BOUND}"
    assert opened <= bound, f"{opened} connections opened for a bound of {BOUND}"


#: Round trips of a replay: Redis answers a taken claim with the record in the same command
#: (SET NX GET); memcached refuses the ``add`` and the record is read with a ``gets``.
REPLAY_ROUND_TRIPS = {"redis": 1, "memcached": 2}


def test_a_new_request_costs_one_claim_and_one_completion_a_replay_one(private: Server, flavour: str) -> None:
    app = CreateApp()
    mw = layered(flavour, app, (IdempotencyMiddleware, {"store": bounded_url(private), "store_timeout": 2.0}))
    observer = Observer(private)
    kind = "redis" if observer.redis else "memcached"
    try:
        assert post(mw, "warm-up").status == 201  # connections, scripts and probes happen here
        before = observer.commands()
        assert post(mw, "fresh").status == 201
        new_request = observer.commands() - before
        before = observer.commands()
        replay = post(mw, "fresh")
        replayed = observer.commands() - before
    finally:
        mw.close()
        observer.close()
    assert replay.header("Idempotent-Replayed") == "true"
    assert app.calls == 2
    assert new_request == 2, f"a new request made {new_request} store commands (claim + completion)"
    assert replayed == REPLAY_ROUND_TRIPS[kind], f"a replay made {replayed} store commands"


class Silent:
    """A server that accepts connections and never answers (hung, paused)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(64)  # connections complete in the backlog; nothing is read or written
        self.port = self.sock.getsockname()[1]


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    try:
        yield server
    finally:
        server.sock.close()


HUNG_URLS = ["redis://{host}:{port}/0?max_connections=2", "memcached://{host}:{port}?max_pool_size=2"]


@pytest.mark.parametrize("url", HUNG_URLS)
def test_calls_beyond_a_hung_servers_connections_fail_as_store_error(silent: Silent, url: str) -> None:
    """Eight threads on two connections to a server that never answers: every call ends in
    StoreError (503 upstream) -- those on the wire by their socket timeout, the others
    waiting for a connection by the same timeout -- none waits forever."""
    store = open_store(url.format(host=HOST, port=silent.port), timeout=0.3)
    outcomes: list[BaseException | None] = []

    def claim(n: int) -> None:
        try:
            store.claim(f"k{n}", b"m" * 32 + b"P{}\n", 5)
        except BaseException as exc:  # recorded: the test asserts every one
            outcomes.append(exc)
        else:
            outcomes.append(None)

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
    finally:
        store.close()
    assert len(outcomes) == 8
    assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes


@pytest.mark.parametrize("url", HUNG_URLS)
def test_tasks_beyond_a_hung_servers_connections_fail_as_store_error(silent: Silent, url: str) -> None:
    store = open_async_store(url.format(host=HOST, port=silent.port), timeout=0.3)

    async def many() -> list[BaseException | bytes | None]:
        claims = (store.claim(f"k{n}", b"m" * 32 + b"P{}\n", 5) for n in range(8))
        return await asyncio.gather(*claims, return_exceptions=True)

    try:
        outcomes = run_async(many())
    finally:
        run_async(store.aclose())
    assert all(isinstance(outcome, StoreError) for outcome in outcomes), outcomes


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0?max_connections=0",
        "redis://127.0.0.1:6379/0?max_connections=four",
        "redis+cluster://127.0.0.1:7000?max_connections=-1",
        "redis+sentinel://127.0.0.1:26379/mymaster?max_connections=0",
        "memcached://127.0.0.1:11211?max_pool_size=0",
        "memcached://127.0.0.1:11211?max_pool_size=many",
    ],
)
def test_a_bad_pool_bound_is_refused_when_the_store_is_built(url: str) -> None:
    with pytest.raises(ConfigError):
        open_store(url)


def test_every_store_url_option_is_documented_where_help_shows_it() -> None:
    doc = open_store.__doc__ or ""
    for option in ("max_items", "max_bytes", "max_pool_size", "connect_timeout", "max_connections",
                   "socket_timeout", "socket_connect_timeout", "timeout"):  # fmt: skip
        assert option in doc, option
