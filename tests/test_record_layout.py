"""The run record's files, in-process: every name comes from job_chain/record/layout.py, one listing
reads them back, and the latest attempt of a step is derived from it once — for a join decided from
the record, a planned join, and a slot handed on (which all agree on the same record)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, List, Optional, Tuple

from hypothesis import given, settings
from hypothesis import strategies as st
from test_slots_rules import sweep

from job_chain.hop.advance import _partners_ready
from job_chain.hop.readiness import latest_attempts
from job_chain.record import layout, slots
from job_chain.record.records import RunRecords, latest_listed
from job_chain.spec.model import Step


def test_every_fact_name_reads_back_as_what_it_was_written_for() -> None:
    for kind in layout.KINDS:
        for step in ("a", "exit-a", "a-attempt-2", "advance-failed"):
            assert layout.parse_fact(layout.fact_name(kind, step, 12)) == (kind, step, 12)
    for other in (layout.RUN, layout.STOPPED, layout.ATTEMPTS_CACHE, layout.revision_name(2),
                  layout.slot_name("m-x", 0, 1, 2), layout.claim_name(1, "a"), layout.notified_name(0, "failed", None),
                  "step-A-attempt-1.json", "exit-a-attempt-x.json", ".step-a-attempt-1.json.0a1b.tmp"):
        assert layout.parse_fact(other) is None, other


# the patterns the record's names were read with, before they were read by hand (hop start-up: compiling
# each cost every hop ~0.2 ms); the hand-written readers must answer exactly as they did
FACT_PATTERN = rf"({'|'.join(layout.KINDS)})-({layout.STEP})-attempt-(\d+)\.json"
ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,%d}"
CHARS = st.sampled_from(["a", "z", "0", "9", "-", ".", "_", "A", "é", "\u0663", "\u00b2", "\n", "x" * 30])
PIECES = st.one_of(CHARS, st.sampled_from(["-attempt-", ".json", "-attempt-1", *(k + "-" for k in layout.KINDS)]))
WORD = st.lists(CHARS, max_size=4).map("".join)
FACTISH = st.tuples(st.sampled_from([k + "-" for k in layout.KINDS] + ["", "exit", "advance-"]), WORD,
                    st.sampled_from(["-attempt-", "-attempt", "attempt-"]), WORD,
                    st.sampled_from([".json", ".json\n", "json", ""])).map("".join)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.lists(PIECES, max_size=8).map("".join), FACTISH))
def test_fact_names_and_ids_are_read_by_hand_exactly_as_their_patterns_read_them(name: str) -> None:
    from job_chain.aihc.names import is_job_id

    found = re.fullmatch(FACT_PATTERN, name)
    want: Optional[Tuple[str, str, int]] = (found.group(1), found.group(2), int(found.group(3))) if found else None
    assert layout.parse_fact(name) == want
    assert layout.is_run_id(name) == bool(re.fullmatch(ID_PATTERN % 99, name))
    assert is_job_id(name) == bool(re.fullmatch(ID_PATTERN % 127, name))


def test_fact_names_and_ids_at_their_edges() -> None:
    from job_chain.aihc.names import is_job_id

    assert layout.parse_fact("exit-a-attempt-\u0663.json") == ("exit", "a", 3)  # \d reads any decimal digit
    assert layout.parse_fact("exit-a-attempt-\u00b2.json") is None  # and no other digit
    assert layout.parse_fact("exit--a-attempt-1.json") is None and layout.parse_fact("exit-a-attempt-1.json\n") is None
    assert layout.parse_fact("exit-" + "a" * 63 + "-attempt-1.json") is not None
    assert layout.parse_fact("exit-" + "a" * 64 + "-attempt-1.json") is None
    assert layout.is_run_id("r" * 100) and not layout.is_run_id("r" * 101) and not layout.is_run_id(None)
    assert is_job_id("j" * 128) and not is_job_id("j" * 129) and not is_job_id(7)


def test_one_listing_sorts_a_runs_files_by_kind(tmp_path: Path) -> None:
    records = RunRecords(str(tmp_path / "chain_info.json"))
    records.create_run("r1", epoch=0)
    records.record_submission("r1", "a", 1, "job-a", "a")
    records.record_exit("r1", "a", 1, 3)
    records.record_advance_failure("r1", "a", 1, "gave up")
    records.write("r1", layout.slot_name("m-x", 0, 0, 0), {"step": "a"})
    records.keep_attempts_cache("r1", {"job-a": {"final": True}})
    listing = records.listed("r1")
    assert listing["step"] == {("a", 1): "step-a-attempt-1.json"}
    assert listing["exit"] == {("a", 1): "exit-a-attempt-1.json"}
    assert listing["advance-failed"] == {("a", 1): "advance-failed-a-attempt-1.json"}
    assert not listing["succeeded"] and not listing["lean"]
    assert records.attempts_cache("r1") == {"job-a": {"final": True}}
    names = records.names("r1")
    assert names is not None and layout.slot_name("m-x", 0, 0, 0) in names and records.listed("r1", names) == listing
    assert records.names("20260101-000000-0000") is None  # no such run: nothing listed, not an error
    records.clear_advance_failures("r1")
    assert records.listed("r1")["advance-failed"] == {}


def test_the_latest_attempt_counts_submissions_exits_and_markers_from_the_revisions_first() -> None:
    listing: Any = {kind: {} for kind in layout.KINDS}
    listing["step"] = {("a", 1): "", ("a", 2): "", ("b", 1): "", ("c", 4): ""}
    listing["exit"] = {("a", 3): ""}  # its submission was never recorded: its tail still names it
    listing["succeeded"] = {("b", 5): ""}
    listing["failure"] = {("a", 9): ""}  # not an attempt's existence: only why one failed
    assert latest_listed(listing, {"a": 1, "b": 1, "c": 5}) == {"a": 3, "b": 5}  # c: only before this revision
    assert latest_listed(listing, {"b": 1}) == {"b": 5}  # steps not asked for are left out


def test_a_join_a_planned_join_and_a_slot_agree_on_an_attempt_only_its_tail_recorded(tmp_path: Path) -> None:
    """Attempt 2 of a point was created and failed, but its submission was never recorded (its
    submitter died): the record names it by its exit alone. Every reader sees attempt 2, and a
    resume round hands the point's slot on at attempt 3, not 2 (whose token finds the failed job)."""
    chain = sweep(2, 1)
    first, point = chain.steps
    records = RunRecords(str(tmp_path / "chain_info.json"))
    records.create_run("r1", epoch=1)  # a resume round: nothing claimed in it yet
    records.record_submission("r1", point.name, 1, "job-p1", point.name, mode="job")
    records.record_exit("r1", point.name, 1, 3)
    records.record_exit("r1", point.name, 2, 3)
    started: List[Tuple[str, int]] = []

    def submit(step: Step, attempt: int) -> str:
        started.append((step.name, attempt))
        records.record_submission("r1", step.name, attempt, f"job-{step.name}-{attempt}", step.name, mode="job")
        return slots.SUBMITTED

    assert slots.fill(chain, records, "r1", [first], {}, submit, "run") == ([first.name], False)
    seen = latest_attempts(records, "r1", chain)[point.name]
    assert (seen.attempt, seen.exit_code, seen.reports) == (2, 3, True)
    assert _partners_ready(records, "r1", {point.name: 1}) is None  # it failed: the full planner decides

    records.record_exit("r1", first.name, 1, 0)
    records.record_succeeded("r1", first.name, 1)
    slots.release(chain, records, "r1", first)
    assert slots.hand_on(chain, records, "r1", first, submit, first.name) == ([point.name], False)
    assert started[-1] == (point.name, 3)


