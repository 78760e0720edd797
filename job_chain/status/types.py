"""Where a run stands, as typed values derived from its jobs (labels, statuses, events).

The facts come from the API, so steps submitted from inside the cluster are seen too; the run
record adds what only the advancing job knows (the script's own exit code, an advance that gave
up). The rules that turn them into a :class:`RunStatus` are in :mod:`job_chain.status.summarize`.
Steps are known by name; their index is the position shown to people.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import MISSING, dataclass, field, fields, replace
from enum import Enum
from functools import lru_cache
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from job_chain.engine.jobs import RESTARTED, Event, Job
from job_chain.engine.states import FAILED, SUCCEEDED, TERMINAL
from job_chain.rules.facts import RunFacts, StepKey  # noqa: F401 - re-exported: what a look returns

NOT_SUBMITTED = "not submitted"
SKIPPED = "skipped"
WAITING = "waiting"  # ready, but its pool (maxParallel, maxRunning) has no free slot yet
# A step that ended this long ago without its successor (or retry) appearing has an advance that
# gave up: the in-job advance retries for 600 s by default (JOB_CHAIN_ADVANCE_DEADLINE).
STALL_AFTER = 600.0 + 120.0
# How far the API's clock may be behind the one that stamped a run's start: job lists are walked
# back this much further than the run's start when no recorded job marks where the run began.
CLOCK_SKEW_ALLOWANCE = 3600.0



class Outcome(str, Enum):
    """A run as a whole. A ``str`` enum: ``status.outcome == "running"`` works."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


def utc(ts: Optional[float]) -> Optional[_dt.datetime]:
    return _utc(ts) if ts is not None else None


@lru_cache(maxsize=65536)  # (a datetime does not change: a run's jobs share the seconds they name)
def _utc(ts: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc)


def iso(when: Optional[_dt.datetime]) -> Optional[str]:
    """ISO-8601 with date and zone (``2026-11-23T08:33:43+00:00``), None when unknown."""
    if when is None:
        return None
    if when.tzinfo is not _dt.timezone.utc:  # (an equal time in another zone is written otherwise)
        return when.isoformat()
    return _iso_utc(when)


@lru_cache(maxsize=65536)
def _iso_utc(when: _dt.datetime) -> str:
    return when.isoformat()


@dataclass(frozen=True)
class Attempt:
    """One job of a run: one attempt of one step (``step`` is the step's name as its job's label says)."""

    step: str
    attempt: int
    job_id: str
    status: str
    started: Optional[_dt.datetime] = None  # when the job was created (AIHC's createdAt)
    finished: Optional[_dt.datetime] = None
    exit_code: Optional[int] = None
    reason: str = ""
    running: Optional[_dt.datetime] = None  # when its pods started running (AIHC's runningAt), if the API says
    # what the run record adds (see outcome.summarize): why it failed, checkpoints, GPU-hours
    failure: Optional[Any] = None  # a job_chain.failures.classify.Failure
    checkpoint_iteration: Optional[int] = None  # the last complete checkpoint when it ended
    resume_from: Optional[Tuple[int, str]] = None  # (iteration, directory) this attempt was told to resume from
    gpu_hours: Optional[float] = None
    cached: Optional[Dict[str, Any]] = None  # a reused success: {"run", "step", "attempt", "key", "savedGpuHours"}
    lost_gpu_hours: Optional[float] = None  # of those, lost (status/cost.lost_hours); 0 unless it failed
    # how many times the engine's own fault tolerance (AIHC's) restarted this attempt's job: the same
    # attempt ran again, no job-chain retry; None while not known (its events are read for it)
    restarts: Optional[int] = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def but(self, **changes: Any) -> Attempt:
        """This attempt with ``changes`` (fields by name): :func:`dataclasses.replace` without running
        ``__init__`` again (no field is checked or worked out there), at a tenth of its cost for the
        5,000 attempts of a look at a long run."""
        if not _ATTEMPT_FIELDS.issuperset(changes):
            unknown = next(name for name in changes if name not in _ATTEMPT_FIELDS)
            raise TypeError(f"Attempt has no field {unknown!r}")
        return _new(self.__dict__, changes)

    def log_pod(self, names: Sequence[str]) -> Optional[str]:
        """The pod a look at this attempt's log opens when none is named: the one its failure's cause
        names (where the evidence is: an OOM on ``train-worker-0``), else the first (the master)."""
        cause = self.failure.pod if self.failure is not None else None
        if cause and cause in names:
            return str(cause)
        return names[0] if names else None

    def as_json(self) -> Dict[str, Any]:
        data = {"attempt": self.attempt, "jobId": self.job_id, "status": self.status, "exitCode": self.exit_code,
                "reason": self.reason or None, "started": iso(self.started), "finished": iso(self.finished),
                "failure": self.failure.as_json() if self.failure is not None else None,
                "gpuHours": _hours(self.gpu_hours)}
        if self.lost_gpu_hours is not None:
            data["lostGpuHours"] = _hours(self.lost_gpu_hours)
        if self.checkpoint_iteration is not None:
            data["checkpointIteration"] = self.checkpoint_iteration
        if self.resume_from is not None:
            data["resumeFrom"] = {"iteration": self.resume_from[0], "checkpoint": self.resume_from[1]}
        if self.cached is not None:
            data["cached"] = self.cached
        if self.restarts:
            data["engineRestarts"] = self.restarts
        return data

    def restarted(self) -> str:
        """``restarted by AIHC ×2`` when AIHC's fault tolerance restarted this attempt's job, else ""."""
        return f"restarted by AIHC ×{self.restarts}" if self.restarts else ""

    def to_cache(self) -> Dict[str, Any]:
        return {"step": self.step, "attempt": self.attempt, "jobId": self.job_id, "status": self.status,
                "exitCode": self.exit_code, "reason": self.reason or None, "started": iso(self.started),
                "finished": iso(self.finished), "runningAt": iso(self.running), "restarts": self.restarts}

    @classmethod
    def from_cache(cls, data: Mapping[str, Any]) -> Optional[Attempt]:
        try:
            return cls(str(data["step"]), int(data["attempt"]), str(data["jobId"]), str(data["status"]),
                       _parse_iso(data.get("started")), _parse_iso(data.get("finished")),
                       None if data.get("exitCode") is None else int(data["exitCode"]), str(data.get("reason") or ""),
                       _parse_iso(data.get("runningAt")),
                       restarts=None if data.get("restarts") is None else int(data["restarts"]))
        except (KeyError, TypeError, ValueError):
            return None


