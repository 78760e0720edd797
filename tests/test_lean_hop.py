"""Planned hops: the plan written when a step is submitted is a cache of the one advance
(job_chain/hop/advance.py). The plan is made by the code that submits, so its request is exactly
what the advance would send; while it holds, the tail never thaws the chain; what it does not
cover is decided from the chain by the same path, idempotently.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from chain_helpers import diamond_jobs, recorded_run
from conftest import LocalServer
from test_hop import NEVER, NO_HTTP, heavy, hop, imported, named_by_strings, named_tuples

from job_chain.hop.advance import _partners_ready, advance
from job_chain.submit import plans

# what thawing the frozen chain loads: a planned hop loads none of it
CHAIN_MODEL = ("job_chain.spec.model", "job_chain.spec.frozen", "job_chain.spec.graph", "job_chain.spec.params",
               "job_chain.spec.matrix", "job_chain.record.slots", "job_chain.submit.request", "job_chain.hop.readiness",
               "dataclasses")  # the model's dataclasses: the SDK does not load the module, nor may our client


RUN = "20260101-000000-1ea0"  # each test that runs jobs on the shared server has a run of its own


def line(*names: str, **extra: Any) -> List[Dict[str, Any]]:
    return [{"name": n, "jobSpec": {"command": "true", "image": "local"}, **extra.get(n, {})} for n in names]


def plan_file(chain: Path, step: str, attempt: int = 1, run: str = RUN) -> Path:
    return Path(f"{chain}.runs") / run / f"lean-{step}-attempt-{attempt}.json"


# -- plans, in-process -----------------------------------------------------------------------------
class Recorder:
    """An in-memory API that keeps what each create was sent (body and client token)."""

    def __init__(self) -> None:
        self.created: List[Dict[str, Any]] = []

    def create_job(self, pool: str, body: Dict[str, Any], client_token: Any = None) -> Dict[str, Any]:
        self.created.append({"body": body, "token": client_token})
        return {"jobId": f"job-{len(self.created)}", "jobName": body["name"]}


def test_a_plan_is_what_the_full_advance_sends_for_each_step_of_the_line(tmp_path: Path) -> None:
    chain, records = recorded_run(tmp_path / "chain_info.json", "pool-x", line("a", "b", "c", "d"), submitted="a",
                                  run_id=RUN)
    steps = plans.plan(chain, RUN, chain.named("a"))
    assert [(s["step"], s["next"], s["attempt"]) for s in steps] == [("a", "b", 1), ("b", "c", 1), ("c", "d", 1)]
    sent = Recorder()
    for entry in steps:  # each step's success, decided the full way (no plan file): what is created
        code = advance(chain, sent, run_id=RUN, step=entry["step"], attempt=1, exit_code=0,  # type: ignore[arg-type]
                       records=records, resume_hint="resume", deadline=0)
        assert code == 0
    assert [(c["body"], c["token"]) for c in sent.created] == [(s["body"], s["token"]) for s in steps]
    assert len(plans.plan(chain, RUN, chain.named("a"), ahead=2)) == 2
    assert plans.plan(chain, RUN, chain.named("d")) == []  # the last step: the full advance says the chain is done


def test_what_a_plan_stands_for_is_what_the_advance_reads_of_the_finishing_step(tmp_path: Path) -> None:
    """A planned step's facts are the defaults (Finishing.planned): every step a plan covers has exactly
    those, and a step with any other is never planned, so no feature of the advance is skipped."""
    jobs = line("a", "b", "c", "d", "e", b={"jobChain": {"checkpoint": {"dir": "/ckpt"}}},
                c={"jobSpec": {"command": "true", "image": "local", "replicas": 2}})
    chain, _ = recorded_run(tmp_path / "chain_info.json", "pool-x", jobs)
    for step in chain.steps:
        facts = plans.finishing(chain, step)
        assert (plans.follower(chain, step) is not None) <= (facts == plans.Finishing.planned(step.name))
    assert plans.follower(chain, chain.named("b")) is None and plans.follower(chain, chain.named("c")) is None


@pytest.mark.parametrize("jobs, first, expected", [
    (diamond_jobs(), "a", []),  # a split starts two
    (diamond_jobs(), "b", ["b"]),  # a join: decided from the record
    (diamond_jobs({"name": "h", "jobSpec": {"command": "true", "image": "local"}, "jobChain": {"runOn": "always"}}),
     "b", []),  # a handler waits for the run's end: the full advance asks the API where the record cannot say
    (line("a", "b", "c", b={"jobChain": {"checkpoint": {"dir": "/ckpt"}}}), "a", ["a"]),  # b reads its checkpoint
    (line("a", "b", "c", b={"jobSpec": {"command": "true", "image": "local", "replicas": 2}}), "a", ["a"]),
    (line("a", "b", "c", c={"jobSpec": {"command": "echo ${steps.b.outputs.x}", "image": "local"}}), "a",
     ["a"]),  # c needs b's outputs, known only when b ends
])
def test_a_plan_stops_where_the_full_advance_must_look(tmp_path: Path, jobs: List[Dict[str, Any]], first: str,
                                                       expected: List[str]) -> None:
    chain, _ = recorded_run(tmp_path / "chain_info.json", "pool-x", jobs)
    assert [s["step"] for s in plans.plan(chain, RUN, chain.named(first))] == expected


# -- following a plan, in a real job's tail ----------------------------------------------------------
def started_line(directory: Path, server: LocalServer, run: str, *names: str) -> Path:
    """A job-mode run of a line recorded as its first step submitted, with that step's plan."""
    chain, records = recorded_run(directory / "chain_info.json", server.pool, line(*names), server=server,
                                  submitted=names[0], run_id=run)
    plans.plan_submitted(chain, records, run, chain.named(names[0]), 1)
    return directory / "chain_info.json"


