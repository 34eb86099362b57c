"""Real Redis, memcached and PostgreSQL servers for the test suite, on loopback only.

Each :class:`Server` starts a real server binary on 127.0.0.1 and a free port,
in a private temporary directory, waits (bounded) until it answers, and can be
stopped and started again on the same port (to test a store that goes away).
The session fixtures in ``tests/conftest.py`` use these.  A missing binary is a
test failure, not a skip: ``scripts/test`` installs the servers.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HOST = "127.0.0.1"
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _can_connect(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _require(binary: str) -> str:
    path = shutil.which(binary) or next(
        (str(p) for p in Path("/usr/lib/postgresql").glob(f"*/bin/{binary}")), None
    )
    if path is None:
        raise RuntimeError(
            f"{binary} is not installed; run scripts/test (it installs the test servers)"
        )
    return path


class _ExitedAtStart(RuntimeError):
    """The server process ended during start-up (most often: its port was taken)."""


class Server:
    """A server process on loopback that can be stopped and restarted on its port."""

    #: seconds a start may take before it counts as failed
    start_timeout = START_TIMEOUT

    def __init__(self, name: str, port: int, workdir: Path) -> None:
        self.name = name
        self.port = port
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self._started = False

    # subclasses provide the command line and a readiness probe
    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        return _can_connect(self.port)

    def preexec(self) -> Callable[[], None] | None:
        return None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        """Start the server; a first start retries on a new port if the chosen one was taken.

        ``free_port()`` probes a port and lets it go, so another process can bind it before
        the server does.  A restart (after ``stop()``/``kill()``) keeps its port: tests
        rely on the store coming back where it was.
        """
        attempts = 1 if self._started else 3
        for attempt in range(attempts):
            try:
                self._start_once()
            except _ExitedAtStart:
                if attempt == attempts - 1:
                    raise
                self.port = free_port()
            else:
                self._started = True
                return

    def _start_once(self) -> None:
        # the child keeps its own copy of the log descriptor; ours is closed at once
        with open(self.workdir / f"{self.name}.log", "ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own binaries
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                preexec_fn=self.preexec(),  # noqa: PLW1509
                start_new_session=True,
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise _ExitedAtStart(f"{self.name} exited at start (port {self.port}); see {log.name}")
            if self.ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.name} did not come up on {HOST}:{self.port} in {self.start_timeout}s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)

    def kill(self) -> None:
        """Stop abruptly (SIGKILL), as a crashed store would."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


class RedisServer(Server):
    def __init__(self, workdir: Path) -> None:
        super().__init__("redis", free_port(), workdir)

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def command(self) -> list[str]:
        return [
            _require("redis-server"),
            "--bind", HOST, "--port", str(self.port), "--save", "", "--appendonly", "no",
            "--dir", str(self.workdir), "--protected-mode", "yes",
        ]  # fmt: skip

    def ready(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False


class MemcachedServer(Server):
    def __init__(self, workdir: Path) -> None:
        super().__init__("memcached", free_port(), workdir)

    @property
    def url(self) -> str:
        return f"memcached://{HOST}:{self.port}"

    def command(self) -> list[str]:
        cmd = [_require("memcached"), "-l", HOST, "-p", str(self.port), "-U", "0", "-m", "64"]
        if os.geteuid() == 0:
            cmd += ["-u", "nobody"]
        return cmd

    def ready(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=0.5) as sock:
                sock.sendall(b"version\r\n")
                return sock.recv(32).startswith(b"VERSION")
        except OSError:
            return False


class PostgresServer(Server):
    """PostgreSQL with a throwaway cluster (fsync off); runs as ``postgres`` when we are root."""

    def __init__(self, workdir: Path) -> None:
        super().__init__("postgres", free_port(), workdir)
        self.datadir = workdir / "pgdata"
        self._as_postgres = os.geteuid() == 0

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@{HOST}:{self.port}/postgres"

    def preexec(self) -> Callable[[], None] | None:
        if not self._as_postgres:
            return None
        import pwd

        user = pwd.getpwnam("postgres")

        def demote() -> None:
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

        return demote

    def initdb(self) -> None:
        if self.datadir.exists():
            return
        if self._as_postgres:
            import pwd

            user = pwd.getpwnam("postgres")
            os.chown(self.workdir, user.pw_uid, user.pw_gid)
        subprocess.run(  # noqa: S603
            [_require("initdb"), "-D", str(self.datadir), "-A", "trust", "-U", "postgres",
             "--no-sync", "-E", "UTF8", "--locale=C"],
            check=True, capture_output=True, preexec_fn=self.preexec(),  # noqa: PLW1509
            cwd=self.workdir,
        )  # fmt: skip

    def command(self) -> list[str]:
        return [
            _require("postgres"), "-D", str(self.datadir), "-h", HOST, "-p", str(self.port),
            "-k", str(self.workdir), "-c", "fsync=off", "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off", "-c", "max_connections=300",
        ]  # fmt: skip

    def start(self) -> None:
        self.initdb()
        super().start()
        # the port answers a little before the server accepts queries
        import psycopg

        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                with psycopg.connect(f"host={HOST} port={self.port} user=postgres dbname=postgres"):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def make_workdir(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"apimw-{prefix}-"))
    path.chmod(0o755)
    return path
