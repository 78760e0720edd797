"""Why a failed attempt failed, found once and kept: the tails of every pod's log, through the API.

Only failures read logs — a hop that succeeded never does. A failed attempt's cause is
classified from the last :data:`~job_chain.failures.classify.TAIL_BYTES` of each of its pods' logs
(the pod that failed first first) and kept in the run record, so ``status``, the console and
the next hop read the record instead of the logs, and agree with the decision that was taken.
:func:`pod_tails` is the one place that reads logs for this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Sequence, Tuple

from job_chain.aihc.engine import as_engine
from job_chain.engine.errors import EngineError
from job_chain.engine.jobs import Event, Job
from job_chain.rules.state import AttemptFacts
from job_chain.spec.model import Chain, Step
from job_chain.util.redaction import env_secrets

if TYPE_CHECKING:  # the classifier is imported where a failure is explained (a run that failed nowhere: never)
    from job_chain.failures.classify import Failure

TAIL_LINES = 2000  # asked of the API per pod (training lines are ~100-300 bytes); then cut to TAIL_BYTES
MAX_PODS = 256  # a bound on what one classification reads (256 × 256 KB)


def _pod_order(job: Job, first: Optional[int]) -> List[str]:
    """The job's pods, the one that failed first first: the pod of rank ``first`` (the pod asking),
    then the failed ones (by when they ended, when the engine says), then the rest in the engine's order."""
    named = [(pod.rank != first, not pod.failed, (pod.finished or float("inf")) if pod.failed else float("inf"),
              position, pod.name) for position, pod in enumerate(job.pods)]
    return [item[-1] for item in sorted(named)][:MAX_PODS]


def pod_tails(client: Any, pool: str, job_id: str, first: Optional[int] = None) -> List[Tuple[str, str]]:
    """(pod, the tail of its log) for every pod of the job, the pod that failed first first.

    A pod whose log cannot be read is skipped (its neighbours usually say enough); the job
    itself not being readable raises :class:`~job_chain.engine.jobs.EngineError`.
    """
    from job_chain.failures.classify import TAIL_BYTES, tail_text

    engine = as_engine(client)
    tails = []
    for pod in _pod_order(engine.job(pool, job_id), first):
        try:
            records, _ = engine.log_page(pool, job_id, pod, max_lines=TAIL_LINES)
        except EngineError:
            continue
        tails.append((pod, tail_text("".join(records), TAIL_BYTES)))
    return tails


def classify_job(client: Any, pool: str, job_id: str, step: Step, exit_code: Optional[int] = None,
                 first: Optional[int] = None) -> Failure:
    """The cause of one failed job, from every pod's log tail (the step's failureRules first); its
    matching line with the step's secret env values hidden (:mod:`job_chain.util.redaction`), as the
    log view hides them: the line is kept in the record, and shown and sent from there."""
    from job_chain.failures.classify import classify

    read: List[List[Event]] = []

    def job_events() -> List[Event]:  # read once, when first needed: most failures are told by their logs
        if not read:
            read.append(as_engine(client).events(pool, job_id))
        return read[0]

    hung = _engine_hang(job_events, step)
    if hung is not None:  # the engine's own verdict: its pods were stopped, their logs say nothing more
        return hung
    tails = pod_tails(client, pool, job_id, first)
    found = classify(tails, step.failure_rules, exit_code)
    if found.cls == "unknown" and not found.signature:  # no log line matched: does the platform say why?
        found = _platform(job_events(), any(text.strip() for _, text in tails)) or found
    return found.redacted(env_secrets(step.body))


def _engine_hang(job_events: Callable[[], List[Event]], step: Step) -> Optional[Failure]:
    """``hang`` when AIHC's hang detection (on in the step's body) ended the job, from its events."""
    from job_chain.aihc.spec import hang_minutes
    from job_chain.failures.classify import engine_hang

    if hang_minutes(step.body) is None:
        return None
    return engine_hang(job_events())


def _platform(events: List[Event], logged: bool) -> Optional[Failure]:
    """The cause the job's events give: the engine's own verdict on a job it ended (Slurm's TIMEOUT,
    NODE_FAIL, …, whose node may have logged nothing), else the ``platform`` cause (its Warnings,
    its JobFailed reason), or None."""
    from job_chain.failures.classify import platform_cause, verdict_cause

    reason = next((e.message for e in events if e.kind == "JobFailed"), "")
    return verdict_cause(events) or platform_cause(events, reason, logged)


def keep(records: Any, run_id: str, step: Step, attempt: int, failure: Failure,
         checkpoint_iteration: Optional[int] = None) -> Failure:
    """Keep ``failure`` as the cause of (step, attempt) unless one was kept already; the kept one."""
    if records is None:
        return failure
    from job_chain.failures.classify import Failure

    data = failure.to_record()
    if checkpoint_iteration is not None:
        data["checkpointIteration"] = checkpoint_iteration
    return Failure.from_record(records.record_failure(run_id, step.name, attempt, data)) or failure


def explain_one(client: Any, chain: Chain, records: Any, run_id: str, step: Step, attempt: int, job_id: str,
                exit_code: Optional[int] = None) -> Optional[Failure]:
    """Why a failed attempt that kept no cause failed (a job the platform failed before its script
    ran tells it in its events), classified now from its job and kept; None when its job cannot be
    read now (the next look tries again)."""
    try:
        found = classify_job(client, chain.pool, job_id, step, exit_code)
    except EngineError:
        return None
    return keep(records, run_id, step, attempt, found)


def explain_failures(client: Any, chain: Chain, records: Any, run_id: str, attempts: Iterable[Any],
                     facts: Any) -> None:
    """Find (and keep) the cause of every failed attempt the record does not explain yet, into
    ``facts.failures`` (:func:`explain_one`). A job whose logs cannot be read now is left for the next look."""
    from job_chain.engine.states import FAILED
    from job_chain.status.summarize import fact

    for item in attempts:
        step = chain.resolve(item.step)
        if step is None or item.status not in FAILED or not item.job_id:
            continue
        if fact(facts.failures, step, item.attempt) is not None:
            continue
        code = fact(facts.script_exit, step, item.attempt)
        found = explain_one(client, chain, records, run_id, step, item.attempt, item.job_id,
                            code if code is not None else item.exit_code)
        if found is not None:
            facts.failures[(step.name, item.attempt)] = found


def earlier_causes(client: Any, chain: Chain, records: Any, run_id: str, step: Step, attempt: int,
                   attempts: Sequence[Any]) -> List[AttemptFacts]:
    """This revision's attempts of ``step`` before ``attempt`` as budgets per cause count them
    (:func:`~job_chain.rules.state.causes_counted`): each failed one with its class from the record,
    else classified now from its logs and kept (:func:`explain_one`)."""
    from job_chain.engine.states import FAILED
    from job_chain.failures.classify import Failure

    out = []
    for item in sorted(attempts, key=lambda a: a.attempt):
        if chain.resolve(item.step) is not step or not step.first_attempt <= item.attempt < attempt:
            continue
        kept = Failure.from_record(records.failure(run_id, step.name, item.attempt)) if records else None
        if kept is None and item.status in FAILED and item.job_id:
            kept = explain_one(client, chain, records, run_id, step, item.attempt, item.job_id)
        out.append(AttemptFacts(item.attempt, item.status, cause=kept.cls if kept is not None else None))
    return out
