"""The example service's own request-path pieces against the library pieces they replace.

    PYTHONPATH=examples/baremetal_service/src:. python bench/bench_request_path.py [--rounds 5]

In-process (no HTTP server), on a fresh SQLite file with 100 nodes, the whole
middleware stack plus the Flask app: GET /v1/nodes/{uuid}, GET /v1/nodes (100),
GET /v1/nodes/detail (100), POST /v1/nodes, PATCH /v1/nodes/{uuid} with If-Match and
DELETE /v1/nodes/{uuid}, each in two configurations built side by side in one process,
so that each ratio is measured in the same run:

* ``lean``: the defaults (orjson bodies);
* ``stdlib json``: ``json.dumps`` for response bodies instead of orjson.

The garbage collector is process-wide and is not compared here (bench/bench_gc.py).
Request ids (oslo.middleware's) and body validation (fastjsonschema) have one path each;
bench/bench_validation.py compares the validators.  Writes are timed in batches
of ``--number // 10`` requests (a DELETE's node is created untimed before its batch).

The configurations alternate within each round; the figure is the best per-request time
over all rounds (the least disturbed by other work on the machine), and the factor is
that configuration's time over the lean one's.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._timing import per_call_us  # noqa: E402


def _environ(method: str, path: str, body: bytes = b"") -> dict[str, Any]:
    return {
        "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "6385", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body)), "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False,
        "wsgi.run_once": False, "HTTP_X_OPENSTACK_IRONIC_API_VERSION": "1.116",
        "REMOTE_ADDR": "127.0.0.1", "CONTENT_TYPE": "application/json",
    }  # fmt: skip


def _call(app: Any, method: str, path: str, body: Any = None) -> tuple[str, bytes]:
    data = b"" if body is None else json.dumps(body).encode()
    seen: dict[str, str] = {}

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        seen["status"] = status

    out = b"".join(app(_environ(method, path, data), start_response))
    return seen["status"], out


def _etag(app: Any, node: str) -> str:
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        seen.update(headers)

    b"".join(app(_environ("GET", f"/v1/nodes/{node}"), start_response))
    return str(seen["ETag"])


def _patch(app: Any, node: str, etag: str, value: int) -> tuple[str, str]:
    """PATCH *node* with ``If-Match: etag``: (status, the new ETag)."""
    data = json.dumps([{"op": "add", "path": "/extra/bench", "value": value}]).encode()
    environ = _environ("PATCH", f"/v1/nodes/{node}", data)
    environ["HTTP_IF_MATCH"] = etag
    seen: dict[str, Any] = {}

    def start_response(status: str, headers: Any, exc_info: Any = None) -> None:
        seen["status"] = status
        seen.update(headers)

    b"".join(app(environ, start_response))
    assert seen["status"].startswith("200"), seen["status"]
    return seen["status"], str(seen["ETag"])


def _caller(app: Any, path: str) -> Callable[[], Any]:
    def call() -> None:
        status, _ = _call(app, "GET", path)
        assert status.startswith("200"), status

    return call


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--number", type=int, default=300, help="requests per timing (best of 3)")
    args = parser.parse_args()

    from baremetal_service.deploy import build_app
    from baremetal_service.handlers import common

    workdir = Path(tempfile.mkdtemp(prefix="apimw-bench-path-"))
    db_url = f"sqlite:///{workdir / 'bench.db'}"
    apps = {
        "lean": build_app(db_url, "memory://", run_conductor=False),
        "stdlib json": build_app(db_url, "memory://", run_conductor=False),
    }
    uuids = []
    for i in range(100):
        status, out = _call(apps["lean"], "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"n{i}"})
        assert status.startswith("201"), out
        uuids.append(json.loads(out)["uuid"])
    cases: dict[str, str | None] = {
        "GET node": f"/v1/nodes/{uuids[50]}", "GET /v1/nodes (100)": "/v1/nodes",
        "GET /v1/nodes/detail (100)": "/v1/nodes/detail",
        "POST node": None, "PATCH node If-Match": None, "DELETE node": None,
    }  # fmt: skip
    real_encode = common.encode_json

    def stdlib(doc: Any) -> bytes:
        return json.dumps(doc).encode()

    samples: dict[tuple[str, str], list[float]] = {}
    serial = iter(range(10**9))
    batch = max(args.number // 10, 20)

    def timed_writes(app: Any, case: str) -> float:
        """Best mean µs of one write request over 3 batches of *batch* requests."""
        best = float("inf")
        for _ in range(3):
            made: list[str] = []
            if case == "DELETE node":
                for _ in range(batch):
                    _status, out = _call(app, "POST", "/v1/nodes", {"driver": "fake-hardware"})
                    made.append(json.loads(out)["uuid"])
            target = uuids[(next(serial)) % len(uuids)]
            etag = _etag(app, target)
            start = time.perf_counter()
            for _ in range(batch):
                if case == "POST node":
                    body = {"driver": "fake-hardware", "name": f"w{next(serial)}"}
                    status, _ = _call(app, "POST", "/v1/nodes", body)
                    assert status.startswith("201"), status
                elif case == "PATCH node If-Match":
                    status, etag = _patch(app, target, etag, next(serial))
                else:
                    status, _ = _call(app, "DELETE", f"/v1/nodes/{made.pop()}")
                    assert status.startswith("204"), status
            best = min(best, (time.perf_counter() - start) / batch * 1e6)
        return best

    try:
        for _round in range(args.rounds):
            for case, path in cases.items():
                number = max(args.number // 10, 20) if "(100)" in case else args.number
                for name, app in apps.items():
                    common.encode_json = stdlib if name == "stdlib json" else real_encode
                    try:
                        if path is None:
                            us = timed_writes(app, case)
                        else:
                            us = per_call_us(_caller(app, path), number=number, repeat=3)
                    finally:
                        common.encode_json = real_encode
                    samples.setdefault((case, name), []).append(us)
    finally:
        for app in apps.values():
            app.close()

    print(f"{'case':28} {'configuration':18} {'us/req':>9} {'factor vs lean':>15}")
    for case in cases:
        lean = min(samples[(case, "lean")])
        for name in apps:
            value = min(samples[(case, name)])
            print(f"{case:28} {name:18} {value:9.1f} {value / lean:14.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
