"""The engine seam: what the run library needs from wherever jobs run.

An engine creates a job once per idempotency key, reads one job, lists a pool's jobs newest first,
stops a job, tells a job's events and pages through a pod's log — answering with
:mod:`job_chain.engine.jobs`' neutral view and raising :class:`~job_chain.engine.jobs.EngineError`.
:class:`job_chain.aihc.engine.AIHCEngine` is the AIHC one (v1, v2, the local server). A test can
keep jobs in memory behind the same interface.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Protocol, Tuple

from job_chain.engine.jobs import Event, Job


class Engine(Protocol):
    """Where a run's jobs run."""

    endpoint: str  # where it answers (shown to users; a moved endpoint is noticed by comparing it)
    page_size: int  # jobs() reads the pool this many at a time (a walk decides per page whether to go on)

    def create(self, pool: str, body: Dict[str, Any], key: str) -> Tuple[str, str]:
        """Create a job from a chain step's request ``body``; the same ``key`` never creates a second.
        The job's (id, name)."""

    def job(self, pool: str, job_id: str) -> Job:
        """One job, with its pods."""

    def jobs(self, pool: str, expected: int = 0) -> Iterator[Job]:
        """The pool's jobs, newest first (without pods), page after page: callers stop early.
        ``expected``: how many the caller means to read (a run's jobs by id): an engine may ask for
        that many pages at once (0: a walk that may stop at any page, so one page at a time)."""

    def stop(self, pool: str, job_id: str) -> None:
        """Stop a job (idempotent)."""

    def events(self, pool: str, job_id: str) -> List[Event]:
        """What the engine said about the job: where exit codes and failure reasons are told."""

    def log_page(self, pool: str, job_id: str, pod: str, *, max_lines: Optional[int] = None,
                 marker: Optional[str] = None, **params: Any) -> Tuple[List[str], Optional[str]]:
        """One page of a pod's log: (records, the marker of the next page or None at the end)."""
