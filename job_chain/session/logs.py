"""Reading a run's logs: which step and attempt a request means, and the text of one pod's log."""

from __future__ import annotations

from typing import Any, Iterator, Optional, Tuple, Union

from job_chain.errors import UsageError
from job_chain.session.context import RunContext, find_run, frozen
from job_chain.session.look import status
from job_chain.session.plan import step_of
from job_chain.session.runs import Run
from job_chain.status.types import Attempt, StepStatus


def attempt(ctx: RunContext, run_id: Optional[str] = None, step: Union[int, str, None] = None,
            number: Optional[int] = None) -> Tuple[StepStatus, Attempt]:
    """(the step, its chosen attempt). Default: for a failed run its failed step, else the latest
    submitted step; and the step's latest attempt. ``step`` is a name or a number."""
    run = find_run(ctx, run_id)
    now = status(ctx, run.run_id)
    if step is not None:
        wanted = step_of(frozen(ctx, run), step)
        chosen = next(s for s in now.steps if s.name == wanted.name)
        if not chosen.attempts and not chosen.history:
            raise UsageError(f"step {chosen.name} of run {run.run_id} has not been submitted")
    else:
        submitted = [s for s in now.steps if s.submitted]
        if not submitted:
            raise UsageError(f"run {run.run_id} has no submitted step yet")
        failed = [s for s in now.failed_steps if s.submitted]
        chosen = failed[0] if failed else (now.current or submitted)[-1]
        if not chosen.submitted:
            chosen = submitted[-1]
    tries = {a.attempt: a for a in chosen.history + chosen.attempts}
    wanted_number = number if number is not None else max(tries)
    if wanted_number not in tries:
        raise UsageError(f"step {chosen.name} of run {run.run_id} has no attempt {wanted_number} "
                         f"(it has {', '.join(str(k) for k in sorted(tries))})")
    return chosen, tries[wanted_number]


def pods(ctx: RunContext, run: Run, job_id: str) -> Tuple[str, ...]:
    """The pod names of one of the run's jobs, as its engine lists them (the master first)."""
    from job_chain.aihc.engine import as_engine

    return as_engine(ctx.places.client_for(run)).job(frozen(ctx, run).pool, job_id).pod_names


def pod_log(ctx: RunContext, run: Run, job_id: str, pod: str, **params: Any) -> Iterator[str]:
    """The records of one pod's log, page by page (``params``: ``max_lines``, ``chunk``, …)."""
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.logs import log_records

    return log_records(as_engine(ctx.places.client_for(run)), frozen(ctx, run).pool, job_id, pod, **params)


def log(ctx: RunContext, run_id: Optional[str] = None, step: Union[int, str, None] = None,
        number: Optional[int] = None, pod: Optional[str] = None, tail: Optional[int] = None) -> str:
    """The log text of one attempt's pod (default: of the latest attempt, the pod its failure's cause
    names, else the master: :meth:`~job_chain.status.types.Attempt.log_pod`); with ``tail``, only
    the last ``tail`` lines are asked of the engine (its ``maxLines``)."""
    run = find_run(ctx, run_id)
    _, chosen = attempt(ctx, run.run_id, step, number)
    if pod is None:
        pod = chosen.log_pod(pods(ctx, run, chosen.job_id))
        if pod is None:
            raise UsageError(f"job {chosen.job_id} has no pods yet")
    # the engine cuts the tail (maxLines); a whole log comes page by page
    text = "".join(pod_log(ctx, run, chosen.job_id, pod, max_lines=tail))
    if tail is not None:
        text = "".join(text.splitlines(True)[-tail:]) if tail else ""
    return text
