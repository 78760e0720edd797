"""``maxParallel`` and ``maxRunning`` without a controller: slots kept as files in the run record.

A *pool* is a capped set of steps: the points of a matrix with ``maxParallel`` N, or every step of
a run with ``maxRunning`` N (a point of a capped matrix in such a run needs a slot in both). A
pool has N slots; each slot is a sequence of generations, and generation g of slot s of pool P
in resume round (epoch) e is the file ``slot.P.e.s.g``, created exclusively (``link``, which is
atomic on NFS too) and naming the step that holds it. A slot is free when it has no generation
yet, or its latest one has a ``free.P.e.s.g`` beside it, written by its holder once that step
ended for good (succeeded, or failed with no retry left).

Starting waiting steps (:func:`fill`, run by every ending pooled step after it wrote its end,
by the step whose success makes pooled steps ready, by ``run`` and by ``resume``) repeats: read
the directory; take the first ready step not yet claimed in this epoch for which every pool has a
free slot; take generation g+1 of a free slot in each of its pools (exclusive); claim the step
(``claim.e.STEP``, exclusive, naming those slots); submit it with its deterministic token. A lost
race on a slot means reading again; a lost race on the claim, freeing the slots just taken and
reading again. docs/graphs.md has the argument that this starts each step once, never holds more
than N, and never strands a free slot.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from job_chain.record import layout
from job_chain.record.records import RunRecords, latest_listed
from job_chain.rules.state import next_attempt
from job_chain.spec.model import Chain, Step

RUN_POOL = "run"
Held = Tuple[str, int, int]  # (pool, slot, generation)


def pools(chain: Chain, step: Step) -> List[Tuple[str, int]]:
    """(pool, cap) for each pool ``step`` needs a slot in, the run's first. A cap that can never bind
    (as many as there are steps) is no cap: those steps advance as if there were none."""
    return _pools_of(chain).get(step.index, [])


def _pools_of(chain: Chain) -> Dict[int, List[Tuple[str, int]]]:
    """Every step's pools, worked out once per chain (status asks for each step)."""
    key = (id(chain.steps), len(chain.steps), chain.max_running)
    if chain._pools is not None and chain._pools[0] == key:
        return chain._pools[1]
    counted = [s for s in chain.steps if not s.is_handler and not s.excluded]
    sizes: Dict[str, int] = {}
    for step in chain.steps:
        if step.group:
            sizes[step.group] = sizes.get(step.group, 0) + 1
    run_capped = bool(chain.max_running and chain.max_running < len(counted))
    found: Dict[int, List[Tuple[str, int]]] = {}
    for step in counted:
        out: List[Tuple[str, int]] = [(RUN_POOL, chain.max_running)] if run_capped else []  # type: ignore[list-item]
        if step.group and step.max_parallel and step.max_parallel < sizes[step.group]:
            out.append((f"m-{step.group}", step.max_parallel))
        if out:
            found[step.index] = out
    chain._pools = (key, found)
    return found


def capped(chain: Chain) -> bool:
    return bool(_pools_of(chain))  # (a step with no pool has no entry)


def involved(chain: Chain, me: Step) -> bool:
    """Whether ``me`` ending can free a slot or make a capped step ready (then it must look at the run)."""
    return bool(pools(chain, me)) or any(pools(chain, d) for d in chain.dependents(me.index))


def first_wave(chain: Chain, ready: Sequence[Step]) -> Tuple[List[Step], List[Step]]:
    """(the steps of ``ready`` a fresh round starts at once, the ones that wait for a slot), in order."""
    used: Dict[str, int] = {}
    now, later = [], []
    for step in ready:
        needed = pools(chain, step)
        if all(used.get(pool, 0) < cap for pool, cap in needed):
            for pool, _ in needed:
                used[pool] = used.get(pool, 0) + 1
            now.append(step)
        else:
            later.append(step)
    return now, later


# -- the files ------------------------------------------------------------------------------------
def epoch(records: RunRecords, run_id: str) -> int:
    """The run's resume round: every resume that submits starts a new one, with every slot free."""
    value = (records.get_run(run_id) or {}).get("epoch", 0)
    return value if isinstance(value, int) and value >= 0 else 0


