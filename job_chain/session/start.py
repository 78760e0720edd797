"""Starting a run, and submitting steps from this process (``run``, ``resume``, a stop's handlers).

A run starts frozen: the file as it is now is kept in a new run record first, and every step is
submitted from that copy. Each create goes through :func:`submit`, which retries transient errors
with the step's client token, so nothing is ever created twice.
"""

from __future__ import annotations

import shlex
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from job_chain.engine.deadline import CALL_DEADLINE
from job_chain.errors import JobChainError, RunStillActive, UsageError
from job_chain.record.records import RecordDamaged, new_run_id
from job_chain.session.context import RunContext, find_run, frozen
from job_chain.session.look import active_run
from job_chain.session.plan import chain_to_freeze, check_mode, check_reachable, notify_values, start_step, steps_at
from job_chain.session.runs import Run, SubmitInterrupted, Submitted
from job_chain.spec.model import Chain, Step
from job_chain.submit.create import MODES

SUBMIT_DEADLINE = CALL_DEADLINE  # seconds start and resume keep retrying a step's create through transient errors


def start(ctx: RunContext, first: Union[int, str] = 0, *, mode: str = "job", force: bool = False,
          params: Optional[Dict[str, str]] = None, cache: bool = True) -> Run:
    """Freeze the chain file as it is now into a new run record and submit the run's first steps
    (see :meth:`job_chain.session.ChainSession.start`). ``cache=False``: every step of the run runs,
    none reuses a cached success (``run --no-cache``)."""
    from job_chain.record import index as run_index
    from job_chain.rules import plan as plan_
    from job_chain.spec.frozen import freeze

    if mode not in MODES:
        raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    ctx.file.reload()  # what is frozen is the file as it is now
    begin = start_step(ctx, first)
    chain = chain_to_freeze(ctx, begin.index, params=params)
    check_mode(chain, mode)
    secrets = notify_values(ctx, chain)  # a variable not set refuses the start, naming it
    local = ctx.places.local
    client = ctx.places.client_for(None)
    for line in check_reachable(chain, mode, local):  # after the credentials: with none, that is the news
        ctx.warn(line)
    with ctx.records.start_lock():
        if not force:
            refuse_beside_active(ctx)
        run_id = ctx.records.claim_run_id(new_run_id)
        where: Dict[str, Any] = {"local": local}
        if local:  # the run lives on this local server: later commands find it there
            from job_chain.local.server import default_state_dir

            where["localStateDir"] = default_state_dir()
        # the frozen copy first: a run.json that names revision 1 always finds it
        value = ctx.records.freeze(run_id, freeze(chain), revision=1, reason="started")
        if secrets:  # for the jobs that send notifications; never in a job's command or environment
            ctx.records.save_notify_secrets(run_id, secrets)
        carried = ctx.places.carried(None)
        if carried:  # what the run's jobs connect with, whoever gave it (rule 8)
            ctx.records.save_credentials(run_id, carried)
        if not cache:
            where["cache"] = False
        record = ctx.records.create_run(run_id, chain=ctx.path, startStep=begin.index, mode=mode,
                                        endpoint=client.endpoint, pool=chain.pool, revision=1, digest=value, **where)
    run_index.remember(run_id, ctx.path)
    run = Run.from_record(ctx.path, record)
    try:
        running = frozen(ctx, run)
        start_ready(ctx, run, running, steps_at(running, plan_.plan(running, {}).ready), {}, mode, "run")
    except SubmitInterrupted:
        ctx.records.record_start_failure(run_id, "interrupted while submitting its first step", refused=False)
        raise
    except JobChainError as exc:
        ctx.records.record_start_failure(run_id, str(exc), refused=not getattr(exc, "retryable", True))
        raise
    return run


