"""The Slurm engine (job_chain/slurm/) on a real Slurm cluster (tests/slurm_cluster.py): the chain of
issue 32 (a split, a join, a 3-point matrix under maxParallel 2, an NCCL timeout retried for infra,
an output passed, an exit handler) with every step once; stop; exactly-once drills; and the chain
file's rules for a Slurm chain, in-process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import pytest
from chain_helpers import cli_here

from job_chain.spec.loader import ChainFileError, load_chain

VENV_BIN = os.path.dirname(sys.executable)


def slurm_cli(slurm: Any, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real CLI, with the cluster's SLURM_CONF and this venv's python3 first on PATH (what the
    jobs inherit: their tail runs ``python3 -m job_chain.hop``)."""
    env = slurm.env()
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    return subprocess.run([sys.executable, "-m", "job_chain", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def job_names(slurm: Any) -> Counter:
    return Counter(slurm.run("squeue", "-h", "-t", "all", "-o", "%j").stdout.split())


TIMED = 'echo "start $(date +%s.%N)" >> "$SHARED/times.$JOB_CHAIN_STEP"\n{body}\n' \
        'echo "end $(date +%s.%N)" >> "$SHARED/times.$JOB_CHAIN_STEP"\n'
NCCL = ("[rank0]:[E1206 18:44:12.715 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7753, OpType=ALLREDUCE) ran for 600013 milliseconds before timing out.")


def issue_chain(directory: Path, engine: str, pool: str = "pool-local") -> Path:
    """The chain of issue 32's 'done means', for either engine (the AIHC-only fields are told, not
    refused, on Slurm)."""
    directory.mkdir(parents=True, exist_ok=True)
    shared = directory / "shared"
    shared.mkdir()
    steps: List[Dict[str, Any]] = [
        {"name": "prep", "script": 'echo "data=$SHARED/data-v1" >> "$JOB_CHAIN_OUTPUTS"'},
        {"name": "flaky", "script": f'if [ ! -e "$SHARED/flaky.once" ]; then touch "$SHARED/flaky.once"; '
                                    f'echo \'{NCCL}\'; exit 1; fi; echo fine',
         "jobChain": {"dependsOn": ["prep"], "retries": {"infra": 1}}},
        {"name": "sweep", "script": TIMED.format(body="sleep 1"),
         "jobChain": {"dependsOn": ["prep"], "matrix": {"i": [1, 2, 3]}, "maxParallel": 2}},
        {"name": "join", "script": 'echo "joined $DATA"; echo "joined $DATA" > "$SHARED/join.out"',
         "envs": [{"name": "DATA", "value": "${steps.prep.outputs.data}"}],
         "jobChain": {"dependsOn": ["flaky", "sweep"]}},
        {"name": "always", "script": 'echo "$JOB_CHAIN_OUTCOME" >> "$SHARED/handled"', "jobChain": {"runOn": "always"}},
    ]
    jobs = []
    for step in steps:
        (directory / f"{step['name']}.sh").write_text(step["script"] + "\n")
        job = {"name": step["name"], "queue": "default",
               "jobSpec": {"command": f"{step['name']}.sh", "image": "local", "replicas": 1,
                           "envs": [{"name": "SHARED", "value": str(shared)}] + step.get("envs", [])},
               # the folder that holds the chain (and its record) and shared/, as on AIHC every step must see it
               "datasources": [{"type": "pfs", "name": "pfs-test", "mountPath": str(directory)}]}
        if "jobChain" in step:
            job["jobChain"] = step["jobChain"]
        jobs.append(job)
    path = directory / "chain_info.json"
    path.write_text(json.dumps({"engine": engine, "resourcePoolId": pool, "slurm": {"time": "10:00"},
                                "jobs": jobs}, indent=2))
    return path


def max_overlap(shared: Path, prefix: str) -> int:
    spans = []
    for f in shared.glob(f"times.{prefix}*"):
        words = f.read_text().split()
        spans.append((float(words[1]), float(words[3])))
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = running = 0
    for _, d in events:
        running += d
        most = max(most, running)
    return most


def test_the_issue_chain_runs_each_step_once_on_slurm(slurm: Any, tmp_path: Path) -> None:
    chain = issue_chain(tmp_path / "s", "slurm")
    started = slurm_cli(slurm, "run", str(chain), "--follow", timeout=180)
    assert started.returncode == 0, started.stderr + started.stdout
    data = json.loads(slurm_cli(slurm, "status", str(chain), "--json").stdout)
    assert data["outcome"] == "succeeded", data["reason"]
    run = data["run"]
    names = job_names(slurm)
    points = [f"sweep-i-{i}" for i in (1, 2, 3)]
    mine = {n: c for n, c in names.items() if n.startswith(f"jc-{run}-")}
    assert mine == {f"jc-{run}-{s}-{a}": 1 for s, a in [("prep", 1), ("flaky", 1), ("flaky", 2), ("join", 1),
                                                         ("always", 1)] + [(p, 1) for p in points]}
    flaky = next(s for s in data["steps"] if s["name"] == "flaky")
    assert [(a["status"], (a.get("failure") or {}).get("class")) for a in flaky["attempts"]] == [
        ("Failed", "infra"), ("Succeeded", None)]
    shared = tmp_path / "s" / "shared"
    assert (shared / "join.out").read_text() == f"joined {shared}/data-v1\n"
    assert (shared / "handled").read_text() == "succeeded\n"
    assert max_overlap(shared, "sweep") == 2
    logs = slurm_cli(slurm, "logs", str(chain), "--step", "join")
    assert logs.returncode == 0 and f"joined {shared}/data-v1" in logs.stdout, logs.stderr


def test_the_same_chain_with_engine_aihc_runs_on_the_local_server(tmp_path: Path, shared_server: Any) -> None:
    chain = issue_chain(tmp_path / "l", "aihc", shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    data = json.loads(cli_here("status", str(chain), "--json", server=shared_server, check=True).stdout)
    assert data["outcome"] == "succeeded"
    flaky = next(s for s in data["steps"] if s["name"] == "flaky")
    assert [(a.get("failure") or {}).get("class") for a in flaky["attempts"]] == ["infra", None]


def test_stop_cancels_the_running_job_and_nothing_after_it_starts(slurm: Any, tmp_path: Path) -> None:
    (tmp_path / "long.sh").write_text("echo started-long\nsleep 120\n")
    (tmp_path / "after.sh").write_text("touch after.ran\n")
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"engine": "slurm", "jobs": [
        {"name": "long", "jobSpec": {"command": "long.sh"}},
        {"name": "after", "jobSpec": {"command": "after.sh"}}]}))
    assert slurm_cli(slurm, "run", str(chain)).returncode == 0
    run = json.loads(slurm_cli(slurm, "status", str(chain), "--json").stdout)["run"]
    end = time.monotonic() + 30
    while "RUNNING" not in slurm.run("squeue", "-h", "-t", "all", f"--name=jc-{run}-long-1", "-o", "%T").stdout:
        assert time.monotonic() < end
        time.sleep(0.1)
    env = slurm.env()
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    follow = subprocess.Popen([sys.executable, "-m", "job_chain", "logs", str(chain), "--step", "long", "--follow"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    stopped = slurm_cli(slurm, "stop", str(chain))
    assert stopped.returncode == 0, stopped.stderr
    end = time.monotonic() + 30
    while "CANCELLED" not in slurm.run("squeue", "-h", "-t", "all", f"--name=jc-{run}-long-1", "-o", "%T").stdout:
        assert time.monotonic() < end
        time.sleep(0.1)
    time.sleep(1.5)  # what a late hop would have submitted by now
    assert not [n for n in job_names(slurm) if n.startswith(f"jc-{run}-after")]
    assert not (tmp_path / "after.ran").exists()
    data = json.loads(slurm_cli(slurm, "status", str(chain), "--json").stdout)
    assert data["outcome"] == "stopped" and data["steps"][0]["status"] == "Stopped"
    out, err = follow.communicate(timeout=60)  # --follow ends when the job ended
    assert follow.returncode == 0 and "started-long" in out, err


def body(command: str = "true") -> Dict[str, Any]:
    return {"name": "x", "jobSpec": {"command": command, "replicas": 1}, "labels": []}


def test_creates_of_one_key_at_once_make_one_job(slurm: Any, tmp_path: Path, monkeypatch: Any) -> None:
    from job_chain.slurm.engine import SlurmEngine

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    found: List[str] = []
    threads = [threading.Thread(target=lambda: found.append(SlurmEngine(str(tmp_path / ".slurm")).create(
        "p", body(), "jc-drill-once-1")[0])) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(found) == 4 and len(set(found)) == 1
    assert job_names(slurm)["jc-drill-once-1"] == 1


def test_a_key_nobody_ran_sbatch_for_costs_one_slurm_command(slurm: Any, tmp_path: Path, monkeypatch: Any) -> None:
    import job_chain.slurm.engine as slurm_engine

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    ran: List[str] = []
    real = slurm_engine.run_slurm

    def counted(argv: List[str], **kw: Any) -> str:
        ran.append(argv[0])
        return real(argv, **kw)

    monkeypatch.setattr(slurm_engine, "run_slurm", counted)
    engine = slurm_engine.SlurmEngine(str(tmp_path / ".slurm"))
    first, _ = engine.create("p", body(), "jc-drill-fresh-1")  # (job id, job name)
    assert ran == ["sbatch"]  # no squeue, no sacct: no creator ran sbatch for this key before
    assert engine.create("p", body(), "jc-drill-fresh-1")[0] == first and ran == ["sbatch"]  # its key file


REFUSING_WATCHERS = """#!/bin/bash
# a site whose job_submit rules refuse a job without GPUs in this partition: the watcher
case " $* " in *afternotok*) echo "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy" >&2
                             exit 1;; esac
exec /usr/bin/sbatch "$@"
"""


def sbatch_first_on_path(slurm: Any, tmp_path: Path, monkeypatch: Any, script: str) -> None:
    """``script`` as the ``sbatch`` this process finds first (it passes the rest to the real one)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "sbatch").write_text(script)
    (fake / "sbatch").chmod(0o755)
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")


def test_a_watcher_slurm_refuses_is_said_and_the_step_still_runs(slurm: Any, tmp_path: Path, monkeypatch: Any,
                                                                  capsys: Any) -> None:
    from job_chain.slurm.engine import SlurmEngine

    sbatch_first_on_path(slurm, tmp_path, monkeypatch, REFUSING_WATCHERS)
    watched = dict(body(), slurmEnded="true")
    created, _ = SlurmEngine(str(tmp_path / ".slurm")).create("p", watched, "jc-drill-unwatched-1")
    assert slurm.run("squeue", "-h", "-t", "all", "--name=jc-drill-unwatched-1", "-o", "%i").stdout.split() == [
        created]
    said = capsys.readouterr().err
    assert f"job {created} has no watcher (sbatch: " in said and "Job violates accounting/QOS policy" in said
    assert not (tmp_path / ".slurm" / "watchers" / created).exists()


KILLED = """
import os, sys
import job_chain.slurm.engine as e
real = e.run_slurm
def run_slurm(argv, **kw):
    out = real(argv, **kw)
    if argv[0] == "sbatch":
        os.kill(os.getpid(), 9)  # between sbatch and the key's file
    return out
e.run_slurm = run_slurm
e.SlurmEngine(sys.argv[1]).create("p", {"name": "x", "jobSpec": {"command": "true"}}, sys.argv[2])
"""


def test_a_creator_killed_between_sbatch_and_its_record_is_found_by_the_next(slurm: Any, tmp_path: Path,
                                                                            monkeypatch: Any) -> None:
    from job_chain.slurm.engine import SlurmEngine

    state = str(tmp_path / ".slurm")
    killed = subprocess.run([sys.executable, "-c", KILLED, state, "jc-drill-killed-1"], env=slurm.env(),
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9, killed.stderr
    assert not (tmp_path / ".slurm" / "keys" / "jc-drill-killed-1").exists()
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    again, _ = SlurmEngine(state).create("p", body(), "jc-drill-killed-1")
    assert job_names(slurm)["jc-drill-killed-1"] == 1
    assert slurm.run("squeue", "-h", "-t", "all", "--name=jc-drill-killed-1", "-o", "%i").stdout.split() == [again]


# -- the chain file of a Slurm chain (in-process) ---------------------------------------------------------

def write(tmp_path: Path, data: Dict[str, Any]) -> str:
    (tmp_path / "a.sh").write_text("true\n")
    path = tmp_path / "chain_info.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_a_slurm_chain_needs_no_pool_and_tells_what_is_aihc_only(tmp_path: Path) -> None:
    chain = load_chain(write(tmp_path, {"engine": "slurm", "slurm": {"partition": "gpu", "exclusive": True},
                                        "jobs": [{"name": "a", "queue": "q1",
                                                  "jobSpec": {"command": "a.sh", "image": "img"},
                                                  "slurm": {"time": "1:00:00"}}]}))
    assert chain.engine == "slurm" and chain.slurm == {"partition": "gpu", "exclusive": True}
    assert "jobs[0].jobSpec.image: AIHC only, ignored on Slurm" in " ".join(chain.warnings)
    assert "jobs[0].queue: AIHC only" in " ".join(chain.warnings)
    from job_chain.submit.request import build_request

    request = build_request(chain, "a", "r1", 1)
    assert request["slurm"] == {"partition": "gpu", "exclusive": True, "time": "1:00:00"}
    from job_chain.slurm.options import sbatch_words

    assert sbatch_words(request["slurm"]) == ["--partition=gpu", "--exclusive", "--time=1:00:00"]


def test_an_aihc_chain_sends_no_slurm_section_and_still_needs_its_pool(tmp_path: Path) -> None:
    chain = load_chain(write(tmp_path, {"resourcePoolId": "cce-1", "slurm": {"partition": "gpu"}, "jobs": [
        {"name": "a", "jobSpec": {"command": "a.sh", "image": "img"}, "slurm": {"time": "1:00"}}]}))
    from job_chain.submit.request import build_request

    assert "slurm" not in build_request(chain, "a", "r1", 1)
    with pytest.raises(ChainFileError) as caught:
        load_chain(write(tmp_path, {"jobs": [{"name": "a", "jobSpec": {"command": "a.sh", "image": "img"}}]}))
    assert "resourcePoolId: required" in str(caught.value)


def test_slurm_options_job_chain_sets_and_bad_engines_are_refused_at_their_path(tmp_path: Path) -> None:
    with pytest.raises(ChainFileError) as caught:
        load_chain(write(tmp_path, {"engine": "k8s", "slurm": {"time": 1.5, "job-name": "x"}, "jobs": [
            {"name": "a", "jobSpec": {"command": "a.sh"}, "slurm": {"nodes": 2, "Bad Key": "x"}}]}))
    problems = caught.value.problems
    assert any(p.startswith('engine: must be "aihc"') for p in problems)
    assert any(p.startswith("slurm.time: must be a string, a number or true") for p in problems)
    assert any(p.startswith("slurm.job-name: is set by job-chain") for p in problems)
    assert any(p.startswith("jobs[0].slurm.nodes: is set by job-chain: use jobSpec.replicas") for p in problems)
    assert any(p.startswith("jobs[0].slurm.Bad Key: must be an sbatch long option") for p in problems)


def test_slurm_words_become_job_chain_s_and_its_verdict_is_classified() -> None:
    from job_chain.failures.classify import classify
    from job_chain.slurm.engine import SlurmEngine, comment_of, parse_show

    line = ("JobId=42 JobName=jc-r1-train-2 UserId=root(0) JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 "
            "SubmitTime=2026-11-29T02:46:10 StartTime=2026-11-29T02:46:12 EndTime=2026-11-29T03:46:12 "
            f"NumNodes=2 Comment={comment_of('r 1', 'train', '2')} StdOut=/x y/out")
    show = parse_show(line)
    assert show["StdOut"] == "/x y/out" and show["JobState"] == "TIMEOUT"
    job = SlurmEngine("/nonexistent")._job_of(show, pods=False)
    assert (job.status, job.run_id, job.step, job.attempt, job.exit_code) == ("Failed", "r 1", "train", 2, 0)
    assert job.finished is not None and job.finished - job.running == 3600
    text = "slurmstepd: error: *** JOB 42 ON jc1 CANCELLED AT 2026-11-29T03:46:12 DUE TO TIME LIMIT ***\n"
    assert (classify([("42-0", text)]).cls, classify([("42-0", text)]).signature) == ("timeout", "slurm-time-limit")


def test_a_job_slurm_ended_whose_node_logged_nothing_is_classified_by_slurm_s_verdict() -> None:
    from job_chain.engine.jobs import Event
    from job_chain.failures.classify import VERDICT_EVENTS, classify, verdict_cause
    from job_chain.slurm.engine import SAID, event_kind

    ended = ("TIMEOUT", "NODE_FAIL", "BOOT_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "CANCELLED")
    assert set(VERDICT_EVENTS) == {event_kind(state) for state in ended}
    assert classify([("7-0", "step 12 of 100\n")]).cls == "unknown"  # the node said nothing of its end
    found = verdict_cause([Event(event_kind("NODE_FAIL"), "Warning", SAID["NODE_FAIL"] + "; exit code 0:0", 1.0)])
    assert found is not None and (found.cls, found.signature) == ("infra", "slurm-node-fail")
    assert "NODE_FAIL" in found.line
    assert verdict_cause([Event("JobPending", "Normal", "waiting", None)]) is None


def test_a_failed_slurm_job_whose_script_ran_is_never_the_platform_s() -> None:
    """Slurm's FAILED: the script ran and exited non-zero (its exit kept, or Slurm's reason says so) is the
    script's failure — ``unknown`` by its exit code when its log is empty, never ``platform``; only a job
    Slurm could not launch is the platform's, with Slurm's reason."""
    from job_chain.failures.classify import classify, platform_cause, verdict_cause
    from job_chain.slurm.engine import events_of, parse_show

    def cause(line: str, ran: bool) -> str:
        events = events_of(parse_show(line), ran)
        reason = next((e.message for e in events if e.kind == "JobFailed"), "")  # as status/causes._platform
        found = verdict_cause(events) or platform_cause(events, reason, logged=False) or classify([("7-0", "")], (), 3)
        return found.cls

    ran = "JobId=7 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 EndTime=2026-11-29T03:46:12"
    assert cause(ran, ran=True) == cause(ran, ran=False) == "unknown"
    assert cause(ran.replace("NonZeroExitCode", "RaisedSignal:9(Killed)"), ran=False) == "unknown"
    never = "JobId=7 JobState=FAILED Reason=JobLaunchFailure ExitCode=1:0 EndTime=2026-11-29T03:46:12"
    assert cause(never, ran=False) == "platform"
    assert cause(never, ran=True) == "unknown"  # a node kept its script's exit: it ran
    (told,) = events_of(parse_show(never), False)
    assert "JobLaunchFailure" in told.message


@pytest.fixture(scope="module")
def silent_failure(slurm: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(the engine's directory, the id) of a job whose script exited 3 and wrote nothing, after it ended
    (no tail, no watcher: what a watcher or a look finds of a job whose tail did not finish)."""
    from job_chain.engine.states import TERMINAL
    from job_chain.slurm.engine import SlurmEngine

    state = str(tmp_path_factory.mktemp("silent") / ".slurm")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", str(slurm.conf))
        engine = SlurmEngine(state)
        job_id = engine.create("p", body("exit 3"), "jc-drill-silent-1")[0]
        deadline = time.monotonic() + 60
        while engine.job("p", job_id).status not in TERMINAL:
            assert time.monotonic() < deadline, "the job did not end"
            time.sleep(0.2)
    return state, job_id


def test_a_script_that_failed_silently_on_slurm_is_classed_by_its_exit_not_the_platform(
        slurm: Any, silent_failure: Any, monkeypatch: Any) -> None:
    """A real FAILED job (its script exited 3 and wrote nothing, no tail kept a cause): what a watcher or a
    status look finds is ``unknown`` with the exit code, not ``platform``."""
    from job_chain.slurm.engine import SlurmEngine
    from job_chain.spec.model import Step
    from job_chain.status.causes import classify_job

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    engine, job_id = SlurmEngine(silent_failure[0]), silent_failure[1]
    step = Step(0, {"name": "silent", "jobSpec": {"command": "exit 3"}}, "exit 3", "inline")
    found = classify_job(engine, "p", job_id, step, 3)
    assert (found.cls, found.signature) == ("unknown", ""), found


FORGETTING_SCONTROL = """#!/bin/bash
# Slurm past MinJobAge: scontrol no longer shows the job (its words), the rest is the real scontrol
if [ "$2 $3" = "show job" ]; then echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; fi
exec /usr/bin/scontrol "$@"
"""


def test_the_verdict_of_a_job_slurm_forgot_is_what_its_nodes_left(slurm: Any, silent_failure: Any, tmp_path: Path,
                                                                   monkeypatch: Any) -> None:
    """A watcher that waited in the queue past MinJobAge asks Slurm of a job it no longer shows: its
    verdict is read as ``job`` reads it (sacct, else the exit codes its nodes kept), not an error."""
    from job_chain.slurm.engine import SlurmEngine

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    engine, job_id = SlurmEngine(silent_failure[0]), silent_failure[1]
    assert engine.verdict(job_id) == ("FAILED", 3)
    scontrol_first_on_path(tmp_path, monkeypatch, FORGETTING_SCONTROL)
    assert engine.verdict(job_id) == ("FAILED", 3)  # from the exit code its node kept
    assert engine.job("p", job_id).exit_code == 3


def scontrol_first_on_path(tmp_path: Path, monkeypatch: Any, script: str) -> Path:
    """``script`` as the ``scontrol`` this process (and the jobs it submits) finds first."""
    fake = tmp_path / "scontrol-bin"
    fake.mkdir()
    (fake / "scontrol").write_text(script)
    (fake / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    return fake


def test_a_slurm_chain_is_never_run_inline(tmp_path: Path) -> None:
    from job_chain.errors import UsageError
    from job_chain.session.plan import check_mode

    chain = load_chain(write(tmp_path, {"engine": "slurm", "jobs": [{"name": "a", "jobSpec": {"command": "a.sh"}}]}))
    with pytest.raises(UsageError, match="without --inline"):
        check_mode(chain, "inline")


LOSING_SBATCH = """#!/bin/bash
# the real sbatch submits, then its answer is lost (what a client sees when slurmctld is slow)
/usr/bin/sbatch "$@" > /dev/null || exit $?
echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation" >&2
exit 1
"""


def test_an_sbatch_whose_answer_is_lost_is_retried_into_the_same_job(slurm: Any, tmp_path: Path,
                                                                     monkeypatch: Any) -> None:
    from job_chain.engine.deadline import submit_with_deadline
    from job_chain.slurm.engine import SlurmEngine

    sbatch_first_on_path(slurm, tmp_path, monkeypatch, LOSING_SBATCH)
    engine = SlurmEngine(str(tmp_path / ".slurm"))
    pauses: List[float] = []
    created, _ = submit_with_deadline(lambda: engine.create("p", body(), "jc-drill-lost-1"), 60, sleep=pauses.append)
    assert pauses == [1.0]  # the lost answer was retryable, and the retry found the job by its name
    assert slurm.run("squeue", "-h", "-t", "all", "--name=jc-drill-lost-1", "-o", "%i").stdout.split() == [created]


def test_two_replicas_run_on_two_nodes_and_the_next_step_starts_after_both(slurm: Any, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (tmp_path / "wide.sh").write_text('if [ "$RANK" = 1 ]; then sleep 1.5; fi\n'
                                      'echo "$SLURMD_NODENAME $(date +%s.%N)" > "$SHARED/end.$RANK"\n')
    (tmp_path / "next.sh").write_text('date +%s.%N > "$SHARED/next.start"\n')
    env = [{"name": "SHARED", "value": str(shared)}]
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"engine": "slurm", "jobs": [
        {"name": "wide", "jobSpec": {"command": "wide.sh", "replicas": 2, "envs": env,
                                     "resources": [{"name": "nvidia.com/gpu", "quantity": 1}]}},
        {"name": "next", "jobSpec": {"command": "next.sh", "envs": env}}]}))
    done = slurm_cli(slurm, "run", str(chain), "--follow")
    assert done.returncode == 0, done.stderr + done.stdout
    ends = [(shared / f"end.{rank}").read_text().split() for rank in (0, 1)]
    assert {node for node, _ in ends} == {"jc1", "jc2"}
    assert float((shared / "next.start").read_text()) > max(float(t) for _, t in ends)
    data = json.loads(slurm_cli(slurm, "status", str(chain), "--json").stdout)
    # 2 nodes x 1 GPU x its running time (Slurm tells times to the second: a 1.5 s job runs 1 or 2 s)
    assert 2 * 1 / 3600 <= data["steps"][0]["gpuHours"] <= 2 * 15 / 3600
    assert data["steps"][1]["gpuHours"] == 0.0


def test_validate_says_a_slurm_chain_runs_on_slurm(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from job_chain.cli import cli as job_chain_cli

    path = write(tmp_path, {"engine": "slurm", "jobs": [{"name": "a", "jobSpec": {"command": "a.sh", "image": "i"}}]})
    done = CliRunner().invoke(job_chain_cli, ["validate", path])
    assert done.exit_code == 0 and "OK, 1 steps, on Slurm" in done.output, done.output
    assert "jobs[0].jobSpec.image: AIHC only, ignored on Slurm" in done.output


def test_chain_session_runs_a_slurm_chain(slurm: Any, tmp_path: Path, monkeypatch: Any) -> None:
    from job_chain import ChainSession
    from job_chain.status.types import Outcome

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))  # the jobs inherit this environment from sbatch
    monkeypatch.setenv("PATH", VENV_BIN + os.pathsep + os.environ["PATH"])
    (tmp_path / "one.sh").write_text('echo "v=1" >> "$JOB_CHAIN_OUTPUTS"\n')
    (tmp_path / "two.sh").write_text('echo "got $V"\n')
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"engine": "slurm", "jobs": [
        {"name": "one", "jobSpec": {"command": "one.sh"}},
        {"name": "two", "jobSpec": {"command": "two.sh",
                                    "envs": [{"name": "V", "value": "${steps.one.outputs.v}"}]}}]}))
    session = ChainSession.from_file(str(chain))
    run = session.start()
    final = session.wait(run.run_id, timeout=120, interval=0.3)
    assert final.outcome is Outcome.SUCCEEDED, final.reason
    assert final.as_json()["endpoint"].startswith("slurm:")
    assert "got 1\n" in session.log(run.run_id, "two") and "got 1" in session.log(run.run_id, "two", tail=5)
    import requests
    from ui_helpers import Console

    from job_chain.ui.catalog import chain_id

    console = Console([str(tmp_path)])  # the web console shows the Slurm run, its steps and a step's log
    try:
        page = requests.get(f"{console.url}/run/{chain_id(str(chain))}/{run.run_id}", timeout=60)
        assert page.status_code == 200 and 'data-outcome="succeeded"' in page.text and "slurm:" in page.text
    finally:
        console.close()
