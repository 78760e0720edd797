"""What a run cost in GPU-hours: replicas × GPUs per replica × each attempt's running time.

GPUs per replica come from the frozen body's ``jobSpec.resources``: every resource whose name
names a GPU (``nvidia.com/gpu``, ``baidu.com/a800_80g_cgpu``, …). The running time is from the
job's ``runningAt`` (AIHC's; else its ``createdAt``) to its ``finishedAt`` (or now). AIHC gives
those to the second; where the run record holds the same moments to the millisecond (when the
step was submitted, when its advance ended) and they agree with the API's to within that
second, the finer clock is used. Hours of failed attempts are *lost* — all of them, unless the retry
resumed from a checkpoint saved during the attempt: then only the time after that save
(:func:`lost_hours`).
"""

from __future__ import annotations

import time
from typing import Any, Dict, Iterable, Optional, Tuple

from job_chain.engine.resources import gpus_per_replica

_SLACK = 1.5  # seconds a record's clock may be after the API's truncated one and still be the same moment


def gpus(body: Dict[str, Any]) -> float:
    """GPUs of the whole job: replicas × GPUs per replica."""
    replicas = (body.get("jobSpec") or {}).get("replicas", 1)
    replicas = replicas if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 0 else 1
    return replicas * gpus_per_replica(body)


def running_window(attempt: Any, submitted: Optional[float] = None, ended: Optional[float] = None,
                   now: Optional[float] = None) -> Optional[Tuple[float, float]]:
    """(start, end) in unix seconds of one attempt's running time, None before it started."""
    start_at = started_at(attempt)
    if start_at is None:
        return None
    start = start_at.timestamp()
    if attempt.running is None and submitted is not None and 0 <= submitted - start < _SLACK:
        start = submitted  # createdAt is the submission, cut to the second
    elif attempt.running is not None and start == int(start):
        start += 0.5  # runningAt is cut to the second (AIHC's form): the middle of that second is nearest
    if attempt.finished is None:
        end = time.time() if now is None else now
    else:
        end = attempt.finished.timestamp()
        if ended is not None and 0 <= ended - end < _SLACK:
            end = ended  # both are before the true end: the later one is nearer (the advance ends the job)
    return start, max(start, end)


def started_at(attempt: Any) -> Any:
    """When an attempt started, as the API says (its runningAt, else its createdAt); None before."""
    return attempt.running or attempt.started


def window_hours(job_gpus: float, window: Optional[Tuple[float, float]]) -> Optional[float]:
    """GPU-hours of ``job_gpus`` over a running window (:func:`running_window`; None: not started)."""
    return None if window is None else job_gpus * (window[1] - window[0]) / 3600.0


def attempt_hours(job_gpus: float, attempt: Any, submitted: Optional[float] = None, ended: Optional[float] = None,
                  now: Optional[float] = None) -> Optional[float]:
    """GPU-hours of one attempt (None when it has not started; 0.0 for a step without GPUs)."""
    return window_hours(job_gpus, running_window(attempt, submitted, ended, now))


def lost_hours(hours: float, window: Optional[Tuple[float, float]], saved: Optional[float]) -> float:
    """Of a failed attempt's ``hours`` (spent over ``window``), those lost: all of them, or, when its
    retry resumed from a checkpoint that became complete at ``saved`` during the attempt, only the
    time after it (before: the retry did not do that work again)."""
    if window is None or saved is None or window[1] <= window[0] or saved <= window[0]:
        return hours
    return hours * (window[1] - min(saved, window[1])) / (window[1] - window[0])


def resumed_save(facts: Any, step: str, attempt: int) -> Optional[float]:
    """When the checkpoint that attempt ``attempt``'s retry resumed from was saved, if that retry
    resumed from the checkpoint attempt ``attempt`` left (None: it lost everything)."""
    told = facts.resumed.get((step, attempt + 1))
    if told is None or told[0] != facts.checkpoints.get((step, attempt)):
        return None
    saved = facts.checkpoint_saved.get((step, attempt))
    return float(saved) if saved is not None else None


def run_hours(chain: Any, attempts: Iterable[Any], failing: Optional[str] = None,
              now: Optional[float] = None, facts: Any = None) -> Tuple[float, float]:
    """(GPU-hours, of which lost) over ``attempts`` by the API's times (what a job can see);
    ``failing``: a step whose latest attempt failed but whose job still runs (the one asking);
    ``facts``: the run record's, which say what a retry resumed from (see :func:`lost_hours`)."""
    from job_chain.engine.states import FAILED

    attempts = list(attempts)
    latest: Dict[str, int] = {}
    for item in attempts:
        latest[item.step] = max(latest.get(item.step, 0), item.attempt)
    total = lost = 0.0
    for item in attempts:
        step = chain.resolve(item.step)
        if step is None:
            continue
        window = running_window(item, now=now)
        hours = window_hours(gpus(step.body), window) or 0.0
        total += hours
        if item.status in FAILED or (step.name == failing and item.attempt == latest[item.step]):
            saved = resumed_save(facts, step.name, item.attempt) if facts is not None else None
            lost += lost_hours(hours, window, saved)
    return total, lost


def hours_text(hours: Optional[float]) -> str:
    """``12.3``, ``0.42``, ``-`` for a table cell."""
    if hours is None:
        return "-"
    return f"{hours:.1f}" if hours >= 10 else f"{hours:.2f}"
