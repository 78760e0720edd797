"""What the run record knows about one attempt beyond its job: facts only the advancing job has.

``exit-<step>-attempt-N.json``: the script's own exit code, the last complete checkpoint when it
ended, and when the advance that ended the job finished. ``succeeded-…``: every replica
succeeded. ``advance-failed-…``: the advance gave up. ``failure-…``: why the attempt failed —
written once, by whoever classified it first (the advancing job, or ``status`` for a run whose
job could not), so every later reader agrees with the decision that was taken.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Tuple

from job_chain.util.files import create_private, read_json_dict

if TYPE_CHECKING:  # a job advancing a chain reads the record without the status types
    from job_chain.rules.facts import RunFacts

# a step is named by its AIHC job name (or, in runs recorded before names, its index)
STEP_PATTERN = r"([a-z0-9][-a-z0-9]{0,62})"
_EXIT = re.compile(rf"exit-{STEP_PATTERN}-attempt-(\d+)\.json")
_ADVANCE_FAILED = re.compile(rf"advance-failed-{STEP_PATTERN}-attempt-(\d+)\.json")

Key = Tuple[str, int]


def fact_name(kind: str, step: str, attempt: int) -> str:
    return f"{kind}-{step}-attempt-{attempt}.json"


def run_started(run_id: str) -> Optional[float]:
    """When a run began (unix seconds), read from its id; None for an id not made by new_run_id.

    Inline runs have no record to ask, and a job list is only walked back to the run's start.
    """
    import calendar

    try:
        return float(calendar.timegm(time.strptime(run_id[:15], "%Y%m%d-%H%M%S")))
    except ValueError:
        return None


class AttemptRecords:
    """The per-attempt part of :class:`~job_chain.record.records.RunRecords`."""

    def _dir(self, run_id: str) -> str:
        raise NotImplementedError

    def _write(self, run_id: str, name: str, data: Dict[str, Any]) -> bool:
        raise NotImplementedError

    def _entries(self, run_id: str, pattern: Any) -> Any:
        raise NotImplementedError

    def _path(self, run_id: str, kind: str, step: str, attempt: int) -> str:
        return os.path.join(self._dir(run_id), fact_name(kind, step, attempt))

    # -- the script's exit ---------------------------------------------------------------------
    def record_exit(self, run_id: str, step: str, attempt: int, exit_code: int,
                    checkpoint_iteration: Optional[int] = None) -> bool:
        """The user script's own exit code (the job's may differ: 75 when advancing failed)."""
        entry: Dict[str, Any] = {"exitCode": exit_code, "at": time.time()}
        if checkpoint_iteration is not None:
            entry["checkpointIteration"] = checkpoint_iteration
        return self._write(run_id, fact_name("exit", step, attempt), entry)

    def record_advance_end(self, run_id: str, step: str, attempt: int, planned: bool = False) -> bool:
        """When the advance that ends this job finished: the job's end, to the millisecond (GPU-hours);
        ``planned``: it followed the plan made when the job was submitted (:mod:`~job_chain.hop.lean`)."""
        entry = self.exit_entry(run_id, step, attempt)
        if entry is None:
            return False
        entry["ended"] = time.time()
        if planned:
            entry["planned"] = True
        return self._write(run_id, fact_name("exit", step, attempt), entry)

    def exit_entry(self, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
        return read_json_dict(self._path(run_id, "exit", step, attempt))

    def script_exit(self, run_id: str, step: str, attempt: int) -> Optional[int]:
        code = (self.exit_entry(run_id, step, attempt) or {}).get("exitCode")
        return code if isinstance(code, int) and not isinstance(code, bool) else None

    # -- succeeded, gave up --------------------------------------------------------------------------
    def record_succeeded(self, run_id: str, step: str, attempt: int) -> bool:
        """Step ``step`` succeeded (every replica): written before its job looks at the others.

        Two predecessors of a join that finish together each write this first and read the
        other's second, so at least one of them sees both and submits the join.
        """
        return self._write(run_id, fact_name("succeeded", step, attempt), {"at": time.time()})

    def succeeded(self, run_id: str, step: str, attempt: int) -> bool:
        return os.path.exists(self._path(run_id, "succeeded", step, attempt))

    def record_advance_failure(self, run_id: str, step: str, attempt: int, message: str) -> bool:
        return self._write(run_id, fact_name("advance-failed", step, attempt), {"message": message, "at": time.time()})

    def advance_failure(self, run_id: str, step: str, attempt: int) -> Optional[str]:
        entry = read_json_dict(self._path(run_id, "advance-failed", step, attempt))
        return str(entry.get("message") or "advance gave up") if entry is not None else None

    def clear_advance_failures(self, run_id: str) -> None:
        for entry in self._entries(run_id, _ADVANCE_FAILED):
            try:
                os.unlink(self._path(run_id, "advance-failed", entry["step"], entry["attempt"]))
            except OSError:
                pass

    # -- why it failed ---------------------------------------------------------------------------
    def record_failure(self, run_id: str, step: str, attempt: int, data: Dict[str, Any]) -> Dict[str, Any]:
        """Keep why ``attempt`` failed unless someone already did; return what is kept (theirs, if first).

        Written beside, then linked into place: the link fails when the file exists, so two
        replicas (or a replica and ``status``) never keep different causes. Not writable here:
        ``data`` itself.
        """
        path = self._path(run_id, "failure", step, attempt)
        existing = read_json_dict(path)
        if existing is not None:
            return existing
        try:
            create_private(path, json.dumps(dict(data, at=time.time()), indent=2) + "\n")  # \u escapes: any text
        except OSError:
            return data
        return read_json_dict(path) or data

    def failure(self, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
        return read_json_dict(self._path(run_id, "failure", step, attempt))

    # -- everything at once ------------------------------------------------------------------------
    def attempt_facts(self, run_id: str, facts: RunFacts, keys: Iterable[Key]) -> None:
        """Add to ``facts`` what the record knows about each (step, attempt) of ``keys``: its exit
        code, whether it succeeded, why an advance gave up, why it failed, its checkpoint, its end."""
        from job_chain.failures.classify import Failure

        for key in set(keys):
            entry = self.exit_entry(run_id, *key)
            if entry is not None:
                code, iteration, ended = entry.get("exitCode"), entry.get("checkpointIteration"), entry.get("ended")
                if isinstance(code, int) and not isinstance(code, bool):
                    facts.script_exit[key] = code
                if isinstance(iteration, int) and not isinstance(iteration, bool):
                    facts.checkpoints[key] = iteration
                if isinstance(ended, (int, float)) and not isinstance(ended, bool):
                    facts.ended[key] = float(ended)
            if self.succeeded(run_id, *key):
                facts.succeeded.add(key)
            gave_up = self.advance_failure(run_id, *key)
            if gave_up is not None:
                facts.advance_failed[key] = gave_up
            failure = Failure.from_record(self.failure(run_id, *key))
            if failure is not None:
                facts.failures[key] = failure

    def all_exits(self, run_id: str, facts: RunFacts) -> None:
        """Every exit code and gave-up message of the run (when no keys are given)."""
        for e in self._entries(run_id, _EXIT):
            if isinstance(e.get("exitCode"), int):
                facts.script_exit[(e["step"], e["attempt"])] = int(e["exitCode"])
        for e in self._entries(run_id, _ADVANCE_FAILED):
            facts.advance_failed[(e["step"], e["attempt"])] = str(e.get("message") or "advance gave up")
        facts.succeeded |= {key for key in facts.script_exit if self.succeeded(run_id, *key)}
