"""Joins decided from the run record: a finishing branch whose join is not ready asks the API nothing.

In job mode every job's tail writes to the run record before it looks at anything: the script's
exit code (``exit-S-attempt-K.json``), then, on success, ``succeeded-S-attempt-K.json``. So:

- A join is ready when every step it needs has a succeeded marker of this revision (attempt ≥
  ``Step.first_attempt``) or is excluded from the run. Of the steps a join needs that finish
  together, the one whose marker is written last reads all the others' markers, sees the join
  ready and submits it (with the deterministic client token: a second submit finds the first
  job). A branch that does not see the join ready may stop there: the step still missing will see
  this branch's marker when it finishes.
- What the record cannot know, the API is asked for, by job id (never by walking the pool): a
  step whose latest attempt was submitted where no tail reports to this record (``--advance
  watch``, inline rounds before a resume, submissions recorded before they carried their mode),
  and — only when exit handlers or notifications wait for the run's end and nothing else keeps
  the run going — the steps whose tail has not reported yet: a job lost without its tail running
  (evicted, killed) never writes a marker, and the run must still end once per round.

``docs/graphs.md`` ("How a graph advances without a controller") gives the same argument for users.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from job_chain.engine.states import TERMINAL
from job_chain.record.records import Listed, RunRecords, latest_listed
from job_chain.rules import joins
from job_chain.rules import plan as plan_
from job_chain.rules.state import AttemptFacts, causes_counted, planner_state
from job_chain.spec.model import Chain, Step


@dataclass
class Latest:
    """A step's latest attempt of this revision, as the run record tells it."""

    step: Step
    attempt: int
    job_id: str = ""
    exit_code: Optional[int] = None  # the script's, written by the job's own tail
    succeeded: bool = False  # every replica succeeded (the tail's marker)
    reports: bool = False  # its tail writes to this record: submitted in job mode, or it already wrote here
    status: str = ""  # the API's status, when it was asked
    reason: str = ""

    @property
    def settled(self) -> bool:
        """The record alone says how it ended: succeeded, or failed with the script's exit code."""
        return self.succeeded or self.exit_code not in (None, 0)


def latest_attempts(records: RunRecords, run_id: str, chain: Chain,
                    listing: Optional[Listed] = None) -> Dict[str, Latest]:
    """Step name -> its latest attempt of this revision that the record knows (steps of the graph only,
    :func:`~job_chain.record.records.latest_listed`); ``listing``: the record's, when the caller has it."""
    listing = records.listed(run_id) if listing is None else listing
    firsts = {s.name: s.first_attempt for s in chain.steps if not s.is_handler and not s.excluded}
    out: Dict[str, Latest] = {}
    for name, attempt in latest_listed(listing, firsts).items():
        item = Latest(chain.named(name), attempt)  # type: ignore[arg-type]
        key = (name, attempt)
        item.succeeded = key in listing["succeeded"]
        if key in listing["exit"]:
            item.reports = True
            if not item.succeeded:
                item.exit_code = records.script_exit(run_id, name, attempt)
        item.reports = item.reports or item.succeeded
        if key in listing["step"] and not item.settled:
            entry = records.submission(run_id, name, attempt) or {}
            item.job_id = str(entry.get("jobId") or "")
            item.reports = item.reports or entry.get("mode") == "job"
        out[name] = item
    return out


def look(chain: Chain, records: RunRecords, run_id: str, me: Step, me_succeeded: bool, *,
         job: Callable[[str], Any], watchers: bool,
         stopped: bool) -> Tuple[Dict[int, str], Dict[str, Latest]]:
    """(step index -> planner state, step name -> latest attempt) for the finishing step ``me``.

    ``job(job_id)`` asks the API for one of the run's own jobs; it is called only where the record
    cannot answer (see the module's docstring), so a plain join that is not ready costs no request.
    """
    listing = records.listed(run_id)
    seen = latest_attempts(records, run_id, chain, listing)
    states: Dict[int, str] = {}
    silent: List[Latest] = []  # submitted where the tail reports here, and it has not (yet)
    for item in seen.values():
        if item.step.index == me.index:
            continue
        if not item.settled and not item.reports and item.job_id:
            _ask(item, job)  # the record cannot know: another mode submitted it
        elif not item.settled:
            silent.append(item)
        states[item.step.index] = _state(records, run_id, item)
    states[me.index] = plan_.SUCCEEDED if me_succeeded else plan_.FAILED
    _unseen(chain, me, states, joins.troubled(listing))
    if watchers and silent:
        plan = plan_.plan(chain, states, stopped=stopped)
        waiting_on = {item.step.index for item in silent}
        others_going = any(state in (plan_.ACTIVE, plan_.RETRY_DUE) for index, state in states.items()
                           if index not in waiting_on)
        if not plan.ended and not plan.ready and not others_going:
            for item in silent:  # only these keep the run going: is any of them still going?
                _ask(item, job)
                states[item.step.index] = _state(records, run_id, item)
                if item.status not in TERMINAL:
                    break
    return states, seen


def _unseen(chain: Chain, me: Step, states: Dict[int, str], troubled: bool) -> None:
    """The steps of this revision with no attempt in the record (:func:`~job_chain.rules.joins.unseen_state`)."""
    from job_chain.record import slots

    def done(index: int) -> bool:
        step = chain.step(index)
        return states.get(index) == plan_.SUCCEEDED or (step is not None and bool(step.excluded))

    for step in chain.steps:
        if step.is_handler or step.excluded or step.index in states:
            continue
        state = joins.unseen_state(troubled=troubled, capped=bool(slots.pools(chain, step)),
                                   mine=me.index in step.depends_on,
                                   deps_succeeded=all(done(d) for d in step.depends_on))
        if state != plan_.NOT_SUBMITTED:
            states[step.index] = state


def _state(records: RunRecords, run_id: str, item: Latest) -> str:
    latest = AttemptFacts(item.attempt, item.status or None, item.exit_code, item.succeeded)
    return planner_state(item.step, latest, kept_causes(records, run_id, item.step, item.attempt))


def kept_causes(records: RunRecords, run_id: str, step: Step, attempt: int) -> List[str]:
    """What budgets per cause count for ``attempt`` of ``step`` failing, as the record keeps each
    failure (each kept by the job that failed; see :func:`~job_chain.rules.state.causes_counted`).
    Empty without budgets."""
    if step.retry_budgets is None:
        return []
    from job_chain.failures.classify import Failure

    facts = []
    for number in range(step.first_attempt, attempt + 1):
        kept = Failure.from_record(records.failure(run_id, step.name, number))
        facts.append(AttemptFacts(number, exit_code=records.script_exit(run_id, step.name, number),
                                  cause=kept.cls if kept is not None else None))
    return causes_counted(step, facts, attempt)


def _ask(item: Latest, job: Callable[[str], Any]) -> None:
    item.status = job(item.job_id).status if item.job_id else "Unknown"
