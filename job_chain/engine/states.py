"""job-chain's words for where a job is: still going, succeeded, or ended otherwise.

They are AIHC's own status words (job-chain was born there), and every engine maps its words onto
them (:class:`job_chain.engine.jobs.Job` ``status``). Every status that is not :data:`TERMINAL` is
still going, whatever its name, so a status an engine adds later keeps a step going rather than
ending it. Those known today (:data:`GOING`): seed 001's ``Created`` and ``Pending``, v2's
``Scheduled`` (Baidu's DescribeJobs example), the local server's ``Scheduled``
(``--schedule-delay``) and the stopping states.
"""

from __future__ import annotations

from typing import Optional

CACHED = "Cached"  # job-chain's own: the step reused an earlier run's success, no job ran (docs/caching.md)
SUCCEEDED = frozenset({"Succeeded", "Completed", "Complete", CACHED})
FAILED = frozenset({"Failed", "Error"})
STOPPED = frozenset({"Stopped", "Stopping", "Terminated", "Terminating", "Deleted"})
TERMINAL = SUCCEEDED | FAILED | (STOPPED - {"Stopping", "Terminating"})
GOING = frozenset({"Created", "Pending", "Queueing", "Scheduled", "Running", "Restarting", "Stopping",
                   "Terminating"})


def is_terminal(status: Optional[str]) -> bool:
    return status in TERMINAL


def is_success(status: Optional[str]) -> bool:
    return status in SUCCEEDED
