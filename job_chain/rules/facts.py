"""The neutral facts the rules decide from: what the run record knows of a run's attempts.

The record fills them (:meth:`job_chain.record.records.RunRecords.facts`); a look at the API
adds its own view (:mod:`job_chain.status`). A rule takes these values, never a file or a client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

StepKey = Tuple[str, int]  # (step name, attempt)


@dataclass
class RunFacts:
    """What the run record adds to the API's view (empty for runs recorded elsewhere)."""

    started: Optional[float] = None
    stopped: bool = False
    script_exit: Dict[StepKey, int] = field(default_factory=dict)  # written by each advancing job
    succeeded: Set[StepKey] = field(default_factory=set)  # every replica succeeded (written before advancing)
    advance_failed: Dict[StepKey, str] = field(default_factory=dict)  # (step, attempt) -> why
    round: int = 0  # how many times the run was resumed: exit handlers run once per round
    start_failed: Optional[str] = None  # why the run's first steps could not be submitted
    failures: Dict[StepKey, Any] = field(default_factory=dict)  # why each failed attempt failed (a Failure)
    checkpoints: Dict[StepKey, int] = field(default_factory=dict)  # last complete iteration when it ended
    checkpoint_saved: Dict[StepKey, float] = field(default_factory=dict)  # when that iteration was saved (unix s)
    resumed: Dict[StepKey, Tuple[int, str]] = field(default_factory=dict)  # what a retry was told to resume from
    submitted: Dict[StepKey, float] = field(default_factory=dict)  # when each attempt was submitted (ms)
    ended: Dict[StepKey, float] = field(default_factory=dict)  # when the advance that ended it finished (ms)
    epoch: int = 0  # resume rounds that started steps through slots (maxParallel, maxRunning)
    claimed: Set[str] = field(default_factory=set)  # steps started through a slot in this round
    outputs: Dict[str, Dict[str, str]] = field(default_factory=dict)  # step -> what it wrote to its outputs
    notify_failed: List[str] = field(default_factory=list)  # each notify target that failed, and why (first time)
