"""Worker killed after claim: the short version of ``bench/reliability/worker_kill.py``
(a gunicorn worker SIGKILLed while it holds a client token's claim, before and after its commit)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.reliability._harness import Context
from tests.servers import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # timed: see scripts/test


@pytest.fixture
def ctx(postgres_server: PostgresServer) -> Iterator[Context]:
    with Context(quick=True, postgres=postgres_server) as context:
        yield context


def test_worker_killed_after_claim(ctx: Context) -> None:
    from bench.reliability import worker_kill

    result = worker_kill.run(ctx)
    lease = result["data"]["lease"]
    rounds = result["data"]["rounds"]
    assert {r["variant"] for r in rounds} == {"before commit", "after commit"}
    for r in rounds:
        assert r["worker_found"] and r["original_status"] == 0, r  # that worker died with the request
        # 409 in-flight (with Retry-After) for every retry until the lease ends...
        assert r["retries_before_lease_end"] > 0
        assert r["in_flight_409_before_lease_end"] == r["retries_before_lease_end"], r
        # ...then the first success, after the lease (never before it)
        assert lease <= r["first_success_after_claim"] <= lease + 15.0, r
        assert r["executions"] == 1, r
        assert r["answers_name_the_node"] and r["later_retries_replayed"], r
        assert r["token_recorded_for_the_node"], r
        assert r["5xx"] == 0, r
    after_commit = next(r for r in rounds if r["variant"] == "after commit")
    assert after_commit["committed_before_kill"]  # the guard answered with the dead worker's node
    assert after_commit["first_success_replayed"]  # as a replay: Idempotent-Replayed: true
    before_commit = next(r for r in rounds if r["variant"] == "before commit")
    assert not before_commit["committed_before_kill"] and not before_commit["first_success_replayed"]
    assert result["ok"], result["problems"]
