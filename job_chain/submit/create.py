"""Create one step of a run exactly once: the record first, a deterministic client token, the record
of it, the stop race (:func:`create_once`); and building its request when no plan holds it
(:func:`submit_step`). Light to import: a planned hop creates through here without the chain model.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

if TYPE_CHECKING:
    from job_chain.engine.jobs import Job
    from job_chain.record.records import RunRecords
    from job_chain.spec.model import Chain

MODES = ("job", "watch", "inline")
TOKEN_TAKEN = "IdempotentParameterMismatch"  # a clientToken that already made a job from another request


def find_submitted(client: Any, pool: str, run_id: str, step: str, attempt: int,
                   since: Optional[float] = None, began: Optional[float] = None) -> Optional[Job]:
    """Look for the job of (run, step, attempt) by its labels, newest first: inline runs, no record.

    The walk stops where :func:`job_chain.status.observe.walk_floor` says a run's jobs end: before
    ``began`` (the engine's createdAt of the run's first job), else an allowance for clock skew
    before ``since`` (the run's start by the submitting machine's clock).
    """
    from job_chain.aihc.engine import as_engine
    from job_chain.status.observe import walk_floor

    floor = walk_floor(began, since)
    for job in as_engine(client).jobs(pool):
        if job.run_id == run_id and job.step == step and job.attempt == attempt:
            return job
        if floor is not None and job.created is not None and job.created < floor:
            return None
    return None


def already_created(client: Any, pool: str, records: Optional[RunRecords], run_id: str, step: str,
                    attempt: int, since: Optional[float] = None,
                    began: Optional[float] = None) -> Optional[Dict[str, str]]:
    """The job of (``step``, ``attempt``) when it exists: from the record, or — inline runs keep
    none — found by its labels (:func:`find_submitted`)."""
    recorded = records.submission(run_id, step, attempt) if records else None
    if recorded:
        return {"jobId": recorded["jobId"], "jobName": recorded.get("jobName", ""), "created": "no"}
    if records is None:
        found = find_submitted(client, pool, run_id, step, attempt, since, began)
        if found is not None:
            return {"jobId": found.id, "jobName": found.name, "created": "no"}
    return None


def create_once(client: Any, pool: str, body: Dict[str, Any], token: str, *, records: Optional[RunRecords],
                run_id: str, step: str, attempt: int, revision: int, mode: str,
                resume: Optional[Tuple[int, str]] = None, since: Optional[float] = None,
                began: Optional[float] = None, looked: bool = False, stoppable: bool = True,
                cache: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
    """Create (``step``, ``attempt``) of the run once; ``{"jobId", "jobName", "created": "yes"|"no"}``.

    The one way anything creates a step's job — ``run``, ``resume``, a hop (planned or not), a
    retry, a slot's hand-on, an exit handler: :func:`already_created` first (unless the caller
    just ``looked``), then the create with the deterministic client token (a retried or repeated
    create cannot duplicate it), then its record, then the stop race (a run stopped meanwhile
    has this job stopped again) — unless the job is not ``stoppable``: an exit handler, which a
    stop itself starts. ``cache``: the key (and its parts) of a cached step, kept with the
    submission so that its success writes the entry (:mod:`job_chain.submit.cache`).
    """
    done = None if looked else already_created(client, pool, records, run_id, step, attempt, since, began)
    if done is not None:
        return done
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.errors import EngineError

    try:
        job_id, job_name = as_engine(client).create(pool, body, token)
    except EngineError as exc:
        if exc.code != TOKEN_TAKEN:
            raise
        # the token of (run, step, attempt) already made a job, from another revision's request (a
        # resume of a going run keeps tokens): that job is the step's attempt; its tail records it
        recorded = records.submission(run_id, step, attempt) if records is not None else None
        return {"jobId": str(recorded["jobId"]) if recorded else "(made by its token from another revision)",
                "jobName": str((recorded or {}).get("jobName", "")), "created": "no"}
    if records is not None:
        records.record_submission(run_id, step, attempt, job_id, job_name, revision, resume=resume, mode=mode,
                                  cache=cache)
        if stoppable and records.is_stopped(run_id):  # a stop raced with this create: the job it missed is stopped now
            _stop_again(client, pool, run_id, job_id)
    return {"jobId": job_id, "jobName": job_name, "created": "yes"}


def submit_step(
    client: Any,
    chain: Chain,
    name: str,
    run_id: str,
    attempt: int,
    *,
    records: Optional[RunRecords] = None,
    mode: str = "job",
    since: Optional[float] = None,
    context: Optional[Dict[str, str]] = None,
    resume: Optional[Tuple[int, str]] = None,
    plan: bool = True,
) -> Dict[str, str]:
    """Create step ``name`` once; return ``{"jobId", "jobName", "created": "yes"|"no"}``.

    A step already recorded (or found by its labels) is not created again; the create itself
    carries a deterministic client token, so a retried or repeated call cannot duplicate it.
    ``resume``: (iteration, directory) of the checkpoint it resumes from, told in its environment
    (``JOB_CHAIN_RESUME_ITERATION``/``JOB_CHAIN_RESUME_CHECKPOINT``) and kept in its record.
    ``plan``: write what its success starts (:mod:`~job_chain.submit.plans`); a split plans its
    branches before it creates them.

    A step with ``jobChain.cache`` whose key matches an earlier success is not created
    (:func:`reuse`): ``{"created": "cached", "outputs": …}`` for the one caller that takes it, which
    must then advance the run as the step's own tail would; ``"no"`` for any other.
    """
    done = already_created(client, chain.pool, records, run_id, name, attempt, since, chain.began)
    if done is not None:  # before the request is built: an output it needs may be gone by now
        return done
    from job_chain.record import outputs as outputs_
    from job_chain.submit.request import build_request, client_token

    step = chain.named(name)
    if step is None:
        raise KeyError(name)
    if resume is not None:
        from job_chain.rules.checkpoint import resume_env

        context = {**(context or {}), **resume_env(resume)}
    if mode == "inline" and outputs_.referenced(chain):
        from job_chain.status.logged_outputs import complete

        complete(client, chain, step, run_id, since, records)  # a join's other branches: from logs
    consumed = outputs_.for_step(chain, step, records, run_id, mode)
    cache = None
    if step.cache is not None and not step.is_handler:
        reused, cache = reuse(chain, step, records, run_id, attempt, consumed)
        if reused is not None:
            return reused
    body = build_request(chain, name, run_id, attempt, mode=mode, host=chain.api_config.get("host"), context=context,
                         outputs=consumed)
    result = create_once(client, chain.pool, body, client_token(run_id, step, attempt), records=records,
                         run_id=run_id, step=name, attempt=attempt, revision=chain.revision, mode=mode, resume=resume,
                         since=since, began=chain.began, looked=True, stoppable=not step.is_handler, cache=cache)
    if records is not None and mode == "job" and plan and result["created"] == "yes":
        from job_chain.submit.plans import plan_submitted  # what its success submits, for its tail

        plan_submitted(chain, records, run_id, step, attempt)
    return result


def reuse(chain: Chain, step: Any, records: Optional[RunRecords], run_id: str, attempt: int,
          consumed: Dict[str, Dict[str, str]]) -> Tuple[Optional[Dict[str, Any]], Optional[Dict[str, Any]]]:
    """(the result of reusing a cached success, else None; the key to keep with the submission).

    The decision is named before it is taken (the log of whoever reaches the step: ``run``, a hop).
    The step's outputs are kept first, then the attempt is claimed (exactly one caller wins); the
    winner advances the run from it (:func:`job_chain.hop.advance.advance` with ``cached``)."""
    from job_chain.record import outputs as outputs_
    from job_chain.submit.cache import lookup, saved_hours
    from job_chain.util.log import log

    found = lookup(chain, step, records, run_id, consumed)
    if found.entry is None or records is None:
        log(f"step {step.display} is cached, but runs: {found.miss}")
        return None, ({"key": found.key, "parts": found.parts} if found.key else None)
    origin = found.entry["from"]
    hours = saved_hours(found.entry)
    said = (f"step {step.display} reuses the success of run {origin.get('run')} (step {origin.get('display')}, "
            f"attempt {origin.get('attempt')}); key {found.key[:12] if found.key else '?'}"
            + (f", saving about {hours:.2f} GPU-hours" if hours else "")
            + " (job-chain run --no-cache runs every step)")
    outputs = {str(k): str(v) for k, v in (found.entry.get("outputs") or {}).items()}
    if outputs:
        outputs_.save(records, run_id, step.name, attempt, outputs)
    claim = {"key": found.key, "from": origin, "at": time.time(), "savedGpuHours": hours}
    log(said)
    try:
        won = records.claim_cached(run_id, step.name, attempt, claim)
    except OSError as exc:
        log(f"step {step.display} is cached, but runs: the run record is not writable here ({exc.strerror})")
        return None, {"key": found.key, "parts": found.parts}
    if not won:
        return {"jobId": "", "jobName": step.name, "created": "no"}, None
    return {"jobId": "", "jobName": step.name, "created": "cached", "outputs": outputs}, None


def _stop_again(client: Any, pool: str, run_id: str, job_id: str) -> None:
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.errors import EngineError
    from job_chain.util.log import log

    try:
        as_engine(client).stop(pool, job_id)
    except EngineError as exc:
        log(f"run {run_id} was stopped meanwhile, and job {job_id} could not be stopped again: {exc}")
        return
    log(f"run {run_id} was stopped meanwhile; stopped job {job_id} again")
