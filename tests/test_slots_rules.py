"""maxParallel / maxRunning in-process: the slot protocol under simultaneous ends, and how status
tells a step waiting for a slot from one that failed."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Dict, List

from job_chain.record import slots
from job_chain.record.records import RunRecords
from job_chain.rules import plan as plan_
from job_chain.spec.loader import check_chain_data
from job_chain.spec.model import Chain, Step
from job_chain.status.summarize import summarize
from job_chain.status.types import WAITING, Attempt, Outcome, RunFacts, utc


def load(jobs: List[Dict[str, Any]], **top: Any) -> Chain:
    return check_chain_data({"resourcePoolId": "pool", "jobs": jobs, **top}, "/tmp/slots/chain_info.json",
                            local=True)


def sweep(points: int, cap: int) -> Chain:
    return load([{"name": "sweep", "jobSpec": {"image": "img", "command": "echo ${matrix.i}"},
                  "jobChain": {"matrix": {"i": list(range(points))}, "maxParallel": cap}}])


class Simulation:
    """Points as threads on a real run directory: each runs until the next tick (so the points that
    run end at the same instant), then ends as an advancing job does: frees its slot, then fills."""

    def __init__(self, tmp_path: Path, chain: Chain, tick: float = 0.02) -> None:
        self.chain, self.tick = chain, tick
        self.records = RunRecords(str(tmp_path / "chain_info.json"))
        self.records.create_run("r1", chain=str(tmp_path / "chain_info.json"))
        self.lock = threading.Lock()
        self.started: List[str] = []
        self.running: set = set()
        self.most = 0
        self.threads: List[threading.Thread] = []

    def submit(self, step: Step, attempt: int) -> str:
        with self.lock:
            self.started.append(step.name)
            self.running.add(step.name)
            self.most = max(self.most, len(self.running))
        thread = threading.Thread(target=self.point, args=(step,))
        self.threads.append(thread)
        thread.start()
        return slots.SUBMITTED

    def ready(self) -> List[Step]:
        with self.lock:
            seen = set(self.started)
        return [s for s in self.chain.steps if s.name not in seen]

    def point(self, step: Step) -> None:
        time.sleep(self.tick - time.time() % self.tick)  # every running point ends at the same instant
        with self.lock:
            self.running.discard(step.name)  # its script ended: the slot may go to the next one
        slots.release(self.chain, self.records, "r1", step)
        slots.fill(self.chain, self.records, "r1", self.ready(), {}, self.submit, step.name)

    def run(self) -> None:
        slots.fill(self.chain, self.records, "r1", self.ready(), {}, self.submit, "run")
        end = time.monotonic() + 60
        while any(t.is_alive() for t in list(self.threads)) or len(self.threads) < len(self.started):
            assert time.monotonic() < end, "the sweep stalled"
            time.sleep(0.01)


def test_points_ending_together_start_the_next_ones_exactly_once_and_never_above_the_cap(tmp_path: Path) -> None:
    for points, cap in ((64, 8), (12, 1), (20, 19)):
        sim = Simulation(tmp_path / f"{points}-{cap}", sweep(points, cap))
        sim.run()
        assert sorted(sim.started) == sorted(s.name for s in sim.chain.steps)  # each exactly once
        assert sim.most <= cap


def test_two_pools_at_once_a_capped_matrix_in_a_capped_run(tmp_path: Path) -> None:
    chain = load([{"name": "a", "jobSpec": {"image": "img", "command": "x"},
                   "jobChain": {"matrix": {"i": list(range(12))}, "maxParallel": 3}},
                  {"name": "b", "jobSpec": {"image": "img", "command": "x"},
                   "jobChain": {"matrix": {"i": list(range(12))}, "maxParallel": 3}}], maxRunning=4)
    for step in chain.steps:
        step.depends_on = ()  # both matrices ready at once, competing for the run's 4 slots
    sim = Simulation(tmp_path, chain)
    sim.run()
    assert sorted(sim.started) == sorted(s.name for s in chain.steps) and sim.most == 4


def test_a_cap_that_cannot_bind_is_no_cap_and_the_first_wave_follows_the_caps() -> None:
    assert not slots.capped(sweep(4, 4)) and slots.capped(sweep(5, 4))
    chain = sweep(5, 2)
    now, later = slots.first_wave(chain, chain.steps)
    assert [s.index for s in now] == [0, 1] and [s.index for s in later] == [2, 3, 4]


def attempt(step: Step, status: str, number: int = 1) -> Attempt:
    return Attempt(step.name, number, f"job-{step.name}-{number}", status)


def test_status_shows_waiting_points_and_a_stranded_one_as_failed_with_the_way_out() -> None:
    chain = sweep(4, 2)
    first, second = chain.steps[0], chain.steps[1]
    going = summarize(chain, [attempt(first, "Running"), attempt(second, "Succeeded")], RunFacts(), run_id="r")
    assert [s.status for s in going.steps] == ["Running", "Succeeded", WAITING, WAITING]
    assert going.steps[2].reason == "waits for a slot (maxParallel of sweep)" and going.outcome is Outcome.RUNNING
    assert not going.steps[2].active and [g["counts"] for g in going.groups()] == [
        {"Running": 1, "Succeeded": 1, WAITING: 2}]
    ended = [Attempt(s.name, 1, f"j{s.index}", "Succeeded", finished=utc(time.time())) for s in (first, second)]
    assert summarize(chain, ended, RunFacts(), run_id="r").outcome is Outcome.RUNNING  # the hand-on may be under way
    stranded = summarize(chain, ended, RunFacts(), run_id="r", now=time.time() + 10_000)
    assert stranded.outcome is Outcome.FAILED and "waits for a slot that no ending step handed on" in stranded.reason


def test_after_resume_failed_points_wait_for_a_slot_again_until_claimed_in_the_new_round() -> None:
    chain = sweep(3, 1)
    states = {0: plan_.FAILED, 1: plan_.FAILED, 2: plan_.SUCCEEDED}
    assert slots.requeued(chain, 0, set(), states) == []  # round 0: a failure is final
    assert [s.index for s in slots.requeued(chain, 1, {chain.steps[0].name}, states)] == [1]
    attempts = [attempt(chain.steps[0], "Running", 2), attempt(chain.steps[1], "Failed"),
                attempt(chain.steps[2], "Succeeded")]
    status = summarize(chain, attempts, RunFacts(epoch=1, claimed={chain.steps[0].name}), run_id="r")
    assert [s.status for s in status.steps] == ["Running", WAITING, "Succeeded"]
    assert status.steps[1].next_attempt == 2 and status.outcome is Outcome.RUNNING


def test_a_point_hands_its_slot_on_from_the_run_record_alone_until_the_last_ones(tmp_path: Path) -> None:
    chain = sweep(4, 2)
    records = RunRecords(str(tmp_path / "chain_info.json"))
    records.create_run("r1")
    started: List[Any] = []

    def submit(step: Step, attempt: int) -> str:
        started.append((step.name, attempt))
        records.record_submission("r1", step.name, attempt, f"job-{step.name}", step.name)
        return slots.SUBMITTED

    def end(step: Step, ok: bool) -> Any:
        (records.record_succeeded if ok else records.record_exit)("r1", step.name, 1, *(() if ok else (3,)))
        slots.release(chain, records, "r1", step)
        return slots.hand_on(chain, records, "r1", step, submit, step.name)

    slots.fill(chain, records, "r1", chain.steps, {}, submit, "run")
    assert started == [("sweep-i-0", 1), ("sweep-i-1", 1)]
    assert end(chain.steps[0], ok=True) == (["sweep-i-2"], False)
    assert end(chain.steps[1], ok=False) == (["sweep-i-3"], False)
    assert end(chain.steps[2], ok=True) is None  # every point started: look at the run (what follows)
    records.update_run("r1", epoch=1)  # a resume: the failed point waits for a slot again, at attempt 2
    assert end(chain.steps[3], ok=True) == (["sweep-i-1"], False) and started[-1] == ("sweep-i-1", 2)


def test_a_create_that_failed_hands_its_slot_on_only_when_it_certainly_created_nothing(tmp_path: Path) -> None:
    chain = sweep(4, 1)
    for outcome, started in ((slots.NOT_CREATED, ["sweep-i-0", "sweep-i-1", "sweep-i-2", "sweep-i-3"]),
                             (slots.UNKNOWN, ["sweep-i-0"])):
        records = RunRecords(str(tmp_path / outcome / "chain_info.json"))
        records.create_run("r1")
        tried: List[str] = []

        def submit(step: Step, attempt: int, tried: List[str] = tried, outcome: str = outcome) -> str:
            tried.append(step.name)
            return outcome

        assert slots.fill(chain, records, "r1", chain.steps, {}, submit, "run") == ([], True)
        assert tried == started  # each failed step stays claimed: only resume starts it again
