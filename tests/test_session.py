"""ChainSession in-process against a real local server over real HTTP (no CLI subprocess)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from chain_helpers import make_chain, run_jobs
from conftest import LocalServer, job_body

from job_chain import ChainSession, Outcome, RunNotFound, RunStillActive, RunTimeout
from job_chain.aihc.client import AIHCClient
from job_chain.aihc.credentials import Credentials
from job_chain.aihc.errors import AIHCError
from job_chain.hop.advance import advance
from job_chain.local.ports import free_port
from job_chain.session import SubmitInterrupted


def session(chain: Path, server: LocalServer, client: Optional[Any] = None) -> ChainSession:
    return ChainSession.from_file(str(chain), client=client or server.client(max_retries=2))


def steps_of(server: LocalServer, run_id: str) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for job in run_jobs(server, run_id):
        labels = {x["key"]: x["value"] for x in job["labels"]}
        key = f"{labels['job-chain/step']}/{labels['job-chain/attempt']}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def test_start_wait_status_and_runs(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b; exit 3"}], shared_server.pool)
    s = session(chain, shared_server)
    run = s.start()
    assert run.first_step == 0 and run.started.tzinfo is not None
    final = s.wait(run.run_id, timeout=60, interval=0.2)
    assert final.outcome is Outcome.FAILED
    assert [step.status for step in final.steps] == ["Succeeded", "Failed"]
    failed = final.steps[1]
    assert failed.exit_code == 3 and failed.reason and failed.attempts[0].job_id == failed.job_id
    assert final.failed_step is failed
    assert [r.run_id for r in s.runs()] == [run.run_id]
    # a finished run is answered from the cache of finished attempts: same answer
    again = s.status(run.run_id)
    assert [(x.status, x.exit_code) for x in again.steps] == [("Succeeded", 0), ("Failed", 3)]


def test_stop_then_resume_keeps_succeeded_steps(tmp_path: Path, shared_server: LocalServer) -> None:
    gate = 'test -f "$SHARED/go" || sleep 60'
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": gate}], shared_server.pool)
    s = session(chain, shared_server)
    run = s.start()
    end = time.monotonic() + 30
    while [step.status for step in s.status(run.run_id).steps] != ["Succeeded", "Running"]:
        assert time.monotonic() < end
        time.sleep(0.1)
    assert s.resume(run.run_id) == []  # a going run: nothing to apply, nothing submitted, nothing stopped
    with pytest.raises(RunStillActive) as refused:
        s.start()
    assert run.run_id in str(refused.value) and "--force" in str(refused.value)
    stopped = s.stop(run.run_id)
    assert [step.name for step in stopped] == ["step-1"]
    assert s.wait(run.run_id, timeout=30, interval=0.2).outcome is Outcome.STOPPED
    (tmp_path / "shared" / "go").write_text("yes")
    [done] = s.resume(run.run_id)
    assert (done.step, done.attempt) == ("step-1", 2)
    assert s.wait(run.run_id, timeout=30, interval=0.2).outcome is Outcome.SUCCEEDED
    assert s.resume(run.run_id) == []
    assert steps_of(shared_server, run.run_id) == {"step-0/1": 1, "step-1/1": 1, "step-1/2": 1}


def test_unknown_runs_are_errors_that_list_the_known_ones(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}], shared_server.pool)
    s = session(chain, shared_server)
    run = s.start()
    for bad in ("20990101-000000-dead", "../x", ""):
        with pytest.raises(RunNotFound) as error:
            s.status(bad)
        assert run.run_id in str(error.value) and error.value.known == [run.run_id]
    assert sorted(p.name for p in (tmp_path / "chain_info.json.runs").iterdir() if p.name[0] != ".") == [run.run_id]
    s.wait(run.run_id, timeout=30, interval=0.2)


def test_wait_times_out_without_stopping_the_run(tmp_path: Path, shared_server: LocalServer) -> None:
    gate = 'while [ ! -e "$SHARED/go" ]; do sleep 0.05; done'  # runs until the test lets it end
    chain = make_chain(tmp_path, [{"script": gate}], shared_server.pool)
    s = session(chain, shared_server)
    run = s.start()
    with pytest.raises(RunTimeout):
        s.wait(run.run_id, timeout=0.3, interval=0.1)
    with pytest.raises(TimeoutError):  # RunTimeout is also the builtin TimeoutError
        s.wait(run.run_id, timeout=0.1, interval=0.1)
    assert s.status(run.run_id).outcome is Outcome.RUNNING  # neither wait stopped it
    (tmp_path / "shared" / "go").touch()
    assert s.wait(run.run_id, timeout=30, interval=0.2).outcome is Outcome.SUCCEEDED


def step0_succeeded(s: ChainSession, run_id: str) -> None:
    """Wait for step 0 without advancing (``wait`` in watch mode would submit step 1 itself)."""
    end = time.monotonic() + 30
    while s.status(run_id).steps[0].status != "Succeeded":
        assert time.monotonic() < end
        time.sleep(0.1)


class LostAnswers:
    """The real client, except that creates are stored and then answered 503 (or refused first)."""

    def __init__(self, client: AIHCClient, stored: bool) -> None:
        self.client, self.stored = client, stored
        self.endpoint = client.endpoint

    def create_job(self, pool: str, body: Dict[str, Any], client_token: Optional[str] = None) -> Dict[str, Any]:
        if self.stored:
            self.client.create_job(pool, body, client_token=client_token)
        raise AIHCError("the service is temporarily unavailable", status=503, code="ServiceUnavailable")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)


@pytest.mark.parametrize("stored", [True, False])
def test_an_advance_that_gives_up_never_leads_to_a_duplicate(tmp_path: Path, shared_server: LocalServer,
                                                             stored: bool, capsys: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}], shared_server.pool)
    s = session(chain, shared_server)
    run = s.start(mode="watch")  # no tail: this test plays the in-job advance itself
    step0_succeeded(s, run.run_id)
    code = advance(s.frozen(run), LostAnswers(shared_server.client(), stored), run_id=run.run_id, step="step-0",
                   attempt=1, exit_code=0, records=s.records,
                   resume_hint=f"job-chain resume {chain} --run {run.run_id}", deadline=0.5)
    assert code == 75
    hint = capsys.readouterr().err
    assert f"'job-chain resume {chain} --run {run.run_id}'" in hint and "--start" not in hint
    status = s.status(run.run_id)
    if stored:  # the create did happen: the run follows step 1 and settles
        assert s.wait(run.run_id, timeout=30, interval=0.2).outcome is Outcome.SUCCEEDED
    else:  # it did not: the run has failed, saying why, at once
        assert status.outcome is Outcome.FAILED and "could not be submitted" in status.reason
        [done] = s.resume(run.run_id)
        assert (done.step, done.attempt) == ("step-1", 1)
        assert s.wait(run.run_id, timeout=30, interval=0.2).outcome is Outcome.SUCCEEDED
    assert s.resume(run.run_id) == []
    assert steps_of(shared_server, run.run_id) == {"step-0/1": 1, "step-1/1": 1}


def test_a_tail_finds_a_moved_server_through_the_credentials_file(tmp_path: Path, shared_server: LocalServer,
                                                                   capsys: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}], shared_server.pool)
    s = session(chain, shared_server)
    run = s.start(mode="watch")
    step0_succeeded(s, run.run_id)
    dead = AIHCClient(Credentials(f"http://127.0.0.1:{free_port()}", shared_server.ak, shared_server.sk),
                      max_retries=0)
    code = advance(s.frozen(run), dead, run_id=run.run_id, step="step-0", attempt=1, exit_code=0, records=s.records,
                   resume_hint="job-chain resume X", deadline=20, reconnect=shared_server.client)
    assert code == 0, capsys.readouterr().err
    assert "the API moved to" in capsys.readouterr().err
    assert s.wait(run.run_id, timeout=30, interval=0.2).outcome is Outcome.SUCCEEDED


def test_ctrl_c_during_a_submit_says_how_to_finish_safely(tmp_path: Path, shared_server: LocalServer) -> None:
    class Interrupted(LostAnswers):
        def create_job(self, pool: str, body: Dict[str, Any], client_token: Optional[str] = None) -> Dict[str, Any]:
            self.client.create_job(pool, body, client_token=client_token)
            raise KeyboardInterrupt

    chain = make_chain(tmp_path, [{"script": "echo a"}], shared_server.pool)
    s = session(chain, shared_server, client=Interrupted(shared_server.client(), True))
    with pytest.raises(SubmitInterrupted) as error:
        s.start()
    run_id = s.runs()[0].run_id
    assert f"job-chain resume {chain} --run {run_id}" in str(error.value)
    real = session(chain, shared_server)
    assert real.wait(run_id, timeout=30, interval=0.2).outcome is Outcome.SUCCEEDED
    assert real.resume(run_id) == [] and steps_of(shared_server, run_id) == {"step-0/1": 1}


def test_a_clock_ahead_of_the_api_hides_no_step(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}], shared_server.pool)
    s = session(chain, shared_server)
    run = s.start()
    s.wait(run.run_id, timeout=30, interval=0.2)
    client = shared_server.client()
    client.create_job(shared_server.pool, job_body("unrelated-later", "true"))  # newer, not of this run
    run_dir = tmp_path / "chain_info.json.runs" / run.run_id
    record = json.loads((run_dir / "run.json").read_text())
    record["started"] += 15 * 60  # this machine's clock was 15 min ahead of the API's
    (run_dir / "run.json").write_text(json.dumps(record))
    (run_dir / "attempts.json").unlink()
    assert [x.status for x in s.status(run.run_id).steps] == ["Succeeded"]
    for entry in run_dir.glob("step-*"):  # no record of the first job either (an inline run's view)
        entry.unlink()
    (run_dir / "attempts.json").unlink()
    assert [x.status for x in s.status(run.run_id).steps] == ["Succeeded"]


def test_two_runs_whose_ids_meet_get_two_ids(tmp_path: Path, monkeypatch: Any) -> None:
    """Two runs started in the same second whose random parts meet (1 in 65,536 a pair; a team's
    script starting 50 runs at once met it): the second gets a new id instead of failing with
    "already has a revision 1" (the run directory is claimed with mkdir)."""
    from chain_helpers import write_chain
    from memory_api import MemoryAPI

    import job_chain.session.start as start_module

    made = iter(["20261129-120000-aaaa", "20261129-120000-aaaa", "20261129-120000-aaaa", "20261129-120000-bbbb"])
    monkeypatch.setattr(start_module, "new_run_id", lambda: next(made))
    chain = write_chain(tmp_path, "pool-local", [{"name": "train", "script": "true"}])
    api = MemoryAPI()
    s = ChainSession.from_file(str(chain), client=api)
    first = s.start()
    api.finish(next(iter(api.jobs)), 0)
    second = s.start()
    assert (first.run_id, second.run_id) == ("20261129-120000-aaaa", "20261129-120000-bbbb")
    assert [r.run_id for r in s.runs()] == [second.run_id, first.run_id]
