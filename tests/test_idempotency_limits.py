"""Size limits of the replay stores: bytes as well as records, on every store.

* ``memory://`` is bounded in bytes (``?max_bytes=``, 64 MiB by default) as well as in
  records; eviction drops completed records, oldest first, and never an in-flight claim.
* An answer too large to store (``max_response_bytes``, or a memcached item over the
  server's item size limit, or over the memory store's whole budget) reaches its client
  with ``Idempotency-Status: not-stored``; a tombstone is stored in its place, so a retry
  gets 409 ``idempotency.replay-unavailable`` and never runs the request a second time.
"""

from __future__ import annotations

import gc
import json
import shutil
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from apimw._idempotency_records import encode_complete, encode_pending
from apimw._stores import open_store
from apimw._stores.memory_store import DEFAULT_MAX_BYTES, MemoryStore
from apimw.errors import ConfigError, StoreError
from apimw.idempotency import IdempotencyMiddleware
from tests.idempotency_support import Answer, post
from tests.servers import MemcachedServer, Server, make_workdir

MIB = 1024 * 1024
NOT_STORED = ("Idempotency-Status", "not-stored")


class EchoApp:
    """Answers 400 with a body of *size* bytes (a long bad name quoted back three times)."""

    def __init__(self, size: int, status: str = "400 Bad Request") -> None:
        self.size = size
        self.status = status
        self.calls = 0

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        environ["wsgi.input"].read()
        self.calls += 1
        body = json.dumps({"error": "x" * self.size, "serial": self.calls}).encode()
        start_response(self.status, [("Content-Type", "application/json"),
                                     ("Location", f"/v1/nodes/{self.calls}")])  # fmt: skip
        return [body]


def tok() -> str:
    return f"tok-{uuid.uuid4()}"


_OPEN: list[IdempotencyMiddleware] = []


@pytest.fixture(autouse=True)
def _close() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def make(app: Any, store: Any, **kwargs: Any) -> IdempotencyMiddleware:
    kwargs.setdefault("key_prefix", f"t{uuid.uuid4().hex[:8]}:")
    mw = IdempotencyMiddleware(app, store=store, lease=5, retention=60, **kwargs)
    _OPEN.append(mw)
    return mw


def pending(owner: str = "a") -> bytes:
    return encode_pending(owner.encode() * 32, "f" * 64, "p", 0.0)


def complete(size: int, owner: str = "a") -> bytes:
    return encode_complete(owner.encode() * 32, "f" * 64, "p", "200 OK", [], b"x" * size)


# -- memory://: bounded in bytes --------------------------------------------------------------


def test_memory_store_default_budget_is_64_mib_and_configurable() -> None:
    assert DEFAULT_MAX_BYTES == 64 * MIB
    assert MemoryStore().max_bytes == 64 * MIB
    store = open_store("memory://?max_bytes=1048576&max_items=10")
    assert isinstance(store, MemoryStore)
    assert (store.max_bytes, store.max_items) == (MIB, 10)
    for bad in (
        "memory://?max_bytes=",
        "memory://?max_bytes=-1",
        "memory://?max_bytes=1k",
        "memory://?max_bytes=0",
    ):
        with pytest.raises(ConfigError, match="max_bytes"):
            open_store(bad)


def test_many_large_unique_token_answers_stay_within_the_byte_budget() -> None:
    """Unique tokens, 720 KB answers; the store keeps at most its budget."""
    budget = 8 * MIB
    store = open_store(f"memory://?max_bytes={budget}")
    assert isinstance(store, MemoryStore)
    app = EchoApp(720 * 1000)
    mw = make(app, store)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tokens = [tok() for _ in range(60)]  # 60 x 720 KB = 43 MB without a byte budget
        for token in tokens:
            answer = post(mw, token)
            assert answer.status == 400
            assert not answer.has("Idempotency-Status")  # each one fitted and was stored
            assert store.bytes_used <= budget
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert app.calls == 60
    assert store.bytes_used <= budget
    held = sum(len(key) + len(value) for key, (value, _) in store._items())
    assert held <= budget
    assert grown < budget + 4 * MIB, f"the process kept {grown / MIB:.1f} MiB for an 8 MiB store"
    # oldest first: the newest answers still replay, the oldest were evicted (and would run again)
    replay = post(mw, tokens[-1])
    assert (replay.status, replay.header("Idempotent-Replayed")) == (400, "true")
    assert app.calls == 60
    assert len(store) < 60


