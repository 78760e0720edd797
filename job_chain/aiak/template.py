"""What an existing chain file lends the jobs aiak-gen writes (pool, storage, queue, envs).

The template's values may be anything a hand-edited file holds: every reader here takes only
values of the right shape and drops the rest, and never carries a secret (api_config's keys,
secret-looking env names) into a job.
"""

from __future__ import annotations

import copy
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from job_chain.aiak.description import AiakSpec
from job_chain.aiak.plan import INSTALL_ENV_NAMES, STEP_ENV_NAMES
from job_chain.aihc.credentials import CREDENTIALS_ENV
from job_chain.aihc.spec import ENV_NAME_RE, PRIORITIES
from job_chain.errors import UsageError
from job_chain.spec.loader import path_under
from job_chain.util.jsonfile import describe

DEFAULT_MOUNT = "/root/pfs"
# Envs of a template job that are never carried into generated jobs: our own step parameters
# (stale values from an earlier generation would leak into other steps) and the old generator's.
# AIAK_TRAINING_PATH / MEGATRON_PATH are kept: a template may set the image's install paths.
OWN_ENV_NAMES = {name for names in STEP_ENV_NAMES.values() for name in names} - set(INSTALL_ENV_NAMES) | {
    "MODEL_BOS_PATH", "DATASET_BOS_PATH", "OUTPUT_PATH", "CHECKPOINT_PATH",
    "DATA_CACHE_PATH", "HOST"}
SECRET_NAME = re.compile(
    r"(\A|_)(AK|SK|ACCESS_?KEY(_ID)?|SECRET(_?ACCESS)?(_?KEY)?|PASSWORD|PASSWD|TOKEN|CREDENTIALS?)"
    r"(\Z|_)", re.IGNORECASE)


@dataclass
class JobDefaults:
    """What every generated job shares, from the template and the options."""

    datasources: List[Dict[str, Any]]
    root: str  # where the steps' files live (MOUNT_PATH, on the storage)
    queue: str
    priority: str
    labels: List[Dict[str, Any]] = field(default_factory=list)
    envs: List[Dict[str, str]] = field(default_factory=list)  # the template job's own, non-secret
    fetch: List[Tuple[str, str]] = field(default_factory=list)  # how a download finds credentials


def first_job(template: Dict[str, Any]) -> Dict[str, Any]:
    jobs = template.get("jobs")
    if isinstance(jobs, list) and jobs and isinstance(jobs[0], dict):
        return jobs[0]
    return {}


def dict_list(value: Any) -> List[Dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [copy.deepcopy(x) for x in value if isinstance(x, dict)]


def string(*values: Any) -> Optional[str]:
    """The first value that is a non-empty string (template values may be anything)."""
    return next((v for v in values if isinstance(v, str) and v.strip()), None)


def _env_value(value: Any) -> Optional[str]:
    """A template env value as a string; None for values no env can hold (objects, arrays)."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return str(value)
        except ValueError:  # an int too large to write out
            return None
    return None


def carried_envs(job: Dict[str, Any], api_config: Any) -> List[Dict[str, str]]:
    """The template job's own valid envs (NCCL_DEBUG, ...) minus ours and anything secret-looking."""
    spec = job.get("jobSpec")
    envs = spec.get("envs") if isinstance(spec, dict) else None
    secrets = set()
    if isinstance(api_config, dict):
        secrets = {api_config[k] for k in ("ak", "sk", "sessionToken")
                   if isinstance(api_config.get(k), str) and api_config[k]}
    kept = []
    for env in dict_list(envs):
        name, value = env.get("name"), _env_value(env.get("value"))
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name) or value is None:
            continue
        if name.upper() in OWN_ENV_NAMES or (SECRET_NAME.search(name) and name != CREDENTIALS_ENV):
            continue  # JOB_CHAIN_CREDENTIALS names a file (where a job finds keys), never a key
        if any(s in value for s in secrets):
            continue
        kept.append({"name": name, "value": value})
    return kept


