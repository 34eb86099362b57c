"""Shared pieces of the reliability harness: real servers, a migrated database, the service
under gunicorn, a keep-alive HTTP client and the figures' arithmetic.

Every scenario module of :mod:`bench.reliability` has a ``TITLE``, a docstring (what it does
and what it proves, shown in docs/example/reliability.md), ``run(ctx) -> dict`` and optionally
``plot(result, out_dir) -> list[str]`` (the PNG file names it wrote).  ``run`` returns a
JSON-able result::

    {"ok": bool,                 # the guarantee held (nothing lost, no 5xx, ...)
     "summary": "one sentence with the key figures",
     "table": {"columns": [...], "rows": [[...], ...]},
     "problems": ["what went wrong", ...],   # empty when ok
     "data": {...}}              # raw series for plot()

``ctx.quick`` asks for the short version (seconds, for the test suite); counts and
durations then come from ``ctx.pick(full, quick)``.  Everything runs on 127.0.0.1, every loop
is bounded in count and time, and every server started through the context is stopped by
``ctx.close()``.
"""

from __future__ import annotations

import http.client
import json
import os
import platform
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from tests.example.production_support import Gunicorn
from tests.servers import HOST, MemcachedServer, PostgresServer, RedisServer, Server, make_workdir

T = TypeVar("T")
LATEST = "latest"


class Context:
    """What a scenario needs: a work directory, lazily started servers, fresh databases."""

    def __init__(self, *, quick: bool, workdir: Path | None = None,
                 postgres: PostgresServer | None = None) -> None:
        """*postgres*: a running server to create the databases on (the test suite's session
        server; not stopped by :meth:`close`); by default the context starts its own."""
        self.quick = quick
        self.workdir = workdir or make_workdir("reliability")
        self._owns_workdir = workdir is None
        self._servers: list[Server] = []
        self._gunicorns: list[Gunicorn] = []
        self._postgres: PostgresServer | None = postgres

    def pick(self, full: T, quick: T) -> T:
        return quick if self.quick else full

    def subdir(self, name: str) -> Path:
        path = self.workdir / f"{name}-{uuid.uuid4().hex[:6]}"
        path.mkdir(parents=True)
        path.chmod(0o755)
        return path

    # -- servers -------------------------------------------------------------------------
    def postgres(self) -> PostgresServer:
        """The run's PostgreSQL (one server, a database per :meth:`database` call)."""
        if self._postgres is None:
            self._postgres = PostgresServer(self.subdir("postgres"))
            self._postgres.start()
            self._servers.append(self._postgres)
        return self._postgres

    def own_postgres(self) -> PostgresServer:
        """A PostgreSQL of the caller's own (to stop and restart it)."""
        server = PostgresServer(self.subdir("postgres"))
        server.start()
        self._servers.append(server)
        return server

    def redis(self, *extra: str) -> RedisServer:
        """A new Redis; *extra* arguments go to redis-server (e.g. ``--appendonly yes``)."""
        server = RedisServer(self.subdir("redis"))
        if extra:
            base = server.command

            def command() -> list[str]:
                return [*base(), *extra]

            server.command = command  # type: ignore[method-assign]
        server.start()
        self._servers.append(server)
        return server

    def memcached(self) -> MemcachedServer:
        server = MemcachedServer(self.subdir("memcached"))
        server.start()
        self._servers.append(server)
        return server

    def store_url(self, kind: str) -> str:
        """A fresh store of *kind* (``redis``, ``memcached`` or ``memory``) as a store URL."""
        if kind == "redis":
            return self.redis().url
        if kind == "memcached":
            return self.memcached().url
        if kind == "memory":
            return "memory://"
        raise ValueError(kind)

    # -- databases -----------------------------------------------------------------------
    def database(self, kind: str, server: PostgresServer | None = None) -> str:
        """A new, migrated database of *kind* (``sqlite`` or ``postgresql``); its URL."""
        from baremetal_service.db.engine import create_engine
        from baremetal_service.db.migrate import upgrade

        if kind == "sqlite":
            url = f"sqlite:///{self.subdir('sqlite') / 'service.db'}"
        elif kind == "postgresql":
            import psycopg

            pg = server or self.postgres()
            name = f"bm_{uuid.uuid4().hex[:16]}"
            with psycopg.connect(f"host={HOST} port={pg.port} user=postgres dbname=postgres",
                                 autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            url = f"postgresql+psycopg://postgres@{HOST}:{pg.port}/{name}"
        else:
            raise ValueError(kind)
        engine = create_engine(url)
        try:
            upgrade(engine)
        finally:
            engine.dispose()
        return url

    # -- the service ---------------------------------------------------------------------
    def gunicorn(self, database: str, store: str, *, workers: int = 2, threads: int = 4,
                 env: Mapping[str, str] | None = None) -> Gunicorn:
        """The service under gunicorn (*workers* processes), started and answering."""
        gun = Gunicorn(self.subdir("gunicorn"), {
            "BAREMETAL_DATABASE": database,
            "BAREMETAL_STORE": store,
            "BAREMETAL_ETAG_KEY": os.urandom(32).hex(),
            **(env or {}),
        }, workers=workers, threads=threads)
        gun.db = database
        self._gunicorns.append(gun)
        gun.start()
        return gun

    def close(self) -> None:
        # gunicorn takes seconds to stop (graceful timeout): stop them all at once
        stoppers = [threading.Thread(target=gun.stop) for gun in self._gunicorns]
        for thread in stoppers:
            thread.start()
        for thread in stoppers:
            thread.join(60)
        for server in reversed(self._servers):
            server.stop()
        self._gunicorns.clear()
        self._servers.clear()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- HTTP -----------------------------------------------------------------------------------
class Reply:
    __slots__ = ("status", "headers", "body", "seconds")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, seconds: float) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.seconds = seconds

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error_code(self) -> str:
        try:
            return str(self.json()["errors"][0]["code"])
        except (ValueError, KeyError, IndexError, TypeError):
            return ""


