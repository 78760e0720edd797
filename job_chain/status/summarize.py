"""The rules that turn a run's facts into where it stands: each step's status and the outcome.

:func:`summarize` is pure: the attempts (from the API) and the record's facts go in, a
:class:`~job_chain.status.types.RunStatus` comes out, so every rule here is tested in-process
without a server. Steps are matched by name (a run recorded before names is matched by index).
"""

from __future__ import annotations

import time
from operator import attrgetter
from typing import AbstractSet, Any, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar

from job_chain.engine.states import FAILED, SUCCEEDED
from job_chain.failures.signatures import UNRECORDED
from job_chain.rules import plan as plan_
from job_chain.rules.retry import decide
from job_chain.rules.state import AttemptFacts, causes_counted, next_attempt, planner_state
from job_chain.spec.model import Chain, Step
from job_chain.status.cost import gpus, lost_hours, resumed_save, running_window, started_at, window_hours
from job_chain.status.types import (
    NOT_SUBMITTED,
    SKIPPED,
    STALL_AFTER,
    WAITING,
    Attempt,
    Outcome,
    RunFacts,
    RunStatus,
    StepStatus,
    utc,
)
from job_chain.util.redaction import env_secrets

T = TypeVar("T")


def fact(table: Dict[Tuple[str, int], T], step: Step, attempt: int) -> Optional[T]:
    """A record fact about (step, attempt), also under the key a run recorded before names used."""
    if not table:  # (most tables of a look are empty: no key is made for them)
        return None
    found = table.get((step.name, attempt))
    if found is not None:
        return found
    return table.get((f"{step.index:04d}", attempt))


def has_fact(keys: AbstractSet[Tuple[str, int]], step: Step, attempt: int) -> bool:
    """Whether (step, attempt) is among ``keys``, also under the key a run recorded before names used
    (``keys`` is asked as it is: a run's 5,000 success markers are not copied once per step)."""
    return (step.name, attempt) in keys or (f"{step.index:04d}", attempt) in keys


def by_step(chain: Chain, attempts: Iterable[Attempt]) -> Dict[str, List[Attempt]]:
    """Each step's attempts (sorted), keyed by step name; jobs of steps no longer in the chain are left out."""
    out: Dict[str, List[Attempt]] = {}
    for item in attempts:
        step = chain.resolve(item.step)
        if step is not None:
            out.setdefault(step.name, []).append(item)
    for items in out.values():
        items.sort(key=_NUMBER)
    return out


_NUMBER = attrgetter("attempt")


def summarize(chain: Chain, attempts: Iterable[Attempt], facts: RunFacts, *, run_id: str,
              now: Optional[float] = None, local: bool = False, endpoint: str = "",
              first_step: int = 0) -> RunStatus:
    """Every step's status and the run's outcome, from its attempts and the record's facts."""
    from job_chain.record import slots
    from job_chain.rules import plan as plan_
    now = time.time() if now is None else now
    found_by_step = by_step(chain, attempts)
    steps: List[StepStatus] = []
    states: Dict[int, str] = {}
    for step in chain.steps:
        name, job_gpus = step.name, gpus(step.body)
        every = [_with_facts(a, step, facts, now, job_gpus) for a in found_by_step.get(name, ())]
        found = [_with_script_exit(a, step, facts) for a in every if a.attempt >= step.first_attempt]
        history = [a for a in every if a.attempt < step.first_attempt]
        following = next_attempt(step, every[-1].attempt if every else None)
        if not found:
            status = SKIPPED if step.excluded else NOT_SUBMITTED
            steps.append(_add_hours(StepStatus(step.index, name, status, reason=step.excluded or "",
                                               history=history, next_attempt=following)))
            continue  # (an excluded step the plan counts as done: what follows it may run)
        latest = found[-1]
        state = StepStatus(step.index, name, latest.status, latest.job_id, latest.attempt, latest.exit_code,
                           latest.reason, latest.started, latest.finished, found, history=history,
                           next_attempt=following)
        if not state.succeeded and latest.terminal and (has_fact(facts.succeeded, step, latest.attempt) or any(
                found_by_step.get(d.name) for d in chain.dependents(step.index))):
            # every replica succeeded; the job failed (exit 75) only because advancing did
            gave_up = fact(facts.advance_failed, step, latest.attempt)
            state.status, state.exit_code = "Succeeded", 0
            state.reason = (f"the script succeeded; its job ended {latest.status} while starting what follows"
                            + (f": {gave_up}" if gave_up else ""))
            state.attempts = found[:-1] + [latest.but(status="Succeeded", exit_code=0)]
        _add_hours(state)
        _add_notes(chain, step, state, run_id)
        steps.append(state)
        if step.removed_in:  # history: it no longer decides anything (excluded: the plan counts it done)
            state.removed = step.excluded or f"removed in revision {step.removed_in}"
            continue
        states[step.index] = _planner_state(step, state)
    for again in slots.requeued(chain, facts.epoch, facts.claimed, states):
        del states[again.index]  # resumed: it waits for a slot again
    plan = plan_.plan(chain, states, stopped=facts.stopped)
    ready = set(plan.ready)  # (a matrix that waits for slots may have thousands)
    for state, step in zip(steps, chain.steps):
        state.depends_on, state.run_on = list(step.depends_on), step.run_on
        state.display, state.group, state.point = step.display if step.group else "", step.group, dict(step.point)
        state.outputs = dict(facts.outputs.get(state.name) or {})
        if state.index in plan.blocked:
            state.status = SKIPPED if chain.graph else NOT_SUBMITTED
            state.reason = plan.blocked[state.index]
        elif state.index in ready and slots.pools(chain, step):
            state.status, state.reason = WAITING, "waits for a slot (" + ", ".join(
                "maxRunning" if pool == slots.RUN_POOL else f"maxParallel of {step.group}" for pool, _ in
                slots.pools(chain, step)) + ")"
    outcome, reason = _outcome(chain, steps, plan, facts, now)
    return RunStatus(run_id, chain.path, outcome, steps, first_step, utc(facts.started), reason, local, endpoint,
                     graph=chain.graph or bool(chain.handlers), revision=chain.revision, digest=chain.digest,
                     params=dict(chain.params), notify_failed=list(facts.notify_failed))