_ATTEMPT_FIELDS = frozenset(f.name for f in fields(Attempt))
_ATTEMPT_DEFAULTS = {f.name: f.default for f in fields(Attempt) if f.default is not MISSING}  # (no factories)


def _made(**values: Any) -> Attempt:
    """``Attempt(**values)`` without the frozen dataclass's ``__init__`` (it checks nothing, and costs a
    tenth of a look at 5,000 jobs): every field not given takes its default."""
    return _new(_ATTEMPT_DEFAULTS, values)


def _new(fields_: Mapping[str, Any], changes: Mapping[str, Any]) -> Attempt:
    """An attempt with ``fields_``, then ``changes``, without ``__init__`` (:func:`_made`, :meth:`Attempt.but`)."""
    made = object.__new__(Attempt)
    made.__dict__.update(fields_)
    made.__dict__.update(changes)
    return made


def _hours(value: Optional[float]) -> Optional[float]:
    return None if value is None else round(value, 4)


def _parse_iso(text: Any) -> Optional[_dt.datetime]:
    if not isinstance(text, str):
        return None
    try:
        return _dt.datetime.fromisoformat(text)
    except ValueError:
        return None


@dataclass
class StepStatus:
    """One step of a run: its latest attempt, and every attempt before it."""

    index: int
    name: str
    status: str = NOT_SUBMITTED
    job_id: str = ""
    attempt: int = 0
    exit_code: Optional[int] = None
    reason: str = ""
    started: Optional[_dt.datetime] = None
    finished: Optional[_dt.datetime] = None
    attempts: List[Attempt] = field(default_factory=list)  # this revision's attempts (see StepStatus.history)
    depends_on: List[int] = field(default_factory=list)
    run_on: Optional[str] = None  # "failure" | "always" for an exit handler
    history: List[Attempt] = field(default_factory=list)  # attempts of an earlier revision (before a --rerun)
    next_attempt: int = 1  # the attempt number the step's next submission gets
    gpu_hours: Optional[float] = None  # over every attempt (this revision's and earlier ones)
    lost_gpu_hours: Optional[float] = None  # of those, in failed attempts
    notes: Dict[int, str] = field(default_factory=dict)  # failed attempt -> what followed, in words
    display: str = ""  # train[lr=1e-4,seed=1] for a matrix point ("" : the name)
    group: str = ""  # the matrix a point belongs to
    point: Dict[str, str] = field(default_factory=dict)  # a point's matrix values
    outputs: Dict[str, str] = field(default_factory=dict)  # what the step wrote to $JOB_CHAIN_OUTPUTS
    removed: str = ""  # a step that left the chain in a later revision, kept as history: why ("removed in …")

    @property
    def label(self) -> str:
        return self.display or self.name

    @property
    def submitted(self) -> bool:
        return bool(self.attempts)

    @property
    def active(self) -> bool:
        return self.status not in TERMINAL and self.status != WAITING and self.submitted

    @property
    def succeeded(self) -> bool:
        return self.status in SUCCEEDED

    def duration(self, now: Optional[float] = None) -> Optional[float]:
        if self.started is None:
            return None
        end = self.finished.timestamp() if self.finished else (time.time() if now is None else now)
        return max(0.0, end - self.started.timestamp())

    @property
    def is_handler(self) -> bool:
        return self.run_on is not None

    @property
    def failure(self) -> Optional[Any]:
        """Why the latest attempt failed (a :class:`~job_chain.failures.classify.Failure`), when known."""
        return self.attempts[-1].failure if self.attempts else None

    def why(self) -> str:
        """Why the step stands where it does, in words: its latest failure's cause, or (while a retry
        runs) what the attempt before it failed of, else AIHC's reason."""
        failure = self.failure
        if failure is not None:
            return failure.summary()
        if self.active:
            earlier = [(a.attempt, a.failure) for a in self.attempts[:-1] if a.failure is not None]
            if earlier:
                return f"after attempt {earlier[-1][0]} failed: {earlier[-1][1].summary()}"
        return self.reason

    def retried(self) -> Optional[str]:
        """What the latest retry was told, in the words of its note (None: the step was not retried)."""
        if not self.notes:
            return None
        earlier = [a.attempt for a in self.attempts[:-1] if a.attempt in self.notes]
        return self.notes[earlier[-1]] if earlier else None

    def what_failed(self) -> str:
        """``train (exit code 1: infra (nccl-watchdog-timeout on pod …))``: how a failed step is named to people."""
        code = f"exit code {self.exit_code}" if self.exit_code is not None else self.status.lower()
        why = self.failure.summary() if self.failure is not None else self.reason
        return f"{self.name} ({code}{': ' + why if why else ''})"

    def as_json(self) -> Dict[str, Any]:
        data = {"step": self.index, "name": self.name, "status": self.status, "jobId": self.job_id or None,
                "attempt": self.attempt or None, "exitCode": self.exit_code, "reason": self.reason or None,
                "started": iso(self.started), "finished": iso(self.finished), "duration": self.duration(),
                "dependsOn": self.depends_on, "runOn": self.run_on, "gpuHours": _hours(self.gpu_hours),
                "lostGpuHours": _hours(self.lost_gpu_hours), "attempts": [a.as_json() for a in self.attempts]}
        if self.notes:  # what followed each failed attempt (a retry names the checkpoint it was told)
            data["notes"] = {str(k): v for k, v in sorted(self.notes.items())}
        if self.history:
            data["earlierAttempts"] = [a.as_json() for a in self.history]
        if self.group:
            data.update(display=self.display, group=self.group, matrix=self.point)
        if self.outputs:
            data["outputs"] = self.outputs
        if self.removed:
            data["removed"] = self.removed
        return data


