"""Whether a failed attempt is retried, and how that is said: the decision, apart from the catalogue.

``retries`` is a number (any failure, as before) or budgets per cause (``{"infra": 5, "user": 0}``;
a cause not named gets 0). A cause's budget counts the failures of that cause among the step's
attempts in the current revision. ``retryOnExitCodes`` keeps its meaning with either form: only
those exit codes (and 124, a timeout) are retried. Pure: the advancing job, ``status`` and the
console all decide with this one function.
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
