"""Replay store outage under load: the short version of
``bench/reliability/store_outage.py`` (Redis with AOF and memcached, killed and restarted)."""

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


def test_store_outage_under_load(ctx: Context) -> None:
    from bench.reliability import store_outage

    result = store_outage.run(ctx)
    for store in ("redis", "memcached"):
        data = result["data"][store]
        # while the store is down: every token request 503 (with its code), GETs unaffected
        assert data["token_requests_during"] > 0 and data["gets_during"] > 0, store
        assert data["token_503_during"] == data["token_requests_during"], (
            store,
            data["token_statuses_during"],
        )
        assert data["bad_503_bodies"] == 0, store
        assert data["get_success_during"] == 100.0, store
        assert data["other_5xx"] == data["no_answer"] == 0, (store, data["samples_5xx"])
        # afterwards: at most one node per token, every acknowledged node there, retries answered
        assert data["duplicates"] == 0, store
        assert data["answers_naming_two_nodes"] == data["acknowledged_but_missing"] == 0, store
        assert data["retried_tokens"] > 0, store
        assert set(data["final_retry_statuses"]) == {"201"}, (store, data["final_retry_statuses"])
        assert data["recovery_seconds"] is not None, store
    # memcached forgot every record: the retries after its restart were answered by the database
    assert result["data"]["memcached"]["answered_by_db_guard"] > 0
    assert result["ok"], result["problems"]