@dataclass
class RunStatus:
    """A run: every step's status and the run's outcome (with why, when it did not succeed)."""

    run_id: str
    chain_path: str
    outcome: Outcome
    steps: List[StepStatus]
    first_step: int = 0
    started: Optional[_dt.datetime] = None
    reason: str = ""
    local: bool = False
    endpoint: str = ""
    graph: bool = False  # steps wait on named dependencies (or there are exit handlers), not just a line
    revision: int = 0  # the frozen revision the run runs (0: a run recorded before runs were frozen)
    revisions: List[Dict[str, Any]] = field(default_factory=list)  # each revision: number, when, why, changes
    digest: str = ""
    params: Dict[str, str] = field(default_factory=dict)  # the values the run's parameters have
    notify_failed: List[str] = field(default_factory=list)  # each notify target that failed, and why

    def groups(self) -> List[Dict[str, Any]]:
        """Each matrix of the run with its points' counts by status, in order."""
        out: Dict[str, Dict[str, Any]] = {}
        for step in self.steps:
            if step.group:
                group = out.setdefault(step.group, {"name": step.group, "points": 0, "counts": {}, "steps": []})
                group["points"] += 1
                group["counts"][step.status] = group["counts"].get(step.status, 0) + 1
                group["steps"].append(step.index)
        return list(out.values())

    @property
    def failed_steps(self) -> List[StepStatus]:
        """The steps whose failure made the run fail (never an exit handler), in order."""
        if self.outcome is not Outcome.FAILED:
            return []
        return [s for s in self.steps if not s.is_handler and not s.removed and s.status in FAILED]

    @property
    def failed_step(self) -> Optional[StepStatus]:
        """The step whose failure ended the run (None unless the outcome is failed)."""
        failed = self.failed_steps
        return failed[-1] if failed else None

    @property
    def current(self) -> List[StepStatus]:
        """The steps that matter now: the active steps (handlers only when nothing else is going);
        for a failed run the failed steps; else the furthest submitted step."""
        active = [s for s in self.steps if s.active]
        work = [s for s in active if not s.is_handler]
        if work or active:
            return work or active
        if self.failed_steps:
            return self.failed_steps
        submitted = [s for s in self.steps if s.submitted and not s.is_handler]
        return submitted[-1:]

    @property
    def gpu_hours(self) -> float:
        return sum(s.gpu_hours or 0.0 for s in self.steps)

    @property
    def lost_gpu_hours(self) -> float:
        return sum(s.lost_gpu_hours or 0.0 for s in self.steps)

    @property
    def saved_gpu_hours(self) -> float:
        """What steps that reused a cached success saved (the original attempts' hours: docs/caching.md)."""
        return sum((float(a.cached.get("savedGpuHours") or 0.0) for s in self.steps for a in s.attempts if a.cached),
                   0.0)

    def as_json(self) -> Dict[str, Any]:
        return {"run": self.run_id, "chain": self.chain_path, "outcome": self.outcome.value,
                "reason": self.reason or None, "started": iso(self.started), "firstStep": self.first_step,
                "local": self.local, "endpoint": self.endpoint or None, "graph": self.graph,
                "revision": self.revision or None, "digest": self.digest or None,
                "revisions": self.revisions, "params": self.params, "notifyFailed": self.notify_failed,
                "matrices": [{k: g[k] for k in ("name", "points", "counts")} for g in self.groups()],
                "gpuHours": _hours(self.gpu_hours), "lostGpuHours": _hours(self.lost_gpu_hours),
                "savedGpuHours": _hours(self.saved_gpu_hours) or None,
                "failedSteps": [{"step": s.index, "name": s.name, "exitCode": s.exit_code, "reason": s.reason or None,
                                 "failure": s.failure.as_json() if s.failure is not None else None}
                                for s in self.failed_steps],
                "steps": [s.as_json() for s in self.steps]}


