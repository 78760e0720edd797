"""Drive a chain from Python: start, watch, wait, stop and resume its runs.

:class:`ChainSession` is what the ``job-chain`` CLI calls (parse → session → render), so a
script can do everything the CLI does::

    from job_chain import ChainSession

    s = ChainSession.from_file("chain_info.json", local=True)
    run = s.start()
    print(s.wait(run.run_id, timeout=600).outcome)   # Outcome.SUCCEEDED

Every run remembers where it runs (the local server, or an endpoint), so steering it later needs
no ``--local`` or ``--host``. Every failure is a :class:`~job_chain.errors.JobChainError`.
"""

from __future__ import annotations

import datetime as _dt
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Tuple

from job_chain.aihc.api import JobsAPI
from job_chain.aihc.status import FAILED, SUCCEEDED
from job_chain.chain.model import Chain
from job_chain.chain.progress import Outcome, RunStatus, StepStatus, resume_targets, summarize, utc
from job_chain.chain.record import RunRecords, new_run_id
from job_chain.errors import JobChainError, RunStillActive, RunTimeout, UsageError

MODES = ("job", "watch", "inline")
SUBMIT_DEADLINE = 60.0  # seconds start and resume keep retrying a step's create through transient errors


@dataclass(frozen=True)
class Run:
    """A recorded run: where and how it started."""

    run_id: str
    chain_path: str
    first_step: int
    started: _dt.datetime
    local: bool = False
    endpoint: str = ""
    mode: str = "job"
    local_state_dir: Optional[str] = None  # which local server (its state dir) a local run runs on

    @classmethod
    def from_record(cls, chain_path: str, data: Dict[str, Any]) -> Run:
        started = data.get("started")
        return cls(str(data["id"]), chain_path, int(data.get("startStep") or 0),
                   utc(float(started) if isinstance(started, (int, float)) else 0.0) or utc(0.0),  # type: ignore[arg-type]
                   bool(data.get("local")), str(data.get("endpoint") or ""), str(data.get("mode") or "job"),
                   data.get("localStateDir") if isinstance(data.get("localStateDir"), str) else None)


@dataclass(frozen=True)
class Submitted:
    """One step a call submitted (or found already submitted, ``created`` False)."""

    run_id: str
    step: int
    attempt: int
    job_id: str
    job_name: str
    created: bool


class SubmitInterrupted(JobChainError):
    """Ctrl-C while a create was in flight: the job may exist; ``hint`` finishes it safely."""

    exit_code = 130


def _ignore(message: str) -> None:
    pass


