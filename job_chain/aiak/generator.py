"""Turn a short AIAK description into a chain: convert → preprocess → train (→ evaluate → report).

Stable contract (the CLI, the examples and the integration tests rely on it):

- ``TRAINING_PHASE`` pretrain or sft: exactly three jobs, in this order, named
  ``make_job_name(f"{phase}-{model}-{step}-{version}")`` with step ``convert``, ``preprocess``,
  ``train`` (e.g. ``pretrain-llama2-7b-convert-luyc-v4``).
- ``pretrain+sft``: five jobs, convert → preprocess → train of the pretrain phase, then
  preprocess (the SFT data, ``SFT_DATASET_NAME``) → train of the sft phase, which fine-tunes the
  pretrained checkpoint (same TP/PP/EP). Each job is named after its own phase.
- ``EVAL`` (a list of benchmark names): after those jobs, one ``eval`` job
  (``{phase}-{model}-eval-{version}``, phase of the last training) that depends on the last
  training and is a matrix over the benchmarks, ``"matrix": {"benchmark": EVAL}`` (one point
  per benchmark, each named ``…-eval-{version}-benchmark-{benchmark}``; with ``EVAL_PARALLEL``
  also ``"maxParallel"``), and a ``report`` job that depends on it, so on every point. Then
  every job names its predecessor in ``jobChain.dependsOn``. Without ``EVAL`` the chain is a
  line without ``dependsOn``, as before.
- Job ``i``'s ``jobSpec.command`` is exactly the file name of its step script,
  ``SCRIPT_NAMES[step]``: ``aiak_convert.sh``, ``aiak_preprocess.sh``, ``aiak_train.sh`` (with
  ``EVAL`` also ``EVAL_SCRIPT_NAMES``: ``aiak_eval.sh``, ``aiak_report.sh``). The
  scripts are written beside the chain file (``job-chain run`` resolves a ``*.sh`` command
  relative to the chain file and inlines it), so a test may replace them with stand-ins.
- Every parameter a step needs is one of that job's ``jobSpec.envs`` (names listed in
  ``STEP_ENV_NAMES``; values are strings). Credentials never are: the template's api_config stays
  a top-level setting of the chain file, and secret-looking envs of the template are dropped.
- Data jobs (convert, preprocess, report) ask for CPUs, training and evaluation for GPUs
  (:mod:`job_chain.aiak.resources`).
- Every generated job carries ``"jobChain": {"generatedBy": "aiak-gen"}`` (stripped before
  submission), so a later aiak-gen run may replace the jobs without ``--force``.

The parts live in their own modules: the description (:mod:`.description`), AIAK's layout and
what a model row must give (:mod:`.layout`), the steps and their folders (:mod:`.plan`), the
template chain (:mod:`.template`), resources (:mod:`.resources`); this module assembles jobs.
"""

from __future__ import annotations

import copy
import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple, Union

from job_chain.aiak import layout, tables
from job_chain.aiak.description import EVAL_KEYS, OPTIONAL, PHASES, PRETRAIN_SFT_KEYS, REQUIRED, AiakSpec, parse_spec
from job_chain.aiak.plan import EVAL_MATRIX, STEP_ENV_NAMES, Step, indexed_data_path, plan_steps
from job_chain.aiak.resources import step_resources
from job_chain.aiak.template import DEFAULT_MOUNT, JobDefaults, job_defaults
from job_chain.aihc.names import make_job_name
from job_chain.aihc.spec import PRIORITIES
from job_chain.errors import UsageError
from job_chain.spec.loader import ChainFileError, check_chain_data

GENERATED_BY = "aiak-gen"
STEPS = ("convert", "preprocess", "train")
# a training step's retries per failure cause: the platform's failures again, a hang once, never
# its own errors, running out of memory or its timeout (those fail the same way again)
TRAIN_RETRIES = {"infra": 3, "hang": 1, "oom": 0, "timeout": 0, "user": 0}
SCRIPT_NAMES: Dict[str, str] = {
    "convert": "aiak_convert.sh",
    "preprocess": "aiak_preprocess.sh",
    "train": "aiak_train.sh",
}
EVAL_SCRIPT_NAMES: Dict[str, str] = {"eval": "aiak_eval.sh", "report": "aiak_report.sh"}
SCRIPT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
AIAK_ROOT = layout.AIAK_ROOT