@dataclass
class State:
    """What one read of the run directory says about the slots and claims of one epoch."""

    latest: Dict[Tuple[str, int], int] = field(default_factory=dict)  # (pool, slot) -> latest generation
    free: Set[Held] = field(default_factory=set)
    claimed: Set[str] = field(default_factory=set)

    def free_slots(self, pool: str, cap: int) -> List[Tuple[int, int]]:
        """(slot, the generation that takes it) of each free slot."""
        out = []
        for slot in range(cap):
            gen = self.latest.get((pool, slot))
            if gen is None:
                out.append((slot, 0))
            elif (pool, slot, gen) in self.free:
                out.append((slot, gen + 1))
        return out


def read_state(names: Iterable[str], epoch_: int) -> State:
    """The slots and claims of epoch ``epoch_`` in ``names``, a listing of the run's directory
    (:meth:`~job_chain.record.records.RunRecords.names`)."""
    state = State()
    for name in names:
        if name.startswith("slot."):
            found = layout.SLOT.fullmatch(name)
            if found and int(found.group(2)) == epoch_:
                key = (found.group(1), int(found.group(3)))
                state.latest[key] = max(state.latest.get(key, -1), int(found.group(4)))
        elif name.startswith("free."):
            found = layout.FREE.fullmatch(name)
            if found and int(found.group(2)) == epoch_:
                state.free.add((found.group(1), int(found.group(3)), int(found.group(4))))
        elif name.startswith("claim."):
            found = layout.CLAIM.fullmatch(name)
            if found and int(found.group(1)) == epoch_:
                state.claimed.add(found.group(2))
    return state


def _free(records: RunRecords, run_id: str, held: Iterable[Held], epoch_: int) -> None:
    for pool, slot, gen in held:
        records.create(run_id, layout.free_name(pool, epoch_, slot, gen), {"at": time.time()})


# -- what advancing steps, run and resume do -------------------------------------------------------
def release(chain: Chain, records: Optional[RunRecords], run_id: str, me: Step) -> None:
    """``me`` ended for good: free the slots its claim holds (written before it looks at the run)."""
    if records is None or not pools(chain, me):
        return
    e = epoch(records, run_id)
    claim = records.read(run_id, layout.claim_name(e, me.name))
    if claim is None:
        return  # not started through a slot (it has none to give back)
    try:
        held = [tuple(h) for h in claim.get("slots") or []]
    except TypeError:
        return
    _free(records, run_id, held, e)


def requeued(chain: Chain, epoch_: int, claimed: Set[str], states: Dict[int, str]) -> List[Step]:
    """Pooled steps that failed or were stopped before this resume round and have not started in it:
    they wait for a slot again (``resume`` re-runs them, as many at once as the caps allow)."""
    from job_chain.rules import plan as plan_

    if epoch_ == 0:
        return []
    return [s for s in chain.steps if states.get(s.index) in (plan_.FAILED, plan_.STOPPED)
            and s.name not in claimed and pools(chain, s)]


SUBMITTED, NOT_CREATED, UNKNOWN = "submitted", "not-created", "unknown"


def not_created(exc: Optional[BaseException]) -> bool:
    """Whether a failed submission certainly created nothing: a reference it could not resolve, or a
    create the API refused (4xx). A timeout or 5xx may have been stored all the same."""
    from job_chain.engine.errors import EngineError
    from job_chain.spec.params import MissingOutput

    if isinstance(exc, MissingOutput):
        return True
    return isinstance(exc, EngineError) and exc.status is not None and 400 <= exc.status < 500 and not exc.retryable


