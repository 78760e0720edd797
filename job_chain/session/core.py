"""Drive a chain from Python: start, watch, wait, stop and resume its runs.

:class:`ChainSession` is what the ``job-chain`` CLI calls (parse → session → render), so a
script can do everything the CLI does::

    from job_chain import ChainSession

    s = ChainSession.from_file("chain_info.json", local=True)
    run = s.start()
    print(s.wait(run.run_id, timeout=600).outcome)   # Outcome.SUCCEEDED

A run owns a frozen copy of its chain (taken at start): status, stop, logs and every hop work
from it, whatever happens to the file meanwhile; ``resume`` is where the file's changes go in.
Every run remembers where it runs (the local server, or an endpoint), so steering it later needs
no ``--local`` or ``--host``. Every failure is a :class:`~job_chain.errors.JobChainError`.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from job_chain.aihc.api import JobsAPI
from job_chain.aihc.status import SUCCEEDED
from job_chain.errors import ChainFileInvalid, JobChainError, RunStillActive, UsageError
from job_chain.record.records import RecordDamaged, RunRecords, new_run_id
from job_chain.session.logs import LogsMixin
from job_chain.session.places import PlacesMixin
from job_chain.session.resume import ResumeMixin
from job_chain.session.runs import ResumePlan, Run, SubmitInterrupted, Submitted
from job_chain.session.start import PlanMixin
from job_chain.session.stop import StopMixin
from job_chain.session.watch import WatchMixin
from job_chain.spec.model import Chain
from job_chain.status.summarize import summarize
from job_chain.status.types import Outcome, RunStatus

MODES = ("job", "watch", "inline")
SUBMIT_DEADLINE = 60.0  # seconds start and resume keep retrying a step's create through transient errors
__all__ = ["ChainSession", "Run", "Submitted", "SubmitInterrupted", "ResumePlan"]


def _ignore(message: str) -> None:
    pass


def _fact_keys(chain: Chain, attempts: List[Any]) -> List[Tuple[str, int]]:
    """The (step, attempt) pairs whose record facts a look needs: where a job did not succeed, the
    furthest step's (its advance), and every attempt of a step with GPUs or a checkpoint (their
    ends and checkpoints). A 500-step run of CPU steps reads a handful of files."""
    from job_chain.status.cost import gpus_per_replica

    keys: List[Tuple[str, int]] = []
    for a in attempts:
        step = chain.resolve(a.step)
        wanted = (a.terminal and a.status not in SUCCEEDED) or a is attempts[-1] or (
            step is not None and (step.checkpoint is not None or gpus_per_replica(step.body) > 0))
        if wanted:
            keys += [(a.step, a.attempt)] + ([(step.name, a.attempt)] if step is not None else [])
    return keys


class ChainSession(PlacesMixin, PlanMixin, ResumeMixin, StopMixin, WatchMixin, LogsMixin):
    """One chain file and the runs recorded beside it, and the AIHC API they run on.

    ``client`` (anything satisfying :class:`~job_chain.aihc.api.JobsAPI`) is used for every run
    when given; otherwise a client is built per run from the explicit ``local``/``host``/``ak``/
    ``sk``/``credentials``, else from where the run was recorded to run, else from the usual
    credential sources (env, ``JOB_CHAIN_CREDENTIALS``, the chain's ``api_config``).
    ``start_local=False`` (read-only callers) never starts the local server: a stopped one is a
    :class:`~job_chain.local.daemon.LocalServerStopped` error saying how to start it.
    """

    def __init__(self, chain: Optional[Chain], *, client: Optional[JobsAPI] = None, local: bool = False,
                 host: Optional[str] = None, ak: Optional[str] = None, sk: Optional[str] = None,
                 credentials: Optional[str] = None, warn: Callable[[str], None] = _ignore,
                 api_version: Optional[str] = None, path: Optional[str] = None,
                 chain_problem: Optional[JobChainError] = None, start_local: bool = True) -> None:
        if api_version is not None:
            from job_chain.aihc.v2 import version_problem

            problem = version_problem(api_version)
            if problem:  # refused here, not at the first API call with a message about a CLI option
                raise UsageError(f"ChainSession(api_version={api_version!r}): {problem} (or None: env "
                                 "AIHC_API_VERSION, then api_config.version, else v1)")
        if chain is None and path is None:
            raise UsageError("ChainSession needs a chain or the path of its file")
        self._chain = chain
        self._from_file = chain is None  # from_file sets it too: the file is read again when it matters
        self.path = chain.path if chain is not None else str(path)
        self.chain_problem = chain_problem  # why the file cannot be used now (runs are still steerable)
        self._start_local = start_local  # False: a stopped local server is reported, never started
        self._api_version = api_version
        self.records = RunRecords(self.path)
        self.warn = warn
        self._client = client
        self._explicit: Dict[str, Any] = {"host": host, "ak": ak, "sk": sk, "credentials_file": credentials}
        self._local = local
        self._clients: Dict[Tuple[Any, ...], JobsAPI] = {}

    @classmethod
    def from_file(cls, path: str, *, local: bool = False, host: Optional[str] = None, ak: Optional[str] = None,
                  sk: Optional[str] = None, credentials: Optional[str] = None, client: Optional[JobsAPI] = None,
                  warn: Callable[[str], None] = _ignore, api_version: Optional[str] = None,
                  strict: bool = True, start_local: bool = True) -> ChainSession:
        """Load and validate ``path`` (:class:`~job_chain.errors.ChainFileInvalid` lists every problem).

        With ``strict=False`` a file that is broken or gone is not an error: the session can still
        show, stop and read the logs of its recorded runs (from their frozen copies), and raises
        the file's problem only for what needs the file (``start``, ``plan``, ``resume`` with changes).
        """
        from job_chain.spec.loader import load_chain

        kwargs: Dict[str, Any] = dict(client=client, local=local, host=host, ak=ak, sk=sk, credentials=credentials,
                                      warn=warn, api_version=api_version, start_local=start_local)
        try:
            chain = load_chain(path, local=True)
        except ChainFileInvalid as exc:
            if strict:
                raise
            return cls(None, path=path, chain_problem=exc, **kwargs)
        session = cls(chain, **kwargs)
        session._from_file = True
        for warning in chain.warnings:
            warn(warning)
        return session

    def reload(self) -> Chain:
        """Read the chain file again (a session lives long: a run freezes, and a resume compares,
        the file as it is at that moment). Raises its problems; a session made from a Chain keeps it."""
        from job_chain.spec.loader import load_chain

        if not self._from_file:
            return self.chain
        try:
            self._chain, self.chain_problem = load_chain(self.path, local=True), None
        except ChainFileInvalid as exc:
            self._chain, self.chain_problem = None, exc
            raise
        return self._chain

    @property
    def chain(self) -> Chain:
        """The chain file as it is now (validated); raises its problem when it cannot be used."""
        if self._chain is None:
            raise self.chain_problem or ChainFileInvalid(f"{self.path}: cannot be read")
        return self._chain

    # -- runs ----------------------------------------------------------------------------------
    def runs(self) -> List[Run]:
        """Every recorded run of this chain, newest first."""
        return [Run.from_record(self.path, r) for r in self.records.runs()]

    def run(self, run_id: Optional[str] = None) -> Run:
        """One recorded run (default: the latest); :class:`RunNotFound` lists the known ones."""
        if run_id is None:
            latest = self.records.latest_run()
            if latest is None:
                raise UsageError(f"no run of {self.path} is recorded here: start one with "
                                 f"'job-chain run {shlex.quote(self.path)}'")
            return Run.from_record(self.path, latest)
        return Run.from_record(self.path, self.records.require_run(run_id))

    def frozen(self, run: Union[Run, str, None] = None) -> Chain:
        """The chain ``run`` runs: its frozen copy (the file as it is now, for a run recorded before
        runs were frozen): rule 7, decided as the run's jobs decide it."""
        found = run if isinstance(run, Run) else self.run(run)
        return self.records.run_chain(found.run_id, lambda: self.chain)

    def status(self, run_id: Optional[str] = None, *, now: Optional[float] = None, outputs: bool = False) -> RunStatus:
        """Every step of the run (default: the latest) and its outcome, as the API tells it now.

        The API is asked for the run's own jobs (named by the record), not the pool's; see
        :mod:`job_chain.status.look` for where a walk of the pool is still needed. Each step's outputs
        come from the run record; an inline run keeps them in its jobs' logs, which ``outputs=True``
        reads (once per step: what was read is kept in the record)."""
        from job_chain.status.look import may_hide_a_job, run_attempts

        run = self.run(run_id)
        chain = self.frozen(run)
        walked = False
        while True:
            client: Optional[JobsAPI] = None
            submissions = self.records.submissions(run.run_id)
            if self.records.start_refused(run.run_id):
                attempts: List[Any] = []  # it never started: nothing to ask the API (which may be why)
                endpoint = run.endpoint
            else:
                client = self._client_to_look(run)
                attempts, endpoint = run_attempts(self.records, lambda made=client: made, chain, run, submissions,
                                                  walk=walked)
            facts = self.records.facts(run.run_id, keys=_fact_keys(chain, attempts), submissions=submissions)
            self._more_facts(run, chain, facts)
            if client is not None:  # why each failed attempt failed: from the record, else its logs (once)
                from job_chain.status.causes import explain_failures

                explain_failures(client, chain, self.records, run.run_id, attempts, facts)
            status = summarize(chain, attempts, facts, run_id=run.run_id, now=now, local=run.local,
                               endpoint=endpoint, first_step=run.first_step)
            if walked or not attempts or not may_hide_a_job(status):
                break
            walked = True  # a step that should have started is not seen: its job may be unrecorded
        if outputs and run.mode == "inline":
            self._read_logged_outputs(run, chain, status)
        status.revisions = self.records.revisions(run.run_id)
        return status

    def _client_to_look(self, run: Run) -> JobsAPI:
        """The client a look at ``run`` asks, made when first asked: a finished run whose jobs are
        cached needs no request (nor the SDK). A local run's is made at once, so a look says when
        its server is stopped rather than showing what was cached as if it were live."""
        if run.local:
            return self.client_for(run)
        from job_chain.aihc.api import LazyClient

        return LazyClient(lambda: self.client_for(run))  # type: ignore[return-value]

    def _more_facts(self, run: Run, chain: Chain, facts: Any) -> None:
        from job_chain.record import outputs, slots

        if slots.capped(chain):
            facts.epoch, facts.claimed = slots.claims(self.records, run.run_id)
        facts.outputs = outputs.recorded(self.records, run.run_id)

    def _read_logged_outputs(self, run: Run, chain: Chain, status: RunStatus) -> None:
        """Inline runs keep outputs in their jobs' logs: read those of succeeded steps not read before,
        and keep what each says (also "none") in the record, so every log is read once."""
        from job_chain.record import outputs

        known = outputs.recorded(self.records, run.run_id)
        todo = [(s.name, s.attempt, s.job_id) for s in status.steps if s.succeeded and s.job_id and s.name not in known]
        if not todo:
            return
        from job_chain.status.logged_outputs import read_logged

        found = read_logged(self.client_for(run), chain.pool, todo)
        for state in status.steps:
            if state.name in found:
                attempt, values = found[state.name]
                outputs.save(self.records, run.run_id, state.name, attempt, values)
                state.outputs = values

    def active_run(self) -> Optional[RunStatus]:
        """The newest run that is still going, if any (only the last few runs are asked)."""
        for run in self.runs()[:3]:
            try:
                status = self.status(run.run_id)
            except JobChainError:
                continue
            if status.outcome is Outcome.RUNNING:
                return status
        return None

    def delete_run(self, run_id: str) -> None:
        """Forget a run that is not going (its record; its jobs stay in AIHC). :class:`RunStillActive`
        for one that is."""
        from job_chain.record import index as run_index

        try:
            run: Optional[Run] = self.run(run_id)
        except RecordDamaged:
            run = None  # a damaged record can always be deleted: nothing can steer it
        if run is not None:
            status = self.status(run.run_id)
            if status.outcome is Outcome.RUNNING:
                raise RunStillActive(f"run {run_id} is still going: stop it first with "
                                     f"'job-chain stop {shlex.quote(self.path)} --run {run_id}'", run_id)
        self.records.delete_run(run_id)
        run_index.forget(run_id)

    # -- start / resume --------------------------------------------------------------------------
    def start(self, first: Union[int, str] = 0, *, mode: str = "job", force: bool = False,
              params: Optional[Dict[str, str]] = None) -> Run:
        """Freeze the chain into a new run record and submit its first steps; later steps start by
        themselves, from the frozen copy. ``params`` override the chain's parameter defaults (an
        unknown name is a :class:`UsageError`); the run keeps the values.

        Refuses (:class:`RunStillActive`) while another run of this chain is going, unless ``force``;
        the check and the new record are made under a lock, so simultaneous starts give one run.
        """
        from job_chain.record import index as run_index
        from job_chain.spec import graph
        from job_chain.spec.frozen import freeze

        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.reload()  # what is frozen is the file as it is now
        start = self._start_step(first)
        chain = self.run_chain(start.index, params=params)
        self.check_mode(chain, mode)
        client = self.client_for(None)
        with self.records.start_lock():
            if not force:
                self._refuse_beside_active()
            run_id = new_run_id()
            where: Dict[str, Any] = {"local": self._local}
            if self._local:  # the run lives on this local server: later commands find it there
                from job_chain.local.server import default_state_dir

                where["localStateDir"] = default_state_dir()
            # the frozen copy first: a run.json that names revision 1 always finds it
            value = self.records.freeze(run_id, freeze(chain), revision=1, reason="started")
            if not self._local and self.chain.api_config.get("ak"):
                self.records.save_credentials(run_id, self.chain.api_config)
            record = self.records.create_run(run_id, chain=self.path, startStep=start.index, mode=mode,
                                             endpoint=client.endpoint, pool=chain.pool, revision=1, digest=value,
                                             **where)
        run_index.remember(run_id, self.path)
        run = Run.from_record(self.path, record)
        try:
            frozen = self.frozen(run)
            ready = [frozen.step(i) for i in graph.plan(frozen, {}).ready]
            self._start_ready(run, frozen, ready, {}, mode, "run")  # type: ignore[arg-type]
        except SubmitInterrupted as exc:
            self.records.record_start_failure(run_id, "interrupted while submitting its first step", refused=False)
            raise exc
        except JobChainError as exc:
            self.records.record_start_failure(run_id, str(exc), refused=not getattr(exc, "retryable", True))
            raise
        return run

    def _refuse_beside_active(self) -> None:
        damaged = self.records.damaged()
        if damaged:
            raise RecordDamaged(self.records.damaged_message(damaged[0]) + "; or pass --force to start a run "
                                "beside it")
        active = self.active_run()
        if active is not None:
            steps = ", ".join(f"{s.name} is {s.status}" for s in active.current) or "it is starting"
            which = f"{shlex.quote(self.path)} --run {active.run_id}"
            if self.run(active.run_id).mode == "watch":  # its watcher may be gone (Ctrl-C): say what continues it
                how = (f"it advances only while a process watches it (--advance watch): continue it with "
                       f"'job-chain resume {which} --advance watch'")
            else:
                how = f"watch it with 'job-chain status {which} --watch'"
            raise RunStillActive(
                f"run {active.run_id} of {self.path} is still going ({steps}): {how}, stop it with "
                f"'job-chain stop {which}', or pass --force to start another run beside it", active.run_id)

    def _submit(self, run: Run, name: str, attempt: int, mode: str,
                context: Optional[Dict[str, str]] = None) -> Submitted:
        """Submit one step, retrying transient API errors for up to SUBMIT_DEADLINE seconds.

        The client token makes every retry safe, and giving up early is not: a create can fail after
        the job was committed, and that job would then advance a run the user believes failed.
        """
        from job_chain.aihc.errors import AIHCError
        from job_chain.hop.submitting import submit_with_deadline
        from job_chain.submit.create import submit_step

        chain = self.frozen(run)
        client = self.client_for(run)
        if mode == "inline":
            from job_chain.submit.snapshot import inline_origin

            inline_origin(chain, client, self.records.first_job_id(run.run_id))
        finish = f"'job-chain resume {shlex.quote(self.path)} --run {run.run_id}'"
        resume = None
        if attempt > 1 and chain.named(name) is not None:  # a resumed step continues from its last checkpoint
            from job_chain.rules.checkpoint import last_complete

            resume = last_complete(chain.named(name).checkpoint)  # type: ignore[union-attr]
        try:
            result = submit_with_deadline(
                lambda: submit_step(client, chain, name, run.run_id, attempt, records=self.records, mode=mode,
                                    context=context, resume=resume),
                SUBMIT_DEADLINE)
        except KeyboardInterrupt:
            raise SubmitInterrupted(
                f"interrupted while submitting step {name} of run {run.run_id}: the step may or may not have been "
                f"created. {finish} finishes it without ever creating it twice") from None
        except AIHCError as exc:
            if not exc.retryable:
                raise
            raise JobChainError(f"{exc}. Step {name} may have been created all the same: "
                                f"'job-chain status {shlex.quote(self.path)} --run {run.run_id}' shows it, and "
                                f"{finish} continues the run without ever creating it twice") from None
        step = chain.named(name)
        return Submitted(run.run_id, name, attempt, result["jobId"], result["jobName"], result["created"] == "yes",
                         step.index if step is not None else -1)

    def __repr__(self) -> str:
        return f"ChainSession({os.path.relpath(self.path)!r})"