def _depends_on(steps: List[Step], names: List[str]) -> List[List[str]]:
    """Each job's dependencies by name: with EVAL every job names its predecessor (the report's is
    the eval matrix, so it waits for every point); without, none, exactly as before EVAL."""
    if not any(step.kind == "eval" for step in steps):
        return [[] for _ in steps]
    return [[names[i - 1]] if i else [] for i in range(len(steps))]


def eval_settings(spec: AiakSpec) -> Dict[str, Any]:
    """The ``jobChain`` settings of the eval job: a matrix with one point per benchmark, and
    ``maxParallel`` when EVAL_PARALLEL caps how many are evaluated at once (default: all)."""
    settings: Dict[str, Any] = {"matrix": {EVAL_MATRIX: list(spec.evals)}}
    if spec.options["EVAL_PARALLEL"]:
        settings["maxParallel"] = spec.options["EVAL_PARALLEL"]
    return settings


def training_settings(spec: AiakSpec, step: Step) -> Dict[str, Any]:
    """The ``jobChain`` settings only a training job gets: retries per failure cause, and the
    Megatron checkpoint directory (``SAVE``), so a retry after an infra failure resumes there."""
    settings: Dict[str, Any] = {"retries": dict(TRAIN_RETRIES)}
    save = step.env("SAVE") or ""
    if save.startswith("/"):  # (a relative mount is refused elsewhere, for itself)
        settings["checkpoint"] = {"dir": save}
    return settings


def cache_settings(step: Step) -> Dict[str, Any]:
    """Converting and tokenizing are cached across runs (docs/caching.md): a later run with the same
    inputs reuses the success instead of starting a job, as long as what the step made is still
    there — the done marker its script writes last (``.aiak-gen-done``, which also names the
    inputs). No marker (moved away, never finished): the step runs, and its script decides."""
    if step.kind == "convert":
        made = f"{step.env('SAVE')}/.aiak-gen-done"
    elif step.env("OUTPUT_PREFIX"):  # pretraining data: Megatron's indexed files under this prefix
        made = f"{step.env('OUTPUT_PREFIX')}.aiak-gen-done"
    else:  # a tokenized SFT dataset directory
        made = f"{step.env('DATA_PATH')}.aiak-gen-done"
    return {"cache": {"paths": [made]}} if made.startswith("/") else {}


def job_settings(spec: AiakSpec, step: Step, depends_on: List[str]) -> Dict[str, Any]:
    """A generated job's ``jobChain``: its origin, its dependencies, and per-kind settings."""
    settings: Dict[str, Any] = {"generatedBy": GENERATED_BY}
    if depends_on:
        settings["dependsOn"] = depends_on
    if step.kind == "train":
        settings.update(training_settings(spec, step))
    elif step.kind == "eval":
        settings.update(eval_settings(spec))
    elif step.kind in ("convert", "preprocess"):
        settings.update(cache_settings(step))
    return settings


def is_generated(chain: Dict[str, Any]) -> bool:
    """True when every job of an existing chain came from aiak-gen (safe to replace)."""
    jobs = chain.get("jobs", [])
    return isinstance(jobs, list) and all(
        isinstance(job, dict) and isinstance(job.get("jobChain"), dict)
        and job["jobChain"].get("generatedBy") == GENERATED_BY for job in jobs)


def _job(spec: AiakSpec, step: Step, name: str, depends_on: List[str], shared: JobDefaults) -> Dict[str, Any]:
    resources, rdma = step_resources(step.kind, spec.options)
    job: Dict[str, Any] = {
        "name": name,
        "queue": shared.queue,
        "priority": shared.priority,
        "jobFramework": "PyTorchJob",
        "jobSpec": {
            "command": {**SCRIPT_NAMES, **EVAL_SCRIPT_NAMES}[step.kind],
            "image": spec.image,
            # converting and tokenizing are single-node work; only training scales out
            "replicas": spec.replicas if step.kind == "train" else 1,
            "resources": resources,
            "enableRDMA": rdma,
            # the description's install paths replace the template's
            "envs": [e for e in copy.deepcopy(shared.envs) if step.env(e["name"]) is None] + step.envs,
        },
        "datasources": copy.deepcopy(shared.datasources),
    }
    if shared.labels:
        job["labels"] = copy.deepcopy(shared.labels)
    job["jobChain"] = job_settings(spec, step, depends_on)
    return job


