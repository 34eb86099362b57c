"""Stores that go away, several processes, several memcached servers, Redis Cluster and Sentinel.

Every server here is real and on loopback; the ones we kill are private instances.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apimw._idempotency_identity import store_key
from apimw._stores import open_store
from apimw._stores.aio import open_async_store
from apimw._stores.memcached_store import MemcachedStore
from apimw.errors import ConfigError, StoreError
from apimw.idempotency import IdempotencyMiddleware
from tests.asgi_support import blocking, flavours, layered, run_async
from tests.idempotency_support import (
    ClusterRedisServer,
    CreateApp,
    SentinelServer,
    post,
    private_server,
)
from tests.servers import MemcachedServer, RedisServer, Server, make_workdir

ROOT = Path(__file__).resolve().parent.parent


def serve(server: Server) -> Iterator[Server]:
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


@pytest.fixture(params=["memcached", "redis"])
def killable(request: pytest.FixtureRequest) -> Iterator[Server]:
    """A private server of our own to kill and restart (Redis with an fsync'ed AOF)."""
    yield from serve(private_server(request.param, make_workdir(f"idem-{request.param}")))


# tests taking ``flavour`` run against the WSGI middleware and its ASGI twin (apimw.asgi)
pytest_generate_tests = flavours()


def middleware(url: str, app: Any, flavour: str = "wsgi", **kwargs: Any) -> Any:
    options: dict[str, Any] = {"lease": 2, "retention": 60, "key_prefix": f"t{uuid.uuid4().hex[:8]}:"}
    options.update(kwargs)
    return layered(flavour, app, (IdempotencyMiddleware, {"store": url, "store_timeout": 0.5, **options}))


def test_store_killed_mid_test_gives_503_never_500_and_no_duplicate(killable: Server, flavour: str) -> None:
    app = CreateApp()
    kill_now: list[bool] = []

    def app_that_may_kill(environ: dict[str, Any], start_response: Any) -> Any:
        if kill_now:
            kill_now.clear()
            killable.kill()
        return app(environ, start_response)

    mw = middleware(killable.url, app_that_may_kill, flavour, lease=10)  # type: ignore[attr-defined]
    try:
        done = post(mw, "before")
        assert done.status == 201

        # the store dies while a claimed request runs: its client still gets the answer
        kill_now.append(True)
        during = post(mw, "during")
        assert during.status == 201
        assert app.calls == 2

        # store down: token requests get 503 with Retry-After and never run; others pass
        for tok in ("before", "after", "during"):
            down = post(mw, tok)
            assert (down.status, down.code) == (503, "idempotency.store-unavailable")
            assert down.header("Retry-After") == "1"
        assert app.calls == 2
        assert post(mw, None).status == 201
        assert app.calls == 3

        killable.start()
        after = post(mw, "after")
        assert after.status == 201
        assert post(mw, "after").body == after.body  # exactly once after the store returns
        assert app.calls == 4
        again = post(mw, "before")
        if isinstance(killable, RedisServer):
            # Redis with appendfsync always kept the record: a replay, not a second execution
            assert again.body == done.body and again.header("Idempotent-Replayed") == "true"
            assert app.calls == 4
            # the request that ran while the store died could not store its answer: its claim
            # survived, so a retry waits for the lease instead of running again (documented)
            pending = post(mw, "during")
            assert (pending.status, pending.code) == (409, "idempotency.in-flight")
            assert app.calls == 4
        else:
            # memcached is not durable: a restarted server has forgotten (documented)
            assert again.status == 201 and app.calls == 5
    finally:
        mw.close()


def test_fail_open_runs_unprotected_and_says_so(
    killable: Server, caplog: pytest.LogCaptureFixture, flavour: str
) -> None:
    app = CreateApp()
    mw = middleware(killable.url, app, flavour, on_store_error="fail_open")  # type: ignore[attr-defined]
    secret = "never-log-this-token-7f3a"
    try:
        killable.kill()
        answer = post(mw, secret)
        assert answer.status == 201
        assert answer.header("Idempotency-Status") == "unprotected"
        assert app.calls == 1
        assert any("unavailable" in r.getMessage() for r in caplog.records)
        assert not any(secret in r.getMessage() for r in caplog.records)
    finally:
        killable.start()
        mw.close()


@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_two_os_processes_one_token_run_the_app_once(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    url = request.getfixturevalue(f"{kind}_server").url
    log = tmp_path / "executions.log"
    prefix = f"mp{uuid.uuid4().hex[:8]}:"
    start_at = time.time() + 2.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.idempotency_support", "worker", url, prefix, "shared-token",
             "8", str(start_at), str(log)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        for _ in range(2)
    ]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
        outputs.extend(json.loads(line) for line in out.decode().splitlines())
    assert len(outputs) == 16
    assert len(log.read_text().splitlines()) == 1  # one execution across both processes
    created = [o for o in outputs if o["status"] == 201]
    assert len({o["body"] for o in created}) == 1
    assert len([o for o in created if o["replayed"] is None]) == 1
    assert all(o["status"] in (201, 409) for o in outputs)


@pytest.mark.parametrize("kind", ["redis", "memcached"])
def test_a_worker_killed_mid_request_blocks_its_token_until_the_lease_ends(
    request: pytest.FixtureRequest, kind: str
) -> None:
    url = request.getfixturevalue(f"{kind}_server").url
    prefix = f"die{uuid.uuid4().hex[:8]}:"
    lease = 2.0
    proc = subprocess.run(
        [sys.executable, "-m", "tests.idempotency_support", "die", url, prefix, "crash-token", str(lease)],
        cwd=ROOT, capture_output=True, timeout=60,
    )  # fmt: skip
    died_at = time.monotonic()
    assert proc.returncode == -9, proc.stderr.decode()
    app = CreateApp()
    mw = middleware(url, app, key_prefix=prefix, lease=lease)
    try:
        blocked = post(mw, "crash-token")
        assert (blocked.status, blocked.code) == (409, "idempotency.in-flight")
        deadline = time.monotonic() + lease + 5
        answer = blocked
        while answer.status == 409 and time.monotonic() < deadline:
            time.sleep(0.1)
            answer = post(mw, "crash-token")
        assert answer.status == 201
        assert time.monotonic() - died_at >= lease - 1.0  # not before the lease could end
        assert post(mw, "crash-token").body == answer.body
        assert app.calls == 1
    finally:
        mw.close()


# -- several memcached servers -------------------------------------------------------------


@pytest.fixture
def two_memcached() -> Iterator[tuple[Server, Server]]:
    first = iter(serve(MemcachedServer(make_workdir("idem-mc1"))))
    second = iter(serve(MemcachedServer(make_workdir("idem-mc2"))))
    a, b = next(first), next(second)
    try:
        yield a, b
    finally:
        for gen in (first, second):
            for _ in gen:
                pass


def test_several_memcached_servers_a_dead_one_fails_only_its_own_keys(
    two_memcached: tuple[Server, Server],
) -> None:
    a, b = two_memcached
    url = f"memcached://127.0.0.1:{a.port},127.0.0.1:{b.port}"
    app = CreateApp()
    mw = middleware(url, app, key_prefix="multi:")
    store = mw.store
    assert isinstance(store, MemcachedStore)
    on: dict[int, list[str]] = {a.port: [], b.port: []}
    for i in range(40):
        tok = f"tok-{i}"
        on[store.server_for(store_key("multi:", "project-a", tok))[1]].append(tok)
    assert on[a.port] and on[b.port]  # both servers get keys
    try:
        for tok in on[a.port][:2] + on[b.port][:2]:
            assert post(mw, tok).status == 201
        a.kill()
        for tok in on[a.port][:3]:  # keys of the dead server: 503, never moved elsewhere
            assert post(mw, tok).status == 503
        for tok in on[b.port][:2]:  # keys of the live server: replayed as before
            assert post(mw, tok).header("Idempotent-Replayed") == "true"
        assert post(mw, on[b.port][2]).status == 201
        assert app.calls == 5
        a.start()
        assert post(mw, on[a.port][2]).status == 201
        assert app.calls == 6
    finally:
        mw.close()


# -- Redis Cluster and Sentinel --------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[Server]:
    yield from serve(ClusterRedisServer(make_workdir("idem-cluster")))


@pytest.fixture(scope="module")
def sentinel() -> Iterator[Server]:
    master = RedisServer(make_workdir("idem-master"))
    masters = iter(serve(master))
    next(masters)
    try:
        yield from serve(SentinelServer(make_workdir("idem-sentinel"), master))
    finally:
        for _ in masters:
            pass


@pytest.mark.parametrize("kind", ["cluster", "sentinel"])
def test_cluster_and_sentinel_urls_claim_replay_conflict_and_fence(
    request: pytest.FixtureRequest, kind: str
) -> None:
    server = request.getfixturevalue(kind)
    app = CreateApp()
    mw = middleware(server.url, app, lease=0.5)
    try:
        first = post(mw, "tok")
        assert first.status == 201
        assert post(mw, "tok").body == first.body
        assert post(mw, "tok", body=b"{}").code == "idempotency.fingerprint-mismatch"
        assert app.calls == 1
        # fencing works on these topologies too: a stale owner can neither complete nor release
        key = "fence:" + uuid.uuid4().hex
        assert mw.store.claim(key, b"a" * 32 + b"P{}\n", 0.3) is None
        time.sleep(0.45)
        assert mw.store.claim(key, b"b" * 32 + b"P{}\n", 5) is None
        assert mw.store.complete(key, b"a" * 32 + b"P", b"a" * 32 + b"C{}\n", 5) is False
        assert mw.store.release(key, b"a" * 32 + b"P") is False
        assert mw.store.get(key) == b"b" * 32 + b"P{}\n"
        assert mw.store.release(key, b"b" * 32 + b"P") is True
        assert mw.store.get(key) is None
    finally:
        mw.close()


# -- the store contract, the same on every backend -------------------------------------------------


STORE_KINDS = ["memory", "memcached", "redis", "redis-lua"]


@pytest.fixture(params=[*STORE_KINDS, *(f"asyncio-{kind}" for kind in STORE_KINDS)])
def any_store(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Every store, and every asyncio store of the ASGI middleware (called here through the test loop)."""
    name = request.param.removeprefix("asyncio-")
    fixture = {"memcached": "memcached_server", "redis": "redis_server", "redis-lua": "redis_server"}
    url = request.getfixturevalue(fixture[name]).url if name in fixture else "memory://"
    if request.param.startswith("asyncio-"):
        aio = open_async_store(url, timeout=0.5)
        if name == "redis-lua":
            aio._set_get = False  # type: ignore[attr-defined]
        try:
            yield blocking(aio)
        finally:
            run_async(aio.aclose())
        return
    store = open_store(url, timeout=0.5)
    if name == "redis-lua":
        store._set_get = False  # the claim script used with Redis < 7.0
    try:
        yield store
    finally:
        store.close()


def test_store_contract(any_store: Any) -> None:
    key = "contract:" + uuid.uuid4().hex
    mine, theirs = b"m" * 32 + b"P", b"t" * 32 + b"P"
    assert any_store.get(key) is None
    assert any_store.claim(key, mine + b"{}\n", 30) is None
    assert any_store.claim(key, theirs + b"{}\n", 30) == mine + b"{}\n"
    assert any_store.complete(key, theirs, b"t" * 32 + b"C{}\nx", 30) is False
    assert any_store.release(key, theirs) is False
    assert any_store.extend(key, theirs, 30) is False
    assert any_store.extend(key, mine, 30) is True
    assert any_store.get(key) == mine + b"{}\n"
    done = b"m" * 32 + b"C{}\n\x00\xff binary \r\n body"
    assert any_store.complete(key, mine, done, 30) is True
    assert any_store.get(key) == done
    assert any_store.release(key, mine) is False  # completed records are not released
    assert any_store.complete(key, mine, b"m" * 32 + b"C{}\nagain", 30) is False
    assert any_store.get(key) == done


def test_redis_scripts_forgotten_by_the_server_still_fence(redis_server: Server) -> None:
    """After SCRIPT FLUSH (as after a restart) the fenced writes still compare the owner."""
    import redis

    store = open_store(redis_server.url, timeout=0.5)  # type: ignore[attr-defined]
    admin = redis.Redis.from_url(redis_server.url)  # type: ignore[attr-defined]
    try:
        key = "flush:" + uuid.uuid4().hex
        mine, theirs = b"m" * 32 + b"P", b"t" * 32 + b"P"
        assert store.claim(key, mine + b"{}\n", 30) is None
        admin.script_flush()
        assert store.complete(key, theirs, b"t" * 32 + b"C{}\nx", 30) is False
        admin.script_flush()
        assert store.extend(key, mine, 30) is True
        admin.script_flush()
        assert store.complete(key, mine, b"m" * 32 + b"C{}\nbody", 30) is True
        assert admin.get(key) == b"m" * 32 + b"C{}\nbody"
        admin.script_flush()
        assert store.release(key, mine) is False
        assert store.get(key) == b"m" * 32 + b"C{}\nbody"
    finally:
        store.close()
        admin.close()


@pytest.mark.serial  # measured against the clock
@pytest.mark.parametrize("scheme", ["memcached", "redis"])
def test_a_silent_server_times_out_as_store_error(scheme: str) -> None:
    """A server that accepts connections but never answers costs a few timeouts, never a hang."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)  # connections complete in the backlog; nothing is ever read or written
    port = silent.getsockname()[1]
    url = f"memcached://127.0.0.1:{port}" if scheme == "memcached" else f"redis://127.0.0.1:{port}/0"
    store = open_store(url, timeout=0.2)
    try:
        for call in (lambda: store.claim("k", b"m" * 32 + b"P{}\n", 5),
                     lambda: store.complete("k", b"m" * 32 + b"P", b"m" * 32 + b"C{}\n", 5)):  # fmt: skip
            started = time.monotonic()
            with pytest.raises(StoreError):
                call()
            assert time.monotonic() - started < 3
    finally:
        store.close()
        silent.close()


def test_memcached_ttl_beyond_30_days_is_sent_as_absolute_time(memcached_server: Server) -> None:
    """memcached reads an exptime > 30 days as a Unix time; a relative one would expire at once."""
    store = open_store(memcached_server.url)
    try:
        key = "ttl:" + uuid.uuid4().hex
        owner = b"o" * 32 + b"P"
        assert store.claim(key, owner + b"{}\n", 31 * 24 * 3600) is None
        assert store.get(key) == owner + b"{}\n"
        assert store.complete(key, owner, b"o" * 32 + b"C{}\n", 45 * 24 * 3600) is True
        assert store.get(key) == b"o" * 32 + b"C{}\n"
    finally:
        store.close()


def test_an_unreachable_store_raises_store_error_only() -> None:
    from tests.servers import free_port

    port = free_port()
    for url in (f"redis://127.0.0.1:{port}/0", f"memcached://127.0.0.1:{port}"):
        store = open_store(url, timeout=0.2)
        for call in (lambda s=store: s.claim("k", b"v" * 40, 5), lambda s=store: s.get("k"),
                     lambda s=store: s.complete("k", b"v" * 33, b"w", 5),
                     lambda s=store: s.release("k", b"v" * 33)):  # fmt: skip
            with pytest.raises(StoreError):
                call()
        store.close()


@pytest.mark.parametrize(
    "url",
    ["nosuch://x", "memcached://host:notaport", "memcached://h:1?timeout=x", "memcached://h:1?bogus=1",
     "redis+sentinel://127.0.0.1:26379", "redis+cluster://nohostport", "memory://?max_items=0",
     "memory://?max_items=x", "not a url", "redis+cluster://h:1?bogus=1"],
)  # fmt: skip
def test_bad_store_urls_fail_at_construction(url: str) -> None:
    with pytest.raises(ConfigError):
        IdempotencyMiddleware(CreateApp(), store=url)


def test_memory_store_is_bounded_and_named_stores_are_shared() -> None:
    small = open_store("memory://?max_items=3")
    for i in range(5):
        assert small.claim(f"k{i}", b"x" * 33 + b"{}\n", 30) is None
    assert len(small) == 3  # type: ignore[arg-type]
    assert small.get("k0") is None and small.get("k4") is not None
    name = uuid.uuid4().hex
    assert open_store(f"memory://{name}") is open_store(f"memory://{name}")
    assert open_store("memory://") is not open_store("memory://")


def test_threads_share_a_memcached_store_safely(memcached_server: Server) -> None:
    app = CreateApp(delay=0.05)
    mw = middleware(memcached_server.url, app)
    results: list[int] = []
    try:
        threads = [threading.Thread(target=lambda i=i: results.append(post(mw, f"t{i % 4}").status))
                   for i in range(24)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert len(results) == 24 and set(results) <= {201, 409}
        assert app.calls == 4
    finally:
        mw.close()


# -- every backend against one model (Hypothesis state machine) ------------------------------


def test_stores_match_the_model_under_random_interleavings(any_store: Any) -> None:
    from hypothesis import settings
    from hypothesis import strategies as st
    from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

    owners = [bytes([c]) * 32 for c in b"abc"]
    run_id = uuid.uuid4().hex[:8]

    class StoreModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.round = uuid.uuid4().hex[:8]
            self.model: dict[str, bytes] = {}

        def key(self, k: int) -> str:
            return f"sm:{run_id}:{self.round}:{k}"

        @rule(k=st.integers(0, 2), o=st.sampled_from(owners))
        def claim(self, k: int, o: bytes) -> None:
            value = o + b"P{}\n"
            got = any_store.claim(self.key(k), value, 60)
            if k in self.model:
                assert got == self.model[k]
            else:
                assert got is None
                self.model[k] = value

        @rule(k=st.integers(0, 2), o=st.sampled_from(owners), body=st.binary(max_size=20))
        def complete(self, k: int, o: bytes, body: bytes) -> None:
            value = o + b"C{}\n" + body
            ok = any_store.complete(self.key(k), o + b"P", value, 60)
            expected = k in self.model and self.model[k].startswith(o + b"P")
            assert ok == expected
            if ok:
                self.model[k] = value

        @rule(k=st.integers(0, 2), o=st.sampled_from(owners))
        def release(self, k: int, o: bytes) -> None:
            ok = any_store.release(self.key(k), o + b"P")
            expected = k in self.model and self.model[k].startswith(o + b"P")
            assert ok == expected
            if ok:
                del self.model[k]

        @rule(k=st.integers(0, 2), o=st.sampled_from(owners))
        def extend(self, k: int, o: bytes) -> None:
            ok = any_store.extend(self.key(k), o + b"P", 60)
            assert ok == (k in self.model and self.model[k].startswith(o + b"P"))

        @rule(k=st.integers(0, 2))
        def get(self, k: int) -> None:
            assert any_store.get(self.key(k)) == self.model.get(k)

    run_state_machine_as_test(StoreModel, settings=settings(max_examples=40, stateful_step_count=25,
                                                            deadline=None))  # fmt: skip


def test_a_quiet_store_restart_costs_no_503(killable: Server) -> None:
    """Pooled connections that died with a restart are replaced without failing a request."""
    app = CreateApp()
    mw = middleware(killable.url, app)  # type: ignore[attr-defined]
    try:
        for i in range(3):  # several pooled connections
            assert post(mw, f"warm-{i}").status == 201
        killable.stop()
        killable.start()
        answers = [post(mw, f"after-restart-{i}") for i in range(3)]
        assert [a.status for a in answers] == [201, 201, 201]
        assert post(mw, "after-restart-0").header("Idempotent-Replayed") == "true"
    finally:
        mw.close()
