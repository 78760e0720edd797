"""The in-job advance and the session on the in-memory API (tests/memory_api.py): what is sent,
call by call, in milliseconds. The same runs on the real server: tests/test_chain_run.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List

from chain_helpers import make_chain
from memory_api import MemoryAPI

from job_chain import ChainSession
from job_chain.hop.advance import advance


def test_repeated_advance_sends_one_create_and_the_same_token_once_the_record_is_gone(
        tmp_path: Path, capsys: Any) -> None:
    api = MemoryAPI()
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}], "pool-local")
    s = ChainSession.from_file(str(chain), client=api)
    run = s.start()
    [first] = api.creates
    assert first.labels["job-chain/step"] == "step-0" and first.created
    api.finish(first.job_id, 0)  # step 0's script ended: its tail advances

    def step_0_ends_again() -> int:
        return advance(s.frozen(run), api, run_id=run.run_id, step="step-0", attempt=1, exit_code=0,
                       records=s.records, resume_hint=f"job-chain resume {chain} --run {run.run_id}")

    assert step_0_ends_again() == 0
    second = api.creates[1]
    labels = second.labels
    assert (labels["job-chain/step"], labels["job-chain/attempt"], second.created) == ("step-1", "1", True)
    assert second.client_token and run.run_id in second.client_token
    # a pod restart, a fault-tolerance re-run or a retried call: the record says it is done, nothing is sent
    for _ in range(3):
        assert step_0_ends_again() == 0
        assert "already submitted" in capsys.readouterr().err
    assert len(api.creates) == 2
    # with the record gone, the create is sent again, with the same token: the API gives the same job back
    for entry in (chain.parent / (chain.name + ".runs") / run.run_id).glob("step-step-1-*"):
        entry.unlink()
    assert step_0_ends_again() == 0
    third = api.creates[2]
    assert (third.client_token, third.job_id, third.created) == (second.client_token, second.job_id, False)
    assert third.body == second.body
    assert len(api.jobs) == 2


def test_a_join_whose_markers_cannot_be_written_fails_loudly_and_resume_continues_it(
        tmp_path: Path, capsys: Any, monkeypatch: Any) -> None:
    # a -> (b, c) -> d with the disk under the run record full: each branch read the other's missing
    # marker, took "its dependents also wait for ..." and stopped; d was never submitted.
    import errno
    import json
    import sys

    from job_chain.record import records as records_module

    for name in "abcd":
        (tmp_path / f"{name}.sh").write_text("true\n")
    after = {"b": ["a"], "c": ["a"], "d": ["b", "c"]}
    mounted = [{"type": "pfs", "name": "pfs", "mountPath": str(tmp_path)}]  # the chain's folder, as on AIHC
    jobs = [{"name": n, "jobSpec": {"command": f"{n}.sh", "image": "local"}, "datasources": mounted,
             **({"jobChain": {"dependsOn": after[n], "retries": 2}} if n in after else {})} for n in "abcd"]
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": "pool-local", "jobs": jobs}))
    api = MemoryAPI()
    s = ChainSession.from_file(str(chain), client=api)
    run = s.start()
    hint = f"job-chain resume {chain} --run {run.run_id}"

    def hop(step: str, attempt: int = 1) -> int:  # the script exited 0: its tail runs, the job ends as it says
        job = next(c.job_id for c in api.creates if c.labels["job-chain/step"] == step
                   and c.labels["job-chain/attempt"] == str(attempt))
        code = advance(s.frozen(run), api, run_id=run.run_id, step=step, attempt=attempt, exit_code=0,
                       records=s.records, resume_hint=hint)
        said = capsys.readouterr().err
        sys.stderr.write(said)
        api.finish(job, code, log=said)
        return code

    assert hop("a") == 0
    capsys.readouterr()
    real = records_module.write_json_private

    def full(path: Any, obj: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(records_module, "write_json_private", full)
    codes = [hop("b"), hop("c")]
    said = capsys.readouterr().err
    assert codes == [75, 75]  # the job fails: its exit says the step could not advance
    assert said.count("but the run record could not be written") == 2 and "No space left on device" in said
    assert "also wait" not in said and hint in said
    assert [c for c in api.creates if c.labels["job-chain/step"] == "d"] == []
    # the jobs' logs end with that line: status says the run failed, and why
    monkeypatch.setattr(records_module, "write_json_private", real)  # space is freed
    look = s.status(run.run_id)
    assert look.outcome == "failed" and "could not write the run record" in look.reason, look.reason
    causes = {st.name: st.attempts[-1].failure for st in look.steps if st.attempts}
    assert causes["b"].signature == causes["c"].signature == "run-record-unwritable"
    s.resume(run.run_id)
    assert hop("b", 2) == 0 and hop("c", 2) == 0
    assert [c.labels["job-chain/attempt"] for c in api.creates if c.labels["job-chain/step"] == "d"] == ["1"]


def test_a_secret_env_value_in_a_failures_matching_line_is_hidden_wherever_the_line_goes(tmp_path: Path) -> None:
    import json

    from job_chain.util.redaction import REDACTED

    secret = "hf_abcdefghijkl0123"
    (tmp_path / "a.sh").write_text("false\n")
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": "pool-local", "jobs": [{
        "name": "a", "jobSpec": {"command": "a.sh", "image": "local", "envs": [{"name": "HF_TOKEN", "value": secret}]},
        "datasources": [{"type": "pfs", "name": "pfs", "mountPath": str(tmp_path)}],
        "jobChain": {"failureRules": [{"match": "401 for token", "class": "auth"}]}}]}))
    api = MemoryAPI()
    s = ChainSession.from_file(str(chain), client=api)
    run = s.start()
    api.finish(api.creates[0].job_id, 1, log=f"step 1\nHTTP 401 for token {secret} at hub\n")
    assert advance(s.frozen(run), api, run_id=run.run_id, step="a", attempt=1, exit_code=1,
                   records=s.records, resume_hint="resume") == 1
    kept = s.records.failure(run.run_id, "a", 1)
    assert kept is not None and kept["line"] == f"HTTP 401 for token {REDACTED} at hub"
    [step] = s.status(run.run_id).steps
    assert step.attempts[-1].failure.line == f"HTTP 401 for token {REDACTED} at hub"
    record_dir = Path(f"{chain}.runs") / run.run_id
    assert not [p.name for p in record_dir.iterdir() if p.is_file() and secret in p.read_text()
                and not p.name.startswith(("revision-", "run.json"))]


def test_a_one_off_status_retries_its_reads_as_long_as_a_create_would(tmp_path: Path, monkeypatch: Any) -> None:
    # under 30% faults a one-off status gave up (exit 1) after the client's own 4 retries
    from job_chain.aihc.errors import AIHCError
    from job_chain.engine import deadline

    class Flaky(MemoryAPI):
        failures = 0

        def get_job(self, pool: str, job_id: str) -> Any:
            if self.failures < 5:
                self.failures += 1
                raise AIHCError("the service is temporarily unavailable (injected)", status=503)
            return super().get_job(pool, job_id)

    waited: list = []
    monkeypatch.setattr(deadline, "_sleep", waited.append)
    api = Flaky()
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}], "pool-local")
    s = ChainSession.from_file(str(chain), client=api)
    run = s.start()
    api.failures = 0
    look = s.status(run.run_id, patient=True)
    assert api.failures == 5 and waited == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert [st.status for st in look.steps][:1] == ["Running"]


def test_a_step_outside_a_matrix_that_finds_a_capped_point_ready_leaves_it_to_a_slot(tmp_path: Path) -> None:
    """flaky's hop decides the run the full way (a join follows it) and finds sweep-i-3 ready: a point
    waiting for a slot of maxParallel starts only through a slot (a finishing point hands it on),
    never directly — else it runs above the cap, and twice (the hand-on starts its next attempt)."""
    import json

    api = MemoryAPI()
    (tmp_path / "x.sh").write_text("true\n")
    jobs = [{"name": "prep"}, {"name": "flaky", "jobChain": {"dependsOn": ["prep"], "retries": 1}},
            {"name": "sweep", "jobChain": {"dependsOn": ["prep"], "matrix": {"i": [1, 2, 3]}, "maxParallel": 2}},
            {"name": "join", "jobChain": {"dependsOn": ["flaky", "sweep"]}}]
    for job in jobs:
        job["jobSpec"] = {"command": "x.sh", "image": "local"}
        job["datasources"] = [{"type": "pfs", "name": "pfs-chain", "mountPath": str(tmp_path)}]
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": "pool-local", "jobs": jobs}))
    s = ChainSession.from_file(str(chain), client=api)
    run = s.start()

    def ends(step: str, attempt: int = 1, code: int = 0) -> None:
        job = next(c for c in api.creates if c.labels["job-chain/step"] == step
                   and c.labels["job-chain/attempt"] == str(attempt))
        api.finish(job.job_id, code)
        assert advance(s.frozen(run), api, run_id=run.run_id, step=step, attempt=attempt, exit_code=code,
                       records=s.records, resume_hint="resume") == code

    def created() -> List[str]:
        return [f"{c.labels['job-chain/step']}/{c.labels['job-chain/attempt']}" for c in api.creates if c.created]

    ends("prep")
    assert created() == ["prep/1", "flaky/1", "sweep-i-1/1", "sweep-i-2/1"]
    ends("flaky", 1, 3)  # retried
    ends("flaky", 2)  # both slots are taken: sweep-i-3 waits
    assert created() == ["prep/1", "flaky/1", "sweep-i-1/1", "sweep-i-2/1", "flaky/2"]
    ends("sweep-i-1")  # its slot goes to sweep-i-3, at its first attempt
    assert created() == ["prep/1", "flaky/1", "sweep-i-1/1", "sweep-i-2/1", "flaky/2", "sweep-i-3/1"]
