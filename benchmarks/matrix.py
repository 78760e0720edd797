"""A sweep: a 1 × 256 matrix with ``maxParallel: 16``, every point exactly once, slots handed on fast.

One matrix job of N points (``--points``, default 256), each sleeping ``--step`` seconds, capped at
``--parallel`` (default 16) at once, started with ``job-chain run`` on a fresh local server. With
no controller, each point that ends takes a slot file in the run record and submits the next
waiting point (docs/graphs.md). Reported:

- wall time, from ``run`` to the last point's pod ending, against the ideal N / P × step time;
- the hand-on: from a point's script end (the marker it logs) to the pod of the point it started
  running (which one it started is in the claim file the next point was started under), median
  and p95;
- every point created exactly once (from state.db, not the API), and the most scripts that ran
  at once (never more than P).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import harness
from harness import MARKER, Figure, ms


def write(directory: Path, points: int, parallel: int, step: float) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    body = {"name": "sweep", "jobSpec": {"command": f'sleep {step:g}\necho "{MARKER} $EPOCHREALTIME"\n',
                                         "image": "local", "replicas": 1},
            "jobChain": {"matrix": {"i": list(range(points))}, "maxParallel": parallel}}
    path = directory / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": harness.POOL, "jobs": [body]}, indent=1))
    return path


def measure(server: harness.BenchServer, points: int, parallel: int, step: float) -> Dict[str, Any]:
    path = write(server.work / "sweep", points, parallel, step)
    t0 = time.time()
    run_id = harness.run_id_of(server.cli("run", str(path)).stdout)
    server.wait_done(points, stall_timeout=120)
    jobs: Dict[str, Dict[str, Any]] = {}
    duplicates = 0
    for job in harness.chain_jobs(server):
        if job["run"] == run_id:
            duplicates += job["step"] in jobs
            jobs[job["step"]] = job
    ends = {name: harness.script_end(server, job) for name, job in jobs.items()}
    run_dir = Path(str(path) + ".runs") / run_id
    handoffs: List[float] = []
    for claim in run_dir.glob("claim.0.*"):
        by = json.loads(claim.read_text()).get("by", "")
        started = jobs.get(claim.name.split(".", 2)[2])
        ender = by.rsplit("/", 1)[0]
        if started and ender in ends and ends[ender] is not None and started["pod_started"] is not None:
            handoffs.append(started["pod_started"] - ends[ender])  # type: ignore[operator]
    events = sorted([(j["pod_started"], 1) for j in jobs.values()] + [(e, -1) for e in ends.values() if e])
    running = most = 0
    for _, delta in events:
        running += delta
        most = max(most, running)
    last = max(j["pod_finished"] for j in jobs.values())
    return {"run": run_id, "created": len(jobs), "duplicates": duplicates, "wall_s": last - t0,
            "ideal_s": points / parallel * step, "handoff": harness.summary(handoffs), "handoffs": handoffs,
            "most_at_once": most}


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--points", type=int, default=None, help="matrix points (default 256, --quick 48)")
    p.add_argument("--parallel", type=int, default=16, help="maxParallel (default 16)")
    p.add_argument("--step", type=float, default=None, help="seconds each point sleeps (default 2, --quick 1)")
    args = p.parse_args(argv)
    points = args.points or (48 if args.quick else 256)
    step = args.step or (1.0 if args.quick else 2.0)
    started = time.time()
    with harness.BenchServer(keep=args.keep) as server:
        found = measure(server, points, args.parallel, step)
    once = found["created"] == points and found["duplicates"] == 0
    capped = found["most_at_once"] <= args.parallel
    hand = found["handoff"]
    figures = [
        Figure(f"1 × {points} matrix, maxParallel {args.parallel}: points created", f"{points}, each once",
               f"{found['created']} ({found['duplicates']} twice)", once, float(found["created"])),
        Figure("most point scripts running at once", f"≤ {args.parallel}", str(found["most_at_once"]), capped,
               float(found["most_at_once"])),
        Figure(f"wall time (ideal {points}/{args.parallel} × {step:g} s = {found['ideal_s']:.0f} s)", "(reported)",
               f"{found['wall_s']:.1f} s ({found['wall_s'] / found['ideal_s']:.2f}× ideal)", None, found["wall_s"]),
        Figure("a point's end → the point it started running, median", "(reported)", ms(hand.get("median")),
               None, hand.get("median")),
        Figure("… p95", "(reported)", ms(hand.get("p95")), None, hand.get("p95")),
    ]
    harness.report("matrix", args, figures, found, started,
                   {"points": points, "parallel": args.parallel, "step_s": step})
    return 0 if once and capped else 1


if __name__ == "__main__":
    harness.main_wrapper(main)
