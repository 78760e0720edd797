"""Shared harness for the benchmarks: a throw-away local server, chain files, timings, reports.

Every benchmark needs the same careful plumbing — a server on a free loopback port with a fresh
state dir, stopped (and its pods' process groups killed) even when the benchmark fails — and
the same statistics and output format, so it lives here once instead of in each script.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PY = sys.executable
JOB_CHAIN = [PY, "-m", "job_chain"]  # how pods run it too (``python3 -m job_chain``)
POOL = "pool-bench"
MARKER = "jc-bench-end"
# The step script: ``true``, then one bash builtin that logs when the user's part ended
# (EPOCHREALTIME needs no process). The advance runs *inside* the pod after this, so the pod's
# exit comes after the next step already started: the script's end is the honest start of a hop.
STEP_SCRIPT = f'true\necho "{MARKER} $EPOCHREALTIME"\n'
CHILD_ENV_DROP = ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AK", "SK", "HOST", "JOB_CHAIN_CREDENTIALS",
                   "JOB_CHAIN_LOCAL_DIR", "JOB_CHAIN_LOCAL_AK", "JOB_CHAIN_LOCAL_SK", "PYTHONDONTWRITEBYTECODE")
# Bytecode cache for every process we time (server, pods, CLI): an installed job-chain has .pyc
# files, so timing a run that compiles every module from source (as PYTHONDONTWRITEBYTECODE=1
# would make it) measures the environment, not job-chain. A prefix keeps the checkout untouched.
PYCACHE = RESULTS / ".pycache"
WARM_IMPORTS = ("job_chain.cli, job_chain.cli.chain, job_chain.cli.local, job_chain.hop.advance, job_chain.hop, "
                "job_chain.hop.readiness, "
                "job_chain.status.types, job_chain.spec.loader, job_chain.record.records, job_chain.aihc.client, "
                "job_chain.local.server, job_chain.local.routes, job_chain.local.executor, rich.console, rich.table, "
                "rich.live, uvicorn, psutil")

if str(ROOT) not in sys.path:  # runnable as ``python benchmarks/x.py`` from a checkout
    sys.path.insert(0, str(ROOT))

from job_chain.local.process import ServerProcess  # noqa: E402  (needs the path above)


def _terminate(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def install_signal_handlers() -> None:
    """SIGTERM/SIGHUP raise SystemExit, so ``finally`` blocks stop servers and kill pods."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)


def child_env(**extra: str) -> Dict[str, str]:
    """The environment for every process we start: no credentials, bytecode cached in PYCACHE."""
    env = {k: v for k, v in os.environ.items() if k not in CHILD_ENV_DROP}
    env.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))
    env.update(extra)
    return env


def warm_bytecode() -> None:
    """Compile what the timed processes import into the cache once, so no figure pays for it."""
    PYCACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([PY, "-c", f"import {WARM_IMPORTS}"], env=child_env(), check=True, timeout=300,
                   stdin=subprocess.DEVNULL)