def runtime_root(scrips_path: str) -> str:
    """The directory jobs put on PYTHONPATH for job-chain (as the step tail does)."""
    return scrips_path[:-3].rsplit("/", 1)[0] if scrips_path.endswith(".py") else scrips_path


def fetch_envs(chain: Dict[str, Any], chain_path: Optional[str]) -> List[Tuple[str, str]]:
    """Where a downloading step finds the chain file (its api_config) and job-chain's runtime.

    The chain file is read where the jobs read it (``config_path``, default the chain file's
    absolute path); neither value is a secret.
    """
    pairs: List[Tuple[str, str]] = []
    config = string(chain.get("config_path")) or chain_path
    if config and posixpath.isabs(config) and config.isprintable():
        pairs.append(("JOB_CHAIN_CONFIG", config))
    scrips = string(chain.get("scrips_path"))
    if scrips and scrips.isprintable():
        pairs.append(("JOB_CHAIN_RUNTIME", runtime_root(scrips)))
    return pairs


def _storage(spec: AiakSpec, template: Dict[str, Any], job: Dict[str, Any], pfs: Optional[str],
             mount_path: Optional[str], template_source: str, spec_source: str) -> Tuple[List[Dict[str, Any]], str]:
    """The jobs' datasources and the root of the steps' files under their first mount."""
    datasources = dict_list(job.get("datasources")) or dict_list(template.get("datasources"))
    if pfs or mount_path or not datasources:
        if not pfs and not datasources:
            where = f"{template_source} has no datasources" if template else "no storage"
            raise UsageError(f"{where}: pass --pfs NAME (your PFS datasource; mounted at "
                             f"--mount-path, default MOUNT_PATH or {DEFAULT_MOUNT})")
        base = datasources[0] if datasources else {"type": "pfs"}
        mount = (mount_path or (None if datasources else spec.options["MOUNT_PATH"])
                 or string(base.get("mountPath")) or DEFAULT_MOUNT)
        if not posixpath.isabs(mount):
            where = "--mount-path" if mount_path else f"{template_source}: jobs[0].datasources[0].mountPath"
            raise UsageError(f"{where} must be an absolute path, found {describe(mount)}")
        first = dict(base, type=string(base.get("type")) or "pfs", name=pfs or base.get("name"),
                     mountPath=mount)
        datasources = [first] + datasources[1:]
    mounts = [str(d["mountPath"]) for d in datasources if isinstance(d.get("mountPath"), str)]
    root = posixpath.normpath(spec.options["MOUNT_PATH"] or (mounts[0] if mounts else DEFAULT_MOUNT))
    if not any(path_under(root, m) for m in mounts):
        raise UsageError(
            f"{spec_source}: MOUNT_PATH: {root} is not on the job storage (mounted at "
            f"{', '.join(mounts) or 'nowhere'}), so the steps could not share files: set "
            f"MOUNT_PATH under {mounts[0] if mounts else DEFAULT_MOUNT} or pass "
            f"--mount-path {root}")
    return datasources, root


def job_defaults(spec: AiakSpec, template: Dict[str, Any], chain: Dict[str, Any], *, pfs: Optional[str],
                 mount_path: Optional[str], template_source: str, spec_source: str,
                 chain_path: Optional[str]) -> JobDefaults:
    """Everything the generated jobs take from the template (``chain``: the kept top level)."""
    job = first_job(template)
    datasources, root = _storage(spec, template, job, pfs, mount_path, template_source, spec_source)
    queue = string(spec.options["QUEUE"], job.get("queue"), template.get("queue")) or "default"
    priority = spec.options["PRIORITY"] or job.get("priority")
    labels = [label for label in dict_list(job.get("labels")) or dict_list(template.get("labels"))
              if isinstance(label.get("key"), str)]
    return JobDefaults(datasources=datasources, root=root, queue=queue,
                       priority=priority if priority in PRIORITIES else "normal", labels=labels,
                       envs=carried_envs(job, template.get("api_config")),
                       fetch=fetch_envs(chain, chain_path))
