"""Run every benchmark (``make bench``), each in its own process, then one summary table.

Each benchmark is a separate interpreter so a crash or a leaked thread in one cannot skew the
next, and each cleans up its own server. ``--quick`` (and ``--results-dir``/``--keep``) are
passed through. Exit status: 1 if a benchmark crashed or wrote no result; with ``--strict``
also when a target was missed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import harness

HERE = Path(__file__).resolve().parent
# cheapest first, so a broken set-up shows within seconds
BENCHMARKS = ("cli_startup", "diagnose", "hop", "throughput", "concurrency", "scale", "dag", "floor", "matrix", "ui",
              "logs")


def markdown(outcomes: Dict[str, Dict[str, Any]], quick: bool) -> str:
    """The README's results table (figure, target, measured, pass?) for this run."""
    suffix = " (quick run)" if quick else ""
    lines = ["| figure | target | measured | pass? |", "| --- | --- | --- | --- |"]
    for name, outcome in outcomes.items():
        for fig in (outcome["result"] or {}).get("figures") or []:
            verdict = {True: "PASS", False: "FAIL", None: "-"}[fig["passed"]]
            lines.append(f"| {name}: {fig['figure']} | {fig['target']} | {fig['measured']}{suffix} | {verdict} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (passed to every benchmark)")
    p.add_argument("--results-dir", default=str(harness.RESULTS))
    p.add_argument("--keep", action="store_true", help="keep each server's temp state dir")
    p.add_argument("--only", default=None, help=f"comma-separated subset of: {', '.join(BENCHMARKS)}")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed too")
    args = p.parse_args(argv)
    chosen = [b.strip() for b in args.only.split(",")] if args.only else list(BENCHMARKS)
    unknown = [b for b in chosen if b not in BENCHMARKS]
    if unknown:
        p.error(f"unknown benchmark(s): {', '.join(unknown)}")
    passthrough = ["--results-dir", args.results_dir] + (["--quick"] if args.quick else []) + \
        (["--keep"] if args.keep else [])

    started = time.time()
    outcomes: Dict[str, Dict[str, Any]] = {}
    for name in chosen:
        print(f"\n=== {name} {'(--quick) ' if args.quick else ''}===", flush=True)
        t0 = time.time()
        code = subprocess.call([sys.executable, str(HERE / f"{name}.py"), *passthrough])
        result_path = Path(args.results_dir) / f"{name}.json"
        result: Optional[Dict[str, Any]] = None
        try:
            data = json.loads(result_path.read_text())
            if data.get("finished", 0) >= t0:  # written by this run, not left from an earlier one
                result = data
        except (OSError, ValueError):
            pass
        outcomes[name] = {"exit_code": code, "seconds": time.time() - t0, "result": result}

    rows, crashed, missed = [], [], []
    for name, outcome in outcomes.items():
        result = outcome["result"]
        if result is None:
            crashed.append(name)
            rows.append((name, "-", "-", f"no result (exit {outcome['exit_code']})", "[red]ERROR[/]"))
            continue
        for fig in result["figures"]:
            passed = fig["passed"]
            if passed is False:
                missed.append(f"{name}: {fig['figure']}")
            rows.append((name, fig["figure"], fig["target"], fig["measured"],
                         {True: "[green]PASS[/]", False: "[red]FAIL[/]", None: "-"}[passed]))
        if outcome["exit_code"] != 0:
            crashed.append(name)
    harness.console().print(harness.table(
        f"job-chain benchmarks{' (--quick: not a measurement)' if args.quick else ''} — "
        f"{time.time() - started:.0f} s", ("benchmark", "figure", "target", "measured", "pass?"), rows))
    summary = {"quick": args.quick, "started": started, "finished": time.time(), "machine": harness.machine(),
               "benchmarks": {n: {"exit_code": o["exit_code"], "seconds": o["seconds"],
                                  "figures": (o["result"] or {}).get("figures")} for n, o in outcomes.items()},
               "missed_targets": missed, "crashed": crashed}
    Path(args.results_dir).mkdir(parents=True, exist_ok=True)
    (Path(args.results_dir) / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (Path(args.results_dir) / "summary.md").write_text(markdown(outcomes, args.quick))
    print(f"wrote {Path(args.results_dir) / 'summary.json'} and summary.md (the README's results table)")
    if crashed:
        print(f"benchmarks that failed to run: {', '.join(crashed)}", file=sys.stderr)
    if missed:
        print("missed targets:\n  " + "\n  ".join(missed), file=sys.stderr)
    return 1 if crashed or (args.strict and missed) else 0


if __name__ == "__main__":
    harness.main_wrapper(main, sample=False)
