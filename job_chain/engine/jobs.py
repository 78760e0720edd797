"""The neutral view of a job that every engine answers with (its error: :mod:`job_chain.engine.errors`).

A :class:`Job` carries what the run library reads of a job — its id, name, status (in
:mod:`job_chain.engine.states`' words), times in the engine's clock, exit code, the run, step and
attempt its labels name, and its pods with rank and phase — so status, causes, joins and the
in-job advance never depend on how an engine spells them. Named tuples, no dataclasses, and no
``from __future__ import annotations``: a named tuple whose annotations are strings compiles each
one (``typing.ForwardRef``), ~0.1 ms a field. Even so, making them costs ~1 ms, so a hop that
only creates a job never imports this module (:mod:`job_chain.aihc.engine` reads it when it reads a job).
"""

from typing import NamedTuple, Optional, Tuple

# the labels job-chain gives every job it creates: which run, step and attempt it is
LABEL_RUN = "job-chain/run"
LABEL_STEP = "job-chain/step"
LABEL_ATTEMPT = "job-chain/attempt"
FAILED_PHASES = frozenset({"Failed", "Unknown"})  # a pod that ended badly, or that the engine lost
# what an engine's own fault tolerance said, in the seam's words (each engine maps its own reasons to these)
RESTARTED = "EngineRestarted"  # the engine restarted the job itself (AIHC's fault tolerance)
HUNG = "EngineHangDetected"  # the engine found the job hung: no pod wrote to its log for its hang-detection time


class Pod(NamedTuple):
    """One replica of a job: ``rank`` 0 is the master (RANK in its environment)."""

    name: str
    rank: int
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    finished: Optional[float] = None  # when it ended (epoch seconds), if it did and the engine says

    @property
    def failed(self) -> bool:
        return self.phase in FAILED_PHASES


class Job(NamedTuple):
    """One job as the run library sees it. Times are epoch seconds in the engine's clock (None:
    not known); ``run_id``/``step``/``attempt`` come from the labels job-chain gave it (None: not
    one of job-chain's)."""

    id: str
    name: str = ""
    status: str = "Unknown"
    created: Optional[float] = None
    running: Optional[float] = None
    finished: Optional[float] = None
    exit_code: Optional[int] = None
    run_id: Optional[str] = None
    step: Optional[str] = None
    attempt: Optional[int] = None
    pods: Tuple[Pod, ...] = ()
    # how many times the engine's own fault tolerance restarted this job (AIHC's ``faultTolerance``):
    # None when this answer does not say (a listed job has no pods) and the engine may restart it;
    # its events say it then (:data:`RESTARTED`)
    restarts: Optional[int] = 0

    @property
    def pod_names(self) -> Tuple[str, ...]:
        return tuple(p.name for p in self.pods)


class Event(NamedTuple):
    """Something the engine said about a job or a pod: ``kind`` its reason word (``JobFailed``,
    ``FailedMount``, …, or :data:`RESTARTED` / :data:`HUNG` for its own fault tolerance),
    ``severity`` ``Normal`` or ``Warning``."""

    kind: str
    severity: str
    message: str
    time: Optional[float] = None
