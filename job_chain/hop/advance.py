"""What a finished step does from inside its job: submit the next step, retry, or stop.

Runs in training images (Python >= 3.8, maybe no internet) through ``python3 -m job_chain.hop``:
the standard library, and the BCE SDK once a request is made. Messages go to stderr, the job's log.
"""

from __future__ import annotations

import os
import shlex
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from job_chain.aihc.api import JobsAPI
from job_chain.aihc.errors import AIHCError
from job_chain.errors import JobChainError
from job_chain.hop.peers import peers_problem
from job_chain.hop.submitting import (
    DEFAULT_DEADLINE,
    EXIT_ADVANCE_FAILED,
    Submitting,
    log,
    submit_with_deadline,
)
from job_chain.record.records import RunRecords, run_started
from job_chain.rules.state import next_attempt
from job_chain.spec.model import Chain, Step

__all__ = ["advance", "handler_context"]

def advance(
    chain: Chain,
    client: JobsAPI,
    *,
    run_id: str,
    step: str,
    attempt: int,
    exit_code: int,
    records: Optional[RunRecords],
    resume_hint: str,
    deadline: float = DEFAULT_DEADLINE,
    mode: Optional[str] = None,
    reconnect: Optional[Callable[[], Any]] = None,
    outputs: Tuple[Dict[str, str], Optional[str]] = ({}, None),
) -> int:
    """Act on step ``step`` (its name) having exited with ``exit_code``; return the job's exit code.

    Success: record it, then submit every step whose dependencies have now all succeeded.
    Failure: retry it if allowed, else record it. Either way, if that ended the run, start its
    exit handlers and send its notifications. ``chain`` is the run's frozen chain. ``reconnect``
    returns a fresh client after a connection failure (or None to keep the old one). ``outputs``:
    what the step wrote to ``$JOB_CHAIN_OUTPUTS``, or why it cannot be used (then the step fails).
    """

    current = chain.resolve(step)
    if current is None:
        log(f"step {step} is not in run {run_id}'s chain; nothing to do")
        return exit_code or EXIT_ADVANCE_FAILED
    mode = mode or ("inline" if records is None else "job")
    code = _advance(chain, current, client, run_id, attempt, exit_code, records, resume_hint, deadline, mode,
                    reconnect, outputs)
    if records is not None and mode == "job":  # this job ends now: its end, to the millisecond (GPU-hours)
        records.record_advance_end(run_id, current.name, attempt)
    return code


def _advance(chain: Chain, current: Step, client: JobsAPI, run_id: str, attempt: int, exit_code: int,
             records: Optional[RunRecords], resume_hint: str, deadline: float, mode: str,
             reconnect: Optional[Callable[[], Any]], outputs: Tuple[Dict[str, str], Optional[str]]) -> int:
    from job_chain.record import outputs as outputs_

    name = current.name
    known = None  # a cause job-chain itself knows, so no log needs reading
    if exit_code == 0 and outputs[1]:
        from job_chain.failures.classify import Failure

        log(f"step {name}: {outputs[1]}; the step fails (exit code {outputs_.EXIT_BAD_OUTPUTS})")
        exit_code = outputs_.EXIT_BAD_OUTPUTS
        known = Failure("user", "unusable-outputs", outputs[1], explanation="write KEY=VALUE lines to "
                        "$JOB_CHAIN_OUTPUTS (docs/graphs.md, Outputs), then resume the run")
    recorded = False
    checkpoint = None  # read once: the exit record, the failure's record and a retry's resume all name it
    if current.checkpoint is not None:
        from job_chain.rules.checkpoint import last_complete

        checkpoint = last_complete(current.checkpoint)
    if records is not None:
        # before anything can fail: status shows it
        recorded = records.record_exit(run_id, name, attempt, exit_code, checkpoint[0] if checkpoint else None)
    if records is not None and records.is_stopped(run_id):
        log(f"run {run_id} was stopped by the user; not submitting anything")
        return exit_code
    started = ((records.get_run(run_id) or {}).get("started") if records else None) or run_started(run_id)
    hop = _Hop(chain, client, run_id, records, mode, started, deadline, reconnect, resume_hint)
    hop.recorded = recorded
    if recorded and hop.mode == "job":
        records.note_own_job(run_id, name, attempt)  # type: ignore[union-attr]

    if exit_code != 0:
        from job_chain.hop import failure as on_failure

        return on_failure.handle(hop, current, attempt, exit_code, log, known, checkpoint)

    replicas = int(current.body.get("jobSpec", {}).get("replicas", 1))
    self_pod = os.environ.get("POD_NAME") or os.environ.get("HOSTNAME") or ""
    if replicas > 1 and self_pod:
        problem = peers_problem(client, chain, run_id, name, attempt, records, started, self_pod, deadline)
        if problem:
            log(f"step {name}: {problem}; not advancing (the job fails)")
            return EXIT_ADVANCE_FAILED
    outputs_.keep(chain, records, run_id, name, attempt, outputs[0], log)  # before the success is seen
    if records is not None:  # durably, before looking at the others
        hop.recorded = records.record_succeeded(run_id, name, attempt) and hop.recorded
    if current.is_handler:
        log(f"exit handler {name} succeeded")
        return 0
    return hop.finish(current, attempt, succeeded=True)