class ChainSession:
    """One chain file and the runs recorded beside it, and the AIHC API they run on.

    ``client`` (anything satisfying :class:`~job_chain.aihc.api.JobsAPI`) is used for every run
    when given; otherwise a client is built per run from the explicit ``local``/``host``/``ak``/
    ``sk``/``credentials``, else from where the run was recorded to run, else from the usual
    credential sources (env, ``JOB_CHAIN_CREDENTIALS``, the chain's ``api_config``).
    """

    def __init__(self, chain: Chain, *, client: Optional[JobsAPI] = None, local: bool = False,
                 host: Optional[str] = None, ak: Optional[str] = None, sk: Optional[str] = None,
                 credentials: Optional[str] = None, warn: Callable[[str], None] = _ignore,
                 api_version: Optional[str] = None) -> None:
        self.chain = chain
        self._api_version = api_version
        self.records = RunRecords(chain.path)
        self.warn = warn
        self._client = client
        self._explicit: Dict[str, Any] = {"host": host, "ak": ak, "sk": sk, "credentials_file": credentials}
        self._local = local
        self._clients: Dict[Tuple[Any, ...], JobsAPI] = {}

    @classmethod
    def from_file(cls, path: str, *, local: bool = False, host: Optional[str] = None, ak: Optional[str] = None,
                  sk: Optional[str] = None, credentials: Optional[str] = None, client: Optional[JobsAPI] = None,
                  warn: Callable[[str], None] = _ignore, api_version: Optional[str] = None) -> ChainSession:
        """Load and validate ``path`` (:class:`~job_chain.errors.ChainFileInvalid` lists every problem)."""
        from job_chain.chain.loader import load_chain

        chain = load_chain(path, local=True)
        session = cls(chain, client=client, local=local, host=host, ak=ak, sk=sk, credentials=credentials, warn=warn,
                      api_version=api_version)
        for warning in chain.warnings:
            warn(warning)
        return session

    @property
    def api_version(self) -> str:
        """v1 or v2, as a new client would speak (see :func:`~job_chain.aihc.connect.resolve_api_version`)."""
        if self._client is not None:
            return str(getattr(self._client, "api_version", "v1"))
        from job_chain.aihc.connect import resolve_api_version

        return resolve_api_version(self._api_version, credentials_file=self._explicit.get("credentials_file"),
                                   api_config=self.chain.api_config,
                                   api_config_origin=f"{self.chain.path} api_config")

    # -- where a run runs ----------------------------------------------------------------------
    @property
    def _explicit_place(self) -> bool:
        return self._local or any(self._explicit.values())

    def chain_for(self, local: bool) -> Chain:
        """The chain as a run sees it: local pods read this file and this installation."""
        if not local:
            return self.chain
        from dataclasses import replace

        return replace(self.chain, config_path=None, scrips_path=None)

    @property
    def planned_host(self) -> str:
        """Where a new run would be submitted, for showing a plan without connecting anywhere."""
        if self._local:
            return "<local server>"
        return self._explicit.get("host") or self.chain.api_config.get("host") or "<AIHC host>"

    def client_for(self, run: Optional[Run] = None) -> JobsAPI:
        """The client for ``run`` (None: for a new run)."""
        if self._client is not None:
            return self._client
        if run is not None and self._explicit_place:
            if self._local and not run.local and run.endpoint:
                raise UsageError(f"run {run.run_id} runs on {run.endpoint}, not on the local server: drop --local")
            if run.local and not self._local:
                raise UsageError(f"run {run.run_id} runs on the local server: drop --host/--ak/--sk/--credentials")
        if self._explicit_place or run is None:
            key: Tuple[Any, ...] = ("explicit", self._local, *sorted(self._explicit.items()))
            kwargs: Dict[str, Any] = dict(self._explicit, local=self._local)
        elif run.local:
            key, kwargs = ("local", run.local_state_dir), {"local": True, "local_state_dir": run.local_state_dir}
        else:
            key, kwargs = ("endpoint", run.endpoint), {"host": run.endpoint or None}
        if key not in self._clients:
            from job_chain.aihc.connect import connect

            # local runs take only the version from api_config (host and keys are the server's)
            kwargs.update(api_config=self.chain.api_config if not kwargs.get("local")
                          else {"version": self.chain.api_config.get("version")},
                          api_config_origin=f"{self.chain.path} api_config", api_version=self._api_version)
            self._clients[key] = connect(**kwargs)
        return self._clients[key]

    # -- runs ----------------------------------------------------------------------------------
    def runs(self) -> List[Run]:
        """Every recorded run of this chain, newest first."""
        return [Run.from_record(self.chain.path, r) for r in self.records.runs()]

    def run(self, run_id: Optional[str] = None) -> Run:
        """One recorded run (default: the latest); :class:`RunNotFound` lists the known ones."""
        if run_id is None:
            latest = self.records.latest_run()
            if latest is None:
                raise UsageError(f"no run of {self.chain.path} is recorded here: start one with "
                                 f"'job-chain run {self.chain.path}'")
            return Run.from_record(self.chain.path, latest)
        return Run.from_record(self.chain.path, self.records.require_run(run_id))

    def status(self, run_id: Optional[str] = None, *, now: Optional[float] = None) -> RunStatus:
        """Every step of the run (default: the latest) and its outcome, as the API tells it now."""
        from job_chain.chain.observe import observe

        run = self.run(run_id)
        cache, final = self.records.cached_attempts(run.run_id)
        client = self.client_for(run)
        attempts, known, settled = observe(client, self.chain.pool, run.run_id, cache=cache, final=final,
                                           first_job_id=self.records.first_job_id(run.run_id, run.first_step),
                                           since=run.started.timestamp())
        if known != cache or settled != final:
            self.records.save_attempts(run.run_id, known, settled)
        # the record matters only where a job did not succeed, and for the furthest step's advance
        keys = [(a.step, a.attempt) for a in attempts if a.terminal and a.status not in SUCCEEDED]
        keys += [(a.step, a.attempt) for a in attempts[-1:]]
        facts = self.records.facts(run.run_id, keys=keys)
        return summarize(self.chain, attempts, facts, run_id=run.run_id, now=now, local=run.local,
                         endpoint=run.endpoint or getattr(client, "endpoint", ""))

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

    # -- start / resume --------------------------------------------------------------------------
    def plan(self, first: int = 0, mode: str = "job") -> Dict[str, Any]:
        """The exact create request ``start`` would send (secrets redacted, run id a placeholder)."""
        from job_chain.chain.submit import build_request, client_token

        self._check_first(first)
        chain = self.chain_for(self._local)
        body = build_request(chain, first, "DRY-RUN", 1, mode=mode, host=chain.api_config.get("host"))
        return {"resourcePoolId": chain.pool, "clientToken": client_token("DRY-RUN", first, 1), "body": body}

    def _check_first(self, first: int) -> None:
        indexes = [s.index for s in self.chain.steps]
        if first not in indexes:
            raise UsageError(f"--start {first}: {self.chain.path} has {len(indexes)} steps, numbered 0 to "
                             f"{len(indexes) - 1}")

    def roots(self, first: int = 0) -> List[int]:
        """The steps a run starting at ``first`` submits at once (step ``first`` in a line; every
        step whose dependencies lie before ``first`` in a graph)."""
        from job_chain.chain import graph

        return graph.plan(self.chain, {}, first_step=first).ready or [first]

    def start(self, first: int = 0, *, mode: str = "job", force: bool = False) -> Run:
        """Record a new run and submit its first steps; later steps start by themselves.

        Refuses (:class:`RunStillActive`) while another run of this chain is going, unless ``force``.
        """
        if mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self._check_first(first)
        if not force:
            active = self.active_run()
            if active is not None:
                steps = ", ".join(f"step {s.index} is {s.status}" for s in active.current) or "it is starting"
                raise RunStillActive(
                    f"run {active.run_id} of {self.chain.path} is still going ({steps}): watch it with "
                    f"'job-chain status {self.chain.path} --watch', stop it with 'job-chain stop {self.chain.path}', "
                    "or pass --force to start another run beside it", active.run_id)
        client = self.client_for(None)
        run_id = new_run_id()
        where: Dict[str, Any] = {"local": self._local}
        if self._local:  # the run lives on this local server: later commands find it there
            from job_chain.local.server import default_state_dir

            where["localStateDir"] = default_state_dir()
        record = self.records.create_run(run_id, chain=self.chain.path, startStep=first, mode=mode,
                                         endpoint=client.endpoint, pool=self.chain.pool, **where)
        run = Run.from_record(self.chain.path, record)
        try:
            for index in self.roots(first):
                self._submit(run, index, 1, mode)
        except SubmitInterrupted:
            raise
        except JobChainError as exc:
            if not getattr(exc, "retryable", True) and not self.records.submissions(run_id):
                self.records.delete_run(run_id)  # refused outright: nothing was created, forget it
            raise
        return run

    def resume(self, run_id: Optional[str] = None, *, mode: Optional[str] = None) -> List[Submitted]:
        """Submit again every step that did not succeed and whose dependencies did (in a line: the
        first one that did not succeed); empty when every step succeeded.

        Succeeded steps are kept. Never duplicates: a step an interrupted submit or a failed
        advance may have created is submitted with the same client token. Exit handlers run again
        when the resumed run ends. :class:`RunStillActive` while a step is going.
        """
        run = self.run(run_id)
        status = self.status(run.run_id)
        active = [s for s in status.steps if s.active]
        if active:
            raise RunStillActive(
                f"run {run.run_id} is still going (step {active[0].index} is {active[0].status}); stop it first "
                f"with 'job-chain stop {self.chain.path} --run {run.run_id}'", run.run_id)
        targets = resume_targets(status, self.chain)
        if not targets:
            return []
        self.records.clear_stopped(run.run_id)
        self.records.clear_advance_failures(run.run_id)
        chosen = mode or run.mode
        record = dict(self.records.get_run(run.run_id) or {})
        handlers_ran = any(s.submitted for s in status.steps if self.chain.step(s.index).is_handler)  # type: ignore
        record.update(mode=chosen, round=int(record.get("round") or 0) + (1 if handlers_ran else 0))
        self.records.create_run(run.run_id, **{k: v for k, v in record.items() if k != "id"})
        return [self._submit(run, index, attempt, chosen) for index, attempt in targets]

    def _submit(self, run: Run, index: int, attempt: int, mode: str) -> Submitted:
        """Submit one step, retrying transient API errors for up to SUBMIT_DEADLINE seconds.

        The client token makes every retry safe, and giving up early is not: a create can fail after
        the job was committed, and that job would then advance a run the user believes failed.
        """
        from job_chain.aihc.errors import AIHCError
        from job_chain.chain.advance import submit_with_deadline
        from job_chain.chain.submit import submit_step

        chain = self.chain_for(run.local)
        client = self.client_for(run)
        finish = f"'job-chain resume {self.chain.path} --run {run.run_id}'"
        try:
            result = submit_with_deadline(
                lambda: submit_step(client, chain, index, run.run_id, attempt, records=self.records, mode=mode),
                SUBMIT_DEADLINE)
        except KeyboardInterrupt:
            raise SubmitInterrupted(
                f"interrupted while submitting step {index} of run {run.run_id}: the step may or may not have been "
                f"created. {finish} finishes it without ever creating it twice") from None
        except AIHCError as exc:
            if not exc.retryable:
                raise
            raise JobChainError(f"{exc}. Step {index} may have been created all the same: "
                                f"'job-chain status {self.chain.path} --run {run.run_id}' shows it, and {finish} "
                                "continues the run without ever creating it twice") from None
        return Submitted(run.run_id, index, attempt, result["jobId"], result["jobName"], result["created"] == "yes")

    # -- stop ----------------------------------------------------------------------------------
    def stop(self, run_id: Optional[str] = None, *, settle: float = 120.0) -> List[StepStatus]:
        """Stop the run: no later step starts, and each step still going is stopped (returned).

        With ``runOn: always`` handlers or notifications, waits up to ``settle`` seconds for the
        stopped steps to end, then starts the handlers and sends ``stopped``.
        """
        run = self.run(run_id)
        self.records.mark_stopped(run.run_id)
        client = self.client_for(run)
        going = [s for s in self.status(run.run_id).steps if s.active]
        for step in going:
            client.stop_job(self.chain.pool, step.job_id)
        if self.chain.handlers or self.chain.notify:
            self._after_stop(run, settle)
        return going

    def _after_stop(self, run: Run, settle: float) -> None:
        from job_chain.chain.notify import notify

        end = time.monotonic() + settle
        status = self.status(run.run_id)
        while any(s.active for s in status.steps if not self.chain.step(s.index).is_handler):  # type: ignore
            if time.monotonic() > end:
                self.warn(f"the stopped steps of run {run.run_id} did not end within {settle:g}s: its "
                          "runOn: always handlers did not start")
                return
            time.sleep(0.5)
            status = self.status(run.run_id)
        round_ = self.records.round(run.run_id)
        for handler in self.chain.handlers:
            if handler.run_on == "always":
                self._submit(run, handler.index, round_ + 1, run.mode)
        notify(self.chain, self.records, run.run_id, "stopped", status="stopped", log=self.warn)

    # -- watch / wait ----------------------------------------------------------------------------
    def watch(self, run_id: Optional[str] = None, *, interval: float = 1.0,
              on_error: Optional[Callable[[JobChainError], None]] = None) -> Iterator[RunStatus]:
        """Yield the run's status each time it changes, ending with the one whose outcome is final.

        In ``--advance watch`` mode this is also what submits each next step. Transient API
        errors are passed to ``on_error`` (default: ignored) and watching goes on.
        """
        last: Optional[Tuple[Any, ...]] = None
        for status in self._poll(self.run(run_id), interval, on_error):
            shape = (status.outcome, tuple((s.status, s.job_id, s.attempt) for s in status.steps))
            if shape != last or status.outcome is not Outcome.RUNNING:
                last = shape
                yield status

    def wait(self, run_id: Optional[str] = None, *, timeout: Optional[float] = None,
             interval: float = 1.0) -> RunStatus:
        """Block until the run's outcome is final; :class:`RunTimeout` after ``timeout`` seconds."""
        end = None if timeout is None else time.monotonic() + timeout
        run = self.run(run_id)
        status = None
        for status in self._poll(run, interval, None):
            if status.outcome is not Outcome.RUNNING:
                return status
            if end is not None and time.monotonic() + interval > end:
                break
        raise RunTimeout(f"run {run.run_id} is still {status.outcome if status else 'starting'} after {timeout:g}s")

    def _poll(self, run: Run, interval: float,
              on_error: Optional[Callable[[JobChainError], None]]) -> Iterator[RunStatus]:
        """The run's status every ``interval`` seconds until final (advancing it in watch mode)."""
        from job_chain.aihc.errors import AIHCError

        handled: Set[Tuple[int, int, str]] = set()
        while True:
            try:
                status = self.status(run.run_id)
                if run.mode == "watch" and self._advance_from_here(run, status, handled):
                    continue  # something was submitted: look again before reporting
            except AIHCError as exc:
                if not exc.retryable:
                    raise
                if on_error is not None:
                    on_error(exc)
                time.sleep(max(interval, 2.0))
                continue
            yield status
            if status.outcome is not Outcome.RUNNING:
                return
            time.sleep(interval)

    def _advance_from_here(self, run: Run, status: RunStatus, handled: Set[Tuple[int, int, str]]) -> bool:
        """--advance watch: do from here what each job's tail would have done. True if it acted."""
        from job_chain.chain.advance import advance

        acted = False
        for step in status.steps:
            key = (step.index, step.attempt, step.status)
            if key in handled or not step.submitted or step.status not in SUCCEEDED | FAILED:
                continue
            handled.add(key)
            later = [s for s in status.steps if s.index > step.index and s.submitted]
            if step.succeeded and later:
                continue
            exit_code = 0 if step.succeeded else (step.exit_code or 1)
            advance(self.chain_for(run.local), self.client_for(run), run_id=run.run_id, step=step.index,
                    attempt=step.attempt, exit_code=exit_code, records=self.records,
                    resume_hint=f"job-chain resume {self.chain.path} --run {run.run_id} --advance watch", mode="watch")
            acted = True
        return acted

    # -- logs ----------------------------------------------------------------------------------
    def attempt(self, run_id: Optional[str] = None, step: Optional[int] = None,
                attempt: Optional[int] = None) -> Tuple[StepStatus, Any]:
        """(the step, its chosen attempt): default the latest submitted step and its latest attempt."""
        run = self.run(run_id)
        status = self.status(run.run_id)
        submitted = [s for s in status.steps if s.submitted]
        if step is not None:
            if self.chain.step(step) is None:
                raise UsageError(f"--step {step}: {self.chain.path} has steps 0 to {self.chain.length - 1}")
            submitted = [s for s in submitted if s.index == step]
            if not submitted:
                raise UsageError(f"step {step} of run {run.run_id} has not been submitted")
        if not submitted:
            raise UsageError(f"run {run.run_id} has no submitted step yet")
        chosen = submitted[-1]
        tries = {a.attempt: a for a in chosen.attempts}
        number = attempt if attempt is not None else max(tries)
        if number not in tries:
            raise UsageError(f"step {chosen.index} of run {run.run_id} has no attempt {number} "
                             f"(it has {', '.join(str(k) for k in sorted(tries))})")
        return chosen, tries[number]

    def log(self, run_id: Optional[str] = None, step: Optional[int] = None, attempt: Optional[int] = None,
            pod: Optional[str] = None, tail: Optional[int] = None) -> str:
        """The log text of one attempt's pod (default: the master pod of the latest attempt).

        With ``tail``, only the last lines are asked of the API (``maxLines``); a whole log comes page by page.
        """
        from job_chain.aihc.client import pod_names
        from job_chain.aihc.logpages import log_records

        run = self.run(run_id)
        _, chosen = self.attempt(run.run_id, step, attempt)
        client = self.client_for(run)
        names = pod_names(client.get_job(self.chain.pool, chosen.job_id))
        if pod is None:
            if not names:
                raise UsageError(f"job {chosen.job_id} has no pods yet")
            pod = names[0]
        text = "".join(log_records(client, self.chain.pool, chosen.job_id, pod, max_lines=tail))
        if tail is not None:
            text = "".join(text.splitlines(True)[-tail:]) if tail else ""
        return text

    def __repr__(self) -> str:
        return f"ChainSession({os.path.relpath(self.chain.path)!r})"
