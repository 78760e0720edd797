"""Issue 30 item 7: AIHC's own fault tolerance composes with job-chain's retries.

The local server emulates AIHC's restarts and hang detection and the job events that say so
(real server, real processes; a minute of hang detection lasts ``--hang-minute``, here a fraction
of a second, so nothing waits minutes); a chain run on it shows "restarted by AIHC ×N" on the
attempt and counts a hang AIHC found as ``hang``; the budget rule (job-chain's retries start
where AIHC's ended) is tested in-process.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from conftest import POOL, LocalServer, job_body

HANG_MINUTE = 0.4  # seconds a minute of hang detection lasts on this test's server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    started = LocalServer(tmp_path_factory.mktemp("tolerance"), stop_grace=0.5,
                          extra_args=["--hang-minute", str(HANG_MINUTE)])
    started.start()
    yield started
    started.cleanup()


def reasons(server: LocalServer, job_id: str) -> List[str]:
    """The job's event reasons, oldest first."""
    return [e["reason"] for e in reversed(server.client().job_events(POOL, job_id)["events"])]


def messages(server: LocalServer, job_id: str, reason: str) -> List[str]:
    return [e["message"] for e in server.client().job_events(POOL, job_id)["events"] if e["reason"] == reason]


# -- the local server: restarts and hang detection, with their events --------------------------------
def test_a_silent_job_is_found_hung_restarted_then_failed(server: LocalServer) -> None:
    """Hang detection (v1 faultToleranceConfig): silent for the timeout -> HangDetected, a restart
    while fault tolerance allows (its event says why), then the job fails as hung."""
    body = job_body("hangs", "echo started; sleep 60", faultTolerance=True,
                    faultToleranceConfig={"enabledHangDetection": True, "hangDetectionTimeoutMinutes": 1,
                                          "faultToleranceLimit": 1})
    job_id = server.client().create_job(POOL, body)["jobId"]
    job = server.wait_status(job_id, "Failed", timeout=20)
    assert job["podList"]["pods"][0]["restartCount"] == 1
    seen = reasons(server, job_id)
    assert seen.count("HangDetected") == 2 and seen.count("FaultToleranceRestart") == 1
    restart = messages(server, job_id, "FaultToleranceRestart")[0]
    assert "it hung (no pod wrote to its log for 1 minute)" in restart and "(1 of 1)" in restart
    assert "is failed because it hung" in messages(server, job_id, "JobFailed")[0]
    log = (server.state_dir / "jobs" / job_id / "hangs-master-0.log").read_text()
    assert log.count("started\n") == 2  # the restarted pod ran again, its log continued


def test_a_job_that_keeps_writing_is_not_hung_and_v2_args_turn_detection_on(server: LocalServer) -> None:
    """A pod printing every 0.1 s outlives three hang timeouts; ``faultToleranceArgs`` (v2's form)
    turns detection on as ``faultToleranceConfig`` does."""
    talking = job_body("talks", "for i in $(seq 12); do echo $i; sleep 0.1; done", faultTolerance=True,
                       faultToleranceArgs="--enable-hang-detection=true --hang-detection-log-timeout-minutes=1")
    silent = job_body("silent-v2", "sleep 60", faultTolerance=True, faultToleranceConfig={"faultToleranceLimit": 0},
                      faultToleranceArgs="--enable-hang-detection=true --hang-detection-log-timeout-minutes=1")
    client = server.client()
    talks, quiet = client.create_job(POOL, talking)["jobId"], client.create_job(POOL, silent)["jobId"]
    assert server.wait_status(talks, ("Succeeded", "Failed"), timeout=20)["status"] == "Succeeded"
    assert "HangDetected" not in reasons(server, talks)
    assert server.wait_status(quiet, "Failed", timeout=20)["status"] == "Failed"
    assert "HangDetected" in reasons(server, quiet) and "FaultToleranceRestart" not in reasons(server, quiet)


