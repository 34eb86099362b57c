"""``memory://`` is shared fairly between tenants: when it is full, the tenant holding the most
gives up its oldest completed record, so one project's many or large answers never evict
another project's completed record while that project holds less."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from apimw._idempotency_records import encode_complete, encode_pending
from apimw._stores.memory_store import DEFAULT_MAX_BYTES, MemoryStore
from apimw.idempotency import IdempotencyMiddleware
from tests.asgi_support import flavours, layered
from tests.idempotency_support import post

pytest_generate_tests = flavours()

ANSWER_BYTES = 240 * 1000


class BigAnswers:
    """Answers every POST 201 with *size* bytes; counts executions per project."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.calls: Counter[str] = Counter()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        project = environ.get("HTTP_X_PROJECT_ID", "")
        self.calls[project] += 1
        start_response("201 Created", [("Content-Type", "application/octet-stream")])
        return [b"n" * self.size]


def test_another_projects_300_large_answers_do_not_evict_a_completed_record(flavour: str) -> None:
    """300 answers of 240 kB (72 MB) pass through the default 64 MiB store: project-a's answer,
    stored first, is still replayed afterwards and the app ran once for it."""
    app = BigAnswers(ANSWER_BYTES)
    mw = layered(flavour, app, (IdempotencyMiddleware, {"store": "memory://", "retention": 600}))
    try:
        first = post(mw, "a-token", project="project-a")
        assert first.status == 201
        for n in range(300):
            assert post(mw, f"b-token-{n}", project="project-b").status == 201
        assert 300 * ANSWER_BYTES > DEFAULT_MAX_BYTES  # the store was full: project-b's oldest went
        again = post(mw, "a-token", project="project-a")
        oldest_b = post(mw, "b-token-0", project="project-b")
    finally:
        mw.close()
    assert (again.status, again.header("Idempotent-Replayed")) == (201, "true")
    assert again.body == first.body
    assert app.calls["project-a"] == 1
    # the store stayed within its budget by evicting project-b's own oldest answers
    assert oldest_b.header("Idempotent-Replayed") is None
    assert app.calls["project-b"] == 301


def pending(owner: str, tenant: str) -> bytes:
    return encode_pending(owner.encode() * 32, "f" * 64, tenant, 0.0)


def completed(owner: str, tenant: str, size: int) -> bytes:
    return encode_complete(owner.encode() * 32, "f" * 64, tenant, "201 Created", [], b"x" * size)


def store_answer(store: MemoryStore, tenant: str, size: int) -> str:
    key = f"{tenant}:{uuid.uuid4().hex}"
    owner = "o"
    assert store.claim(key, pending(owner, tenant), 60) is None
    assert store.complete(key, pending(owner, tenant)[:33], completed(owner, tenant, size), 60)
    return key


def test_the_tenant_holding_the_most_bytes_gives_up_its_oldest_record_first() -> None:
    store = MemoryStore(max_bytes=100_000)
    small = [store_answer(store, "quiet", 5_000) for _ in range(3)]  # 15 kB, the oldest records
    loud = [store_answer(store, "loud", 20_000) for _ in range(20)]  # 400 kB through a 100 kB store
    assert store.bytes_used <= 100_000
    assert all(store.get(key) is not None for key in small)
    assert store.get(loud[-1]) is not None  # the loud tenant keeps its newest answers
    assert store.get(loud[0]) is None


def test_the_tenant_holding_the_most_records_gives_up_its_oldest_record_first() -> None:
    store = MemoryStore(max_items=10)
    quiet = store_answer(store, "quiet", 10)
    many = [store_answer(store, "many", 10) for _ in range(30)]
    assert len(store) == 10
    assert store.get(quiet) is not None
    assert store.get(many[0]) is None and store.get(many[-1]) is not None


def test_a_tenant_that_grows_past_the_others_is_evicted_itself() -> None:
    """Fair, not first come: a tenant keeps its records only while it is not the largest."""
    store = MemoryStore(max_bytes=60_000)
    first = store_answer(store, "early", 25_000)
    second = store_answer(store, "early", 25_000)
    later = store_answer(store, "late", 10_000)  # 60 kB would not fit: the largest tenant gives way
    assert store.get(later) is not None
    assert store.get(first) is None  # early held 50 kB against late's 10 kB: its oldest went
    assert store.get(second) is not None
