"""Graphs: how fast a join starts, and a 1 → 100 → 1 fan-out/fan-in, each step exactly once.

1. Join overhead: diamonds a → (b, c) → d whose branches b and c end together (a barrier), run
   one after another. Per diamond: from the later of b's and c's script end (the marker each logs)
   to d's pod running. This is a hop plus the join's look at the run (one job list and the run
   record's markers) — compare it with ``hop.py``.
2. Fan-out/fan-in: split → w0..w99 → merge on one server; every one of the 102 steps must be
   created exactly once (read from state.db, not the API), and the wall time is reported.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import harness
from harness import MARKER, Figure, ms


def barrier(parties: int) -> str:
    """A step script that waits until ``parties`` steps of its chain arrived, then logs its end."""
    return (f'touch "$SHARED/$AIHC_JOB_NAME.arrived"\n'
            f'while [ "$(ls "$SHARED" | grep -c arrived)" -lt {parties} ]; do sleep 0.002; done\n'
            f'echo "{MARKER} $EPOCHREALTIME"\n')


BARRIER = barrier(2)


def write(directory: Path, jobs: List[Dict[str, Any]], pool: str = harness.POOL) -> Path:
    """A chain whose steps share ``directory`` (their datasource and $SHARED)."""
    directory.mkdir(parents=True, exist_ok=True)
    bodies = []
    for job in jobs:
        body: Dict[str, Any] = {"name": job["name"], "jobSpec": {
            "command": job.get("script", harness.STEP_SCRIPT), "image": "local", "replicas": 1,
            "envs": [{"name": "SHARED", "value": str(directory)}]},
            "datasources": [{"type": "pfs", "name": "pfs-bench", "mountPath": str(directory)}]}
        if job.get("needs"):
            body["jobChain"] = {"dependsOn": job["needs"]}
        bodies.append(body)
    path = directory / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": pool, "jobs": bodies}, indent=1))
    return path


def steps_of(server: harness.BenchServer, run_id: str, after: int = 0) -> Dict[str, Dict[str, Any]]:
    """The run's jobs by step (from state.db; ``after``: a rowid all of them are newer than)."""
    jobs: Dict[str, Dict[str, Any]] = {}
    for job in harness.chain_jobs(server, after, run_id):
        if job["run"] == run_id:
            if job["step"] in jobs:
                raise RuntimeError(f"step {job['step']} of run {run_id} was created twice")
            jobs[job["step"]] = job
    return jobs


def join_overheads(server: harness.BenchServer, diamonds: int) -> List[float]:
    out = []
    for i in range(diamonds):
        path = write(server.work / f"diamond-{i}", [
            {"name": "a"}, {"name": "b", "script": BARRIER, "needs": ["a"]},
            {"name": "c", "script": BARRIER, "needs": ["a"]}, {"name": "d", "needs": ["b", "c"]}])
        before = sum(server.counts().values())
        run_id = harness.run_id_of(server.cli("run", str(path)).stdout)
        server.wait_done(before + 4)
        jobs = steps_of(server, run_id)
        if sorted(jobs) != ["a", "b", "c", "d"]:
            raise RuntimeError(f"diamond {i}: steps {sorted(jobs)}")
        ends = [harness.script_end(server, jobs[s]) for s in ("b", "c")]
        if None in ends or jobs["d"]["pod_started"] is None:
            raise RuntimeError(f"diamond {i}: no end marker or d never ran")
        out.append(jobs["d"]["pod_started"] - max(ends))  # type: ignore[type-var]
    return out


def fan(server: harness.BenchServer, width: int) -> Dict[str, Any]:
    jobs = [{"name": "split"}] + [{"name": f"w{i}", "needs": ["split"]} for i in range(width)]
    jobs.append({"name": "merge", "needs": [f"w{i}" for i in range(width)]})
    path = write(server.work / "fan", jobs)
    before = sum(server.counts().values())
    t0 = time.monotonic()
    run_id = harness.run_id_of(server.cli("run", str(path)).stdout)
    server.wait_done(before + width + 2, stall_timeout=120)
    wall = time.monotonic() - t0
    found = steps_of(server, run_id)  # raises on any duplicate
    workers = [found[f"w{i}"] for i in range(width)]
    split_end = harness.script_end(server, found["split"]) or found["split"]["pod_finished"]
    worker_ends = [harness.script_end(server, w) or w["pod_finished"] for w in workers]
    return {"steps": len(found), "expected": width + 2, "wall_s": wall,
            "merge_after_last_worker_s": found["merge"]["pod_started"] - max(w["pod_finished"] for w in workers),
            "join_s": found["merge"]["pod_started"] - max(worker_ends),  # last branch's script end → merge running
            "fanout_created_s": max(w["created_at"] for w in workers) - split_end,  # split end → last branch created
            "fanout_running_s": max(w["pod_started"] for w in workers) - split_end}


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--diamonds", type=int, default=None, help="joins measured (default 20, --quick 4)")
    p.add_argument("--width", type=int, default=None, help="fan-out width (default 100, --quick 10)")
    args = p.parse_args(argv)
    diamonds = args.diamonds or (4 if args.quick else 20)
    width = args.width or (10 if args.quick else 100)
    started = time.time()
    with harness.BenchServer(keep=args.keep) as server:
        joins = harness.summary(join_overheads(server, diamonds))
        fanned = fan(server, width)
    once = fanned["steps"] == fanned["expected"]
    figures = [
        Figure(f"join overhead (later branch's script end → join running), median of {diamonds}", "(reported)",
               ms(joins["median"]), None, joins["median"]),
        Figure("join overhead, p95", "(reported)", ms(joins["p95"]), None, joins["p95"]),
        Figure(f"1 → {width} → 1 fan-out/fan-in: steps created", f"{fanned['expected']}, each once",
               f"{fanned['steps']}", once, float(fanned["steps"])),
        Figure(f"1 → {width} → 1 wall time", "(reported)", f"{fanned['wall_s']:.1f} s", None, fanned["wall_s"]),
        Figure(f"fan-out: split's script end → all {width} branches created", "(reported)",
               ms(fanned["fanout_created_s"]), None, fanned["fanout_created_s"]),
        Figure(f"fan-in: last of {width} branches' script end → merge running", "(reported)",
               ms(fanned["join_s"]), None, fanned["join_s"]),
    ]
    harness.report("dag", args, figures, {"join": joins, "fan": fanned}, started,
                   {"diamonds": diamonds, "width": width})
    return 0 if once else 1


if __name__ == "__main__":
    harness.main_wrapper(main)