class _Hop(Submitting):
    """One advancing job's view of the run: what it knows, and how it submits."""

    def __init__(self, chain: Chain, client: JobsAPI, run_id: str, records: Optional[RunRecords], mode: str,
                 started: Optional[float], deadline: float, reconnect: Optional[Callable[[], Any]],
                 resume_hint: str) -> None:
        self.chain, self.client, self.run_id, self.records, self.mode = chain, client, run_id, records, mode
        self.started, self.deadline, self.reconnect, self.resume_hint = started, deadline, reconnect, resume_hint
        self.latest: Dict[str, Any] = {}  # step name -> its latest attempt, as states() last saw it
        self.attempts: List[Any] = []  # every attempt of the run, as states() last saw them
        self.me_code: Dict[str, int] = {}  # the finishing step's own exit code (the record may be elsewhere)
        self.me_failure: Dict[str, Any] = {}  # and why it failed
        self.error: Optional[BaseException] = None  # why the last submission gave up
        self.recorded = False  # this step's exit (and success) are in the shared run record

    def job_id(self, name: str, attempt: int) -> Optional[str]:
        """The job of (step, attempt): from the record, else by its labels."""
        from job_chain.submit.create import find_submitted

        entry = self.records.submission(self.run_id, name, attempt) if self.records else None
        if entry:
            return str(entry["jobId"])
        found = submit_with_deadline(lambda: find_submitted(self.client, self.chain.pool, self.run_id, name, attempt,
                                                            self.started), self.deadline, on_unreachable=self.refresh)
        return str(found["jobId"]) if found else None

    def from_record(self) -> bool:
        """Whether what starts next can be decided from the run record (job mode, facts written)."""
        return self.records is not None and self.mode == "job" and self.recorded and self.chain.revision >= 1

    def began(self) -> Optional[float]:
        """Inline runs: the API's createdAt of the run's first job, which bounds every walk of the pool
        (never this machine's or the submitter's clock). The first job's snapshot cannot carry it:
        that job asks the API for its own createdAt (``AIHC_JOB_ID``) and passes it on."""
        own = os.environ.get("AIHC_JOB_ID")
        if self.records is None and self.chain.began is None and self.chain.first_job and own:
            from job_chain.aihc.timefmt import parse_time

            try:
                created = parse_time(self.job(own).get("createdAt"))
            except JobChainError as exc:  # walks fall back to the run id's time, an hour of skew allowed
                log(f"cannot read this job's own createdAt: {exc}")
                created = None
            self.chain.began, self.chain.first_job = (created.timestamp() if created else None), False
        return self.chain.began

    def job(self, job_id: str) -> Dict[str, Any]:
        """One of the run's own jobs, by id (a deleted job reads as Deleted)."""
        try:
            return submit_with_deadline(lambda: self.client.get_job(self.chain.pool, job_id), self.deadline,
                                        on_unreachable=self.refresh)
        except AIHCError as exc:
            if exc.status == 404:
                return {"jobId": job_id, "status": "Deleted"}
            raise

    # -- the run as a graph ------------------------------------------------------------------
    def states(self, me: Step, me_succeeded: bool) -> Dict[int, str]:
        """step index -> planner state, from the API and the run record."""
        from job_chain.rules import plan as plan_
        from job_chain.rules.state import causes_counted, planner_state
        from job_chain.status.observe import observe
        from job_chain.status.summarize import by_step

        first_job = self.records.first_job_id(self.run_id) if self.records else None
        attempts, _, _ = submit_with_deadline(
            lambda: observe(self.client, self.chain.pool, self.run_id, cache={}, first_job_id=first_job,
                            since=self.started, began=self.began(), explain_failures=False),
            self.deadline, on_unreachable=self.refresh)
        states: Dict[int, str] = {}
        self.latest, self.attempts = {}, list(attempts)
        for name, items in by_step(self.chain, attempts).items():
            step = self.chain.named(name)
            counted = [a for a in items if step is not None and a.attempt >= step.first_attempt]
            if step is None or not counted:
                continue
            item = counted[-1]
            self.latest[name] = item
            facts = [self._facts(name, a, step.retry_budgets is not None) for a in counted]
            causes = causes_counted(step, facts, item.attempt) if step.retry_budgets is not None else []
            states[step.index] = planner_state(step, facts[-1], causes)
        states[me.index] = plan_.SUCCEEDED if me_succeeded else plan_.FAILED
        return states

    def _facts(self, name: str, item: Any, causes: bool) -> Any:
        """An attempt as the API shows it, with what the record adds: the script's exit code, the
        succeeded marker and (for budgets per cause) the kept class — a hop never reads another
        step's logs."""
        from job_chain.failures.classify import Failure
        from job_chain.rules.state import AttemptFacts

        records, run_id = self.records, self.run_id
        kept = Failure.from_record(records.failure(run_id, name, item.attempt)) if records and causes else None
        return AttemptFacts(item.attempt, item.status,
                            records.script_exit(run_id, name, item.attempt) if records else None,
                            bool(records and records.succeeded(run_id, name, item.attempt)),
                            kept.cls if kept is not None else None)

    def finish(self, me: Step, attempt: int, *, succeeded: bool) -> int:
        """Start what ``me`` ending made ready; if the run ended, its handlers and notifications.

        A step whose dependents wait for it alone (every step of a plain line) submits them
        without looking at the rest of the run; only joins, exit handlers and notifications
        need the run's state.
        """
        from job_chain.record import slots
        from job_chain.rules import plan as plan_

        dependents = self.chain.dependents(me.index)
        joins = any(set(d.depends_on) - {me.index} for d in dependents)
        watchers = bool(self.chain.handlers or self.chain.notify)
        capped = self.records is not None and slots.involved(self.chain, me)
        if capped:
            slots.release(self.chain, self.records, self.run_id, me)  # before looking at the run
            quick = slots.hand_on(self.chain, self.records, self.run_id, me, origin=f"{me.name}/{attempt}",
                                  submit=lambda s, a: self.slot_submit(s, a, (me.name, attempt)))
            if quick is not None:  # points of its matrix still to start: nothing else can be ready
                log(f"step {me.name} ended; points of {me.group} still wait: started {len(quick[0])} of them")
                return EXIT_ADVANCE_FAILED if quick[1] and succeeded else (0 if succeeded else 1)
        if not joins and not capped and not (watchers and (not succeeded or not dependents)):
            if succeeded and dependents:
                return self.submit([(d.name, d.first_attempt) for d in dependents], (me.name, attempt), 0)
            if succeeded:
                log(f"step {me.name} succeeded; it was the last step: the chain is complete")
            return 0 if succeeded else 1
        stopped = bool(self.records and self.records.is_stopped(self.run_id))
        try:
            if self.from_record():  # the record decides; the API only where it cannot (readiness.py)
                from job_chain.hop.readiness import look

                states, self.latest = look(self.chain, self.records, self.run_id, me, succeeded,  # type: ignore
                                           job=self.job, watchers=watchers, stopped=stopped)
            else:
                states = self.states(me, succeeded)
            if self.records is None:  # no shared record: wait for lower-index steps finishing too
                states = self._wait_for_lower(me, states, succeeded)
        except JobChainError as exc:  # the API gave up, or no credentials reach this job
            message = f"cannot see the rest of the run to decide what starts next: {exc}"
            if self.records is not None:
                self.records.record_advance_failure(self.run_id, me.name, attempt, message)
            log(f"step {me.name} {'succeeded' if succeeded else 'failed'}, but {message}. Continue with "
                f"'{self.resume_hint}'")
            if not succeeded:
                self._step_failed(me)
            return EXIT_ADVANCE_FAILED if succeeded else 1
        if not succeeded:
            self._step_failed(me)
        again = slots.requeued(self.chain, *slots.claims(self.records, self.run_id), states) if capped else []
        for step in again:  # resumed steps that wait for a slot again
            del states[step.index]
        plan = plan_.plan(self.chain, states, stopped=stopped)
        code = 0
        if plan.ready:
            ready = [s for s in (self.chain.step(i) for i in plan.ready) if s is not None]
            direct = [s for s in ready if not (capped and slots.pools(self.chain, s))]
            if direct:
                code = self.submit([(s.name, s.first_attempt) for s in direct], (me.name, attempt),
                                   0 if succeeded else 1)
            if capped and len(direct) < len(ready):  # the capped ones: as many as there are free slots
                nexts = {s.name: next_attempt(s, self.latest[s.name].attempt) for s in again}
                _, lost = slots.fill(self.chain, self.records, self.run_id, ready, nexts, origin=f"{me.name}/{attempt}",
                                     submit=lambda s, a: self.slot_submit(s, a, (me.name, attempt)))
                code = EXIT_ADVANCE_FAILED if lost and succeeded else code
        elif succeeded and not dependents and not plan.ended:
            log(f"step {me.name} succeeded; other branches are still going")
        elif succeeded and dependents and not plan.ended:
            waiting = sorted({d for s in dependents for d in s.depends_on} - {me.index})
            log(f"step {me.name} succeeded; its dependents also wait for "
                f"{', '.join(self.chain.step(i).name for i in waiting)}")  # type: ignore[union-attr]
        if plan.ended:
            self._ended(plan, states, stopped)
        return code if succeeded else 1

    def _wait_for_lower(self, me: Step, states: Dict[int, str], succeeded: bool) -> Dict[int, str]:
        """Inline runs have no record to meet in: wait (bounded) for active steps with a lower index.

        Only a higher index waits for a lower one, so two finishing steps never wait for each
        other, and the later of two simultaneous finishers sees the earlier one's final state.
        """
        from job_chain.rules import plan as plan_

        if not (self.chain.graph or self.chain.handlers or self.chain.notify):
            return states  # a line: nothing else can be going
        end = time.monotonic() + self.deadline
        while any(state == plan_.ACTIVE and index < me.index for index, state in states.items()):
            if time.monotonic() > end:
                break
            time.sleep(1.0)
            states = self.states(me, succeeded)
        return states

    def _step_failed(self, me: Step) -> None:
        """``stepFailed``: this step failed with no retry left (with why, and its GPU-hours so far)."""
        from job_chain.hop.notify import notify
        from job_chain.status.cost import run_hours

        mine = [a for a in self.attempts if self.chain.resolve(a.step) is me]
        hours = run_hours(self.chain, mine, failing=me.name) if mine else None
        notify(self.chain, self.records, self.run_id, "stepFailed", step=me.name, status="failed",
               exit_code=self.me_code.get(me.name), failure=self.me_failure.get(me.name), gpu=hours, log=log)

    def _ended(self, plan: Any, states: Dict[int, str], stopped: bool) -> None:
        from job_chain.hop.failure import failed_details
        from job_chain.hop.notify import notify
        from job_chain.rules import plan as plan_
        from job_chain.status.cost import run_hours

        outcome = "stopped" if stopped else ("failed" if plan.failed else "succeeded")
        failed = [s.name for s in self.chain.steps if not s.is_handler and states.get(s.index) == plan_.FAILED]
        details = failed_details(self, failed)
        failing = next(iter(self.me_code), None)
        if plan.handlers:
            round_ = self.records.round(self.run_id) if self.records else 0
            names = ", ".join(self.chain.step(i).name for i in plan.handlers)  # type: ignore[union-attr]
            log(f"the run ended ({outcome}); starting its exit handlers: {names}")
            context = handler_context(self.chain, self.run_id, outcome, failed)
            self.submit([(self.chain.step(i).name, round_ + 1) for i in plan.handlers],  # type: ignore[union-attr]
                        None, 0, context)
        else:
            log(f"the run ended: {outcome}")
        gpu = run_hours(self.chain, self._every_attempt(), failing=failing) if self.chain.notify else None
        notify(self.chain, self.records, self.run_id, outcome, status=outcome, failed=details, gpu=gpu, log=log)

    def _every_attempt(self) -> List[Any]:
        """Every attempt of the run (for the GPU-hours a run's end notification gives): as the last
        look saw them, or — when the record decided and nothing was asked — the run's own jobs by id."""
        if self.attempts or self.records is None:
            return self.attempts
        from job_chain.status.observe import by_id

        ids = {str(e["jobId"]) for e in self.records.submissions(self.run_id)}
        try:
            self.attempts, _, _ = submit_with_deadline(
                lambda: by_id(self.client, self.chain.pool, self.run_id, ids, cache={}, explain_failures=False),
                self.deadline, on_unreachable=self.refresh)
        except JobChainError as exc:
            log(f"cannot read the run's jobs for its GPU-hours: {exc}")
        return self.attempts

def handler_context(chain: Chain, run_id: str, outcome: str, failed: List[str]) -> Dict[str, str]:
    """What an exit handler is told about the run it follows (documented in docs/graphs.md)."""
    return {"JOB_CHAIN_OUTCOME": outcome, "JOB_CHAIN_FAILED_STEPS": ",".join(failed),
            "JOB_CHAIN_STATUS_COMMAND": f"job-chain status {shlex.quote(chain.path)} --run {run_id}"}
