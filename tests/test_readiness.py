"""Joins decided from the run record (job_chain/hop/readiness.py), in-process: what the record
alone decides, and exactly where the API is asked (by job id) because the record cannot know."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Optional

from chain_helpers import RECORDED_RUN as RUN
from chain_helpers import diamond_jobs, recorded_run

from job_chain.engine.jobs import Job
from job_chain.failures.classify import Failure
from job_chain.hop.readiness import kept_causes, look
from job_chain.record.records import RunRecords
from job_chain.rules import plan as plan_
from job_chain.rules.state import AttemptFacts, planner_state
from job_chain.spec.model import Chain


def diamond(tmp_path: Path, **top: Any) -> Chain:
    """a → (b, c) → d, plus a failure handler when ``handler``; a succeeded, b and c submitted in job mode."""
    handler = [{"name": "cleanup", "jobSpec": {"command": "true", "image": "local"}, "jobChain": {"runOn": "failure"}}]
    chain, _ = recorded_run(tmp_path / "chain_info.json", "p", diamond_jobs(*(handler if top.pop("handler", False)
                                                                              else [])), submitted="abc",
                            succeeded="a", **top)
    return chain


def succeed(records: RunRecords, step: str, attempt: int = 1) -> None:
    records.record_exit(RUN, step, attempt, 0)
    records.record_succeeded(RUN, step, attempt)


class Jobs:
    """The ``job(id)`` look-up ``look`` is given: answers from a table, and notes every question."""

    def __init__(self, statuses: Optional[Dict[str, str]] = None) -> None:
        self.statuses, self.asked = statuses or {}, []  # type: Dict[str, str], List[str]

    def __call__(self, job_id: str) -> Job:
        self.asked.append(job_id)
        return Job(job_id, status=self.statuses[job_id])


def decide(chain: Chain, me: str, jobs: Jobs, *, watchers: bool = False, succeeded: bool = True) -> plan_.Plan:
    records = RunRecords(chain.path)
    if succeeded:
        succeed(records, me)
    else:
        records.record_exit(RUN, me, 1, 3)
    states, _ = look(chain, records, RUN, chain.named(me), succeeded, job=jobs,  # type: ignore[arg-type]
                     watchers=watchers, stopped=False)
    return plan_.plan(chain, states)


def test_a_join_whose_other_branch_has_not_reported_is_not_ready_and_nothing_is_asked(tmp_path: Path) -> None:
    chain, jobs = diamond(tmp_path), Jobs()
    plan = decide(chain, "b", jobs)
    assert plan.ready == [] and not plan.ended and jobs.asked == []


def test_the_branch_that_sees_every_marker_finds_the_join_ready(tmp_path: Path) -> None:
    chain, jobs = diamond(tmp_path), Jobs()
    succeed(RunRecords(chain.path), "c")
    assert decide(chain, "b", jobs).ready == [3] and jobs.asked == []


def test_a_step_submitted_where_no_tail_reports_is_asked_for_by_id(tmp_path: Path) -> None:
    chain = diamond(tmp_path)
    RunRecords(chain.path).record_submission(RUN, "c", 1, "job-c", "c", mode="watch")
    jobs = Jobs({"job-c": "Succeeded"})
    assert decide(chain, "b", jobs).ready == [3] and jobs.asked == ["job-c"]


def test_a_success_of_an_earlier_revision_does_not_count(tmp_path: Path) -> None:
    chain, jobs = diamond(tmp_path), Jobs()
    records = RunRecords(chain.path)
    succeed(records, "c")  # attempt 1 ran the old content; resume --rerun c made attempt 2 the first
    chain.named("c").first_attempt = 2  # type: ignore[union-attr]
    records.record_submission(RUN, "c", 2, "job-c2", "c", mode="job")
    assert decide(chain, "b", jobs).ready == [] and jobs.asked == []
    succeed(records, "c", 2)
    assert decide(chain, "b", jobs).ready == [3]


def test_an_excluded_step_counts_as_done(tmp_path: Path) -> None:
    chain, jobs = diamond(tmp_path), Jobs()
    chain.named("c").excluded = "before --start"  # type: ignore[union-attr]
    assert decide(chain, "b", jobs).ready == [3] and jobs.asked == []


def test_a_failed_branch_blocks_the_join_from_its_exit_code(tmp_path: Path) -> None:
    chain, jobs = diamond(tmp_path), Jobs()
    RunRecords(chain.path).record_exit(RUN, "c", 1, 3)
    plan = decide(chain, "b", jobs)
    assert plan.ready == [] and plan.blocked == {3: "needs c"} and plan.ended and plan.failed and jobs.asked == []


def test_with_handlers_a_job_lost_without_its_tail_still_ends_the_run(tmp_path: Path) -> None:
    """c's job ended without its tail running (evicted): no marker ever. b is the last to finish,
    handlers wait for the run's end: b asks the API for c, by id, and sees the run ended."""
    chain = diamond(tmp_path, handler=True)
    lost = Jobs({"job-c": "Failed"})
    plan = decide(chain, "b", lost, watchers=True)
    assert lost.asked == ["job-c"] and plan.ended and plan.failed and plan.handlers == [4]
    going = Jobs({"job-c": "Running"})  # c is still running: its own tail will look when it ends
    assert not decide(chain, "b", going, watchers=True).ended and going.asked == ["job-c"]


