"""Calling an engine through its hiccups: the same call again, with a growing pause, until it works,
fails for good, or a deadline passes. What every create, look and wait of a run goes through."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from job_chain.engine.errors import EngineError
from job_chain.util.log import log

_sleep = time.sleep  # (tests replace it)


CALL_DEADLINE = 60.0  # seconds a create of run/resume, and a look of status/runs/logs, keep retrying


def submit_with_deadline(
    submit: Callable[[], Any], deadline: float, sleep: Optional[Callable[[float], None]] = None,
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
        except EngineError as exc:
            if not exc.retryable or time.monotonic() + delay > end:
                raise
            log(f"{exc}; retrying in {delay:.0f}s")
            (sleep or _sleep)(delay)
            delay = min(delay * 2, 30.0)
            if exc.status is None and on_unreachable is not None:
                on_unreachable()
