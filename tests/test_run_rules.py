"""The run rules, in-process and in milliseconds: outcomes, resume targets, attempts, exit codes."""

from __future__ import annotations

import datetime as _dt
from typing import List, Optional

import pytest

from job_chain.aihc.engine import event_of
from job_chain.failures.classify import Failure
from job_chain.spec.loader import check_chain_data
from job_chain.status.summarize import resume_targets, summarize
from job_chain.status.types import STALL_AFTER, Attempt, Outcome, RunFacts, explain

NOW = 1_800_000_000.0


def chain(steps: int = 3, retries: Optional[List[int]] = None):
    jobs = []
    for i in range(steps):
        job = {"name": f"s{i}", "jobSpec": {"image": "img", "command": f"echo {i}"}}
        if retries and retries[i]:
            job["jobChain"] = {"retries": retries[i]}
        jobs.append(job)
    return check_chain_data({"resourcePoolId": "pool", "jobs": jobs}, "/tmp/rules/chain_info.json", local=True)


def at(seconds_ago: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(NOW - seconds_ago, _dt.timezone.utc)


def job(step: int, status: str, attempt: int = 1, ended_ago: Optional[float] = 5.0, exit_code: Optional[int] = None,
        reason: str = "") -> Attempt:
    finished = at(ended_ago) if ended_ago is not None and status in ("Succeeded", "Failed", "Stopped") else None
    code = 0 if status == "Succeeded" else exit_code
    return Attempt(f"s{step}", attempt, f"job-{step}-{attempt}", status, at(100.0 - step), finished, code, reason)


def run(attempts: List[Attempt], facts: Optional[RunFacts] = None, steps: int = 3, retries=None, the_chain=None):
    return summarize(the_chain or chain(steps, retries), attempts, facts or RunFacts(started=NOW - 200), run_id="r1",
                     now=NOW)


def test_every_step_succeeded_is_a_success() -> None:
    status = run([job(0, "Succeeded"), job(1, "Succeeded"), job(2, "Succeeded")])
    assert status.outcome is Outcome.SUCCEEDED and status.outcome == "succeeded"
    assert [s.exit_code for s in status.steps] == [0, 0, 0]


def test_a_step_between_steps_is_running() -> None:
    status = run([job(0, "Succeeded"), job(1, "Running", ended_ago=None)])
    assert status.outcome is Outcome.RUNNING
    assert [s.status for s in status.current] == ["Running"]
    assert status.steps[2].status == "not submitted"


def test_a_failed_step_fails_the_run_with_its_exit_code_and_reason() -> None:
    status = run([job(0, "Succeeded"), job(1, "Failed", exit_code=4, reason="1 Master replica(s) failed")])
    assert status.outcome is Outcome.FAILED
    assert status.failed_step is not None and status.failed_step.index == 1
    assert status.steps[1].exit_code == 4 and "replica" in status.steps[1].reason
    assert "step s1 failed with exit code 4" in status.reason


def test_a_failed_step_with_retries_left_is_running_until_its_retry_is_overdue() -> None:
    facts = RunFacts(started=NOW - 200)
    assert run([job(0, "Failed", exit_code=1)], facts, retries=[1, 0, 0]).outcome is Outcome.RUNNING
    overdue = run([job(0, "Failed", exit_code=1, ended_ago=STALL_AFTER + 1)], facts, retries=[1, 0, 0])
    assert overdue.outcome is Outcome.FAILED and "retry was never submitted" in overdue.reason
    used_up = run([job(0, "Failed", 1), job(0, "Failed", 2, exit_code=3)], facts, retries=[1, 0, 0])
    assert used_up.outcome is Outcome.FAILED and "(attempt 2 of 2)" in used_up.reason
    assert [a.attempt for a in used_up.steps[0].attempts] == [1, 2]


def test_a_succeeded_step_whose_successor_never_came_settles_as_failed() -> None:
    # within the advance's deadline the next step may still come: running
    assert run([job(0, "Succeeded", ended_ago=30)]).outcome is Outcome.RUNNING
    stalled = run([job(0, "Succeeded", ended_ago=STALL_AFTER + 1)])
    assert stalled.outcome is Outcome.FAILED and "step s1 was never submitted" in stalled.reason


def test_an_advance_that_gave_up_settles_at_once_and_resume_targets_the_next_step() -> None:
    facts = RunFacts(started=NOW - 200, script_exit={("s0", 1): 0}, succeeded={("s0", 1)},
                     advance_failed={("s0", 1): "step s1 could not be submitted: AIHC error 503"})
    status = run([job(0, "Failed", exit_code=75)], facts)  # the job failed only because advancing did
    assert status.steps[0].status == "Succeeded" and "while starting what follows" in status.steps[0].reason
    assert status.outcome is Outcome.FAILED and "could not be submitted" in status.reason
    assert resume_targets(status, chain()) == [("s1", 1)]  # the token the failed advance used: no duplicate


def test_a_later_step_proves_the_earlier_one_succeeded() -> None:
    """The advance gave up after its create was stored: the next step exists and decides the run."""
    status = run([job(0, "Failed", exit_code=75), job(1, "Succeeded"), job(2, "Succeeded")])
    assert status.steps[0].status == "Succeeded"
    assert status.outcome is Outcome.SUCCEEDED


def test_the_script_exit_code_recorded_by_the_advance_wins_over_the_jobs() -> None:
    facts = RunFacts(started=NOW - 200, script_exit={("s1", 1): 9})
    status = run([job(0, "Succeeded"), job(1, "Failed", exit_code=None)], facts)
    assert status.steps[1].exit_code == 9


def test_stopped_runs_and_stopped_steps() -> None:
    assert run([job(0, "Stopped")]).outcome is Outcome.STOPPED
    marked = run([job(0, "Succeeded")], RunFacts(started=NOW - 200, stopped=True))
    assert marked.outcome is Outcome.STOPPED


def test_steps_before_the_first_are_skipped() -> None:
    from dataclasses import replace

    started_later = chain()
    started_later.steps[0] = replace(started_later.steps[0], excluded="the run started at step 1 (s1)")
    status = run([job(1, "Succeeded"), job(2, "Succeeded")], the_chain=started_later)
    assert [s.status for s in status.steps] == ["skipped", "Succeeded", "Succeeded"]
    assert status.steps[0].reason == "the run started at step 1 (s1)"
    assert status.outcome is Outcome.SUCCEEDED


def test_nothing_submitted_is_running_then_failed_when_overdue() -> None:
    assert run([], RunFacts(started=NOW - 10)).outcome is Outcome.RUNNING
    assert run([], RunFacts(started=NOW - STALL_AFTER - 1)).outcome is Outcome.FAILED


@pytest.mark.parametrize(("attempts", "target"), [
    ([], ("s0", 1)),
    ([job(0, "Succeeded"), job(1, "Failed", exit_code=1)], ("s1", 2)),
    ([job(0, "Succeeded"), job(1, "Stopped")], ("s1", 2)),
    ([job(0, "Succeeded"), job(1, "Succeeded")], ("s2", 1)),
    ([job(0, "Succeeded"), job(1, "Succeeded"), job(2, "Succeeded")], None),
])
def test_resume_target(attempts: List[Attempt], target) -> None:
    assert resume_targets(run(attempts), chain()) == ([target] if target else [])


def test_exit_code_and_reason_come_from_aihc_events() -> None:
    events = [  # seed 001's example, newest first
        {"reason": "JobFailed", "message": "PyTorchJob x is failed because 1 Master replica(s) failed.",
         "type": "Normal"},
        {"reason": "Error", "message": "Error pod x-master-0 container pytorch exitCode: 1 terminated message: ",
         "type": "Warning"},
        {"reason": "ExitedWithCode", "message": "Pod: default.x-master-0 exited with code 1", "type": "Normal"},
    ]
    explained = explain(job(0, "Failed"), [event_of(e) for e in events])  # as the AIHC engine reads them
    assert explained.exit_code == 1
    assert explained.reason == "PyTorchJob x is failed because 1 Master replica(s) failed."


def test_status_json_has_iso_times_with_zone_and_attempt_history() -> None:
    data = run([job(0, "Failed", 1, exit_code=7), job(0, "Succeeded", 2)], retries=[1, 0, 0]).as_json()
    step = data["steps"][0]
    assert step["started"].endswith("+00:00") and "T" in step["started"]
    assert [a["attempt"] for a in step["attempts"]] == [1, 2]
    assert step["attempts"][0] == {"attempt": 1, "jobId": "job-0-1", "status": "Failed", "exitCode": 7,
                                   "reason": None, "started": step["attempts"][0]["started"],
                                   "finished": step["attempts"][0]["finished"], "failure": None, "gpuHours": 0.0,
                                   "lostGpuHours": 0.0}  # a failed attempt's lost hours (issue 29 item 3)
    assert Attempt.from_cache(Attempt("s0", 2, "j", "Failed", at(3), at(1), 2, "why").to_cache()) == \
        Attempt("s0", 2, "j", "Failed", at(3), at(1), 2, "why")


def test_a_step_says_why_it_stands_where_it_does() -> None:
    """REASON: a failed step's cause; while its retry runs, what the attempt before failed of; once
    the retry ended, that earlier failure no longer is the step's reason."""
    oom = Failure("oom", "cuda-out-of-memory", "torch.OutOfMemoryError", "s0-master-0")
    facts = RunFacts(started=NOW - 200, failures={("s0", 1): oom})
    failed = run([job(0, "Failed", exit_code=1, reason="1 Master replica(s) failed")], facts, retries=[1, 0, 0])
    assert failed.steps[0].why() == "oom (cuda-out-of-memory on pod s0-master-0)"
    retrying = run([job(0, "Failed", exit_code=1), job(0, "Running", 2, ended_ago=None)], facts, retries=[1, 0, 0])
    assert retrying.steps[0].why() == "after attempt 1 failed: oom (cuda-out-of-memory on pod s0-master-0)"
    retried = run([job(0, "Failed", exit_code=1), job(0, "Succeeded", 2)], facts, retries=[1, 0, 0])
    assert retried.steps[0].why() == ""
    assert run([job(0, "Stopped", reason="stopped by the user")]).steps[0].why() == "stopped by the user"


def test_a_failed_exit_handler_is_not_a_step_whose_retry_is_overdue() -> None:
    """An exit handler that failed long ago with retries left does not fail a run whose steps all
    succeeded: only the run's own steps are retried by their jobs."""
    the_chain = check_chain_data({"resourcePoolId": "pool", "jobs": [
        {"name": "s0", "jobSpec": {"image": "img", "command": "echo 0"}},
        {"name": "cleanup", "jobSpec": {"image": "img", "command": "echo 1"},
         "jobChain": {"runOn": "always", "retries": 1}}]}, "/tmp/rules/chain_info.json", local=True)
    handler = Attempt("cleanup", 1, "job-h-1", "Failed", at(STALL_AFTER + 60), at(STALL_AFTER + 30), 1)
    status = run([job(0, "Succeeded", ended_ago=STALL_AFTER + 90), handler], the_chain=the_chain)
    assert status.outcome is Outcome.SUCCEEDED and status.reason == ""
