"""A team's year of runs (issue 35): ``runs``, the console's runs page and ``status``, before and after.

``python benchmarks/team.py [--ref REF] [--this REF] [--quick] [--rounds N]``

Built once, with this checkout's code, on a local server: one real finished 3-step run (its record
is copied by hand into ``FILE.runs/`` as many times as a figure needs, each copy with its own id and
start: what is timed is reading run records, as in the issue) and real finished runs of 50, 500 and
5,000 steps (``--quick``: 10, 50, 200) for ``status``. Then, for this checkout and (``--ref``) for
REF checked out beside it (a detached git worktree, removed afterwards), alternating the order each
round, each tree's own code (``PYTHONPATH``; the working directory is the tree, since ``python -m``
puts it first). ``--this REF`` measures REF, checked out the same way, in place of this checkout:
both are checked out when the building is done (a branch names its commit at that moment).

- ``job-chain runs FILE`` into a pipe, one chain of 50 / 500 / 1,000 / 4,000 runs, and a
  ``status`` of the same chain (its newest run);
- the console (``job-chain ui``'s app on loopback, in a process of the tree's code): the runs page's
  first view in a fresh console (no run's summary kept, as for runs copied in by hand: each tree's
  first view starts from none), a view again, and one poll of an idle page (its bytes and time),
  with 50 / 500 / 4,000 runs in 1 or 40 chains, and 40 chains × 50 runs;
- ``status FILE`` of the finished 50 / 500 / 5,000-step runs, warm (a look before it, its record
  unchanged for 2.5 s: a run that ended a while ago) and cold (no cached attempts: every job asked
  of the API, and every step worked out).

Before timing, each command runs once untimed (bytecode, page cache, and for this checkout the runs'
summaries, which that first ``runs`` works out and writes). Printed: each figure's median for both
trees with the change, and the issue's ratios.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import harness

RUNS_SIZES = (50, 500, 1000, 4000)
CONSOLE_SIZES = ((1, 50), (1, 500), (1, 4000), (40, 50), (40, 500), (40, 4000), (40, 2000))  # (chains, runs)
STATUS_STEPS = (50, 500, 5000)
QUICK_RUNS = (20, 50, 100, 200)
QUICK_CONSOLE = ((1, 20), (1, 200), (4, 200), (4, 40))
QUICK_STEPS = (10, 50, 200)


# -- building ---------------------------------------------------------------------------------
def run_to_end(server: harness.BenchServer, directory: Path, steps: int, pool: str) -> Path:
    directory.mkdir(parents=True)
    path = directory / "chain_info.json"
    path.write_text(json.dumps(harness.chain_data(steps, pool=pool, mount=str(directory))))
    after = harness.last_rowid(server)
    run_id = harness.run_id_of(server.cli("run", str(path)).stdout)

    def look() -> Any:
        jobs = harness.chain_jobs(server, after, run_id)
        bad = [j for j in jobs if j.get("status") in ("Failed", "Stopped")]
        wrong = f"a job ended {bad[0]['status']}" if bad else None
        return sum(j.get("status") == "Succeeded" for j in jobs), wrong, jobs

    server.wait_for(look, steps, f"run {run_id} ({steps} steps)", 180.0, 0.2)
    server.cli("status", str(path))  # the run's jobs known to the record once
    return path


def copies(template: Path, directory: Path, count: int, chain_text: str) -> Path:
    """A chain file whose ``FILE.runs/`` holds ``count`` copies of ``template`` (one run's directory),
    each with its own id and start, a minute apart, newest now."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "chain_info.json"
    path.write_text(chain_text)
    runs = Path(str(path) + ".runs")
    runs.mkdir(exist_ok=True)
    record = json.loads((template / "run.json").read_text())
    now = time.time()
    for i in range(count):
        started = now - 60 * (i + 1)
        run_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started)) + f"-{i % 65536:04x}"
        target = runs / run_id
        shutil.copytree(template, target)
        (target / "run.json").write_text(json.dumps(dict(record, id=run_id, started=started)))
        for stale in ("summary.json",):
            (target / stale).unlink(missing_ok=True)
    return path


# -- timing one tree ----------------------------------------------------------------------------
def timed(tree: Path, env: Dict[str, str], args: List[str], repeats: int) -> List[float]:
    """Wall time of ``job-chain ARGS`` with ``tree``'s code (into a pipe), after one untimed run."""
    out = []
    for i in range(repeats + 1):
        began = time.perf_counter()
        done = subprocess.run([*harness.JOB_CHAIN, *args], cwd=tree, env=dict(env, PYTHONPATH=str(tree)),
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
        took = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"job-chain {' '.join(args)} ({tree}) exited {done.returncode}: {done.stderr[-2000:]!r}")
        if i:
            out.append(took)
    return out


def forget_attempts(path: Path) -> None:
    for cache in Path(str(path) + ".runs").glob("*/attempts.json"):
        cache.unlink()


