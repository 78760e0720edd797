"""The replicas of a finishing step: its next step starts only when every replica succeeded."""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional

from job_chain.aihc.engine import as_engine
from job_chain.engine.deadline import submit_with_deadline
from job_chain.engine.errors import EngineError
from job_chain.record.records import RunRecords
from job_chain.spec.model import Chain


def own_rank() -> int:
    """This pod's RANK (0: the master), which AIHC gives every replica. Never its host name: a
    host-network pod (AIHC's default with RDMA) has its node's, and AIHC gives no ``POD_NAME``."""
    try:
        return int(os.environ.get("RANK") or 0)
    except ValueError:
        return 0


def wait_for_peers(client: Any, pool: str, job_id: str, self_rank: int, deadline: float,
                   interval: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> Optional[str]:
    """Wait until every other pod of this job (every rank but ``self_rank``) succeeded; return why
    not, or None when they did.

    RANK 0 may finish before the workers; the next step must not start until they are done.
    """
    engine = as_engine(client)
    end = time.monotonic() + deadline
    while True:
        others = [p for p in engine.job(pool, job_id).pods if p.rank != self_rank]
        failed = [p.name for p in others if p.failed]
        if failed:
            return f"replica {failed[0]} failed"
        if all(p.phase == "Succeeded" for p in others):
            return None
        if time.monotonic() > end:
            return "the other replicas did not finish in time"
        sleep(interval)


def peers_problem(client: Any, chain: Chain, run_id: str, step: str, attempt: int,
                  records: Optional[RunRecords], started: Optional[float], self_rank: int,
                  deadline: float) -> Optional[str]:
    """Why this job's other replicas do not let it advance (None: they all succeeded)."""
    from job_chain.submit.create import find_submitted

    entry = records.submission(run_id, step, attempt) if records else None
    job_id = entry["jobId"] if entry else None
    if not job_id:
        found = find_submitted(client, chain.pool, run_id, step, attempt, started)
        job_id = found.id if found is not None else None
    if not job_id:
        return "cannot find this job to check its other replicas"
    try:
        return submit_with_deadline(lambda: wait_for_peers(client, chain.pool, job_id, self_rank, deadline), deadline)
    except EngineError as exc:
        return f"cannot check the other replicas: {exc}"
