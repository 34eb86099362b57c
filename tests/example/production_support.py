"""Helpers of the production-shape tests: a real gunicorn running baremetal_service.wsgi.

:class:`Gunicorn` starts ``python -m gunicorn -c python:baremetal_service.gunicorn_conf``
on a free loopback port with the given environment, waits (bounded) until
``/healthcheck`` answers, and stops the whole process group at the end.
``BAREMETAL_DEBUG_WORKER_HEADER=1`` makes every answer name the worker process
(``X-Baremetal-Worker-Pid``), so tests can show requests really landed on
different processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import requests

from tests.servers import HOST, free_port

REPO = Path(__file__).resolve().parents[2]
GUNICORN_CONF = "python:baremetal_service.gunicorn_conf"
PID_HEADER = "X-Baremetal-Worker-Pid"
LATEST = {"X-OpenStack-Ironic-API-Version": "latest"}
START_TIMEOUT = 60.0

T = TypeVar("T")


class Gunicorn:
    """gunicorn serving ``baremetal_service.wsgi:application`` with *workers* processes."""

    def __init__(self, workdir: Path, env: Mapping[str, str], *, workers: int = 2, threads: int = 4) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://{HOST}:{self.port}"
        self.log = workdir / f"gunicorn-{self.port}.log"
        self.argv = [
            sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF),
            "-w", str(workers), "--threads", str(threads), "-b", f"{HOST}:{self.port}",
            "--graceful-timeout", "5",
            "baremetal_service.wsgi:application",
        ]  # fmt: skip
        self.env = {**os.environ, "BAREMETAL_DEBUG_WORKER_HEADER": "1", "BAREMETAL_ACCESS_LOG": "", **env}
        self.proc: subprocess.Popen[bytes] | None = None
        #: the database URL it serves (set by the tests that need it)
        self.db = ""

    def spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        return self.proc

    def start(self) -> Gunicorn:
        proc = self.spawn()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited ({proc.returncode}):\n{self.output()}")
            try:
                if requests.get(self.url + "/healthcheck", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gunicorn did not come up in {START_TIMEOUT}s:\n{self.output()}")

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def worker_pids(self, *, want: int, attempts: int = 200) -> set[int]:
        """Worker pids seen answering /healthcheck (bounded; stops once *want* were seen)."""
        seen: set[int] = set()
        for _ in range(attempts // 8):
            for resp in burst(8, lambda _i: requests.get(self.url + "/healthcheck", timeout=5)):
                seen.add(int(resp.headers[PID_HEADER]))
            if len(seen) >= want:
                break
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


@contextmanager
def cli_service(
    workdir: Path, *extra: str, started: list[subprocess.Popen[bytes]] | None = None
) -> Iterator[str]:
    """``python -m baremetal_service.cli`` on a free loopback port with a fresh SQLite file
    in *workdir*; yields its URL, stops it after, and fails if it logged a traceback.
    *started* receives the process."""
    port = free_port()
    log = workdir / "service.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [
                sys.executable, "-m", "baremetal_service.cli", "--host", HOST, "--port", str(port),
                "--database", f"sqlite:///{workdir / 'service.db'}", *extra,
            ],
            stdout=out, stderr=subprocess.STDOUT, cwd=workdir,
        )  # fmt: skip
    if started is not None:
        started.append(proc)
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                if requests.get(url + "/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the service did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, f"the service logged tracebacks:\n{text[-5000:]}"
