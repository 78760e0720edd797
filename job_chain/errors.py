"""The one exception family whose messages are written for the user.

The CLI prints ``str(error)`` on one line and exits non-zero; anything else escaping is a bug.
"""

from __future__ import annotations


class JobChainError(Exception):
    """An expected failure: bad input, a missing file, an API error. One line, no traceback."""

    exit_code = 1


class UsageError(JobChainError):
    """The user asked for something that cannot work as given (exit code 2, like click)."""

    exit_code = 2
