"""What a failed step's job does before it exits: find why, decide whether to retry, say so.

Runs only when the user's script exited non-zero, so a hop that succeeded never reads a log.
The cause comes from every pod's log tail (this pod first) unless another pod of the same job
already kept one; the decision (retry or not, which budget) is :func:`job_chain.rules.retry.decide`;
a retry of a step with ``checkpoint`` is told the last complete checkpoint. A failure AIHC's own
fault tolerance will restart is left to it (:func:`left_to_engine`): nothing is decided or recorded.
"""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from job_chain.errors import JobChainError
from job_chain.failures.classify import Failure
from job_chain.spec.model import Step
from job_chain.util.log import log


def left_to_engine(hop: Any, step: Step, attempt: int) -> Optional[str]:
    """Why this failed attempt is AIHC's to restart, not job-chain's to decide (None: job-chain's):
    the step's job has fault tolerance with restarts left (:func:`job_chain.rules.retry.left_to_engine`),
    counted from the job answer and its events, and has not ended (a watcher advancing from a
    Failed job: AIHC gave up on it). When they cannot be read, the failure is left to
    AIHC too: a job-chain retry beside AIHC's restart would run the step twice at once."""
    from job_chain.engine.deadline import submit_with_deadline
    from job_chain.engine.jobs import RESTARTED
    from job_chain.engine.states import TERMINAL
    from job_chain.rules.retry import left_to_engine as rule

    limit = hop.chain.engine_restarts(step)
    if limit <= 0:
        return None
    try:
        job_id = hop.job_id(step.name, attempt)
        if job_id is None:
            raise JobChainError("this attempt's job was not found")
        job = hop.job(job_id)
        events = submit_with_deadline(lambda: hop.client.events(hop.chain.pool, job_id), hop.deadline,
                                      on_unreachable=hop.refresh)
    except JobChainError as exc:
        log(f"step {step.name}: cannot read how many times AIHC restarted this job ({exc}); leaving it to AIHC")
        return rule(limit, 0)
    return rule(limit, max(job.restarts or 0, sum(1 for e in events if e.kind == RESTARTED)), job.status in TERMINAL)


def diagnose(hop: Any, step: Step, attempt: int, exit_code: int, known: Optional[Failure] = None,
             checkpoint: Optional[Tuple[int, str]] = None) -> Failure:
    """Why this attempt failed: ``known`` (job-chain itself failed it), kept by another pod already,
    or classified now from every pod's log; kept with ``checkpoint``, the step's last complete one."""
    from job_chain.status.causes import classify_job, keep

    records, run_id = hop.records, hop.run_id
    kept = Failure.from_record(records.failure(run_id, step.name, attempt)) if records is not None else None
    if kept is not None:
        return kept
    from job_chain.hop.peers import own_rank

    me = own_rank()
    try:
        job_id = None if known is not None else hop.job_id(step.name, attempt)
        found = known or (classify_job(hop.client, hop.chain.pool, job_id, step, exit_code, first=me) if job_id else
                          Failure("unknown", explanation="this attempt's job could not be found to read its pods' "
                                                         "logs"))
    except JobChainError as exc:  # the API said no, or no credentials reach this job (the client is made here)
        found = Failure("unknown", explanation=f"its pods' logs could not be read when it failed: {exc}")
    return keep(records, run_id, step, attempt, found, checkpoint[0] if checkpoint else None)


def causes_so_far(hop: Any, step: Step, attempt: int, exit_code: int, failure: Failure) -> List[str]:
    """The classes of this revision's failed attempts of ``step`` up to this one (for budgets per cause)."""
    from job_chain.rules.state import AttemptFacts, causes_counted
    from job_chain.status.causes import earlier_causes
    from job_chain.status.observe import observe

    if step.retry_budgets is None or attempt <= step.first_attempt:
        return [failure.cls]
    try:
        first_job = hop.records.first_job_id(hop.run_id) if hop.records else None
        attempts, _, _ = observe(hop.client, hop.chain.pool, hop.run_id, cache={}, first_job_id=first_job,
                                 since=hop.started, explain_failures=False)
    except JobChainError:
        attempts = []
    earlier = earlier_causes(hop.client, hop.chain, hop.records, hop.run_id, step, attempt, attempts)
    return causes_counted(step, earlier + [AttemptFacts(attempt, exit_code=exit_code, cause=failure.cls)], attempt)


class After(NamedTuple):
    """What follows a failed attempt: why it failed, whether it is retried, and from which checkpoint."""

    failure: Failure
    decision: Any  # a job_chain.rules.retry.Decision
    resume: Optional[Tuple[int, str]]


def decide_after(hop: Any, step: Step, attempt: int, exit_code: int, known: Optional[Failure] = None,
                 checkpoint: Optional[Tuple[int, str]] = None) -> After:
    """Find why the attempt failed, decide whether it is retried (its budget), and say so in the job's
    log; the hop acts on the answer. ``checkpoint``: the step's last complete one (a retry resumes
    from it)."""
    from job_chain.rules.retry import decide, retry_sentence

    failure = diagnose(hop, step, attempt, exit_code, known, checkpoint)
    decision = decide(step, attempt, exit_code, causes_so_far(hop, step, attempt, exit_code, failure))
    resume = checkpoint if decision.retry else None
    from job_chain.spec.params import checkpoint_of

    spec = checkpoint_of(hop.chain, step, hop.run_id)
    log(f"step {step.name}: {retry_sentence(step, attempt, decision, failure, resume, spec.dir if spec else None)}")
    if failure.line:
        log(f"step {step.name}: the line that says so{' (pod ' + failure.pod + ')' if failure.pod else ''}: "
            f"{failure.line[:300]}")
    if not decision.retry:
        if failure.explanation:
            log(f"step {step.name}: what to do: {failure.explanation}")
        log(f"step {step.name} failed with exit code {exit_code}; "
            + ("" if step.is_handler else "the steps that need it will not start. " if hop.chain.graph
               else "the chain stops here. ")
            + f"Fix it, then continue with: {hop.resume_hint}")
    return After(failure, decision, resume)


def _found_now(hop: Any, name: str, item: Any) -> Optional[Failure]:
    """Why a failed attempt that kept no cause failed, found now and kept
    (:func:`~job_chain.status.causes.explain_one`); None when its job cannot be read."""
    from job_chain.status.causes import explain_one

    step = hop.chain.named(name)
    if step is None:
        return None
    try:
        return explain_one(hop.client, hop.chain, hop.records, hop.run_id, step, item.attempt, item.job_id,
                           item.exit_code)
    except JobChainError:  # no credentials reach this job (its client is made on first use)
        return None


def failed_details(hop: Any, failed: List[str]) -> List[Dict[str, Any]]:
    """What a run-end notification says of each failed step (:func:`~job_chain.status.summary.step_end`),
    from what this hop knows: its own exit and failure, else the record's, else found now."""
    from job_chain.status.summary import step_end

    out = []
    for name in failed:
        item = hop.latest.get(name)
        kept = hop.records is not None and item is not None
        code = hop.records.script_exit(hop.run_id, name, item.attempt) if kept else None
        failure = hop.me_failure.get(name) or (Failure.from_record(hop.records.failure(hop.run_id, name, item.attempt))
                                               if kept else None)
        if failure is None and item is not None and item.job_id:  # no hop of its own ran (its script never did)
            failure = _found_now(hop, name, item)
        out.append(step_end(name, code if code is not None else hop.me_code.get(name), item.reason if item else "",
                            failure))
    return out