def test_a_restarted_server_goes_on_watching_an_adopted_job_for_hangs(server: LocalServer) -> None:
    body = job_body("adopted-hang", "echo started; sleep 60", faultTolerance=True,
                    faultToleranceConfig={"enabledHangDetection": True, "hangDetectionTimeoutMinutes": 5,
                                          "faultToleranceLimit": 0})
    job_id = server.client().create_job(POOL, body)["jobId"]
    server.wait_status(job_id, "Running")
    server.restart()  # the pod lives on; the new server adopts it
    assert server.wait_status(job_id, "Failed", timeout=20)["status"] == "Failed"
    assert "HangDetected" in reasons(server, job_id)


def test_the_hang_settings_are_read_from_both_forms() -> None:
    from job_chain.aihc.spec import hang_minutes, restart_limit

    assert hang_minutes({"faultTolerance": True, "faultToleranceConfig": {"enabledHangDetection": True,
                                                                         "hangDetectionTimeoutMinutes": 7}}) == 7
    assert hang_minutes({"faultTolerance": True, "faultToleranceArgs": "--enable-hang-detection true "
                                                                       "--hang-detection-log-timeout-minutes 9"}) == 9
    assert hang_minutes({"faultTolerance": True, "faultToleranceArgs": "--enable-hang-detection=false"}) is None
    assert hang_minutes({"faultToleranceConfig": {"enabledHangDetection": True}}) is None  # tolerance off
    assert hang_minutes({"faultTolerance": True, "faultToleranceConfig": {"enabledHangDetection": True}}) == 30
    assert restart_limit({"faultTolerance": True}) == 3
    assert restart_limit({"faultTolerance": True, "faultToleranceConfig": {"faultToleranceLimit": 0}}) == 0
    assert restart_limit({"faultTolerance": False, "faultToleranceConfig": {"faultToleranceLimit": 2}}) == 0


def test_a_fault_tolerance_limit_past_aihc_s_3_is_refused_in_aihc_s_error_shape(server: LocalServer,
                                                                                   tmp_path: Path) -> None:
    """AIHC restarts a failed job at most 3 times (its fault-tolerance page): a faultToleranceLimit above
    that is refused by the local server (400 InappropriateJSON at its path) and by validate, not run."""
    from job_chain.aihc.errors import AIHCError
    from job_chain.aihc.spec import body_problems

    body = job_body("too-tolerant", "true", faultTolerance=True, faultToleranceConfig={"faultToleranceLimit": 4})
    with pytest.raises(AIHCError) as refused:
        server.client().create_job(POOL, body)
    assert (refused.value.status, refused.value.code) == (400, "InappropriateJSON")
    assert "faultToleranceConfig.faultToleranceLimit: must be a whole number from 0 to 3" in str(refused.value)
    assert ("faultToleranceConfig.faultToleranceLimit", "must be a whole number from 0 to 3, found 1000 (AIHC "
            "restarts a failed job at most 3 times)") in body_problems(
        dict(body, faultToleranceConfig={"faultToleranceLimit": 1000}))
    assert not [p for p in body_problems(dict(body, faultToleranceConfig={"faultToleranceLimit": 3}))
                if "faultToleranceLimit" in p[0]]


def test_the_hang_watcher_survives_a_failed_look_and_says_it(tmp_path: Path, caplog: Any) -> None:
    """A look of the hang watcher that fails (a locked store) is said once in the server's log and
    tried again at the next tick: the job is still found hung."""
    import logging
    import sqlite3
    import time

    from job_chain.local.lifecycle import Lifecycle

    class Store:
        looks = 0

        def get_job(self, job_id: str) -> Dict[str, Any]:
            self.looks += 1
            if self.looks <= 2:
                raise sqlite3.OperationalError("database is locked")
            return {"status": "Running", "restarts": 0, "started_at": time.time() - 60}

        def pods(self, job_id: str) -> List[Dict[str, Any]]:
            return []

    class Pods:
        closing = False
        found: List[Tuple[str, int, int]] = []

        def hung(self, job_id: str, restarts: int, minutes: int) -> None:
            self.found.append((job_id, restarts, minutes))

    pods = Pods()
    lifecycle = Lifecycle(Store(), str(tmp_path), pods, stop_grace=0.1, schedule_delay=0,  # type: ignore[arg-type]
                          hang_minute=0.001)
    with caplog.at_level(logging.WARNING, logger="job_chain.local"):
        lifecycle._watch_hang("job-1", 0, 1)
    assert pods.found == [("job-1", 0, 1)]
    said = [r.getMessage() for r in caplog.records if "hang detection of job job-1" in r.getMessage()]
    assert len(said) == 1 and "database is locked" in said[0]