def forget_summaries(directory: Path) -> None:
    """Remove every kept summary, kept look and chain-file check under ``directory``: what a fresh look
    works out."""
    for kept in [*directory.rglob("*.runs/.summaries"), *directory.rglob("*.runs/.looks")]:
        shutil.rmtree(kept, ignore_errors=True)
    for kept in directory.rglob("*.runs/.file-check.json"):
        kept.unlink()


def console_figures(tree: Path, env: Dict[str, str], directory: Path) -> Dict[str, float]:
    forget_summaries(directory)  # a fresh console over runs none of these trees looked at
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--console-worker", str(directory)],
                          cwd=tree, env=dict(env, PYTHONPATH=str(tree)), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"console worker ({tree}) exited {done.returncode}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def console_worker(directory: str) -> int:
    """In a process of one tree's code: the console's runs page over loopback HTTP."""
    import re
    import threading

    import requests
    import uvicorn

    from job_chain.ui.app import create_app
    from job_chain.ui.catalog import Catalog
    from job_chain.ui.security import Guard
    from job_chain.ui.server import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    catalog = Catalog([directory])
    app = create_app(catalog, Guard.for_bind("127.0.0.1", port, token=False))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    url = f"http://127.0.0.1:{port}"
    session = requests.Session()

    def get(path: str) -> Any:
        began = time.perf_counter()
        answer = session.get(url + path, timeout=600)
        return time.perf_counter() - began, answer

    first, page = get("/")
    views = [get("/")[0] for _ in range(3)]
    rows = re.findall(r'<tr (?:hx-swap-oob="true" )?data-digest="([0-9a-f]+)" class="run-row" id="([^"]+)"', page.text)
    pager = re.search(r'id="pager" class="pager" data-digest="([^"]*)"', page.text)
    seen = ",".join(f"{i}:{d}" for d, i in rows) + (f",pager:{pager.group(1)}" if pager else "")
    poll_path = "/fragment/runs" + (f"?seen={seen}" if rows or pager else "")
    polls = [get(poll_path) for _ in range(4)]
    server.should_exit = True
    print(json.dumps({"first_s": first, "view_s": harness.percentile(views, 50), "page_bytes": len(page.content),
                      "rows": page.text.count('class="run-row"'),
                      "poll_s": harness.percentile([p[0] for p in polls], 50),
                      "poll_bytes": max(len(p[1].content) for p in polls),
                      "poll_status": polls[-1][1].status_code}))
    return 0


def one_tree(tree: Path, env: Dict[str, str], built: Dict[str, Any], repeats: int) -> Dict[str, float]:
    found: Dict[str, float] = {}
    for size, path in built["runs"].items():
        forget_summaries(path.parent)  # each tree's untimed first `runs` works them out
        found[f"runs_{size}"] = harness.percentile(timed(tree, env, ["runs", str(path)], repeats), 50)
        found[f"status_of_runs_{size}"] = harness.percentile(timed(tree, env, ["status", str(path)], repeats), 50)
    for (chains, size), directory in built["console"].items():
        figures = console_figures(tree, env, directory)
        for key, value in figures.items():
            found[f"console_{chains}x{size}_{key}"] = value
    for steps, path in built["status"].items():
        time.sleep(2.5)  # the run ended a while ago (the cold looks of the tree before just wrote its record)
        found[f"status_{steps}_warm"] = harness.percentile(timed(tree, env, ["status", str(path)], repeats), 50)
        cold = [_cold(tree, env, path) for _ in range(max(2, repeats - 1))]
        found[f"status_{steps}_cold"] = harness.percentile(cold, 50)
    return found


def _cold(tree: Path, env: Dict[str, str], path: Path) -> float:
    """One ``status`` with no cached attempts (forgotten just before: not warmed up)."""
    forget_attempts(path)
    began = time.perf_counter()
    done = subprocess.run([*harness.JOB_CHAIN, "status", str(path)], cwd=tree, env=dict(env, PYTHONPATH=str(tree)),
                          capture_output=True, stdin=subprocess.DEVNULL, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"status {path} ({tree}) exited {done.returncode}: {done.stderr[-2000:]!r}")
    return time.perf_counter() - began


# -- the report ---------------------------------------------------------------------------------
def fmt(key: str, value: Optional[float]) -> str:
    if value is None:
        return "-"
    if key.endswith("_bytes"):
        return f"{value / 1024:.1f} KB" if value >= 1024 else f"{value:.0f} B"
    if key.endswith(("_rows", "_status")):
        return f"{value:.0f}"
    return f"{value * 1000:.0f} ms"


