"""One look at a run: every step and its outcome, as the API and the run record tell it now.

The API is asked for the run's own jobs (named by the record), not the pool's; see
:mod:`job_chain.status.look` for where a walk of the pool is still needed. The outcome is decided
by :func:`job_chain.status.summarize.summarize`; this module only gathers what it needs.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple, cast

from job_chain.aihc.api import JobsAPI
from job_chain.engine.states import SUCCEEDED
from job_chain.errors import JobChainError
from job_chain.rules.facts import RunFacts
from job_chain.session.context import RunContext, all_runs, find_run, frozen
from job_chain.session.runs import Run
from job_chain.spec.model import Chain
from job_chain.status.summarize import summarize
from job_chain.status.types import Outcome, RunStatus


def status(ctx: RunContext, run_id: Optional[str] = None, *, now: Optional[float] = None,
           outputs: bool = False, patient: bool = False) -> RunStatus:
    """Every step of the run (default: the latest) and its outcome, now, from its frozen chain.

    Each step's outputs come from the run record; an inline run keeps them in its jobs' logs,
    which ``outputs=True`` reads (once per step: what was read is kept in the record). ``patient``:
    retry the reads through transient API errors as long as ``run`` retries a create (one-off looks)."""
    from job_chain.util.gcpause import paused

    with paused():  # its objects all live until it ends (job_chain.util.gcpause)
        return _status(ctx, run_id, now=now, outputs=outputs, patient=patient)


def _status(ctx: RunContext, run_id: Optional[str], *, now: Optional[float], outputs: bool,
            patient: bool) -> RunStatus:
    from job_chain.record import summary
    from job_chain.status.look import cached_attempts

    run = find_run(ctx, run_id)
    before = summary.basis(ctx.records, run.run_id)  # the summary this look writes is dated by it
    if not (outputs and run.mode == "inline"):  # (whose outputs a look may still have to read)
        known = _kept_look(ctx, run, before)
        if known is not None:
            return known
    record = ctx.records.get_run(run.run_id)
    run = Run.from_record(ctx.path, record) if record is not None else run
    names = ctx.records.names(run.run_id) or []  # one listing of the run's directory for the look
    listing = ctx.records.listed(run.run_id, names)
    cached = cached_attempts(ctx.records, run.run_id)  # with the submissions of finished jobs: not read again
    asked = _ask_ahead(ctx, run, record, listing, cached)
    try:
        return _look(ctx, run, record, before, names, listing, cached, asked, now=now, outputs=outputs,
                     patient=patient)
    finally:
        if asked is not None:
            getattr(asked[2], "close", lambda: None)()


def _ask_ahead(ctx: RunContext, run: Run, record: Optional[Dict[str, Any]], listing: Any,
               cached: Any) -> Optional[Tuple[JobsAPI, str, Iterator[Any]]]:
    """(client, pool, the pool's jobs being asked for) when this look will list many of the run's jobs
    (a long run no look cached): its first pages are asked for now, answered while the look reads
    the frozen chain and the record. None otherwise."""
    from job_chain.aihc.engine import PAGE_SIZE, as_engine
    from job_chain.record.layout import SUBMISSION

    wanted = len(listing[SUBMISSION]) - len(cached.final)
    pool = record.get("pool") if record is not None else None
    if wanted <= PAGE_SIZE or not isinstance(pool, str) or not pool or run.mode == "inline" \
            or ctx.places.engine_of(run) == "slurm":
        return None
    client = _client_to_look(ctx, run)
    return client, pool, as_engine(client).jobs(pool, expected=wanted)


def _look(ctx: RunContext, run: Run, record: Optional[Dict[str, Any]], before: Optional[int], names: List[str],
          listing: Any, cached: Any, asked: Optional[Tuple[JobsAPI, str, Iterator[Any]]], *,
          now: Optional[float], outputs: bool, patient: bool) -> RunStatus:
    from job_chain.record import summary
    from job_chain.status.look import cached_attempts, may_hide_a_job, run_attempts

    chain = frozen(ctx, run)
    start = ctx.records.start_facts(run.run_id)  # read once: the look's walk, its outcome and the API it spares
    walked = False
    settled: Set[str] = set()
    while True:
        client: Optional[JobsAPI] = None
        if walked:  # the second look lists the directory again
            names = ctx.records.names(run.run_id) or []
            listing = ctx.records.listed(run.run_id, names)
            cached = cached_attempts(ctx.records, run.run_id)
        submissions = ctx.records.submissions(run.run_id, listing, cached.submissions, fast=True)
        if start.never_created(submissions):
            attempts: List[Any] = []  # it never started: nothing to ask the API (which may be why)
            endpoint, settled = run.endpoint, set()
        else:
            listed = None
            if asked is not None and not walked and asked[1] == chain.pool:  # (the pool the frozen chain names)
                client, listed = asked[0], asked[2]
            else:
                client = _client_to_look(ctx, run)
            attempts, endpoint, settled = run_attempts(ctx.records, _returning(client), chain, run, submissions,
                                                       start, walk=walked, patient=patient, listing=listing,
                                                       cached=cached, listed=listed)
        facts = ctx.records.facts(run.run_id, record, keys=_fact_keys(chain, attempts), submissions=submissions,
                                  names=names, start=start)
        _more_facts(ctx, run, chain, facts, listing)
        if client is not None:  # why each failed attempt failed: from the record, else its logs (once)
            from job_chain.status.causes import explain_failures

            explain_failures(client, chain, ctx.records, run.run_id, attempts, facts)
        found = summarize(chain, attempts, facts, run_id=run.run_id, now=now, local=run.local,
                          endpoint=endpoint, first_step=run.first_step)
        if walked or not attempts or not may_hide_a_job(found):
            break
        walked = True  # a step that should have started is not seen: its job may be unrecorded
    if outputs and run.mode == "inline":
        _read_logged_outputs(ctx, run, chain, found)
    found.revisions = ctx.records.revisions(run.run_id, names)
    if record is not None and run.mode == "job" and chain.notify and found.outcome is Outcome.FAILED:
        # before the summary is kept, so its basis holds what this wrote
        tell_a_silent_end(ctx, run, chain, found, stopped=facts.stopped)
        found.notify_failed = [e["message"] for e in ctx.records.notify_failures(run.run_id)]
    if record is not None:
        from job_chain.status import kept
        from job_chain.status.summary import fields

        said = fields(found)  # kept whole only when nothing goes on (no job of it is left to move in the
        # API) and nothing is left to find out (kept.complete: a cause whose logs could not be read)
        whole = (lambda: kept.dump(found)) if said["ended"] is not None and kept.complete(found, settled) else None
        summary.keep(ctx.records, run.run_id, record, said, before, whole=whole)
    return found


def tell_a_silent_end(ctx: RunContext, run: Run, chain: Chain, found: RunStatus, *, stopped: bool) -> int:
    """Send the end of a failed run that no job of the run could tell; the targets that took it.

    A job's own tail sends its run's end (:mod:`job_chain.hop.notify`). A job the platform failed
    before its script ran (a datasource it could not mount, an image it could not pull) has no
    tail, and when it was the last job going no process of the run is left to notice that the run
    ended: the first look at the run (``status``, ``--watch``, the console, ``ChainSession``) sends
    what the tail would have. Each (round, event, step) is claimed in the run record, so a message
    already sent by a job, or by an earlier look, is never sent again. ``stopped``: whether the run
    was stopped, as the look read it (:attr:`~job_chain.rules.facts.RunFacts.stopped`): a stopped run's
    end is told by ``stop``."""

    from job_chain.hop.notify import notify
    from job_chain.status.summary import step_end

    if found.outcome is not Outcome.FAILED or stopped:
        return 0
    if not ctx.records.writable(run.run_id):
        return 0  # a look that cannot claim the message (a read-only mount) never sends it
    failed = found.failed_steps
    ended = max((s.finished for s in failed if s.finished is not None), default=None)
    late = "told by a look at the run: no job of the run was left to say so" + (
        f" (it ended at {ended.strftime('%Y-%m-%d %H:%M:%S')} UTC)" if ended is not None else "")
    details = [step_end(s.name, s.exit_code, s.reason, s.failure) for s in failed]
    took = 0
    for step in failed:
        took += notify(chain, ctx.records, run.run_id, "stepFailed", step=step.name, status="failed", note=late,
                       exit_code=step.exit_code, failure=step.failure,
                       gpu=(step.gpu_hours, step.lost_gpu_hours or 0.0) if step.gpu_hours is not None else None)
    spent = any(s.gpu_hours is not None for s in found.steps)
    took += notify(chain, ctx.records, run.run_id, "failed", status="failed", note=late, failed=details,
                   gpu=(found.gpu_hours, found.lost_gpu_hours) if spent else None)
    return took


def _kept_look(ctx: RunContext, run: Run, now: Optional[int]) -> Optional[RunStatus]:
    """The last look at ``run`` when it stands in for a new one (the run ended and its record, whose
    time is ``now``, has not changed since: :func:`job_chain.record.summary.kept_look`), else None."""
    from job_chain.record import summary
    from job_chain.status import kept

    data = summary.kept_look(ctx.records, run.run_id, now)
    return kept.load(data, ctx.records.chain_path) if data is not None else None


def active_run(ctx: RunContext) -> Optional[RunStatus]:
    """The newest run that is still going, if any (only the last few runs are asked)."""
    for run in all_runs(ctx)[:3]:
        try:
            found = status(ctx, run.run_id)
        except JobChainError:
            continue
        if found.outcome is Outcome.RUNNING:
            return found
    return None


def _returning(client: JobsAPI) -> Callable[[], JobsAPI]:
    return lambda: client


def _client_to_look(ctx: RunContext, run: Run) -> JobsAPI:
    """The client a look at ``run`` asks, made when first asked: a finished run whose jobs are
    cached needs no request (nor the SDK). A local run's is made at once, so a look says when
    its server is stopped rather than showing what was cached as if it were live."""
    if run.local or ctx.places.engine_of(run) == "slurm":  # a Slurm engine costs nothing to make
        return ctx.places.client_for(run)
    from job_chain.aihc.api import LazyClient

    return cast(JobsAPI, LazyClient(lambda: ctx.places.client_for(run)))  # it forwards every JobsAPI call


def _fact_keys(chain: Chain, attempts: List[Any]) -> List[Tuple[str, int]]:
    """The (step, attempt) pairs whose record facts a look needs: where a job did not succeed, the
    furthest step's (its advance), and every attempt of a step with GPUs or a checkpoint (their
    ends and checkpoints). A 500-step run of CPU steps reads a handful of files."""
    from job_chain.engine.resources import gpus_per_replica

    keys: List[Tuple[str, int]] = []
    for a in attempts:
        step = chain.resolve(a.step)
        wanted = (a.terminal and a.status not in SUCCEEDED) or a is attempts[-1] or (
            step is not None and (step.checkpoint is not None or gpus_per_replica(step.body) > 0))
        if wanted:
            keys += [(a.step, a.attempt)] + ([(step.name, a.attempt)] if step is not None else [])
    return keys


def _more_facts(ctx: RunContext, run: Run, chain: Chain, facts: RunFacts, listing: Any) -> None:
    from job_chain.record import outputs, slots

    if slots.capped(chain):
        facts.epoch, facts.claimed = slots.claims(ctx.records, run.run_id)
    facts.outputs = outputs.recorded(ctx.records, run.run_id, listing)


def _read_logged_outputs(ctx: RunContext, run: Run, chain: Chain, found: RunStatus) -> None:
    """Inline runs keep outputs in their jobs' logs: read those of succeeded steps not read before,
    and keep what each says (also "none") in the record, so every log is read once."""
    from job_chain.record import outputs

    known = outputs.recorded(ctx.records, run.run_id)
    todo = [(s.name, s.attempt, s.job_id) for s in found.steps if s.succeeded and s.job_id and s.name not in known]
    if not todo:
        return
    from job_chain.status.logged_outputs import read_logged

    read = read_logged(ctx.places.client_for(run), chain.pool, todo)
    for state in found.steps:
        if state.name in read:
            attempt, values = read[state.name]
            outputs.save(ctx.records, run.run_id, state.name, attempt, values)
            state.outputs = values
