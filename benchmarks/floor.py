"""Hops and joins next to the floor, and what a busy pool costs them (issue 22), in one run.

One local server; every figure is printed with its ratio to the floor or to its counterpart.

- **core**, in rotated rounds (each round runs the five in a different order, so a load burst on
  this shared machine does not land on one figure only): (a) *the floor*, a fresh python that
  imports the official SDK's signer and makes one signed request; (b) a linear hop (script end
  → next pod running); (c) a diamond join and (d) a fan-in-8 join (later branch's script end →
  join pod running, branches ending together at a barrier); (e) a fan-out of width 64 (split's
  script end → every branch job created).
- **list**: (f) the first page (50, newest first) of a pool holding 50 vs 5,000 jobs, and a walk
  of every page, alternating pools.
- **status**: (g) ``job-chain status`` (into a pipe) on runs of 500 and 2,000 steps it never looked
  at (its cache of finished attempts removed), and on the finished 500-step run, table and --json.
- **busy**: (h) a diamond join, then ``status`` first look, with 0 and with 5,000 other jobs
  created in the pool while the run ran (step a waits at a gate while they are created).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import dag
import harness
import others
from harness import MARKER, Figure, ms
from rounds import Samples, rotated

SECTIONS = ("core", "list", "status", "busy")
POOLS = {"core": harness.POOL, "quiet": "pool-quiet", "busy": "pool-busy", "small": "pool-list-small",
         "big": "pool-list-big", "status": "pool-status"}
GATE = (f'while [ ! -e "$SHARED/go" ]; do sleep 0.005; done\necho "{MARKER} $EPOCHREALTIME"\n')
TARGETS = {"hop": 1.2, "diamond": 1.5, "fanin": 3.0, "fanout_s": 1.0, "page": 1.5, "status_growth": 4.5,
           "status_s": 0.15, "busy": 1.2}


def wait_run(server: harness.BenchServer, run_id: str, expected: int, after: int,
             stall_timeout: float = 90.0) -> Dict[str, Dict[str, Any]]:
    """Wait until the run has ``expected`` jobs, all Succeeded; its jobs by step."""
    def look() -> Tuple[int, Optional[str], Dict[str, Dict[str, Any]]]:
        jobs = dag.steps_of(server, run_id, after)
        bad = [j for j in jobs.values() if j["status"] in ("Failed", "Stopped")]
        wrong = f"run {run_id}: step {bad[0]['step']} ended {bad[0]['status']}" if bad else None
        return sum(j["status"] == "Succeeded" for j in jobs.values()), wrong, jobs

    return server.wait_for(look, expected, f"run {run_id}", stall_timeout, 0.1)


def start(server: harness.BenchServer, path: Path) -> str:
    return harness.run_id_of(server.cli("run", str(path)).stdout)


def end_of(server: harness.BenchServer, job: Dict[str, Any]) -> float:
    found = harness.script_end(server, job)
    if found is None:
        raise RuntimeError(f"job {job['id']} (step {job['step']}) logged no end marker")
    return found


def join_after(server: harness.BenchServer, jobs: Dict[str, Dict[str, Any]], branches: Sequence[str],
               join: str) -> float:
    """From the later branch's script end to the join's pod running."""
    return jobs[join]["pod_started"] - max(end_of(server, jobs[b]) for b in branches)


# -- (b)–(e) ------------------------------------------------------------------------------------
def hop(server: harness.BenchServer, work: Path, steps: int) -> List[float]:
    after = harness.last_rowid(server)
    run_id = start(server, harness.write_chain(work, steps))
    wait_run(server, run_id, steps, after)
    return [h["hop_s"] for h in harness.hops(server, run_id, after)]


def staggered(parties: int, gap: float) -> str:
    """:func:`dag.barrier`, then branch ``b<i>`` ends ``i × gap`` seconds later: each branch's tail
    runs alone, as it would with a core of its own (a pod per node, as in a cluster)."""
    wait = dag.barrier(parties).rsplit("echo", 1)[0]
    return wait + (f'sleep "$(awk "BEGIN {{print ${{AIHC_JOB_NAME#b}} * {gap}}}")"\n'
                   f'echo "{MARKER} $EPOCHREALTIME"\n')


def fan_in(server: harness.BenchServer, work: Path, width: int, pool: str = harness.POOL,
           gate: Optional[Callable[[str, int], None]] = None, gap: float = 0.0) -> Dict[str, Any]:
    """a → width branches ending together (``gap`` > 0: one after another) → join; ``gate(run_id,
    after)``: a waits for $SHARED/go until it returns."""
    names = [f"b{i}" for i in range(width)]
    branch = staggered(width, gap) if gap else dag.barrier(width)
    path = dag.write(work, [{"name": "a", "script": GATE if gate else harness.STEP_SCRIPT}]
                     + [{"name": n, "script": branch, "needs": ["a"]} for n in names]
                     + [{"name": "join", "needs": names}], pool=pool)
    after = harness.last_rowid(server)
    run_id = start(server, path)
    if gate:
        gate(run_id, after)
        (work / "go").touch()
    jobs = wait_run(server, run_id, width + 2, after)
    return {"run_id": run_id, "path": path, "join_s": join_after(server, jobs, names, "join")}


def fan_out(server: harness.BenchServer, work: Path, width: int) -> Dict[str, float]:
    names = [f"w{i}" for i in range(width)]
    path = dag.write(work, [{"name": "split"}] + [{"name": n, "needs": ["split"]} for n in names]
                     + [{"name": "merge", "needs": names}])
    after = harness.last_rowid(server)
    jobs = wait_run(server, start(server, path), width + 2, after, stall_timeout=180)
    split_end = end_of(server, jobs["split"])
    branches = [jobs[n] for n in names]
    return {"created": max(j["created_at"] for j in branches) - split_end,
            "running": max(j["pod_started"] for j in branches) - split_end,
            "merge": join_after(server, jobs, names, "merge")}


def core(server: harness.BenchServer, args: Any) -> Samples:
    out = Samples()
    base = server.work / "core"

    def floor(r: int) -> None:
        out.add("floor", r, *harness.measure_floor(server, args.floor_runs, harness.SIGNER_FLOOR_CODE,
                                                   warmup=1 if r == 0 else 0)["samples_s"])

    def fanout(r: int) -> None:
        found = fan_out(server, base / f"fanout-{r}", args.fan_out)
        for key in ("created", "running", "merge"):
            out.add(f"fanout_{key}", r, found[key])

    steps: Dict[str, Callable[[int], None]] = {
        "floor": floor,
        "hop": lambda r: out.add("hop", r, *hop(server, base / f"hop-{r}", args.hop_steps)),
        "diamond": lambda r: out.add("diamond", r, fan_in(server, base / f"diamond-{r}", 2)["join_s"]),
        "fanin": lambda r: out.add("fanin", r, fan_in(server, base / f"fanin-{r}", args.fan_in)["join_s"]),
        "fanin_alone": lambda r: out.add("fanin_alone", r, fan_in(server, base / f"fanin-alone-{r}", args.fan_in,
                                                                  gap=0.15)["join_s"]),
        "fanout": fanout,
    }
    if "core" not in args.sections:
        steps = {"floor": floor}
    for r in range(args.rounds):
        for name in rotated(list(steps), r):
            steps[name](r)
    return out


# -- (f) listings ---------------------------------------------------------------------------------
def listing(server: harness.BenchServer, args: Any) -> Samples:
    small, big = args.list_sizes
    pools = {"small": (POOLS["small"], small), "big": (POOLS["big"], big)}
    out = Samples()
    for key, (pool, size) in pools.items():
        others.park(server, pool)
        out.add(f"fill_{key}", 0, others.add(server, pool, size - 1, prefix=f"list-{size}"))
    client = server.client()
    for r in range(args.rounds):
        for key in rotated(list(pools), r):
            pool, size = pools[key]
            for _ in range(args.page_runs):
                t0 = time.perf_counter()
                client.list_jobs(pool, order_by="createdAt", order="desc", page_no=1, page_size=50)
                out.add(f"page_{key}", r, time.perf_counter() - t0)
            t0 = time.perf_counter()
            seen = sum(1 for _ in client.iter_jobs(pool, order_by="createdAt", order="desc", page_size=50))
            out.add(f"walk_{key}", r, time.perf_counter() - t0)
            if seen != size:
                raise RuntimeError(f"pool {pool}: walked {seen} jobs, expected {size}")
    return out


# -- (g) status at scale ----------------------------------------------------------------------------
def status_cmd(path: Path, *extra: str) -> List[str]:
    return [*harness.JOB_CHAIN, "status", str(path), *extra]


def forget(path: Path) -> None:
    """Remove the cached attempts of every run of ``path``: the next status is a first look."""
    for cache in Path(str(path) + ".runs").glob("*/attempts.json"):
        cache.unlink()


def timed(server: harness.BenchServer, command: List[str]) -> float:
    return harness.timed_runs(command, 1, warmup=0, env=server.cli_env())[0]


def status_scale(server: harness.BenchServer, args: Any) -> Samples:
    small, big = args.status_steps
    paths, runs = {}, {}
    after = harness.last_rowid(server)
    out = Samples()
    t0 = time.monotonic()
    for steps in (small, big):  # both at once, each in a pool of its own: a first look walks its own jobs only
        directory = server.work / f"status-{steps}"
        directory.mkdir(parents=True)
        data = harness.chain_data(steps, pool=f"{POOLS['status']}-{steps}", mount=str(directory))
        paths[steps] = directory / "chain_info.json"
        paths[steps].write_text(json.dumps(data))
        runs[steps] = start(server, paths[steps])
    for steps in (small, big):
        wait_run(server, runs[steps], steps, after, stall_timeout=120)
    out.add("build", 0, time.monotonic() - t0)
    for steps in (small, big):
        timed(server, status_cmd(paths[steps]))  # warm-up: page cache, bytecode
    cases: Dict[str, Callable[[], float]] = {
        "cold_small": lambda: (forget(paths[small]), timed(server, status_cmd(paths[small])))[1],
        "cold_big": lambda: (forget(paths[big]), timed(server, status_cmd(paths[big])))[1],
        "warm_small": lambda: timed(server, status_cmd(paths[small])),
        "warm_small_json": lambda: timed(server, status_cmd(paths[small], "--json")),
        "warm_big": lambda: timed(server, status_cmd(paths[big])),
    }
    for r in range(args.status_rounds):
        for name in rotated(list(cases), r):
            if name.startswith("warm"):
                timed(server, status_cmd(paths[small if "small" in name else big]))  # (re)fill the cache, untimed
            out.add(name, r, cases[name]())
    out.add("terminal", 0, *terminal_render(server, paths[big], args.status_rounds))
    return out


def terminal_render(server: harness.BenchServer, path: Path, rounds: int) -> List[float]:
    """In-process: the status table of ``path``'s run printed for a 200-column terminal (rich)."""
    import io

    from rich.console import Console

    from job_chain.cli.run_view import status_table
    from job_chain.session import ChainSession

    status = ChainSession.from_file(str(path), credentials=server.credentials_file).status()
    times = []
    for _ in range(rounds):
        out = Console(file=io.StringIO(), force_terminal=True, width=200, color_system="standard")
        t0 = time.perf_counter()
        out.print(status_table(status))
        times.append(time.perf_counter() - t0)
    return times