# -- a run's start time: one answer for the hop, status and the Python API ------------------------------
def test_a_runs_start_is_its_recorded_start_else_the_time_in_its_id(tmp_path: Path) -> None:
    from job_chain.hop.advance import _Hop
    from job_chain.record.records import run_start
    from job_chain.session.runs import Run

    at_id = 1795347045.0  # 2026-11-22 11:30:45 UTC
    assert run_start({"started": 1795347050.5}, "20261122-113045-9f3a") == 1795347050.5
    for damaged in ({}, {"started": None}, {"started": "yesterday"}, {"started": True}, {"started": 0}, None):
        assert run_start(damaged, "20261122-113045-9f3a") == at_id, damaged
    assert run_start({}, "DRY-RUN") is None  # neither says: the caller's fallback

    records = RunRecords(str(tmp_path / "chain_info.json"))
    records.create_run("20261122-113045-9f3a")
    records.write("20261122-113045-9f3a", layout.RUN, {"id": "20261122-113045-9f3a"})  # no "started"
    records.create_run("20261001-000000-0001")  # started now, but its id is older
    records.write("20261001-000000-0001", layout.RUN, {"id": "20261001-000000-0001", "started": at_id - 86400})

    run = records.require_run("20261122-113045-9f3a")
    assert Run.from_record(records.chain_path, run).started.timestamp() == at_id  # was 1970: a walk to 1970
    assert records.facts("20261122-113045-9f3a").started == at_id  # status
    hop = _Hop(lambda: None, None, "20261122-113045-9f3a", records, "job", 1.0, None, "")  # type: ignore[arg-type]
    assert hop.started == at_id  # the finishing job
    assert [r["id"] for r in records.runs()] == ["20261122-113045-9f3a", "20261001-000000-0001"]  # newest first
    neither = {"id": "DRY-RUN"}
    assert Run.from_record(records.chain_path, neither).started.timestamp() == 0.0  # nothing to go by


def test_a_pattern_finds_its_files_among_a_long_run_s_in_name_order() -> None:
    names = ["step-a-attempt-1.json", "revision-2.json", "revision-1.json", "revision-1.json.tmp",
             "revision-x.json", "notify-failed-3.json", "xrevision-3.json"]
    assert [(name, found.group(1)) for name, found in layout.REVISION.among(names)] == \
        [("revision-1.json", "1"), ("revision-2.json", "2")]
    assert [name for name, _ in layout.NOTIFY_FAILED.among(names)] == ["notify-failed-3.json"]
