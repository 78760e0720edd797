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

The class is a facade, built by composition: it holds a :class:`~job_chain.session.context.RunContext`
(the chain file, the run records, :class:`~job_chain.session.places.Places`, where warnings go) and
each method hands it to a module function — :mod:`.look` (status), :mod:`.start`, :mod:`.plan`,
:mod:`.resume`, :mod:`.stop`, :mod:`.watch`, :mod:`.logs` — so every operation can be read, type
checked and tested on its own, with no method resolution order to reason about.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from job_chain.aihc.api import JobsAPI
from job_chain.errors import ChainFileInvalid, JobChainError, UsageError
from job_chain.record.records import RunRecords
from job_chain.record.summary import Listed
from job_chain.rules.revise import Change
from job_chain.session import look, plan, resume
from job_chain.session.chainfile import ChainFile
from job_chain.session.context import RunContext, all_runs, find_run, frozen
from job_chain.session.places import Places
from job_chain.session.runs import ResumePlan, Run, RunSummary, SubmitInterrupted, Submitted
from job_chain.spec.model import Chain, Step
from job_chain.status.types import Attempt, RunStatus, StepStatus

if TYPE_CHECKING:  # each operation's module is imported when it is used (a look imports no start)
    from job_chain.session.cache import Explained

__all__ = ["ChainSession", "Run", "RunSummary", "Submitted", "SubmitInterrupted", "ResumePlan"]


def _ignore(message: str) -> None:
    pass


