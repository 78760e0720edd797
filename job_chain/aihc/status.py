"""What AIHC job statuses mean for a chain: still going, succeeded, or ended otherwise."""

from __future__ import annotations

from typing import Optional

SUCCEEDED = frozenset({"Succeeded", "Completed", "Complete"})
FAILED = frozenset({"Failed", "Error"})
STOPPED = frozenset({"Stopped", "Stopping", "Terminated", "Terminating", "Deleted"})
TERMINAL = SUCCEEDED | FAILED | (STOPPED - {"Stopping", "Terminating"})


def is_terminal(status: Optional[str]) -> bool:
    return status in TERMINAL


def is_success(status: Optional[str]) -> bool:
    return status in SUCCEEDED