# -- statistics ------------------------------------------------------------------------------
def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of ``values``; NaN when empty."""
    data = sorted(values)
    if not data:
        return float("nan")
    pos = (len(data) - 1) * q / 100.0
    low = int(pos)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (pos - low)


def summary(values: Sequence[float]) -> Dict[str, float]:
    """n, median, p95, p99, mean, min, max of ``values``."""
    data = list(values)
    if not data:
        return {"n": 0}
    return {"n": len(data), "median": percentile(data, 50), "p95": percentile(data, 95),
            "p99": percentile(data, 99), "mean": sum(data) / len(data), "min": min(data), "max": max(data)}


def ms(seconds: Optional[float]) -> str:
    return "-" if seconds is None or seconds != seconds else f"{seconds * 1000:.0f} ms"


def timed_runs(command: Sequence[str], runs: int, warmup: int = 1, env: Optional[Dict[str, str]] = None,
               check: bool = True) -> List[float]:
    """Wall time (spawn to exit) of ``command``, ``runs`` times after ``warmup`` untimed runs."""
    times = []
    env = child_env() if env is None else env
    for i in range(warmup + runs):
        start = time.perf_counter()
        done = subprocess.run(list(command), env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=120)
        elapsed = time.perf_counter() - start
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: "
                               f"{done.stderr.decode(errors='replace')[-500:]}")
        if i >= warmup:
            times.append(elapsed)
    return times


# -- the server -------------------------------------------------------------------------------
class BenchServer(ServerProcess):
    """A local server with its own temp state dir, on a free loopback port.

    ``options``: more ``local serve`` arguments (``--pool``, ``--queue``).

    Use as a context manager: leaving it (also by an exception or SIGTERM) stops the server,
    SIGKILLs the process groups of its pods and removes the temp dir (unless ``keep``).
    """

    def __init__(self, max_running: Optional[int] = None, stop_grace: float = 2.0,
                 sample_interval: Optional[float] = None, keep: bool = False,
                 options: Sequence[str] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="job-chain-bench-"))
        self.work = self.root / "work"
        self.work.mkdir()
        server_options = ["--stop-grace", str(stop_grace)]
        if max_running:
            server_options += ["--max-running", str(max_running)]
        if sample_interval is not None:
            server_options += ["--sample-interval", str(sample_interval)]
        # pods inherit the server's env
        super().__init__(self.root / "state", [*server_options, *options], env=child_env(), cwd=self.root)
        self.pool = POOL
        self.keep = keep

    def __enter__(self) -> BenchServer:
        try:
            warm_bytecode()
            self.start()
        except BaseException:
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        try:
            super().cleanup()
        finally:
            if not self.keep:
                shutil.rmtree(self.root, ignore_errors=True)
            else:
                print(f"(state kept in {self.root})", file=sys.stderr)

    def cli_env(self) -> Dict[str, str]:
        """The environment for job-chain commands: this server's credentials file, nothing else."""
        return child_env(JOB_CHAIN_CREDENTIALS=self.credentials_file)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run([*JOB_CHAIN, *args], env=self.cli_env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeError(f"job-chain {' '.join(args)} exited {done.returncode}: {done.stderr[-1000:]}")
        return done

    def counts(self) -> Dict[str, int]:
        with self.db() as conn:
            return {r["status"]: r["n"] for r in conn.execute("SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")}

    def wait_done(self, total: int, stall_timeout: float = 60.0, poll: float = 0.2) -> Dict[str, int]:
        """Wait until ``total`` jobs are terminal; raise if one did not succeed or nothing moves."""
        def look() -> Tuple[int, Optional[str], Dict[str, int]]:
            counts = self.counts()
            bad = any(s in ("Failed", "Stopped") for s in counts)
            return counts.get("Succeeded", 0), f"jobs ended badly: {counts}" if bad else None, counts

        return self.wait_for(look, total, "jobs", stall_timeout, poll)

    def wait_for(self, look: Callable[[], Tuple[int, Optional[str], Any]], total: int, what: str,
                 stall_timeout: float, poll: float) -> Any:
        """Poll ``look`` (→ how many are done, why it went wrong or None, a result) until ``total``
        are done, and return that result; raise when it went wrong, nothing moved for
        ``stall_timeout`` seconds, or the server died."""
        last, last_change = -1, time.monotonic()
        while True:
            done, wrong, result = look()
            if wrong:
                raise RuntimeError(f"{wrong} (server log: {self.state_dir / 'server.log'})")
            if done >= total:
                return result
            if done != last:
                last, last_change = done, time.monotonic()
            elif time.monotonic() - last_change > stall_timeout:
                raise RuntimeError(f"{what}: none finished for {stall_timeout:.0f}s ({done} of {total} succeeded)")
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"the server died (exit {self.proc.returncode})")
            time.sleep(poll)

    def pod_log(self, job_id: str, pod: str) -> str:
        try:
            return (self.state_dir / "jobs" / job_id / f"{pod}.log").read_text(errors="replace")
        except OSError:
            return ""


