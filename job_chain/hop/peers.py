"""The replicas of a finishing step: its next step starts only when every replica succeeded."""

from __future__ import annotations

import os
import time
from typing import Callable, Optional

from job_chain.aihc.api import JobsAPI
from job_chain.aihc.errors import AIHCError
from job_chain.hop.submitting import submit_with_deadline
from job_chain.record.records import RunRecords
from job_chain.spec.model import Chain


def wait_for_peers(client: JobsAPI, pool: str, job_id: str, self_pod: str, deadline: float,
                   interval: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> Optional[str]:
    """Wait until every other pod of this job succeeded; return why not, or None when they did.

    RANK 0 may finish before the workers; the next step must not start until they are done.
    """
    end = time.monotonic() + deadline
    while True:
        pods = ((client.get_job(pool, job_id).get("podList") or {}).get("pods")) or []
        others = [p for p in pods if (p.get("objectMeta") or {}).get("name") != self_pod]
        phases = {(p.get("objectMeta") or {}).get("name"): (p.get("podStatus") or {}).get("podPhase") for p in others}
        failed = [name for name, phase in phases.items() if phase in ("Failed", "Unknown")]
        if failed:
            return f"replica {failed[0]} failed"
        if all(phase == "Succeeded" for phase in phases.values()):
            return None
        if time.monotonic() > end:
            return "the other replicas did not finish in time"
        sleep(interval)


def peers_problem(client: JobsAPI, chain: Chain, run_id: str, step: str, attempt: int,
                  records: Optional[RunRecords], started: Optional[float], self_pod: str,
                  deadline: float) -> Optional[str]:
    """Why this job's other replicas do not let it advance (None: they all succeeded)."""
    from job_chain.submit.create import find_submitted

    entry = records.submission(run_id, step, attempt) if records else None
    job_id = entry["jobId"] if entry else os.environ.get("AIHC_JOB_ID")  # the platform names the job it runs
    if not job_id:
        job_id = (find_submitted(client, chain.pool, run_id, step, attempt, started) or {}).get("jobId")
    if not job_id:
        return "cannot find this job to check its other replicas"
    try:
        return submit_with_deadline(lambda: wait_for_peers(client, chain.pool, job_id, self_pod, deadline), deadline)
    except AIHCError as exc:
        return f"cannot check the other replicas: {exc}"
