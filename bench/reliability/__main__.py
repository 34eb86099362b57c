"""``python -m bench.reliability``: run the scenarios, write the report (see the package doc)."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
#: Where a run writes by default: out of the way (build/ is ignored by git).
DEFAULT_OUT = REPO / "build" / "reliability"
#: The committed report, written only when asked (``--publish``).
PUBLISHED = REPO / "docs" / "example"
sys.path.insert(0, str(REPO))

from bench.reliability import SCENARIOS  # noqa: E402
from bench.reliability._harness import Context, machine  # noqa: E402
from bench.reliability.report import write_report  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options; ``args.out`` is where the report goes, ``args.names`` the scenarios to run."""
    parser = argparse.ArgumentParser(prog="python -m bench.reliability", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the short versions (seconds each)")
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out", default=None, type=Path,
                       help="where reliability.md and reliability/ are written (default build/reliability/)")
    where.add_argument("--publish", action="store_true",
                       help="overwrite the committed report in docs/example/ (reliability.md, reliability/)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNGs (no matplotlib)")
    args = parser.parse_args(argv)
    args.names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    unknown = sorted(set(args.names) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
    if args.out is not None and args.out.resolve() == PUBLISHED.resolve():
        parser.error("--out docs overwrites the committed report: say --publish")
    args.out = PUBLISHED if args.publish else (args.out or DEFAULT_OUT)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = args.names

    command = "python -m bench.reliability" + "".join(
        f" {a}" for a in (sys.argv[1:] if argv is None else argv))
    results: dict[str, Any] = {}
    started = time.time()
    for name in names:
        module = importlib.import_module(f"bench.reliability.{name}")
        print(f"== {name}: {module.TITLE}", flush=True)
        t0 = time.monotonic()
        with Context(quick=args.quick) as ctx:
            try:
                result = module.run(ctx)
            except (Exception, BaseExceptionGroup):
                result = {"ok": False, "summary": "the scenario crashed",
                          "problems": [traceback.format_exc()], "table": None, "data": {}}
        result["seconds"] = round(time.monotonic() - t0, 1)
        results[name] = result
        print(f"   {'ok' if result['ok'] else 'FAILED'} in {result['seconds']} s: {result['summary']}",
              flush=True)
        for problem in result.get("problems") or []:
            print(f"   problem: {problem}", flush=True)

    report = {
        "command": command,
        "quick": args.quick,
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "machine": machine(),
        "results": results,
    }
    out = args.out
    write_report(report, out, plots=not args.no_plots)
    print(f"wrote {out / 'reliability.md'}")
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
