"""Bench the bare-metal service over real HTTP: sequential keep-alive requests.

    python bench/bench_service.py [--database URL] [--seconds-per-case 3] [--threads 8]

Starts ``baremetal-service`` (the console command, whole middleware stack,
conductor on) on a free loopback port with a fresh SQLite file (or
``--database``), and drives it from one keep-alive connection:

* GET one node                    (1.117, ETag returned)
* GET /v1/nodes with 100 nodes    (the default list fields)
* POST /v1/nodes (create)
* PATCH a node with If-Match      (the etag from the previous answer)
* replayed POST                   (same X-Client-Token; answered from the store)
* GET one port, GET /v1/ports with 100 ports, POST /v1/ports, PATCH a port with
  If-Match (the declared resources' generic CRUD)

For each: requests/s, p50 and p99 latency, and the ratio to real Ironic 39.0's
numbers from issue 5 (GET node ~70 req/s, 100-node list ~15 req/s, create
~19 req/s, measured the same way).  A baseline measured in the same run -- a
bare WSGI "hello" app on the same server -- shows how much of each request is
the HTTP stack itself.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Real Ironic 39.0 (API + conductor, SQLite, noauth, fake-hardware) on the same kind of machine.
IRONIC_39 = {"get node": 70.0, "list 100 nodes": 15.0, "create node": 19.0}
VERSION = {"X-OpenStack-Ironic-API-Version": "latest"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Client:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        hdrs = dict(VERSION)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        hdrs.update(headers or {})
        self.conn.request(method, path, body=data, headers=hdrs)
        resp = self.conn.getresponse()
        payload = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload


def measure(
    name: str,
    seconds: float,
    fn: Callable[[int], None],
    max_requests: int = 200_000,
) -> dict[str, Any]:
    for i in range(20):  # warm-up
        fn(-1 - i)
    samples: list[float] = []
    start = time.perf_counter()
    deadline = start + seconds
    i = 0
    while i < max_requests:
        t0 = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - t0)
        i += 1
        if t0 > deadline:
            break
    elapsed = time.perf_counter() - start
    samples.sort()
    return {
        "case": name,
        "requests": len(samples),
        "rps": len(samples) / elapsed,
        "p50_ms": statistics.median(samples) * 1000,
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000,
    }


def expect(status: int, wanted: int, payload: bytes) -> None:
    if status != wanted:
        raise SystemExit(f"unexpected {status} (wanted {wanted}): {payload[:300]!r}")


def bench_service(port: int, seconds: float) -> list[dict[str, Any]]:
    client = Client(port)
    run = uuid.uuid4().hex[:8]
    # 100 nodes for the list; the first one is the one we GET and PATCH.
    uuids = []
    for i in range(100):
        status, _, payload = client.call(
            "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"b-{run}-{i}"}
        )
        expect(status, 201, payload)
        uuids.append(json.loads(payload)["uuid"])
    target = uuids[0]
    results = []

    def get_node(_: int) -> None:
        status, _h, payload = client.call("GET", f"/v1/nodes/{target}")
        expect(status, 200, payload)

    results.append(measure("get node", seconds, get_node))

    def list_nodes(_: int) -> None:
        status, _h, payload = client.call("GET", "/v1/nodes")
        expect(status, 200, payload)

    results.append(measure("list 100 nodes", seconds, list_nodes))

    counter = iter(range(10**9))

    def create(_: int) -> None:
        status, _h, payload = client.call(
            "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"c-{run}-{next(counter)}"}
        )
        expect(status, 201, payload)

    results.append(measure("create node", seconds, create, max_requests=5000))

    _, headers, _ = client.call("GET", f"/v1/nodes/{target}")
    etag = {"value": headers.get("etag", "")}

    def patch(i: int) -> None:
        body = [{"op": "add", "path": "/extra/n", "value": i}]
        status, h, payload = client.call("PATCH", f"/v1/nodes/{target}", body, {"If-Match": etag["value"]})
        expect(status, 200, payload)
        etag["value"] = h.get("etag", etag["value"])

    results.append(measure("patch with If-Match", seconds, patch, max_requests=5000))

    token = f"bench-{run}"
    status, _, payload = client.call(
        "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"r-{run}"}, {"X-Client-Token": token}
    )
    expect(status, 201, payload)

    def replay(_: int) -> None:
        status, h, payload = client.call(
            "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"r-{run}"}, {"X-Client-Token": token}
        )
        expect(status, 201, payload)

    results.append(measure("replayed POST", seconds, replay))
    results.extend(bench_ports(client, target, run, seconds))
    return results


def bench_ports(client: Client, node: str, run: str, seconds: float) -> list[dict[str, Any]]:
    """The declared resources' generic CRUD, measured on ports (100 on one node)."""
    prefix = int(run[:6], 16) & 0xFFFFFF
    macs = (f"52:{prefix >> 16:02x}:{(prefix >> 8) & 0xFF:02x}:{i >> 16 & 0xFF:02x}:"
            f"{i >> 8 & 0xFF:02x}:{i & 0xFF:02x}" for i in range(10**6))  # fmt: skip
    ports = []
    for _ in range(100):
        status, _h, payload = client.call("POST", "/v1/ports", {"node_uuid": node, "address": next(macs)})
        expect(status, 201, payload)
        ports.append(json.loads(payload)["uuid"])
    target = ports[0]
    results = []

    def get_port(_: int) -> None:
        status, _h, payload = client.call("GET", f"/v1/ports/{target}")
        expect(status, 200, payload)

    results.append(measure("get port", seconds, get_port))

    def list_ports(_: int) -> None:
        status, _h, payload = client.call("GET", "/v1/ports")
        expect(status, 200, payload)

    results.append(measure("list 100 ports", seconds, list_ports))

    def create(_: int) -> None:
        status, _h, payload = client.call("POST", "/v1/ports", {"node_uuid": node, "address": next(macs)})
        expect(status, 201, payload)

    results.append(measure("create port", seconds, create, max_requests=5000))

    _, headers, _ = client.call("GET", f"/v1/ports/{target}")
    etag = {"value": headers.get("etag", "")}

    def patch(i: int) -> None:
        body = [{"op": "add", "path": "/extra/n", "value": i}]
        status, h, payload = client.call("PATCH", f"/v1/ports/{target}", body, {"If-Match": etag["value"]})
        expect(status, 200, payload)
        etag["value"] = h.get("etag", etag["value"])

    results.append(measure("patch port with If-Match", seconds, patch, max_requests=5000))
    return results


