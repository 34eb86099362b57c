"""Added cost per request of MicroversionMiddleware, and of microversion-parse's, in one run.

    python bench/bench_microversion.py

Target: <= 5 us added on a GET with a valid header (microversion-parse adds ~100 us).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from microversion_parse.middleware import MicroversionMiddleware as MVPMiddleware
from webob import Request

from apimw.microversion import MicroversionMiddleware
from bench._timing import per_call_us, report, wsgi_caller

BODY = [b'{"nodes": []}']


def bare_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "13")])
    return BODY


def main() -> None:
    versions = [f"1.{i}" for i in range(1, 116)]
    ours = MicroversionMiddleware(
        bare_app, service_type="baremetal", min_version="1.1", max_version="1.115",
        legacy_header="X-OpenStack-Ironic-API-Version", error_profile="ironic",
    )  # fmt: skip
    theirs = MVPMiddleware(bare_app, "baremetal", versions)

    def env(headers: dict[str, str]) -> dict[str, Any]:
        return dict(Request.blank("/v1/nodes", headers=headers).environ)

    std = env({"OpenStack-API-Version": "baremetal 1.80"})
    legacy = env({"X-OpenStack-Ironic-API-Version": "1.80"})
    none = env({})
    bad = env({"OpenStack-API-Version": "baremetal 9.99"})

    baseline = per_call_us(wsgi_caller(bare_app, std))
    rows = [
        ("bare app (baseline)", baseline),
        ("apimw, standard header 1.80", per_call_us(wsgi_caller(ours, std))),
        ("apimw, legacy header 1.80", per_call_us(wsgi_caller(ours, legacy))),
        ("apimw, no header", per_call_us(wsgi_caller(ours, none))),
        ("apimw, out of range -> 406", per_call_us(wsgi_caller(ours, bad))),
        ("microversion-parse, standard header 1.80", per_call_us(wsgi_caller(theirs, std), number=3000)),
        ("microversion-parse, out of range -> 406", per_call_us(wsgi_caller(theirs, bad), number=3000)),
    ]
    report("GET /v1/nodes through the middleware (in-process, best of 7)", rows, baseline)
    ours_added = rows[1][1] - baseline
    theirs_added = rows[5][1] - baseline
    print(f"\n  apimw adds {ours_added:.2f} us (target <= 5 us: {'OK' if ours_added <= 5 else 'MISSED'})")
    ratio = theirs_added / max(ours_added, 0.01)
    print(f"  microversion-parse adds {theirs_added:.2f} us; ratio {ratio:.0f}x")


if __name__ == "__main__":
    main()