def causes(step: Step, attempts: Sequence[Attempt], upto: int) -> List[str]:
    """What budgets per cause count for attempt ``upto`` of ``step`` failing (see
    :func:`~job_chain.rules.state.causes_counted`), from the attempts as status sees them."""
    return causes_counted(step, [_facts(a) for a in attempts], upto)


def _facts(item: Attempt) -> AttemptFacts:
    return AttemptFacts(item.attempt, item.status, item.exit_code, cause=item.failure.cls if item.failure else None)


def _planner_state(step: Step, state: StepStatus) -> str:
    if not state.attempts:
        return plan_.NOT_SUBMITTED
    latest = state.attempts[-1]
    facts = AttemptFacts(latest.attempt, state.status, state.exit_code,
                         cause=latest.failure.cls if latest.failure else None)  # the step's, on its latest
    return planner_state(step, facts, lambda: causes(step, state.attempts, state.attempt))


def _with_facts(item: Attempt, step: Step, facts: RunFacts, now: float, job_gpus: float) -> Attempt:
    """The attempt with what the record adds: why it failed, its checkpoints, its GPU-hours
    (``job_gpus``: the step's, :func:`~job_chain.status.cost.gpus`)."""
    failure = fact(facts.failures, step, item.attempt) if item.status in FAILED else None
    if failure is not None and failure.line:  # kept before lines were redacted: hide its secrets all the same
        failure = failure.redacted(env_secrets(step.body))
    lost: Optional[float] = None
    if not job_gpus:  # 0 GPUs × its window (never negative): 0 once it started, no window to work out
        hours: Optional[float] = 0.0 if started_at(item) is not None else None
        lost = None if hours is None else 0.0
    else:
        window = running_window(item, fact(facts.submitted, step, item.attempt), fact(facts.ended, step, item.attempt),
                                now)
        hours = window_hours(job_gpus, window)
        if hours is not None:
            lost = lost_hours(hours, window, resumed_save(facts, step.name, item.attempt)) \
                if item.status in FAILED else 0.0
    return item.but(failure=failure, checkpoint_iteration=fact(facts.checkpoints, step, item.attempt),
                    resume_from=fact(facts.resumed, step, item.attempt), gpu_hours=hours, lost_gpu_hours=lost)


