"""Client-side pieces shared by the HTTP benchmarks (run on demand, never in tests).

A keep-alive loopback client that counts its connections, the percentile arithmetic,
a bounded wait for a server to answer, and the server process's resident memory.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
VERSION_HEADER = "X-OpenStack-Ironic-API-Version"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_of(url: str) -> int:
    """The port of a loopback ``http://127.0.0.1:PORT`` URL (the benchmarks talk to loopback only)."""
    host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
    if host not in (HOST, "localhost") or not port.isdigit():
        raise SystemExit(f"{url!r}: expected http://127.0.0.1:PORT (loopback only)")
    return int(port)


class Client:
    """One keep-alive HTTP/1.1 connection to ``127.0.0.1:port``.

    ``http.client`` reopens the connection by itself after the server closed it
    (``Connection: close``); :attr:`connects` counts every opening, so a server that
    drops keep-alive connections shows up as one connect per request.  A reused
    connection that the server closed while idle is retried once on a new one.
    """

    def __init__(self, port: int, *, version: str = "latest", timeout: float = 60.0) -> None:
        self.conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
        self.base = {VERSION_HEADER: version} if version else {}
        self.connects = 0

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, lower-cased headers, body) of one request."""
        hdrs = dict(self.base)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        reused = self.conn.sock is not None
        if not reused:
            self.connects += 1
        try:
            self.conn.request(method, path, body=data, headers=hdrs)
            resp = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            # The server closed the idle keep-alive connection as we sent: it never saw the
            # request.  Once, on a new connection.
            self.conn.close()
            self.connects += 1
            self.conn.request(method, path, body=data, headers=hdrs)
            resp = self.conn.getresponse()
        payload = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload

    def close(self) -> None:
        self.conn.close()


def expect(status: int, wanted: int, payload: bytes) -> None:
    if status != wanted:
        raise SystemExit(f"unexpected {status} (wanted {wanted}): {payload[:300]!r}")


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile *p* (0-100] of the sorted *ordered* values."""
    if not ordered:
        return float("nan")
    rank = -(-p * len(ordered) // 100)  # ceil(p/100 * n)
    return ordered[min(len(ordered) - 1, max(0, int(rank) - 1))]


def summarize(samples: list[float], seconds: float | None = None) -> dict[str, Any]:
    """req/s, p50 and p99 (ms) of request latencies *samples* (seconds).

    req/s is ``len(samples) / seconds`` (a concurrent run's wall time), or for a
    sequential client, without *seconds*, the requests over the time spent inside them
    (1 / mean latency: untimed set-up between requests does not count).
    """
    ordered = sorted(samples)
    busy = seconds if seconds is not None else sum(ordered)
    return {
        "requests": len(ordered),
        "rps": len(ordered) / busy if busy > 0 else float("nan"),
        "p50_ms": percentile(ordered, 50) * 1000,
        "p99_ms": percentile(ordered, 99) * 1000,
    }


def wait_ready(
    port: int, proc: subprocess.Popen[bytes] | None, path: str = "/", timeout: float = 60.0
) -> None:
    """Return once ``GET path`` answers 200 (bounded; SystemExit if *proc* dies or time runs out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection(HOST, port, timeout=2)
            try:
                conn.request("GET", path)
                if conn.getresponse().status == 200:
                    return
            finally:
                conn.close()
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"nothing answered on {HOST}:{port}{path} within {timeout:.0f} s")


def rss_kib(pid: int | None) -> int | None:
    """Resident set size of *pid* in KiB (Linux ``/proc/<pid>/status`` VmRSS); None if unknown."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
