"""Planned hops: whoever submits a step that a plain line follows writes what its success submits.

See :mod:`job_chain.hop.lean` for the tail that follows a plan and why it is safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from job_chain.record.plans import write_plan

if TYPE_CHECKING:
    from job_chain.record.records import RunRecords
    from job_chain.spec.model import Chain, Step

AHEAD = 8  # steps of a line one plan covers: a full advance every AHEAD hops renews it


def _follower(chain: Chain, step: Step) -> Optional[Step]:
    """The one step that ``step`` succeeding can start, when the full advance would decide that
    from the record alone (a line; a join of a run nobody waits on to end); None otherwise (see
    ``_Hop.finish`` and :mod:`~job_chain.hop.readiness`)."""
    from job_chain.record import slots
    from job_chain.record.outputs import uses

    if step.is_handler or step.checkpoint is not None or slots.involved(chain, step):
        return None
    if int(step.body.get("jobSpec", {}).get("replicas", 1)) != 1:  # replicas wait for each other
        return None
    dependents = chain.dependents(step.index)
    if len(dependents) != 1:
        return None
    follower = dependents[0]
    partners = [chain.step(i) for i in follower.depends_on if i != step.index]
    if partners and (chain.handlers or chain.notify or any(p is None or p.excluded for p in partners)):
        return None  # the run's end must be seen by someone: the full advance asks the API where needed
    return None if uses(follower) else follower  # earlier outputs are read when it is submitted


Made = Dict[Tuple[str, int], Any]  # (step, attempt) -> its request, shared by plans made together


def plan(chain: Chain, run_id: str, step: Step, ahead: int = AHEAD,
         made: Optional[Made] = None) -> List[Dict[str, Any]]:
    """What ``step`` and the steps after it on its line submit when they succeed, up to ``ahead``
    of them: ``[{"step", "next", "attempt", "token", "body", "needs"}, ...]`` (empty: none
    qualifies; ``needs``: the follower's other dependencies, in order). ``made``: requests already
    built (a split's branches share their join's)."""
    from job_chain.submit.request import build_request, client_token

    made = {} if made is None else made
    out: List[Dict[str, Any]] = []
    current: Optional[Step] = step
    while current is not None and len(out) < ahead:
        follower = _follower(chain, current)
        if follower is None:
            break
        attempt = follower.first_attempt
        if (follower.name, attempt) not in made:
            made[(follower.name, attempt)] = build_request(chain, follower.name, run_id, attempt, mode="job")
        partners = [p for p in (chain.step(i) for i in sorted(follower.depends_on)) if p is not None]
        out.append({"step": current.name, "next": follower.name, "attempt": attempt,
                    "token": client_token(run_id, follower, attempt),
                    "body": made[(follower.name, attempt)],
                    "needs": {p.name: p.first_attempt for p in partners if p is not current}})
        current = follower
    return out


def plan_submitted(chain: Chain, records: RunRecords, run_id: str, step: Step, attempt: int,
                   made: Optional[Made] = None) -> None:
    """After ``step`` (attempt ``attempt``) was submitted in job mode: plan what its success submits."""
    if chain.revision >= 1:
        write_plan(records, run_id, step.name, attempt, chain.revision, chain.api_config.get("version"), chain.pool,
                   plan(chain, run_id, step, made=made))


