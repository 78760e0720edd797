"""The in-job advance and the session on the in-memory API (tests/memory_api.py): what is sent,
call by call, in milliseconds. The same runs on the real server: tests/test_chain_run.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
