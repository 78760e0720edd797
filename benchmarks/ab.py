"""Two commits side by side in one run: floor.py's core figures of this checkout and of REF.

``python benchmarks/ab.py REF [--rounds 4] [floor.py options]`` checks REF out beside this
checkout (a detached git worktree in a temporary directory, removed afterwards), then alternates:
one round of ``floor.py --only core`` from each tree (its own benchmark scripts, its own
``job_chain`` first on PYTHONPATH, so its local server and every hop run that code), the first
tree changing each round. Each round starts its own local server. Printed: each figure's median
over the rounds for both trees, and the change; the per-round ratios to the floor are what floor.py
itself reports (``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

import harness

FIGURES = ("floor", "hop", "diamond", "fanin", "fanin_alone", "fanout_created")


def checkout(ref: str, where: Path) -> Path:
    tree = where / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), ref], cwd=harness.ROOT, check=True)
    return tree


def one_round(tree: Path, results: Path, extra: List[str], quick: bool) -> Dict[str, List[Tuple[int, float]]]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    command = [sys.executable, str(tree / "benchmarks" / "floor.py"), "--only", "core", "--rounds", "1",
               "--results-dir", str(results), *(["--quick"] if quick else []), *extra]
    done = subprocess.run(command, cwd=tree, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"floor.py in {tree} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
    data = json.loads((results / "floor.json").read_text())["data"]["core"]
    return {name: [tuple(pair) for pair in values] for name, values in data.items()}  # type: ignore[misc]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ref", help="the commit to compare this checkout with (e.g. the one before a change)")
    p.add_argument("--rounds", type=int, default=4, help="rounds per tree (default 4)")
    p.add_argument("--quick", action="store_true", help="floor.py's small sizes: a check that it works")
    args, extra = p.parse_known_args()  # the rest goes to floor.py (e.g. --fan-out 32)
    extra = [a for a in extra if a != "--"]
    work = Path(tempfile.mkdtemp(prefix="job-chain-ab-"))
    try:
        trees = {"this": harness.ROOT, args.ref: checkout(args.ref, work)}
        samples: Dict[str, Dict[str, List[float]]] = {name: {} for name in trees}
        per_round: Dict[str, List[float]] = {name: [] for name in trees}  # each round's hop / its floor
        for round_no in range(args.rounds):
            order = list(trees.items()) if round_no % 2 == 0 else list(reversed(list(trees.items())))
            for name, tree in order:
                found = one_round(tree, work / f"{name.replace('/', '_')}-{round_no}", extra, args.quick)
                for figure, values in found.items():
                    samples[name].setdefault(figure, []).extend(v for _, v in values)
                ratio = harness.percentile([v for _, v in found["hop"]], 50) / harness.percentile(
                    [v for _, v in found["floor"]], 50)
                per_round[name].append(ratio)
                print(f"round {round_no + 1}/{args.rounds}: {name} done (hop {ratio:.2f}× this round's floor)",
                      flush=True)
        names = list(trees)
        rows = []
        for figure in FIGURES:
            medians = [harness.percentile(samples[n].get(figure, [float("nan")]), 50) for n in names]
            floors = [harness.percentile(samples[n]["floor"], 50) for n in names]
            change = (medians[0] / medians[1] - 1) * 100 if medians[1] else float("nan")
            rows.append((figure, *(f"{m * 1000:.0f} ms ({m / f:.2f}× floor)" for m, f in zip(medians, floors)),
                         f"{change:+.1f}%"))
        harness.console().print(harness.table(f"floor.py core, {args.rounds} rounds each, alternating",
                                              ("figure", *names, "change"), rows))
        for name in names:
            ratios = per_round[name]
            print(f"{name}: the hop per round, × that round's floor: " + " ".join(f"{r:.2f}" for r in ratios)
                  + f" (≤ 1.2× in {sum(r <= 1.2 for r in ratios)} of {len(ratios)})")
        print(f"machine: {json.dumps(harness.machine())}")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(work / "tree")], cwd=harness.ROOT,
                       capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
