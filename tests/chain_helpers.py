"""Helpers for chain tests: drive the real CLI in subprocesses against a local test server."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Tuple

from job_chain.engine.jobs import LABEL_RUN

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_USER = pwd.getpwuid(os.getuid()).pw_name  # the examples keep data in MOUNT/$(id -un)
JOB_CHAIN = [sys.executable, "-m", "job_chain"]


def cli_env(server: Any, **env: str) -> Dict[str, str]:
    """The environment of a CLI process that talks to the test server (and no other AIHC)."""
    full_env = dict(os.environ, JOB_CHAIN_CREDENTIALS=server.credentials_file, **env)
    for name in ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AIHC_SESSION_TOKEN", "AK", "SK"):
        full_env.pop(name, None)
    return full_env


def cli(*args: str, server: Any, timeout: float = 120, check: bool = False, **env: str) -> subprocess.CompletedProcess:
    """Run the real job-chain CLI in a subprocess against the test server."""
    done = subprocess.run([*JOB_CHAIN, *args], capture_output=True, text=True, timeout=timeout,
                          env=cli_env(server, **env))
    if check:
        assert done.returncode == 0, done.stderr + done.stdout
    return done


class Ran(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def cli_here(*args: str, server: Any, check: bool = False, **env: str) -> Ran:
    """:func:`cli`, in this process (click's runner): the same commands and words, without a new
    Python each time — a test of many commands waited seconds for each on a busy machine."""
    from click.testing import CliRunner

    from job_chain.cli import cli as job_chain_cli

    unset = {name: None for name in ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AIHC_SESSION_TOKEN", "AK", "SK")}
    result = CliRunner().invoke(job_chain_cli, list(args),
                                env={**unset, "JOB_CHAIN_CREDENTIALS": server.credentials_file, **env})
    done = Ran(result.exit_code, result.stdout, result.stderr)
    if check:
        assert done.returncode == 0, done.stderr + done.stdout + repr(result.exception)
    return done


def make_chain(tmp_path: Path, steps: List[Dict[str, Any]], pool: str, **top: Any) -> Path:
    """Write a chain whose steps share ``tmp_path/shared``; their datasource mounts ``tmp_path``, which
    holds the chain file and its run record, as on AIHC a step's pods must see them."""
    shared = tmp_path / "shared"
    jobs = []
    for i, step in enumerate(steps):
        name = step.get("name", f"step-{i}")
        (tmp_path / f"{name}.sh").write_text(step["script"])
        job = {"name": name, "jobSpec": {"command": f"{name}.sh", "image": "local", "replicas": step.get("replicas", 1),
                                         "envs": [{"name": "SHARED", "value": str(shared)}]},
               "datasources": [{"type": "pfs", "name": "pfs-test", "mountPath": str(shared)},
                               {"type": "pfs", "name": "pfs-chain", "mountPath": str(tmp_path)}]}
        if "retries" in step:
            job["jobChain"] = {"retries": step["retries"]}
        jobs.append(job)
    path = tmp_path / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": pool, "jobs": jobs, **top}, indent=2))
    return path


def credentials_env(chain: Path, server: Any) -> Path:
    """Give every step of ``chain`` ``JOB_CHAIN_CREDENTIALS`` (the server's credentials file), as an
    ``--inline`` run needs on AIHC: its jobs have no run record, and a pod gets no keys otherwise."""
    data = json.loads(chain.read_text())
    for job in data["jobs"]:
        spec = job.setdefault("jobSpec", {})
        spec["envs"] = [*(spec.get("envs") or []), {"name": "JOB_CHAIN_CREDENTIALS", "value": server.credentials_file}]
    chain.write_text(json.dumps(data, indent=2))
    return chain


def run_jobs(server: Any, run_id: str = None) -> List[Dict[str, Any]]:
    jobs = list(server.client().iter_jobs(server.pool))
    if run_id is None:
        return jobs
    return [j for j in jobs if {x["key"]: x["value"] for x in j.get("labels", [])}.get(LABEL_RUN) == run_id]


def labels(job: Dict[str, Any]) -> Dict[str, str]:
    return {x["key"]: x["value"] for x in job.get("labels", [])}


def latest_run(chain: Path) -> str:
    """The newest run by when it started (run ids begun in the same second sort by their random part)."""
    from job_chain.record.records import RunRecords

    newest = RunRecords(str(chain)).latest_run()
    assert newest is not None, f"no run of {chain} is recorded"
    return str(newest["id"])


def wait_outcome(chain: Path, server: Any, wanted: str, timeout: float = 60) -> Dict[str, Any]:
    """``status --json`` (in this process: polling waited ~0.5 s of CPU a look for a new Python)
    until the run's outcome is ``wanted``; that status."""
    end = time.time() + timeout
    while True:
        done = cli_here("status", str(chain), "--json", server=server, check=True)
        status = json.loads(done.stdout)
        if status["outcome"] == wanted:
            return status
        assert time.time() < end, f"outcome {status['outcome']} != {wanted}: {status}"
        time.sleep(0.3)


def write_chain(directory: Path, pool: str, jobs: List[Dict[str, Any]], **top: Any) -> Path:
    """jobs: {"name", "script", optional jobChain settings, replicas, resources} sharing ``directory/shared``."""
    shared = directory / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    bodies = []
    for spec in jobs:
        (directory / f"{spec['name']}.sh").write_text(spec["script"])
        body: Dict[str, Any] = {"name": spec["name"], "jobSpec": {
            "command": f"{spec['name']}.sh", "image": "local", "envs": [{"name": "SHARED", "value": str(shared)}]},
            "datasources": [{"type": "pfs", "name": "pfs-test", "mountPath": str(directory)}]}
        body["jobSpec"].update({k: spec[k] for k in ("replicas", "resources") if k in spec})
        if spec.get("jobChain"):
            body["jobChain"] = spec["jobChain"]
        bodies.append(body)
    path = directory / "chain_info.json"
    path.write_text(json.dumps({"resourcePoolId": pool, "jobs": bodies, **top}, indent=2))
    return path


class Hooks:
    """A webhook receiver on loopback that keeps every POSTed JSON body."""

    def __init__(self) -> None:
        self.bodies: List[Dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/secret-token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


RECORDED_RUN = "20260101-000000-abcd"


def diamond_jobs(*extra: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The bodies of a → (b, c) → d (scripts ``true``), then ``extra`` jobs."""
    jobs: List[Dict[str, Any]] = [{"name": n, "jobSpec": {"command": "true", "image": "local"}} for n in "abcd"]
    for job, needs in zip(jobs, [None, ["a"], ["a"], ["b", "c"]]):
        if needs:
            job["jobChain"] = {"dependsOn": needs}
    return jobs + list(extra)


def recorded_run(path: Path, pool: str, jobs: List[Dict[str, Any]], *, endpoint: str = "http://127.0.0.1:9",
                 submitted: str = "", succeeded: str = "", run_id: str = RECORDED_RUN, server: Any = None,
                 **top: Any) -> Any:
    """(the run's frozen chain, its RunRecords) of a job-mode run of ``jobs`` recorded as ``run`` records
    one (run id :data:`RECORDED_RUN` unless given), with the steps named in ``submitted`` recorded as submitted in
    job mode (job ids ``job-<name>``) and those in ``succeeded`` as succeeded by their own tails. With a
    ``server``, the run runs there and its record carries the server's host and keys, as ``run`` saves them
    (the run's jobs find them nowhere else)."""
    from job_chain.record.records import RunRecords
    from job_chain.spec.frozen import freeze
    from job_chain.spec.loader import load_chain

    path.write_text(json.dumps({"resourcePoolId": pool, "jobs": jobs, **top}))
    records = RunRecords(str(path))
    digest = records.freeze(run_id, freeze(load_chain(str(path), local=True)), revision=1, reason="started")
    if server is not None:
        endpoint = server.url
        records.save_credentials(run_id, {"host": server.url, "ak": server.ak, "sk": server.sk})
    records.create_run(run_id, chain=str(path), startStep=0, mode="job", endpoint=endpoint, pool=pool,
                       revision=1, digest=digest, local=False)
    for name in submitted:
        records.record_submission(run_id, name, 1, f"job-{name}", name, mode="job")
    for name in succeeded:
        records.record_exit(run_id, name, 1, 0)
        records.record_succeeded(run_id, name, 1)
    return records.frozen(run_id), records


def age_run(run_dir: Path, seconds: float = 60.0) -> None:
    """Date a run's record back, as a run that ended a while ago (its summary's basis settles)."""
    import os
    import time

    when = time.time_ns() - int(seconds * 1e9)
    for path in [*run_dir.iterdir(), run_dir]:
        os.utime(path, ns=(when, when))


def memory_runs(directory: Path, count: int, exit_codes: Tuple[int, ...] = (0,), steps: Any = None,
                **top: Any) -> Tuple[Path, List[str], Any]:
    """``count`` finished runs of a one-step chain on the in-memory jobs API (each job ended with the
    next of ``exit_codes``): (the chain file, the run ids oldest first, the API)."""
    import time

    from memory_api import MemoryAPI

    from job_chain import ChainSession

    chain = write_chain(directory, "pool-local", steps or [{"name": "train", "script": "true"}], **top)
    ticks = iter(range(10 ** 9))
    api = MemoryAPI(clock=lambda: time.time() - 86400 + 60 * next(ticks))  # each job lasts minutes
    session = ChainSession.from_file(str(chain), client=api)
    ids = []
    for number in range(count):
        run = session.start()
        job_id = next(j for j, job in api.jobs.items() if job.status not in ("Succeeded", "Failed"))
        api.finish(job_id, exit_codes[number % len(exit_codes)])
        ids.append(run.run_id)
        time.sleep(0.002)  # distinct start times
    return chain, ids, api
