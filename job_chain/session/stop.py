"""Ending runs. ``stop``: no later step starts, every step still going is stopped, and (with
handlers or notifications) the run's ``always`` handlers start once the stopped steps ended. A run
that already ended is never stopped: its outcome never changes. ``delete``: forget a run that is
not going."""

from __future__ import annotations

import shlex
import time
from typing import List, Optional

from job_chain.engine.states import FAILED
from job_chain.errors import RunStillActive, UsageError
from job_chain.record.records import RecordDamaged
from job_chain.session.context import RunContext, find_run, frozen
from job_chain.session.look import status
from job_chain.session.runs import Run
from job_chain.session.start import submit
from job_chain.spec.model import Chain
from job_chain.status.types import Outcome, StepStatus


def stop(ctx: RunContext, run_id: Optional[str] = None, *, settle: float = 120.0) -> List[StepStatus]:
    """Stop the run (see :meth:`job_chain.session.ChainSession.stop`); the steps that were going."""
    run = find_run(ctx, run_id)
    chain = frozen(ctx, run)
    now = status(ctx, run.run_id)
    if now.outcome is not Outcome.RUNNING:
        raise UsageError(f"run {run.run_id} already {now.outcome.value}: there is nothing to stop"
                         + (f" ({now.reason})" if now.reason else ""))
    ctx.records.mark_stopped(run.run_id)
    from job_chain.aihc.engine import as_engine

    engine = as_engine(ctx.places.client_for(run))
    going = [s for s in status(ctx, run.run_id).steps if s.active]
    for step in going:
        engine.stop(chain.pool, step.job_id)
    if chain.handlers or chain.notify:
        _after_stop(ctx, run, chain, settle)
    return going


def _after_stop(ctx: RunContext, run: Run, chain: Chain, settle: float) -> None:
    """Once the stopped steps ended (up to ``settle`` seconds): the ``always`` handlers, and ``stopped``."""
    from job_chain.hop.notify import notify
    from job_chain.submit.request import handler_context

    end = time.monotonic() + settle
    now = status(ctx, run.run_id)
    while any(s.active for s in now.steps if not s.is_handler):
        if time.monotonic() > end:
            ctx.warn(f"the stopped steps of run {run.run_id} did not end within {settle:g}s: its "
                     "runOn: always handlers did not start")
            return
        time.sleep(0.5)
        now = status(ctx, run.run_id)
    round_ = ctx.records.round(run.run_id)
    failed = [s.name for s in now.steps if not s.is_handler and s.status in FAILED]
    context = handler_context(chain, run.run_id, "stopped", failed)
    for handler in chain.handlers:
        if handler.run_on == "always":
            submit(ctx, run, handler.name, round_ + 1, run.mode, context)
    notify(chain, ctx.records, run.run_id, "stopped", status="stopped", log=ctx.warn)


def delete(ctx: RunContext, run_id: str) -> None:
    """Forget a run that is not going (its record; its jobs stay in AIHC). :class:`RunStillActive`
    for one that is; a damaged record can always be deleted (nothing can steer it)."""
    from job_chain.record import index as run_index
    from job_chain.record import summary

    try:
        run: Optional[Run] = find_run(ctx, run_id)
    except RecordDamaged:
        run = None
    if run is not None and status(ctx, run.run_id).outcome is Outcome.RUNNING:
        raise RunStillActive(f"run {run_id} is still going: stop it first with "
                             f"'job-chain stop {shlex.quote(ctx.path)} --run {run_id}'", run_id)
    ctx.records.delete_run(run_id)
    run_index.forget(run_id)
    summary.forget(ctx.records, run_id)
