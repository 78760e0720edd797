"""``stop``: no later step starts, every step still going is stopped, and (with handlers or
notifications) the run's ``always`` handlers start once the stopped steps ended. A run that
already ended is never stopped: its outcome never changes."""

from __future__ import annotations

import time
from typing import List, Optional

from job_chain.engine.states import FAILED
from job_chain.errors import UsageError
from job_chain.session.runs import Run
from job_chain.spec.model import Chain
from job_chain.status.types import Outcome, StepStatus


class StopMixin:
    """The stop part of :class:`~job_chain.session.ChainSession`."""

    def stop(self, run_id: Optional[str] = None, *, settle: float = 120.0) -> List[StepStatus]:
        """Stop the run: no later step starts, and each step still going is stopped (returned).

        A run that already ended is refused (:class:`UsageError`): its outcome never changes. With
        ``runOn: always`` handlers or notifications, waits up to ``settle`` seconds for the stopped
        steps to end, then starts the handlers and sends ``stopped``.
        """
        run = self.run(run_id)
        chain = self.frozen(run)
        status = self.status(run.run_id)
        if status.outcome is not Outcome.RUNNING:
            raise UsageError(f"run {run.run_id} already {status.outcome.value}: there is nothing to stop"
                             + (f" ({status.reason})" if status.reason else ""))
        self.records.mark_stopped(run.run_id)
        client = self.client_for(run)
        going = [s for s in self.status(run.run_id).steps if s.active]
        for step in going:
            client.stop_job(chain.pool, step.job_id)
        if chain.handlers or chain.notify:
            self._after_stop(run, chain, settle)
        return going

    def _after_stop(self, run: Run, chain: Chain, settle: float) -> None:
        from job_chain.hop.advance import handler_context
        from job_chain.hop.notify import notify

        end = time.monotonic() + settle
        status = self.status(run.run_id)
        while any(s.active for s in status.steps if not s.is_handler):
            if time.monotonic() > end:
                self.warn(f"the stopped steps of run {run.run_id} did not end within {settle:g}s: its "
                          "runOn: always handlers did not start")
                return
            time.sleep(0.5)
            status = self.status(run.run_id)
        round_ = self.records.round(run.run_id)
        failed = [s.name for s in status.steps if not s.is_handler and s.status in FAILED]
        context = handler_context(chain, run.run_id, "stopped", failed)
        for handler in chain.handlers:
            if handler.run_on == "always":
                self._submit(run, handler.name, round_ + 1, run.mode, context)
        notify(chain, self.records, run.run_id, "stopped", status="stopped", log=self.warn)

