"""Submit one step of a run exactly once: deterministic client token, record check, labels."""

from __future__ import annotations

import copy
import json
import os
import zlib
from typing import Any, Dict, List, Mapping, Optional, Tuple

from job_chain.aihc.api import JobsAPI
from job_chain.record.records import RunRecords
from job_chain.spec.model import LABEL_ATTEMPT, LABEL_RUN, LABEL_STEP, Chain, Step
from job_chain.submit.command import step_command

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

    from job_chain.record.outputs import referenced
    from job_chain.spec.frozen import freeze

    keep = [s for s in chain.steps if s.index >= first.index or s.is_handler or chain.graph]
    data: Dict[str, Any] = {"v": 2, "host": host, "chain": os.path.abspath(chain.path),
                            "frozen": freeze(chain, steps=keep), "began": chain.began, "first": chain.first_job}
    used = referenced(chain)
    carried = {n: v for n, v in chain.outputs.items() if n in used}
    if carried:  # the outputs later steps use, as far as this step knows them
        data["outputs"] = carried
    raw = zlib.compress(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), 9)
    text = base64.b64encode(raw).decode("ascii")
    return "\n".join(text[i:i + 76] for i in range(0, len(text), 76))


def decode_snapshot(text: str) -> Chain:
    """Rebuild the run's chain from an inline snapshot."""
    import base64

    from job_chain.errors import UsageError
    from job_chain.spec.frozen import FrozenDamaged, thaw

    try:
        data = json.loads(zlib.decompress(base64.b64decode("".join(text.split()))).decode("utf-8"))
        path = data.get("chain") if isinstance(data.get("chain"), str) else "CHAIN_FILE"
        chain = thaw(data["frozen"], path)
    except (ValueError, KeyError, TypeError, zlib.error, FrozenDamaged) as exc:
        raise UsageError(f"the inline chain snapshot is damaged: {exc}") from None
    if data.get("host"):
        chain.api_config["host"] = data["host"]
    if isinstance(data.get("outputs"), dict):
        chain.outputs = {str(k): dict(v) for k, v in data["outputs"].items() if isinstance(v, dict)}
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


def step_env(run_id: str, step: Step, context: Optional[Dict[str, str]] = None,
             params: Optional[Mapping[str, str]] = None) -> List[Dict[str, str]]:
    """What job-chain tells every step in its environment: the run, the step, the run's parameters,
    a matrix point's values (and an exit handler, the run's end)."""
    from job_chain.spec.params import MATRIX_ENV, PARAM_ENV, env_name

    ours = {"JOB_CHAIN_RUN_ID": run_id, "JOB_CHAIN_STEP": step.name}
    ours.update({env_name(PARAM_ENV, k): v for k, v in (params or {}).items()})
    ours.update({env_name(MATRIX_ENV, k): v for k, v in step.point.items()})
    ours.update(context or {})
    return [{"name": k, "value": v} for k, v in ours.items()]


def build_request(
    chain: Chain, name: str, run_id: str, attempt: int, *, mode: str = "job", host: Optional[str] = None,
    context: Optional[Dict[str, str]] = None, outputs: Optional[Mapping[str, Mapping[str, str]]] = None,
) -> Dict[str, Any]:
    """The create-job body for step ``name``: references replaced, its script wrapped (unless
    ``watch``), labelled.

    ``context``: extra environment for the step (an exit handler learns how the run ended);
    ``outputs``: the outputs of earlier steps its references use (default: those the chain carries).
    Raises :class:`~job_chain.spec.params.MissingOutput` when one is not known.
    """
    from job_chain.spec.params import substitute, value_of_for

    step = chain.named(name)
    if step is None:
        raise KeyError(name)
    script_file = step.script_origin != "inline"
    value_of = value_of_for(chain.params, step.point, chain.outputs if outputs is None else outputs, step.display)
    body = substitute(copy.deepcopy(step.body), value_of, script_file=script_file)
    spec = body["jobSpec"]
    ours = step_env(run_id, step, context, chain.params)
    taken = {e["name"] for e in ours}
    spec["envs"] = [e for e in spec.get("envs") or [] if e.get("name") not in taken] + ours
    if mode != "watch":
        spec["command"] = step_command(
            step.script if script_file else spec["command"], run_id=run_id, step=step.name, attempt=attempt,
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
        outputs_.complete(client, chain, step, run_id, since, records)  # a join's other branches: from logs
    body = build_request(chain, name, run_id, attempt, mode=mode, host=chain.api_config.get("host"), context=context,
                         outputs=outputs_.for_step(chain, step, records, run_id, mode))
    result = client.create_job(chain.pool, body, client_token=client_token(run_id, step, attempt))
    job_id, job_name = result.get("jobId", ""), result.get("jobName") or body["name"]
    if records:
        records.record_submission(run_id, name, attempt, job_id, job_name, chain.revision, resume=resume, mode=mode)
        if mode == "job" and plan:  # what its success submits, for its tail's lean advance
            from job_chain.hop.lean import plan_submitted

            plan_submitted(chain, records, run_id, step, attempt)
    return {"jobId": job_id, "jobName": job_name, "created": "yes"}