# -- (h) a busy pool ------------------------------------------------------------------------------------
def busy(server: harness.BenchServer, args: Any) -> Samples:
    others.park(server, POOLS["busy"])
    out = Samples()

    def wait_first_running(run_id: str, after: int, crowd: int, r: int) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            first = dag.steps_of(server, run_id, after).get("a")
            if first and first["pod_started"]:
                if crowd:
                    out.add("fill", r, others.add(server, POOLS["busy"], crowd, prefix=f"busy-{r}"))
                return
            time.sleep(0.05)
        raise RuntimeError(f"run {run_id}: step a did not start within 60 s")

    for r in range(args.busy_rounds):
        paths = {}
        for arm in rotated(["quiet", "busy"], r):
            crowd = args.others if arm == "busy" else 0
            found = fan_in(server, server.work / f"busy-{r}-{arm}", 2, pool=POOLS[arm],
                           gate=lambda run_id, after, n=crowd, r=r: wait_first_running(run_id, after, n, r))
            out.add(f"join_{arm}", r, found["join_s"])
            paths[arm] = found["path"]
        for i in range(args.status_runs):
            for arm in rotated(["quiet", "busy"], i):
                forget(paths[arm])
                out.add(f"look_{arm}", r, timed(server, status_cmd(paths[arm])))
    return out


