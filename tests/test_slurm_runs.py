"""A Slurm run's features on a real Slurm cluster (tests/slurm_cluster.py): a job Slurm ends
(TIMEOUT, a CANCELLED by someone else) retried by its watcher job, ``maxRunning``, notifications,
``status --watch`` and ``resume`` with changes by name. One cluster per module (two for this one:
the TIMEOUT test's slurmctld runs on a fast clock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from test_slurm_engine import VENV_BIN, job_names, max_overlap, slurm_cli


def write_chain(directory: Path, steps: List[Dict[str, Any]], **top: Any) -> Path:
    """A Slurm chain of ``steps`` (``name``, ``script``, optional ``jobChain`` and ``slurm``), each
    told ``$SHARED`` (a directory beside it)."""
    shared = directory / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    jobs = []
    for step in steps:
        (directory / f"{step['name']}.sh").write_text(step["script"] + "\n")
        job: Dict[str, Any] = {"name": step["name"], "jobSpec": {"command": f"{step['name']}.sh", "envs": [
            {"name": "SHARED", "value": str(shared)}]}}
        for key in ("jobChain", "slurm"):
            if key in step:
                job[key] = step[key]
        jobs.append(job)
    path = directory / "chain_info.json"
    path.write_text(json.dumps({"engine": "slurm", "jobs": jobs, **top}, indent=2))
    return path


def status(cluster: Any, chain: Path) -> Dict[str, Any]:
    done = slurm_cli(cluster, "status", str(chain), "--json")
    assert done.stdout, done.stderr
    return json.loads(done.stdout)


def wait_outcome(cluster: Any, chain: Path, timeout: float = 90, until: str = "") -> Dict[str, Any]:
    end = time.monotonic() + timeout
    while True:
        data = status(cluster, chain)
        if data["outcome"] == until or not until and data["outcome"] != "running":
            return data
        assert time.monotonic() < end, data
        time.sleep(0.3)


def attempts_of(data: Dict[str, Any], name: str) -> List[Any]:
    step = next(s for s in data["steps"] if s["name"] == name)
    return [(a["status"], (a.get("failure") or {}).get("class"), (a.get("failure") or {}).get("signature"))
            for a in step["attempts"]]


@pytest.fixture(scope="module")
def fast_slurm() -> Iterator[Any]:
    """A cluster whose slurmctld's clock runs 12 times the wall's (tests/slurm_cluster.py, ``clock``): a
    ``--time=1`` job is TIMEOUT after 5 to 7.5 s."""
    import slurm_cluster

    if os.geteuid() != 0:
        pytest.skip("SLURM TESTS SKIPPED: they start slurmctld/slurmd, which need root")
    why = slurm_cluster.require()
    if why:
        pytest.fail(why, pytrace=False)
    with tempfile.TemporaryDirectory(prefix="jc-slurm-fast-") as tmp, \
            slurm_cluster.SlurmCluster(Path(tmp), clock=12) as cluster:
        yield cluster


TIMES_OUT_ONCE = ('if [ ! -e "$SHARED/train.once" ]; then touch "$SHARED/train.once"; echo "training"\n'
                  '  mkdir -p "$SHARED/ckpt/iter_0000200"\n'
                  '  echo 200 > "$SHARED/ckpt/latest_checkpointed_iteration.txt"\n'
                  '  sleep 600\nfi\n'
                  'echo "$JOB_CHAIN_RESUME_ITERATION $JOB_CHAIN_RESUME_CHECKPOINT" > "$SHARED/resumed"; echo "trained"')


def test_a_step_slurm_ends_at_its_time_limit_is_retried_by_its_watcher(fast_slurm: Any, tmp_path: Path) -> None:
    chain = write_chain(tmp_path, [
        {"name": "train", "script": TIMES_OUT_ONCE, "slurm": {"time": "1"},
         "jobChain": {"retries": {"timeout": 1}, "checkpoint": {"dir": str(tmp_path / "shared" / "ckpt")}}},
        {"name": "after", "script": 'echo after >> "$SHARED/after.ran"'}])
    assert slurm_cli(fast_slurm, "run", str(chain)).returncode == 0
    data = wait_outcome(fast_slurm, chain, timeout=120)
    assert data["outcome"] == "succeeded", data["reason"]
    assert attempts_of(data, "train") == [("Failed", "timeout", "slurm-time-limit"), ("Succeeded", None, None)]
    first = next(s for s in data["steps"] if s["name"] == "train")["attempts"][0]
    assert "DUE TO TIME LIMIT" in first["failure"]["line"]  # slurmstepd's line in the job's log
    assert (tmp_path / "shared" / "after.ran").read_text() == "after\n"
    ckpt = tmp_path / "shared" / "ckpt"  # the retry resumed from the last complete checkpoint
    assert (tmp_path / "shared" / "resumed").read_text() == f"200 {ckpt}/iter_0000200\n"
    run = data["run"]
    listed = fast_slurm.run("squeue", "-h", "-t", "all", "-o", "%j %T").stdout.splitlines()
    states = dict(line.split() for line in listed if run in line)
    assert states[f"jc-{run}-train-1"] == "TIMEOUT" and states[f"watch-jc-{run}-train-1"] == "COMPLETED"
    # the attempts whose tail finished cancelled their watcher before it ever ran
    assert states[f"watch-jc-{run}-train-2"] == "CANCELLED" and states[f"watch-jc-{run}-after-1"] == "CANCELLED"
    assert {n: c for n, c in job_names(fast_slurm).items() if run in n} == {
        f"{w}jc-{run}-{s}": 1 for w in ("", "watch-") for s in ("train-1", "train-2", "after-1")}


HICCUP_IN_WATCHERS = """#!/bin/bash
# slurmctld not answering the first time a watcher asks for its job's verdict; the real scontrol otherwise
if [ -n "$JOB_CHAIN_SLURM_WATCHED" ] && [ "$2 $3" = "show job" ] && mkdir "$(dirname "$0")/hiccup" 2>/dev/null; then
  echo "scontrol: error: Unable to contact slurm controller (connect failure)" >&2; exit 1
