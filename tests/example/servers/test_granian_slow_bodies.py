"""``--server granian`` under many clients sending their POST bodies one byte a second.

Each such client holds one of granian's request threads while the service reads its body
(servers/granian.py, ``BodyFirst``).  Before, granian had 512 of them per worker: from
about 512 slow clients on, a new client got no answer.  Now every connection granian
accepts may hold one (threads are started on demand and retired when idle): slow bodies
are bounded by the connection limit, as with waitress.
"""

from __future__ import annotations

import resource
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import pytest
import requests

from tests.servers import HOST, Service

pytestmark = [pytest.mark.slow, pytest.mark.serial]

#: More slow clients than granian had request threads before.
SLOW_CLIENTS = 1000
#: Seconds a new client may wait for ``GET /v1/nodes`` during the attack.
PROMPT = 2.0
HEAD = (
    b"POST /v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"X-OpenStack-Ironic-API-Version: latest\r\nContent-Length: 1000\r\n\r\n"
)


def _raise_own_nofile(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"this test needs a descriptor hard limit of at least {wanted} (ulimit -Hn is {hard})")
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@contextmanager
def _slow_clients(port: int, count: int) -> Iterator[None]:
    """*count* clients that sent a POST's headers and send its body one byte a second."""
    stop = threading.Event()
    with ExitStack() as stack:
        socks = []
        for _ in range(count):
            sock = stack.enter_context(socket.create_connection((HOST, port), timeout=5))
            sock.sendall(HEAD)
            socks.append(sock)

        def trickle() -> None:
            for _ in range(999):
                if stop.wait(1.0):
                    return
                for sock in socks:
                    with suppress(OSError):
                        sock.sendall(b" ")

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=10)


def test_a_thousand_slow_bodies_do_not_stop_granian(tmp_path: Path) -> None:
    _raise_own_nofile(2 * SLOW_CLIENTS + 1024)
    script = Path(sys.executable).parent / "baremetal-service"

    def argv(port: int) -> list[str]:
        database = f"sqlite:///{tmp_path / 'baremetal.sqlite'}"
        return [str(script), "--host", HOST, "--port", str(port), "--database", database, "--no-conductor",
                "--server", "granian"]  # fmt: skip

    with Service(tmp_path, argv) as service:
        with _slow_clients(service.port, SLOW_CLIENTS):
            time.sleep(3)  # every slow client's request is on a thread by now
            waited = []
            for _ in range(5):
                started = time.monotonic()
                with requests.Session() as session:
                    resp = session.get(
                        service.url + "/v1/nodes",
                        headers={"X-OpenStack-Ironic-API-Version": "latest"},
                        timeout=10,
                    )
                assert resp.status_code == 200, resp.text
                waited.append(time.monotonic() - started)
            assert max(waited) < PROMPT, waited
            assert service.running, service.output()
        created = requests.post(
            service.url + "/v1/nodes", json={"driver": "fake-hardware"},
            headers={"X-OpenStack-Ironic-API-Version": "latest"}, timeout=10,
        )  # fmt: skip
        assert created.status_code == 201, created.text
    assert "Traceback" not in service.output()
