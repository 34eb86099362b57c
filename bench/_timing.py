"""Tiny in-process timing helpers shared by the benchmarks (run on demand, never in tests)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any


def per_call_us(
    fn: Callable[[], Any],
    *,
    number: int = 20000,
    repeat: int = 7,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> float:
    """Best-of-*repeat* mean time of one ``fn()`` call in microseconds, by *clock* (ns; wall
    time by default, ``time.thread_time_ns`` for the CPU time of this thread only)."""
    for _ in range(min(number, 1000)):  # warm caches
        fn()
    best = float("inf")
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            start = clock()
            for _ in range(number):
                fn()
            best = min(best, (clock() - start) / number / 1000)
    finally:
        if gc_was:
            gc.enable()
    return best


def wsgi_caller(app: Any, environ: dict[str, Any]) -> Callable[[], Any]:
    """A zero-argument callable that runs one request through *app* like a server would."""

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        return None

    def call() -> Any:
        result = app(dict(environ), start_response)
        for _ in result:
            pass
        close = getattr(result, "close", None)
        if close is not None:
            close()

    return call


def report(title: str, rows: list[tuple[str, float]], baseline: float) -> None:
    print(f"\n{title}")
    print(f"  {'case':52} {'us/req':>9} {'added us':>9}")
    for name, value in rows:
        print(f"  {name:52} {value:9.2f} {value - baseline:9.2f}")