def main(argv: Optional[List[str]] = None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] == "--console-worker":
        return console_worker(sys.argv[2])
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--ref", default=None, help="the commit to compare this checkout with (e.g. before issue 35)")
    p.add_argument("--this", dest="this", default=None,
                   help="measure this commit (checked out when the building is done) instead of this checkout")
    p.add_argument("--rounds", type=int, default=1, help="rounds per tree, alternating the order (default 1)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each command per round (default 3)")
    p.add_argument("--status-steps", default=None, help="the finished runs status looks at (default 50,500,5000)")
    args = p.parse_args(argv)
    started = time.time()
    runs_sizes = QUICK_RUNS if args.quick else RUNS_SIZES
    console_sizes = QUICK_CONSOLE if args.quick else CONSOLE_SIZES
    status_steps = tuple(int(x) for x in args.status_steps.split(",")) if args.status_steps else \
        QUICK_STEPS if args.quick else STATUS_STEPS
    harness.install_signal_handlers()
    harness.warm_bytecode()
    work = Path(tempfile.mkdtemp(prefix="job-chain-team-"))
    trees: Dict[str, Path] = {"this": work / "this" if args.this else harness.ROOT}
    if args.ref:
        trees[args.ref] = work / "tree"
    checked_out: List[Path] = []
    try:
        with harness.BenchServer() as server:
            env = server.cli_env()
            t0 = time.monotonic()
            template_chain = run_to_end(server, work / "template", 3, "pool-team")
            template = next(d for d in Path(str(template_chain) + ".runs").iterdir() if d.name[0] != ".")
            text = template_chain.read_text()
            built: Dict[str, Any] = {"runs": {}, "console": {}, "status": {}}
            for steps in status_steps:
                built["status"][steps] = run_to_end(server, work / f"status-{steps}", steps, f"pool-status-{steps}")
            for size in runs_sizes:
                built["runs"][size] = copies(template, work / f"runs-{size}", size, text)
            for chains, size in console_sizes:
                directory = work / f"console-{chains}x{size}"
                for c in range(chains):
                    copies(template, directory / f"team-{c:02d}" / "pretrain", size // chains, text)
                built["console"][(chains, size)] = directory
            build_s = time.monotonic() - t0
            print(f"built in {build_s:.0f} s", flush=True)
            for ref, tree in ((args.this, trees["this"]), (args.ref, trees.get(args.ref or ""))):
                if ref and tree is not None:
                    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), ref], cwd=harness.ROOT,
                                   check=True)
                    checked_out.append(tree)
                    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True,
                                            text=True).stdout.strip()
                    print(f"{ref} is {commit}", flush=True)
            samples: Dict[str, Dict[str, List[float]]] = {name: {} for name in trees}
            for round_no in range(args.rounds):
                order = list(trees.items()) if round_no % 2 == 0 else list(reversed(list(trees.items())))
                for name, tree in order:
                    for key, value in one_tree(tree, env, built, 1 if args.quick else args.repeats).items():
                        samples[name].setdefault(key, []).append(value)
                    print(f"round {round_no + 1}/{args.rounds}: {name} done: {json.dumps(samples[name])}", flush=True)
        names = list(trees)
        medians = {n: {k: harness.percentile(v, 50) for k, v in samples[n].items()} for n in names}
        results = Path(args.results_dir)
        results.mkdir(parents=True, exist_ok=True)
        (results / "team.json").write_text(json.dumps({"medians": medians, "samples": samples, "ref": args.ref,
                                                       "build_s": build_s}, indent=1))
        keys = list(medians[names[0]])
        rows = []
        for key in keys:
            values = [medians[n].get(key) for n in names]
            change = ""
            if len(values) == 2 and values[0] is not None and values[1] is not None and not key.endswith("_status"):
                if not values[0] or not values[1]:
                    change = "-" if values[0] == values[1] else ("none now" if not values[0] else "")
                else:
                    change = f"{values[1] / values[0]:.1f}× less" if values[0] < values[1] else \
                        f"{values[0] / values[1]:.2f}× more"
            rows.append((key, *(fmt(key, v) for v in values), change))
        out = harness.console()
        out.print(harness.table("team.py: medians" + (f", {args.rounds} rounds alternating" if args.ref else ""),
                                ("figure", *names, *(["change (this vs ref)"] if args.ref else [])), rows))
        big, mid = runs_sizes[-1], runs_sizes[-2]
        for n in names:
            m = medians[n]
            print(f"{n}: runs {big} / runs {mid} = {m[f'runs_{big}'] / m[f'runs_{mid}']:.2f}× "
                  f"(target ≤ {big / mid * 1.1:.1f}×); runs {big} / status of that chain = "
                  f"{m[f'runs_{big}'] / m[f'status_of_runs_{big}']:.2f}× (target ≤ 3×); "
                  f"runs {big} / runs {runs_sizes[0]} = {m[f'runs_{big}'] / m[f'runs_{runs_sizes[0]}']:.2f}×")
        info = harness.machine()
        info["other_load"] = harness.other_load()
        note = harness.busy_note(info["other_load"])
        if note:
            print(note)
        (results / "team.json").write_text(json.dumps({"medians": medians, "samples": samples, "machine": info,
                                                       "ref": args.ref, "build_s": build_s,
                                                       "elapsed_s": time.time() - started}, indent=1))
        print(f"machine: {json.dumps(info)}")
    finally:
        for tree in checked_out:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=harness.ROOT, capture_output=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