# -- a chain on it: one attempt restarted by AIHC, job-chain's retries after AIHC's, a hang as `hang` ----------
def tolerant_chain(tmp_path: Path, script: str, tolerance: Dict[str, Any], settings: Optional[Dict[str, Any]] = None,
                   pool: str = POOL) -> Path:
    from chain_helpers import write_chain

    step: Dict[str, Any] = {"name": "train", "script": script}
    if settings:
        step["jobChain"] = settings
    chain = write_chain(tmp_path, pool, [step])
    data = json.loads(chain.read_text())
    data["jobs"][0].update(faultTolerance=True, **tolerance)
    chain.write_text(json.dumps(data))
    return chain


def run_to_end(server: LocalServer, chain: Path) -> Tuple[Any, Dict[str, Any], str]:
    """Run the chain on the real server, wait for its end; (its final status, status --json, the table)."""
    from click.testing import CliRunner

    from job_chain import ChainSession
    from job_chain.cli import cli

    session = ChainSession.from_file(str(chain), client=server.client(max_retries=3))
    run = session.start()
    final = session.wait(run.run_id, timeout=60, interval=0.2)
    env = {"JOB_CHAIN_CREDENTIALS": server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None}
    shown = CliRunner().invoke(cli, ["status", str(chain), "--json"], env=env)
    table = CliRunner().invoke(cli, ["status", str(chain)], env=env, terminal_width=250)
    return final, json.loads(shown.output), table.output


FAILS_ONCE = ('n=$(( $(cat "$SHARED/tries" 2>/dev/null || echo 0) + 1 )); echo $n > "$SHARED/tries"\n'
              'echo "try $n"; [ "$n" -ge 2 ]\n')


def test_a_job_that_fails_once_under_fault_tolerance_is_one_attempt_restarted_by_aihc_once(
        server: LocalServer, tmp_path: Path) -> None:
    """No jobChain.retries: AIHC's restart heals it; job-chain neither retried nor failed the step."""
    from job_chain import Outcome

    final, data, table = run_to_end(server, tolerant_chain(tmp_path, FAILS_ONCE, {}))
    assert final.outcome is Outcome.SUCCEEDED
    attempts = data["steps"][0]["attempts"]
    assert [(a["attempt"], a["status"], a.get("engineRestarts")) for a in attempts] == [(1, "Succeeded", 1)]
    assert "1 (restarted by AIHC ×1)" in table, table
    log = (server.state_dir / "jobs" / attempts[0]["jobId"] / "train-master-0.log").read_text()
    assert ("step train: attempt 1 failed (exit code 1); AIHC's fault tolerance restarts this job itself "
            "(restart 1 of 3)") in log, log
    assert "retrying" not in log and "not retried" not in log


