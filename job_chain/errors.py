"""The one exception family whose messages are written for the user.

The CLI prints ``str(error)`` on one line and exits non-zero; anything else escaping is a bug.
A Python caller catches what failed by name (``RunNotFound``, ``CredentialsMissing``, …) or
everything expected at once with :class:`JobChainError`.
"""

from __future__ import annotations

from typing import List, Sequence


class JobChainError(Exception):
    """An expected failure: bad input, a missing file, an API error. One line, no traceback."""

    exit_code = 1


class UsageError(JobChainError):
    """The user asked for something that cannot work as given (exit code 2, like click)."""

    exit_code = 2


class ChainFileInvalid(UsageError):
    """A chain file that cannot be used: bad JSON, or problems listed by their JSON path."""


class CredentialsMissing(UsageError):
    """No AIHC host or no complete key pair in any of the places credentials come from."""


class RunNotFound(UsageError):
    """A run id that names no run recorded for this chain; ``known`` lists the ones that exist."""

    def __init__(self, message: str, known: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.known: List[str] = list(known)


class RunStillActive(UsageError):
    """The run has a step that is still queued or running, so the action would race with it."""

    def __init__(self, message: str, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class RecordUnwritable(JobChainError):
    """A fact the run's progress depends on (a step's exit, its success marker) could not be written
    to the run record: the disk is full, the storage went read-only. Nothing may be decided then."""


class RunTimeout(JobChainError, TimeoutError):
    """``ChainSession.wait`` gave up before the run ended (the run itself goes on)."""