def test_with_handlers_the_question_stops_at_the_first_step_still_going(tmp_path: Path) -> None:
    jobs: List[Dict[str, Any]] = [{"name": n, "jobSpec": {"command": "true", "image": "local"}}
                                  for n in ["split", "w0", "w1", "w2", "w3"]]
    for job in jobs[1:]:
        job["jobChain"] = {"dependsOn": ["split"]}
    chain, _ = recorded_run(tmp_path / "chain_info.json", "p", jobs, submitted=[], succeeded=["split"],
                            notify=[{"url": "http://127.0.0.1:9/hook", "on": ["failed"]}])
    records = RunRecords(chain.path)
    for name in ["w0", "w1", "w2", "w3"]:
        records.record_submission(RUN, name, 1, f"job-{name}", name, mode="job")
    asked = Jobs({f"job-w{i}": "Running" for i in range(4)})
    assert not decide(chain, "w0", asked, watchers=True).ended
    assert len(asked.asked) == 1  # one still going answers it: the run has not ended
    quiet = Jobs()
    assert not decide(chain, "w1", quiet, watchers=False).ended and quiet.asked == []



def test_a_failure_not_classified_yet_counts_as_unknown_in_budgets_per_cause(tmp_path: Path) -> None:
    """As the advance, status and the failing job itself count it: never as the cause before it."""
    jobs = diamond_jobs()
    for job in jobs[1:3]:
        job["jobChain"]["retries"] = {"infra": 2, "user": 0}
    chain, records = recorded_run(tmp_path / "chain_info.json", "p", jobs, submitted="abc", succeeded="a")
    c = chain.named("c")
    records.record_exit(RUN, "c", 1, 1)
    records.record_failure(RUN, "c", 1, Failure("infra").to_record())
    records.record_exit(RUN, "c", 2, 1)  # its tail has not classified it yet
    assert kept_causes(records, RUN, c, 2) == ["infra", "unknown"]
    unknown_has_no_budget = planner_state(c, AttemptFacts(2, exit_code=1), kept_causes(records, RUN, c, 2))
    assert unknown_has_no_budget == plan_.FAILED
    b = chain.named("b")  # attempt 1 stopped (no exit record: its tail never ran), resumed as attempt 2
    records.record_exit(RUN, "b", 2, 1)
    records.record_failure(RUN, "b", 2, Failure("infra").to_record())
    assert kept_causes(records, RUN, b, 2) == ["infra"]
    assert planner_state(b, AttemptFacts(2, exit_code=1), kept_causes(records, RUN, b, 2)) == plan_.RETRY_DUE
