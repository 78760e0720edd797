"""Turn a short AIAK description into a three-step chain: convert → preprocess → train.

Output, for a chain file ``DIR/chain_info.json``: the chain itself, whose jobs' commands name
the step scripts ``aiak_convert.sh``, ``aiak_preprocess.sh`` and ``aiak_train.sh`` written
beside it (``job-chain run`` inlines them). Every parameter a step needs is in that job's
``jobSpec.envs``; credentials never are. Generated jobs carry
``"jobChain": {"generatedBy": "aiak-gen"}`` so a later run may replace them without --force.
"""

from __future__ import annotations

import copy
import difflib
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from job_chain.aiak import tables
from job_chain.aihc.names import make_job_name
from job_chain.errors import UsageError

GENERATED_BY = "aiak-gen"
SCRIPT_NAMES = {"convert": "aiak_convert.sh", "preprocess": "aiak_preprocess.sh", "train": "aiak_train.sh"}
SCRIPT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
PHASES = ("pretrain", "sft")
REQUIRED = ("MODEL_NAME", "REPLICAS", "VERSION", "TRAINING_PHASE", "TP", "PP", "DATASET_NAME", "JSON_KEYS", "IMAGE")
OPTIONAL = {
    # key: default (None = derived)
    "MOUNT_PATH": None, "MODEL_URL": None, "DATASET_URL": None,
    "GPU_RESOURCE": "baidu.com/a800_80g_cgpu", "GPUS_PER_REPLICA": 8, "ENABLE_RDMA": True,
    "QUEUE": None, "PRIORITY": "normal", "TRAIN_SCRIPT": None, "CHAT_TEMPLATE": None, "SEQ_LENGTH": 2048,
}
DEFAULT_MOUNT = "/root/pfs"
AIAK_ROOT = "/workspace/AIAK-Training-LLM"
SECRET_NAMES = {"AK", "SK", "AIHC_AK", "AIHC_SK", "ACCESS_KEY", "SECRET_KEY"}


@dataclass
class AiakSpec:
    """A validated description (the seed's aiak_job_info.json plus the optional keys)."""

    model: tables.Model
    dataset: tables.Dataset
    replicas: int
    version: str
    phase: str
    tp: int
    pp: int
    json_keys: str
    image: str
    options: Dict[str, Any]


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _positive(value: Any) -> Optional[int]:
    text = _text(value)
    if isinstance(value, bool) or not text.isdigit() or int(text) < 1:
        return None
    return int(text)


def _boolean(value: Any) -> Optional[bool]:
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}.get(_text(value).lower())