def refuse_beside_active(ctx: RunContext) -> None:
    """:class:`RunStillActive` (saying how to continue, stop or force) while a run of the chain is going;
    a damaged record is never taken for "no run"."""
    damaged = ctx.records.damaged()
    if damaged:
        raise RecordDamaged(ctx.records.damaged_message(damaged[0]) + "; or pass --force to start a run "
                            "beside it")
    active = active_run(ctx)
    if active is not None:
        steps = ", ".join(f"{s.name} is {s.status}" for s in active.current) or "it is starting"
        which = f"{shlex.quote(ctx.path)} --run {active.run_id}"
        if find_run(ctx, active.run_id).mode == "watch":  # its watcher may be gone (Ctrl-C): say what continues it
            how = (f"it advances only while a process watches it (--advance watch): continue it with "
                   f"'job-chain resume {which} --advance watch'")
        else:
            how = f"watch it with 'job-chain status {which} --watch'"
        raise RunStillActive(
            f"run {active.run_id} of {ctx.path} is still going ({steps}): {how}, stop it with "
            f"'job-chain stop {which}', or pass --force to start another run beside it", active.run_id)


def start_ready(ctx: RunContext, run: Run, chain: Chain, ready: Sequence[Step], attempts: Mapping[str, int],
                mode: str, origin: str) -> List[Submitted]:
    """Submit ``ready``: each capped step (maxParallel, maxRunning) through a slot, as many as are
    free, the others directly."""
    from job_chain.record import slots

    done = [submit(ctx, run, s.name, attempts.get(s.name, s.first_attempt), mode) for s in ready
            if not slots.pools(chain, s)]
    if len(done) < len(ready):
        def through_slot(step: Step, attempt: int) -> str:  # a failure is raised to the caller: run, resume
            done.append(submit(ctx, run, step.name, attempt, mode))
            return slots.SUBMITTED

        slots.fill(chain, ctx.records, run.run_id, ready, attempts, through_slot, origin)
    return done


def submit(ctx: RunContext, run: Run, name: str, attempt: int, mode: str,
           context: Optional[Dict[str, str]] = None) -> Submitted:
    """Submit one step, retrying transient API errors for up to SUBMIT_DEADLINE seconds.

    The client token makes every retry safe, and giving up early is not: a create can fail after
    the job was committed, and that job would then advance a run the user believes failed.
    """
    from job_chain.aihc.errors import AIHCError
    from job_chain.engine.deadline import submit_with_deadline
    from job_chain.submit.create import submit_step

    chain = frozen(ctx, run)
    client = ctx.places.client_for(run)
    if mode == "inline":
        from job_chain.submit.snapshot import inline_origin

        inline_origin(chain, client, ctx.records.first_job_id(run.run_id))
    finish = f"'job-chain resume {shlex.quote(ctx.path)} --run {run.run_id}'"
    step = chain.named(name)
    resume = None
    if attempt > 1 and step is not None:  # a resumed step continues from its last checkpoint
        from job_chain.rules.checkpoint import last_complete
        from job_chain.spec.params import checkpoint_of

        resume = last_complete(checkpoint_of(chain, step, run.run_id))
    try:
        result = submit_with_deadline(
            lambda: submit_step(client, chain, name, run.run_id, attempt, records=ctx.records, mode=mode,
                                context=context, resume=resume),
            SUBMIT_DEADLINE)
    except KeyboardInterrupt:
        raise SubmitInterrupted(
            f"interrupted while submitting step {name} of run {run.run_id}: the step may or may not have been "
            f"created. {finish} finishes it without ever creating it twice") from None
    except AIHCError as exc:
        if not exc.retryable:
            raise
        raise JobChainError(f"{exc}. Step {name} may have been created all the same: "
                            f"'job-chain status {shlex.quote(ctx.path)} --run {run.run_id}' shows it, and "
                            f"{finish} continues the run without ever creating it twice") from None
    if result["created"] == "cached":  # no job runs it: this process advances the run from it, as its tail would
        from job_chain.hop.advance import advance

        advance(chain, client, run_id=run.run_id, step=name, attempt=attempt, exit_code=0, records=ctx.records,
                resume_hint=finish.strip("'"), mode=mode, outputs=(dict(result.get("outputs") or {}), None),
                cached=True)
    return Submitted(run.run_id, name, attempt, result["jobId"], result["jobName"], result["created"] == "yes",
                     step.index if step is not None else -1, cached=result["created"] == "cached")