def _add_notes(chain: Chain, step: Step, state: StepStatus, run_id: str) -> None:
    """What followed each failed attempt, in the words the advancing job used (``--follow`` says it):
    a retry of a step with a checkpoint names the iteration and directory it was told, or none."""
    failed = [position for position, item in enumerate(state.attempts)
              if item.status in FAILED and item.failure is not None]
    if not failed:
        return  # nothing failed: nothing followed
    from job_chain.rules.checkpoint import iteration_dir
    from job_chain.rules.retry import retry_sentence
    from job_chain.spec.params import checkpoint_of

    spec = checkpoint_of(chain, step, run_id)
    for position in failed:
        item = state.attempts[position]
        code = item.exit_code if item.exit_code is not None else 1
        decision = decide(step, item.attempt, code, causes(step, state.attempts[:position + 1], item.attempt))
        after = state.attempts[position + 1] if position + 1 < len(state.attempts) else None
        resume = after.resume_from if after is not None and after.resume_from else None
        if resume is None and decision.retry and spec is not None and item.checkpoint_iteration is not None \
                and after is None:  # the retry is not submitted yet: it will be told the last complete one
            resume = (item.checkpoint_iteration, iteration_dir(spec, item.checkpoint_iteration))
        state.notes[item.attempt] = retry_sentence(step, item.attempt, decision, item.failure, resume,
                                                   spec.dir if spec else None)


def _add_hours(state: StepStatus) -> StepStatus:
    """The step's GPU-hours over all its attempts, and the part spent in failed ones (None when no
    attempt has a known running time)."""
    hours: List[float] = []
    lost: List[float] = []
    for item in state.history + state.attempts:
        if item.gpu_hours is not None:
            hours.append(item.gpu_hours)
            lost.append(item.lost_gpu_hours or 0.0)
    state.gpu_hours = sum(hours) if hours else None
    state.lost_gpu_hours = sum(lost) if hours else None
    return state


def _with_script_exit(item: Attempt, step: Step, facts: RunFacts) -> Attempt:
    if item.status in SUCCEEDED or not item.terminal:
        return item
    code = fact(facts.script_exit, step, item.attempt)
    return item if code is None else item.but(exit_code=code)


def _outcome(chain: Chain, steps: List[StepStatus], plan: Any, facts: RunFacts, now: float) -> Tuple[Outcome, str]:
    """The run's outcome and why; exit handlers keep a run running but never change its outcome."""
    by_index = {s.index: s for s in steps}
    if facts.start_failed and not any(s.submitted for s in steps):
        return Outcome.FAILED, f"the run never started: {facts.start_failed}"
    if any(s.active for s in steps):
        return Outcome.RUNNING, ""

    def ended_ago(indexes: Iterable[int]) -> Optional[float]:
        ends = [by_index[i].finished for i in indexes if i in by_index]
        times = [end.timestamp() for end in ends if end is not None]
        return now - max(times) if times else None

    def overdue(indexes: Iterable[int]) -> bool:
        ago = ended_ago(indexes)
        return ago is not None and ago > STALL_AFTER

    def name(index: int) -> str:
        return by_index[index].name

    for index in plan.ready:  # a step that should have been started by the steps it needs
        step = chain.step(index)
        waiting = _waiting(chain, step, by_index, facts, overdue) if step is not None else None
        if waiting is not None:
            return waiting
        deps = [d for d in (step.depends_on if step else ()) if by_index[d].submitted]
        gave_up = [(d, fact(facts.advance_failed, chain.step(d), by_index[d].attempt)) for d in deps]  # type: ignore
        gave_up = [(d, why) for d, why in gave_up if why]
        if gave_up:
            d, why = gave_up[0]
            return Outcome.FAILED, f"step {name(d)} succeeded, but step {name(index)} could not be submitted: {why}"
        if not deps:
            if facts.start_failed:
                return Outcome.FAILED, f"step {name(index)} was never submitted: {facts.start_failed}"
            if facts.started is not None and now - facts.started > STALL_AFTER:
                return Outcome.FAILED, f"step {name(index)} was never submitted"
            return Outcome.RUNNING, ""
        if overdue(deps):
            last = max(deps, key=lambda d: ended_ago([d]) or 0.0)
            return Outcome.FAILED, f"step {name(last)} succeeded, but step {name(index)} was never submitted"
        return Outcome.RUNNING, ""
    for state in steps:  # a failed step whose retry its job should have submitted
        if state.status not in FAILED or not state.submitted:
            continue
        step = chain.step(state.index)
        if step is None or step.is_handler:
            continue
        code = state.exit_code if state.exit_code is not None else 1
        failure = state.attempts[-1].failure if state.attempts else None
        if failure is not None and failure.signature == UNRECORDED:  # its advance decided nothing
            return (Outcome.FAILED, f"step {state.name} could not write the run record, so nothing after it was "
                                    f"started or retried: free space there, then resume the run ({failure.line})")
        if decide(step, state.attempt, code, causes(step, state.attempts, state.attempt)).retry:
            why = fact(facts.advance_failed, step, state.attempt)
            with_code = f" with exit code {state.exit_code}" if state.exit_code is not None else ""
            if why:
                return (Outcome.FAILED,
                        f"step {state.name} failed{with_code} and its retry could not be submitted: {why}")
            if overdue([state.index]):
                return Outcome.FAILED, f"step {state.name} failed{with_code} and its retry was never submitted"
            return Outcome.RUNNING, ""
    for index in plan.handlers:  # the run ended: its exit handlers run (once per round)
        handler = by_index[index]
        if not handler.submitted or handler.attempt <= facts.round:
            graph_steps = [s.index for s in steps if not s.is_handler]
            if not overdue(graph_steps):
                return Outcome.RUNNING, ""
    return _final(chain, steps, facts)


