"""Added cost per request of apimw's WSGI middlewares against microversion-parse's
middleware, in one run.

    python bench/bench_stack.py [--rounds 5] [--clock cpu|wall]

Two groups of cases, each with its own app (the baseline) and microversion-parse's
middleware in front of that same app:

* a plain ``GET`` around an app that sets ``Content-Type`` and ``Content-Length``: each of
  apimw's middlewares alone, and the three stacked in the pipeline order (microversion ->
  idempotency -> etag);
* the header-merge path: the microversion middleware alone, built by ``paste.deploy``
  (``loadapp`` of an ini file written to a temporary directory), in front of an app that
  sets its own ``Vary`` and ``Content-Length`` (the middleware merges its ``Vary`` into
  the app's).

A reference row, ``microversion (apimw) + a pass-through + the least etag``, puts in place of
the idempotency and etag middlewares the least any such middleware does on this GET: a call
through, and holding the JSON answer to look for its ``etag`` (see :func:`least_etag`).

The ratios are read against these goals: the three stacked add at most 0.1x what
microversion-parse's middleware adds; the paste-built microversion middleware on the
header-merge path at most 0.1x.

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
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from microversion_parse.middleware import MicroversionMiddleware as MVPMiddleware
from paste.deploy import loadapp
from webob import Request

from apimw.etag import ETagMiddleware
from apimw.idempotency import IdempotencyMiddleware
from apimw.microversion import MicroversionMiddleware
from bench._timing import per_call_us, report, wsgi_caller

BODY = [b'{"nodes": []}']
KEY = "bench-deployment-secret-0123456789"
CLOCKS = {"cpu": time.thread_time_ns, "wall": time.perf_counter_ns}
VERSIONS = [f"1.{i}" for i in range(1, 116)]
MVP = "microversion-parse's middleware"
STACK = "microversion + idempotency + etag (apimw)"
FLOOR = "microversion (apimw) + a pass-through + the least etag"
MERGE = "microversion (apimw) alone, paste-built"
#: the ratio each goal is read against: added cost / microversion-parse's added cost
GOALS = {STACK: 0.1, MERGE: 0.1}

#: the microversion middleware as a paste pipeline, in front of the header-merge app
PASTE_INI = """\
[pipeline:main]
pipeline = microversion app

[filter:microversion]
paste.filter_factory = apimw.microversion:filter_factory
service_type = baremetal
min_version = 1.1
max_version = 1.115
legacy_header = X-OpenStack-Ironic-API-Version
error_profile = ironic

[app:app]
paste.app_factory = bench.bench_stack:merge_app_factory
"""


def bare_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "13")])
    return BODY


def merge_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    """An app that sets its own ``Vary`` (and ``Content-Length``): the header-merge path."""
    start_response(
        "200 OK",
        [("Content-Type", "application/json"), ("Content-Length", "13"), ("Vary", "Accept-Encoding")],
    )
    return BODY


def merge_app_factory(global_conf: dict[str, Any], **local_conf: str) -> Any:
    """paste.deploy's ``app_factory`` of :func:`merge_app`."""
    return merge_app


def paste_microversion() -> Any:
    """The microversion middleware in front of :func:`merge_app`, loaded by paste.deploy."""
    with tempfile.TemporaryDirectory(prefix="bench-stack-") as tmp:
        ini = Path(tmp) / "api-paste.ini"
        ini.write_text(PASTE_INI)
        return loadapp(f"config:{ini}")


def microversion(app: Any) -> Any:
    return MicroversionMiddleware(
        app, service_type="baremetal", min_version="1.1", max_version="1.115",
        legacy_header="X-OpenStack-Ironic-API-Version", error_profile="ironic",
    )  # fmt: skip


def idempotency(app: Any) -> Any:
    return IdempotencyMiddleware(app, store="memory://", error_profile="ironic")


def etag(app: Any) -> Any:
    return ETagMiddleware(app, hmac_key=KEY, min_version="1.97", error_profile="ironic")


