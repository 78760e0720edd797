"""The exactly-once drill: ~1,000 hops under injected faults and three kill -9 of the server, per API style.

For each API style (v1 ``/api/v1/…``, v2 ``/?action=…``; ``"api_config": {"version": …}`` in
each chain), one ``job-chain local serve --inject-faults RATE --max-running 8`` runs, at once:
lines (``--lines`` chains of ``--line-steps`` steps), stacks of diamonds (a→(b,c)→d, d the next
diamond's a; ``--diamonds`` chains of ``--stack`` diamonds) and matrices under a cap (prep → a
4×4 ``matrix`` with ``maxParallel: 3`` → join → a second 4×4 → end; ``--matrices`` chains).
Every later step is submitted from inside the job before it, through the faulty API. While they
run, the server is SIGKILLed three times (at a quarter, half and three quarters of the jobs) and
restarted on the same state. Then the server's own state (SQLite, which faults never touch) is
audited: each (run, step) must have exactly one job, attempt 1, Succeeded; a duplicate or a lost
step fails the drill. It prints, per style: hops, faults injected (and on creates), kills,
duplicates, lost, and wall time.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import harness
from harness import Figure

SCRIPT = "true"


def _job(name: str, mount: str, **settings: Any) -> Dict[str, Any]:
    job: Dict[str, Any] = {"name": name, "jobSpec": {"command": SCRIPT, "image": "local", "replicas": 1},
                           "datasources": [{"type": "pfs", "name": "pfs-drill", "mountPath": mount}]}
    if settings:
        job["jobChain"] = settings
    return job


def line(steps: int, mount: str) -> List[Dict[str, Any]]:
    return [_job(f"l{i}", mount) for i in range(steps)]


def diamonds(stack: int, mount: str) -> List[Dict[str, Any]]:
    """a0 → (b0, c0) → a1 → (b1, c1) → … → a{stack}: 3 × stack + 1 steps, every ``a`` a join."""
    jobs = [_job("a0", mount)]
    for k in range(stack):
        jobs += [_job(f"b{k}", mount, dependsOn=[f"a{k}"]), _job(f"c{k}", mount, dependsOn=[f"a{k}"]),
                 _job(f"a{k + 1}", mount, dependsOn=[f"b{k}", f"c{k}"])]
    return jobs


def matrices(mount: str) -> List[Dict[str, Any]]:
    """prep → m1 (4×4, maxParallel 3) → mid → m2 (4×4, maxParallel 3) → end: 35 steps."""
    grid = {"lr": ["1", "2", "3", "4"], "seed": ["1", "2", "3", "4"]}
    return [_job("prep", mount), _job("m1", mount, dependsOn=["prep"], matrix=grid, maxParallel=3),
            _job("mid", mount, dependsOn=["m1"]), _job("m2", mount, dependsOn=["mid"], matrix=grid, maxParallel=3),
            _job("end", mount, dependsOn=["m2"])]


def write(directory: Path, jobs: List[Dict[str, Any]], pool: str, version: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": pool, "api_config": {"version": version}, "jobs": jobs}))
    return path


def audit(server: harness.BenchServer, expected: Dict[str, int]) -> Dict[str, Any]:
    """From state.db: jobs per (run, step name); duplicates, lost, not Succeeded, created through which API."""
    per_key: Counter = Counter()
    statuses: Counter = Counter()
    apis: Counter = Counter()
    with server.db() as conn:
        rows = conn.execute("SELECT spec, status, api FROM jobs").fetchall()
    for row in rows:
        labels = {x.get("key"): x.get("value") for x in json.loads(row["spec"]).get("labels") or []}
        run, step = labels.get("job-chain/run"), labels.get("job-chain/step")
        if run is None or step is None:
            continue
        per_key[(run, step)] += 1
        statuses[row["status"]] += 1
        apis[row["api"]] += 1
    per_run: Counter = Counter(run for run, _ in per_key)
    return {
        "jobs": sum(per_key.values()),
        "duplicates": sorted(f"{r}/{s}×{n}" for (r, s), n in per_key.items() if n > 1),
        "lost": {run: want - per_run.get(run, 0) for run, want in expected.items() if per_run.get(run, 0) < want},
        "statuses": dict(statuses),
        "created_through": dict(apis),
    }


def drill(version: str, args: Any) -> Tuple[Dict[str, Any], List[Figure]]:
    options = ["--inject-faults", str(args.rate), "--fault-seed", str(args.seed)]
    with harness.BenchServer(max_running=8, sample_interval=5.0, keep=args.keep, options=options) as server:
        shapes: List[Tuple[str, List[Dict[str, Any]]]] = []
        for k in range(args.lines):
            shapes.append((f"line{k:02d}", line(args.line_steps, str(server.work / f"line{k:02d}"))))
        for k in range(args.diamonds):
            shapes.append((f"diamond{k:02d}", diamonds(args.stack, str(server.work / f"diamond{k:02d}"))))
        for k in range(args.matrices):
            shapes.append((f"matrix{k:02d}", matrices(str(server.work / f"matrix{k:02d}"))))
        sizes = {name: sum(16 if "matrix" in (j.get("jobChain") or {}) else 1 for j in jobs) for name, jobs in shapes}
        paths = {name: write(server.work / name, jobs, server.pool, version) for name, jobs in shapes}
        total = sum(sizes.values())
        t0 = time.time()
        procs = {name: subprocess.Popen([*harness.JOB_CHAIN, "run", str(path)], env=server.cli_env(), text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
                 for name, path in paths.items()}
        expected: Dict[str, int] = {}
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"job-chain run {name} exited {proc.returncode}: {err[-1000:]}")
            expected[harness.run_id_of(out)] = sizes[name]
        kills = []
        for fraction in (0.25, 0.5, 0.75)[:args.kills]:
            server.wait_for(lambda: (sum(server.counts().values()), None, None), int(total * fraction), "jobs",
                            stall_timeout=args.stall, poll=0.05)
            server.kill()
            kills.append(sum(server.counts().values()))
            time.sleep(0.5)  # steps end and try to advance while nobody answers
            server.start()
        server.wait_done(total, stall_timeout=args.stall)
        wall = time.time() - t0
        found = audit(server, expected)
        log = (server.state_dir / "server.log").read_text(errors="replace")
        faults = log.count("injected fault")
        post_faults = sum(1 for text in log.splitlines() if "injected fault" in text and ": POST /" in text)
    exact = not found["duplicates"] and not found["lost"] and found["jobs"] == total
    ok = exact and found["statuses"] == {"Succeeded": total} and found["created_through"] == {version: total}
    data = {"version": version, "hops": total, "runs": len(expected), "wall_s": wall, "faults": faults,
            "faults_on_posts": post_faults, "kills_at_jobs": kills, "audit": found}
    figures = [
        Figure(f"{version}: steps (hops) across {len(expected)} runs", "(reported)", str(total), None, float(total)),
        Figure(f"{version}: faults injected (on POSTs: creates, stops)", f"> 0 (rate {args.rate})",
               f"{faults} ({post_faults})", faults > 0 and post_faults > 0, float(faults)),
        Figure(f"{version}: kill -9 of the server", f"{args.kills}", f"{len(kills)} (at jobs {kills})",
               len(kills) == args.kills, float(len(kills))),
        Figure(f"{version}: duplicate steps", "0", str(len(found["duplicates"])), not found["duplicates"],
               float(len(found["duplicates"]))),
        Figure(f"{version}: lost steps", "0", str(sum(found["lost"].values())), not found["lost"],
               float(sum(found["lost"].values()))),
        Figure(f"{version}: jobs Succeeded, created through {version}", f"all {total}",
               f"{found['statuses'].get('Succeeded', 0)} ({found['created_through']})", ok,
               float(found["statuses"].get("Succeeded", 0))),
        Figure(f"{version}: wall time", "(reported)", f"{wall:.0f} s", None, wall),
    ]
    return data, figures


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--api", default="v1,v2", help="API styles, comma-separated (default v1,v2)")
    p.add_argument("--rate", type=float, default=0.3, help="--inject-faults rate (default 0.3)")
    p.add_argument("--seed", type=int, default=1007, help="--fault-seed (default 1007)")
    p.add_argument("--kills", type=int, default=3, choices=(0, 1, 2, 3), help="kill -9 of the server (default 3)")
    p.add_argument("--lines", type=int, default=None, help="line chains (default 10, --quick 2)")
    p.add_argument("--line-steps", type=int, default=62, help="steps per line (default 62, --quick 10)")
    p.add_argument("--diamonds", type=int, default=None, help="diamond stacks (default 6, --quick 1)")
    p.add_argument("--stack", type=int, default=10, help="diamonds per stack (default 10, --quick 3)")
    p.add_argument("--matrices", type=int, default=None, help="matrix chains, 35 steps each (default 6, --quick 1)")
    p.add_argument("--stall", type=float, default=180.0, help="seconds without progress that fail the drill")
    args = p.parse_args(argv)
    if args.quick:
        args.lines, args.diamonds, args.matrices = args.lines or 2, args.diamonds or 1, args.matrices or 1
        args.line_steps, args.stack = min(args.line_steps, 10), min(args.stack, 3)
    else:
        args.lines = 10 if args.lines is None else args.lines
        args.diamonds = 6 if args.diamonds is None else args.diamonds
        args.matrices = 6 if args.matrices is None else args.matrices
    started = time.time()
    results, figures = [], []
    for version in [v.strip() for v in args.api.split(",") if v.strip()]:
        data, more = drill(version, args)
        results.append(data)
        figures += more
    harness.report("drill", args, figures, {"styles": results}, started, {
        "rate": args.rate, "seed": args.seed, "kills": args.kills, "lines": args.lines, "line_steps": args.line_steps,
        "diamonds": args.diamonds, "stack": args.stack, "matrices": args.matrices})
    return 0 if all(f.passed is not False for f in figures) else 1


if __name__ == "__main__":
    harness.main_wrapper(main)
