"""How an advancing job submits: each create with a deadline of retries through transient API
errors, a split's branches at once, and what is recorded when it gives up."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from job_chain.aihc.errors import AIHCError
from job_chain.errors import JobChainError
from job_chain.spec.model import Step
from job_chain.submit.create import submit_step
from job_chain.util.log import log

DEFAULT_DEADLINE = 600.0  # seconds an advance keeps retrying the API before giving up
EXIT_ADVANCE_FAILED = 75  # EX_TEMPFAIL: the step succeeded, the next one could not be submitted
SUBMIT_WIDTH = 16  # creates in flight at once when a split starts its branches


def submit_with_deadline(
    submit: Callable[[], Any], deadline: float, sleep: Callable[[float], None] = time.sleep,
    on_unreachable: Optional[Callable[[], None]] = None,
) -> Any:
    """Call ``submit`` until it works, a non-retryable error occurs, or ``deadline`` passes.

    ``on_unreachable`` runs after a connection failure, before the next try: the in-job advance
    uses it to re-read where the API is (a restarted local server may listen elsewhere).
    """
    end = time.monotonic() + deadline
    delay = 1.0
    while True:
        try:
            return submit()
        except AIHCError as exc:
            if not exc.retryable or time.monotonic() + delay > end:
                raise
            log(f"{exc}; retrying in {delay:.0f}s")
            sleep(delay)
            delay = min(delay * 2, 30.0)
            if exc.status is None and on_unreachable is not None:
                on_unreachable()


class Submitting:
    """The submitting part of an advancing job's view of its run (mixed into ``advance._Hop``)."""

    # set by the hop
    chain: Any
    client: Any
    run_id: str
    records: Any
    mode: str
    started: Optional[float]
    deadline: float
    reconnect: Optional[Callable[[], Any]]
    resume_hint: str
    error: Optional[BaseException]

    def began(self) -> Optional[float]:
        raise NotImplementedError

    def refresh(self) -> None:
        fresh = self.reconnect() if self.reconnect is not None else None
        if fresh is not None and getattr(fresh, "endpoint", None) != getattr(self.client, "endpoint", None):
            log(f"the API moved to {fresh.endpoint}; using it")
            self.client = fresh

    def slot_submit(self, step: Step, attempt: int, origin: Tuple[str, int]) -> str:
        """Submit a step that took a slot; say whether it was, or how it failed (:func:`slots.fill`)."""
        from job_chain.record import slots

        self.error = None
        if self.submit([(step.name, attempt)], origin, 0) == 0:
            return slots.SUBMITTED
        return slots.NOT_CREATED if slots.not_created(self.error) else slots.UNKNOWN

    def submit(self, targets: List[Tuple[str, int]], origin: Optional[Tuple[str, int]], exit_code: int,
               context: Optional[Dict[str, str]] = None, resume: Optional[Tuple[int, str]] = None) -> int:
        """Submit each (step, attempt) — a split's branches at once, :data:`SUBMIT_WIDTH` at a time, each
        with its own client token and record entry; on giving up, record it and say how to resume.
        ``resume``: the checkpoint a retry resumes from (in its environment and its record)."""
        split = len(targets) > 1

        def one(target: Tuple[str, int]) -> Optional[int]:
            return self._submit_one(target[0], target[1], origin, exit_code, context, resume, plan=not split)

        self.began()  # an inline snapshot tells the steps it starts where the run began

        if split:
            from concurrent.futures import ThreadPoolExecutor

            self._plan_branches(targets)  # before the first branch can end: each one's tail finds its plan
            getattr(self.client, "endpoint", None)  # a lazy client is built once, before threads share it
            with ThreadPoolExecutor(max_workers=min(SUBMIT_WIDTH, len(targets))) as pool:
                codes = list(pool.map(one, targets))
        else:
            codes = [one(target) for target in targets]
        return next((code for code in codes if code is not None), exit_code)

    def _plan_branches(self, targets: List[Tuple[str, int]]) -> None:
        """A split's branches, before any is created: what each one's success starts (their join's
        request is made once for all of them). Planned in the creating threads, the plans slowed
        the creates; planned after them, the first branches often ended before their plans were
        written and took the full advance, each thawing the chain while the others were created.
        A plan of a branch whose create then fails is never followed (its job never runs)."""
        if self.records is None or self.mode != "job":
            return
        from job_chain.submit.plans import plan_submitted

        made: Dict[Tuple[str, int], Any] = {}
        for name, attempt in targets:
            step = self.chain.named(name)
            if step is not None:
                plan_submitted(self.chain, self.records, self.run_id, step, attempt, made)

    def _submit_one(self, target: str, attempt: int, origin: Optional[Tuple[str, int]], exit_code: int,
                    context: Optional[Dict[str, str]], resume: Optional[Tuple[int, str]],
                    plan: bool = True) -> Optional[int]:
        """Submit one step; None when it was, else the exit code the job ends with."""
        try:
            result = submit_with_deadline(
                lambda: submit_step(self.client, self.chain, target, self.run_id, attempt, records=self.records,
                                    mode=self.mode, since=self.started, context=context, resume=resume,
                                    plan=plan),
                self.deadline, on_unreachable=self.refresh,
            )
        except JobChainError as exc:  # the API gave up, no credentials, an output missing (MissingOutput)
            self.error = exc
            message = f"step {target} could not be submitted: {exc}"
            if self.records is not None and origin is not None:
                self.records.record_advance_failure(self.run_id, origin[0], origin[1], message)
            what = "succeeded" if exit_code == 0 else f"failed (exit code {exit_code})"
            log(f"step {origin[0] if origin else '-'} {what}, but {message}. It may have been created all the "
                f"same; continue with '{self.resume_hint}', which submits it with the same client token and "
                "so never creates it twice")
            return exit_code or EXIT_ADVANCE_FAILED
        verb = "submitted" if result["created"] == "yes" else "was already submitted as"
        log(f"step {target} {verb} job {result['jobId']}")
        if self.records is not None and self.records.is_stopped(self.run_id):  # stop raced with this submit
            self.client.stop_job(self.chain.pool, result["jobId"])
            log(f"run {self.run_id} was stopped meanwhile; stopped job {result['jobId']} again")
        return None
