"""Plans: whoever submits a step that a plain line follows writes what its success submits.

A plan is a cache of the one advance (:mod:`job_chain.hop.advance`): for the step and the next
few of its line, the exact request, client token and attempt its success creates, and the other
steps a join needs, made by the code that submits under the run's current revision. The tail
reads it before deciding whether it must thaw the chain; anything it does not cover (another
revision, a failure, outputs, a partner that failed) is decided the full way, idempotently.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from job_chain.record.plans import write_plan

if TYPE_CHECKING:
    from job_chain.record.records import RunRecords
    from job_chain.spec.model import Chain, Step

AHEAD = 8  # steps of a line one plan covers: a full advance every AHEAD hops renews it


class Finishing:
    """What the advance reads of the finishing step itself before it looks at what follows: the
    checkpoint its exit record names, replicas that wait for each other, an exit handler's end,
    slots it gives back. The advance reads these only from here (:func:`finishing`), so a plan
    (which stands for :meth:`planned` facts) can never skip a feature the advance has. (A plain
    class: every hop makes one, and a named tuple costs a fresh python ~0.3 ms to make.)"""

    __slots__ = ("name", "checkpoint", "replicas", "handler", "capped", "cached")

    def __init__(self, name: str, checkpoint: Any = None, replicas: int = 1, handler: bool = False,
                 capped: bool = False, cached: bool = False) -> None:
        self.name = name
        self.checkpoint = checkpoint  # the step's Checkpoint settings, or None
        self.replicas = replicas
        self.handler = handler
        self.capped = capped  # maxParallel / maxRunning: it holds a slot
        self.cached = cached  # jobChain.cache: its success writes a cache entry

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Finishing) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def planned(cls, name: str) -> Finishing:
        """What a planned step is known to be without its chain: the defaults."""
        return cls(name)


def finishing(chain: Chain, step: Step) -> Finishing:
    from job_chain.record import slots

    return Finishing(step.name, step.checkpoint, int(step.body.get("jobSpec", {}).get("replicas", 1)),
                     step.is_handler, slots.involved(chain, step), step.cache is not None)


def follower(chain: Chain, step: Step) -> Optional[Step]:
    """The one step that ``step`` succeeding can start, when a plan can stand for the advance:
    ``step`` has only the :meth:`Finishing.planned` facts, and what follows is a line, or a join
    of a run nobody waits on to end, that uses no earlier outputs and is not cached (whether it runs
    is decided when it is reached: :func:`job_chain.submit.create.reuse`); None otherwise."""
    from job_chain.record.outputs import uses

    if finishing(chain, step) != Finishing.planned(step.name):
        return None
    dependents = chain.dependents(step.index)
    if len(dependents) != 1:
        return None
    follower = dependents[0]
    if follower.cache is not None:
        return None
    partners = [chain.step(i) for i in follower.depends_on if i != step.index]
    if partners and (chain.handlers or chain.notify or any(p is None or p.excluded for p in partners)):
        return None  # the run's end must be seen by someone: the full advance asks the API where needed
    return None if uses(follower) else follower  # earlier outputs are read when it is submitted


if TYPE_CHECKING:
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
        nxt = follower(chain, current)
        if nxt is None:
            break
        attempt = nxt.first_attempt
        if (nxt.name, attempt) not in made:
            made[(nxt.name, attempt)] = build_request(chain, nxt.name, run_id, attempt, mode="job")
        partners = [p for p in (chain.step(i) for i in sorted(nxt.depends_on)) if p is not None]
        out.append({"step": current.name, "next": nxt.name, "attempt": attempt,
                    "token": client_token(run_id, nxt, attempt),
                    "body": made[(nxt.name, attempt)],
                    "needs": {p.name: p.first_attempt for p in partners if p is not current}})
        current = nxt
    return out


def plan_submitted(chain: Chain, records: RunRecords, run_id: str, step: Step, attempt: int,
                   made: Optional[Made] = None) -> None:
    """After ``step`` (attempt ``attempt``) was submitted in job mode: plan what its success submits."""
    if chain.revision >= 1:
        write_plan(records, run_id, step.name, attempt, chain.revision, chain.api_config.get("version"), chain.pool,
                   plan(chain, run_id, step, made=made))