def _hello(environ: Any, start_response: Any) -> list[bytes]:
    body = b'{"hello": "world"}'
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def bench_baseline(seconds: float, threads: int) -> dict[str, Any]:
    from waitress.server import create_server

    server = create_server(_hello, host="127.0.0.1", port=0, threads=threads)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        client = Client(server.effective_port)

        def hello(_: int) -> None:
            client.call("GET", "/")

        result = measure("baseline: bare WSGI app, same server", seconds, hello)
        client.conn.close()
        return result
    finally:
        # Let the worker threads finish before the sockets go (else they write to a closed trigger).
        server.task_dispatcher.shutdown(timeout=5)
        server.close()


def wait_ready(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"baremetal-service exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/")
            conn.getresponse().read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("baremetal-service did not start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", default=None, help="database URL (default: a fresh SQLite file)")
    parser.add_argument("--seconds-per-case", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-baremetal-"))
    database = args.database or f"sqlite:///{workdir / 'bench.sqlite'}"
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "baremetal_service.cli",
        "--port",
        str(port),
        "--database",
        database,
        "--threads",
        str(args.threads),
    ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_ready(port, proc)
        results = bench_service(port, args.seconds_per_case)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    baseline = bench_baseline(args.seconds_per_case, args.threads)
    if args.json:
        print(json.dumps({"results": results, "baseline": baseline, "ironic_39": IRONIC_39}, indent=2))
        return 0
    print(f"{'case':<40} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'app ms':>7}   vs Ironic 39.0")
    for row in [*results, baseline]:
        ironic = IRONIC_39.get(row["case"])
        ratio = f"{row['rps'] / ironic:6.1f}x  (Ironic {ironic:.0f} req/s)" if ironic else ""
        # p50 minus the bare server's p50: what the service itself costs, whatever the machine load.
        app_ms = row["p50_ms"] - baseline["p50_ms"]
        timings = f"{row['rps']:9.0f} {row['p50_ms']:8.2f} {row['p99_ms']:8.2f} {app_ms:7.2f}"
        print(f"{row['case']:<40} {timings}   {ratio}")
    print(
        f"\n{len(results)} cases, sequential keep-alive, {args.seconds_per_case:.0f} s each; "
        f"database {database}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
