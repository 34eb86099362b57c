"""Import cost of apimw and of each middleware module, in fresh interpreters.

    python bench/bench_import.py [runs]

For each module: the median wall time of *runs* fresh ``python -c "import <module>"``
subprocesses minus the median of as many bare ``python -c pass`` (run interleaved, so
that the machine's load hits both alike), and the median of ``-X importtime``'s cumulative
figure for the module (less noisy: it leaves out interpreter start-up).  Goal:
``import apimw`` <= 30 ms.  The modules are imported from wherever this interpreter finds
them (set PYTHONPATH to measure a source tree).  The subprocesses run with bytecode caches
(as an installed package has them), written once by a warm-up run under a temporary
``PYTHONPYCACHEPREFIX``: without them (``PYTHONDONTWRITEBYTECODE=1``) every run would also
pay for compiling apimw's sources, which no deployment does.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL_MS = 30.0
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
MODULES = ("apimw", "apimw.microversion", "apimw.etag", "apimw.idempotency")


def _wall_ms(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)
    return (time.perf_counter() - start) * 1000


def _importtime_ms(module: str) -> float:
    """The cumulative -X importtime of everything ``import <module>`` imported (the top-level
    entries after ``site``, which ends the interpreter's own start-up)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        check=True, capture_output=True, text=True, env=ENV,
    )  # fmt: skip
    total = 0
    after_site = False
    for line in out.stderr.splitlines():
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[1].strip().isdigit():
            continue
        name = fields[2].rstrip()
        if name == " site":
            after_site = True
        elif after_site and not name.startswith("  "):  # top level: one space after the bar
            total += int(fields[1])
    return total / 1000


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    cache = tempfile.TemporaryDirectory(prefix="apimw-bench-pycache-")
    ENV["PYTHONPYCACHEPREFIX"] = cache.name
    for module in MODULES:  # warm-up: writes the bytecode caches
        _wall_ms(f"import {module}")
    bare: list[float] = []
    walls: dict[str, list[float]] = {module: [] for module in MODULES}
    cumulative: dict[str, list[float]] = {module: [] for module in MODULES}
    for _ in range(runs):
        bare.append(_wall_ms("pass"))
        for module in MODULES:
            walls[module].append(_wall_ms(f"import {module}"))
            cumulative[module].append(_importtime_ms(module))
    bare_ms = statistics.median(bare)
    print(f"\nImport cost, median of {runs} fresh interpreters (bare `python -c pass`: {bare_ms:.1f} ms)")
    print(f"  {'module':22} {'wall - bare ms':>15} {'-X importtime ms':>17} {'vs 30 ms goal':>14}")
    for module in MODULES:
        added = statistics.median(walls[module]) - bare_ms
        own = statistics.median(cumulative[module])
        print(f"  {module:22} {added:15.1f} {own:17.1f} {added / GOAL_MS:13.2f}x")
    added = statistics.median(walls["apimw"]) - bare_ms
    print(f"\n  import apimw: {added:.1f} ms ({added / GOAL_MS:.2f}x the {GOAL_MS:.0f} ms goal: "
          f"{'OK' if added <= GOAL_MS else 'MISSED'})")  # fmt: skip
    cache.cleanup()


if __name__ == "__main__":
    main()