def wait_succeeded(server: LocalServer, job_id: str) -> None:
    end = time.monotonic() + 60
    while server.client().get_job(server.pool, job_id)["status"] != "Succeeded":
        assert time.monotonic() < end, f"job {job_id} did not succeed"
        time.sleep(0.1)


def test_a_planned_hop_submits_without_the_chain_model_and_the_line_goes_on(tmp_path: Path,
                                                                              shared_server: LocalServer) -> None:
    from job_chain.record.records import RunRecords

    run = "20260101-000000-1ea1"
    chain = started_line(tmp_path, shared_server, run, "a", "b", "c")
    done = hop(chain, "a", env={"JOB_CHAIN_CREDENTIALS": shared_server.credentials_file}, run=run)
    assert done.returncode == 0, done.stderr
    assert "job-chain: step b submitted job" in done.stderr and "full way" not in done.stderr
    modules = imported(done.stderr)
    assert heavy(modules, NEVER + CHAIN_MODEL) == [], heavy(modules, NEVER + CHAIN_MODEL)
    assert named_by_strings(modules) == [] and "shlex" not in modules  # it quotes a resume hint only to say it
    assert "job_chain.engine.jobs" not in modules  # it creates a job and reads none: no view of one is built
    assert named_tuples(modules) == []  # its facts, credentials and answers are plain: none costs it ~0.3 ms
    assert "baidubce.auth.bce_v1_signer" in modules and "baidubce.http.bce_http_client" in modules
    records = RunRecords(str(chain))
    assert records.script_exit(run, "a", 1) == 0 and records.succeeded(run, "a", 1)
    exit_entry = records.exit_entry(run, "a", 1) or {}
    assert exit_entry.get("ended") and exit_entry.get("planned") is True
    b = records.submission(run, "b", 1)
    assert b is not None and b["mode"] == "job" and b["revision"] == 1
    passed_on = json.loads(plan_file(chain, "b", run=run).read_text())  # b's tail follows the rest of the plan
    assert [s["step"] for s in passed_on["steps"]] == ["b"]
    assert not plan_file(chain, "a", run=run).exists()  # a's has served: a run keeps no more than it needs
    wait_succeeded(shared_server, b["jobId"])  # b's own tail submits c, and c ends the line
    c = records.submission(run, "c", 1)
    assert c is not None
    wait_succeeded(shared_server, c["jobId"])
    assert records.succeeded(run, "c", 1)


def test_a_second_tail_finds_the_next_step_submitted_and_creates_nothing(tmp_path: Path,
                                                                          shared_server: LocalServer) -> None:
    run = "20260101-000000-1ea2"
    chain = started_line(tmp_path, shared_server, run, "a", "b")
    env = {"JOB_CHAIN_CREDENTIALS": shared_server.credentials_file}
    first = hop(chain, "a", env=env, importtime=False, run=run)
    again = hop(chain, "a", env=env, importtime=False, run=run)
    assert first.returncode == again.returncode == 0, first.stderr + again.stderr
    assert "step b submitted job" in first.stderr and "step b was already submitted as job" in again.stderr
    jobs = [j for j in shared_server.client().list_jobs(shared_server.pool, page_size=100)["jobs"]
            if {"key": "job-chain/run", "value": run} in (j.get("labels") or []) and j["name"] == "b"]
    assert len(jobs) == 1


@pytest.mark.parametrize("spoil, run", [("revision", "20260101-000000-1ea3"), ("damaged", "20260101-000000-1ea4"),
                                        ("stopped", "20260101-000000-1ea5")])
