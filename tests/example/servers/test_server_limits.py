"""The ``baremetal-service`` command under connection exhaustion, and its start-up errors.

Each test starts the real console script in a subprocess on 127.0.0.1 and a free
port (SQLite in a temporary directory) and talks to it over TCP, with its default
server (waitress) and, where the two differ or the guarantee is the server's own, with
``--server granian`` too.  The service runs
with the descriptor soft limit most Linux machines give a process (1024), as a
user's shell would start it; the test process raises its own soft limit to hold
its share of the idle connections.
"""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.example.production_support import Gunicorn
from tests.servers import HOST, Service, free_port

HEADERS = {"X-OpenStack-Ironic-API-Version": "latest"}
SERVICE_SOFT_NOFILE = 1024  # the usual default soft limit (ulimit -n) of a login shell
IDLE_CONNECTIONS = 1000
#: Worker threads and concurrent list requests: enough for the database pool to hold a few
#: dozen descriptors (pool_size 10 + max_overflow 20), as a busy service does.
BUSY = 32


def _command() -> list[str]:
    script = Path(sys.executable).parent / "baremetal-service"
    assert script.exists(), f"the console script is not installed next to {sys.executable}"
    return [str(script)]


def _raise_own_nofile(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"this test needs a descriptor hard limit of at least {wanted} (ulimit -Hn is {hard})")
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _nofile(limit: int | None, *, hard_too: bool = False) -> Callable[[], None] | None:
    """A ``preexec_fn`` giving the service *limit* as descriptor soft limit (and hard limit with
    *hard_too*); None: the test process's own limits."""
    if limit is None:
        return None

    def apply() -> None:  # in the child, before exec
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        soft = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, soft if hard_too else hard))

    return apply


def _service(
    tmp_path: Path, *args: str, soft_nofile: int | None = SERVICE_SOFT_NOFILE, hard_too: bool = False
) -> Service:
    """The console script on a free loopback port in *tmp_path* (``with _service(...) as service``),
    with *soft_nofile* as its descriptor soft limit (and hard limit with *hard_too*)."""

    def argv(port: int) -> list[str]:
        return [*_command(), "--host", HOST, "--port", str(port), *args]

    return Service(tmp_path, argv, preexec=_nofile(soft_nofile, hard_too=hard_too))


def _open_idle(port: int, count: int, stack: ExitStack) -> list[socket.socket]:
    """*count* TCP connections that send nothing (the kernel completes the handshake even when
    the server does not accept them yet)."""
    socks = []
    for _ in range(count):
        sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        sock.settimeout(5)
        sock.connect((HOST, port))
        socks.append(sock)
    return socks


def _get(url: str, timeout: float) -> requests.Response:
    with requests.Session() as session:
        return session.get(url, headers=HEADERS, timeout=timeout)


def _create_nodes(url: str, count: int) -> None:
    with requests.Session() as session:
        for i in range(count):
            resp = session.post(
                url + "/v1/nodes",
                json={"driver": "fake-hardware", "name": f"node-{i}", "extra": {"pad": "x" * 200}},
                headers=HEADERS,
                timeout=10,
            )
            assert resp.status_code == 201, resp.text


def _concurrent_lists(url: str, clients: int, expected: int) -> None:
    def one(_: int) -> int:
        resp = _get(url + "/v1/nodes/detail", timeout=60)
        assert resp.status_code == 200, resp.text
        return len(resp.json()["nodes"])

    with ThreadPoolExecutor(clients) as pool:
        assert list(pool.map(one, range(clients))) == [expected] * clients


# -- 1. connection exhaustion -----------------------------------------------------------------------


SERVERS = ["granian", "waitress"]


