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

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from job_chain.aihc.status import FAILED, STOPPED, SUCCEEDED, TERMINAL
from job_chain.record.records import RunRecords
from job_chain.rules import plan as plan_
from job_chain.rules.retry import decide
from job_chain.spec.model import Chain, Step
from job_chain.util.files import read_json_dict


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


def state_of(step: Step, attempt: int, status: Optional[str], exit_code: Optional[int], succeeded: bool,
             causes: Sequence[str] = ()) -> str:
    """The planner's state of one attempt from its job's status (None: not asked) and the record;
    ``causes``: the classes of the step's failed attempts so far (for budgets per cause)."""
    if succeeded or status in SUCCEEDED:
        return plan_.SUCCEEDED
    if status in FAILED or exit_code not in (None, 0):
        code = exit_code if exit_code is not None else 1
        return plan_.RETRY_DUE if decide(step, attempt, code, causes).retry else plan_.FAILED
    if status in STOPPED and status in TERMINAL:
        return plan_.STOPPED
    return plan_.ACTIVE


def latest_attempts(records: RunRecords, run_id: str, chain: Chain) -> Dict[str, Latest]:
    """Step name -> its latest attempt of this revision that the record knows (steps of the graph only)."""
    facts = records.listed(run_id)
    latest: Dict[str, int] = {}
    for kind in ("step", "exit", "succeeded"):
        for name, attempt in facts[kind]:
            step = chain.named(name)
            if step is not None and not step.is_handler and not step.excluded and attempt >= step.first_attempt:
                latest[name] = max(attempt, latest.get(name, 0))
    out: Dict[str, Latest] = {}
    directory = records.directory(run_id)
    for name, attempt in latest.items():
        item = Latest(chain.named(name), attempt)  # type: ignore[arg-type]
        key = (name, attempt)
        item.succeeded = key in facts["succeeded"]
        if key in facts["exit"]:
            item.reports = True
            if not item.succeeded:
                code = (read_json_dict(os.path.join(directory, facts["exit"][key])) or {}).get("exitCode")
                item.exit_code = code if isinstance(code, int) else None
        item.reports = item.reports or item.succeeded
        if key in facts["step"] and not item.settled:
            entry = read_json_dict(os.path.join(directory, facts["step"][key])) or {}
            item.job_id = str(entry.get("jobId") or "")
            item.reports = item.reports or entry.get("mode") == "job"
        out[name] = item
    return out


def look(chain: Chain, records: RunRecords, run_id: str, me: Step, me_succeeded: bool, *,
         job: Callable[[str], Dict[str, Any]], watchers: bool,
         stopped: bool) -> Tuple[Dict[int, str], Dict[str, Latest]]:
    """(step index -> planner state, step name -> latest attempt) for the finishing step ``me``.

    ``job(job_id)`` asks the API for one of the run's own jobs; it is called only where the record
    cannot answer (see the module's docstring), so a plain join that is not ready costs no request.
    """
    seen = latest_attempts(records, run_id, chain)
    states: Dict[int, str] = {}
    silent: List[Latest] = []  # submitted where the tail reports here, and it has not (yet)
    for item in seen.values():
        if item.step.index == me.index:
            continue
        if not item.settled and not item.reports and item.job_id:
            _ask(item, job)  # the record cannot know: another mode submitted it
        elif not item.settled:
            silent.append(item)
        states[item.step.index] = state_of(item.step, item.attempt, item.status or None, item.exit_code,
                                           item.succeeded, kept_causes(records, run_id, item.step, item.attempt))
    states[me.index] = plan_.SUCCEEDED if me_succeeded else plan_.FAILED
    if watchers and silent:
        plan = plan_.plan(chain, states, stopped=stopped)
        waiting_on = {item.step.index for item in silent}
        others_going = any(state in (plan_.ACTIVE, plan_.RETRY_DUE) for index, state in states.items()
                           if index not in waiting_on)
        if not plan.ended and not plan.ready and not others_going:
            for item in silent:  # only these keep the run going: is any of them still going?
                _ask(item, job)
                causes = kept_causes(records, run_id, item.step, item.attempt)
                states[item.step.index] = state_of(item.step, item.attempt, item.status, item.exit_code,
                                                   item.succeeded, causes)
                if item.status not in TERMINAL:
                    break
    return states, seen


def kept_causes(records: RunRecords, run_id: str, step: Step, attempt: int) -> List[str]:
    """The classes of this revision's failed attempts of ``step`` up to ``attempt``, as the record
    keeps them (each kept by the job that failed): what budgets per cause count. Empty without
    budgets. A failure not classified (yet) counts as ``unknown``, as everywhere else: ``attempt``
    itself always (its cause is the one decided on), an earlier one when its exit record says it
    failed; an earlier attempt the record knows no failure of (stopped, then resumed) is not one."""
    if step.retry_budgets is None:
        return []
    from job_chain.failures.classify import Failure

    out = []
    for number in range(step.first_attempt, attempt + 1):
        kept = Failure.from_record(records.failure(run_id, step.name, number))
        if kept is not None:
            out.append(kept.cls)
        elif number == attempt or records.script_exit(run_id, step.name, number) not in (None, 0):
            out.append("unknown")
    return out


def _ask(item: Latest, job: Callable[[str], Dict[str, Any]]) -> None:
    found = job(item.job_id) if item.job_id else {}
    item.status = str(found.get("status") or "Unknown")
