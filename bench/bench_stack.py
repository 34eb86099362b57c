"""Added cost per request of each apimw middleware alone, of the three stacked, and of
microversion-parse's middleware, on a plain GET around a trivial app, in one run.

    python bench/bench_stack.py [--rounds 5] [--clock cpu|wall]

Goals: the three stacked (microversion + idempotency + etag) add <= 0.1x what
microversion-parse's middleware adds; the microversion middleware alone <= 0.03x (with
the negotiated version forwarded to the app in the request's version headers).

Each round times every case (best of 7, see bench/_timing.py) one after the other; the
figures are the medians over the rounds, and each ratio is the median of the ratios taken
within one round.  The clock is this thread's CPU time by default: the benchmarks run on
machines shared with other work, where wall time counts the time slices the other
processes got (``--clock wall`` for wall time, which a quiet machine gives alike).  The
ratios matter more than the absolute numbers, which depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from microversion_parse.middleware import MicroversionMiddleware as MVPMiddleware
from webob import Request

from apimw.etag import ETagMiddleware
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import MicroversionMiddleware
from bench._timing import per_call_us, report, wsgi_caller

BODY = [b'{"nodes": []}']
KEY = "bench-deployment-secret-0123456789"
GOAL_STACK = 0.1
GOAL_MICROVERSION = 0.03
CLOCKS = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}
MVP = "microversion-parse's middleware"
MICROVERSION = "microversion (apimw) alone"
STACK = "microversion + idempotency + etag (apimw)"


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


def behind_microversion(environ: dict[str, Any]) -> dict[str, Any]:
    """The environ the app behind the microversion middleware gets (served 1.100: etags on)."""
    seen: dict[str, Any] = {}

    def capture(env: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.update(env)
        return bare_app(env, start_response)

    wsgi_caller(microversion(capture), environ)()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]

    versions = [f"1.{i}" for i in range(1, 116)]
    environ = dict(Request.blank("/v1/nodes", headers={"OpenStack-API-Version": "baremetal 1.100"}).environ)
    served = behind_microversion(environ)
    cases: list[tuple[str, Any, dict[str, Any], int]] = [
        (MICROVERSION, microversion(bare_app), environ, 20000),
        ("idempotency (apimw) alone", idempotency(bare_app), environ, 20000),
        ("etag (apimw) alone, etags on (served 1.100)", etag(bare_app), served, 20000),
        ("idempotency + etag (apimw), behind microversion", idempotency(etag(bare_app)), served, 20000),
        (STACK, microversion(idempotency(etag(bare_app))), environ, 20000),
        (MVP, MVPMiddleware(bare_app, "baremetal", versions), environ, 3000),
    ]
    baselines: list[float] = []
    times: dict[str, list[float]] = {name: [] for name, *_ in cases}
    for _ in range(args.rounds):
        baselines.append(per_call_us(wsgi_caller(bare_app, environ), clock=clock))
        for name, app, env, number in cases:
            times[name].append(per_call_us(wsgi_caller(app, env), number=number, clock=clock))

    baseline = statistics.median(baselines)
    rows = [("bare app (baseline)", baseline)] + [(name, statistics.median(t)) for name, t in times.items()]
    title = "GET /v1/nodes, OpenStack-API-Version: baremetal 1.100"
    title += f" ({args.clock} time, median of {args.rounds} rounds)"
    report(title, rows, baseline)
    added = {name: [t - b for t, b in zip(ts, baselines, strict=True)] for name, ts in times.items()}
    print(f"\n  {'vs microversion-parse (median of the rounds)':52} {'ratio':>9} {'goal':>9}")
    for name in times:
        if name == MVP:
            continue
        ratio = statistics.median(a / m for a, m in zip(added[name], added[MVP], strict=True))
        goal = {MICROVERSION: GOAL_MICROVERSION, STACK: GOAL_STACK}.get(name)
        verdict = "" if goal is None else f"<= {goal}  {'OK' if ratio <= goal else 'MISSED'}"
        print(f"  {name:52} {ratio:9.3f}x {verdict}")


if __name__ == "__main__":
    main()
