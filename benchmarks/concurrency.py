"""Concurrency: many self-advancing chains at once on a server that runs at most 8 jobs at a time.

20 chains × 25 steps of ``true`` are started together (20 ``job-chain run`` processes at once)
against ``job-chain local serve --max-running 8``. Every step is submitted from inside the
previous job while other chains compete for the 8 slots, so this is where a duplicate or a lost
step would show: jobs are counted by their ``job-chain/run`` and ``job-chain/step`` labels
through the API — exactly chains × steps, none twice, none missing, all Succeeded.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from typing import Any, Dict, List, Optional

import harness
from harness import Figure, ms


def peak_running(jobs: List[Dict[str, Any]]) -> int:
    """Most jobs Running at the same moment, from their started/finished times."""
    edges = sorted([(j["started_at"], 1) for j in jobs if j["started_at"]]
                   + [(j["finished_at"], -1) for j in jobs if j["finished_at"]], key=lambda e: (e[0], e[1]))
    peak = running = 0
    for _, delta in edges:
        running += delta
        peak = max(peak, running)
    return peak


def audit(jobs: List[Dict[str, Any]], run_ids: List[str], steps: int) -> Dict[str, Any]:
    """Count API jobs by (run, step) label: duplicates, missing, unlabelled, not Succeeded."""
    per_key: Counter = Counter()
    unlabelled, not_succeeded = [], []
    for job in jobs:
        label = {x.get("key"): x.get("value") for x in job.get("labels") or []}
        run, step = label.get("job-chain/run"), label.get("job-chain/step")
        if run is None or step is None:
            unlabelled.append(job.get("jobId"))
            continue
        per_key[(run, int(step.rsplit("-", 1)[-1]))] += 1  # labelled by name ("c01-step-4"): its place
        if job.get("status") != "Succeeded":
            not_succeeded.append({"jobId": job.get("jobId"), "status": job.get("status"), "run": run, "step": step})
    wanted = {(run, step) for run in run_ids for step in range(steps)}
    return {
        "jobs": len(jobs),
        "duplicates": sorted(f"{k[0]}/{k[1]}×{n}" for k, n in per_key.items() if n > 1),
        "missing": sorted(f"{k[0]}/{k[1]}" for k in wanted - set(per_key)),
        "foreign": sorted(f"{k[0]}/{k[1]}" for k in set(per_key) - wanted),
        "unlabelled": unlabelled,
        "not_succeeded": not_succeeded,
    }


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--chains", type=int, default=None, help="chains started together (default 20, --quick 4)")
    p.add_argument("--steps", type=int, default=None, help="steps per chain (default 25, --quick 5)")
    p.add_argument("--max-running", type=int, default=8, help="the server's --max-running (default 8)")
    args = p.parse_args(argv)
    chains = args.chains or (4 if args.quick else 20)
    steps = args.steps or (5 if args.quick else 25)
    total = chains * steps
    started = time.time()

    with harness.BenchServer(max_running=args.max_running, keep=args.keep) as server:
        paths = [harness.write_chain(server.work / f"c{k:02d}", steps, prefix=f"c{k:02d}-step") for k in range(chains)]
        t0 = time.time()
        procs = [subprocess.Popen([*harness.JOB_CHAIN, "run", str(path)], env=server.cli_env(), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
                 for path in paths]
        run_ids = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise RuntimeError(f"job-chain run exited {proc.returncode}: {err[-1000:]}")
            run_ids.append(harness.run_id_of(out))
        submitted_all = time.time() - t0
        server.wait_done(total, stall_timeout=90)
        api_jobs = list(server.client(max_retries=3).iter_jobs(server.pool))
        db_jobs = harness.chain_jobs(server)
        wall = max(j["finished_at"] for j in db_jobs) - t0
        run_hops = [h for run_id in run_ids for h in harness.hops(server, run_id)]

    result = audit(api_jobs, run_ids, steps)
    peak = peak_running(db_jobs)
    queued = harness.summary([j["started_at"] - j["created_at"] for j in db_jobs])
    hop = harness.summary([h["hop_s"] for h in run_hops])
    exact = (result["jobs"] == total and not result["duplicates"] and not result["missing"]
             and not result["foreign"] and not result["unlabelled"])
    figures = [
        Figure(f"wall time, {chains} chains × {steps} steps at --max-running {args.max_running}", "(reported)",
               f"{wall:.1f} s ({total / wall:.1f} jobs/s)", None, wall),
        Figure("jobs created (by run/step labels)", f"exactly {total}",
               f"{result['jobs']} ({len(result['duplicates'])} duplicate, {len(result['missing'])} missing)",
               exact, float(result["jobs"])),
        Figure("jobs Succeeded", f"all {total}", f"{result['jobs'] - len(result['not_succeeded'])}",
               not result["not_succeeded"] and exact, float(result["jobs"] - len(result["not_succeeded"]))),
        Figure("peak jobs running at once", f"≤ {args.max_running}", str(peak), peak <= args.max_running, float(peak)),
        Figure("queue wait (created → running), median / p95", "(reported)",
               f"{ms(queued['median'])} / {ms(queued['p95'])}", None, queued["median"]),
        Figure("hop (script end → next pod running), median / p95", "(reported)",
               f"{ms(hop['median'])} / {ms(hop['p95'])}", None, hop["median"]),
    ]
    harness.report("concurrency", args, figures, {
        "wall_s": wall, "all_runs_submitted_s": submitted_all, "audit": result, "peak_running": peak,
        "queue_wait_s": queued, "hop_s": hop, "run_ids": run_ids,
    }, started, {"chains": chains, "steps": steps, "max_running": args.max_running})
    return 0 if exact and not result["not_succeeded"] else 1


if __name__ == "__main__":
    harness.main_wrapper(main)
