"""What a finished step does from inside its job: submit what its success starts, retry it, or stop.

Runs in training images (Python >= 3.8, maybe no internet) through ``python3 -m job_chain.hop``:
the standard library, and the BCE SDK once a request is made. Messages go to stderr, the job's log.

There is one path (``docs/architecture.md``, "The path of a hop"): record the script's exit →
stop if the run was stopped → on failure, find why and retry or stop (:mod:`job_chain.hop.failure`)
→ wait for the other replicas → keep the outputs → record the success → decide what is ready →
create each once (:func:`job_chain.submit.create.create_once`) → on the run's end, exit handlers
and notifications. The plan written when this step was submitted (:mod:`job_chain.submit.plans`)
is a cache of that decision for a plain line or join: while it holds, the run's chain is never
thawed (a tenth of a hop's time); when it does not cover what happened, the chain is thawed and
the same path decides the full way. Every step of it is idempotent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, Union

from job_chain.errors import JobChainError, RecordUnwritable
from job_chain.submit.plans import Finishing
from job_chain.util.log import log

if TYPE_CHECKING:
    from job_chain.aihc.api import JobsAPI
    from job_chain.engine.jobs import Job
    from job_chain.record.records import RunRecords
    from job_chain.spec.model import Chain, Step

    ChainSource = Union[Chain, Callable[[], Chain]]  # the run's chain, or how to thaw it when needed (types only)

__all__ = ["advance"]

DEFAULT_DEADLINE = 600.0  # seconds an advance keeps retrying the engine before giving up
EXIT_ADVANCE_FAILED = 75  # EX_TEMPFAIL: the step succeeded, the next one could not be submitted
SUBMIT_WIDTH = 16  # creates in flight at once when a split starts its branches


def submit_with_deadline(call: Callable[[], Any], deadline: float, **options: Any) -> Any:
    """:func:`job_chain.engine.deadline.submit_with_deadline`, imported when a hop first calls the
    engine: a branch whose join is not ready (decided from the record) never does."""
    from job_chain.engine.deadline import submit_with_deadline as within

    return within(call, deadline, **options)


def advance(
    chain: ChainSource,
    client: JobsAPI,
    *,
    run_id: str,
    step: str,
    attempt: int,
    exit_code: int,
    records: Optional[RunRecords],
    resume_hint: Union[str, Callable[[], str]],
    deadline: float = DEFAULT_DEADLINE,
    mode: Optional[str] = None,
    reconnect: Optional[Callable[[], Any]] = None,
    outputs: Tuple[Dict[str, str], Optional[str]] = ({}, None),
    cached: bool = False,
    own_plan: Optional[Callable[[], Optional[Dict[str, Any]]]] = None,
    in_job: bool = True,
) -> int:
    """Act on step ``step`` (its name) having exited with ``exit_code``; return the job's exit code.

    Success: record it, then submit every step whose dependencies have now all succeeded.
    Failure: retry it if allowed, else record it. Either way, if that ended the run, start its
    exit handlers and send its notifications. ``chain`` is the run's frozen chain (or a function
    that thaws it: a planned hop never calls it). ``reconnect`` returns a fresh client after a
    connection failure (or None to keep the old one). ``outputs``: what the step wrote to
    ``$JOB_CHAIN_OUTPUTS``, or why it cannot be used (then the step fails). ``cached``: the step
    reused an earlier success (:func:`job_chain.submit.create.reuse`) and no job of it runs: this
    process, which reached it, advances from it as its tail would. So does every step it submits
    that reuses one too, one after another (never deeper than this call). ``own_plan``: how this
    step's plan file is read, when the caller reads it too (once for both: ``hop/entry.py``).
    ``in_job``: False when another process advances for the job (a Slurm watcher), which then does
    not record the job's end. ``resume_hint``: the command that continues the run, or how to make it
    when a message first needs it.
    """
    mode = mode or ("inline" if records is None else "job")
    hop = _Hop(chain, client, run_id, records, mode, deadline, reconnect, resume_hint)
    hop.own_plan = own_plan
    reused: List[Tuple[str, int, Dict[str, str]]] = []
    hop.in_job = in_job
    code = _advance_one(hop, step, attempt, exit_code, outputs, cached, reused)
    while reused:  # steps it submitted that reused a cached success: advance from each, as their tails would
        name, number, kept = reused.pop(0)
        again = _Hop(hop.chain, client, run_id, records, mode, deadline, reconnect, resume_hint)
        _advance_one(again, name, number, 0, (kept, None), True, reused)
    return code


def _advance_one(hop: _Hop, step: str, attempt: int, exit_code: int, outputs: Tuple[Dict[str, str], Optional[str]],
                 cached: bool, reused: List[Tuple[str, int, Dict[str, str]]]) -> int:
    records, run_id, mode = hop.records, hop.run_id, hop.mode
    hop.reused, hop.cached = reused, cached
    planned = not cached and outputs == ({}, None) and hop.read_plan(step, attempt, exit_code)
    if planned:
        me = Finishing.planned(step)
    else:
        current = hop.chain.resolve(step)
        if current is None:
            log(f"step {step} is not in run {run_id}'s chain; nothing to do")
            return exit_code or EXIT_ADVANCE_FAILED
        from job_chain.submit.plans import finishing

        me = finishing(hop.chain, current)
    code = hop.run(me, attempt, exit_code, outputs)
    if records is not None and mode == "job" and not cached and hop.in_job:  # this job ends now: its end (GPU-hours)
        records.record_advance_end(run_id, me.name, attempt, planned=hop.followed_plan)
        if planned:  # it has served (a second tail of this attempt finds every step of it done)
            from job_chain.record.plans import remove_plan

            remove_plan(records, run_id, me.name, attempt)
    return code


class _Hop:
    """One advancing job's view of the run: what it knows, and how it submits."""

    def __init__(self, chain: ChainSource, client: JobsAPI, run_id: str, records: Optional[RunRecords], mode: str,
                 deadline: float, reconnect: Optional[Callable[[], Any]],
                 resume_hint: Union[str, Callable[[], str]]) -> None:
        self._chain: Optional[Chain] = None if callable(chain) else chain
        self._thaw: Optional[Callable[[], Chain]] = chain if callable(chain) else None
        self._given: Any = client
        self._engine: Any = None  # the engine is made when a call needs it
        self.run_id, self.records, self.mode = run_id, records, mode
        self.deadline, self.reconnect, self._hint = deadline, reconnect, resume_hint
        self.plan: Optional[Dict[str, Any]] = None  # what the submitter planned this step's success to do
        self.own_plan: Optional[Callable[[], Optional[Dict[str, Any]]]] = None  # how the plan file is read
        self.followed_plan = False
        self.latest: Dict[str, Any] = {}  # step name -> its latest attempt, as the last look saw it
        self.attempts: List[Any] = []  # every attempt of the run, as states() last saw them
        self.me_code: Dict[str, int] = {}  # the finishing step's own exit code (the record may be elsewhere)
        self.me_failure: Dict[str, Any] = {}  # and why it failed
        self.error: Optional[BaseException] = None  # why the last submission gave up
        self.recorded = False  # this step's exit (and success) are in the shared run record
        self.cached = False  # the finishing step reused a cached success: no job of it runs
        self.reused: List[Tuple[str, int, Dict[str, str]]] = []  # steps submitted that reused one: advance next
        self._started: Optional[float] = None
        self.own: Optional[Tuple[str, int]] = None  # the finishing (step, attempt): this job
        self.in_job = True  # this process is the finishing job's own tail

    @property
    def resume_hint(self) -> str:
        """The command that continues the run, made the first time a message names it."""
        if callable(self._hint):
            self._hint = self._hint()
        return self._hint

    @property
    def chain(self) -> Chain:
        """The run's chain, thawed on first use."""
        if self._chain is None:
            assert self._thaw is not None
            self._chain = self._thaw()
        return self._chain

    @property
    def client(self) -> Any:
        """The engine this hop calls (made on first use: a join that is not ready calls none)."""
        if self._engine is None and getattr(type(self._given), "is_engine", False):
            self._engine = self._given  # an engine already (Slurm's): AIHC's module is not imported on its hops
        if self._engine is None:
            from job_chain.aihc.engine import as_engine

            self._engine = as_engine(self._given)
        return self._engine

    @property
    def started(self) -> Optional[float]:
        """When the run started (bounds every walk of the pool): :func:`~job_chain.record.records.run_start`."""
        if self._started is None:
            from job_chain.record.records import run_start

            self._started = run_start(self.records.get_run(self.run_id) if self.records else None, self.run_id)
        return self._started

    # -- the plan: a cache of this path's decision ----------------------------------------------
    def read_plan(self, step: str, attempt: int, exit_code: int) -> bool:
        """Whether the plan made when (``step``, ``attempt``) was submitted holds: job mode, the
        script succeeded, the run is at the plan's revision and the plan starts at this step."""
        if self.records is None or self.mode != "job" or exit_code != 0:
            return False
        from job_chain.record.plans import read_plan

        own = self.own_plan() if self.own_plan is not None else read_plan(self.records, self.run_id, step, attempt)
        if own is None or own["steps"][0].get("step") != step:
            return False
        if (self.records.get_run(self.run_id) or {}).get("revision") != own.get("revision"):
            return False  # the run changed since (resume with changes, a rerun)
        self.plan = own
        return True

    def _follow_plan(self, me: Finishing, attempt: int) -> Optional[int]:
        """Do what the plan says this success starts; None when the plan cannot decide it (a step the
        join needs failed, or only the API can tell): then the chain decides."""
        assert self.plan is not None and self.records is not None
        first = self.plan["steps"][0]
        name, number = str(first["next"]), int(first["attempt"])
        if first.get("needs"):
            ready = _partners_ready(self.records, self.run_id, first["needs"])
            if ready is None:
                return None
            if not ready:
                log(f"step {me.name} succeeded; its dependents also wait for {', '.join(first['needs'])}")
                self.followed_plan = True
                return 0
        from job_chain.record.plans import write_plan

        rest = self.plan["steps"][1:]
        pool, revision, version = str(self.plan["pool"]), int(self.plan["revision"]), self.plan.get("version")

        def create() -> Dict[str, str]:
            from job_chain.submit.create import create_once

            return create_once(self.client, pool, first["body"], first["token"], records=self.records,
                               run_id=self.run_id, step=name, attempt=number, revision=revision, mode="job")

        def passed_on(result: Dict[str, str]) -> None:
            if result["created"] == "yes":  # the rest of the line, for the next tail
                write_plan(self.records, self.run_id, name, number, revision, version, pool, rest)  # type: ignore

        self.followed_plan = True
        code = self._create(name, number, (me.name, attempt), 0, create, passed_on)
        return 0 if code is None else code

    # -- the one sequence ----------------------------------------------------------------------------
    def run(self, me: Finishing, attempt: int, exit_code: int, outputs: Tuple[Dict[str, str], Optional[str]]) -> int:
        records, run_id, name = self.records, self.run_id, me.name
        self.own = (name, attempt)
        known = None  # a cause job-chain itself knows, so no log needs reading
        if exit_code == 0 and outputs[1]:
            from job_chain.failures.classify import Failure
            from job_chain.record import outputs as outputs_

            log(f"step {name}: {outputs[1]}; the step fails (exit code {outputs_.EXIT_BAD_OUTPUTS})")
            exit_code = outputs_.EXIT_BAD_OUTPUTS
            known = Failure("user", "unusable-outputs", outputs[1], explanation="write KEY=VALUE lines to "
                            "$JOB_CHAIN_OUTPUTS (docs/graphs.md, Outputs), then resume the run")
        checkpoint = None  # read once: the exit record, the failure's record and a retry's resume all name it
        saved = None  # when that checkpoint became complete: a retry from it loses only the time after
        step = self.chain.named(name) if me.checkpoint is not None else None
        if step is not None:
            from job_chain.rules.checkpoint import last_complete, saved_at
            from job_chain.spec.params import checkpoint_of

            spec = checkpoint_of(self.chain, step, run_id)
            checkpoint = last_complete(spec)
            saved = saved_at(spec) if checkpoint and spec else None
        if exit_code != 0 and not self.cached:  # AIHC restarts it: not ours to decide yet
            from job_chain.hop.failure import left_to_engine

            left = left_to_engine(self, self.chain.named(name), attempt)  # type: ignore[arg-type]
            if left is not None:
                log(f"step {name}: attempt {attempt} failed (exit code {exit_code}); {left}")
                return exit_code
        if records is not None:  # before anything can fail: status shows it
            try:
                self.recorded = records.record_exit(run_id, name, attempt, exit_code,
                                                    checkpoint[0] if checkpoint else None, saved)
            except RecordUnwritable as exc:
                return self._unrecorded(name, attempt, exit_code, exc)
        if records is not None and records.is_stopped(run_id):
            log(f"run {run_id} was stopped by the user; not submitting anything")
            return exit_code
        if exit_code != 0:
            return self._failed(self.chain.named(name), attempt, exit_code, known, checkpoint)  # type: ignore

        if me.replicas > 1 and not self.cached:  # the other replicas must have succeeded too
            from job_chain.hop.peers import own_rank, peers_problem

            problem = peers_problem(self.client, self.chain, run_id, name, attempt, records, self.started,
                                    own_rank(), self.deadline)
            if problem:
                log(f"step {name}: {problem}; not advancing (the job fails)")
                return EXIT_ADVANCE_FAILED
        if outputs[0]:  # before the success is seen
            from job_chain.record import outputs as outputs_

            outputs_.keep(self.chain, records, run_id, name, attempt, outputs[0], log)
        if records is not None:  # durably, before looking at the others
            try:
                self.recorded = records.record_succeeded(run_id, name, attempt) and self.recorded
            except RecordUnwritable as exc:  # never "the others will see it": they cannot
                return self._unrecorded(name, attempt, exit_code, exc)
        if me.cached and not self.cached and records is not None:  # a later run may reuse this success
            from job_chain.submit.cache import remember

            why_not = remember(self.chain, records, run_id, self.chain.named(name), attempt,  # type: ignore[arg-type]
                               outputs[0], records.submission(run_id, name, attempt))
            log(f"step {name}'s success is cached for later runs" if why_not is None
                else f"step {name}'s success is not cached: {why_not}")
        if me.handler:
            log(f"exit handler {name} succeeded")
            return 0
        return self.finish(me, attempt, succeeded=True)

    def _unrecorded(self, name: str, attempt: int, exit_code: int, exc: RecordUnwritable) -> int:
        """The run record cannot be written: decide nothing (a join's other steps would wait for a
        marker that is not there), fail the job loudly, say it in the log and to the webhook."""
        what = "succeeded" if exit_code == 0 else f"failed (exit code {exit_code})"
        line = (f"step {name} {what}, but the run record could not be written ({exc}); nothing is "
                f"submitted or retried. Free space there, then run '{self.resume_hint}'")
        log(line)
        try:
            from job_chain.failures.classify import Failure
            from job_chain.failures.signatures import UNRECORDED
            from job_chain.hop.notify import notify

            failure = Failure("infra", UNRECORDED, f"job-chain: {line}",
                              explanation="The run record could not be written (a full disk, a read-only mount): "
                                          "free space where the run record is (beside the chain file), then resume.")
            code = exit_code or EXIT_ADVANCE_FAILED
            notify(self.chain, self.records, self.run_id, "stepFailed", step=name, status="failed",
                   exit_code=code, failure=failure, log=log)
            # the run cannot go on until it is resumed: say so to whoever listens for its failure
            notify(self.chain, self.records, self.run_id, "failed", status="failed", failure=failure, log=log,
                   failed=[{"name": name, "exitCode": code, "cause": failure.summary(), "reason": line}])
        except Exception as problem:  # noqa: BLE001 - the exit code and the log line above say it already
            log(f"cannot send the stepFailed notification: {problem}")
        return EXIT_ADVANCE_FAILED if exit_code == 0 else exit_code

    def _failed(self, step: Step, attempt: int, exit_code: int, known: Any, checkpoint: Any) -> int:
        """The script failed: retry it if its budget allows, else say so and end what it ends."""
        from job_chain.hop.failure import decide_after
        from job_chain.rules.state import next_attempt

        after = decide_after(self, step, attempt, exit_code, known, checkpoint)
        if after.decision.retry:
            return self.submit([(step.name, next_attempt(step, attempt))], (step.name, attempt), exit_code,
                               resume=after.resume)
        if not step.is_handler:
            self.me_code[step.name] = exit_code
            self.me_failure[step.name] = after.failure
            from job_chain.submit.plans import finishing

            self.finish(finishing(self.chain, step), attempt, succeeded=False)
        return exit_code

    # -- what the API knows ------------------------------------------------------------------------
    def refresh(self) -> None:
        from job_chain.aihc.engine import as_engine

        fresh = as_engine(self.reconnect()) if self.reconnect is not None else None
        if fresh is not None and fresh.endpoint != self.client.endpoint:
            log(f"the API moved to {fresh.endpoint}; using it")
            self._engine = fresh

    def job_id(self, name: str, attempt: int) -> Optional[str]:
        """The job of (step, attempt): from the record, else by its labels."""
        from job_chain.submit.create import find_submitted

        entry = self.records.submission(self.run_id, name, attempt) if self.records else None
        if entry:
            return str(entry["jobId"])
        found = submit_with_deadline(lambda: find_submitted(self.client, self.chain.pool, self.run_id, name, attempt,
                                                            self.started), self.deadline, on_unreachable=self.refresh)
        return found.id if found is not None else None

    def from_record(self) -> bool:
        """Whether what starts next can be decided from the run record (job mode, facts written)."""
        return self.records is not None and self.mode == "job" and self.recorded and self.chain.revision >= 1

    def began(self) -> Optional[float]:
        """Inline runs: the API's createdAt of the run's first job, which bounds every walk of the pool
        (never this machine's or the submitter's clock). The first job's snapshot cannot carry it:
        that job finds itself by its labels (AIHC gives a pod no job id) and passes it on."""
        if self.records is not None:
            return None
        if self.chain.began is None and self.chain.first_job and self.own is not None:
            from job_chain.submit.create import find_submitted

            name, attempt = self.own
            try:
                found = submit_with_deadline(lambda: find_submitted(self.client, self.chain.pool, self.run_id, name,
                                                                    attempt, self.started),
                                             self.deadline, on_unreachable=self.refresh)
                created = found.created if found is not None else None
            except JobChainError as exc:  # walks fall back to the run id's time, an hour of skew allowed
                log(f"cannot read this job's own createdAt: {exc}")
                created = None
            self.chain.began, self.chain.first_job = created, False
        return self.chain.began

    def job(self, job_id: str) -> Job:
        """One of the run's own jobs, by id (a deleted job reads as Deleted)."""
        from job_chain.engine.errors import EngineError
        from job_chain.engine.jobs import Job

        try:
            return submit_with_deadline(lambda: self.client.job(self.chain.pool, job_id), self.deadline,
                                        on_unreachable=self.refresh)
        except EngineError as exc:
            if exc.status == 404:
                return Job(job_id, status="Deleted")
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

    def finish(self, me: Finishing, attempt: int, *, succeeded: bool) -> int:
        """Start what ``me`` ending made ready; if the run ended, its handlers and notifications.

        What the plan covers is done from the plan. Otherwise a step whose dependents wait for it
        alone (every step of a plain line) submits them without looking at the rest of the run;
        only joins, exit handlers and notifications need the run's state.
        """
        if self.records is not None:
            self._current_revision()
        if self.plan is not None and succeeded:
            try:
                code = self._follow_plan(me, attempt)
            except Exception as exc:  # noqa: BLE001 - a cache that fails is a miss: decide the full way, idempotently
                log(f"the planned advance stopped ({exc}); advancing the full way")
                code = None
            if code is not None:
                return code
            self.followed_plan = False
        return self._finish(me, attempt, succeeded)

    def _current_revision(self) -> None:
        """After this step's marker is written, decide from the revision the run is at now: a resume
        of a going run writes its revision, then reads the markers (``session/resume.revise_going``),
        so what it reports as applied is what every later decision reads."""
        assert self.records is not None
        now = (self.records.get_run(self.run_id) or {}).get("revision")
        if self.plan is not None and now != self.plan.get("revision"):
            self.plan = None  # the plan was made at the previous revision: the full way decides
        if self._chain is not None and now is not None and now != self._chain.revision:
            given = self._chain  # thawed again, at the revision written meanwhile
            self._chain = self.records.run_chain(self.run_id, lambda: given)

    def _finish(self, me_facts: Finishing, attempt: int, succeeded: bool) -> int:
        from job_chain.record import slots
        from job_chain.rules import plan as plan_
        from job_chain.rules.state import next_attempt

        me = self.chain.named(me_facts.name)
        assert me is not None
        dependents = self.chain.dependents(me.index)
        joins = any(set(d.depends_on) - {me.index} for d in dependents)
        watchers = bool(self.chain.handlers or self.chain.notify)
        records = self.records if me_facts.capped else None  # slots are kept in the run record
        capped = records is not None
        if records is not None:
            slots.release(self.chain, records, self.run_id, me)  # before looking at the run
            quick = slots.hand_on(self.chain, records, self.run_id, me, origin=f"{me.name}/{attempt}",
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
        # a capped step this hop finds ready starts only through a slot, whatever step this is (one outside
        # the matrix that decides the whole run too: else it runs above the cap, and a hand-on starts it again)
        pooled = self.records if self.mode == "job" and any(slots.pools(self.chain, s) for s in self.chain.steps) \
            else None
        again = slots.requeued(self.chain, *slots.claims(pooled, self.run_id), states) if pooled else []
        for step in again:  # resumed steps that wait for a slot again
            del states[step.index]
        plan = plan_.plan(self.chain, states, stopped=stopped)
        code = 0
        if plan.ready:
            ready = [s for s in (self.chain.step(i) for i in plan.ready) if s is not None]
            direct = [s for s in ready if not (pooled is not None and slots.pools(self.chain, s))]
            if direct:
                code = self.submit([(s.name, s.first_attempt) for s in direct], (me.name, attempt),
                                   0 if succeeded else 1)
            if pooled is not None and len(direct) < len(ready):  # the capped ones: as many as slots are free
                nexts = {s.name: next_attempt(s, self.latest[s.name].attempt) for s in again}
                _, lost = slots.fill(self.chain, pooled, self.run_id, ready, nexts, origin=f"{me.name}/{attempt}",
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
        import time

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
        hours = run_hours(self.chain, mine, failing=me.name, facts=self._run_facts()) if mine else None
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
            from job_chain.submit.request import handler_context

            context = handler_context(self.chain, self.run_id, outcome, failed)
            self.submit([(self.chain.step(i).name, round_ + 1) for i in plan.handlers],  # type: ignore[union-attr]
                        None, 0, context)
        else:
            log(f"the run ended: {outcome}")
        gpu = run_hours(self.chain, self._every_attempt(), failing=failing,
                        facts=self._run_facts()) if self.chain.notify else None
        notify(self.chain, self.records, self.run_id, outcome, status=outcome, failed=details, gpu=gpu, log=log)

    def _run_facts(self) -> Any:
        """The record's facts (what each retry resumed from, for the GPU-hours lost), when it has them."""
        return self.records.facts(self.run_id) if self.records is not None and self.chain.notify else None

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

    # -- submitting ------------------------------------------------------------------------------
    def slot_submit(self, step: Step, attempt: int, origin: Tuple[str, int]) -> str:
        """Submit a step that took a slot; say whether it was, or how it failed (:func:`slots.fill`)."""
        from job_chain.record import slots

        self.error = None
        if self.submit([(step.name, attempt)], origin, 0) == 0:
            return slots.SUBMITTED
        return slots.NOT_CREATED if slots.not_created(self.error) else slots.UNKNOWN

    def submit(self, targets: List[Tuple[str, int]], origin: Optional[Tuple[str, int]], exit_code: int,
               context: Optional[Dict[str, str]] = None, resume: Optional[Tuple[int, str]] = None) -> int:
        """Submit each (step, attempt) — a split's branches at once, :data:`SUBMIT_WIDTH` at a time, each
        with its own client token and record entry; on giving up, record it and say how to resume.
        ``resume``: the checkpoint a retry resumes from (in its environment and its record)."""
        from job_chain.submit.create import submit_step

        split = len(targets) > 1
        self.began()  # an inline snapshot tells the steps it starts where the run began

        def one(target: Tuple[str, int]) -> Optional[int]:
            name, attempt = target

            def create() -> Dict[str, str]:
                result = submit_step(self.client, self.chain, name, self.run_id, attempt, records=self.records,
                                     mode=self.mode, since=self.started, context=context, resume=resume,
                                     plan=not split)
                if result["created"] == "cached":  # no job runs it: this process advances from it next
                    self.reused.append((name, attempt, dict(result.get("outputs") or {})))  # type: ignore[arg-type]
                return result

            return self._create(name, attempt, origin, exit_code, create)

        if split:
            from concurrent.futures import ThreadPoolExecutor

            self._plan_branches(targets)  # before the first branch can end: each one's tail finds its plan
            getattr(self.client, "endpoint", None)  # a lazy client is built once, before threads share it
            with ThreadPoolExecutor(max_workers=min(SUBMIT_WIDTH, len(targets))) as pool:
                codes = list(pool.map(one, targets))
        else:
            codes = [one(target) for target in targets]
        return next((code for code in codes if code is not None), exit_code)

    def _plan_branches(self, targets: List[Tuple[str, int]]) -> None:
        """A split's branches, before any is created: what each one's success starts (their join's
        request is made once for all of them). Planned in the creating threads, the plans slowed
        the creates; planned after them, the first branches often ended before their plans were
        written and took the full advance, each thawing the chain while the others were created.
        A plan of a branch whose create then fails is never followed (its job never runs)."""
        if self.records is None or self.mode != "job":
            return
        from job_chain.submit.plans import plan_submitted

        made: Dict[Tuple[str, int], Any] = {}
        for name, attempt in targets:
            step = self.chain.named(name)
            if step is not None:
                plan_submitted(self.chain, self.records, self.run_id, step, attempt, made)

    def _create(self, target: str, attempt: int, origin: Optional[Tuple[str, int]], exit_code: int,
                create: Callable[[], Dict[str, str]],
                created: Optional[Callable[[Dict[str, str]], None]] = None) -> Optional[int]:
        """Create one step through transient API errors; None when it was, else the exit code the job
        ends with (the give-up is recorded, and the job's log says how to resume)."""
        try:
            result = submit_with_deadline(create, self.deadline, on_unreachable=self.refresh)
        except JobChainError as exc:  # the API gave up, no credentials, an output missing (MissingOutput)
            self.error = exc
            message = f"step {target} could not be submitted: {exc}"
            if self.records is not None and origin is not None:
                self.records.record_advance_failure(self.run_id, origin[0], origin[1], message)
            what = "succeeded" if exit_code == 0 else f"failed (exit code {exit_code})"
            log(f"step {origin[0] if origin else '-'} {what}, but {message}. It may have been created all the "
                f"same; continue with '{self.resume_hint}', which submits it with the same client token and "
                "so never creates it twice")
            return exit_code or EXIT_ADVANCE_FAILED
        if created is not None:
            created(result)
        if result["created"] != "cached":  # (a reuse said what it reused)
            verb = "submitted" if result["created"] == "yes" else "was already submitted as"
            log(f"step {target} {verb} job {result['jobId'] or '(it reused a cached success)'}")
        return None


def _partners_ready(records: RunRecords, run_id: str, needs: Dict[str, int]) -> Optional[bool]:
    """Whether the other steps a planned join needs let it start (:func:`job_chain.rules.joins.join_ready`),
    each one's state from the record alone (:func:`job_chain.rules.state.planner_state` for those it
    knows, :func:`job_chain.rules.joins.unseen_state` for those not submitted yet)."""
    from job_chain.record.records import latest_listed
    from job_chain.rules import joins
    from job_chain.rules import plan as plan_
    from job_chain.rules.state import AttemptFacts, failed

    listing = records.listed(run_id)
    troubled = joins.troubled(listing)
    latest = latest_listed(listing, needs)
    states = []
    for name in needs:
        if name not in latest:  # not submitted yet: never this job's to create (a plan's step has one dependent)
            states.append(joins.unseen_state(troubled=troubled, capped=False, mine=False, deps_succeeded=False))
            continue
        number = latest[name]
        if (name, number) in listing["succeeded"]:
            states.append(plan_.SUCCEEDED)
        elif (name, number) in listing["exit"]:  # its tail is reporting: between its exit and its marker
            facts = AttemptFacts(number, exit_code=records.script_exit(run_id, name, number))
            states.append(joins.ASK if failed(facts) else plan_.ACTIVE)  # a failure is the full planner's
        else:
            entry = records.submission(run_id, name, number) or {}
            states.append(plan_.ACTIVE if entry.get("mode") == "job" else joins.ASK)
    return joins.join_ready(states, troubled)