@pytest.mark.parametrize(
    ("database_url", "soft_nofile", "server"),
    [
        ("sqlite", None, "granian"),
        ("postgresql", SERVICE_SOFT_NOFILE, "granian"),
        ("postgresql", SERVICE_SOFT_NOFILE, "waitress"),
    ],
    ids=["sqlite-ulimit-high-granian", "postgresql-ulimit-1024-granian", "postgresql-ulimit-1024-waitress"],
    indirect=["database_url"],
)
@pytest.mark.serial  # measured against the clock
def test_a_thousand_idle_connections_neither_kill_the_service_nor_lock_clients_out(
    tmp_path: Path, database_url: str, soft_nofile: int | None, server: str
) -> None:
    """After concurrent traffic (the database pool holds its connections), 1,000 idle connections.

    Before: waitress's select() loop died with "filedescriptor out of range in select()"
    once a client descriptor passed 1023 (and the process refused every connection
    afterwards), or, with fewer descriptors, every new client waited behind the idle
    ones until they timed out.  The service starts with the usual soft limit of 1024
    descriptors, and with a high one (as in a container), where select() is what fails.
    """
    _raise_own_nofile(2 * IDLE_CONNECTIONS + 512)
    args = ("--server", server, "--database", database_url, "--threads", str(BUSY))
    with _service(tmp_path, *args, soft_nofile=soft_nofile) as service:
        _create_nodes(service.url, 300)
        _concurrent_lists(service.url, BUSY, 300)  # the database pool now holds its connections
        with ExitStack() as stack:
            _open_idle(service.port, IDLE_CONNECTIONS, stack)
            time.sleep(3)  # held for a few seconds
            assert service.running, service.output()
            # A health check and an API call answer while the idle connections are held.
            started = time.monotonic()
            assert _get(service.url + "/", timeout=10).status_code == 200
            assert _get(service.url + "/v1/nodes?limit=1", timeout=10).status_code == 200
            assert time.monotonic() - started < 10
        # ... and after they are gone; the process is still alive and logged no crash.
        _concurrent_lists(service.url, BUSY, 300)
        assert service.running, service.output()
    assert "out of range" not in service.output()
    assert "Traceback" not in service.output()


@pytest.mark.serial  # measured against the clock
@pytest.mark.parametrize("server", SERVERS)
def test_with_a_hard_limit_of_1024_the_service_survives_exhaustion(tmp_path: Path, server: str) -> None:
    """1,000 silent connections against a hard limit of 1024 descriptors: new clients wait (bounded)
    and are served once the idle ones time out (``--idle-timeout``).  The connection limit comes
    down to fit, said once at start, and no descriptor runs out; granian's worker is still the same
    process."""
    _raise_own_nofile(IDLE_CONNECTIONS + 512)
    args = ("--server", server, "--no-conductor", "--idle-timeout", "3")
    with _service(tmp_path, *args, soft_nofile=SERVICE_SOFT_NOFILE, hard_too=True) as service:
        assert "the descriptor limit (ulimit -n) is 1024: at most 768 connections instead of 10000" in (
            service.output()
        )
        with ExitStack() as stack:
            _open_idle(service.port, IDLE_CONNECTIONS, stack)
            time.sleep(2)
            started = time.monotonic()
            assert _get(service.url + "/", timeout=20).status_code == 200  # once idle ones time out
            assert time.monotonic() - started < 15
            assert service.running, service.output()
        assert _get(service.url + "/v1/nodes", timeout=10).status_code == 200
    assert "Traceback" not in service.output()
    if server == "waitress":
        assert "accept() threw" not in service.output()  # never out of descriptors
    else:
        assert service.proc.returncode == 0, service.output()
        assert "exited unexpectedly" not in service.output()


def _silent_until_closed(sock: socket.socket, deadline: float) -> bool:
    """True when the server closes *sock* (an idle connection) before *deadline*."""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            if sock.recv(1024) == b"":
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


