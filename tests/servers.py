"""The one way the test suite starts and stops a server process, on loopback only.

Each :class:`Server` starts a process on 127.0.0.1 and a free port, its output in
a log file of its work directory, waits (bounded) until it answers, and stops it
(SIGTERM, then SIGKILL after a bound); it can be started again on the same port
(to test a store that goes away) and used as a context manager.  The subclasses:
real Redis, memcached and PostgreSQL servers (the session fixtures in
``tests/conftest.py``), and :class:`Service`, a process of ours serving HTTP (the
example's ``baremetal-service``, gunicorn; :func:`baremetal_service` builds the
former's command line).  A missing binary is a test failure, not a skip:
``scripts/test`` installs the servers.
"""

from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Self

HOST = "127.0.0.1"
START_TIMEOUT = 30.0
#: a Python service imports a lot before it answers; on a loaded machine that takes a while
SERVICE_START_TIMEOUT = 60.0


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

    #: seconds a start may take before it is a failure
    start_timeout = START_TIMEOUT
    #: seconds :meth:`stop` waits after SIGTERM before it sends SIGKILL
    stop_timeout = 15.0
    #: :meth:`stop` sends SIGTERM to the whole process group (True) or to the main process
    #: only, as the service's own shutdown then reaches its children (False)
    term_group = True

    def __init__(self, name: str, port: int, workdir: Path) -> None:
        self.name = name
        self.port = port
        self.workdir = workdir
        #: the process (the last one, after it ended: its ``returncode`` stays readable)
        self.proc: subprocess.Popen[bytes] | None = None
        self._started = False

    # subclasses provide the command line and a readiness probe
    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        return _can_connect(self.port)

    def preexec(self) -> Callable[[], None] | None:
        return None

    def cwd(self) -> Path:
        """The process's working directory (its work directory, unless said otherwise)."""
        return self.workdir

    def environment(self) -> Mapping[str, str] | None:
        """The process's environment (None: the test process's own)."""
        return None

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def output(self) -> str:
        """What the process wrote (stdout and stderr) so far."""
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> Self:
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
                return self
        raise AssertionError("unreachable")

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the process without waiting for it to answer (for one that must refuse to start)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        # the child keeps its own copy of the log descriptor; ours is closed at once
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own binaries
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd(),
                env=self.environment(),
                preexec_fn=self.preexec(),  # noqa: PLW1509
                start_new_session=True,
            )
        return self.proc

    def _start_once(self) -> None:
        proc = self.spawn()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise _ExitedAtStart(
                    f"{self.name} exited at start ({proc.returncode}; port {self.port}); "
                    f"{self.log}:\n{self.output()[-5000:]}"
                )
            if self.ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(
            f"{self.name} did not come up on {HOST}:{self.port} in {self.start_timeout}s:\n"
            f"{self.output()[-5000:]}"
        )

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL to the process group if it has not ended in ``stop_timeout``
        seconds; the process's exit status (None if it was not started)."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return None if proc is None else proc.returncode
        try:
            if self.term_group:
                os.killpg(proc.pid, signal.SIGTERM)
            else:
                proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            return proc.wait(timeout=15)
        try:
            return proc.wait(timeout=self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return proc.returncode

    def kill(self) -> None:
        """Stop abruptly (SIGKILL to the process group), as a crashed server would."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class Service(Server):
    """A process of ours serving HTTP on loopback, ready once ``GET ready_path`` answers 200.

    *argv* builds the command line from the port (so a first start that finds its port
    taken can move).  Used as ``with Service(...) as service:``; ``service.url``,
    ``service.output()``, ``service.proc.returncode`` after the block.
    """

    term_group = False

    def __init__(
        self,
        workdir: Path,
        argv: Callable[[int], Sequence[str]],
        *,
        name: str = "service",
        env: Mapping[str, str] | None = None,
        ready_path: str = "/",
        preexec: Callable[[], None] | None = None,
        start_timeout: float = SERVICE_START_TIMEOUT,
        cwd: Path | None = None,
    ) -> None:
        """*workdir* holds the log (``<name>.log``) and is the working directory unless *cwd*."""
        super().__init__(name, free_port(), workdir)
        self._cwd = cwd
        self.argv = argv
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.ready_path = ready_path
        self._preexec = preexec
        self.start_timeout = start_timeout

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def command(self) -> list[str]:
        return list(self.argv(self.port))

    def environment(self) -> Mapping[str, str]:
        return self.env

    def cwd(self) -> Path:
        return self._cwd or self.workdir

    def preexec(self) -> Callable[[], None] | None:
        return self._preexec

    def ready(self) -> bool:
        conn = http.client.HTTPConnection(HOST, self.port, timeout=2)
        try:
            conn.request("GET", self.ready_path, headers={"Accept": "application/json"})
            return conn.getresponse().status == 200
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()

    def assert_no_traceback(self) -> None:
        text = self.output()
        assert "Traceback" not in text, f"{self.name} logged tracebacks:\n{text[-5000:]}"


def baremetal_service(
    workdir: Path,
    *args: str,
    host: bool = True,
    env: Mapping[str, str] | None = None,
    ready_path: str = "/",
    preexec: Callable[[], None] | None = None,
) -> Service:
    """The example's ``python -m baremetal_service.cli --host 127.0.0.1 --port PORT *args`` in
    *workdir*, not yet started; *host*=False leaves ``--host`` out (the user's default)."""

    def argv(port: int) -> list[str]:
        where = ["--host", HOST] if host else []
        return [sys.executable, "-m", "baremetal_service.cli", *where, "--port", str(port), *args]

    return Service(workdir, argv, env=env, ready_path=ready_path, preexec=preexec)


@contextmanager
def cli_service(workdir: Path, *args: str, env: Mapping[str, str] | None = None) -> Iterator[Service]:
    """:func:`baremetal_service` with a fresh SQLite file ``service.db`` in *workdir*, started;
    stopped after the block, which then fails if the service logged a traceback."""
    database = f"sqlite:///{workdir / 'service.db'}"
    with baremetal_service(workdir, "--database", database, *args, env=env) as service:
        yield service
    service.assert_no_traceback()


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
