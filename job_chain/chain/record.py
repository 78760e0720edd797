"""The run record kept beside the chain file: one directory per run, one file per fact.

``chain_info.json`` gets ``chain_info.json.runs/<run-id>/`` holding ``run.json`` (where and how
the run started, and its current revision), ``revision-1.json`` (the chain frozen at start; a
resume that changed the run adds ``revision-2.json`` beside it), ``step-<name>-attempt-1.json``
per submission, ``exit-<name>-attempt-1.json`` per script exit (written by the advancing job),
``advance-failed-…`` when an advance gave up, ``stopped.json``, ``start-failed.json`` and
``attempts.json`` (a cache of finished attempts, kept by :mod:`job_chain.chain.look`), each
written atomically with mode 0600. Steps are known by name. One file per fact means replicas,
retries and the local ``run`` never rewrite each other's files. In job mode every job's tail
reports here, so joins are decided from these files (:mod:`job_chain.chain.readiness`); the API
stays the source of truth for job statuses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import time
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Optional, Tuple

if TYPE_CHECKING:  # a job advancing a chain reads the record without the status types
    from job_chain.chain.progress import RunFacts
from job_chain.errors import RunNotFound, UsageError
from job_chain.files import read_json_dict as _read
from job_chain.files import write_json_private

# a step is named by its AIHC job name (or, in runs recorded before names, its index)
_STEP = r"([a-z0-9][-a-z0-9]{0,62})"
_SUBMISSION = re.compile(rf"step-{_STEP}-attempt-(\d+)\.json")
_EXIT = re.compile(rf"exit-{_STEP}-attempt-(\d+)\.json")
_ADVANCE_FAILED = re.compile(rf"advance-failed-{_STEP}-attempt-(\d+)\.json")
_SUCCEEDED = re.compile(rf"succeeded-{_STEP}-attempt-(\d+)\.json")
FACTS = {"step": _SUBMISSION, "exit": _EXIT, "succeeded": _SUCCEEDED, "advance-failed": _ADVANCE_FAILED}
_REVISION = re.compile(r"revision-(\d+)\.json")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
STOPPED_MARKER = "stopped.json"
START_FAILED = "start-failed.json"
RUN_CREDENTIALS = "credentials.json"  # the chain file's api_config at start, for the advancing jobs
LOCK = ".lock"


def new_run_id() -> str:
    """Sortable, label-safe, unique enough: ``20261122-113045-9f3a``."""
    import secrets

    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def run_started(run_id: str) -> Optional[float]:
    """When a run began (unix seconds), read from its id; None for an id not made by new_run_id.

    Inline runs have no record to ask, and a job list is only walked back to the run's start.
    """
    import calendar

    try:
        return float(calendar.timegm(time.strptime(run_id[:15], "%Y%m%d-%H%M%S")))
    except ValueError:
        return None


def _name(kind: str, step: str, attempt: int) -> str:
    return f"{kind}-{step}-attempt-{attempt}.json"


class RecordDamaged(UsageError):
    """A run directory whose ``run.json`` cannot be read: never taken for "no run"."""


class RunRecords:
    """Run records for one chain file (``config_path`` in the cluster, the file path locally)."""

    def __init__(self, chain_path: str) -> None:
        self.chain_path = chain_path
        self.root = os.path.abspath(chain_path) + ".runs"
        self._frozen: Dict[Tuple[str, int], Any] = {}

    def directory(self, run_id: str) -> str:
        return self._dir(run_id)

    def _dir(self, run_id: str) -> str:
        if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
            raise RunNotFound(f"{run_id!r} is not a run id (run ids look like 20261122-113045-9f3a)"
                              + self._known_hint(), self.run_ids())
        return os.path.join(self.root, run_id)

    def _check_root(self) -> None:
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise UsageError(f"{self.root} is not a directory: job-chain keeps the runs of {self.chain_path} "
                             "there; move that file away")

    def _known_hint(self) -> str:
        known = self.run_ids()
        if not known:
            return f"; no run of {self.chain_path} is recorded here"
        shown = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
        return f"; known runs (newest first): {shown} (job-chain runs {shlex.quote(self.chain_path)} lists them)"

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, run_id: str, **meta: Any) -> Dict[str, Any]:
        self._check_root()
        run = {"id": run_id, "started": time.time(), **meta}
        os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
        write_json_private(os.path.join(self._dir(run_id), "run.json"), run)
        return run

    def update_run(self, run_id: str, **changes: Any) -> Dict[str, Any]:
        """Rewrite ``run.json`` with ``changes`` (resume: the round, the mode, a new revision)."""
        run = dict(self.require_run(run_id))
        run.update(changes)
        write_json_private(os.path.join(self._dir(run_id), "run.json"), run)
        return run

    def delete_run(self, run_id: str) -> None:
        """Forget a run: its directory and everything in it."""
        import shutil

        shutil.rmtree(self._dir(run_id), ignore_errors=True)

    def get_run(self, run_id: str) -> Optional[Dict[str, Any]]:
        return _read(os.path.join(self._dir(run_id), "run.json"))

    def require_run(self, run_id: str) -> Dict[str, Any]:
        """The recorded run, or :class:`RunNotFound` listing the runs that exist."""
        run = self.get_run(run_id)
        if run is None:
            if os.path.isdir(self._dir(run_id)):
                raise RecordDamaged(self._damaged_message(run_id))
            raise RunNotFound(f"no run {run_id} of {self.chain_path} is recorded" + self._known_hint(), self.run_ids())
        return run

    def _damaged_message(self, run_id: str) -> str:
        return (f"the record of run {run_id} is damaged ({os.path.join(self._dir(run_id), 'run.json')} is missing or "
                f"not JSON): delete it with 'job-chain runs {shlex.quote(self.chain_path)} --delete {run_id}'")

    def damaged(self) -> List[str]:
        """Run directories whose ``run.json`` cannot be read (newest first)."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        return sorted((n for n in names if _RUN_ID.fullmatch(n) and os.path.isdir(os.path.join(self.root, n))
                       and _read(os.path.join(self.root, n, "run.json")) is None), reverse=True)

    def runs(self) -> List[Dict[str, Any]]:
        """Every recorded run, newest first."""
        self._check_root()
        try:
            names = os.listdir(self.root)
        except OSError:
            return []
        found = [r for r in (_read(os.path.join(self.root, n, "run.json")) for n in names if _RUN_ID.fullmatch(n))
                 if r and isinstance(r.get("id"), str)]
        return sorted(found, key=lambda r: (float(r.get("started") or 0), r["id"]), reverse=True)

    def run_ids(self) -> List[str]:
        try:
            return [r["id"] for r in self.runs()]
        except UsageError:
            return []

    def latest_run(self) -> Optional[Dict[str, Any]]:
        return next(iter(self.runs()), None)

    @contextlib.contextmanager
    def start_lock(self) -> Iterator[None]:
        """Held while a run is checked for and recorded: two starts never both pass "no run is going"."""
        import fcntl

        self._check_root()
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(self.root, LOCK), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def record_start_failure(self, run_id: str, message: str) -> None:
        """The run's first steps could not be submitted: its outcome is failed, not "unknown" for ever."""
        self._write(run_id, START_FAILED, {"message": message, "at": time.time()})

    def start_failure(self, run_id: str) -> Optional[str]:
        entry = _read(os.path.join(self._dir(run_id), START_FAILED))
        return str(entry.get("message") or "it could not be started") if entry is not None else None

    # -- the frozen chain ------------------------------------------------------------------------
    def freeze(self, run_id: str, frozen: Dict[str, Any], *, revision: int, reason: str,
               changes: Optional[List[Dict[str, Any]]] = None) -> str:
        """Keep revision ``revision`` of the run's chain; return its digest. Never overwrites one."""
        from job_chain.chain.frozen import digest

        value = digest(frozen)
        path = os.path.join(self._dir(run_id), f"revision-{revision}.json")
        if os.path.exists(path):
            raise UsageError(f"run {run_id} already has a revision {revision}")
        os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
        write_json_private(path, {"revision": revision, "created": time.time(), "reason": reason,
                                  "changes": changes or [], "digest": value, "chain": frozen})
        return value

    def revisions(self, run_id: str) -> List[Dict[str, Any]]:
        """Each revision's facts (number, when, why, what changed, digest), oldest first; no chain."""
        out = []
        for name in sorted(os.listdir(self._dir(run_id)) if os.path.isdir(self._dir(run_id)) else []):
            if _REVISION.fullmatch(name):
                data = _read(os.path.join(self._dir(run_id), name)) or {}
                out.append({k: data.get(k) for k in ("revision", "created", "reason", "changes", "digest")})
        return sorted(out, key=lambda r: int(r.get("revision") or 0))

    def frozen(self, run_id: str, run: Optional[Dict[str, Any]] = None) -> Optional[Any]:
        """The chain the run runs now (its current revision), or None for a run recorded before runs
        were frozen. Raises :class:`RecordDamaged` when the copy cannot be read."""
        from job_chain.chain.frozen import FrozenDamaged, thaw

        run = run if run is not None else self.require_run(run_id)
        number = run.get("revision")
        if not isinstance(number, int) or number < 1:
            return None
        if (run_id, number) not in self._frozen:
            path = os.path.join(self._dir(run_id), f"revision-{number}.json")
            data = _read(path)
            try:
                if data is None:
                    raise FrozenDamaged("missing or not JSON")
                chain = thaw(data["chain"], self.chain_path, revision=number, digest_=str(data.get("digest") or ""))
            except (FrozenDamaged, KeyError, TypeError) as exc:
                raise RecordDamaged(f"the frozen chain of run {run_id} ({path}) is damaged: {exc}") from None
            self._frozen[(run_id, number)] = chain
        return self._frozen[(run_id, number)]

    def save_credentials(self, run_id: str, api_config: Dict[str, Any]) -> None:
        """The chain file's ``api_config`` as it was at start (0600), so advancing jobs need not read
        the file again; only written when the file held keys."""
        self._write(run_id, RUN_CREDENTIALS, {k: v for k, v in api_config.items() if isinstance(v, str)})

    def credentials(self, run_id: str) -> Dict[str, Any]:
        return _read(os.path.join(self._dir(run_id), RUN_CREDENTIALS)) or {}

    # -- submissions -------------------------------------------------------------------------
    def _write(self, run_id: str, name: str, data: Dict[str, Any]) -> bool:
        """Write one fact; False (not an error) when the record is not writable here (a job's view)."""
        try:
            os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
            write_json_private(os.path.join(self._dir(run_id), name), data)
            return True
        except OSError:
            return False

    def record_submission(self, run_id: str, step: str, attempt: int, job_id: str, job_name: str,
                          mode: Optional[str] = None) -> bool:
        """Note a created job; False (not an error) when not writable here. ``mode "job"``: its own tail
        reports to this record (so a join can be decided from the record: :mod:`~job_chain.chain.readiness`)."""
        entry = {"step": step, "attempt": attempt, "jobId": job_id, "jobName": job_name, "submitted": time.time()}
        if mode:
            entry["mode"] = mode
        return self._write(run_id, _name("step", step, attempt), entry)

    def submission(self, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
        return _read(os.path.join(self._dir(run_id), _name("step", step, attempt)))

    def submissions(self, run_id: str) -> List[Dict[str, Any]]:
        entries = [e for e in (self._entries(run_id, _SUBMISSION)) if isinstance(e.get("jobId"), str)]
        return sorted(entries, key=lambda e: (float(e.get("submitted") or 0), e["step"], e["attempt"]))

    def _entries(self, run_id: str, pattern: Any) -> List[Dict[str, Any]]:
        directory = self._dir(run_id)
        try:
            names = os.listdir(directory)
        except OSError:
            return []
        out = []
        for name in names:
            match = pattern.fullmatch(name)
            entry = _read(os.path.join(directory, name)) if match else None
            if entry is not None and match is not None:
                entry["step"], entry["attempt"] = match.group(1), int(match.group(2))
                out.append(entry)
        return out

    def first_job_id(self, run_id: str) -> Optional[str]:
        """The run's first job: a job list walked newest first can stop there."""
        entries = self.submissions(run_id)
        return entries[0]["jobId"] if entries else None

    # -- what only the advancing job knows -----------------------------------------------------
    def record_exit(self, run_id: str, step: str, attempt: int, exit_code: int) -> bool:
        """The user script's own exit code (the job's may differ: 75 when advancing failed)."""
        return self._write(run_id, _name("exit", step, attempt), {"exitCode": exit_code, "at": time.time()})

    def record_succeeded(self, run_id: str, step: str, attempt: int) -> bool:
        """Step ``step`` succeeded (every replica): written before its job looks at the others.

        Two predecessors of a join that finish together each write this first and read the
        other's second, so at least one of them sees both and submits the join.
        """
        return self._write(run_id, _name("succeeded", step, attempt), {"at": time.time()})

    def succeeded(self, run_id: str, step: str, attempt: int) -> bool:
        return os.path.exists(os.path.join(self._dir(run_id), _name("succeeded", step, attempt)))

    def claim(self, run_id: str, name: str) -> bool:
        """Create ``name`` exclusively: True for exactly one caller (notifications: at most once)."""
        try:
            os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
            fd = os.open(os.path.join(self._dir(run_id), name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        except OSError:
            return True  # not writable here: cannot deduplicate, so send (best effort)
        os.close(fd)
        return True

    def round(self, run_id: str, run: Optional[Dict[str, Any]] = None) -> int:
        """How many times the run was resumed: exit handlers and notifications happen once per round."""
        value = (run if run is not None else self.get_run(run_id) or {}).get("round", 0)
        return value if isinstance(value, int) and value >= 0 else 0

    def record_advance_failure(self, run_id: str, step: str, attempt: int, message: str) -> bool:
        return self._write(run_id, _name("advance-failed", step, attempt), {"message": message, "at": time.time()})

    def script_exit(self, run_id: str, step: str, attempt: int) -> Optional[int]:
        entry = _read(os.path.join(self._dir(run_id), _name("exit", step, attempt))) or {}
        code = entry.get("exitCode")
        return code if isinstance(code, int) else None

    def advance_failure(self, run_id: str, step: str, attempt: int) -> Optional[str]:
        entry = _read(os.path.join(self._dir(run_id), _name("advance-failed", step, attempt)))
        return str(entry.get("message") or "advance gave up") if entry is not None else None

    def facts(self, run_id: str, run: Optional[Dict[str, Any]] = None,
              keys: Optional[Iterable[Tuple[str, int]]] = None) -> RunFacts:
        """What the record knows, about the (step, attempt) ``keys`` only (None: every one).

        A 500-step run has 1,000 such files; a look at it needs the few that did not succeed.
        """
        run = run if run is not None else (self.get_run(run_id) or {})
        if keys is None:
            exits = {(e["step"], e["attempt"]): int(e["exitCode"]) for e in self._entries(run_id, _EXIT)
                     if isinstance(e.get("exitCode"), int)}
            failures = {(e["step"], e["attempt"]): str(e.get("message") or "advance gave up")
                        for e in self._entries(run_id, _ADVANCE_FAILED)}
        else:
            wanted = set(keys)
            found = {key: self.script_exit(run_id, *key) for key in wanted}
            exits = {key: code for key, code in found.items() if code is not None}
            gave_up = {key: self.advance_failure(run_id, *key) for key in wanted}
            failures = {key: text for key, text in gave_up.items() if text is not None}
        succeeded = {key for key in (exits if keys is None else wanted) if self.succeeded(run_id, *key)}
        started = run.get("started")
        from job_chain.chain.progress import RunFacts

        return RunFacts(started=float(started) if isinstance(started, (int, float)) else run_started(run_id),
                        stopped=self.is_stopped(run_id), script_exit=exits, succeeded=succeeded,
                        advance_failed=failures, round=self.round(run_id, run),
                        start_failed=self.start_failure(run_id))

    def clear_advance_failures(self, run_id: str) -> None:
        for entry in self._entries(run_id, _ADVANCE_FAILED):
            try:
                os.unlink(os.path.join(self._dir(run_id), _name("advance-failed", entry["step"], entry["attempt"])))
            except OSError:
                pass

    # -- stopping ----------------------------------------------------------------------------
    def mark_stopped(self, run_id: str) -> None:
        write_json_private(os.path.join(self._dir(run_id), STOPPED_MARKER), {"stopped": time.time()})

    def clear_stopped(self, run_id: str) -> None:
        for name in (STOPPED_MARKER, START_FAILED):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self._dir(run_id), name))

    def is_stopped(self, run_id: str) -> bool:
        return os.path.exists(os.path.join(self._dir(run_id), STOPPED_MARKER))