# -- report -------------------------------------------------------------------------------------------
def versus(value: float, ratio: float, what: str) -> str:
    return f"{ms(value)} ({ratio:.2f}× {what})"


def figures(args: Any, data: Dict[str, Samples]) -> List[Figure]:
    """The headline figures; a ratio within a section is the median of its per-round ratios."""
    core = data["core"]
    floor = core.median("floor")
    out = [Figure(f"(a) floor: python + SDK signer + 1 signed request, median of {len(core.values('floor'))}",
                  "(reported)", ms(floor), None, floor)]

    def against(samples: Samples, name: str, base: str, label: str, target: Optional[float], what: str) -> None:
        value, ratio = samples.median(name), samples.ratio(name, base)
        out.append(Figure(label, "(reported)" if target is None else f"≤ {target}× {what}",
                          versus(value, ratio, what), None if target is None else ratio <= target, value))

    def count(samples: Samples, name: str) -> str:
        return f"median of {len(samples.values(name))}"

    if "core" in args.sections:
        against(core, "hop", "floor", f"(b) linear hop, {count(core, 'hop')}", TARGETS["hop"], "floor")
        against(core, "diamond", "floor", f"(c) diamond join, {count(core, 'diamond')}", TARGETS["diamond"], "floor")
        against(core, "fanin", "floor", f"(d) fan-in-{args.fan_in} join, {count(core, 'fanin')}", TARGETS["fanin"],
                "floor")
        against(core, "fanin_alone", "floor", "(d) … its branches ending 150 ms apart (each tail alone, as on a "
                "core of its own)", None, "floor")
        created = core.median("fanout_created")
        out.append(Figure(f"(e) fan-out {args.fan_out}: split end → every branch created, "
                          f"{count(core, 'fanout_created')}", f"≤ {TARGETS['fanout_s']:.0f} s",
                          versus(created, core.ratio("fanout_created", "floor"), "floor"),
                          created <= TARGETS["fanout_s"], created))
        against(core, "fanout_running", "floor", f"(e) fan-out {args.fan_out}: split end → every branch running",
                None, "floor")
        against(core, "fanout_merge", "floor", f"(e) fan-in-{args.fan_out} join after it", None, "floor")
    if "list" in args.sections:
        small, big = args.list_sizes
        listed = data["list"]
        out.append(Figure(f"(f) first page (50) of a pool of {small} jobs, {count(listed, 'page_small')}",
                          "(reported)", ms(listed.median("page_small")), None, listed.median("page_small")))
        against(listed, "page_big", "page_small", f"(f) the same, pool of {big} jobs", TARGETS["page"],
                f"{small}-job pool")
        walk = listed.median("walk_big")
        out.append(Figure(f"(f) walk of every page (50 each) of the {big}-job pool", "(reported)",
                          f"{walk * 1000:.0f} ms ({walk / big * 1e6:.0f} µs per job; "
                          f"{listed.median('walk_small') / small * 1e6:.0f} µs at {small})", None, walk))
    if "status" in args.sections:
        small, big = args.status_steps
        looked = data["status"]

        def absolute(name: str, label: str, target: Optional[float]) -> None:
            value = looked.median(name)
            out.append(Figure(label, "(reported)" if target is None else f"≤ {ms(target)}",
                              versus(value, value / floor, "floor"), None if target is None else value <= target,
                              value))

        absolute("cold_small", f"(g) status, never-seen {small}-step run, {count(looked, 'cold_small')}", None)
        against(looked, "cold_big", "cold_small", f"(g) status, never-seen {big}-step run", TARGETS["status_growth"],
                f"{small}-step")
        absolute("warm_small", f"(g) status, finished {small}-step run (table, into a pipe)", TARGETS["status_s"])
        absolute("warm_small_json", f"(g) status --json, finished {small}-step run", TARGETS["status_s"])
        absolute("warm_big", f"(g) status, finished {big}-step run (table, into a pipe)", None)
        out.append(Figure(f"(g) its {big}-row table printed for a 200-column terminal (in-process)", "(reported)",
                          ms(looked.median("terminal")), None, looked.median("terminal")))
    if "busy" in args.sections:
        crowd = data["busy"]
        for key, label in (("join", "(h) diamond join"), ("look", "(h) status, first look")):
            quiet = crowd.median(f"{key}_quiet")
            out.append(Figure(f"{label}, 0 other jobs created during the run, {count(crowd, f'{key}_quiet')}",
                              "(reported)", versus(quiet, quiet / floor, "floor"), None, quiet))
            against(crowd, f"{key}_busy", f"{key}_quiet", f"{label}, {args.others} other jobs created during the run",
                    TARGETS["busy"], "with 0")
    return out


