"""The error every engine raises (its own subclass: :class:`job_chain.aihc.errors.AIHCError`, Slurm's).

Apart from :mod:`job_chain.engine.jobs` (the view of a job), so a hop that creates one and reads
none never builds the view's named tuples.
"""

from __future__ import annotations

from typing import Optional

from job_chain.errors import JobChainError


class EngineError(JobChainError):
    """A call to an engine failed: HTTP (or command) status, the engine's error code, message and
    request id when known. ``status`` is None when no answer arrived (refused, timed out)."""

    engine = "engine"

    def __init__(self, message: str, *, status: Optional[int] = None, code: Optional[str] = None,
                 request_id: Optional[str] = None) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        super().__init__(self._render())

    def _render(self) -> str:
        head = f"{self.engine} error"
        if self.status is not None:
            head += f" {self.status}"
        if self.code:
            head += f" {self.code}"
        text = f"{head}: {self.message}"
        if self.request_id:
            text += f" (request id {self.request_id})"
        return text

    @property
    def retryable(self) -> bool:
        """Whether trying the same call again may succeed (hiccups, not mistakes): no answer at all,
        throttling (429) or a server error (5xx)."""
        return self.status is None or self.status == 429 or self.status >= 500
