"""What the Python API hands back about runs: a recorded run, a submitted step, a resume's plan."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from job_chain.errors import JobChainError
from job_chain.record.records import run_start


@dataclass(frozen=True)
class Run:
    """A recorded run: where and how it started, and which revision of its chain it runs."""

    run_id: str
    chain_path: str
    first_step: int
    started: _dt.datetime
    local: bool = False
    endpoint: str = ""
    mode: str = "job"
    local_state_dir: Optional[str] = None  # which local server (its state dir) a local run runs on
    revision: int = 0  # 0: recorded before runs were frozen (its chain is the file as it is now)

    @classmethod
    def from_record(cls, chain_path: str, data: Dict[str, Any]) -> Run:
        revision = data.get("revision")
        return cls(str(data["id"]), chain_path, int(data.get("startStep") or 0),
                   _dt.datetime.fromtimestamp(run_start(data, str(data["id"])) or 0.0, _dt.timezone.utc),
                   bool(data.get("local")), str(data.get("endpoint") or ""), str(data.get("mode") or "job"),
                   data.get("localStateDir") if isinstance(data.get("localStateDir"), str) else None,
                   revision if isinstance(revision, int) else 0)


@dataclass(frozen=True)
class RunSummary:
    """A run as ``runs`` and the console list it, from its summary (:mod:`job_chain.record.summary`)
    or, where that was missing or stale, a look at it. ``outcome`` is ``unknown`` (and ``error`` says
    why) for a run that could not be looked at; ``run`` is None for a damaged record."""

    run_id: str
    run: Optional[Run]
    outcome: str
    reason: str = ""
    current: List[Dict[str, Any]] = field(default_factory=list)  # the steps that matter now (status.summary.steps_json)
    failed: List[Dict[str, Any]] = field(default_factory=list)  # the failed steps, with their causes
    gpu_hours: Optional[float] = None
    lost_gpu_hours: Optional[float] = None
    params: Dict[str, Any] = field(default_factory=dict)
    first_start: Optional[float] = None  # the first attempt's start (or the run's), epoch seconds
    ended: Optional[float] = None  # the last attempt's end; None while anything goes
    error: str = ""
    cached: List[str] = field(default_factory=list)  # steps that reused a cached success (docs/caching.md)
    saved_gpu_hours: Optional[float] = None  # what those saved

    @property
    def started(self) -> Optional[_dt.datetime]:
        return self.run.started if self.run is not None else None

    def duration(self, now: Optional[float] = None) -> Optional[float]:
        """From the first start to the last end (or now, while it goes)."""
        if self.first_start is None:
            return None
        import time

        return max(0.0, (self.ended if self.ended is not None else (now or time.time())) - self.first_start)

    @classmethod
    def of(cls, run_id: str, run: Optional[Run], fields: Dict[str, Any]) -> RunSummary:
        def number(key: str) -> Optional[float]:
            value = fields.get(key)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        def steps(key: str) -> List[Dict[str, Any]]:
            return [s for s in fields.get(key) or [] if isinstance(s, dict)]

        params = fields.get("params")
        return cls(run_id, run, str(fields.get("outcome") or "unknown"), str(fields.get("reason") or ""),
                   steps("current"), steps("failedSteps"), number("gpuHours"), number("lostGpuHours"),
                   dict(params) if isinstance(params, dict) else {}, number("firstStart"), number("ended"),
                   cached=[str(s) for s in fields.get("cached") or []], saved_gpu_hours=number("savedGpuHours"))

    def as_json(self) -> Dict[str, Any]:
        """What ``runs --json`` prints of it."""
        from job_chain.status.types import iso

        run = self.run
        data: Dict[str, Any] = {"run": self.run_id, "started": iso(run.started) if run else None,
                                "local": run.local if run else False,
                                "endpoint": (run.endpoint or None) if run else None}
        if run is not None:
            data.update(mode=run.mode, firstStep=run.first_step, revision=run.revision or None)
        data.update(params=self.params, outcome=self.outcome,
                    reason=(f"cannot read its status: {self.error}" if run is not None else self.error)
                    if self.error else (self.reason or None),
                    current=self.current, failedSteps=self.failed, gpuHours=self.gpu_hours,
                    lostGpuHours=self.lost_gpu_hours, cached=self.cached or None,
                    savedGpuHours=self.saved_gpu_hours)
        return data


@dataclass(frozen=True)
class Submitted:
    """One step a call submitted (or found already submitted, ``created`` False)."""

    run_id: str
    step: str  # the step's name
    attempt: int
    job_id: str
    job_name: str
    created: bool
    index: int = -1  # the step's position in the run's chain (for display)
    cached: bool = False  # it reused a cached success: no job was created (job_id is "")


@dataclass
class ResumePlan:
    """What ``resume`` would do: the difference between the file and the frozen run, applied by
    step name, and the steps it would submit. ``revision`` is the run's revision after it."""

    run_id: str
    revision: int
    changes: List[Any] = field(default_factory=list)  # job_chain.spec.frozen.Change
    targets: List[Tuple[str, int]] = field(default_factory=list)  # (step name, attempt)
    note: str = ""  # e.g. "the chain file is gone: resuming the run as it was frozen"
    waiting: List[Tuple[str, int]] = field(default_factory=list)  # targets that wait for a slot (maxParallel)
    checkpoints: List[Any] = field(default_factory=list)  # job_chain.rules.checkpoint.Seen of steps still to run
    going: bool = False  # the run is going: a resume keeps the changes it can apply, submits and stops nothing

    @property
    def changed(self) -> bool:
        return any(c.applied for c in self.changes)

    def as_json(self) -> Dict[str, Any]:
        return {"run": self.run_id, "revision": self.revision, "changes": [c.as_json() for c in self.changes],
                "submits": [{"step": name, "attempt": attempt} for name, attempt in self.targets],
                "waits": [{"step": name, "attempt": attempt} for name, attempt in self.waiting],
                "note": self.note or None, "going": self.going,
                "checkpoints": [{"step": c.step, "dir": c.dir, "iteration": c.found[0] if c.found else None,
                                 "exists": c.exists} for c in self.checkpoints]}


class SubmitInterrupted(JobChainError):
    """Ctrl-C while a create was in flight: the job may exist; ``hint`` finishes it safely."""

    exit_code = 130
