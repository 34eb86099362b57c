"""Helpers of the production-shape tests: a real gunicorn running baremetal_service.deploy.

:class:`Gunicorn` (a :class:`tests.servers.Service`) starts ``python -m gunicorn -c
python:baremetal_service.servers.gunicorn_conf`` on a free loopback port with the given
environment, waits (bounded) until ``/healthcheck`` answers, and stops the whole
process group at the end.
``BAREMETAL_DEBUG_WORKER_HEADER=1`` makes every answer name the worker process
(``X-Baremetal-Worker-Pid``), so tests can show requests really landed on
different processes.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import requests

from tests.servers import HOST, Service

GUNICORN_CONF = "python:baremetal_service.servers.gunicorn_conf"
PID_HEADER = "X-Baremetal-Worker-Pid"
LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}

T = TypeVar("T")


class Gunicorn(Service):
    """gunicorn serving ``baremetal_service.deploy:application`` with *workers* processes, ready once
    ``/healthcheck`` answers; :meth:`stop` signals the whole process group."""

    term_group = True
    stop_timeout = 20.0

    def __init__(self, workdir: Path, env: Mapping[str, str], *, workers: int = 2, threads: int = 4) -> None:
        super().__init__(
            workdir, self._gunicorn_argv, name="gunicorn",
            env={"BAREMETAL_DEBUG_WORKER_HEADER": "1", "BAREMETAL_ACCESS_LOG": "", **env},
            ready_path="/healthcheck",
        )  # fmt: skip
        self.name = f"gunicorn-{self.port}"  # several may share a work directory
        #: options before the application (a test may add one, e.g. ``--preload``)
        self.options = ["-w", str(workers), "--threads", str(threads), "--graceful-timeout", "5"]
        #: the database URL it serves (set by the tests that need it)
        self.db = ""

    def _gunicorn_argv(self, port: int) -> list[str]:
        return [sys.executable, "-m", "gunicorn", "-c", GUNICORN_CONF, *self.options,
                "-b", f"{HOST}:{port}", "baremetal_service.deploy:application"]  # fmt: skip

    def worker_pids(self, *, want: int, timeout: float = 60.0) -> set[int]:
        """Worker pids seen answering /healthcheck, in bursts of 8 until *want* were seen or
        *timeout* seconds passed (a worker still booting on a loaded machine answers later)."""
        seen: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(seen) < want and time.monotonic() < deadline:
            for resp in burst(8, lambda _i: requests.get(self.url + "/healthcheck", timeout=5)):
                seen.add(int(resp.headers[PID_HEADER]))
            time.sleep(0.05)
        return seen


def burst(n: int, fn: Callable[[int], T], *, timeout: float = 30.0) -> list[T]:
    """Run ``fn(i)`` for i in range(n) in n threads released together; results in order."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=timeout)
            results[i] = fn(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    if errors:
        raise errors[0]
    if any(thread.is_alive() for thread in threads):
        raise TimeoutError("burst did not finish")
    return results


def pid_of(resp: requests.Response) -> int:
    return int(resp.headers[PID_HEADER])


def error_code(resp: requests.Response) -> str:
    """The stable error code (``body["errors"][0]["code"]``, in every error profile)."""
    return str(resp.json()["errors"][0]["code"])