# -- chains -----------------------------------------------------------------------------------
def chain_data(steps: int, script: str = STEP_SCRIPT, prefix: str = "step", pool: str = POOL,
               mount: str = "/root/pfs", **body: Any) -> Dict[str, Any]:
    """A chain of ``steps`` inline-command steps; ``mount`` is their shared datasource."""
    jobs = []
    for i in range(steps):
        job: Dict[str, Any] = {"name": f"{prefix}-{i}",
                               "jobSpec": {"command": script, "image": "local", "replicas": 1},
                               "datasources": [{"type": "pfs", "name": "pfs-bench", "mountPath": mount}]}
        job.update(body)
        jobs.append(job)
    return {"resourcePoolId": pool, "jobs": jobs}


def write_chain(directory: Path, steps: int, script: str = STEP_SCRIPT, prefix: str = "step") -> Path:
    """Write chain_info.json into ``directory``, which is also its steps' shared mount (as on PFS)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "chain_info.json"
    path.write_text(json.dumps(chain_data(steps, script, prefix, mount=str(directory)), indent=1))
    return path


def run_id_of(output: str) -> str:
    """The run id from ``job-chain run`` output (``run <id>: step 0 ... submitted``)."""
    for line in output.splitlines():
        if line.startswith("run ") and ":" in line:
            return line.split()[1].rstrip(":")
    raise RuntimeError(f"no run id in: {output!r}")


def _labels(spec: str) -> Dict[str, str]:
    return {x.get("key"): x.get("value") for x in json.loads(spec).get("labels") or []}


def chain_jobs(server: BenchServer, after: int = 0, run_id: str = "") -> List[Dict[str, Any]]:
    """Every job with its labels and its master pod's times, from state.db.

    ``after``: only jobs inserted after that rowid (:func:`last_rowid`); ``run_id``: only jobs
    whose body mentions it. Both keep a poll cheap in a pool holding thousands of other jobs.
    """
    with server.db() as conn:
        rows = conn.execute(
            "SELECT j.id, j.spec, j.status, j.created_at, j.started_at, j.finished_at, p.name AS pod,"
            " p.started_at AS pod_started, p.finished_at AS pod_finished FROM jobs j"
            " JOIN pods p ON p.job_id = j.id AND p.rank = 0 WHERE j.rowid > ? AND instr(j.spec, ?) > 0"
            " ORDER BY j.seq", (after, run_id)).fetchall()
    out = []
    for row in rows:
        item = dict(row)
        labels = _labels(item.pop("spec"))
        item.update(run=labels.get("job-chain/run"), step=labels.get("job-chain/step"),
                    attempt=labels.get("job-chain/attempt"))
        out.append(item)
    return out


def last_rowid(server: BenchServer) -> int:
    """The newest job's rowid: pass it as ``after`` to look only at jobs created from now on."""
    with server.db() as conn:
        return int(conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM jobs").fetchone()[0])


def script_end(server: BenchServer, job: Dict[str, Any]) -> Optional[float]:
    """When the step's user script ended: the marker STEP_SCRIPT logs."""
    for line in server.pod_log(job["id"], job["pod"]).splitlines():
        if line.startswith(MARKER + " "):
            try:
                return float(line.split()[1].replace(",", "."))
            except (IndexError, ValueError):
                return None
    return None


def hops(server: BenchServer, run_id: str, after: int = 0) -> List[Dict[str, float]]:
    """Per hop N→N+1 of a run: the hop (script end → next pod running) and its parts.

    ``advance``: script end → next job created (python start, import, load chain, one POST);
    ``schedule``: created → pod process running (the server's scheduler and spawn);
    ``pod_exit_to_next``: step N's pod exit → N+1 running (negative: the pod exits only after its
    advance submitted N+1); ``cycle``: pod start → next pod start.
    """
    # steps are labelled by name ("step-12"); the number is their place in the line
    steps = {int(j["step"].rsplit("-", 1)[-1]): j for j in chain_jobs(server, after, run_id) if j["run"] == run_id
             and j["attempt"] == "1"}
    out = []
    for index in sorted(steps):
        current, nxt = steps[index], steps.get(index + 1)
        if nxt is None:
            continue
        end = script_end(server, current)
        if end is None or nxt["pod_started"] is None:
            raise RuntimeError(f"step {index} has no end marker or step {index + 1} never ran")
        out.append({
            "hop": index, "hop_s": nxt["pod_started"] - end, "advance_s": nxt["created_at"] - end,
            "schedule_s": nxt["pod_started"] - nxt["created_at"],
            "pod_exit_to_next_s": nxt["pod_started"] - current["pod_finished"],
            "cycle_s": nxt["pod_started"] - current["pod_started"],
        })
    return out


def run_chain(server: BenchServer, steps: int, name: str = "chain", stall_timeout: float = 60.0) -> str:
    """``job-chain run`` a chain of ``steps`` steps on an empty server, wait until all succeeded; its run id."""
    path = write_chain(server.work / name, steps)
    done = server.cli("run", str(path))
    run_id = run_id_of(done.stdout)
    server.wait_done(steps, stall_timeout=stall_timeout)
    return run_id


FLOOR_CODE = """
import sys, time
from job_chain.aihc.client import AIHCClient
from job_chain.aihc.credentials import resolve_credentials
client = AIHCClient(resolve_credentials(credentials_file=sys.argv[1], env={}), max_retries=0)
client.list_jobs(sys.argv[2], page_size=1)
print(repr(time.time()), flush=True)
"""
# The floor of issue 22: what any hop must do at least. A fresh python imports the official
# SDK's signer (and http.client), signs one GET exactly as the SDK's HTTP client does (host,
# x-bce-date, content-length; the SDK's canonical query string) and reads the answer.
SIGNER_FLOOR_CODE = """
import http.client, json, sys, time
from baidubce import utils
from baidubce.auth import bce_v1_signer
from baidubce.auth.bce_credentials import BceCredentials
creds = json.load(open(sys.argv[1]))
host = creds["host"].split("://", 1)[-1].rstrip("/")
params = {b"resourcePoolId": sys.argv[2].encode(), b"pageSize": b"1"}
headers = {b"host": host.encode(), b"content-length": 0, b"x-bce-date": utils.get_canonical_time()}
headers[b"authorization"] = bce_v1_signer.sign(BceCredentials(creds["ak"], creds["sk"]), b"GET",
                                               b"/api/v1/aijobs", headers, params)
conn = http.client.HTTPConnection(host, timeout=30)
conn.request("GET", "/api/v1/aijobs?" + utils.get_canonical_querystring(params, False).decode(),
             headers={k.decode(): v for k, v in headers.items()})
answer = conn.getresponse()
body = answer.read()
if answer.status != 200:
    sys.exit(f"{answer.status}: {body[:300]!r}")
print(repr(time.time()), flush=True)
"""


def measure_floor(server: BenchServer, runs: int, code: str = FLOOR_CODE, pool: Optional[str] = None,
                  warmup: int = 1) -> Dict[str, Any]:
    """A fresh python running ``code`` (import + one signed request), ``runs`` times.

    Measured from spawn to the moment the answer is in (interpreter shutdown excluded, as a hop
    does not wait for it either); the full spawn-to-exit wall time is kept too.
    """
    floors, walls = [], []
    env = server.cli_env()
    for i in range(runs + warmup):
        start = time.time()
        proc = subprocess.Popen([PY, "-c", code, server.credentials_file, pool or server.pool], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = proc.stdout.readline() if proc.stdout else ""
        _, err = proc.communicate(timeout=60)
        end = time.time()
        if proc.returncode != 0 or not line.strip():
            raise RuntimeError(f"floor probe failed ({proc.returncode}): {err[-500:]}")
        if i >= warmup:  # the first run warms the page cache
            floors.append(float(line) - start)
            walls.append(end - start)
    return {"answer_s": summary(floors), "spawn_to_exit_s": summary(walls), "samples_s": floors}


# -- reporting --------------------------------------------------------------------------------
@dataclass
class Figure:
    """One headline number and its target."""

    figure: str
    target: str
    measured: str
    passed: Optional[bool] = None
    value: Optional[float] = None


def machine() -> Dict[str, Any]:
    info: Dict[str, Any] = {"cpus": os.cpu_count(), "loadavg": list(os.getloadavg()),
                            "python": platform.python_version(), "platform": platform.platform()}
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                        text=True, timeout=10).stdout.strip()
        info["bytecode"] = f"PYTHONPYCACHEPREFIX={child_env()['PYTHONPYCACHEPREFIX']}"
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def _busy_cpu_s() -> Optional[float]:
    """CPU seconds the whole machine spent busy since boot (Linux /proc/stat), else None."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    """CPU seconds of this process and of every child it reaped (server → its pods, CLI runs)."""
    import resource

    return sum(sum(resource.getrusage(who)[:2]) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


_BEFORE: Dict[str, Any] = {}


def sample_idle_machine() -> None:
    """Remember the machine's and our CPU counters, to tell later how much *other* work ran."""
    _BEFORE.update(time=time.monotonic(), machine=_busy_cpu_s(), own=_own_cpu_s(), loadavg=list(os.getloadavg()))


def other_load() -> Dict[str, Any]:
    """CPU other processes used while the benchmark ran: machine busy time minus ours."""
    if not _BEFORE or _BEFORE.get("machine") is None:
        return {}
    now = _busy_cpu_s()
    wall = time.monotonic() - _BEFORE["time"]
    ours = _own_cpu_s() - _BEFORE["own"]
    others = max(0.0, (now or 0.0) - _BEFORE["machine"] - ours)
    return {"wall_s": round(wall, 2), "own_cpu_s": round(ours, 2), "others_cpu_s": round(others, 2),
            "others_avg_cores": round(others / wall, 2) if wall > 0 else None,
            "loadavg_at_start": _BEFORE["loadavg"]}


def busy_note(load: Dict[str, Any]) -> Optional[str]:
    """A warning when other work took more than a quarter of a core on average while we measured."""
    cores = load.get("others_avg_cores")
    if cores is not None and cores > 0.25:
        return (f"note: other processes used {cores:.2f} of {os.cpu_count()} cores on average during this run: "
                "these timings are not those of a quiet machine")
    return None


def console() -> Any:
    """A rich console; 120 columns when output goes to a file or pipe (logs stay readable)."""
    from rich.console import Console

    out = Console()
    if not out.is_terminal:
        out.width = 120
    return out


def table(title: str, columns: Iterable[str], rows: Iterable[Sequence[Any]]) -> Any:
    from rich.table import Table

    out = Table(*columns, title=title, title_justify="left", header_style="bold")
    for row in rows:
        out.add_row(*[str(c) for c in row])
    return out


def figures_table(title: str, figures: Sequence[Figure]) -> Any:
    styled = {True: "[green]PASS[/]", False: "[red]FAIL[/]", None: "-"}
    return table(title, ("figure", "target", "measured", "pass?"),
                 [(f.figure, f.target, f.measured, styled[f.passed]) for f in figures])


def report(name: str, args: argparse.Namespace, figures: Sequence[Figure], data: Dict[str, Any],
           started: float, params: Dict[str, Any]) -> Path:
    """Print the headline table and write results/<name>.json."""
    out = console()
    out.print(figures_table(f"{name}{' (--quick)' if args.quick else ''}", figures))
    info = machine()
    info["other_load"] = other_load()
    note = busy_note(info["other_load"])
    if note:
        out.print(f"[yellow]{note}[/]")
    results = Path(args.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    payload = {"name": name, "quick": bool(args.quick), "started": started, "finished": time.time(),
               "duration_s": time.time() - started, "params": params, "machine": info, "note": note,
               "figures": [asdict(f) for f in figures], "data": data}
    path.write_text(json.dumps(payload, indent=2, default=float) + "\n")
    print(f"wrote {path}")
    return path


def parser(description: str) -> argparse.ArgumentParser:
    """Options every benchmark has: --quick, --results-dir, --keep."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes: a check that it works, not a measurement")
    p.add_argument("--results-dir", default=str(RESULTS), help="where <name>.json (and PNGs) go")
    p.add_argument("--keep", action="store_true", help="keep the server's temp state dir for inspection")
    return p


def main_wrapper(main: Callable[[Optional[List[str]]], int], sample: bool = True) -> None:
    """Run a benchmark's ``main`` with signal handling, counting the CPU other work takes meanwhile."""
    install_signal_handlers()
    if sample:
        sample_idle_machine()
    sys.exit(main(None))
