"""Whether a join is ready: one rule over the run record's facts, for the planned and the full advance.

In job mode every job's tail writes its exit code and then, on success, its succeeded marker
before it looks at anything else. Of the steps a join needs that finish together, the one whose
marker is written last reads all the others' markers, sees the join ready and creates it; a branch
that does not see it ready stops, because the step still missing will see this branch's marker
when it reports (``docs/graphs.md``, "How a graph advances without a controller").

A step the record has no attempt of yet is the delicate case. When everything it needs has
succeeded and it is neither this job's to create nor waiting for a slot, whoever found it ready (a
split still creating its branches) is creating it, and its tail will report here: it counts as
going (:func:`unseen_state`). Once the run holds a failure or a create that gave up
(:func:`troubled`), nothing is assumed: it may never be created, so the planner decides and
creates it (the client token makes a second create harmless).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from job_chain.rules import plan as plan_

ASK = "ask"  # submitted where no tail reports to the record: only the API knows how it is doing


def troubled(listing: Mapping[str, Mapping[Any, str]]) -> bool:
    """The run record holds a failed attempt or a create that gave up."""
    return bool(listing.get("failure") or listing.get("advance-failed"))


def unseen_state(*, troubled: bool, capped: bool, mine: bool, deps_succeeded: bool) -> str:
    """The planner's state of a step of this revision that the record has no attempt of. ``mine``:
    the finishing step is one of its dependencies (then it is this job's to create); ``capped``:
    it starts through a slot (maxParallel, maxRunning), which the slot rules hand on."""
    if deps_succeeded and not (troubled or capped or mine):
        return plan_.ACTIVE  # awaited: its creator is at it, and its tail will report here
    return plan_.NOT_SUBMITTED


def join_ready(partners: Iterable[str], troubled: bool) -> Optional[bool]:
    """From the states of the other steps a join needs: True when all succeeded; False when the join
    must wait and this job may stop (each one still going will see this job's marker when it
    reports, or waits for its own dependencies); None when the full planner must decide (one
    failed or was stopped, one only the API can tell, or one not submitted in a troubled run)."""
    states = list(partners)
    if all(s == plan_.SUCCEEDED for s in states):
        return True
    if any(s in (plan_.FAILED, plan_.RETRY_DUE, plan_.STOPPED, ASK) for s in states):
        return None
    if troubled and plan_.NOT_SUBMITTED in states:
        return None
    return False
