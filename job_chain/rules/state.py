"""One attempt's state, the failures a budget counts, and the next attempt's number: each decided
here once, over neutral facts that the run record or the API fill in.

Every caller — the advancing job deciding from the record (:mod:`job_chain.hop.readiness`) or from
the API, ``status`` (:mod:`job_chain.status.summarize`), a failing job counting its budget — asks
these functions, so a fact such as "a failure whose cause is not recorded yet" means the same
thing everywhere. No dataclasses here: the in-job advance imports this module on every hop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, List, Optional, Sequence, Union

from job_chain.engine.states import FAILED, STOPPED, SUCCEEDED, TERMINAL
from job_chain.rules import plan as plan_

if TYPE_CHECKING:
    from job_chain.spec.model import Step

UNKNOWN_CAUSE = "unknown"


class AttemptFacts:
    """What is known of one attempt, wherever it was read: ``status`` the API's (None: not asked),
    ``exit_code`` the script's as its tail recorded it (None: not recorded), ``succeeded`` every
    replica succeeded (the tail's marker, or a later step proves it), ``cause`` the failure class
    kept in the record (None: none kept, or not classified yet). (A plain class: a join's hop makes
    these, and a named tuple costs a fresh python ~0.3 ms to make.)"""

    __slots__ = ("attempt", "status", "exit_code", "succeeded", "cause")

    def __init__(self, attempt: int, status: Optional[str] = None, exit_code: Optional[int] = None,
                 succeeded: bool = False, cause: Optional[str] = None) -> None:
        self.attempt, self.status, self.exit_code, self.succeeded, self.cause = (
            attempt, status, exit_code, succeeded, cause)


def failed(facts: AttemptFacts) -> bool:
    """The attempt failed: the engine says so, or its script exited non-zero — unless the engine says
    it is stopping or stopped (a stop kills the script: that is not a failure)."""
    if facts.succeeded or facts.status in SUCCEEDED or facts.status in STOPPED:
        return False
    return facts.status in FAILED or facts.exit_code not in (None, 0) or facts.cause is not None


def causes_counted(step: Step, attempts: Iterable[AttemptFacts], upto: int) -> List[str]:
    """The classes that budgets per cause count for ``upto`` failing: this revision's failed attempts
    of ``step`` up to ``upto``, oldest first, ``upto`` itself always (its cause is the one decided
    on). A failure whose cause is not kept (yet) counts as :data:`UNKNOWN_CAUSE`; an attempt that
    did not fail (stopped, then resumed) is not counted."""
    out = []
    for item in sorted(attempts, key=lambda a: a.attempt):
        if not step.first_attempt <= item.attempt <= upto:
            continue
        if item.attempt == upto or failed(item):
            out.append(item.cause or UNKNOWN_CAUSE)
    if not any(a.attempt == upto for a in attempts):
        out.append(UNKNOWN_CAUSE)
    return out


def planner_state(step: Step, latest: AttemptFacts,
                  causes: Union[Sequence[str], Callable[[], Sequence[str]]] = ()) -> str:
    """The planner's state (:mod:`job_chain.rules.plan`) of ``step`` from its latest attempt of this
    revision; ``causes``: what :func:`causes_counted` gives for it (only budgets per cause read it),
    or a function that gives it, asked only when the attempt failed (a look at 5,000 steps that
    succeeded counts none)."""
    if latest.succeeded or latest.status in SUCCEEDED:
        return plan_.SUCCEEDED
    if failed(latest):
        from job_chain.rules.retry import decide

        code = latest.exit_code if latest.exit_code is not None else 1
        counted = causes() if callable(causes) else causes
        return plan_.RETRY_DUE if decide(step, latest.attempt, code, counted).retry else plan_.FAILED
    if latest.status in STOPPED and latest.status in TERMINAL:
        return plan_.STOPPED
    return plan_.ACTIVE


def next_attempt(step: Step, latest: Optional[int]) -> int:
    """The number the next attempt of ``step`` gets: after its latest one (any revision), and never
    below the first attempt of the revision it runs in."""
    return max(step.first_attempt, (latest or 0) + 1)