def least_etag(app: Any) -> Any:
    """The least any etag middleware does to a JSON answer on a GET (the reference point of the
    stack's goal, not a middleware): hold the app's start, join its body, look for an ``etag``
    in it.  No preconditions, no size cap, no ``exc_info`` or ``close()`` handling."""

    def middleware(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        held: list[tuple[str, list[tuple[str, str]]]] = []

        def hold(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
            held.append((status, headers))

        body = b"".join(app(environ, hold))
        status, headers = held[0]
        if body.find(b'"etag"') >= 0:
            headers = [*headers, ("ETag", 'W/"0"')]
        start_response(status, headers)
        return [body]

    return middleware


def pass_through(app: Any) -> Any:
    """A middleware that only calls its app (the least an idempotency middleware does on a GET)."""

    def middleware(environ: dict[str, Any], start_response: Any) -> Any:
        return app(environ, start_response)

    return middleware


def behind_microversion(environ: dict[str, Any]) -> dict[str, Any]:
    """The environ the app behind the microversion middleware gets (served 1.100: etags on)."""
    seen: dict[str, Any] = {}

    def capture(env: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.update(env)
        return bare_app(env, start_response)

    wsgi_caller(microversion(capture), environ)()
    return seen


class Group:
    """Cases around one app: the app alone (the baseline), microversion-parse's middleware
    in front of it, and apimw's middlewares; each case's added cost per round."""

    def __init__(self, title: str, app: Any, cases: list[tuple[str, Any, dict[str, Any], int]]) -> None:
        self.title, self.app, self.cases = title, app, cases
        self.baselines: list[float] = []
        self.times: dict[str, list[float]] = {name: [] for name, *_ in cases}

    def run_round(self, environ: dict[str, Any], clock: Any) -> None:
        self.baselines.append(per_call_us(wsgi_caller(self.app, environ), clock=clock))
        for name, app, env, number in self.cases:
            self.times[name].append(per_call_us(wsgi_caller(app, env), number=number, clock=clock))

    def print(self, clock: str, rounds: int) -> None:
        baseline = statistics.median(self.baselines)
        rows = [("the app alone (baseline)", baseline)]
        rows += [(name, statistics.median(t)) for name, t in self.times.items()]
        report(f"{self.title} ({clock} time, median of {rounds} rounds)", rows, baseline)
        added = {
            name: [t - b for t, b in zip(ts, self.baselines, strict=True)] for name, ts in self.times.items()
        }
        header = "added cost / microversion-parse's (median of the rounds)"
        print(f"\n  {header:58} {'ratio':>7}  goal")
        for name in self.times:
            if name == MVP:
                continue
            ratio = statistics.median(a / m for a, m in zip(added[name], added[MVP], strict=True))
            goal = f"<= {GOALS[name]}x" if name in GOALS else "-"
            print(f"  {name:58} {ratio:6.3f}x  {goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]

    environ = dict(Request.blank("/v1/nodes", headers={"OpenStack-API-Version": "baremetal 1.100"}).environ)
    served = behind_microversion(environ)
    plain = Group("GET /v1/nodes, OpenStack-API-Version: baremetal 1.100", bare_app, [
        ("microversion (apimw) alone", microversion(bare_app), environ, 20000),
        ("idempotency (apimw) alone", idempotency(bare_app), environ, 20000),
        ("etag (apimw) alone, etags on (served 1.100)", etag(bare_app), served, 20000),
        ("idempotency + etag (apimw), behind microversion", idempotency(etag(bare_app)), served, 20000),
        (STACK, microversion(idempotency(etag(bare_app))), environ, 20000),
        (FLOOR, microversion(pass_through(least_etag(bare_app))), environ, 20000),
        (MVP, MVPMiddleware(bare_app, "baremetal", VERSIONS), environ, 3000),
    ])  # fmt: skip
    merge = Group("the same GET, an app that sets its own Vary and Content-Length", merge_app, [
        (MERGE, paste_microversion(), environ, 20000),
        (MVP, MVPMiddleware(merge_app, "baremetal", VERSIONS), environ, 3000),
    ])  # fmt: skip
    for _ in range(args.rounds):
        plain.run_round(environ, clock)
        merge.run_round(environ, clock)
    plain.print(args.clock, args.rounds)
    merge.print(args.clock, args.rounds)


if __name__ == "__main__":
    main()