class ChainSession:
    """One chain file and the runs recorded beside it, and the AIHC API they run on.

    ``client`` (anything satisfying :class:`~job_chain.aihc.api.JobsAPI`) is used for every run
    when given; otherwise a client is built per run from the explicit ``local``/``host``/``ak``/
    ``sk``/``credentials``, else from where the run was recorded to run, else from the usual
    credential sources (env, ``JOB_CHAIN_CREDENTIALS``, the chain's ``api_config``).
    ``start_local=False`` (read-only callers) never starts the local server: a stopped one is a
    :class:`~job_chain.local.daemon.LocalServerStopped` error saying how to start it.

    ``context`` is what every operation works with (:class:`~job_chain.session.context.RunContext`):
    the CLI passes it to the undocumented helpers in :mod:`job_chain.session.plan` (``planned_host``,
    ``chain_to_freeze``, ``check_mode``) that used to be methods.
    """

    def __init__(self, chain: Optional[Chain], *, client: Optional[JobsAPI] = None, local: bool = False,
                 host: Optional[str] = None, ak: Optional[str] = None, sk: Optional[str] = None,
                 credentials: Optional[str] = None, warn: Callable[[str], None] = _ignore,
                 api_version: Optional[str] = None, path: Optional[str] = None,
                 chain_problem: Optional[JobChainError] = None, start_local: bool = True,
                 session_token: Optional[str] = None) -> None:
        if api_version is not None:
            from job_chain.aihc.v2 import version_problem

            problem = version_problem(api_version)
            if problem:  # refused here, not at the first API call with a message about a CLI option
                raise UsageError(f"ChainSession(api_version={api_version!r}): {problem} (or None: env "
                                 "AIHC_API_VERSION, then api_config.version, else v1)")
        if chain is None and path is None:
            raise UsageError("ChainSession needs a chain or the path of its file")
        # the file is read again when it matters when there is no chain (from_file marks its own too)
        file = ChainFile(chain.path if chain is not None else str(path), chain, chain_problem,
                         from_file=chain is None)
        records = RunRecords(file.path)
        file.records = records
        places = Places(file, records, client=client, local=local, api_version=api_version, start_local=start_local,
                        explicit={"host": host, "ak": ak, "sk": sk, "session_token": session_token,
                                  "credentials_file": credentials})
        self.context = RunContext(file, records, places, warn)
        self.records = records
        self.warn = warn

    @classmethod
    def from_file(cls, path: str, *, local: bool = False, host: Optional[str] = None, ak: Optional[str] = None,
                  sk: Optional[str] = None, credentials: Optional[str] = None, client: Optional[JobsAPI] = None,
                  warn: Callable[[str], None] = _ignore, api_version: Optional[str] = None,
                  strict: bool = True, start_local: bool = True, session_token: Optional[str] = None) -> ChainSession:
        """Load and validate ``path`` (:class:`~job_chain.errors.ChainFileInvalid` lists every problem).

        With ``strict=False`` a file that is broken or gone is not an error: the session can still
        show, stop and read the logs of its recorded runs (from their frozen copies), and raises
        the file's problem only for what needs the file (``start``, ``plan``, ``resume`` with changes).
        """
        kwargs: Dict[str, Any] = dict(client=client, local=local, host=host, ak=ak, sk=sk, credentials=credentials,
                                      warn=warn, api_version=api_version, start_local=start_local,
                                      session_token=session_token)
        if not strict and warn is _ignore:  # steering recorded runs: the file is read when something needs it
            session = cls(None, path=path, **kwargs)
            session.context.file.defer()
            return session
        from job_chain.spec.loader import load_chain

        try:
            chain = load_chain(path, local=True)
        except ChainFileInvalid as exc:
            if strict:
                raise
            return cls(None, path=path, chain_problem=exc, **kwargs)
        session = cls(chain, **kwargs)
        session.context.file.from_file = True
        for warning in chain.warnings:
            warn(warning)
        return session

    # -- the chain file ---------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.context.path

    @property
    def chain(self) -> Chain:
        """The chain file as it is now (validated); raises its problem when it cannot be used."""
        return self.context.file.chain

    @property
    def chain_problem(self) -> Optional[JobChainError]:
        """Why the file cannot be used now (None when it can); its runs are still steerable."""
        return self.context.file.problem

    def reload(self) -> Chain:
        """Read the chain file again (a session lives long: a run freezes, and a resume compares,
        the file as it is at that moment). Raises its problems; a session made from a Chain keeps it."""
        return self.context.file.reload()

    # -- where runs run ---------------------------------------------------------------------------
    @property
    def api_version(self) -> str:
        """v1 or v2, as a new client would speak (see :func:`~job_chain.aihc.connect.resolve_api_version`)."""
        return self.context.places.api_version

    def client_for(self, run: Optional[Run] = None) -> JobsAPI:
        """The client for ``run`` (None: for a new run)."""
        return self.context.places.client_for(run)

    # -- runs -------------------------------------------------------------------------------------
    def runs(self) -> List[Run]:
        """Every recorded run of this chain, newest first."""
        return all_runs(self.context)

    def summaries(self, *, limit: Optional[int] = None, since: Optional[float] = None) -> List[RunSummary]:
        """The runs of this chain as ``runs`` lists them, newest first: outcome, why, the steps failed or
        going, GPU-hours, parameters (:class:`RunSummary`). Those started at or after ``since`` (epoch
        seconds), at most ``limit``. Each is read from the summary its last look wrote; a run whose
        summary is missing or older than its record (or that is still going) is looked at, once."""
        from job_chain.session.summaries import summaries

        return summaries(self.context, limit=limit, since=since)

    def listed(self, *, since: Optional[float] = None) -> List[Listed]:
        """Every run of this chain, newest first, as a list finds it without looking at any: its
        record, and what its summary says where that stands in (:func:`summary_of` works one out). A
        page of many chains' runs takes the newest of these and works out only the ones it shows."""
        from job_chain.session.summaries import listed

        return listed(self.context, since=since)

    def summary_of(self, item: Listed) -> RunSummary:
        """One run of :meth:`listed` as :meth:`summaries` gives it (a look, once, where its summary
        is missing or stale)."""
        from job_chain.session.summaries import summary_of

        return summary_of(self.context, item)

    def run(self, run_id: Optional[str] = None) -> Run:
        """One recorded run (default: the latest); :class:`RunNotFound` lists the known ones."""
        return find_run(self.context, run_id)

    def frozen(self, run: Union[Run, str, None] = None) -> Chain:
        """The chain ``run`` runs: its frozen copy (the file as it is now, for a run recorded before
        runs were frozen): rule 7, decided as the run's jobs decide it."""
        return frozen(self.context, run)

    def status(self, run_id: Optional[str] = None, *, now: Optional[float] = None, outputs: bool = False,
               patient: bool = False) -> RunStatus:
        """Every step of the run (default: the latest) and its outcome, as the API tells it now
        (:func:`job_chain.session.look.status`); ``outputs=True`` reads an inline run's from its logs;
        ``patient=True`` retries the reads through transient API errors as long as a create is retried."""
        return look.status(self.context, run_id, now=now, outputs=outputs, patient=patient)

    def file_changes(self, run_id: Optional[str] = None, *, reread: bool = True) -> List[Change]:
        """How the chain file, read now, differs from the revision the run runs (by step name, as
        :meth:`preview_resume` compares them); [] when they match or the file cannot be used.
        ``reread=False``: the file as this session read it, for a caller that opened it just now."""
        return resume.file_changes(self.context, find_run(self.context, run_id), reread=reread)

    def delete_run(self, run_id: str) -> None:
        """Forget a run that is not going (its record; its jobs stay in AIHC). :class:`RunStillActive`
        for one that is."""
        from job_chain.session import stop

        stop.delete(self.context, run_id)

    # -- start ------------------------------------------------------------------------------------
    def start(self, first: Union[int, str] = 0, *, mode: str = "job", force: bool = False,
              params: Optional[Dict[str, str]] = None, cache: bool = True) -> Run:
        """Freeze the chain into a new run record and submit its first steps; later steps start by
        themselves, from the frozen copy. ``params`` override the chain's parameter defaults (an
        unknown name is a :class:`UsageError`); the run keeps the values.

        Refuses (:class:`RunStillActive`) while another run of this chain is going, unless ``force``;
        the check and the new record are made under a lock, so simultaneous starts give one run.
        ``cache=False``: no step of the run reuses a cached success (docs/caching.md).
        """
        from job_chain.session import start

        return start.start(self.context, first, mode=mode, force=force, params=params, cache=cache)

    # -- steps cached across runs (docs/caching.md) ----------------------------------------------
    def cache_entries(self) -> List[Dict[str, Any]]:
        """Every cached success this chain's steps can reuse, newest first."""
        from job_chain.session import cache

        return cache.entries(self.context)

    def cache_explain(self, step: str, params: Optional[Dict[str, str]] = None) -> Explained:
        """The key ``step`` would have now, its parts, and which of them differ from the nearest entry."""
        from job_chain.session import cache

        return cache.explain(self.context, step, params)

    def cache_forget(self, step: Optional[str] = None) -> int:
        """Forget the cached successes of ``step`` (default: of every step); how many were removed."""
        from job_chain.session import cache

        return cache.forget(self.context, step)

    def plan(self, first: Union[int, str] = 0, mode: str = "job",
             params: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
        """The exact create requests ``start`` would send, one per first step (secrets redacted by the
        caller; the run id is a placeholder)."""
        return plan.plan(self.context, first, mode, params)

    def waves(self, first: Union[int, str] = 0) -> Tuple[List[Step], List[Step]]:
        """(the steps a run starting at ``first`` submits at once, the ready ones that wait for a slot)."""
        return plan.waves(self.context, first)

    def checkpoints(self, run_id: Optional[str] = None) -> List[Any]:
        """What is in the checkpoint directory of each step of the run that has one, as the run reads
        it (:class:`~job_chain.rules.checkpoint.Seen`: the directory, the complete iteration there or
        none), for saying before a run or resume submits anything."""
        run = find_run(self.context, run_id)
        return plan.checkpoints(frozen(self.context, run), run.run_id)

    def request(self, run_id: Optional[str], step: Union[int, str], attempt: Optional[int] = None) -> Dict[str, Any]:
        """The create request run ``run_id`` sends (or sent) for ``step``: an attempt already
        submitted as the revision it was submitted with, else as the run's current revision."""
        return plan.request(self.context, run_id, step, attempt)

    # -- resume -----------------------------------------------------------------------------------
    def preview_resume(self, run_id: Optional[str] = None, *, rerun: Tuple[str, ...] = (),
                       params: Optional[Dict[str, str]] = None, as_frozen: bool = False,
                       renamed: Optional[Dict[str, str]] = None) -> ResumePlan:
        """What :meth:`resume` would do — the file's changes by step name, and what it would submit —
        without doing it. :class:`RunStillActive` while a step is going."""
        return resume.preview(self.context, find_run(self.context, run_id), tuple(rerun), dict(params or {}),
                              as_frozen, renamed)[0]

    def resume(self, run_id: Optional[str] = None, *, mode: Optional[str] = None,
               rerun: Tuple[str, ...] = (), params: Optional[Dict[str, str]] = None,
               as_frozen: bool = False, renamed: Optional[Dict[str, str]] = None) -> List[Submitted]:
        """Apply the chain file's changes to the run (by step name, to steps that did not succeed;
        ``rerun`` names succeeded steps to run again with what follows them; ``params`` set parameters
        for the steps that have not succeeded), keep the result as a new frozen revision, and submit
        every step that did not succeed and whose dependencies did (as many as ``maxParallel`` and
        ``maxRunning`` allow at once: the others start as slots free up).

        Succeeded steps are kept. Never duplicates: a step an interrupted submit or a failed
        advance may have created is submitted with the same client token. Exit handlers run again
        when the resumed run ends, and notifications go out again. :class:`RunStillActive` while a
        step is going; ``[]`` when there is nothing to submit. ``as_frozen``: the chain file is not
        read; the run continues as frozen (``rerun`` and ``params`` still apply). ``renamed``
        ({old name: new name}): steps the file renamed; one that succeeded under its old name does
        not run again. A step that ran and left the file stays in the run as history.
        """
        return resume.apply(self.context, run_id, mode=mode, rerun=tuple(rerun), params=params, as_frozen=as_frozen,
                            renamed=renamed)

    def revise_running(self, run_id: Optional[str] = None) -> ResumePlan:
        """Apply the chain file's changes to a run that is going, without stopping anything: the
        steps not submitted yet take them (a new revision); the plan's changes say which could not
        be applied (running, submitted or succeeded steps) and why. A run that is not going is only
        previewed (:meth:`resume` resumes it)."""
        return resume.revise_running(self.context, run_id)

    # -- stop -------------------------------------------------------------------------------------
    def stop(self, run_id: Optional[str] = None, *, settle: float = 120.0) -> List[StepStatus]:
        """Stop the run: no later step starts, and each step still going is stopped (returned).

        A run that already ended is refused (:class:`UsageError`): its outcome never changes. With
        ``runOn: always`` handlers or notifications, waits up to ``settle`` seconds for the stopped
        steps to end, then starts the handlers and sends ``stopped``.
        """
        from job_chain.session import stop

        return stop.stop(self.context, run_id, settle=settle)

    # -- watch ------------------------------------------------------------------------------------
    def watch(self, run_id: Optional[str] = None, *, interval: float = 1.0,
              on_error: Optional[Callable[[JobChainError], None]] = None) -> Iterator[RunStatus]:
        """Yield the run's status each time it changes, ending with the one whose outcome is final.

        In ``--advance watch`` mode this is also what submits each next step. Transient API
        errors are passed to ``on_error`` (default: ignored) and watching goes on.
        """
        from job_chain.session import watch

        return watch.watch(self.context, run_id, interval=interval, on_error=on_error)

    def wait(self, run_id: Optional[str] = None, *, timeout: Optional[float] = None,
             interval: float = 1.0) -> RunStatus:
        """Block until the run's outcome is final; :class:`RunTimeout` after ``timeout`` seconds."""
        from job_chain.session import watch

        return watch.wait(self.context, run_id, timeout=timeout, interval=interval)

    # -- logs -------------------------------------------------------------------------------------
    def attempt(self, run_id: Optional[str] = None, step: Union[int, str, None] = None,
                attempt: Optional[int] = None) -> Tuple[StepStatus, Attempt]:
        """(the step, its chosen attempt). Default: for a failed run its failed step, else the latest
        submitted step; and the step's latest attempt. ``step`` is a name or a number."""
        from job_chain.session import logs

        return logs.attempt(self.context, run_id, step, attempt)

    def log(self, run_id: Optional[str] = None, step: Union[int, str, None] = None, attempt: Optional[int] = None,
            pod: Optional[str] = None, tail: Optional[int] = None) -> str:
        """The log text of one attempt's pod (default: the master pod of the latest attempt).

        With ``tail``, only the last ``tail`` lines are asked of the API (its ``maxLines``).
        """
        from job_chain.session import logs

        return logs.log(self.context, run_id, step, attempt, pod, tail)

    def pods(self, run: Union[Run, str], job_id: str) -> Tuple[str, ...]:
        """The pod names of one of the run's jobs (the master first)."""
        from job_chain.session import logs

        return logs.pods(self.context, run if isinstance(run, Run) else self.run(run), job_id)

    def pod_log(self, run: Union[Run, str], job_id: str, pod: str, **params: Any) -> Iterator[str]:
        """The records of one pod's log, page by page (``max_lines``, ``chunk``, ``start_time``, …)."""
        from job_chain.session import logs

        return logs.pod_log(self.context, run if isinstance(run, Run) else self.run(run), job_id, pod, **params)

    def __repr__(self) -> str:
        return f"ChainSession({os.path.relpath(self.path)!r})"