def counts_text(counts: Dict[str, int]) -> str:
    """``4 ✓ 2 running 1 failed``: a matrix's points by status."""
    order = [("✓", lambda k: k in SUCCEEDED), ("running", lambda k: k not in TERMINAL and k not in
                                                (WAITING, NOT_SUBMITTED, SKIPPED)),
             ("waiting", lambda k: k == WAITING), ("failed", lambda k: k in FAILED),
             ("stopped", lambda k: k in TERMINAL and k not in SUCCEEDED and k not in FAILED),
             ("skipped", lambda k: k == SKIPPED), ("not submitted", lambda k: k == NOT_SUBMITTED)]
    parts = []
    for word, matches in order:
        n = sum(v for k, v in counts.items() if matches(k))
        if n:
            parts.append(f"{n} {word}")
    return " ".join(parts)


# -- facts from the engine ------------------------------------------------------------------------
def attempt_of(job: Job, run_id: str) -> Optional[Attempt]:
    """The attempt a job is, if its labels name this run (a step and an attempt)."""
    if job.run_id != run_id or not job.step or job.attempt is None:
        return None
    return _made(step=job.step, attempt=job.attempt, job_id=job.id, status=job.status, started=utc(job.created),
                 finished=utc(job.finished), exit_code=job.exit_code, running=utc(job.running), restarts=job.restarts)


_EXIT_CODE = re.compile(r"(?:exited with code|exitCode:)\s*(-?\d{1,4})\b")


def explain(attempt: Attempt, events: Iterable[Event]) -> Attempt:
    """Fill in a failed or stopped attempt's exit code and reason from its job events.

    AIHC tells both only there (seed 001): ``ExitedWithCode`` / ``Error … exitCode: 1`` and
    ``JobFailed … because 1 Master replica(s) failed``.
    """
    exit_code, reason = attempt.exit_code, ""
    warnings = []
    events = list(events)
    for event in events:
        message = event.message
        found = _EXIT_CODE.search(message)
        if found and exit_code is None:
            exit_code = int(found.group(1))
        if event.kind in ("JobFailed", "JobStopped", "FailedMount") and not reason:
            reason = message
        elif event.severity == "Warning" and message and event.kind != RESTARTED:
            warnings.append(message)
    if not reason and warnings:
        reason = warnings[0]
    return replace(attempt, exit_code=exit_code, reason=reason or attempt.reason)


def restarts_from(attempt: Attempt, events: Iterable[Event]) -> Attempt:
    """``attempt`` with how many times the engine restarted its job, counted in its events when its
    job answer did not say (:data:`~job_chain.engine.jobs.RESTARTED`)."""
    counted = sum(1 for e in events if e.kind == RESTARTED)
    return replace(attempt, restarts=max(counted, attempt.restarts or 0))