def fill(chain: Chain, records: RunRecords, run_id: str, ready: Sequence[Step], attempts: Mapping[str, int],
         submit: Callable[[Step, int], str], origin: str,
         seen: Optional[Tuple[int, State]] = None) -> Tuple[List[str], bool]:
    """Start as many of ``ready`` (in order) as the free slots allow; (the names started, whether a
    submission failed). ``submit`` says :data:`SUBMITTED`, or how it gave up (it said why):
    :data:`NOT_CREATED` or :data:`UNKNOWN`.

    A step whose submission failed keeps its claim, so nothing else starts it in this round: it
    waits for ``resume``. Its slots go on to the next waiting step when nothing was created; when
    the create may have been stored all the same they stay with it, and ``resume`` (which asks the
    API, and starts a round with every slot free) decides. ``seen``: (the epoch, the state) the
    caller has just read, for the first pass.
    """
    e, known = seen if seen is not None else (epoch(records, run_id), None)
    pending = [s for s in ready if pools(chain, s)]
    started: List[str] = []
    failed = False
    for _ in range(4 * len(pending) + 16):  # each pass starts a step or saw another process win a race
        state, known = known if known is not None else read_state(records.names(run_id) or [], e), None
        pick = next((s for s in pending if s.name not in state.claimed
                     and all(state.free_slots(pool, cap) for pool, cap in pools(chain, s))), None)
        if pick is None:
            break
        attempt = attempts.get(pick.name, pick.first_attempt)
        held = _acquire(records, run_id, e, state, pools(chain, pick), pick.name)
        if held is None:  # another process took the slot: look again
            time.sleep(random.uniform(0.0, 0.01))
            continue
        if not records.create(run_id, layout.claim_name(e, pick.name),
                              {"attempt": attempt, "by": origin, "slots": held}):
            _free(records, run_id, held, e)  # another process starts that step: hand the slots on, look again
            continue
        pending.remove(pick)
        outcome = submit(pick, attempt)
        if outcome == SUBMITTED:
            started.append(pick.name)
            continue
        failed = True
        if outcome == NOT_CREATED:
            _free(records, run_id, held, e)  # it holds nothing: the next waiting step may have its slots
    return started, failed


def hand_on(chain: Chain, records: Optional[RunRecords], run_id: str, me: Step, submit: Callable[[Step, int], str],
            origin: str) -> Optional[Tuple[List[str], bool]]:
    """A matrix point that ended while some of its matrix has not started yet: start the next ones
    from the run record alone, without asking the API about the run (None: this is not such a case,
    look at the whole run).

    Nothing else can be ready then: whatever follows the matrix waits for all its points, and the
    run cannot have ended while a point is still to run. The waiting points are those with no
    claim in this round whose latest attempt in the record did not succeed (the latest attempt as
    a join sees it: :func:`~job_chain.record.records.latest_listed`); each starts at its next attempt.
    """
    if records is None or [pool for pool, _ in pools(chain, me)] != [f"m-{me.group}"]:
        return None
    names = records.names(run_id)
    if names is None:
        return None
    e = epoch(records, run_id)
    state = read_state(names, e)
    points = [s for s in chain.points(me.group) if pools(chain, s)]
    listing = records.listed(run_id, names)
    latest = latest_listed(listing, {s.name: s.first_attempt for s in points})
    waiting = [s for s in points if s.name not in state.claimed
               and (s.name, latest.get(s.name)) not in listing[layout.SUCCEEDED]]
    if not waiting:
        return None  # the last ones: what follows the matrix may be ready now
    attempts = {s.name: next_attempt(s, latest.get(s.name)) for s in waiting}
    return fill(chain, records, run_id, waiting, attempts, submit, origin, seen=(e, state))


def _acquire(records: RunRecords, run_id: str, epoch_: int, state: State, needed: Sequence[Tuple[str, int]],
             step: str) -> Optional[List[Held]]:
    """A free slot in each pool (in order, the run's first), or None (and nothing held)."""
    held: List[Held] = []
    for pool, cap in needed:
        got = next(((pool, slot, gen) for slot, gen in state.free_slots(pool, cap)
                    if records.create(run_id, layout.slot_name(pool, epoch_, slot, gen), {"step": step})), None)
        if got is None:
            _free(records, run_id, held, epoch_)
            return None
        held.append(got)
    return held


def claims(records: RunRecords, run_id: str) -> Tuple[int, Set[str]]:
    """(the run's epoch, the steps claimed in it): what ``status`` needs to tell waiting from failed."""
    e = epoch(records, run_id)
    return e, read_state(records.names(run_id) or [], e).claimed if e else set()


def members(chain: Chain, step: Step) -> List[int]:
    """The indexes of the steps that share a pool with ``step``."""
    names = {pool for pool, _ in pools(chain, step)}
    return [i for i, found in _pools_of(chain).items() if names & {pool for pool, _ in found}]
