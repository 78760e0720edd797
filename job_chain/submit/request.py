"""A step's create request: its body with references replaced, its script wrapped, its labels, its
environment, and the client token that makes AIHC create it once."""

from __future__ import annotations

import copy
import shlex
from typing import Any, Dict, List, Mapping, Optional

from job_chain.engine.jobs import LABEL_ATTEMPT, LABEL_RUN, LABEL_STEP
from job_chain.spec.model import Chain, Step
from job_chain.submit.command import ended_command, launch, script_runner, step_command
from job_chain.submit.snapshot import encode_snapshot


def client_token(run_id: str, step: Step, attempt: int) -> str:
    """The same (run, step, attempt) always gets the same token, so AIHC creates it once. A step a
    resume changed carries its revision too: the old content's token is never sent with the new."""
    revision = f"-r{step.changed_in}" if step.changed_in > 1 else ""
    return f"jc-{run_id}-{step.name}-{attempt}{revision}"


def _labels(body: Dict[str, Any], run_id: str, step: str, attempt: int) -> List[Dict[str, str]]:
    ours = {LABEL_RUN: run_id, LABEL_STEP: step, LABEL_ATTEMPT: str(attempt)}
    kept = [label for label in body.get("labels") or [] if label.get("key") not in ours]
    return kept + [{"key": k, "value": v} for k, v in ours.items()]


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
    value_of = value_of_for(chain.params, step.point, chain.outputs if outputs is None else outputs, step.display,
                            run_id)
    body = substitute(copy.deepcopy(step.body), value_of, script_file=script_file)
    spec = body["jobSpec"]
    ours = step_env(run_id, step, context, chain.params)
    taken = {e["name"] for e in ours}
    spec["envs"] = [e for e in spec.get("envs") or [] if e.get("name") not in taken] + ours
    runner = script_runner(step.script, step.script_runner) if script_file else "bash"
    if mode == "watch":
        spec["command"] = launch(spec["command"], runner)
    else:
        spec["command"] = step_command(
            step.script if script_file else spec["command"], run_id=run_id, step=step.name, attempt=attempt,
            config_path=chain.cluster_config_path, scrips_path=chain.scrips_path,
            snapshot=encode_snapshot(chain, step, host) if mode == "inline" else None,
            timeout=step.timeout, hang_timeout=step.hang_timeout, runner=runner,
        )
    body["labels"] = _labels(body, run_id, step.name, attempt)
    own = body.pop("slurm", None)
    if chain.engine == "slurm":  # the step's sbatch options: the chain's, its own over them
        from job_chain.slurm.options import merged

        body["slurm"] = merged(chain.slurm, own)
        if mode == "job":  # what a watcher job runs if Slurm ends this one before its tail ran (docs/slurm.md)
            body["slurmEnded"] = ended_command(run_id=run_id, step=step.name, attempt=attempt,
                                               config_path=chain.cluster_config_path, scrips_path=chain.scrips_path)
    return body


def handler_context(chain: Chain, run_id: str, outcome: str, failed: List[str]) -> Dict[str, str]:
    """What an exit handler is told about the run it follows (documented in docs/graphs.md)."""
    return {"JOB_CHAIN_OUTCOME": outcome, "JOB_CHAIN_FAILED_STEPS": ",".join(failed),
            "JOB_CHAIN_STATUS_COMMAND": f"job-chain status {shlex.quote(chain.path)} --run {run_id}"}
