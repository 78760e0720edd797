"""The run record kept beside the chain file: one directory per run, one file per fact.

``chain_info.json`` gets ``chain_info.json.runs/<run-id>/`` holding ``run.json`` (where and how
the run started), ``step-0003-attempt-1.json`` per submission, ``exit-0003-attempt-1.json`` per
script exit (written by the advancing job), ``advance-failed-…`` when an advance gave up,
``stopped.json`` and ``attempts.json`` (a cache of finished attempts), each written atomically
with mode 0600. One file per fact means replicas, retries and the local ``run`` never rewrite
each other's files. The API stays the source of truth for job statuses.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import time
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from job_chain.aihc.names import is_job_id
from job_chain.chain.progress import Attempt, RunFacts
from job_chain.errors import RunNotFound, UsageError
from job_chain.files import write_json_private

_SUBMISSION = re.compile(r"step-(\d+)-attempt-(\d+)\.json")
_EXIT = re.compile(r"exit-(\d+)-attempt-(\d+)\.json")
_ADVANCE_FAILED = re.compile(r"advance-failed-(\d+)-attempt-(\d+)\.json")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
STOPPED_MARKER = "stopped.json"
ATTEMPTS_CACHE = "attempts.json"


def new_run_id() -> str:
    """Sortable, label-safe, unique enough: ``20261122-113045-9f3a``."""
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


def _read(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _name(kind: str, step: int, attempt: int) -> str:
    return f"{kind}-{step:04d}-attempt-{attempt}.json"


class RunRecords:
    """Run records for one chain file (``config_path`` in the cluster, the file path locally)."""

    def __init__(self, chain_path: str) -> None:
        self.chain_path = chain_path
        self.root = os.path.abspath(chain_path) + ".runs"

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
        return f"; known runs (newest first): {shown} (job-chain runs {self.chain_path} lists them)"

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, run_id: str, **meta: Any) -> Dict[str, Any]:
        self._check_root()
        run = {"id": run_id, "started": time.time(), **meta}
        os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
        write_json_private(os.path.join(self._dir(run_id), "run.json"), run)
        return run

    def delete_run(self, run_id: str) -> None:
        """Forget a run that never got a job (its first create was refused)."""
        shutil.rmtree(self._dir(run_id), ignore_errors=True)

    def get_run(self, run_id: str) -> Optional[Dict[str, Any]]:
        return _read(os.path.join(self._dir(run_id), "run.json"))

    def require_run(self, run_id: str) -> Dict[str, Any]:
        """The recorded run, or :class:`RunNotFound` listing the runs that exist."""
        run = self.get_run(run_id)
        if run is None:
            raise RunNotFound(f"no run {run_id} of {self.chain_path} is recorded" + self._known_hint(), self.run_ids())
        return run

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
        runs = self.runs()
        return runs[0] if runs else None

    # -- submissions -------------------------------------------------------------------------
    def _write(self, run_id: str, name: str, data: Dict[str, Any]) -> bool:
        """Write one fact; False (not an error) when the record is not writable here (a job's view)."""
        try:
            os.makedirs(self._dir(run_id), mode=0o700, exist_ok=True)
            write_json_private(os.path.join(self._dir(run_id), name), data)
            return True
        except OSError:
            return False

    def record_submission(self, run_id: str, step: int, attempt: int, job_id: str, job_name: str) -> bool:
        """Note a created job; False (not an error) when the record is not writable here."""
        return self._write(run_id, _name("step", step, attempt), {
            "step": step, "attempt": attempt, "jobId": job_id, "jobName": job_name, "submitted": time.time()})

    def submission(self, run_id: str, step: int, attempt: int) -> Optional[Dict[str, Any]]:
        """The recorded submission; None when absent or its job id is not one (a planted file)."""
        entry = _read(os.path.join(self._dir(run_id), _name("step", step, attempt)))
        return entry if entry is not None and is_job_id(entry.get("jobId")) else None

    def submissions(self, run_id: str) -> List[Dict[str, Any]]:
        entries = [e for e in (self._entries(run_id, _SUBMISSION)) if is_job_id(e.get("jobId"))]
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
                entry["step"], entry["attempt"] = int(match.group(1)), int(match.group(2))
                out.append(entry)
        return out

    def first_job_id(self, run_id: str, first_step: int) -> Optional[str]:
        """The run's first job (its first step's first attempt): a job list walked newest first can stop there."""
        entry = self.submission(run_id, first_step, 1)
        return entry.get("jobId") if entry else None

    # -- what only the advancing job knows -----------------------------------------------------
    def record_exit(self, run_id: str, step: int, attempt: int, exit_code: int) -> bool:
        """The user script's own exit code (the job's may differ: 75 when advancing failed)."""
        return self._write(run_id, _name("exit", step, attempt), {"exitCode": exit_code, "at": time.time()})

    def record_succeeded(self, run_id: str, step: int, attempt: int) -> bool:
        """Step ``step`` succeeded (every replica): written before its job looks at the others.

        Two predecessors of a join that finish together each write this first and read the
        other's second, so at least one of them sees both and submits the join.
        """
        return self._write(run_id, _name("succeeded", step, attempt), {"at": time.time()})

    def succeeded(self, run_id: str, step: int, attempt: int) -> bool:
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
        """How many times the run was resumed: exit handlers run once per round."""
        value = (run if run is not None else self.get_run(run_id) or {}).get("round", 0)
        return value if isinstance(value, int) and value >= 0 else 0

    def record_advance_failure(self, run_id: str, step: int, attempt: int, message: str) -> bool:
        return self._write(run_id, _name("advance-failed", step, attempt), {"message": message, "at": time.time()})

    def script_exit(self, run_id: str, step: int, attempt: int) -> Optional[int]:
        entry = _read(os.path.join(self._dir(run_id), _name("exit", step, attempt))) or {}
        code = entry.get("exitCode")
        return code if isinstance(code, int) else None

    def advance_failure(self, run_id: str, step: int, attempt: int) -> Optional[str]:
        entry = _read(os.path.join(self._dir(run_id), _name("advance-failed", step, attempt)))
        return str(entry.get("message") or "advance gave up") if entry is not None else None

    def facts(self, run_id: str, run: Optional[Dict[str, Any]] = None,
              keys: Optional[Iterable[Tuple[int, int]]] = None) -> RunFacts:
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
        return RunFacts(first_step=int(run.get("startStep") or 0),
                        started=float(started) if isinstance(started, (int, float)) else run_started(run_id),
                        stopped=self.is_stopped(run_id), script_exit=exits, succeeded=succeeded,
                        advance_failed=failures, round=self.round(run_id, run))

    def clear_advance_failures(self, run_id: str) -> None:
        for entry in self._entries(run_id, _ADVANCE_FAILED):
            try:
                os.unlink(os.path.join(self._dir(run_id), _name("advance-failed", entry["step"], entry["attempt"])))
            except OSError:
                pass

    # -- the cache of finished attempts --------------------------------------------------------
    def cached_attempts(self, run_id: str) -> Tuple[Dict[str, Attempt], Set[str]]:
        """(the attempts a previous look knew, the ids of those that had finished for good)."""
        data = _read(os.path.join(self._dir(run_id), ATTEMPTS_CACHE)) or {}
        known: Dict[str, Attempt] = {}
        final: Set[str] = set()
        for job_id, item in data.items():
            attempt = Attempt.from_cache(item) if isinstance(item, dict) and is_job_id(job_id) else None
            if attempt is not None and attempt.job_id == job_id:
                known[job_id] = attempt
                if item.get("final") is True:
                    final.add(job_id)
        return known, final

    def save_attempts(self, run_id: str, attempts: Dict[str, Attempt], final: Set[str]) -> None:
        self._write(run_id, ATTEMPTS_CACHE, {job_id: dict(a.to_cache(), final=job_id in final)
                                             for job_id, a in sorted(attempts.items())})

    # -- stopping ----------------------------------------------------------------------------
    def mark_stopped(self, run_id: str) -> None:
        write_json_private(os.path.join(self._dir(run_id), STOPPED_MARKER), {"stopped": time.time()})

    def clear_stopped(self, run_id: str) -> None:
        try:
            os.unlink(os.path.join(self._dir(run_id), STOPPED_MARKER))
        except FileNotFoundError:
            pass

    def is_stopped(self, run_id: str) -> bool:
        return os.path.exists(os.path.join(self._dir(run_id), STOPPED_MARKER))