def pair(text: str) -> List[int]:
    values = [int(x) for x in text.split(",")]
    if len(values) != 2 or not 0 < values[0] < values[1]:
        raise ValueError(f"expected SMALL,BIG (e.g. 50,5000), got {text!r}")
    return values


def main(argv: Optional[List[str]] = None) -> int:
    p = harness.parser(__doc__.splitlines()[0])
    p.add_argument("--only", default=",".join(SECTIONS), help=f"sections, comma-separated: {', '.join(SECTIONS)} "
                   "(the floor is always measured)")
    p.add_argument("--rounds", type=int, default=None, help="rotated rounds of core and list (default 5, --quick 2)")
    p.add_argument("--floor-runs", type=int, default=4, help="floor probes per round (default 4)")
    p.add_argument("--hop-steps", type=int, default=None, help="linear chain per round (default 6, --quick 4)")
    p.add_argument("--fan-in", type=int, default=8, help="branches of the fan-in join (default 8)")
    p.add_argument("--fan-out", type=int, default=None, help="fan-out width (default 64, --quick 16)")
    p.add_argument("--list-sizes", type=pair, default=None, help="jobs in the two listed pools (default 50,5000)")
    p.add_argument("--page-runs", type=int, default=10, help="first-page requests per pool per round")
    p.add_argument("--status-steps", type=pair, default=None, help="run lengths for status (default 500,2000)")
    p.add_argument("--status-rounds", type=int, default=None, help="rotated status rounds (default 5, --quick 2)")
    p.add_argument("--others", type=int, default=None, help="other jobs created during a busy run (default 5000)")
    p.add_argument("--busy-rounds", type=int, default=None, help="quiet/busy diamond pairs (default 3, --quick 1)")
    p.add_argument("--status-runs", type=int, default=3, help="first-look status runs per arm per busy round")
    args = p.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    if set(args.sections) - set(SECTIONS):
        p.error(f"--only: unknown section(s) {', '.join(sorted(set(args.sections) - set(SECTIONS)))}")
    quick = args.quick
    args.rounds = args.rounds or (2 if quick else 5)
    args.hop_steps = args.hop_steps or (4 if quick else 6)
    args.fan_out = args.fan_out or (16 if quick else 64)
    args.list_sizes = args.list_sizes or ([50, 500] if quick else [50, 5000])
    args.status_steps = args.status_steps or ([50, 200] if quick else [500, 2000])
    args.status_rounds = args.status_rounds or (2 if quick else 5)
    args.others = args.others or (500 if quick else 5000)
    args.busy_rounds = args.busy_rounds or (1 if quick else 3)
    started = time.time()
    pools = list(POOLS.values())[:-1] + [f"{POOLS['status']}-{n}" for n in args.status_steps]
    data: Dict[str, Samples] = {}
    with harness.BenchServer(keep=args.keep, options=others.server_options(pools)) as server:
        for section, run in (("core", core), ("list", listing), ("status", status_scale), ("busy", busy)):
            if section in args.sections or section == "core":
                t0 = time.monotonic()
                data[section] = run(server, args)
                print(f"{section}: {time.monotonic() - t0:.0f} s", flush=True)
    params = {k: v for k, v in vars(args).items() if k not in ("results_dir", "keep")}
    harness.report("floor", args, figures(args, data), {k: v.data for k, v in data.items()}, started, params)
    return 0


if __name__ == "__main__":
    harness.main_wrapper(main)