def parse_spec(raw: Dict[str, Any], source: str = "aiak_job_info.json") -> AiakSpec:
    """Validate the description; raise one UsageError listing each problem on its own line."""
    problems: List[str] = []

    def bad(key: str, message: str) -> None:
        problems.append(f"{source}: {key}: {message}")

    known = set(REQUIRED) | set(OPTIONAL)
    for key in sorted(k for k in raw if k not in known):
        close = difflib.get_close_matches(str(key), sorted(known), n=1)
        bad(str(key), "unknown key" + (f" (did you mean {close[0]}?)" if close else
                                       f"; known keys: {', '.join(REQUIRED)}, {', '.join(OPTIONAL)}"))
    for key in REQUIRED:
        if key not in raw:
            bad(key, "required" + (" (may be \"\" to use the AIAK default split)" if key in ("TP", "PP") else ""))
    for key, value in raw.items():
        if isinstance(value, (dict, list)):
            bad(str(key), f"must be a string or number, found {type(value).__name__}")
    if problems:
        raise UsageError("\n".join(problems))

    models, datasets = tables.models(), tables.datasets()
    model = models.get(_text(raw["MODEL_NAME"]))
    if model is None:
        name = _text(raw["MODEL_NAME"])
        bad("MODEL_NAME", f"unknown model {name!r}{tables.suggest(name, list(models))}; "
                          "see aiak-gen --list-models")
    dataset = datasets.get(_text(raw["DATASET_NAME"]))
    if dataset is None and not _text(raw.get("DATASET_URL")):
        name = _text(raw["DATASET_NAME"])
        bad("DATASET_NAME", f"unknown dataset {name!r}{tables.suggest(name, list(datasets))}; "
                            "see aiak-gen --list-datasets, or give DATASET_URL")
    phase = _text(raw["TRAINING_PHASE"]).lower()
    if phase not in PHASES:
        bad("TRAINING_PHASE", f"must be pretrain or sft, found {_text(raw['TRAINING_PHASE'])!r}")
    replicas = _positive(raw["REPLICAS"])
    if replicas is None:
        bad("REPLICAS", f"must be a positive integer, found {raw['REPLICAS']!r}")
    version = _text(raw["VERSION"])
    if not version:
        bad("VERSION", "must not be empty (it names this training's jobs, e.g. \"v1\")")
    image = _text(raw["IMAGE"])
    if not image:
        bad("IMAGE", "must not be empty: give the AIAK training image, e.g. "
                     "registry.baidubce.com/aihc-aiak/aiak-training-llm:…")
    json_keys = _text(raw["JSON_KEYS"])
    if phase == "pretrain" and not json_keys:
        bad("JSON_KEYS", "must name the sample field(s) of the dataset for pretrain, e.g. \"text\"")

    tp_text, pp_text = _text(raw["TP"]), _text(raw["PP"])
    tp = pp = 0
    if bool(tp_text) != bool(pp_text):
        given, missing = ("TP", "PP") if tp_text else ("PP", "TP")
        bad(missing, f"{given} is set, so {missing} must be set too (or leave both empty for the AIAK default)")
    elif tp_text:
        tp, pp = _positive(raw["TP"]) or 0, _positive(raw["PP"]) or 0
        if not tp:
            bad("TP", f"must be a positive integer, found {raw['TP']!r}")
        if not pp:
            bad("PP", f"must be a positive integer, found {raw['PP']!r}")
    elif model is not None:
        if model.tp is None or model.pp is None:
            bad("TP", f"{model.name} has no default TP/PP split in the AIAK table (#N/A): set TP and PP")
        else:
            tp, pp = model.tp, model.pp

    options: Dict[str, Any] = {}
    for key, default in OPTIONAL.items():
        value = raw.get(key, default)
        if key in ("GPUS_PER_REPLICA", "SEQ_LENGTH"):
            number = _positive(value)
            if number is None:
                bad(key, f"must be a positive integer, found {value!r}")
            value = number
        elif key == "ENABLE_RDMA":
            flag = _boolean(value)
            if flag is None:
                bad(key, f"must be true or false, found {value!r}")
            value = flag
        elif key == "PRIORITY" and _text(value) not in ("high", "normal", "low"):
            bad(key, f"must be high, normal or low, found {value!r}")
        elif key == "MOUNT_PATH" and value is not None and not posixpath.isabs(_text(value)):
            bad(key, f"must be an absolute path, found {value!r}")
        elif value is not None:
            value = _text(value) or None if key in ("MOUNT_PATH", "MODEL_URL", "DATASET_URL", "QUEUE",
                                                    "TRAIN_SCRIPT", "CHAT_TEMPLATE") else value
        options[key] = value
    if problems:
        raise UsageError("\n".join(problems))
    assert model is not None and replicas is not None
    if dataset is None:
        url = options["DATASET_URL"]
        dataset = tables.Dataset(_text(raw["DATASET_NAME"]) or posixpath.basename(url), url)
    return AiakSpec(model=model, dataset=dataset, replicas=replicas, version=version, phase=phase,
                    tp=tp, pp=pp, json_keys=json_keys, image=image, options=options)


def _envs(pairs: List[Tuple[str, Any]]) -> List[Dict[str, str]]:
    return [{"name": name, "value": str(value)} for name, value in pairs]


def step_envs(spec: AiakSpec, mount: str) -> Dict[str, List[Dict[str, str]]]:
    """The parameters of each step, as job envs. Paths live under the storage mount."""
    model, opts = spec.model, spec.options
    hf_dir = f"{mount}/models/{model.name}/hf"
    converted = f"{mount}/models/{model.name}/mcore/tp{spec.tp}_pp{spec.pp}"
    raw_name = posixpath.basename((opts["DATASET_URL"] or spec.dataset.url).rstrip("/")) or spec.dataset.name
    dataset_dir = f"{mount}/datasets/{spec.dataset.name}"
    processed = f"{dataset_dir}/processed/{model.name}/{spec.phase}"
    data_path = f"{processed}/{spec.dataset.name}_text_document" if spec.phase == "pretrain" else processed
    run_dir = f"{spec.phase}/{spec.version}"
    model_id = re.sub(r"[^a-z0-9]+", "_", model.name.lower()).strip("_")
    launcher = opts["TRAIN_SCRIPT"] or (
        f"{AIAK_ROOT}/examples/{model.series}/pretrain/pretrain_{model_id}.sh" if spec.phase == "pretrain"
        else f"{AIAK_ROOT}/examples/{model.series}/finetuning/sft_{model_id}.sh")
    preprocess = [("TRAINING_PHASE", spec.phase), ("DATASET_URL", opts["DATASET_URL"] or spec.dataset.url),
                  ("INPUT_DATA", f"{dataset_dir}/{raw_name}"), ("TOKENIZER_PATH", hf_dir), ("DATA_PATH", data_path)]
    if spec.phase == "pretrain":
        preprocess.append(("JSON_KEYS", spec.json_keys))
    else:
        preprocess += [("CHAT_TEMPLATE", opts["CHAT_TEMPLATE"] or model.series), ("SEQ_LENGTH", opts["SEQ_LENGTH"])]
    return {
        "convert": _envs([("MODEL_NAME", model.name), ("MODEL_URL", opts["MODEL_URL"] or model.url),
                          ("LOAD", hf_dir), ("SAVE", converted), ("TP", spec.tp), ("PP", spec.pp)]),
        "preprocess": _envs(preprocess),
        "train": _envs([("CUDA_DEVICE_MAX_CONNECTIONS", 1), ("TRAIN_SCRIPT", launcher), ("TP", spec.tp),
                        ("PP", spec.pp), ("LOAD", converted), ("SAVE", f"{mount}/checkpoints/{model.name}/{run_dir}"),
                        ("DATA_PATH", data_path), ("TOKENIZER_PATH", hf_dir),
                        ("TENSORBOARD_PATH", f"{mount}/tensorboard/{model.name}/{run_dir}")]),
    }