fi
exec /usr/bin/scontrol "$@"
"""


def test_a_job_cancelled_outside_job_chain_is_retried_for_infra_by_its_watcher(slurm: Any, tmp_path: Path) -> None:
    """... and the watcher asks for Slurm's verdict through slurmctld's hiccups, as every call of an
    advance (engine/deadline.submit_with_deadline): one it meets does not leave the run without its retry."""
    chain = write_chain(tmp_path, [
        {"name": "work", "script": 'if [ ! -e "$SHARED/once" ]; then touch "$SHARED/once"; sleep 120; fi; echo done',
         "jobChain": {"retries": {"infra": 1}}}])
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text(HICCUP_IN_WATCHERS)
    (fake / "scontrol").chmod(0o755)
    env = slurm.env()
    env["PATH"] = os.pathsep.join((VENV_BIN, str(fake), env.get("PATH", "")))  # the jobs inherit it
    assert subprocess.run([sys.executable, "-m", "job_chain", "run", str(chain)], env=env, capture_output=True,
                          text=True, timeout=120).returncode == 0
    run = status(slurm, chain)["run"]
    end = time.monotonic() + 30
    while not (tmp_path / "shared" / "once").exists():  # its script runs
        assert time.monotonic() < end
        time.sleep(0.1)
    slurm.run("scancel", f"--name=jc-{run}-work-1")  # an administrator's scancel, not job-chain's stop
    data = wait_outcome(slurm, chain, until="succeeded")
    assert (fake / "hiccup").is_dir()  # the watcher met the hiccup
    assert data["outcome"] == "succeeded", data["reason"]
    assert attempts_of(data, "work") == [("Failed", "infra", "slurm-cancelled"), ("Succeeded", None, None)]
    # its watcher advancing again (a second one, or by hand) changes nothing: every create is once
    job = slurm.run("squeue", "-h", "-t", "all", f"--name=jc-{run}-work-1", "-o", "%i").stdout.strip()
    env = slurm.env()
    env.update(PATH=VENV_BIN + os.pathsep + env.get("PATH", ""), JOB_CHAIN_ENGINE="slurm", JOB_CHAIN_SLURM_WATCHED=job,
               JOB_CHAIN_SLURM_DIR=str(tmp_path / "chain_info.json.runs" / ".slurm"))
    again = subprocess.run([sys.executable, "-m", "job_chain.hop", "--run", run, "--step", "work", "--attempt", "1",
                            "--ended", str(chain)], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    assert {n: c for n, c in job_names(slurm).items() if n.startswith(f"jc-{run}-")} == {
        f"jc-{run}-work-1": 1, f"jc-{run}-work-2": 1}


def test_max_running_caps_a_slurm_run_and_status_watch_follows_it_to_its_end(slurm: Any, tmp_path: Path) -> None:
    timed = 'echo "start $(date +%s.%N)" >> "$SHARED/times.$JOB_CHAIN_STEP"; sleep 1; ' \
            'echo "end $(date +%s.%N)" >> "$SHARED/times.$JOB_CHAIN_STEP"'
    chain = write_chain(tmp_path, [
        {"name": "prep", "script": "echo prep"},
        {"name": "sweep", "script": timed, "jobChain": {"dependsOn": ["prep"], "matrix": {"i": [1, 2, 3, 4]}}},
        {"name": "report", "script": timed, "jobChain": {"dependsOn": ["prep"]}}], maxRunning=2)
    assert slurm_cli(slurm, "run", str(chain)).returncode == 0
    env = slurm.env()
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    watch = subprocess.Popen([sys.executable, "-m", "job_chain", "status", str(chain), "--watch"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = watch.communicate(timeout=120)  # it ends when the run ends
    finally:
        watch.kill()
        watch.wait()
    run = status(slurm, chain)["run"]
    assert watch.returncode == 0, err
    assert f"run {run}: succeeded" in out and "report: Succeeded" in out, out
    assert max_overlap(tmp_path / "shared", "") == 2  # five 1 s steps after prep, never more than two at once


@pytest.fixture
def hooks() -> Iterator[Any]:
    from chain_helpers import Hooks

    receiver = Hooks()
    yield receiver
    receiver.server.shutdown()


def test_notifications_and_resume_by_name_on_slurm(slurm: Any, tmp_path: Path, hooks: Any) -> None:
    chain = write_chain(tmp_path, [
        {"name": "a", "script": 'echo "on $MASTER_ADDR rank $RANK of $WORLD_SIZE" > "$SHARED/a.env"'},
        {"name": "b", "script": "echo b-broke >&2; exit 3"},
        {"name": "c", "script": 'echo c >> "$SHARED/c.ran"'},
    ], notify=[{"url": hooks.url, "on": ["failed", "stepFailed", "succeeded"], "format": "json"}])
    assert slurm_cli(slurm, "run", str(chain)).returncode == 0
    data = wait_outcome(slurm, chain)
    run = data["run"]
    assert data["outcome"] == "failed" and "step b failed with exit code 3" in data["reason"], data["reason"]
    assert sorted(b["event"] for b in hooks.bodies) == ["failed", "stepFailed"]
    step_failed = next(b for b in hooks.bodies if b["event"] == "stepFailed")
    assert (step_failed["run"], step_failed["step"], step_failed["exitCode"]) == (run, "b", 3)

    (tmp_path / "b.sh").write_text("echo b-fixed\n")
    preview = slurm_cli(slurm, "resume", str(chain), "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert "~ b: changed (script content (b.sh))" in preview.stdout and "would submit: b (attempt 2)" in preview.stdout
    resumed = slurm_cli(slurm, "resume", str(chain))
    assert resumed.returncode == 0, resumed.stderr
    final = wait_outcome(slurm, chain)
    assert final["outcome"] == "succeeded" and final["revision"] == 2, final["reason"]
    assert (tmp_path / "shared" / "c.ran").read_text() == "c\n"
    assert (tmp_path / "shared" / "a.env").read_text() in ("on jc1 rank 0 of 1\n", "on jc2 rank 0 of 1\n")
    assert sorted(b["event"] for b in hooks.bodies) == ["failed", "stepFailed", "succeeded"]
    assert {n: c for n, c in job_names(slurm).items() if n.startswith(f"jc-{run}-")} == {
        f"jc-{run}-{s}": 1 for s in ("a-1", "b-1", "b-2-r2", "c-1")}  # b changed: its key carries the revision