def generate_chain(
    spec: Union[AiakSpec, Dict[str, Any]],
    template: Optional[Dict[str, Any]] = None,
    *,
    pool: Optional[str] = None,
    pfs: Optional[str] = None,
    mount_path: Optional[str] = None,
    spec_source: str = "aiak_job_info.json",
    template_source: str = "chain file",
    known_tables: Optional[tables.Tables] = None,
    chain_path: Optional[str] = None,
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """Return the chain and its step scripts ``{file name: text}``; nothing is written.

    ``template`` is an existing chain: everything but its ``jobs`` is kept as is (pool, api
    settings, ...), and its first job lends datasources, labels, queue, priority and its
    non-secret envs to the generated jobs. ``pool``, ``pfs`` and ``mount_path`` override or
    supply the pool id, the PFS datasource name and its mount path. ``chain_path`` (the chain
    file's absolute path) tells downloading steps where the chain is when it has no config_path.
    """
    if not isinstance(spec, AiakSpec):
        spec = parse_spec(spec, spec_source, known_tables)
    template = copy.deepcopy(template) if template else {}
    chain: Dict[str, Any] = {k: v for k, v in template.items() if k != "jobs"}
    if pool:
        chain["resourcePoolId"] = pool
    if not isinstance(chain.get("resourcePoolId"), str) or not chain["resourcePoolId"].strip():
        where = f"{template_source} has no resourcePoolId" if template else "no resource pool"
        raise UsageError(f"{where}: pass --pool ID (your AIHC resource pool)")
    shared = job_defaults(spec, template, chain, pfs=pfs, mount_path=mount_path, template_source=template_source,
                          spec_source=spec_source, chain_path=chain_path)
    steps = plan_steps(spec, shared.root, shared.fetch)
    names = [make_job_name(f"{step.phase}-{spec.model.name}-{step.kind}-{spec.version}") for step in steps]
    chain["jobs"] = [_job(spec, step, name, depends_on, shared)
                     for step, name, depends_on in zip(steps, names, _depends_on(steps, names))]
    scripts = step_scripts(with_eval=bool(spec.evals))
    try:  # what the template keeps (api_config, datasources, ...) must be valid too
        check_chain_data(copy.deepcopy(chain), template_source, local=True, scripts=scripts)
    except ChainFileError as exc:
        where = f"{template_source} (the existing chain)" if template else "the generated chain"
        distinct = {re.sub(r"^jobs\[\d+\]", "jobs[*]", p) for p in exc.problems}  # the jobs share most parts
        more = f" (and {len(distinct) - 1} more)" if len(distinct) > 1 else ""
        raise UsageError(f"{where}: {exc.problems[0]}{more}; nothing written") from None
    try:  # a kept value the loader ignores (an unknown top-level key) must still be writable
        json.dumps(chain, allow_nan=False)
    except ValueError:
        raise UsageError(f"{template_source} (the existing chain) holds a number too large to write out (over "
                         "4,300 digits) or NaN/Infinity outside its jobs: remove it; nothing written") from None
    return chain, scripts


def notes(spec: AiakSpec) -> List[str]:
    """What the user should know about the generated chain (aiak-gen prints them)."""
    said = []
    for phase, launcher in spec.aiak.launchers.items():
        if launcher in layout.NO_OPTIMIZER_RESUME:
            said.append(f"{phase}: AIAK's launcher {launcher} loads with --no-load-optim --no-load-rng, also when "
                        "a retried or resumed training reloads its own checkpoint: it continues from the saved "
                        "iteration with a fresh optimizer and RNG state (aiak_train.sh says so in its log)")
    return said


def step_scripts(with_eval: bool = False) -> Dict[str, str]:
    """The step scripts shipped as package data, by the file name the jobs' commands use.

    The three training scripts always (a chain's jobs name them); the eval and report scripts
    only for a chain with EVAL, so chains without it keep exactly the files they had.
    """
    scripts = {}
    names = list(SCRIPT_NAMES.values()) + (list(EVAL_SCRIPT_NAMES.values()) if with_eval else [])
    for filename in names:
        with open(os.path.join(SCRIPT_DIR, filename), encoding="utf-8") as handle:
            scripts[filename] = handle.read()
    return scripts


__all__ = ["AIAK_ROOT", "DEFAULT_MOUNT", "EVAL_KEYS", "EVAL_SCRIPT_NAMES", "GENERATED_BY", "OPTIONAL", "PHASES",
           "PRETRAIN_SFT_KEYS", "PRIORITIES", "REQUIRED", "SCRIPT_NAMES", "STEP_ENV_NAMES", "STEPS", "AiakSpec",
           "Step", "eval_settings", "generate_chain", "indexed_data_path", "is_generated", "notes", "parse_spec",
           "step_scripts", "training_settings"]
