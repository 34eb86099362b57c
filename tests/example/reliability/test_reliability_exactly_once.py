"""Exactly once under load: the short version of ``bench/reliability/exactly_once.py``.

A few rounds of 64 concurrent POSTs sharing one ``X-Client-Token`` against gunicorn (2 worker
processes) on PostgreSQL, with Redis and with memcached: one node per token in the database,
every loser answered by a replay of that node or by 409 in-flight with Retry-After, no 5xx.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.reliability import exactly_once
from bench.reliability._harness import Context
from tests.servers import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]  # module fixtures set up once


@pytest.fixture(scope="module")
def result(postgres_server: PostgresServer) -> Iterator[dict[str, Any]]:
    with Context(quick=True, postgres=postgres_server) as ctx:
        yield exactly_once.run(ctx)


@pytest.mark.parametrize("store", exactly_once.STORES)
def test_one_token_creates_one_node_whatever_the_contention(result: dict[str, Any], store: str) -> None:
    (r,) = (r for r in result["data"]["stores"] if r["store"] == store)
    rounds = r["rounds"]
    assert rounds >= 3
    assert r["created"] == rounds, "counted in the database: one node per token"
    assert r["duplicates"] == 0
    assert r["executions"] == rounds, "the app ran once per token"
    assert r["winner_uuid_not_in_db"] == 0
    assert r["server_errors"] == 0
    assert r["connection_errors"] == 0
    losers = rounds * (exactly_once.CONCURRENCY - 1)
    assert r["answers"].get("in_flight", 0) + r["answers"].get("replayed", 0) == losers, r["other"]
    assert r["replay_uuid_mismatch"] == 0
    assert r["in_flight_without_retry_after"] == 0
    # the race really crossed processes
    assert r["workers_answering"] == 2
    assert r["rounds_across_workers"] == rounds


def test_the_scenario_reports_what_it_found(result: dict[str, Any]) -> None:
    assert result["ok"], result["problems"]
    assert result["problems"] == []
    assert [row[0] for row in result["table"]["rows"]] == list(exactly_once.STORES)
