"""No lost update: the short version of ``bench/reliability/lost_update.py``.

A few clients run read-modify-write cycles on one node's ``/extra/counter`` through gunicorn
(2 worker processes), on SQLite and on PostgreSQL: with If-Match (and a re-read on 412) the final
counter equals the successful PATCHes, which equal clients x cycles; the same run without
If-Match is measured too (it loses increments; reported, not required).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.reliability import lost_update
from bench.reliability._harness import Context
from tests.servers import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(__name__)]  # module fixtures set up once


@pytest.fixture(scope="module")
def result(postgres_server: PostgresServer) -> Iterator[dict[str, Any]]:
    with Context(quick=True, postgres=postgres_server) as ctx:
        yield lost_update.run(ctx)


def _row(result: dict[str, Any], backend: str, mode: str) -> dict[str, Any]:
    (row,) = (r for r in result["data"]["rows"] if r["backend"] == backend and r["mode"] == mode)
    return row


@pytest.mark.parametrize("backend", lost_update.BACKENDS)
def test_if_match_read_modify_write_loses_nothing_across_workers(
    result: dict[str, Any], backend: str
) -> None:
    r = _row(result, backend, "if-match")
    expected = result["data"]["clients"] * result["data"]["cycles_per_client"]
    assert expected >= 16
    assert r["final"] == r["successes"] == expected
    assert r["lost"] == 0
    assert r["gave_up"] == 0
    assert r["retries_412"] > 0, "the clients never collided: the run did not test the race"
    assert r["server_errors"] == 0
    assert r["connection_errors"] == 0
    assert r["other"] == {}
    assert r["workers_answering"] == 2


@pytest.mark.parametrize("backend", lost_update.BACKENDS)
def test_the_run_without_if_match_is_measured(result: dict[str, Any], backend: str) -> None:
    r = _row(result, backend, "no if-match")
    assert r["successes"] == r["cycles"]
    assert r["final"] + r["lost"] == r["successes"]
    assert 0 < r["final"] <= r["cycles"]
    assert r["server_errors"] == 0
    assert r["retries_412"] == 0


def test_the_scenario_reports_what_it_found(result: dict[str, Any]) -> None:
    assert result["ok"], result["problems"]
    assert len(result["table"]["rows"]) == len(lost_update.BACKENDS) * len(lost_update.MODES)
