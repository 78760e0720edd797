"""Whether a failed attempt is retried, and how that is said: the decision, apart from the catalogue.

``retries`` is a number (any failure, as before) or budgets per cause (``{"infra": 5, "user": 0}``;
a cause not named gets 0). A cause's budget counts the failures of that cause among the step's
attempts in the current revision. ``retryOnExitCodes`` keeps its meaning with either form: only
those exit codes (and 124, a timeout) are retried. Pure: the advancing job, ``status`` and the
console all decide with this one function.

AIHC's own fault tolerance (``faultTolerance``) restarts a failed job itself, the same attempt, up
to its limit: job-chain's budget starts where AIHC's ended (:func:`left_to_engine`). While AIHC has
restarts left, job-chain neither retries nor fails the step; once they are used up, the failure
is job-chain's, and its retries (new jobs, new attempts) are counted apart from AIHC's restarts
(each new job is restarted by AIHC again). A step with fault tolerance and no ``retries`` gets no
retry from job-chain: never a second layer the user did not ask for (:func:`composition`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple

from job_chain.spec.model import Step

TIMED_OUT = 124


@dataclass(frozen=True)
class Decision:
    """What happens after a failed attempt. ``left``: retries left (of the cause's budget, or of
    ``retries``) once this retry is counted; ``why``: in words, when it is not retried."""

    retry: bool
    cause: str
    left: int
    why: str = ""


def decide(step: Step, attempt: int, exit_code: int, causes: Sequence[str] = ()) -> Decision:
    """The decision for ``attempt`` of ``step`` failing with ``exit_code``; ``causes``: the classes of
    this revision's failed attempts up to and including this one, oldest first."""
    causes = list(causes) or ["unknown"]  # this attempt's cause is always counted
    cause = causes[-1]
    code_ok = step.retry_on is None or exit_code in step.retry_on or exit_code == TIMED_OUT
    if step.retry_budgets is None:
        used = attempt - step.first_attempt + 1
        left = step.retries - used
        if left < 0:
            why = (f"no retries left ({step.retries} of {step.retries} used)" if step.retries
                   else "the step has no retries")
            return Decision(False, cause, 0, why)
    else:
        budget = step.retry_budgets.get(cause, 0)
        left = budget - sum(1 for c in causes if c == cause)
        if left < 0:
            why = (f"its {cause} budget of {budget} is used up" if budget
                   else f"its retries give {cause} failures no budget")
            return Decision(False, cause, 0, why)
    if not code_ok:
        return Decision(False, cause, left, f"exit code {exit_code} is not in retryOnExitCodes")
    return Decision(True, cause, left)


def left_to_engine(limit: int, restarted: int, ended: bool = False) -> Optional[str]:
    """Whether a failed attempt is left to the engine's own fault tolerance, which restarts the same
    job (``limit``: its restarts, :meth:`~job_chain.spec.model.Chain.engine_restarts`; ``restarted``:
    how many it made so far; ``ended``: the job already ended, so the engine restarts it no more):
    the sentence that says so, or None when they are used up (or there are none, or the engine
    gave up) and job-chain decides, with its own budget, untouched by them."""
    if restarted >= limit or ended:
        return None
    return (f"AIHC's fault tolerance restarts this job itself (restart {restarted + 1} of {limit}); job-chain "
            "neither retries nor fails the step until those restarts are used up")


def composition(step: Step, limit: int) -> Optional[str]:
    """What AIHC's restarts (``limit`` per job) and the step's own retries make together, said when a
    step sets both (``validate``); None when it does not."""
    retries = sum(step.retry_budgets.values()) if step.retry_budgets is not None else step.retries
    if limit <= 0 or retries <= 0:
        return None
    times = "time" if limit == 1 else "times"
    own = (f"its retries per cause (at most {retries} in all)" if step.retry_budgets is not None
           else f"jobChain.retries ({retries})")
    return (f"step {step.display}: AIHC's fault tolerance restarts a failed job up to {limit} {times} itself (the same "
            f"attempt); only when those are used up does job-chain retry it, by {own}, each retry a new job that "
            f"AIHC restarts up to {limit} {times} again: the script runs at most {(limit + 1) * (retries + 1)} times. "
            "Counted apart: AIHC's restarts never use job-chain's budget "
            "(docs/failures.md, \"AIHC's fault tolerance\")")


def retry_sentence(step: Step, attempt: int, decision: Decision, failure: Any,
                   resume: Optional[Tuple[int, str]] = None, checkpoint_dir: Optional[str] = None) -> str:
    """``attempt 1 failed: infra (nccl-watchdog-timeout on pod train-worker-0); retrying as attempt 2
    from iteration 200 (/pfs/ckpt/iter_0000200); infra budget 4 left`` (or why it is not retried).

    ``resume``: (iteration, its directory) the retry is told; ``checkpoint_dir``: where a step with a
    checkpoint saves them, said when the retry is told none (it starts from the beginning)."""
    text = f"attempt {attempt} failed: {describe(failure)}"
    if not decision.retry:
        return f"{text}; not retried: {decision.why}"
    text += f"; retrying as attempt {attempt + 1}"
    if resume is not None:
        text += f" from iteration {resume[0]} ({resume[1]})"
    elif checkpoint_dir is not None:
        text += f" from the start (no complete checkpoint in {checkpoint_dir})"
    if step.retry_budgets is not None:
        return f"{text}; {decision.cause} budget {decision.left} left"
    return f"{text}; {decision.left} {'retry' if decision.left == 1 else 'retries'} left"


def describe(failure: Any) -> str:
    """A failure in a few words (None: not known)."""
    return failure.summary() if failure is not None else "cause not known"
