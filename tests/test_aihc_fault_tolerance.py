"""Issue 30 item 7: AIHC's own fault tolerance composes with job-chain's retries.

The local server emulates AIHC's restarts and hang detection and the job events that say so
(real server, real processes; a minute of hang detection lasts ``--hang-minute``, here a fraction
of a second, so nothing waits minutes); a chain run on it shows "restarted by AIHC ×N" on the
attempt and counts a hang AIHC found as ``hang``; the budget rule (job-chain's retries start
where AIHC's ended) is tested in-process.
"""

from __future__ import annotations

from typing import Iterator, List

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
