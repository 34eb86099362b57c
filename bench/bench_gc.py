"""The serving process's garbage collector: CPython's defaults against ``deploy.tune_gc()``.

    PYTHONPATH=examples/baremetal_service/src:. python bench/bench_gc.py [--number 300]

Each setting in its own fresh process (the collector's state is process-wide), in-process
(no HTTP server), on a SQLite file with 100 nodes and the whole pipeline: the mean time of
GET /v1/nodes/detail (100 full node documents) and of GET /v1/nodes/{uuid}, with the
collector running as it does when serving, best of 5 batches of ``--number`` requests.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEADERS = {"HTTP_X_OPENSTACK_IRONIC_API_VERSION": "1.116", "CONTENT_TYPE": "application/json"}


def _call(app: Any, method: str, path: str, body: Any = None) -> bytes:
    data = b"" if body is None else json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "6385", "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(data), "CONTENT_LENGTH": str(len(data)), "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0), "wsgi.multithread": True, "wsgi.multiprocess": False,
        "wsgi.run_once": False, "REMOTE_ADDR": "127.0.0.1", **HEADERS,
    }  # fmt: skip
    return b"".join(app(environ, lambda status, headers, exc_info=None: None))


def child(mode: str, number: int) -> None:
    from baremetal_service.deploy import build_app, tune_gc

    with tempfile.TemporaryDirectory() as tmp:
        app = build_app(f"sqlite:///{Path(tmp) / 'gc.sqlite'}", "memory://", run_conductor=False)
        uuids = [json.loads(_call(app, "POST", "/v1/nodes", {"driver": "fake-hardware", "name": f"n{i}",
                 "properties": {"cpus": 8, "memory_mb": 16384}, "extra": {"rack": "r1"}}))["uuid"]
                 for i in range(100)]  # fmt: skip
        if mode == "tuned":
            tune_gc()
        cases = (("GET /v1/nodes/detail (100)", "/v1/nodes/detail"), ("GET node", f"/v1/nodes/{uuids[0]}"))
        for label, path in cases:
            for _ in range(50):
                _call(app, "GET", path)
            best = float("inf")
            passes = 0
            for _ in range(5):
                before = sum(s["collections"] for s in gc.get_stats())
                start = time.perf_counter()
                for _ in range(number):
                    _call(app, "GET", path)
                best = min(best, (time.perf_counter() - start) / number * 1e6)
                passes = sum(s["collections"] for s in gc.get_stats()) - before
            row = {"case": label, "mode": mode, "us": best, "passes_per_request": passes / number}
            print(json.dumps(row))
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--number", type=int, default=300)
    parser.add_argument("--child", default=None)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.number)
        return
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for mode in ("default", "tuned", "default", "tuned"):  # alternated: the best of each
        done = subprocess.run(  # noqa: S603 - this script
            [sys.executable, __file__, "--child", mode, "--number", str(args.number)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        for line in done.stdout.splitlines():
            row = json.loads(line)
            key = (row["case"], mode)
            if key not in results or row["us"] < results[key]["us"]:
                results[key] = row
    print(f"{'case':28} {'default':>10} {'tuned':>10} {'factor':>7}  young passes/request default, tuned")
    for case in dict.fromkeys(c for c, _ in results):
        slow, fast = results[(case, "default")], results[(case, "tuned")]
        print(f"{case:28} {slow['us']:8.1f}us {fast['us']:8.1f}us {slow['us'] / fast['us']:6.2f}x"
              f"  {slow['passes_per_request']:.2f}, {fast['passes_per_request']:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
