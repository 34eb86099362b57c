"""The benchmark's figures (nearest-rank percentiles, the req/s of a sequential client) and its client."""

from __future__ import annotations

import math
import socket
import threading

from bench._http import HOST, Client, percentile, summarize


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0], 50) == 1.0  # rank ceil(0.5 * 2) = 1
    assert math.isnan(percentile([], 50))


def test_sequential_rate_is_requests_over_time_spent_in_them() -> None:
    # 4 requests of 10 ms and one of 60 ms: 5 requests in 100 ms of requests -> 50 req/s,
    # whatever untimed set-up happened between them; p99 is the slow one.
    got = summarize([0.01, 0.01, 0.06, 0.01, 0.01])
    assert got["requests"] == 5
    assert math.isclose(got["rps"], 50.0)
    assert math.isclose(got["p50_ms"], 10.0)
    assert math.isclose(got["p99_ms"], 60.0)
    # a concurrent run: the requests over its wall time
    assert math.isclose(summarize([0.01] * 8, 0.02)["rps"], 400.0)


# -- the benchmark's own HTTP client, against a scripted server ------------------------------


class _Scripted:
    """A loopback server that answers each request on a connection with the next scripted bytes
    (and closes the connection after a ``None`` entry), recording every request it reads."""

    def __init__(self, script: list[bytes | None]) -> None:
        self.script = list(script)
        self.requests: list[bytes] = []
        self.connections = 0
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _read_request(self, conn: socket.socket) -> bytes | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                while len(body) < int(line.split(b":")[1]):
                    body += conn.recv(65536)
        return head + b"\r\n\r\n" + body

    def _serve(self) -> None:
        self.listener.settimeout(10)
        while self.script:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                return
            self.connections += 1
            with conn:
                while self.script:
                    request = self._read_request(conn)
                    if request is None:
                        break
                    self.requests.append(request)
                    answer = self.script.pop(0)
                    if answer is None:  # close without answering (a stale keep-alive connection)
                        break
                    conn.sendall(answer)
                    if b"connection: close" in answer.lower():
                        break

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=10)


def test_the_bench_client_reads_every_framing_and_keeps_its_connection() -> None:
    server = _Scripted([
        b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nX-A: 1\r\n\r\n{\"a\":1}",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\n{\"b\r\n4;ext=1\r\n\":2}\r\n0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil-close",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    ])  # fmt: skip
    client = Client(server.port, version="1.2")
    try:
        assert client.call("GET", "/a") == (200, {"content-length": "7", "x-a": "1"}, b'{"a":1}')
        status, headers, body = client.call("POST", "/b", {"x": 1}, {"X-Client-Token": "t"})
        assert (status, body) == (201, b'{"b":2}')
        assert client.call("DELETE", "/c")[::2] == (204, b"")
        assert client.call("GET", "/d")[::2] == (200, b"until-close")
        assert client.call("GET", "/e")[::2] == (200, b"ok")
    finally:
        client.close()
        server.close()
    assert client.connects == server.connections == 2  # one reconnect, after the close
    post = server.requests[1]
    assert post.startswith(b"POST /b HTTP/1.1\r\n")
    assert b"\r\nX-OpenStack-Ironic-API-Version: 1.2\r\n" in post
    assert b"\r\nX-Client-Token: t\r\n" in post
    assert post.endswith(b'\r\n\r\n{"x": 1}')


def test_the_bench_client_retries_once_when_an_idle_connection_was_closed() -> None:
    server = _Scripted([b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n1", None,
                        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n2"])  # fmt: skip
    client = Client(server.port)
    try:
        assert client.call("GET", "/")[2] == b"1"
        assert client.call("GET", "/")[2] == b"2"  # the first try met a closed connection
    finally:
        client.close()
        server.close()
    assert client.connects == 2
    assert len(server.requests) == 3
