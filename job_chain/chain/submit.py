"""Submit one step of a run exactly once: deterministic client token, record check, labels."""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Dict, List, Optional

from job_chain.aihc.api import JobsAPI
from job_chain.chain.command import step_command
from job_chain.chain.model import LABEL_ATTEMPT, LABEL_RUN, LABEL_STEP, Chain, Step
from job_chain.chain.record import RunRecords

MODES = ("job", "watch", "inline")


def client_token(run_id: str, step: Step, attempt: int) -> str:
    """The same (run, step, attempt) always gets the same token, so AIHC creates it once. A step a
    resume changed carries its revision too: the old content's token is never sent with the new."""
    revision = f"-r{step.changed_in}" if step.changed_in > 1 else ""
    return f"jc-{run_id}-{step.name}-{attempt}{revision}"


def _labels(body: Dict[str, Any], run_id: str, step: str, attempt: int) -> List[Dict[str, str]]:
    ours = {LABEL_RUN: run_id, LABEL_STEP: step, LABEL_ATTEMPT: str(attempt)}
    kept = [label for label in body.get("labels") or [] if label.get("key") not in ours]
    return kept + [{"key": k, "value": v} for k, v in ours.items()]


def encode_snapshot(chain: Chain, first: Step, host: Optional[str]) -> str:
    """A compressed, secret-free copy of the run's chain for ``--inline`` runs: the frozen form,
    without the steps of a line that are already behind ``first``."""
    import base64
    import zlib

    from job_chain.chain.frozen import freeze

    keep = [s for s in chain.steps if s.index >= first.index or s.is_handler or chain.graph]
    data = {"v": 2, "host": host, "chain": os.path.abspath(chain.path), "frozen": freeze(chain, steps=keep),
            "began": chain.began, "first": chain.first_job}
    raw = zlib.compress(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), 9)
    text = base64.b64encode(raw).decode("ascii")
    return "\n".join(text[i:i + 76] for i in range(0, len(text), 76))


def decode_snapshot(text: str) -> Chain:
    """Rebuild the run's chain from an inline snapshot."""
    import base64
    import zlib

    from job_chain.chain.frozen import FrozenDamaged, thaw
    from job_chain.errors import UsageError

    try:
        data = json.loads(zlib.decompress(base64.b64decode("".join(text.split()))).decode("utf-8"))
        path = data.get("chain") if isinstance(data.get("chain"), str) else "CHAIN_FILE"
        chain = thaw(data["frozen"], path)
    except (ValueError, KeyError, TypeError, zlib.error, FrozenDamaged) as exc:
        raise UsageError(f"the inline chain snapshot is damaged: {exc}") from None
    if data.get("host"):
        chain.api_config["host"] = data["host"]
    chain.began = float(data["began"]) if isinstance(data.get("began"), (int, float)) else None
    chain.first_job = data.get("first") is True
    return chain


def inline_origin(chain: Chain, client: JobsAPI, first_job_id: Optional[str]) -> None:
    """Before an inline submission: what its snapshot says about where the run began, in the API's
    clock (the createdAt of the run's first job), so its pool walks never trust this machine's
    clock (issue 18, item 8). Without a first job yet, the snapshot says it is the first."""
    from job_chain.aihc.errors import AIHCError
    from job_chain.aihc.timefmt import parse_time

    chain.first_job = first_job_id is None
    if first_job_id is None or chain.began is not None:
        return
    try:
        created = parse_time(client.get_job(chain.pool, first_job_id).get("createdAt"))
    except AIHCError:
        return  # the walk falls back to the run id's time, an hour of skew allowed
    chain.began = created.timestamp() if created is not None else None


def step_env(run_id: str, step: Step, context: Optional[Dict[str, str]] = None) -> List[Dict[str, str]]:
    """What job-chain tells every step in its environment (and an exit handler, the run's end)."""
    ours = {"JOB_CHAIN_RUN_ID": run_id, "JOB_CHAIN_STEP": step.name, **(context or {})}
    return [{"name": k, "value": v} for k, v in ours.items()]


def build_request(
    chain: Chain, name: str, run_id: str, attempt: int, *, mode: str = "job", host: Optional[str] = None,
    context: Optional[Dict[str, str]] = None,
) -> Dict[str, Any]:
    """The create-job body for step ``name``: its script wrapped (unless ``watch``), labelled.

    ``context``: extra environment for the step (an exit handler learns how the run ended).
    """
    step = chain.named(name)
    if step is None:
        raise KeyError(name)
    body = copy.deepcopy(step.body)
    spec = body["jobSpec"]
    ours = step_env(run_id, step, context)
    taken = {e["name"] for e in ours}
    spec["envs"] = [e for e in spec.get("envs") or [] if e.get("name") not in taken] + ours
    if mode != "watch":
        spec["command"] = step_command(
            step.script, run_id=run_id, step=step.name, attempt=attempt,
            config_path=chain.cluster_config_path, scrips_path=chain.scrips_path,
            snapshot=encode_snapshot(chain, step, host) if mode == "inline" else None,
            timeout=step.timeout, hang_timeout=step.hang_timeout,
        )
    body["labels"] = _labels(body, run_id, step.name, attempt)
    return body


def find_submitted(client: JobsAPI, pool: str, run_id: str, step: str, attempt: int,
                   since: Optional[float] = None, began: Optional[float] = None) -> Optional[Dict[str, Any]]:
    """Look for the job of (run, step, attempt) by its labels, newest first: inline runs, no record.

    The walk stops at jobs created before ``began`` (the API's createdAt of the run's first job);
    without it, at jobs older than ``since`` (the run's start by the submitting machine's clock) by
    more than any plausible clock skew between that machine and the API.
    """
    from job_chain.aihc.timefmt import parse_time
    from job_chain.chain.progress import CLOCK_SKEW_ALLOWANCE

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
) -> Dict[str, str]:
    """Create step ``name`` once; return ``{"jobId", "jobName", "created": "yes"|"no"}``.

    A step already recorded (or found by its labels) is not created again; the create itself
    carries a deterministic client token, so a retried or repeated call cannot duplicate it.
    """
    recorded = records.submission(run_id, name, attempt) if records else None
    if recorded:
        return {"jobId": recorded["jobId"], "jobName": recorded.get("jobName", ""), "created": "no"}
    if records is None:
        found = find_submitted(client, chain.pool, run_id, name, attempt, since, chain.began)
        if found:
            return {"jobId": found.get("jobId", ""), "jobName": found.get("name", ""), "created": "no"}
    step = chain.named(name)
    if step is None:
        raise KeyError(name)
    body = build_request(chain, name, run_id, attempt, mode=mode, host=chain.api_config.get("host"), context=context)
    result = client.create_job(chain.pool, body, client_token=client_token(run_id, step, attempt))
    job_id, job_name = result.get("jobId", ""), result.get("jobName") or body["name"]
    if records:
        records.record_submission(run_id, name, attempt, job_id, job_name, mode=mode)
    return {"jobId": job_id, "jobName": job_name, "created": "yes"}
