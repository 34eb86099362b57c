"""The reliability harness's soak scenario, short version (bench/reliability/soak.py): a few seconds
of paced mixed traffic against gunicorn (2 workers, PostgreSQL, Redis), sampled twice a second.

Too short to judge memory (the full run is ``python -m bench.reliability --only soak``, 10
minutes; ``SOAK_SECONDS=120`` for a shorter one); it checks the scenario works and that
nothing grows with the traffic: no 5xx, every request answered, replays answered with the
same node, no worker restarted, and open files, sockets and connections flat after the
warm-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from bench.reliability import soak
from bench.reliability._harness import Context
from tests.servers import PostgresServer

pytestmark = [pytest.mark.slow, pytest.mark.serial]  # timed: see scripts/test


@pytest.fixture(scope="module")
def result(postgres_server: PostgresServer) -> Iterator[dict[str, Any]]:
    with Context(quick=True, postgres=postgres_server) as ctx:
        yield soak.run(ctx)


def test_the_mixed_traffic_ran_at_its_rate_without_errors(result: dict[str, Any]) -> None:
    data = result["data"]
    expected = data["duration"] * data["target_rate"]
    assert 0.8 * expected <= data["requests"] <= expected, data["achieved_rate"]
    assert data["5xx"] == 0, result["problems"]
    assert data["unanswered"] == 0, result["problems"]
    assert data["replay_mismatches"] == 0
    assert data["log_tracebacks"] == 0, result["problems"]
    # every kind of operation of the mix ran, and answered as it should
    ops = {key.rsplit(" ", 1)[0] for key in data["by_operation"]}
    assert {"create", "replay", "get node", "list nodes", "patch"} <= ops, data["by_operation"]
    # Races that are part of the mix: a PATCH lost its If-Match race (412); the node an operation
    # picked was deleted meanwhile (404; 400 node-not-found for a port create, as in Ironic).
    # Anything else is not an answer this traffic should get.
    races = {("patch", 412), ("create port", 400)} | {
        (op, 404) for op in ("get node", "node ports", "list ports", "patch (GET)", "patch")}
    answers = {(key.rsplit(" ", 1)[0], int(key.rsplit(" ", 1)[1])): n
               for key, n in data["by_operation"].items()}
    unexpected = {k: n for k, n in answers.items() if k[1] not in (200, 201, 204) and k not in races}
    assert not unexpected, data["by_operation"]
    gone = sum(n for (op, status), n in answers.items() if status in (400, 404))
    assert gone <= answers.get(("delete", 204), 0)
    # both workers served, and neither was restarted
    assert data["workers"] == data["workers_after"] and len(data["workers"]) == 2
    assert all(str(pid) in data["end"]["procs"] for pid in data["workers"])


def test_files_sockets_and_connections_do_not_grow(result: dict[str, Any]) -> None:
    data = result["data"]
    base, end = data["baseline"], data["end"]
    assert base["t"] < end["t"]
    for pid, before in base["procs"].items():
        after = end["procs"][pid]
        assert after["fds"] - before["fds"] <= soak.FD_GROWTH, (pid, before, after)
        assert after["sockets"] - before["sockets"] <= soak.FD_GROWTH, (pid, before, after)
    for key in ("established", "pg_backends", "redis_clients"):
        assert end[key] - base[key] <= soak.FD_GROWTH, (key, base[key], end[key])
    # the sampler saw the traffic's connections (so "flat" is not "nothing measured")
    assert end["established"] >= 1 and end["pg_backends"] >= 1
    assert result["ok"], result["problems"]


def test_the_sockets_count_is_of_the_process_own_sockets() -> None:
    import os
    import socket

    before = soak.sockets(os.getpid())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        assert soak.sockets(os.getpid()) == before + 1
    assert soak.sockets(os.getpid()) == before