@pytest.mark.serial  # measured against the clock
def test_idle_connections_time_out_and_clients_beyond_the_limit_wait_a_bounded_time(tmp_path: Path) -> None:
    """waitress: every slot held by a silent connection: a new client is served once the idle
    ones time out."""
    limit, idle_timeout = 40, 2
    args = ("--server", "waitress", "--no-conductor", "--connection-limit", str(limit),
            "--idle-timeout", str(idle_timeout))  # fmt: skip
    with _service(tmp_path, *args) as service, ExitStack() as stack:
        idle = _open_idle(service.port, limit + 10, stack)  # the last ones wait in the listen backlog
        time.sleep(0.5)
        started = time.monotonic()
        resp = _get(service.url + "/v1/nodes", timeout=30)
        waited = time.monotonic() - started
        assert resp.status_code == 200, resp.text
        # at most two rounds of "idle timeout + sweep" (the client queued behind the overflow)
        assert waited < 2 * (idle_timeout + 2) + 2, waited
        # the server closed the idle connections it accepted (the first ones surely)
        assert _silent_until_closed(idle[0], time.monotonic() + 10)
        assert service.running, service.output()


@pytest.mark.serial  # measured against the clock
@pytest.mark.parametrize("server", SERVERS)
def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(tmp_path: Path, server: str) -> None:
    """A client that answered one request and then stays silent loses its connection after
    ``--idle-timeout`` seconds (and not long before)."""
    with _service(tmp_path, "--server", server, "--no-conductor", "--idle-timeout", "2") as service:
        with socket.create_connection((HOST, service.port), timeout=10) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
            started = time.monotonic()
            assert _silent_until_closed(sock, started + 10)
            assert 1.0 <= time.monotonic() - started < 8
        assert service.running, service.output()


# -- 2. start-up errors: one line, exit 2 ------------------------------------------------------------


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own console script
        [*_command(), "--no-conductor", *args], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _assert_one_line_error(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("baremetal-service: cannot start: cannot listen on "), lines[0]
    for text in expected:
        assert text in lines[0], lines[0]


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path, server: str) -> None:
    with socket.socket() as listener:
        listener.bind((HOST, 0))
        listener.listen()
        port = listener.getsockname()[1]
        done = _run(tmp_path, "--server", server, "--host", HOST, "--port", str(port))
    _assert_one_line_error(done, f"{HOST}:{port}", "in use")


def test_an_address_not_on_this_machine_is_one_line_and_exit_2(tmp_path: Path, server: str) -> None:
    port = free_port()
    # 192.0.2.1 is TEST-NET-1: never local
    done = _run(tmp_path, "--server", server, "--host", "192.0.2.1", "--port", str(port))
    _assert_one_line_error(done, f"192.0.2.1:{port}", "assign requested address")


def test_an_unknown_host_name_is_one_line_and_exit_2(tmp_path: Path, server: str) -> None:
    done = _run(tmp_path, "--server", server, "--host", "no-such-host.invalid", "--port", str(free_port()))
    _assert_one_line_error(done, "no-such-host.invalid")


@pytest.mark.parametrize("option", ["--connection-limit", "--idle-timeout"])
def test_limits_below_one_are_refused(tmp_path: Path, option: str) -> None:
    done = _run(tmp_path, option, "0")
    assert done.returncode == 2
    assert f"{option} must be at least 1" in done.stderr