def test_what_the_plan_did_not_foresee_goes_to_the_full_advance(tmp_path: Path, shared_server: LocalServer,
                                                                spoil: str, run: str) -> None:
    from job_chain.record.records import RunRecords

    chain = started_line(tmp_path, shared_server, run, "a", "b")
    records = RunRecords(str(chain))
    if spoil == "revision":  # as after a resume that changed the run: the plan is of revision 1
        frozen = json.loads((Path(f"{chain}.runs") / run / "revision-1.json").read_text())["chain"]
        records.freeze(run, frozen, revision=2, reason="resumed")
        records.update_run(run, revision=2)
    elif spoil == "damaged":
        plan_file(chain, "a", run=run).write_text("{not json")
    else:
        records.mark_stopped(run)
    done = hop(chain, "a", env={"JOB_CHAIN_CREDENTIALS": shared_server.credentials_file}, run=run)
    assert done.returncode == 0, done.stderr
    assert "job_chain.hop.advance" in imported(done.stderr)  # the full advance decided
    if spoil == "stopped":
        assert "was stopped by the user; not submitting anything" in done.stderr
        assert records.submission(run, "b", 1) is None
    else:
        assert "step b submitted job" in done.stderr and records.submission(run, "b", 1) is not None


def test_a_planned_join_waits_from_the_record_and_the_last_branch_submits_it(tmp_path: Path,
                                                                               shared_server: LocalServer) -> None:

    run = "20260101-000000-1ea6"
    chain, records = recorded_run(tmp_path / "chain_info.json", shared_server.pool, diamond_jobs(),
                                  server=shared_server, submitted="abc", succeeded="a", run_id=run)
    for branch in "bc":
        plans.plan_submitted(chain, records, run, chain.named(branch), 1)
    assert json.loads(plan_file(Path(chain.path), "b", run=run).read_text())["steps"][0]["needs"] == {"c": 1}
    env = {"JOB_CHAIN_CREDENTIALS": shared_server.credentials_file}
    first = hop(Path(chain.path), "b", env=env, run=run)  # c is still running: its tail will see b's marker
    assert first.returncode == 0, first.stderr
    assert "job-chain: step b succeeded; its dependents also wait for c" in first.stderr
    assert heavy(imported(first.stderr), NEVER + CHAIN_MODEL + NO_HTTP) == []
    assert named_by_strings(imported(first.stderr)) == [] and "shlex" not in imported(first.stderr)
    assert records.submission(run, "d", 1) is None
    last = hop(Path(chain.path), "c", env=env, run=run)
    assert last.returncode == 0, last.stderr
    assert "job-chain: step d submitted job" in last.stderr
    assert heavy(imported(last.stderr), NEVER + CHAIN_MODEL) == []
    assert named_by_strings(imported(last.stderr)) == [] and "shlex" not in imported(last.stderr)
    assert "job_chain.engine.jobs" not in imported(last.stderr)
    d = records.submission(run, "d", 1)
    assert d is not None
    wait_succeeded(shared_server, d["jobId"])


def test_a_failed_branch_leaves_the_join_to_the_full_advance(tmp_path: Path) -> None:
    chain, records = recorded_run(tmp_path / "chain_info.json", "pool-x", diamond_jobs(), submitted="abc",
                                  succeeded="a", run_id=RUN)
    plans.plan_submitted(chain, records, RUN, chain.named("b"), 1)
    records.record_exit(RUN, "c", 1, 3)
    assert _partners_ready(records, RUN, {"c": 1}) is None
    records.record_exit(RUN, "c", 2, 0)
    records.record_succeeded(RUN, "c", 2)
    assert _partners_ready(records, RUN, {"c": 1}) is True  # its retry succeeded
    assert _partners_ready(records, RUN, {"c": 3}) is False  # not submitted in this revision yet: it will report
    records.record_failure(RUN, "c", 1, {"class": "user"})
    assert _partners_ready(records, RUN, {"c": 3}) is None  # ...unless something failed: it may never be
    records.record_submission(RUN, "c", 3, "job-c3", "c", mode="watch")
    assert _partners_ready(records, RUN, {"c": 3}) is None  # its tail does not report here
    records.record_submission(RUN, "c", 4, "job-c4", "c", mode="job")
    assert _partners_ready(records, RUN, {"c": 4}) is False  # it will report, and see b's marker
    records.record_exit(RUN, "c", 4, 0)
    assert _partners_ready(records, RUN, {"c": 4}) is False  # its tail is between its exit and its marker
    records.record_exit(RUN, "c", 4, 1)
    assert _partners_ready(records, RUN, {"c": 4}) is None  # it failed after all