def test_default_memory_store_is_bounded_in_bytes() -> None:
    """memory:// with no parameters: 150 answers of 720 KB would be 108 MB; at most 64 MiB stays."""
    mw = make(EchoApp(720 * 1000), "memory://")
    store = mw.store
    assert isinstance(store, MemoryStore)
    for _ in range(150):
        assert post(mw, tok()).status == 400
    assert store.bytes_used <= DEFAULT_MAX_BYTES
    assert sum(len(v) for _, (v, _) in store._items()) <= DEFAULT_MAX_BYTES


def test_eviction_never_drops_an_in_flight_claim() -> None:
    store = MemoryStore(max_bytes=64 * 1024, max_items=1000)
    assert store.claim("in-flight", pending("a"), 60) is None
    for i in range(50):  # 50 x 10 KB completed records through a 64 KB store
        assert store.claim(f"done-{i}", pending("b"), 60) is None
        assert store.complete(f"done-{i}", pending("b")[:33], complete(10_000, "b"), 60)
        assert store.bytes_used <= 64 * 1024
    assert store.get("in-flight") == pending("a")  # the oldest record, and still there
    assert store.get("done-49") is not None  # the newest completed record stays
    assert store.get("done-0") is None  # the oldest completed one went


def test_count_eviction_never_drops_an_in_flight_claim_either() -> None:
    store = MemoryStore(max_items=3)
    for i in range(3):
        assert store.claim(f"k{i}", pending("a"), 60) is None
    # full of in-flight claims: a new claim is refused (503 upstream), no claim is evicted
    with pytest.raises(StoreError, match="in-flight"):
        store.claim("k3", pending("a"), 60)
    assert all(store.get(f"k{i}") is not None for i in range(3))
    # a completed record is evicted for a new claim, the in-flight ones are not
    assert store.complete("k0", pending("a")[:33], complete(10), 60)
    assert store.claim("k4", pending("a"), 60) is None
    assert store.get("k0") is None
    assert store.get("k1") is not None and store.get("k2") is not None


def test_memory_store_full_of_claims_answers_503_and_runs_nothing() -> None:
    store = MemoryStore(max_items=1)
    assert store.claim("someone-else", pending("z"), 60) is None
    app = EchoApp(10, status="201 Created")
    answer = post(make(app, store), tok())
    assert (answer.status, answer.code) == (503, "idempotency.store-unavailable")
    assert app.calls == 0


def test_a_record_larger_than_the_memory_budget_is_not_stored_and_says_so() -> None:
    store = MemoryStore(max_bytes=128 * 1024)
    app = EchoApp(200 * 1000, status="201 Created")
    mw = make(app, store)
    token = tok()
    first = post(mw, token)
    assert first.status == 201
    assert len(first.body) > 200_000  # the client gets the whole answer
    assert (first.header(NOT_STORED[0]), app.calls) == (NOT_STORED[1], 1)
    assert store.bytes_used <= 128 * 1024
    retry = post(mw, token)
    assert (retry.status, retry.code) == (409, "idempotency.replay-unavailable")
    assert retry.header("Location") == "/v1/nodes/1"
    assert app.calls == 1  # never a second execution


# -- every store: max_response_bytes ----------------------------------------------------------


