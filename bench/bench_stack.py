"""Added cost per request of each apimw middleware alone, of the three stacked, and of
microversion-parse's middleware, on a plain GET around a trivial app, in one run.

    python bench/bench_stack.py

Goals (issue 13): the three stacked (microversion + idempotency + etag) add <= 0.1x what
microversion-parse's middleware adds; the microversion middleware alone <= 0.035x.
In-process, best of 7 (see bench/_timing.py); the ratios matter more than the absolute
numbers, which depend on the machine and its load.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from microversion_parse.middleware import MicroversionMiddleware as MVPMiddleware
from webob import Request

from apimw.etag import ETagMiddleware
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import ENVIRON_VERSION, MicroversionMiddleware
from bench._timing import per_call_us, report, wsgi_caller

BODY = [b'{"nodes": []}']
KEY = "bench-deployment-secret-0123456789"
GOAL_STACK = 0.1
GOAL_MICROVERSION = 0.035


def bare_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "13")])
    return BODY


def microversion(app: Any) -> Any:
    return MicroversionMiddleware(
        app, service_type="baremetal", min_version="1.1", max_version="1.115",
        legacy_header="X-OpenStack-Ironic-API-Version", error_profile="ironic",
    )  # fmt: skip


def idempotency(app: Any) -> Any:
    return IdempotencyMiddleware(app, store="memory://", error_profile="ironic")


def etag(app: Any) -> Any:
    return ETagMiddleware(app, hmac_key=KEY, min_version="1.97", error_profile="ironic")


def main() -> None:
    versions = [f"1.{i}" for i in range(1, 116)]
    environ = dict(Request.blank("/v1/nodes", headers={"OpenStack-API-Version": "baremetal 1.100"}).environ)
    # what the etag middleware sees behind the microversion one: the served version (etags on)
    served = {**environ, ENVIRON_VERSION: microversion(bare_app)._select("baremetal 1.100", None)[0]}
    stack = microversion(idempotency(etag(bare_app)))
    apps = [
        ("microversion (apimw) alone", microversion(bare_app)),
        ("idempotency (apimw) alone", idempotency(bare_app)),
        ("etag (apimw) alone, etags on (served 1.100)", etag(bare_app)),
        ("microversion + idempotency + etag (apimw)", stack),
        ("microversion-parse's middleware", MVPMiddleware(bare_app, "baremetal", versions)),
    ]
    baseline = per_call_us(wsgi_caller(bare_app, environ))
    rows = [("bare app (baseline)", baseline)]
    for name, app in apps:
        number = 3000 if "parse" in name else 20000
        env = served if name.startswith("etag") else environ
        rows.append((name, per_call_us(wsgi_caller(app, env), number=number)))
    report("GET /v1/nodes, OpenStack-API-Version: baremetal 1.100 (in-process, best of 7)", rows, baseline)
    added = {name: value - baseline for name, value in rows}
    theirs = added["microversion-parse's middleware"]
    print(f"\n  {'vs microversion-parse':52} {'ratio':>9} {'goal':>9}")
    for name, goal in (
        ("microversion (apimw) alone", GOAL_MICROVERSION),
        ("idempotency (apimw) alone", None),
        ("etag (apimw) alone, etags on (served 1.100)", None),
        ("microversion + idempotency + etag (apimw)", GOAL_STACK),
    ):
        ratio = added[name] / theirs
        verdict = "" if goal is None else f"<= {goal}  {'OK' if ratio <= goal else 'MISSED'}"
        print(f"  {name:52} {ratio:9.3f}x {verdict}")


if __name__ == "__main__":
    main()
