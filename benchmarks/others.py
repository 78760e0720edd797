"""Other users' jobs in a pool: thousands of them, made fast, that never run.

A shared pool holds jobs job-chain did not create, and what a run reads must not grow with
them (issue 22). To measure that, a benchmark fills a pool through the API (real signed creates)
with jobs that cost the machine nothing: they go to a ``parked`` queue of capacity 1 that one
sleeping job holds, so they stay Pending, and each is then stopped (Pending → Stopped at once,
no process) — finished jobs, as most of a real pool's are. The server needs the queue:
``--pool ID --queue default --queue parked:1`` (see :data:`QUEUES`).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, List

import harness

PARKED = "parked"
QUEUES = ["--queue", "default", "--queue", f"{PARKED}:1"]  # with each --pool of the server


def server_options(pools: List[str]) -> List[str]:
    """``local serve`` options declaring ``pools``, each with a default and a parked queue."""
    out: List[str] = []
    for pool in pools:
        out += ["--pool", pool]
    return out + QUEUES


def body(name: str, command: str = "true") -> Dict[str, Any]:
    return {"name": name, "queue": PARKED, "jobSpec": {"command": command, "image": "local", "replicas": 1}}


def park(server: harness.BenchServer, pool: str, timeout: float = 60.0) -> str:
    """Hold ``pool``'s parked queue with one sleeping job (killed with the server's pods); its id."""
    job_id = server.client().create_job(pool, body("parked-holder", "exec sleep 86400"))["jobId"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with server.db() as conn:
            row = conn.execute("SELECT status FROM jobs WHERE id=?", (job_id,)).fetchone()
        if row and row["status"] == "Running":
            return job_id
        time.sleep(0.05)
    raise RuntimeError(f"the parked queue's holder {job_id} did not start within {timeout:.0f}s")


def add(server: harness.BenchServer, pool: str, count: int, workers: int = 4, prefix: str = "other") -> float:
    """Create ``count`` jobs in ``pool``'s parked queue and stop each; the seconds it took.

    ``workers`` threads, each with its own client (signing holds the GIL, the server is another
    process, so a few threads keep it busy). Call :func:`park` for the pool first.
    """
    start = time.monotonic()

    def work(first: int) -> None:
        client = server.client(max_retries=4)
        for index in range(first, count, workers):
            job_id = client.create_job(pool, body(f"{prefix}-{index}"))["jobId"]
            client.stop_job(pool, job_id)

    with ThreadPoolExecutor(max_workers=workers) as pool_of_threads:
        for future in [pool_of_threads.submit(work, w) for w in range(min(workers, count))]:
            future.result()
    return time.monotonic() - start
