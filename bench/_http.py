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
    """One keep-alive HTTP/1.1 connection to ``127.0.0.1:port``, on a plain socket.

    The same client drives both sides of every comparison, so its own cost is added to
    both; it is kept small so that it is not most of what is measured.  ``http.client``
    (parsing headers line by line through a buffered file object, building a message
    object per response) cost 0.1-0.5 ms a request in Python, which on a 0.6 ms request
    was most of the difference between two servers.  Here a request is one ``sendall``
    of preformatted bytes, and the response is parsed from one receive buffer: status
    line, headers, then the body by ``Content-Length``, ``chunked`` framing, or (for a
    ``Connection: close`` answer without either) until the server closes.  A 1xx, 204 and
    304 (and any answer to HEAD) have no body.

    :attr:`connects` counts every opening: a server that drops keep-alive connections
    shows up as one connect per request.  A reused connection that the server closed
    while idle is retried once on a new one (the server never saw the request).
    """

    def __init__(self, port: int, *, version: str = "latest", timeout: float = 60.0) -> None:
        self.port = port
        self.timeout = timeout
        self.base = f"Host: {HOST}:{port}\r\n" + (f"{VERSION_HEADER}: {version}\r\n" if version else "")
        self.sock: socket.socket | None = None
        self.buf = b""
        self.connects = 0

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((HOST, self.port), timeout=self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.buf = sock, b""
        self.connects += 1
        return sock

    def _fill(self, sock: socket.socket) -> bool:
        chunk = sock.recv(262144)
        self.buf += chunk
        return bool(chunk)

    def _read_response(self, sock: socket.socket, method: str) -> tuple[int, dict[str, str], bytes, bool]:
        while True:
            end = self.buf.find(b"\r\n\r\n")
            while end < 0:
                if not self._fill(sock):
                    raise http.client.RemoteDisconnected("closed before a response")
                end = self.buf.find(b"\r\n\r\n")
            head, self.buf = self.buf[:end].decode("latin-1"), self.buf[end + 4 :]
            lines = head.split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if 100 <= status < 200:  # an interim answer: the real one follows
                continue
            break
        close = headers.get("connection", "").lower() == "close"
        if method == "HEAD" or status in (204, 304):
            return status, headers, b"", close
        if "content-length" in headers:
            length = int(headers["content-length"])
            while len(self.buf) < length:
                if not self._fill(sock):
                    raise http.client.IncompleteRead(self.buf)
            body, self.buf = self.buf[:length], self.buf[length:]
            return status, headers, body, close
        if "chunked" in headers.get("transfer-encoding", "").lower():
            parts = []
            while True:
                end = self.buf.find(b"\r\n")
                while end < 0:
                    if not self._fill(sock):
                        raise http.client.IncompleteRead(b"".join(parts))
                    end = self.buf.find(b"\r\n")
                size = int(self.buf[:end].split(b";", 1)[0], 16)
                while len(self.buf) < end + 2 + size + 2:
                    if not self._fill(sock):
                        raise http.client.IncompleteRead(b"".join(parts))
                if size == 0:  # no trailers are expected here; skip to the blank line
                    done = self.buf.find(b"\r\n\r\n", end)
                    while done < 0:
                        if not self._fill(sock):
                            break
                        done = self.buf.find(b"\r\n\r\n", end)
                    self.buf = self.buf[done + 4 :] if done >= 0 else b""
                    return status, headers, b"".join(parts), close
                parts.append(self.buf[end + 2 : end + 2 + size])
                self.buf = self.buf[end + 2 + size + 2 :]
        while self._fill(sock):  # neither: the body ends when the server closes
            pass
        body, self.buf = self.buf, b""
        return status, headers, body, True

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """(status, lower-cased headers, body) of one request."""
        head = f"{method} {path} HTTP/1.1\r\n{self.base}"
        data = b""
        if body is not None:
            data = json.dumps(body).encode()
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            head += "Content-Length: 0\r\n"
        for name, value in (headers or {}).items():
            head += f"{name}: {value}\r\n"
        request = head.encode("latin-1") + b"\r\n" + data
        sock = self.sock
        reused = sock is not None
        if sock is None:
            sock = self._connect()
        try:
            sock.sendall(request)
            status, hdrs, payload, close = self._read_response(sock, method)
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            self.close()
            if not reused:
                raise
            # The server closed the idle keep-alive connection as we sent: it never saw the
            # request.  Once, on a new connection.
            sock = self._connect()
            sock.sendall(request)
            status, hdrs, payload, close = self._read_response(sock, method)
        if close:
            self.close()
        return status, hdrs, payload

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buf = None, b""


def serving_pid(pid: int | None) -> int | None:
    """The process that runs the application: *pid*'s only child when it has one (granian's
    worker under the ``baremetal-service`` command), else *pid* itself."""
    if pid is None:
        return None
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return pid
    return int(children[0]) if len(children) == 1 else pid


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