@pytest.fixture(params=["memory", "memcached", "redis"])
def store_url(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return f"memory://limits-{uuid.uuid4().hex}"
    server: Server = request.getfixturevalue(f"{request.param}_server")
    return server.url  # type: ignore[attr-defined,no-any-return]


def test_an_answer_over_max_response_bytes_is_answered_not_stored_and_says_so(store_url: str) -> None:
    app = EchoApp(300 * 1000, status="201 Created")
    mw = make(app, store_url, max_response_bytes=256 * 1024)
    token = tok()
    first = post(mw, token)
    assert first.status == 201 and len(first.body) > 300_000
    assert first.header(NOT_STORED[0]) == NOT_STORED[1]
    record = mw.store.get(_key(mw, token))
    assert record is not None and len(record) < 1024  # a tombstone, not the answer
    retry = post(mw, token)
    assert (retry.status, retry.code, retry.header("Location")) == (409, "idempotency.replay-unavailable",
                                                                    "/v1/nodes/1")  # fmt: skip
    assert app.calls == 1
    assert not retry.has("Idempotent-Replayed")


def test_an_answer_under_max_response_bytes_is_stored_and_replayed(store_url: str) -> None:
    app = EchoApp(200 * 1000, status="201 Created")
    mw = make(app, store_url, max_response_bytes=256 * 1024)
    token = tok()
    first = post(mw, token)
    assert first.status == 201 and not first.has(NOT_STORED[0])
    replay = post(mw, token)
    assert replay.body == first.body and replay.header("Idempotent-Replayed") == "true"
    assert app.calls == 1


def _key(mw: IdempotencyMiddleware, token: str) -> str:
    from apimw._idempotency_identity import store_key

    return store_key(mw.rules.key_prefix, "project-a", token)


# -- memcached's own item size limit ----------------------------------------------------------


class SmallItemsMemcached(MemcachedServer):
    """memcached with 512 KiB items (``-I 512k``): smaller than apimw's max_response_bytes."""

    def command(self) -> list[str]:
        return [*super().command(), "-I", "512k"]


@pytest.fixture(scope="module")
def small_items_memcached() -> Iterator[Server]:
    server = SmallItemsMemcached(make_workdir("memcached-512k"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.workdir, ignore_errors=True)


def test_an_answer_over_memcacheds_item_size_is_answered_with_a_tombstone(
    small_items_memcached: MemcachedServer,
) -> None:
    app = EchoApp(600 * 1000, status="201 Created")
    mw = make(app, small_items_memcached.url)  # max_response_bytes 900 KiB: the server refuses first
    token = tok()
    first = post(mw, token)
    assert first.status == 201 and len(first.body) > 600_000
    assert first.header(NOT_STORED[0]) == NOT_STORED[1]
    retry = post(mw, token)
    # before the fix: the claim stayed until its lease ended (409 in-flight), then the request ran again
    assert (retry.status, retry.code) == (409, "idempotency.replay-unavailable")
    assert app.calls == 1
    # a small answer on the same server is stored and replayed as usual
    small = EchoApp(100, status="201 Created")
    mw2 = make(small, small_items_memcached.url)
    token = tok()
    assert not post(mw2, token).has(NOT_STORED[0])
    assert post(mw2, token).header("Idempotent-Replayed") == "true"
    assert small.calls == 1


def test_streamed_answers_say_they_were_not_stored(store_url: str) -> None:
    """A declared Content-Length over the limit streams through: the header says so too."""

    def big(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        environ["wsgi.input"].read()
        chunks = [b"y" * 65536] * 8
        start_response("201 Created", [("Content-Length", str(8 * 65536)), ("Location", "/v1/x")])
        return iter(chunks)

    mw = make(big, store_url, max_response_bytes=64 * 1024)
    first: Answer = post(mw, tok())
    assert first.status == 201 and len(first.body) == 8 * 65536
    assert first.header(NOT_STORED[0]) == NOT_STORED[1]