def is_generated(chain: Dict[str, Any]) -> bool:
    """True when every job of an existing chain came from aiak-gen (safe to replace)."""
    jobs = chain.get("jobs") or []
    return isinstance(jobs, list) and all(
        isinstance(j, dict) and isinstance(j.get("jobChain"), dict) and j["jobChain"].get("generatedBy") == GENERATED_BY
        for j in jobs)


def generate_chain(
    spec: AiakSpec,
    template: Optional[Dict[str, Any]] = None,
    *,
    pool: Optional[str] = None,
    pfs: Optional[str] = None,
    mount_path: Optional[str] = None,
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """Return the chain (template's top level kept, jobs replaced) and the step scripts."""
    template = copy.deepcopy(template or {})
    first_job = next((j for j in template.get("jobs") or [] if isinstance(j, dict)), {})
    chain = {k: v for k, v in template.items() if k != "jobs"}
    if pool:
        chain["resourcePoolId"] = pool
    if not chain.get("resourcePoolId"):
        raise UsageError("no resource pool: pass --pool ID (or keep resourcePoolId in the existing chain file)")

    datasources = first_job.get("datasources") if isinstance(first_job.get("datasources"), list) else []
    if pfs or mount_path or not datasources:
        if not pfs and not datasources:
            raise UsageError("no storage: pass --pfs NAME (the PFS datasource; --mount-path defaults to "
                             f"{DEFAULT_MOUNT}), or keep datasources in the existing chain file")
        base = datasources[0] if datasources else {"type": "pfs"}
        datasources = [dict(base, type=base.get("type", "pfs"), name=pfs or base.get("name"),
                            mountPath=mount_path or base.get("mountPath") or DEFAULT_MOUNT)] + datasources[1:]
    mount = (spec.options["MOUNT_PATH"] or (datasources[0].get("mountPath") if datasources else None)
             or DEFAULT_MOUNT).rstrip("/") or "/"

    extra_envs = [e for e in (first_job.get("jobSpec") or {}).get("envs") or []
                  if isinstance(e, dict) and str(e.get("name", "")).upper() not in SECRET_NAMES]
    envs = step_envs(spec, mount)
    jobs = []
    for step in ("convert", "preprocess", "train"):
        names = {e["name"] for e in envs[step]}
        job: Dict[str, Any] = {
            "name": make_job_name(f"{spec.phase}-{spec.model.name}-{step}-{spec.version}"),
            "queue": spec.options["QUEUE"] or first_job.get("queue") or chain.get("queue") or "default",
            "priority": spec.options["PRIORITY"],
            "jobFramework": "PyTorchJob",
            "jobSpec": {
                "command": SCRIPT_NAMES[step],
                "image": spec.image,
                "replicas": spec.replicas if step == "train" else 1,
                "resources": [{"name": spec.options["GPU_RESOURCE"], "quantity": spec.options["GPUS_PER_REPLICA"]}],
                "enableRDMA": spec.options["ENABLE_RDMA"],
                "envs": [e for e in extra_envs if e.get("name") not in names] + envs[step],
            },
            "datasources": copy.deepcopy(datasources),
            "jobChain": {"generatedBy": GENERATED_BY},
        }
        if isinstance(first_job.get("labels"), list) and first_job["labels"]:
            job["labels"] = copy.deepcopy(first_job["labels"])
        jobs.append(job)
    chain["jobs"] = jobs
    return chain, step_scripts()


def step_scripts() -> Dict[str, str]:
    scripts = {}
    for filename in SCRIPT_NAMES.values():
        with open(os.path.join(SCRIPT_DIR, filename), encoding="utf-8") as handle:
            scripts[filename] = handle.read()
    return scripts
