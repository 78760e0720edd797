"""How long an advancing job keeps trying the engine, and the exit codes it ends with."""

from __future__ import annotations

DEFAULT_DEADLINE = 600.0  # seconds an advance keeps retrying the API before giving up
EXIT_ADVANCE_FAILED = 75  # EX_TEMPFAIL: the step succeeded, the next one could not be submitted
SUBMIT_WIDTH = 16  # creates in flight at once when a split starts its branches