def test_follow_says_the_attempt_was_restarted_by_aihc(server: LocalServer, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from job_chain.cli import cli

    env = {"JOB_CHAIN_CREDENTIALS": server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None}
    followed = CliRunner().invoke(cli, ["run", str(tolerant_chain(tmp_path, FAILS_ONCE, {})), "--follow"], env=env)
    assert followed.exit_code == 0, followed.output
    assert "step 0 train: Succeeded (job " in followed.output
    assert ", attempt 1, restarted by AIHC ×1)" in followed.output, followed.output


def test_job_chain_retries_start_where_aihcs_restarts_end_and_are_counted_apart(
        server: LocalServer, tmp_path: Path) -> None:
    """faultToleranceLimit 1 and retries 1, a script that always fails: attempt 1 runs twice (AIHC),
    then job-chain's one retry, attempt 2, runs twice too: four runs, two attempts."""
    from job_chain import Outcome

    chain = tolerant_chain(tmp_path, 'echo run >> "$SHARED/runs"; exit 3\n',
                           {"faultToleranceConfig": {"faultToleranceLimit": 1}}, {"retries": 1})
    final, data, _ = run_to_end(server, chain)
    assert final.outcome is Outcome.FAILED
    attempts = data["steps"][0]["attempts"]
    assert [(a["attempt"], a.get("engineRestarts")) for a in attempts] == [(1, 1), (2, 1)]
    assert (tmp_path / "shared" / "runs").read_text().count("run") == 4
    first = (server.state_dir / "jobs" / attempts[0]["jobId"] / "train-master-0.log").read_text()
    assert "(restart 1 of 1)" in first and "retrying as attempt 2" in first
    assert "no retries left (1 of 1 used)" in (server.state_dir / "jobs" / attempts[1]["jobId"] /
                                               "train-master-0.log").read_text()


def test_a_hang_aihc_detected_is_the_cause_hang(server: LocalServer, tmp_path: Path) -> None:
    from job_chain import Outcome

    chain = tolerant_chain(tmp_path, "echo started; sleep 60\n", {"faultToleranceConfig": {
        "enabledHangDetection": True, "hangDetectionTimeoutMinutes": 1, "faultToleranceLimit": 1}})
    final, data, table = run_to_end(server, chain)
    assert final.outcome is Outcome.FAILED
    attempt = data["steps"][0]["attempts"][0]
    assert attempt["failure"]["class"] == "hang" and attempt["failure"]["signature"] == "aihc-hang-detection"
    assert attempt.get("engineRestarts") == 1
    assert "hung (PyTorchJob train" in table and "(AIHC's hang detection)" in table, table


# -- the rules, in-process ------------------------------------------------------------------------------
def test_job_chain_leaves_a_failure_to_aihc_while_its_restarts_last() -> None:
    from job_chain.rules.retry import left_to_engine

    assert left_to_engine(3, 0) == ("AIHC's fault tolerance restarts this job itself (restart 1 of 3); job-chain "
                                    "neither retries nor fails the step until those restarts are used up")
    assert "(restart 3 of 3)" in (left_to_engine(3, 2) or "")
    assert left_to_engine(3, 3) is None  # used up: job-chain's own budget decides, from its start
    assert left_to_engine(0, 0) is None  # no fault tolerance: job-chain's at once
    assert left_to_engine(3, 1, ended=True) is None  # the job ended (a watcher sees it Failed): AIHC gave up


def test_the_composition_is_said_only_when_a_step_sets_both() -> None:
    from job_chain.rules.retry import composition
    from job_chain.spec.model import Step

    both = Step(0, {"name": "train"}, "true", "inline", retries=2)
    assert composition(both, 3) == (
        "step train: AIHC's fault tolerance restarts a failed job up to 3 times itself (the same attempt); only "
        "when those are used up does job-chain retry it, by jobChain.retries (2), each retry a new job that AIHC "
        "restarts up to 3 times again: the script runs at most 12 times. Counted apart: AIHC's restarts never use "
        "job-chain's budget (docs/failures.md, \"AIHC's fault tolerance\")")
    budgets = Step(0, {"name": "train"}, "true", "inline", retries=4, retry_budgets={"infra": 3, "hang": 1})
    assert "by its retries per cause (at most 4 in all)" in (composition(budgets, 1) or "")
    assert "up to 1 time itself" in (composition(budgets, 1) or "")
    assert composition(Step(0, {"name": "train"}, "true", "inline"), 3) is None  # no retries: AIHC's alone
    assert composition(both, 0) is None  # no fault tolerance: job-chain's alone


def test_validate_explains_the_composition(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from job_chain.cli import cli

    chain = tolerant_chain(tmp_path, "true\n", {"faultToleranceConfig": {"faultToleranceLimit": 2}}, {"retries": 1})
    said = CliRunner().invoke(cli, ["validate", str(chain), "--local"])
    assert said.exit_code == 0, said.output
    assert "step train: AIHC's fault tolerance restarts a failed job up to 2 times itself" in said.output
    assert "the script runs at most 6 times" in said.output
    alone = tolerant_chain(tmp_path, "true\n", {})
    assert "AIHC's fault tolerance" not in CliRunner().invoke(cli, ["validate", str(alone), "--local"]).output


def test_the_adapter_reads_restarts_and_names_aihcs_events_in_the_seams_words() -> None:
    from job_chain.aihc.engine import event_of, job_of
    from job_chain.engine.jobs import HUNG, RESTARTED

    pods = {"pods": [{"objectMeta": {"name": "t-master-0"}, "restartCount": 2},
                     {"objectMeta": {"name": "t-worker-0"}, "restartCount": 1}]}
    assert job_of({"jobId": "j", "enableFaultTolerance": True, "podList": pods}).restarts == 2
    assert job_of({"jobId": "j", "enableFaultTolerance": True}).restarts is None  # a listed job: its events say
    assert job_of({"jobId": "j", "podList": pods}).restarts == 0  # no fault tolerance: AIHC restarts nothing
    assert event_of({"reason": "HangDetected", "type": "Warning"}).kind == HUNG
    assert event_of({"reason": "JobHang", "type": "Warning"}).kind == HUNG
    assert event_of({"reason": "JobStatusChanged", "type": "Normal"}).kind == "JobStatusChanged"  # not a hang
    assert event_of({"reason": "FaultToleranceRestart", "type": "Warning"}).kind == RESTARTED
    assert event_of({"reason": "FailedToStartFaultTolerance", "type": "Warning"}).kind == "FailedToStartFaultTolerance"


def test_a_hang_is_the_cause_only_when_it_ended_the_last_run() -> None:
    from job_chain.engine.jobs import HUNG, RESTARTED, Event
    from job_chain.failures.classify import engine_hang, platform_cause
    from job_chain.status.types import Attempt, restarts_from

    hung = Event(HUNG, "Warning", "PyTorchJob t is hung: no pod wrote to its log for 30 minutes", 200.0)
    restarted = Event(RESTARTED, "Warning", "PyTorchJob t: it hung; fault tolerance restarts the job (1 of 1)", 200.0)
    failed = Event("JobFailed", "Normal", "PyTorchJob t is failed because 1 Master replica(s) failed.", 300.0)
    found = engine_hang([failed, hung])
    assert found is not None and found.cls == "hang" and found.signature == "aihc-hang-detection"
    assert found.summary() == ("hung (PyTorchJob t is hung: no pod wrote to its log for 30 minutes) (AIHC's hang "
                               "detection)")
    assert engine_hang([failed, restarted, hung]) is None  # restarted after the hang: the last run failed otherwise
    assert engine_hang([hung, restarted]) is not None  # equal times: the engine's order, newest first
    assert engine_hang([failed]) is None
    assert platform_cause([restarted, hung], "", logged=False) is None  # nor the platform's cause
    assert restarts_from(Attempt("t", 1, "j", "Running", restarts=None), [restarted, hung, restarted]).restarts == 2


def test_a_tail_leaves_the_failure_to_aihc_and_a_watcher_decides_once_aihc_gave_up(
        tmp_path: Path, capsys: Any) -> None:
    """On the in-memory API: a failing tail while the job runs (AIHC restarts it) creates and records
    nothing; once the job has ended Failed (AIHC gave up before its limit), the advance is
    job-chain's: attempt 2, by its own budget."""
    from chain_helpers import make_chain
    from memory_api import MemoryAPI

    from job_chain import ChainSession
    from job_chain.hop.advance import advance

    api = MemoryAPI()
    chain = make_chain(tmp_path, [{"name": "train", "script": "exit 1", "retries": 1}], "pool-local")
    data = json.loads(chain.read_text())
    data["jobs"][0]["faultTolerance"] = True
    chain.write_text(json.dumps(data))
    session = ChainSession.from_file(str(chain), client=api)
    run = session.start()
    [first] = api.creates

    def tail(mode: str = "job") -> int:
        return advance(session.frozen(run), api, run_id=run.run_id, step="train", attempt=1, exit_code=1,
                       records=session.records, resume_hint="resume", mode=mode)

    assert tail() == 1
    assert "AIHC's fault tolerance restarts this job itself (restart 1 of 3)" in capsys.readouterr().err
    assert len(api.creates) == 1 and session.records.script_exit(run.run_id, "train", 1) is None
    api.finish(first.job_id, 1)  # AIHC did not restart it after all: the job ended Failed
    assert tail("watch") == 1
    assert "retrying as attempt 2" in capsys.readouterr().err
    assert [c.labels["job-chain/attempt"] for c in api.creates] == ["1", "2"]
