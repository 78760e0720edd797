"""Submit one step of a run exactly once: deterministic client token, record check, labels."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from job_chain.aihc.api import JobsAPI
from job_chain.record.records import RunRecords
from job_chain.spec.model import LABEL_ATTEMPT, LABEL_RUN, LABEL_STEP, Chain
from job_chain.submit.request import build_request, client_token

MODES = ("job", "watch", "inline")


def find_submitted(client: JobsAPI, pool: str, run_id: str, step: str, attempt: int,
                   since: Optional[float] = None, began: Optional[float] = None) -> Optional[Dict[str, Any]]:
    """Look for the job of (run, step, attempt) by its labels, newest first: inline runs, no record.

    The walk stops at jobs created before ``began`` (the API's createdAt of the run's first job);
    without it, at jobs older than ``since`` (the run's start by the submitting machine's clock) by
    more than any plausible clock skew between that machine and the API.
    """
    from job_chain.aihc.timefmt import parse_time
    from job_chain.status.types import CLOCK_SKEW_ALLOWANCE

    wanted = {LABEL_RUN: run_id, LABEL_STEP: step, LABEL_ATTEMPT: str(attempt)}
    for job in client.iter_jobs(pool, order_by="createdAt", order="desc"):
        labels = {x.get("key"): x.get("value") for x in job.get("labels") or []}
        if all(labels.get(k) == v for k, v in wanted.items()):
            return job
        created = parse_time(job.get("createdAt"))
        floor = began - 1.0 if began is not None else (since - CLOCK_SKEW_ALLOWANCE if since is not None else None)
        if floor is not None and created is not None and created.timestamp() < floor:
            return None
    return None


def submit_step(
    client: JobsAPI,
    chain: Chain,
    name: str,
    run_id: str,
    attempt: int,
    *,
    records: Optional[RunRecords] = None,
    mode: str = "job",
    since: Optional[float] = None,
    context: Optional[Dict[str, str]] = None,
    resume: Optional[Tuple[int, str]] = None,
    plan: bool = True,
) -> Dict[str, str]:
    """Create step ``name`` once; return ``{"jobId", "jobName", "created": "yes"|"no"}``.

    A step already recorded (or found by its labels) is not created again; the create itself
    carries a deterministic client token, so a retried or repeated call cannot duplicate it.
    ``resume``: (iteration, directory) of the checkpoint it resumes from, told in its environment
    (``JOB_CHAIN_RESUME_ITERATION``/``JOB_CHAIN_RESUME_CHECKPOINT``) and kept in its record.
    ``plan``: write what its success starts (:mod:`~job_chain.hop.lean`); a split plans its
    branches before it creates them (:meth:`~job_chain.hop.submitting.Submitting.submit`).
    """
    recorded = records.submission(run_id, name, attempt) if records else None
    if recorded:
        return {"jobId": recorded["jobId"], "jobName": recorded.get("jobName", ""), "created": "no"}
    if records is None:
        found = find_submitted(client, chain.pool, run_id, name, attempt, since, chain.began)
        if found:
            return {"jobId": found.get("jobId", ""), "jobName": found.get("name", ""), "created": "no"}
    from job_chain.record import outputs as outputs_

    step = chain.named(name)
    if step is None:
        raise KeyError(name)
    if resume is not None:
        from job_chain.rules.checkpoint import resume_env

        context = {**(context or {}), **resume_env(resume)}
    if mode == "inline" and outputs_.referenced(chain):
        from job_chain.status.logged_outputs import complete

        complete(client, chain, step, run_id, since, records)  # a join's other branches: from logs
    body = build_request(chain, name, run_id, attempt, mode=mode, host=chain.api_config.get("host"), context=context,
                         outputs=outputs_.for_step(chain, step, records, run_id, mode))
    result = client.create_job(chain.pool, body, client_token=client_token(run_id, step, attempt))
    job_id, job_name = result.get("jobId", ""), result.get("jobName") or body["name"]
    if records:
        records.record_submission(run_id, name, attempt, job_id, job_name, chain.revision, resume=resume, mode=mode)
        if mode == "job" and plan:  # what its success submits, for its tail's lean advance
            from job_chain.submit.plans import plan_submitted

            plan_submitted(chain, records, run_id, step, attempt)
    return {"jobId": job_id, "jobName": job_name, "created": "yes"}
