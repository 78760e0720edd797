"""job-chain on Slurm next to Slurm's own ``--dependency=afterok``, in one run (issue 32).

Starts two private one-host Slurm clusters in turn (``tests/slurm_cluster.py``: munged, slurmctld,
two slurmd on loopback; needs root and Debian's slurm-wlm and munge) — one at Slurm's scheduler
defaults, one tuned (``SchedulerParameters=batch_sched_delay=0,…``, what the tests
use) — and on each measures three shapes both ways:

- **hop**: a line of steps; from a step's script ending to the next one's script starting;
- **diamond join**: a → (b, c) → d; from the later of b and c ending to d starting;
- **fan-in-8**: a → 8 branches → join; from the last branch ending to the join starting.

job-chain: the chain run with ``"engine": "slurm"`` (each job's tail submits what its success
starts with sbatch, from inside the job). afterok: every job submitted up front with ``sbatch
--dependency=afterok:IDS`` (Slurm starts each when what it waits for completed). Every script
writes its start and end (``date +%s.%N``) to a file; the figures are the medians of the gaps.

Where each gap goes, from slurmctld's and slurmd's logs (their lines carry milliseconds): for each
waiting step, **before submit** (job-chain: from the predecessor's script end to sbatch reaching
slurmctld — the tail's Python start, the record, sbatch; afterok: the jobs were submitted up
front, so from the script end to slurmctld marking the predecessor complete), **queued** (from
then to slurmctld allocating its nodes: the scheduler's pass), **launch** (from the allocation to
the step's script starting: the launch RPC, slurmd, slurmstepd, the batch script's shell).

``--against REF``: job-chain as it was at git REF too (its tree exported, first on ``PYTHONPATH``
for the CLI and every job), in the same run; each round runs every way in turn, so load on this
shared machine falls on all of them alike. ``--only tuned|defaults``: one of the two clusters.

Usage: ``.venv/bin/python benchmarks/slurm.py [--quick] [--hops N] [--rounds N] [--against REF]
[--only tuned|defaults]``; writes ``benchmarks/results/slurm.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import slurm_cluster  # noqa: E402

STAMP = 'echo "start $(date +%s.%N)" > "{times}/$1"\n{body}\necho "end $(date +%s.%N)" >> "{times}/$1"\n'


def shapes(hops: int) -> Dict[str, List[Tuple[str, List[str]]]]:
    """Each shape: (step, the steps it waits for) in order."""
    line = [(f"s{i}", [f"s{i - 1}"] if i else []) for i in range(hops + 1)]
    diamond = [("a", []), ("b", ["a"]), ("c", ["a"]), ("d", ["b", "c"])]
    fan = [("a", [])] + [(f"b{i}", ["a"]) for i in range(8)] + [("join", [f"b{i}" for i in range(8)])]
    return {"hop": line, "diamond join": diamond, "fan-in-8 join": fan}


def times(directory: Path) -> Dict[str, Tuple[float, float]]:
    out = {}
    for f in directory.iterdir():
        words = f.read_text().split()
        if len(words) == 4:
            out[f.name] = (float(words[1]), float(words[3]))
    return out


def gaps(shape: List[Tuple[str, List[str]]], seen: Dict[str, Tuple[float, float]]) -> List[float]:
    """A line: for each step after the first, its start minus the end of the one before. A join
    shape: the join's start minus the end of the last step it waited for (the branches' own hops
    are not counted)."""
    waiting = [(name, deps) for name, deps in shape if deps]
    if len(shape[-1][1]) > 1:
        waiting = [shape[-1]]
    return [seen[name][0] - max(seen[d][1] for d in deps) for name, deps in waiting]


LOGGED = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\] (?:.*?)(_slurm_rpc_submit_batch_job: JobId=|"
                    r"sched: Allocate JobId=|_job_complete: JobId=|Launching batch job )(\d+)")
EVENT = {"_slurm_rpc_submit_batch_job: JobId=": "submitted", "sched: Allocate JobId=": "allocated",
         "_job_complete: JobId=": "complete", "Launching batch job ": "launching"}


def daemon_events(cluster: Any) -> Dict[str, Dict[str, float]]:
    """job id -> {submitted, allocated, complete, launching: the first time each was logged}."""
    from datetime import datetime

    out: Dict[str, Dict[str, float]] = {}
    for log in [cluster.root / "slurmctld.log", *cluster.root.glob("slurmd-*.log")]:
        for line in log.read_text(errors="replace").splitlines():
            m = LOGGED.match(line)
            if m:
                when = datetime.fromisoformat(m.group(1)).timestamp()
                out.setdefault(m.group(3), {}).setdefault(EVENT[m.group(2)], when)
    return out


def job_ids(cluster: Any, prefix: str) -> Dict[str, str]:
    """step -> job id, for the jobs whose name starts with ``prefix`` (the name's tail is the step)."""
    rows = cluster.run("squeue", "-h", "-t", "all", "-o", "%i %j").stdout.split("\n")
    return {name[len(prefix):]: jid for jid, _, name in (r.partition(" ") for r in rows) if name.startswith(prefix)}


def phases(cluster: Any, shape: List[Tuple[str, List[str]]], seen: Dict[str, Tuple[float, float]],
           ids: Dict[str, str], afterok: bool) -> List[Dict[str, float]]:
    """For each gap :func:`gaps` measures: before submit, queued, launch (module docstring). The
    step is ready for Slurm when its sbatch reached slurmctld (job-chain), or when slurmctld
    marked the last job it waits for complete (afterok)."""
    events = daemon_events(cluster)
    waiting = [(name, deps) for name, deps in shape if deps]
    if len(shape[-1][1]) > 1:
        waiting = [shape[-1]]
    out = []
    for name, deps in waiting:
        last = max(deps, key=lambda d: seen[d][1])
        mine = events.get(ids.get(name, ""), {})
        if "allocated" not in mine:
            continue
        ready = (max(events.get(ids.get(d, ""), {}).get("complete", 0.0) for d in deps) if afterok
                 else mine.get("submitted", 0.0))
        out.append({"before submit": ready - seen[last][1], "queued": mine["allocated"] - ready,
                    "launch": seen[name][0] - mine["allocated"]})
    return out


def wait_for(directory: Path, count: int, timeout: float) -> None:
    end = time.monotonic() + timeout
    while len(times(directory)) < count:
        if time.monotonic() > end:
            raise RuntimeError(f"only {len(times(directory))} of {count} steps finished in {timeout:g}s")
        time.sleep(0.2)


def job_chain_round(cluster: Any, work: Path, shape: List[Tuple[str, List[str]]],
                    tree: str = "") -> Tuple[List[float], List[Any]]:
    stamps = work / "times"
    stamps.mkdir(parents=True)
    jobs = []
    for name, deps in shape:
        (work / f"{name}.sh").write_text(STAMP.format(times=stamps, body="true").replace("$1", name))
        job: Dict[str, Any] = {"name": name, "jobSpec": {"command": f"{name}.sh"}}
        if deps:
            job["jobChain"] = {"dependsOn": deps}
        jobs.append(job)
    chain = work / "chain.json"
    chain.write_text(json.dumps({"engine": "slurm", "jobs": jobs}))
    env = cluster.env()
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    if tree:  # job-chain as it was at another commit: the CLI and (sbatch exports it) every job
        env["PYTHONPATH"] = tree
    subprocess.run([sys.executable, "-m", "job_chain", "run", str(chain)], env=env, check=True,
                   capture_output=True, timeout=120)
    wait_for(stamps, len(shape), 300)
    run = json.loads(subprocess.run([sys.executable, "-m", "job_chain", "status", str(chain), "--json"], env=env,
                                    check=True, capture_output=True, timeout=120).stdout)["run"]
    seen = times(stamps)
    ids = {step[:-2]: jid for step, jid in job_ids(cluster, f"jc-{run}-").items() if step.endswith("-1")}
    return gaps(shape, seen), phases(cluster, shape, seen, ids, afterok=False)


def afterok_round(cluster: Any, work: Path, shape: List[Tuple[str, List[str]]]) -> Tuple[List[float], List[Any]]:
    stamps = work / "times"
    stamps.mkdir(parents=True)
    ids: Dict[str, str] = {}
    for name, deps in shape:
        script = "#!/bin/bash\n" + STAMP.format(times=stamps, body="true").replace("$1", name)
        argv = ["sbatch", "--parsable", f"--job-name=afterok-{work.name}-{name}", f"--output={work}/{name}.out"]
        if deps:
            argv.append("--dependency=afterok:" + ":".join(ids[d] for d in deps))
        done = subprocess.run(argv, input=script, text=True, capture_output=True, env=cluster.env(), check=True)
        ids[name] = done.stdout.strip().split(";")[0]
    wait_for(stamps, len(shape), 600)
    seen = times(stamps)
    return gaps(shape, seen), phases(cluster, shape, seen, ids, afterok=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="3 hops, 1 round")
    p.add_argument("--hops", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--against", metavar="REF", help="also measure job-chain at this git commit")
    p.add_argument("--only", choices=("tuned", "defaults"), help="one cluster configuration")
    a = p.parse_args()
    hops, rounds = (3, 1) if a.quick else (a.hops, a.rounds)
    why = slurm_cluster.require()
    if why or os.geteuid() != 0:
        print(why or "the Slurm benchmark starts slurmd, which needs root", file=sys.stderr)
        return 2
    results: Dict[str, Dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="jc-bench-slurm-") as tmp:
        ways: List[Tuple[str, Any]] = [("job-chain", job_chain_round)]
        if a.against:
            tree = Path(tmp) / "against"
            tree.mkdir()
            archive = subprocess.run(["git", "archive", a.against, "job_chain"], cwd=HERE.parent, check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            ways.append((f"jc@{a.against[:8]}", lambda c, w, s: job_chain_round(c, w, s, str(tree))))
        ways.append(("afterok", afterok_round))
        configs = [(c, t) for c, t in (("Slurm defaults", False), ("tuned", True))
                   if a.only is None or (a.only == "tuned") == t]
        for config, tuned in configs:
            with slurm_cluster.SlurmCluster(Path(tmp) / config.replace(" ", "-"), tuned=tuned) as cluster:
                for shape_name, shape in shapes(hops).items():
                    got_all: Dict[str, Tuple[List[float], List[Dict[str, float]]]] = {how: ([], []) for how, _ in ways}
                    for r in range(rounds):  # every way in turn, round by round
                        for how, run in ways:
                            got, split = run(cluster, Path(tmp) / f"{config}-{shape_name}-{how}-{r}".replace(" ", "_"),
                                             shape)
                            got_all[how][0].extend(got)
                            got_all[how][1].extend(split)
                    for how, (samples, parts) in got_all.items():
                        where = {k: round(statistics.median(p[k] for p in parts), 3) for k in parts[0]} if parts else {}
                        results[f"{shape_name} · {how} · {config}"] = {
                            "median_s": round(statistics.median(samples), 3), "max_s": round(max(samples), 3),
                            "samples": [round(s, 3) for s in samples], "phases_median_s": where}
                        print(f"{shape_name:14} {how:10} {config:15} median {statistics.median(samples):.2f}s "
                              f"max {max(samples):.2f}s (n={len(samples)}); "
                              + ", ".join(f"{k} {v:.2f}s" for k, v in where.items()), flush=True)
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout
    (out / "slurm.json").write_text(json.dumps({"hops": hops, "rounds": rounds, "commit": commit.strip(),
                                                "against": a.against, "load": os.getloadavg(), "results": results},
                                               indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