def test_an_api_error_in_a_planned_hop_is_recorded_as_every_advance_records_it(tmp_path: Path) -> None:
    chain, records = recorded_run(tmp_path / "chain_info.json", "pool-x", line("a", "b"), submitted="a", run_id=RUN)
    plans.plan_submitted(chain, records, RUN, chain.named("a"), 1)
    # nothing listens on port 9: the planned create fails and the advance gives up (a deadline of 0)
    secret = "sk-never-in-a-log-0123456789"
    done = hop(chain.path, "a", env={"JOB_CHAIN_ADVANCE_DEADLINE": "0", "AIHC_HOST": "http://127.0.0.1:9",
                                     "AIHC_AK": "ak-lean", "AIHC_SK": secret}, run=RUN)
    assert done.returncode == 75, done.stderr
    assert "step b could not be submitted" in done.stderr and "resume" in done.stderr and secret not in done.stderr
    assert records.advance_failure(RUN, "a", 1) is not None
    assert heavy(imported(done.stderr), CHAIN_MODEL) == []  # the plan still stood for the chain


def test_a_look_at_a_finished_run_whose_jobs_are_cached_loads_no_sdk(tmp_path: Path,
                                                                      shared_server: LocalServer) -> None:
    """status of a finished run asks the API nothing once its jobs are cached: the client (and the
    SDK under it) is made only when a request is needed."""
    import os
    import subprocess
    import sys

    from chain_helpers import cli, cli_here, make_chain

    chain = make_chain(tmp_path, [{"script": "echo one"}, {"script": "echo two"}], shared_server.pool)
    assert cli_here("run", str(chain), "--follow", server=shared_server).returncode == 0
    first = cli("status", str(chain), server=shared_server)  # caches the finished attempts
    assert first.returncode == 0 and "succeeded" in first.stdout
    env = dict(os.environ, JOB_CHAIN_CREDENTIALS=shared_server.credentials_file)
    again = subprocess.run([sys.executable, "-X", "importtime", "-m", "job_chain", "status", str(chain)],
                           capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout
    assert heavy(imported(again.stderr), ("baidubce", "job_chain.aihc.client", "http.client")) == []



def test_a_splits_branches_are_planned_before_they_are_created(tmp_path: Path, shared_server: LocalServer) -> None:
    """So a branch that ends while its siblings are still being created follows its plan too (they
    count as still to report) instead of thawing the chain beside the creates."""
    from job_chain.hop.advance import advance

    run = "20260101-000000-1ea7"
    names = [f"w{i}" for i in range(6)]
    jobs = line("split", *names, "merge", **{n: {"jobChain": {"dependsOn": ["split"]}} for n in names},
                merge={"jobChain": {"dependsOn": names}})
    chain, records = recorded_run(tmp_path / "chain_info.json", shared_server.pool, jobs, server=shared_server,
                                  submitted="split", run_id=run)
    planned_first: Dict[str, bool] = {}

    class Spy:  # the real client, noting whether each branch's plan was there when it was created
        def __init__(self, client: Any) -> None:
            self.client = client

        def __getattr__(self, name: str) -> Any:
            return getattr(self.client, name)

        def create_job(self, pool: str, body: Dict[str, Any], **kwargs: Any) -> Dict[str, Any]:
            planned_first[body["name"]] = plan_file(Path(chain.path), body["name"], run=run).exists()
            return self.client.create_job(pool, body, **kwargs)

    records.record_exit(run, "split", 1, 0)
    code = advance(chain, Spy(shared_server.client()), run_id=run, step="split", attempt=1, exit_code=0,
                   records=records, resume_hint="resume", deadline=30)
    assert code == 0 and planned_first == {n: True for n in names}
    merge = None
    end = time.monotonic() + 60
    while merge is None:  # the branches' own tails, by their plans, submit the merge
        assert time.monotonic() < end, "the merge was never submitted"
        merge = records.submission(run, "merge", 1)
        time.sleep(0.1)
    wait_succeeded(shared_server, merge["jobId"])
    assert [n for n in names if (records.exit_entry(run, n, 1) or {}).get("planned") is not True] == []


def test_a_planned_hop_reads_its_plan_file_once(tmp_path: Path, monkeypatch: Any) -> None:
    """The tail reads the plan for what it creates and for the API version its client needs: once."""
    from job_chain.hop.entry import run_advance
    from job_chain.record import plans as plan_files
    from job_chain.submit.plans import plan_submitted

    chain, records = recorded_run(tmp_path / "chain_info.json", "pool-x", line("a", "b"), submitted="a", run_id=RUN)
    plan_submitted(chain, records, RUN, chain.named("a"), 1)
    reads: List[Any] = []
    real = plan_files.read_plan
    monkeypatch.setattr(plan_files, "read_plan", lambda *a: reads.append(a) or real(*a))
    sent = Recorder()
    code = run_advance(config_path=str(tmp_path / "chain_info.json"), run_id=RUN, step="a", attempt=1, exit_code=0,
                       connect=lambda **_: sent)
    assert code == 0 and [c["body"]["name"] for c in sent.created] == ["b"]
    assert len(reads) == 1
