"""Watching a run: its status as it changes, waiting for its end, and ``--advance watch``, where
this process does what each job's tail would have done."""

from __future__ import annotations

import shlex
import time
from typing import Any, Callable, Iterator, Optional, Set, Tuple

from job_chain.engine.states import FAILED, SUCCEEDED
from job_chain.errors import JobChainError, RunTimeout
from job_chain.session.runs import Run
from job_chain.status.types import Outcome, RunStatus


class WatchMixin:
    """The watch/wait part of :class:`~job_chain.session.ChainSession`."""

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
        from job_chain.hop.advance import advance
        from job_chain.record import slots

        acted = False
        chain = self.frozen(run)
        capped = slots.capped(chain)  # a later step running says nothing about who handed a slot on
        submitted = {s.name: s.submitted for s in status.steps}
        for step in status.steps:
            key = (step.index, step.attempt, step.status)
            if key in handled or not step.submitted or step.status not in SUCCEEDED | FAILED:
                continue
            handled.add(key)
            # a step whose dependents all exist was advanced before (a restarted watcher, a line);
            # a sibling being submitted says nothing about it (a join waits for this one too)
            waiting = chain.dependents(step.index)
            if step.succeeded and waiting and all(submitted.get(d.name) for d in waiting) and not capped:
                continue
            exit_code = 0 if step.succeeded else (step.exit_code or 1)
            advance(chain, self.client_for(run), run_id=run.run_id, step=step.name,
                    attempt=step.attempt, exit_code=exit_code, records=self.records,
                    resume_hint=f"job-chain resume {shlex.quote(self.path)} --run {run.run_id} --advance watch",
                    mode="watch")
            acted = True
        return acted

