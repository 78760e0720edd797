"""The rules each decided once (job_chain/rules/state.py, joins.py), in-process: the cases where the
copies they replaced disagreed are pinned here, so a second copy that drifts has a test to fail."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest
from chain_helpers import recorded_run

from job_chain.rules import joins
from job_chain.rules import plan as plan_
from job_chain.rules.state import AttemptFacts, causes_counted, failed, next_attempt, planner_state


def jobs(**settings: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [{"name": "a", "jobSpec": {"command": "true", "image": "local"}, **settings}]


@pytest.fixture
def budgets(tmp_path: Path) -> Any:
    """A step with budgets per cause: 2 infra failures, none of any other cause."""
    chain, _ = recorded_run(tmp_path / "chain_info.json", "pool-x", jobs(jobChain={"retries": {"infra": 2}}))
    return chain.named("a")


@pytest.fixture
def plain(tmp_path: Path) -> Any:
    chain, _ = recorded_run(tmp_path / "chain_info.json", "pool-x", jobs(jobChain={"retries": 1}))
    return chain.named("a")


def test_a_stop_is_not_a_failure_whatever_the_killed_script_exited(plain: Any) -> None:
    killed = AttemptFacts(1, status="Stopped", exit_code=143)  # the tail recorded SIGTERM's exit
    assert not failed(killed)
    assert planner_state(plain, killed) == plan_.STOPPED
    assert planner_state(plain, AttemptFacts(1, status="Stopping", exit_code=143)) == plan_.ACTIVE  # not over yet


def test_the_record_alone_decides_a_failure_and_its_retry(plain: Any) -> None:
    assert planner_state(plain, AttemptFacts(1, exit_code=3)) == plan_.RETRY_DUE  # status not asked
    assert planner_state(plain, AttemptFacts(2, exit_code=3)) == plan_.FAILED  # its one retry used
    assert planner_state(plain, AttemptFacts(1, exit_code=0)) == plan_.ACTIVE  # reporting: marker next
    assert planner_state(plain, AttemptFacts(1, exit_code=0, succeeded=True)) == plan_.SUCCEEDED
    assert planner_state(plain, AttemptFacts(1, status="Running")) == plan_.ACTIVE


def test_a_failure_not_classified_yet_counts_as_unknown_everywhere(budgets: Any) -> None:
    earlier = AttemptFacts(1, status="Failed", cause="infra")
    unclassified = AttemptFacts(2, exit_code=1)  # failed, its cause not kept yet
    assert causes_counted(budgets, [earlier, unclassified], 2) == ["infra", "unknown"]
    assert planner_state(budgets, unclassified, ["infra", "unknown"]) == plan_.FAILED  # unknown has no budget
    assert causes_counted(budgets, [earlier, AttemptFacts(2, exit_code=1, cause="infra")], 2) == ["infra", "infra"]


def test_budgets_count_only_failures_of_this_revision_up_to_the_attempt(budgets: Any) -> None:
    stopped = AttemptFacts(1, status="Stopped")  # stopped, then resumed: not a failure
    later = AttemptFacts(3, status="Failed", cause="infra")  # after the attempt being decided
    assert causes_counted(budgets, [stopped, AttemptFacts(2, exit_code=1, cause="infra"), later], 2) == ["infra"]
    assert causes_counted(budgets, [], 1) == ["unknown"]  # the attempt decided on always counts


def test_the_next_attempt_follows_the_latest_and_never_falls_below_the_revision(plain: Any) -> None:
    from dataclasses import replace

    assert next_attempt(plain, None) == 1 and next_attempt(plain, 1) == 2
    rerun = replace(plain, first_attempt=5)  # a resume re-runs it from attempt 5
    assert next_attempt(rerun, None) == 5 and next_attempt(rerun, 2) == 5 and next_attempt(rerun, 6) == 7


@pytest.mark.parametrize("troubled, capped, mine, deps, expected", [
    (False, False, False, True, plan_.ACTIVE),  # a split still creating it: its tail will report
    (True, False, False, True, plan_.NOT_SUBMITTED),  # a failure on record: it may never be created
    (False, True, False, True, plan_.NOT_SUBMITTED),  # it waits for a slot: the slot rules start it
    (False, False, True, True, plan_.NOT_SUBMITTED),  # this job's own to create
    (False, False, False, False, plan_.NOT_SUBMITTED),  # it still waits for what it needs
])
def test_a_step_not_submitted_yet_is_decided_once(troubled: bool, capped: bool, mine: bool, deps: bool,
                                                  expected: str) -> None:
    assert joins.unseen_state(troubled=troubled, capped=capped, mine=mine, deps_succeeded=deps) == expected


def test_a_join_is_ready_waits_or_goes_to_the_planner() -> None:
    s, a, n = plan_.SUCCEEDED, plan_.ACTIVE, plan_.NOT_SUBMITTED
    assert joins.join_ready([s, s], troubled=False) is True
    assert joins.join_ready([s, a], troubled=False) is False  # still going: it will see this marker
    assert joins.join_ready([s, n], troubled=False) is False  # not submitted yet: whoever creates it
    assert joins.join_ready([s, n], troubled=True) is None  # ...unless something failed
    for wrong in (plan_.FAILED, plan_.RETRY_DUE, plan_.STOPPED, joins.ASK):
        assert joins.join_ready([s, wrong], troubled=False) is None
    assert joins.troubled({"failure": {("a", 1): "failure-a-attempt-1.json"}, "advance-failed": {}})
    assert not joins.troubled({"failure": {}, "advance-failed": {}})