class Client:
    """One keep-alive HTTP/1.1 connection to ``http://127.0.0.1:port`` (reconnects on error).

    A connection failure is answered as status 0 (so a scenario can count it), never raised.
    """

    def __init__(self, url: str, *, timeout: float = 30.0, version: str = LATEST,
                 project: str | None = None) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        assert host == HOST, "the harness talks to loopback only"
        self.port = int(port)
        self.timeout = timeout
        self.base = {"X-OpenStack-Ironic-API-Version": version, "Accept": "application/json"}
        if project:
            self.base["X-Project-Id"] = project
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: Any = None,
                headers: Mapping[str, str] | None = None) -> Reply:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        hdrs = {**self.base, **(headers or {})}
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        start = time.perf_counter()
        try:
            if self._conn is None:
                self._conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
            self._conn.request(method, path, body=data, headers=hdrs)
            resp = self._conn.getresponse()
            payload = resp.read()
            reply = Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload,
                          time.perf_counter() - start)
            if resp.will_close:
                self.close()
            return reply
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return Reply(0, {}, str(exc).encode(), time.perf_counter() - start)

    def get(self, path: str, **kw: Any) -> Reply:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> Reply:
        return self.request("POST", path, body, **kw)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def clients(url: str, n: int, **kw: Any) -> Iterator[list[Client]]:
    made = [Client(url, **kw) for _ in range(n)]
    try:
        yield made
    finally:
        for c in made:
            c.close()


# -- figures --------------------------------------------------------------------------------
def percentiles(values: list[float], points: tuple[int, ...] = (50, 90, 99)) -> dict[str, float]:
    """Nearest-rank percentiles (and max) of *values*, in the values' unit; {} when empty."""
    if not values:
        return {}
    ordered = sorted(values)
    out = {f"p{p}": ordered[min(len(ordered) - 1, max(0, -(-p * len(ordered) // 100) - 1))]
           for p in points}
    out["max"] = ordered[-1]
    return out


def ms(seconds: float) -> float:
    return round(seconds * 1000.0, 2)


def rss_kib(pid: int) -> int:
    """Resident set size of *pid* in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def child_pids(pid: int) -> list[int]:
    """Direct children of *pid* (gunicorn's workers)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def machine() -> dict[str, Any]:
    """What the figures ran on."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = 0
    with suppress(OSError, IndexError, ValueError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) // 1024

    def version(argv: list[str]) -> str:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)  # noqa: S603
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"

    from tests.servers import _require

    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "memory_mib": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "redis": version([_require("redis-server"), "--version"]),
        "memcached": version([_require("memcached"), "-V"]),
        "postgres": version([_require("postgres"), "--version"]),
    }
