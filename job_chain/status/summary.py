"""What a run's summary says: the one choice of the facts ``runs``, the console's runs page and
:meth:`ChainSession.summaries` show of a run without looking at it again (the record keeps them,
:mod:`job_chain.record.summary`)."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from job_chain.status.types import RunStatus, StepStatus


def run_span(status: RunStatus, now: Optional[float] = None) -> Tuple[Optional[float], Optional[float]]:
    """(first start, last end or now) over every attempt of the run."""
    starts = [a.started.timestamp() for s in status.steps for a in s.attempts if a.started]
    if status.started is not None:
        starts.append(status.started.timestamp())
    if not starts:
        return None, None
    now = time.time() if now is None else now
    ends = [a.finished.timestamp() if a.finished else now for s in status.steps for a in s.attempts]
    return min(starts), max(ends + [min(starts)])


def step_end(name: str, exit_code: Optional[int], reason: str, failure: Any) -> Dict[str, Any]:
    """What is said of how a step ended, in a summary, ``runs --json`` and a run-end message's
    ``failedSteps`` (the job's tail's, and a look's late one): its name, exit code, the engine's
    reason, why it failed (``failure``: a :class:`~job_chain.failures.classify.Failure`) and that in words."""
    return {"name": name, "exitCode": exit_code, "reason": reason or None,
            "failure": failure.as_json() if failure is not None else None,
            "cause": failure.summary() if failure is not None else None}


def steps_json(steps: Iterable[StepStatus]) -> List[Dict[str, Any]]:
    """Steps as a summary (and ``runs --json``) lists them: number, name, status, attempt, exit, why."""
    return [dict({"step": s.index, "name": s.name, "display": s.label, "status": s.status,
                  "attempt": s.attempt or None}, **step_end(s.name, s.exit_code, s.reason, s.failure)) for s in steps]


def fields(status: RunStatus) -> Dict[str, Any]:
    """The summary of a run from a look at it: its outcome and why, the steps that matter now and
    those that failed, its GPU-hours (and those lost), its parameters, and the span of its attempts
    (``ended`` None while anything goes)."""
    first, last = run_span(status)
    going = any(a.finished is None for s in status.steps for a in s.attempts) or status.outcome.value == "running"
    return {"outcome": status.outcome.value, "reason": status.reason or None,
            "current": steps_json(status.current), "failedSteps": steps_json(status.failed_steps),
            "gpuHours": round(status.gpu_hours, 4), "lostGpuHours": round(status.lost_gpu_hours, 4),
            "savedGpuHours": round(status.saved_gpu_hours, 4) or None,
            "cached": [s.label for s in status.steps if s.status == "Cached"] or None,
            "params": dict(status.params), "firstStart": first, "ended": None if going else last}