def _waiting(chain: Chain, step: Step, by_index: Dict[int, StepStatus], facts: RunFacts,
             overdue: Any) -> Optional[Tuple[Outcome, str]]:
    """A step waiting for a slot while nothing runs: the last step of its pool to end should have
    started it (None: it is not such a step)."""
    from job_chain.record import slots

    members = [i for i in slots.members(chain, step) if by_index[i].submitted]
    if not members:
        return None  # the pool never started: the steps it needs should have started it
    for index in members:
        why = fact(facts.advance_failed, chain.step(index), by_index[index].attempt)  # type: ignore[arg-type]
        if why:
            return Outcome.FAILED, f"step {by_index[index].label} ended, but what it was to start was not: {why}"
    if not overdue(members):
        return Outcome.RUNNING, ""
    return Outcome.FAILED, (f"step {step.display} waits for a slot that no ending step handed on: 'resume' "
                            "starts it")


def _final(chain: Chain, steps: List[StepStatus], facts: RunFacts) -> Tuple[Outcome, str]:
    excluded = {s.index for s in chain.steps if s.excluded}
    wanted = [s for s in steps if not s.is_handler and s.index not in excluded]
    if wanted and all(s.succeeded for s in wanted):
        return Outcome.SUCCEEDED, ""  # a stop that came after the last step succeeded changes nothing
    if facts.stopped:
        return Outcome.STOPPED, "stopped by the user"
    failed = [s for s in wanted if s.status in FAILED]
    if failed:
        return Outcome.FAILED, failure_reason(chain, failed)
    stopped = [s for s in wanted if s.submitted and not s.succeeded]
    if stopped:
        return Outcome.STOPPED, f"step {stopped[-1].name} was stopped"
    return Outcome.FAILED, "some steps never ran"


def failure_reason(chain: Chain, failed: List[StepStatus]) -> str:
    """``step train failed with exit code 1 (attempt 2 of 3)``, or every failed step when several did."""
    def one(state: StepStatus) -> str:
        step = chain.step(state.index)
        retries = step.retries if step else 0
        code = f" with exit code {state.exit_code}" if state.exit_code is not None else ""
        tries = ""
        if step is not None and step.retry_budgets is not None:
            tries = f" (attempt {state.attempt - step.first_attempt + 1})" if state.attempt > step.first_attempt else ""
        elif retries:
            tries = f" (attempt {state.attempt - step.first_attempt + 1} of {retries + 1})"  # type: ignore[union-attr]
        known = state.failure is not None and state.failure.cls != "unknown"
        why = f": {state.failure.summary()}" if known else ""  # type: ignore[union-attr]
        return f"step {state.name} failed{code}{tries}{why}"

    if len(failed) == 1:
        return one(failed[0])
    return f"{len(failed)} steps failed: " + "; ".join(one(s) for s in failed)


def resume_targets(status: RunStatus, chain: Chain) -> List[Tuple[str, int]]:
    """(step name, attempt) for each step resume submits: every step that did not succeed and whose
    dependencies all did (the first such step, in a line).

    A step never submitted starts at its first attempt; one that failed or was stopped gets its
    next attempt. Either way the client token is the one an interrupted submission or a failed
    advance used, so a create that was in fact stored is not made twice.
    """
    def done(state: StepStatus) -> bool:
        step = chain.step(state.index)
        return state.succeeded or bool(step and (step.removed_in or (step.excluded and not state.submitted)))

    finished = {s.index for s in status.steps if done(s)}
    targets = []
    for state in status.steps:
        step = chain.step(state.index)
        if step is None or step.is_handler or state.index in finished:
            continue
        if all(d in finished for d in step.depends_on):
            targets.append((step.name, state.next_attempt if state.submitted or state.history
                            else step.first_attempt))
    return targets