def test_sigterm_while_busy_stops_cleanly(tmp_path: Path, server: str) -> None:
    """Before: the SIGTERM handler closed the server under the worker threads still answering,
    and each printed "OSError: [Errno 9] Bad file descriptor" (most busy shutdowns)."""
    stop = threading.Event()

    def hammer(url: str) -> None:
        with requests.Session() as session:
            while not stop.is_set():
                try:
                    session.get(url, headers=HEADERS, timeout=5)
                except requests.RequestException:
                    time.sleep(0.05)

    threads: list[threading.Thread] = []
    try:
        with _service(tmp_path, "--server", server, "--no-conductor") as service:
            threads = [threading.Thread(target=hammer, args=(service.url + "/v1/nodes",)) for _ in range(8)]
            for thread in threads:
                thread.start()
            time.sleep(1.5)
            assert service.running
        # leaving the block sent SIGTERM while the clients kept sending
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    assert service.proc.returncode == 0, service.output()
    assert "Traceback" not in service.output()


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(child) for child in path.read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_granian_worker_stops_when_the_command_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the command (no clean stop possible) must not leave its worker serving the port."""
    with _service(tmp_path, "--server", "granian", "--no-conductor") as service:
        workers = _children(service.proc.pid)
        assert workers, "granian started no worker process"
        service.proc.kill()
        service.proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in workers):
            assert time.monotonic() < deadline, "the worker outlived the killed command"
            time.sleep(0.1)
        with pytest.raises(requests.ConnectionError):
            requests.get(service.url + "/", timeout=2)


def test_granian_workers_share_the_etag_key_and_the_replay_store(tmp_path: Path, redis_server: Any) -> None:
    """``--workers 2``: two processes answer; an etag from either is accepted by both, and a
    retried create with its X-Client-Token is answered once, whichever process gets it."""
    args = ("--server", "granian", "--workers", "2", "--no-conductor", "--store", redis_server.url)
    with _service(tmp_path, *args) as service:
        workers = _children(service.proc.pid)
        assert len(workers) == 2, service.output()
        busy_before = [_cpu_ticks(pid) for pid in workers]
        token = {**HEADERS, "X-Client-Token": f"tok-{time.monotonic_ns()}"}
        created = []
        for _ in range(6):  # a new connection each time: the kernel spreads them over the workers
            resp = requests.post(service.url + "/v1/nodes", json={"driver": "fake-hardware", "name": "w-1"},
                                 headers=token, timeout=10)  # fmt: skip
            assert resp.status_code == 201, resp.text
            created.append(resp.json()["uuid"])
        assert len(set(created)) == 1
        url = f"{service.url}/v1/nodes/{created[0]}"
        etags = {requests.get(url, headers=HEADERS, timeout=10).headers["ETag"] for _ in range(20)}
        assert len(etags) == 1, etags
        for i in range(6):  # each PATCH's If-Match is the etag another connection was given
            etag = requests.get(url, headers=HEADERS, timeout=10).headers["ETag"]
            patch = [{"op": "add", "path": "/extra/i", "value": i}]
            resp = requests.patch(url, json=patch, headers={**HEADERS, "If-Match": etag}, timeout=10)
            assert resp.status_code == 200, resp.text
        nodes = requests.get(service.url + "/v1/nodes", headers=HEADERS, timeout=10).json()["nodes"]
        assert [n["uuid"] for n in nodes] == created[:1]
        for _ in range(200):  # both processes answered some of these requests
            requests.get(url, headers=HEADERS, timeout=10)
        busy = [after - before for after, before in zip(map(_cpu_ticks, workers), busy_before, strict=True)]
        assert min(busy) > 0, busy
    assert service.proc.returncode == 0, service.output()


def _cpu_ticks(pid: int) -> int:
    """CPU time (user + system, clock ticks) *pid* has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_more_than_one_worker_refuses_the_in_process_store(tmp_path: Path) -> None:
    done = _run(tmp_path, "--server", "granian", "--workers", "2", "--port", str(free_port()))
    assert done.returncode == 2
    assert done.stderr.startswith("baremetal-service: cannot start: the memory:// idempotency"), done.stderr
    done = _run(tmp_path, "--workers", "2")  # the default server, waitress
    assert done.returncode == 2
    assert "--workers is granian's" in done.stderr


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


# -- 3. the HTTP parser's own 400 -----------------------------------------------------------------------


def _raw_exchange(port: int, request: bytes) -> bytes:
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):  # the server closes the connection after its 400
            chunks.append(chunk)
        return b"".join(chunks)


