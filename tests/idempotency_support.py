"""Helpers for the idempotency tests: a WSGI driver, a counting "create" app, backends.

Also a worker entry point for the multi-process test::

    python -m tests.idempotency_support worker <store-url> <key-prefix> <token> <requests> <start-at> <log>

It builds the middleware on the shared store, waits until the wall-clock
``start-at``, fires ``requests`` concurrent POSTs with one token, and prints one
JSON line per answer; every execution of the app appends a line to ``log``.

``python -m tests.idempotency_support die <store-url> <key-prefix> <token> <lease>``
claims the token and is SIGKILLed inside the app (a crashed worker).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from webob import Request

from tests.servers import HOST, MemcachedServer, RedisServer


@dataclass
class Answer:
    status: int
    status_line: str
    headers: list[tuple[str, str]]
    body: bytes
    closed: int = 0

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        return values[0] if values else None

    def has(self, name: str) -> bool:
        return any(k.lower() == name.lower() for k, _ in self.headers)

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def code(self) -> str:
        return str(self.json["errors"][0]["code"])


def environ_for(
    path: str = "/v1/nodes",
    *,
    method: str = "POST",
    body: bytes | None = b'{"name": "node-1", "driver": "ipmi"}',
    token: str | None = None,
    project: str | None = "project-a",
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> dict[str, Any]:
    hdrs = dict(headers or {})
    if token is not None:
        hdrs["X-Client-Token"] = token
    if project is not None:
        hdrs["X-Project-Id"] = project
    req = Request.blank(path, method=method, headers=hdrs)
    if body is not None:
        req.body = body
        req.content_type = content_type
    return req.environ  # type: ignore[no-any-return]


def call(app: Callable[..., Iterable[bytes]], environ: dict[str, Any]) -> Answer:
    """Run *app* like a strict WSGI server: write(), iterable, close() once."""
    got: dict[str, Any] = {}
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if exc_info is not None and got.get("sent"):
            raise exc_info[1].with_traceback(exc_info[2])
        got["status"], got["headers"] = status, headers
        return written.append

    result = app(environ, start_response)
    closed = 0
    try:
        for chunk in result:
            got["sent"] = True
            written.append(chunk)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
            closed = 1
    status = got["status"]
    return Answer(int(status[:3]), status, list(got["headers"]), b"".join(written), closed)


def post(app: Callable[..., Iterable[bytes]], token: str | None = None, **kwargs: Any) -> Answer:
    return call(app, environ_for(token=token, **kwargs))


class CreateApp:
    """A "create node" endpoint that counts its executions (the side effect we must not repeat)."""

    def __init__(self, *, delay: float = 0.0, status: str = "201 Created") -> None:
        self.delay = delay
        self.status = status
        self.calls = 0
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        with self._lock:
            self.calls += 1
            self.bodies.append(body)
            serial = self.calls
        if self.delay:
            time.sleep(self.delay)
        node = str(uuid.uuid4())
        out = json.dumps({"uuid": node, "serial": serial, "received": body.decode("latin-1")}).encode()
        start_response(
            self.status,
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(out))),
                ("Location", f"http://{HOST}/v1/nodes/{node}"),
                ("ETag", f'"{node[:8]}"'),
                ("OpenStack-API-Version", "baremetal 1.2"),
                ("Set-Cookie", f"session={node}"),
                ("Date", "Sun, 22 Nov 2026 20:00:00 GMT"),
                ("X-OpenStack-Request-Id", f"req-{node}"),
            ],
        )
        return [out]


@dataclass
class Backend:
    """One store under test, with TTLs its clock can honour (memcached ticks in whole seconds)."""

    name: str
    url: str
    lease: float
    retention: float
    prefix: str = field(default_factory=lambda: f"t{uuid.uuid4().hex[:12]}:")

    def options(self, **overrides: Any) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "store": self.url,
            "lease": self.lease,
            "retention": self.retention,
            "key_prefix": self.prefix,
            "store_timeout": 0.5,
        }
        opts.update(overrides)
        return opts


class DurableRedisServer(RedisServer):
    """Redis that writes every command to its AOF, so a SIGKILL loses nothing."""

    def command(self) -> list[str]:
        cmd = super().command()
        i = cmd.index("--appendonly")
        cmd[i + 1] = "yes"
        return [*cmd, "--appendfsync", "always"]


class ClusterRedisServer(RedisServer):
    """A one-node Redis Cluster that owns all 16384 slots."""

    @property
    def url(self) -> str:
        return f"redis+cluster://{HOST}:{self.port}"

    def __init__(self, workdir: Any) -> None:
        super().__init__(workdir)
        # the cluster bus listens on port + 10000 (Redis 6 cannot move it): find a pair that is free
        import socket

        for _ in range(200):
            with socket.socket() as low, socket.socket() as high:
                try:
                    low.bind((HOST, 0))
                    port = low.getsockname()[1]
                    if port > 55535:
                        continue
                    high.bind((HOST, port + 10000))
                except OSError:
                    continue
            self.port = port
            return
        raise RuntimeError("no free port pair for a Redis Cluster node")

    def command(self) -> list[str]:
        return [*super().command(), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]

    def start(self) -> None:
        super().start()
        import redis

        with redis.Redis(host=HOST, port=self.port) as client:
            client.execute_command("CLUSTER", "ADDSLOTS", *range(16384))  # ADDSLOTSRANGE needs Redis 7
            deadline = time.monotonic() + 20
            while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                if time.monotonic() > deadline:
                    raise RuntimeError("one-node cluster did not become ready")
                time.sleep(0.1)


class SentinelServer(RedisServer):
    """A Sentinel watching *master* as service ``apimw``."""

    def __init__(self, workdir: Any, master: RedisServer) -> None:
        super().__init__(workdir)
        self.name = "sentinel"
        self.master = master

    @property
    def url(self) -> str:
        return f"redis+sentinel://{HOST}:{self.port}/apimw/0"

    def command(self) -> list[str]:
        conf = self.workdir / "sentinel.conf"
        conf.write_text(
            f"bind {HOST}\nport {self.port}\nprotected-mode no\ndir {self.workdir}\n"
            f"sentinel monitor apimw {HOST} {self.master.port} 1\n"
        )
        from tests.servers import _require

        return [_require("redis-server"), str(conf), "--sentinel"]


def private_server(kind: str, workdir: Any) -> RedisServer | MemcachedServer:
    return DurableRedisServer(workdir) if kind == "redis" else MemcachedServer(workdir)


# -- multi-process worker ------------------------------------------------------------------


def _worker(url: str, prefix: str, token: str, requests: int, start_at: float, log: str) -> None:
    from apimw.idempotency import IdempotencyMiddleware

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        environ["wsgi.input"].read()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        time.sleep(0.2)
        out = json.dumps({"pid": os.getpid(), "uuid": str(uuid.uuid4())}).encode()
        start_response("201 Created", [("Content-Type", "application/json")])
        return [out]

    mw = IdempotencyMiddleware(app, store=url, key_prefix=prefix, lease=30, retention=60)
    answers: list[Answer] = []
    lock = threading.Lock()

    def one() -> None:
        answer = post(mw, token)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=one) for _ in range(requests)]
    time.sleep(max(0.0, start_at - time.time()))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for answer in answers:
        print(json.dumps({"status": answer.status, "body": answer.body.decode(),
                          "replayed": answer.header("Idempotent-Replayed")}))  # fmt: skip


def _die(url: str, prefix: str, token: str, lease: float) -> None:
    """Claim *token*, then die by SIGKILL inside the app, as a crashed worker would."""
    import signal

    from apimw.idempotency import IdempotencyMiddleware

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")

    post(IdempotencyMiddleware(app, store=url, key_prefix=prefix, lease=lease), token)


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "worker":
        _, _, url, prefix, token, count, start, logfile = sys.argv
        _worker(url, prefix, token, int(count), float(start), logfile)
    elif len(sys.argv) == 6 and sys.argv[1] == "die":
        _die(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]))
    else:
        raise SystemExit(__doc__)
