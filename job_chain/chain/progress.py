"""Where a run stands, derived from the API (job labels), so steps submitted from inside the
cluster are seen too."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from job_chain.aihc.status import FAILED, SUCCEEDED, TERMINAL
from job_chain.aihc.timefmt import parse_time
from job_chain.chain.model import LABEL_ATTEMPT, LABEL_RUN, LABEL_STEP, Chain

NOT_SUBMITTED = "not submitted"
SKIPPED = "skipped"


@dataclass
class StepState:
    index: int
    name: str
    status: str = NOT_SUBMITTED
    job_id: str = ""
    attempt: int = 0
    created: Optional[float] = None
    finished: Optional[float] = None

    @property
    def duration(self) -> Optional[float]:
        if self.created is None:
            return None
        return (self.finished or time.time()) - self.created

    def as_json(self) -> Dict[str, Any]:
        return {"step": self.index, "name": self.name, "status": self.status, "jobId": self.job_id or None,
                "attempt": self.attempt or None, "created": self.created, "finished": self.finished,
                "duration": self.duration}


def _ts(text: Optional[str]) -> Optional[float]:
    when = parse_time(text)
    return when.timestamp() if when else None


def run_jobs(client: Any, pool: str, run_id: str, since: Optional[float] = None) -> List[Dict[str, Any]]:
    """Every job labelled with ``run_id``, walking newest first and stopping at older jobs."""
    found = []
    for job in client.iter_jobs(pool, order_by="createdAt", order="desc"):
        labels = {x.get("key"): x.get("value") for x in job.get("labels") or []}
        if labels.get(LABEL_RUN) == run_id:
            found.append(job)
            continue
        created = _ts(job.get("createdAt"))
        if since is not None and created is not None and created < since - 300:
            break
    return found


def attempts(chain: Chain, jobs: List[Dict[str, Any]]) -> List[StepState]:
    """One state per job of a run (every attempt of every step), in step, then attempt, order."""
    names = {s.index: s.name for s in chain.steps}
    found = []
    for job in jobs:
        labels = {x.get("key"): x.get("value") for x in job.get("labels") or []}
        try:
            index, attempt = int(labels.get(LABEL_STEP, "")), int(labels.get(LABEL_ATTEMPT, "1"))
        except ValueError:
            continue
        if index in names:
            found.append(StepState(index, names[index], job.get("status") or "Unknown", job.get("jobId", ""),
                                   attempt, _ts(job.get("createdAt")), _ts(job.get("finishedAt"))))
    return sorted(found, key=lambda state: (state.index, state.attempt))


def step_states(chain: Chain, jobs: List[Dict[str, Any]], start: int = 0) -> List[StepState]:
    """One state per step: the latest attempt's job, or not submitted / skipped."""
    states = {s.index: StepState(s.index, s.name, SKIPPED if s.index < start else NOT_SUBMITTED) for s in chain.steps}
    for state in attempts(chain, jobs):  # in attempt order: the latest wins
        states[state.index] = state
    return list(states.values())


def outcome(states: List[StepState], chain: Optional[Chain] = None) -> str:
    """``succeeded``, ``failed``, ``stopped`` or ``running`` for the run as a whole.

    With ``chain``, a failed step that still has retries left counts as running.
    """
    active = [s for s in states if s.status != SKIPPED]
    if active and all(s.status in SUCCEEDED for s in active):
        return "succeeded"
    submitted = [s for s in active if s.status != NOT_SUBMITTED]
    if any(s.status not in TERMINAL for s in submitted):
        return "running"
    last = submitted[-1] if submitted else None
    if last is None:
        return "running"
    if last.status in SUCCEEDED:
        return "running"  # the next step is about to be submitted
    if last.status in FAILED:
        step = chain.step(last.index) if chain else None
        return "running" if step is not None and last.attempt <= step.retries else "failed"
    return "stopped"