@pytest.mark.parametrize(
    "bad", [b"X-Note: a\x01b\r\n", b"Content-Length: abc\r\n"], ids=["control-character", "bad-length"]
)
def test_a_request_the_server_cannot_parse_gets_its_own_400_and_the_service_goes_on(
    tmp_path: Path, server: str, bad: bytes
) -> None:
    """The server answers this itself, before the application (docs/example/baremetal-service.md,
    "Server"): waitress in plain text, granian with an empty body; both close the connection."""
    with _service(tmp_path, "--server", server, "--no-conductor") as service:
        answer = _raw_exchange(service.port, b"GET /v1/nodes HTTP/1.1\r\nHost: x\r\n" + bad + b"\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith((b"HTTP/1.0 400 ", b"HTTP/1.1 400 ")), answer
        if server == "waitress":
            assert b"content-type: text/plain" in head.lower(), head
            assert body.startswith(b"Bad Request"), body
        else:
            assert b"\r\ncontent-length: 0" in head.lower(), head
            assert body == b"", body
        assert b"\r\nconnection: close" in head.lower(), head
        # the next request, on a new connection, is answered normally (JSON)
        resp = _get(service.url + "/v1/nodes", timeout=10)
        assert resp.status_code == 200
        assert resp.json() == {"nodes": []}
        assert service.running, service.output()


def test_a_huge_declared_body_is_refused_before_it_is_read(tmp_path: Path, server: str) -> None:
    """A 50 MB Content-Length is answered 413 at once: the server does not wait for (or spool)
    the body before the application's 1 MiB limit can speak."""
    with _service(tmp_path, "--server", server, "--no-conductor") as service:
        with socket.create_connection((HOST, service.port), timeout=5) as sock:
            sock.sendall(b"POST /v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 52428800\r\n\r\n")  # fmt: skip
            head = sock.recv(65536)  # no body sent: a server waiting for it times out here
        assert head.startswith((b"HTTP/1.0 413 ", b"HTTP/1.1 413 ")), head
        # a body over the application's limit but under the server's gets the JSON 413
        big = b'{"driver": "fake-hardware", "extra": {"x": "' + b"y" * (2 * 1024 * 1024) + b'"}}'
        resp = requests.post(service.url + "/v1/nodes", data=big, timeout=30,
                             headers={**HEADERS, "Content-Type": "application/json"})  # fmt: skip
        assert resp.status_code == 413
        assert resp.json()["error_message"]
        assert service.running, service.output()


# -- 4. a handful of hostile clients cannot stop the service ------------------------------------------

#: Clients sending a request body at one byte a second (more than any thread pool here).
TRICKLERS = 64
#: Silent TCP connections held at once (more than granian's and waitress's old limits).
MANY_IDLE = 5000
#: How long a normal client may wait for its answer while they are held.
PROMPT = 2.0
TRICKLE_HEAD = (
    b"POST /v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"X-OpenStack-Ironic-API-Version: latest\r\nContent-Length: 1000\r\n\r\n"
)


@contextmanager
def _tricklers(port: int, count: int) -> Iterator[list[socket.socket]]:
    """*count* clients that sent a POST's headers (``Content-Length: 1000``) and then send its body
    one byte a second, until the block ends (at most 1,000 s: the body would be complete)."""
    stop = threading.Event()
    with ExitStack() as stack:
        socks = _open_idle(port, count, stack)
        for sock in socks:
            sock.sendall(TRICKLE_HEAD)

        def trickle() -> None:
            for _ in range(999):
                if stop.wait(1.0):
                    return
                for sock in socks:
                    with suppress(OSError):  # the server gave up on this one: fine
                        sock.sendall(b" ")

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            yield socks
        finally:
            stop.set()
            thread.join(timeout=10)


def _connect_silently(port: int, count: int, stack: ExitStack) -> list[socket.socket]:
    """*count* connections that send nothing, opened without waiting for each handshake (a server
    that stops accepting leaves the rest in its full listen backlog, retrying: so does an attacker)."""
    socks = []
    for _ in range(count):
        sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        sock.setblocking(False)
        sock.connect_ex((HOST, port))
        socks.append(sock)
    return socks


def _answered_promptly(url: str) -> float:
    """Seconds a new client waited for ``GET /v1/nodes`` (200), asserting it was under PROMPT."""
    started = time.monotonic()
    try:
        resp = _get(url + "/v1/nodes", timeout=PROMPT + 8)
    except requests.RequestException as exc:
        raise AssertionError(f"no answer in {PROMPT + 8} s: {exc}") from exc
    waited = time.monotonic() - started
    assert resp.status_code == 200, resp.text
    assert waited < PROMPT, f"a normal client waited {waited:.1f} s"
    return waited


def _serves_normally(url: str) -> None:
    _create_nodes(url, 3)
    _concurrent_lists(url, 8, 3)


#: The ways the service is served: the command's default server (waitress), its other server
#: (``--server granian``) and its several worker processes (``--workers 2``, granian's), and the
#: production recipe (servers/gunicorn_conf.py).
SHAPES = ["default", "granian", "granian-workers", "gunicorn"]


@contextmanager
def _served(shape: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Service]:
    """The service served the *shape* way, with this test process's descriptor limits (raised
    for the idle connections), SQLite in *tmp_path*; no traceback in its log at the end."""
    database = f"sqlite:///{tmp_path / 'baremetal.sqlite'}"
    if shape == "gunicorn":  # the recipe as production.md runs it: 4 workers x 4 threads
        store = request.getfixturevalue("redis_server").url
        env = {"BAREMETAL_DATABASE": database, "BAREMETAL_STORE": store, "BAREMETAL_CONDUCTOR_WORKERS": "0"}
        with Gunicorn(tmp_path, env, workers=4, threads=4) as gun:
            yield gun
        output = gun.output()
    else:
        args = ["--database", database, "--no-conductor"]
        if shape == "granian":
            args += ["--server", "granian"]
        elif shape == "granian-workers":
            store = request.getfixturevalue("redis_server").url
            args += ["--server", "granian", "--workers", "2", "--store", store]
        with _service(tmp_path, *args, soft_nofile=None) as service:
            yield service
        output = service.output()
    assert "Traceback" not in output


@pytest.mark.parametrize("shape", SHAPES)
def test_clients_trickling_bodies_do_not_stop_the_service(
    tmp_path: Path, shape: str, request: pytest.FixtureRequest
) -> None:
    """Before: granian (then the default) handed each request to a Python thread as soon as its
    headers arrived, and the thread waited there for the body: 8 slow clients stopped the service;
    gunicorn's gthread workers did the same with their 16 threads."""
    with _served(shape, tmp_path, request) as service:
        with _tricklers(service.port, TRICKLERS):
            time.sleep(2)
            for _ in range(3):
                _answered_promptly(service.url)
            assert service.running, service.output()
        _serves_normally(service.url)


#: More clients sending a body slowly than granian had request threads (512) before.
MANY_TRICKLERS = 1000


@pytest.mark.serial
def test_a_thousand_slow_bodies_do_not_stop_granian(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Each client sending its body slowly holds one of granian's request threads while the
    service reads the body (servers/granian.py, ``BodyFirst``).  Before, granian had 512 of
    them per worker: from about 512 such clients on, a new client got no answer in 10 s.  Now
    it may start one per connection it holds, so they are bounded by the connection limit."""
    _raise_own_nofile(2 * MANY_TRICKLERS + 1024)
    with _served("granian", tmp_path, request) as service:
        with _tricklers(service.port, MANY_TRICKLERS):
            time.sleep(3)  # every one of them is on a request thread by now
            for _ in range(5):
                _answered_promptly(service.url)
            assert service.running, service.output()
        _serves_normally(service.url)


@pytest.mark.parametrize("shape", SHAPES)
def test_five_thousand_idle_connections_do_not_stop_the_service(
    tmp_path: Path, shape: str, request: pytest.FixtureRequest
) -> None:
    """Before: granian accepted about 1,024 connections (its backpressure), so a new client
    waited behind silent ones until they timed out (30 s), and with 5,000 never got in;
    waitress accepted 2,000."""
    _raise_own_nofile(2 * MANY_IDLE + 1024)
    with _served(shape, tmp_path, request) as service:
        with ExitStack() as stack:
            _connect_silently(service.port, MANY_IDLE, stack)
            time.sleep(2)
            for _ in range(3):
                _answered_promptly(service.url)
            assert service.running, service.output()
        _serves_normally(service.url)


# -- 5. what a user sees: --help, a version header the server must pass on, gunicorn's start-up error --


def test_help_lists_the_openapi_subcommand() -> None:
    done = subprocess.run([*_command(), "--help"], capture_output=True, text=True, timeout=60)  # noqa: S603
    assert done.returncode == 0, done.stderr
    assert "baremetal-service openapi" in done.stdout, done.stdout


@pytest.mark.parametrize("shape", ["default", "gunicorn"])
@pytest.mark.parametrize("header", ["X-OpenStack-Ironic-API-Version", "OpenStack-API-Version"])
def test_a_non_ascii_version_header_reaches_the_service_and_gets_406(
    tmp_path: Path, header: str, shape: str, request: pytest.FixtureRequest
) -> None:
    """``١.١`` (Arabic-Indic digits, UTF-8) is no version: the microversion middleware answers 406.
    Before: granian, then the default server, handed such a header on empty, and the request
    was served at the minimum version (200).  ``--server granian`` still does (granian builds
    the environ; docs/example/baremetal-service.md, "Server")."""
    value = "١.١".encode() if header.startswith("X-") else "baremetal ١.١".encode()
    with _served(shape, tmp_path, request) as service:
        with socket.create_connection((HOST, service.port), timeout=10) as sock:
            sock.sendall(b"GET /v1/nodes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                         + header.encode() + b": " + value + b"\r\n\r\n")  # fmt: skip
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        answer = b"".join(chunks)
        assert answer.startswith((b"HTTP/1.0 406 ", b"HTTP/1.1 406 ")), answer[:300]
        assert service.running, service.output()


def test_a_bad_setting_under_gunicorn_is_one_line_and_a_failed_start(tmp_path: Path) -> None:
    """The recipe of docs/example/production.md with ``BAREMETAL_DATABASE=nonsense://``: the sentence
    saying what is wrong, once, no traceback, and gunicorn exits non-zero.  Before: about 30
    lines of traceback around it."""
    gun = Gunicorn(tmp_path, {"BAREMETAL_DATABASE": "nonsense://", "BAREMETAL_STORE": "memory://"}, workers=1)
    proc = gun.spawn()
    try:
        assert proc.wait(timeout=60) != 0
    finally:
        gun.stop()
    out = gun.output()
    assert "Traceback" not in out, out
    lines = [line for line in out.splitlines() if "baremetal-service: cannot start:" in line]
    assert len(lines) == 1, out
    assert "nonsense" in lines[0], lines[0]


def test_a_chunked_body_reaches_the_application_whole(tmp_path: Path, server: str) -> None:
    """granian's request threads read the body before the application does (slow clients): a
    body in two chunks still arrives whole, and a node is created."""
    body = b'{"driver": "fake-hardware", "name": "chunked"}'
    chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (5, body[:5], len(body) - 5, body[5:])
    with _service(tmp_path, "--server", server, "--no-conductor") as service:
        answer = _raw_exchange(service.port, b"POST /v1/nodes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                               b"Content-Type: application/json\r\nX-OpenStack-Ironic-API-Version: latest\r\n"
                               b"Transfer-Encoding: chunked\r\n\r\n" + chunks)  # fmt: skip
        assert answer.startswith(b"HTTP/1.1 201 "), answer[:300]
        assert _get(service.url + "/v1/nodes/chunked", timeout=10).status_code == 200
