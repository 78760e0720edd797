"""Graph rules in-process: validation with JSON paths, what starts next, skipped steps, durations."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from job_chain.rules import plan as plan_
from job_chain.spec import graph
from job_chain.spec.loader import ChainFileError, check_chain_data
from job_chain.status.summarize import resume_targets, summarize
from job_chain.status.types import Attempt, Outcome, RunFacts


def job(name: str, **settings: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {"name": name, "jobSpec": {"image": "img", "command": f"echo {name}"}}
    if settings:
        body["jobChain"] = settings
    return body


def load(jobs: List[Dict[str, Any]], **top: Any):
    return check_chain_data({"resourcePoolId": "pool", "jobs": jobs, **top}, "/tmp/dag/chain_info.json", local=True)


def problems(jobs: List[Dict[str, Any]], **top: Any) -> List[str]:
    with pytest.raises(ChainFileError) as error:
        load(jobs, **top)
    return error.value.problems


DIAMOND = [job("a"), job("b", dependsOn=["a"]), job("c", dependsOn=[0]), job("d", dependsOn=["b", "c"]),
           job("on-failure", runOn="failure")]


def test_a_chain_without_depends_on_is_a_line_and_handlers_stay_outside() -> None:
    chain = load([job("a"), job("b"), job("alert", runOn="failure"), job("c")])
    assert not chain.graph
    assert [s.depends_on for s in chain.steps] == [(), (0,), (), (1,)]
    assert [s.index for s in chain.handlers] == [2]


def test_depends_on_by_name_or_index_and_roots() -> None:
    chain = load([job("x"), *DIAMOND[:4]])
    assert chain.graph
    assert [s.depends_on for s in chain.steps] == [(), (), (1,), (0,), (2, 3)]  # "c" names index 0


@pytest.mark.parametrize(("jobs", "expected"), [
    ([job("a"), job("b", dependsOn=["nope"])], "jobs[1].jobChain.dependsOn[0]: no job 'nope' in this chain"),
    ([job("a"), job("b", dependsOn=[7])], "jobs[1].jobChain.dependsOn[0]: no job 7 in this chain (known: 0 to 1)"),
    ([job("train", dependsOn=["eval"]), job("eval", dependsOn=["train"])],
     "jobs[0].jobChain.dependsOn: a cycle: train -> eval -> train"),
    ([job("a", dependsOn=["a"])], "jobs[0].jobChain.dependsOn: a cycle: a -> a"),
    ([job("a"), job("h", runOn="failure"), job("b", dependsOn=["h"])],
     "jobs[2].jobChain.dependsOn[0]: 'h' is an exit handler (runOn)"),
    ([job("a"), job("h", runOn="always", dependsOn=["a"])], "jobs[1].jobChain.dependsOn: an exit handler"),
    ([job("a", runOn="sometimes")], "jobs[0].jobChain.runOn: must be \"failure\" or \"always\""),
    ([job("a", timeout="6 hours")], "jobs[0].jobChain.timeout: '6 hours' is not a duration"),
    ([job("a", hangTimeout=-3)], "jobs[0].jobChain.hangTimeout: must be more than 0, found -3"),
    ([job("a", retryOnExitCodes=[0, 300])], "jobs[0].jobChain.retryOnExitCodes: must be a list of exit codes"),
    ([job("a", dependsOn="b")], "jobs[0].jobChain.dependsOn: must be a list of job names or indexes"),
])
def test_graph_problems_name_their_json_path(jobs: List[Dict[str, Any]], expected: str) -> None:
    assert any(p.startswith(expected) for p in problems(jobs)), problems(jobs)


def test_notify_problems_name_their_json_path() -> None:
    found = problems([job("a")], notify=[{"url": "ftp://x", "on": ["exploded"], "format": "telegram"}, 3])
    assert "notify[0].url: must be an http:// or https:// URL, or {\"env\": \"NAME\"}" in found
    assert any(p.startswith("notify[0].on: must be a list of events") for p in found)
    assert any(p.startswith("notify[0].format: must be one of json") for p in found)
    assert "notify[1]: must be an object with url, on, format" in found


@pytest.mark.parametrize(("text", "seconds"), [("6h", 21600), ("30m", 1800), ("1h30m", 5400), ("90s", 90),
                                               ("2d", 172800), (45, 45), ("0s", None), ("h", None),
                                               ("5 m", None), (True, None)])
def test_durations(text: Any, seconds: Any) -> None:
    assert graph.parse_duration(text) == seconds


def test_every_duration_and_aihc_time_is_read_by_one_rule() -> None:
    """A step's timeout, the metrics API's timeStep, the local server's --schedule-delay and local sts
    --duration read a duration one way (util/durations.seconds_of), each with its own bounds; the
    local server takes every time form job-chain reads from AIHC (aihc/timefmt) and writes them the
    same way."""
    from job_chain.aihc.timefmt import iso_utc, metric_step, parse_time
    from job_chain.cli.local import Delay
    from job_chain.local.params import parse_time as query_time
    from job_chain.local.shapes import iso_time
    from job_chain.local.sts import session_seconds

    assert graph.parse_duration("1h30m") == metric_step("1h30m") == Delay().convert("1h30m", None, None) == \
        session_seconds("1h30m") == 5400
    for text in ("2024-07-15T16:52:50Z", "2024-07-15 16:52:50 +0000 UTC", "2024-07-15T16:52:50.250Z",
                 "2024-07-15 16:52:50"):
        when = parse_time(text)
        assert when is not None and query_time("startTime", text) == when.timestamp(), text
    assert iso_time(1721062370.9) == iso_utc(1721062370.9) == "2024-07-15T16:52:50Z" and iso_time(None) == ""


def test_plan_diamond() -> None:
    chain = load(DIAMOND)
    s, a, f = plan_.SUCCEEDED, plan_.ACTIVE, plan_.FAILED
    assert plan_.plan(chain, {}).ready == [0]
    assert plan_.plan(chain, {0: s}).ready == [1, 2]
    half = plan_.plan(chain, {0: s, 1: s, 2: a})
    assert half.ready == [] and not half.ended
    assert plan_.plan(chain, {0: s, 1: s, 2: s}).ready == [3]
    done = plan_.plan(chain, {0: s, 1: s, 2: s, 3: s})
    assert done.ended and not done.failed and done.handlers == []
    broken = plan_.plan(chain, {0: s, 1: f, 2: a})
    assert broken.blocked == {3: "needs b"} and not broken.ended
    over = plan_.plan(chain, {0: s, 1: f, 2: s})
    assert over.ended and over.failed and over.handlers == [4]
    assert plan_.plan(chain, {0: s, 1: plan_.RETRY_DUE, 2: s}).ended is False
    stopped = plan_.plan(chain, {0: s, 1: plan_.STOPPED, 2: s}, stopped=True)
    assert stopped.ended and stopped.ready == [] and stopped.handlers == []  # failure handlers skip a stop


def test_waves_for_the_dry_run() -> None:
    assert plan_.levels(load(DIAMOND)) == [[0], [1, 2], [3]]


NAMES = ["a", "b", "c", "d", "on-failure"]


def attempt(step: int, status: str, attempt: int = 1) -> Attempt:
    import datetime as dt

    when = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)
    return Attempt(NAMES[step], attempt, f"j{step}-{attempt}", status, when, when if status != "Running" else None,
                   0 if status == "Succeeded" else (3 if status == "Failed" else None))


def test_status_of_a_failed_branch_skips_its_descendants_and_waits_for_the_handler() -> None:
    chain = load(DIAMOND)
    facts = RunFacts(started=1.0)
    now = attempt(0, "Succeeded").finished.timestamp() + 5  # type: ignore[union-attr]
    status = summarize(chain, [attempt(0, "Succeeded"), attempt(1, "Failed"), attempt(2, "Succeeded")], facts,
                       run_id="r", now=now)
    assert [(s.status, s.reason) for s in status.steps][3] == ("skipped", "needs b")
    assert status.steps[3].depends_on == [1, 2] and status.steps[4].run_on == "failure"
    assert status.outcome is Outcome.RUNNING  # its failure handler is due
    handled = summarize(chain, [attempt(0, "Succeeded"), attempt(1, "Failed"), attempt(2, "Succeeded"),
                                attempt(4, "Succeeded")], facts, run_id="r", now=now)
    assert handled.outcome is Outcome.FAILED and "step b failed" in handled.reason
    assert resume_targets(handled, chain) == [("b", 2)]  # b again; d follows by itself; a and c are kept


def test_a_linear_chain_still_says_not_submitted_after_a_failure() -> None:
    chain = load([job("a"), job("b"), job("c")])
    status = summarize(chain, [attempt(0, "Succeeded"), attempt(1, "Failed")], RunFacts(started=1.0), run_id="r")
    assert [s.status for s in status.steps] == ["Succeeded", "Failed", "not submitted"]
    assert status.outcome is Outcome.FAILED


def test_the_status_table_shows_what_each_step_needs() -> None:
    from rich.console import Console

    from job_chain.cli.run_view import status_table

    chain = load(DIAMOND)
    status = summarize(chain, [attempt(0, "Succeeded"), attempt(1, "Failed")], RunFacts(started=1.0), run_id="r")
    out = Console(width=200, record=True)
    out.print(status_table(status))
    text = out.export_text()
    assert "NEEDS" in text and "b, c" in text and "after the run (failure)" in text
    assert status.as_json()["graph"] is True
    line = summarize(load([job("a"), job("b")]), [], RunFacts(started=1.0), run_id="r")
    plain = Console(width=200, record=True)
    plain.print(status_table(line))
    assert line.graph is False and "NEEDS" not in plain.export_text()
