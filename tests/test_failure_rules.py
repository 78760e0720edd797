"""Retry budgets per cause, checkpoints, GPU-hours and the chain-file settings, in-process."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Dict, List

import pytest

from job_chain.failures.classify import Failure
from job_chain.hop.notify import message
from job_chain.record.records import RunRecords
from job_chain.rules.checkpoint import last_complete, resume_env
from job_chain.rules.retry import decide, retry_sentence
from job_chain.spec.frozen import freeze, thaw
from job_chain.spec.loader import ChainFileError, check_chain_data
from job_chain.spec.model import Checkpoint
from job_chain.status.cost import (
    attempt_hours,
    gpus,
    gpus_per_replica,
    hours_text,
    lost_hours,
    run_hours,
    running_window,
)
from job_chain.status.summarize import summarize
from job_chain.status.types import Attempt, Outcome, RunFacts

NOW = 1_800_000_000.0


def chain(settings: Dict[str, Any], **spec: Any):
    job = {"name": "train", "jobSpec": {"image": "img", "command": "echo train", **spec}, "jobChain": settings}
    return check_chain_data({"resourcePoolId": "pool", "jobs": [job]}, "/tmp/rules/chain_info.json", local=True)


def problems(settings: Dict[str, Any]) -> List[str]:
    with pytest.raises(ChainFileError) as info:
        chain(settings)
    return info.value.problems


def at(seconds_ago: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(NOW - seconds_ago, _dt.timezone.utc)


def failed(attempt: int, code: int = 1) -> Attempt:
    return Attempt("train", attempt, f"job-{attempt}", "Failed", at(500 - attempt * 100), at(450 - attempt * 100), code)


# -- the decision -----------------------------------------------------------------------------------
def test_budgets_per_cause_count_each_cause_apart_and_a_cause_not_named_gets_none() -> None:
    step = chain({"retries": {"infra": 2, "user": 0}}).steps[0]
    assert decide(step, 1, 1, ["infra"]).retry and decide(step, 1, 1, ["infra"]).left == 1
    assert decide(step, 2, 1, ["infra", "infra"]).retry
    third = decide(step, 3, 1, ["infra", "infra", "infra"])
    assert not third.retry and third.why == "its infra budget of 2 is used up"
    assert not decide(step, 1, 1, ["user"]).retry
    assert decide(step, 1, 1, ["oom"]).why == "its retries give oom failures no budget"
    assert decide(step, 2, 1, ["oom", "infra"]).retry  # another cause's failure does not use infra's budget
    assert step.retries == 2 and decide(step, 1, 1, ["infra"]).retry and not decide(step, 1, 1, []).retry


def test_a_number_keeps_its_meaning_and_retry_on_exit_codes_applies_to_budgets_too() -> None:
    plain = chain({"retries": 2}).steps[0]
    assert [decide(plain, a, 1, ["user"] * a).retry for a in (1, 2, 3)] == [True, True, False]
    assert decide(plain, 3, 1).why == "no retries left (2 of 2 used)"
    assert decide(chain({}).steps[0], 1, 1).why == "the step has no retries"
    codes = chain({"retries": {"infra": 3, "timeout": 1}, "retryOnExitCodes": [137]}).steps[0]
    assert not decide(codes, 1, 1, ["infra"]).retry and decide(codes, 1, 137, ["infra"]).retry
    assert decide(codes, 1, 1, ["infra"]).why == "exit code 1 is not in retryOnExitCodes"
    assert decide(codes, 1, 124, ["timeout"]).retry  # 124 (a timeout) as before


def test_a_retry_is_said_in_one_sentence() -> None:
    step = chain({"retries": {"infra": 5}, "checkpoint": {"dir": "/ckpt"}}).steps[0]
    failure = Failure("infra", "nccl-watchdog-timeout", "…", "train-worker-0")
    assert retry_sentence(step, 1, decide(step, 1, 1, ["infra"]), failure, (200, "/ckpt/iter_0000200"), "/ckpt") == (
        "attempt 1 failed: infra (nccl-watchdog-timeout on pod train-worker-0); retrying as attempt 2 from "
        "iteration 200 (/ckpt/iter_0000200); infra budget 4 left")
    assert retry_sentence(step, 1, decide(step, 1, 1, ["infra"]), failure, None, "/ckpt") == (
        "attempt 1 failed: infra (nccl-watchdog-timeout on pod train-worker-0); retrying as attempt 2 from "
        "the start (no complete checkpoint in /ckpt); infra budget 4 left")
    plain = chain({"retries": 1}).steps[0]
    assert retry_sentence(plain, 1, decide(plain, 1, 1), None) == (
        "attempt 1 failed: cause not known; retrying as attempt 2; 0 retries left")


def test_when_no_log_line_matched_the_platforms_warning_events_or_the_jobs_reason_say_why() -> None:
    from job_chain.engine.jobs import Event
    from job_chain.failures.classify import platform_cause

    mount = Event("FailedMount", "Warning", "cannot mount '/pfs/x' for datasource 'pfs': no such directory: "
                                            "create it (mkdir -p /pfs/x)")
    exited = [Event("FailedToStartFaultTolerance", "Warning", "failed to start fault tolerance"),
              Event("Error", "Warning", "Error pod t-master-0 container pytorch exitCode: 1 terminated message: ")]
    found = platform_cause(exited + [mount], "PyTorchJob t is failed", logged=True)
    assert found is not None and (found.cls, found.signature, found.line) == ("platform", "FailedMount", mount.message)
    assert found.summary() == f"platform (FailedMount: {mount.message})" and "then resume" in found.explanation
    # a script that ran and failed in words no signature knows: its own exit is not the platform's doing
    assert platform_cause(exited, "PyTorchJob t is failed because 1 Master replica(s) failed.", logged=True) is None
    pull = platform_cause([Event("Failed", "Warning", "Failed to pull image \"x\": not found")], "", logged=False)
    assert pull is not None and pull.signature == "Failed"
    silent = platform_cause(exited, "PyTorchJob t is failed because 1 Master replica(s) failed.", logged=False)
    assert silent is not None and (silent.signature, silent.line) == ("job-reason", "PyTorchJob t is failed because 1 "
                                                                                      "Master replica(s) failed.")
    assert decide(chain({"retries": {"platform": 1}}).steps[0], 1, 1, ["platform"]).retry


def test_a_failure_no_log_explains_reads_its_jobs_events_once_also_with_hang_detection_on() -> None:
    from memory_api import MemoryAPI

    from job_chain.status.causes import classify_job

    api = MemoryAPI()
    body = {"name": "train", "faultTolerance": True, "jobSpec": {"image": "img", "command": "x", "replicas": 1},
            "faultToleranceConfig": {"enabledHangDetection": True, "hangDetectionTimeoutMinutes": 5}}
    job_id = api.create_job("pool", body)["jobId"]
    api.finish(job_id, 3)
    asked: List[str] = []
    real = api.job_events
    api.job_events = lambda *a, **k: asked.append(a[1]) or real(*a, **k)  # type: ignore[method-assign]
    step = chain({}).steps[0]
    step = type(step)(**{**step.__dict__, "body": {**step.body, **body}})
    found = classify_job(api, "pool", job_id, step, 3)
    assert found.cls == "platform" and asked == [job_id]  # hang detection and the platform asked one read


def test_status_decides_with_the_recorded_causes() -> None:
    the_chain = chain({"retries": {"infra": 1, "user": 0}})
    facts = RunFacts(started=NOW - 900, failures={("train", 1): Failure("infra", "nccl-remote-error", "x", "p")})
    retry_due = summarize(the_chain, [failed(1)], facts, run_id="r", now=NOW)
    assert retry_due.outcome is Outcome.RUNNING  # its retry is due (within the advance's deadline)
    facts.failures[("train", 1)] = Failure("user", "python-module-not-found", "ModuleNotFoundError: x", "p")
    stopped = summarize(the_chain, [failed(1)], facts, run_id="r", now=NOW)
    assert stopped.outcome is Outcome.FAILED
    assert stopped.reason == "step train failed with exit code 1: user (python-module-not-found on pod p)"
    assert stopped.as_json()["failedSteps"][0]["failure"] == {
        "class": "user", "signature": "python-module-not-found", "line": "ModuleNotFoundError: x", "pod": "p"}
    assert stopped.steps[0].notes[1].endswith("not retried: its retries give user failures no budget")


# -- checkpoints ---------------------------------------------------------------------------------------
def test_the_last_complete_checkpoint_is_the_one_the_tracker_names_whose_directory_exists(tmp_path: Path) -> None:
    spec = Checkpoint(str(tmp_path))
    assert last_complete(spec) is None and last_complete(None) is None  # nothing saved yet
    for iteration in (100, 200, 300):
        (tmp_path / f"iter_{iteration:07d}").mkdir()
    assert last_complete(spec) is None  # directories without a tracker entry are never chosen
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("200\n")
    assert last_complete(spec) == (200, str(tmp_path / "iter_0000200"))
    assert resume_env(last_complete(spec)) == {"JOB_CHAIN_RESUME_ITERATION": "200",
                                               "JOB_CHAIN_RESUME_CHECKPOINT": str(tmp_path / "iter_0000200")}
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("400")
    assert last_complete(spec) is None  # the tracker names a directory that is not there
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("release")
    assert last_complete(spec) is None and resume_env(None) == {}
    (tmp_path / "mine.txt").write_text("100")
    assert last_complete(Checkpoint(str(tmp_path), "mine.txt")) == (100, str(tmp_path / "iter_0000100"))


# -- GPU-hours -----------------------------------------------------------------------------------------
def test_gpus_are_the_resources_that_name_a_gpu_times_the_replicas() -> None:
    body = {"jobSpec": {"replicas": 2, "resources": [{"name": "baidu.com/a800_80g_cgpu", "quantity": 8},
                                                     {"name": "cpu", "quantity": 90},
                                                     {"name": "rdma/hca", "quantity": 1}]}}
    assert gpus_per_replica(body) == 8 and gpus(body) == 16
    assert gpus({"jobSpec": {"resources": [{"name": "nvidia.com/gpu", "quantity": 4}]}}) == 4
    assert gpus_per_replica({"jobSpec": {"resources": [{"name": "nvidia.com/gpu", "quantity": "8"}]}}) == 8  # v2's text
    assert gpus_per_replica({"jobSpec": {"resources": [{"name": "nvidia.com/gpu", "quantity": q} for q in
                                                       ("16Gi", True, None, "nan", "-1")]}}) == 0
    assert gpus({"jobSpec": {}}) == 0 and hours_text(12.345) == "12.3" and hours_text(0.4201) == "0.42"


def test_an_attempts_window_uses_the_record_where_it_agrees_with_the_api() -> None:
    item = Attempt("train", 1, "j", "Failed", at(3600), at(0), 1)
    assert running_window(item) == (NOW - 3600, NOW)
    assert attempt_hours(16, item) == 16.0
    # the submission 0.4 s after the second the API shows, the advance's end 0.7 s after: used
    assert running_window(item, NOW - 3600 + 0.4, NOW + 0.7) == (NOW - 3599.6, NOW + 0.7)
    # a clock far from the API's is not the same moment: ignored
    assert running_window(item, NOW - 3500, NOW + 30) == (NOW - 3600, NOW)
    running = Attempt("train", 2, "k", "Running", at(60), None, None, running=at(30))
    assert running_window(running, now=NOW) == (NOW - 29.5, NOW)  # runningAt (cut to the second: its middle)
    assert running_window(Attempt("train", 3, "q", "Pending")) is None


def test_status_sums_gpu_hours_per_step_and_run_and_keeps_lost_ones_apart() -> None:
    the_chain = chain({"retries": {"infra": 1}}, replicas=2, resources=[{"name": "nvidia.com/gpu", "quantity": 8}])
    attempts = [Attempt("train", 1, "j1", "Failed", at(7200), at(3600), 1),
                Attempt("train", 2, "j2", "Succeeded", at(3600), at(1800), 0)]
    status = summarize(the_chain, attempts, RunFacts(started=NOW - 9000), run_id="r", now=NOW)
    assert (status.steps[0].gpu_hours, status.steps[0].lost_gpu_hours) == (24.0, 16.0)
    data = status.as_json()
    assert (data["gpuHours"], data["lostGpuHours"]) == (24.0, 16.0)
    assert [a["gpuHours"] for a in data["steps"][0]["attempts"]] == [16.0, 8.0]


def test_a_retry_from_a_checkpoint_saved_during_the_attempt_loses_only_the_time_after_it() -> None:
    # issue 29 item 3: the failed attempt's hours were all counted lost though its retry resumed from
    # the checkpoint it saved 45 minutes into its hour
    the_chain = chain({"retries": {"infra": 2}, "checkpoint": {"dir": "/ckpt"}}, replicas=2,
                      resources=[{"name": "nvidia.com/gpu", "quantity": 8}])
    attempts = [Attempt("train", 1, "j1", "Failed", at(7200), at(3600), 1),
                Attempt("train", 2, "j2", "Failed", at(3600), at(1800), 1),
                Attempt("train", 3, "j3", "Succeeded", at(1800), at(900), 0)]
    facts = RunFacts(started=NOW - 9000, checkpoints={("train", 1): 200, ("train", 2): 200},
                     checkpoint_saved={("train", 1): NOW - 3600 - 900, ("train", 2): NOW - 7000},
                     resumed={("train", 2): (200, "/ckpt/iter_0000200"), ("train", 3): (200, "/ckpt/iter_0000200")})
    status = summarize(the_chain, attempts, facts, run_id="r", now=NOW)
    # attempt 1: 16 GPUs x the 15 minutes after its save; attempt 2 saved nothing new: its 30 minutes
    assert status.steps[0].lost_gpu_hours == pytest.approx(16 * 0.25 + 16 * 0.5)
    assert [a["lostGpuHours"] for a in status.as_json()["steps"][0]["attempts"]] == [4.0, 8.0, 0.0]
    assert run_hours(the_chain, attempts, now=NOW, facts=facts) == pytest.approx((16 + 8 + 4, 12.0))
    assert run_hours(the_chain, attempts, now=NOW) == pytest.approx((28.0, 24.0))  # the record unknown: all lost
    told_none = RunFacts(started=NOW - 9000, checkpoints=facts.checkpoints, checkpoint_saved=facts.checkpoint_saved)
    assert summarize(the_chain, attempts, told_none, run_id="r", now=NOW).steps[0].lost_gpu_hours == 24.0
    assert lost_hours(2.0, (0.0, 100.0), 75.0) == 0.5 and lost_hours(2.0, (10.0, 100.0), 5.0) == 2.0
    assert lost_hours(2.0, None, 5.0) == 2.0 and lost_hours(2.0, (0.0, 100.0), 150.0) == 0.0


def test_a_2x8_gpu_steps_hours_use_the_records_clocks_to_the_millisecond() -> None:
    """What tests/test_failures_run.py checks against the wall clock, exactly: each attempt runs from
    the middle of its runningAt second to its advance's end (the record's, to the millisecond)."""
    the_chain = chain({"retries": {"infra": 1}}, replicas=2, resources=[{"name": "nvidia.com/gpu", "quantity": 8}])
    attempts = [Attempt("train", 1, "j1", "Failed", at(101), at(60), 1, running=at(100)),
                Attempt("train", 2, "j2", "Succeeded", at(51), at(10), 0, running=at(50))]
    facts = RunFacts(started=NOW - 102, submitted={("train", 1): NOW - 100.6, ("train", 2): NOW - 50.4},
                     ended={("train", 1): NOW - 60 + 0.8, ("train", 2): NOW - 10 + 0.3})
    status = summarize(the_chain, attempts, facts, run_id="r", now=NOW)
    first, second = 16 * (100 - 0.5 - 59.2) / 3600, 16 * (50 - 0.5 - 9.7) / 3600
    assert status.steps[0].gpu_hours == pytest.approx(first + second, abs=1e-9)
    assert status.steps[0].lost_gpu_hours == pytest.approx(first, abs=1e-9)
    assert status.as_json()["gpuHours"] == round(first + second, 4)


def test_notifications_say_why_and_what_it_cost() -> None:
    the_chain = chain({})
    failure = Failure("infra", "ecc-uncorrectable", "RuntimeError: …", "train-worker-0")
    facts = message(the_chain, "r1", "stepFailed", "train", "failed", 1, failure=failure, gpu=(12.5, 4.25))
    assert ": infra (ecc-uncorrectable on pod train-worker-0)." in facts["text"]
    assert "GPU-hours: 12.50 (4.25 lost in failed attempts)" in facts["text"]
    assert facts["failure"]["signature"] == "ecc-uncorrectable" and facts["lostGpuHours"] == 4.25
    ended = message(the_chain, "r1", "failed", None, "failed", None,
                    [{"name": "train", "exitCode": 124, "cause": "killed after 6h (timeout)"}], gpu=(3.0, 3.0))
    assert "train failed with exit code 124 (killed after 6h (timeout))" in ended["text"]


# -- the chain file ------------------------------------------------------------------------------------
def test_new_settings_are_checked_at_their_json_paths() -> None:
    assert problems({"retries": {"infar": 2}}) == [
        "jobs[0].jobChain.retries.infar: unknown cause (did you mean 'infra'? known: infra, oom, hang, timeout, "
        "user, platform, unknown; a "
        "failureRules class can have a budget too)"]
    assert problems({"retries": {"infra": -1}}) == [
        "jobs[0].jobChain.retries.infra: must be a whole number from 0 to 1000, found -1"]
    found = problems({"failureRules": [{"match": "(", "class": "NaN", "color": 1}], "retries": {"NaN": 1}})
    assert found[:3] == ["jobs[0].jobChain.failureRules[0].color: unknown key (known: class, explanation, match, name)",
                         "jobs[0].jobChain.failureRules[0].match: is not a valid regex: missing ), unterminated "
                         "subpattern at position 0",
                         "jobs[0].jobChain.failureRules[0].class: must be a name like \"nan\" (lower-case letters, "
                         "digits, - and _), found 'NaN'"]
    assert problems({"failureRules": "x"})[0].startswith("jobs[0].jobChain.failureRules: must be a list")
    assert problems({"checkpoint": {"dir": "ckpt", "tracker": "a/b"}}) == [
        "jobs[0].jobChain.checkpoint.dir: must be an absolute path (where the job saves its checkpoints; it may use "
            "${params.NAME}, ${matrix.NAME}, ${run.id}), found 'ckpt'",
        "jobs[0].jobChain.checkpoint.tracker: must be a file name in dir, e.g. \"latest_checkpointed_iteration.txt\", "
        "found 'a/b'"]


def test_new_settings_are_frozen_and_thawed_with_the_run() -> None:
    settings = {"retries": {"infra": 3, "nan": 1}, "checkpoint": {"dir": "/mnt/pfs/ckpt", "tracker": "t.txt"},
                "failureRules": [{"match": "loss is nan", "class": "nan", "name": "nan-loss"}]}
    step = thaw(freeze(chain(settings)), "/tmp/rules/chain_info.json").steps[0]
    assert step.retry_budgets == {"infra": 3, "nan": 1} and step.checkpoint == Checkpoint("/mnt/pfs/ckpt", "t.txt")
    assert [(r.name, r.cls, r.pattern) for r in step.failure_rules] == [("nan-loss", "nan", "loss is nan")]


def test_a_cause_is_kept_once_whoever_finds_it_first(tmp_path: Path) -> None:
    records = RunRecords(str(tmp_path / "chain_info.json"))
    first = records.record_failure("r1", "train", 1, {"class": "oom", "signature": "cuda-oom"})
    second = records.record_failure("r1", "train", 1, {"class": "infra", "signature": "nccl-remote-error"})
    assert first["class"] == second["class"] == "oom"
    assert Failure.from_record(records.failure("r1", "train", 1)).signature == "cuda-oom"
    assert sorted(p.name for p in (tmp_path / "chain_info.json.runs" / "r1").iterdir()) == [
        "failure-train-attempt-1.json"]
