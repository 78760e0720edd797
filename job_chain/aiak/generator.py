"""Turn a short AIAK description into a chain: convert → preprocess → train (→ evaluate → report).

Stable contract (the CLI, the examples and the integration tests rely on it):

- ``TRAINING_PHASE`` pretrain or sft: exactly three jobs, in this order, named
  ``make_job_name(f"{phase}-{model}-{step}-{version}")`` with step ``convert``, ``preprocess``,
  ``train`` (e.g. ``pretrain-llama2-7b-convert-luyc-v4``).
- ``pretrain+sft``: five jobs, convert → preprocess → train of the pretrain phase, then
  preprocess (the SFT data, ``SFT_DATASET_NAME``) → train of the sft phase, which fine-tunes the
  pretrained checkpoint (same TP/PP). Each job is named after its own phase.
- ``EVAL`` (a list of benchmark names): after those jobs, one ``eval`` job per benchmark
  (``{phase}-{model}-eval-{benchmark}-{version}``, phase of the last training) that depends on
  the last training, and a ``report`` job that depends on every eval job. Then every job names
  its dependencies in ``jobChain.dependsOn`` (the training jobs their predecessor), since a
  chain with any ``dependsOn`` is a graph. Without ``EVAL`` the chain is a line, as before.
- Job ``i``'s ``jobSpec.command`` is exactly the file name of its step script,
  ``SCRIPT_NAMES[step]``: ``aiak_convert.sh``, ``aiak_preprocess.sh``, ``aiak_train.sh`` (with
  ``EVAL`` also ``EVAL_SCRIPT_NAMES``: ``aiak_eval.sh``, ``aiak_report.sh``). The
  scripts are written beside the chain file (``job-chain run`` resolves a ``*.sh`` command
  relative to the chain file and inlines it), so a test may replace them with stand-ins.
- Every parameter a step needs is one of that job's ``jobSpec.envs`` (names listed in
  ``STEP_ENV_NAMES``; values are strings). Credentials never are: the template's api_config stays
  a top-level setting of the chain file, and secret-looking envs of the template are dropped.
- Every generated job carries ``"jobChain": {"generatedBy": "aiak-gen"}`` (stripped before
  submission), so a later aiak-gen run may replace the jobs without ``--force``.
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, Union

from job_chain.aiak import tables
from job_chain.aihc.names import make_job_name
from job_chain.aihc.spec import ENV_NAME_RE, PRIORITIES
from job_chain.chain.loader import ChainFileError, check_chain_data, path_under
from job_chain.errors import UsageError
from job_chain.jsonfile import describe, json_type

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
PHASES = ("pretrain", "sft", "pretrain+sft")
REQUIRED = ("MODEL_NAME", "REPLICAS", "VERSION", "TRAINING_PHASE", "TP", "PP", "DATASET_NAME",
            "JSON_KEYS", "IMAGE")
# Optional keys and their defaults (None: derived from the tables, the template or the model).
# Resource defaults follow the AIHC create-job example: 8 × baidu.com/a800_80g_cgpu with RDMA.
OPTIONAL: Dict[str, Any] = {
    "MOUNT_PATH": None,
    "MODEL_URL": None,
    "DATASET_URL": None,
    "GPU_RESOURCE": "baidu.com/a800_80g_cgpu",
    "GPUS_PER_REPLICA": 8,
    "ENABLE_RDMA": True,
    "QUEUE": None,
    "PRIORITY": None,
    "TRAIN_SCRIPT": None,
    "CHAT_TEMPLATE": None,
    "SEQ_LENGTH": 2048,
}
# Optional keys of TRAINING_PHASE pretrain+sft only (refused with the other phases).
PRETRAIN_SFT_KEYS: Dict[str, Any] = {
    "SFT_DATASET_NAME": None,  # the SFT data (a datasets.csv row); required with pretrain+sft
    "SFT_TRAIN_SCRIPT": None,  # the SFT launcher (default AIAK's)
}
# EVAL: benchmark names, each an eval job's name part and a folder name on the mount.
EVAL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_EVALS = 16
# Optional keys used only with EVAL (refused without it).
EVAL_KEYS: Dict[str, Any] = {
    "EVAL_COMMAND": None,  # the evaluation command aiak_eval.sh runs (AIAK documents none)
}
STEP_ENV_NAMES: Dict[str, Tuple[str, ...]] = {
    "convert": ("MODEL_NAME", "MODEL_URL", "LOAD", "SAVE", "TP", "PP"),
    "preprocess": ("TRAINING_PHASE", "DATASET_URL", "INPUT_DATA", "TOKENIZER_PATH", "OUTPUT_PREFIX",
                   "DATA_PATH", "JSON_KEYS", "CHAT_TEMPLATE", "SEQ_LENGTH"),
    "train": ("CUDA_DEVICE_MAX_CONNECTIONS", "TRAINING_PHASE", "TRAIN_SCRIPT", "TP", "PP", "LOAD",
              "SAVE", "DATA_PATH", "TOKENIZER_PATH", "TENSORBOARD_PATH", "GPUS_PER_NODE"),
    "eval": ("EVAL_BENCHMARK", "LOAD", "TP", "PP", "TOKENIZER_PATH", "EVAL_OUTPUT", "EVAL_COMMAND"),
    "report": ("EVAL_BENCHMARKS", "EVAL_DIR", "LOAD"),
}
# Envs of a template job that are never carried into generated jobs: our own step parameters
# (stale values from an earlier generation would leak into other steps) and the old generator's.
_OWN_ENV_NAMES = {name for names in STEP_ENV_NAMES.values() for name in names} | {
    "MODEL_BOS_PATH", "DATASET_BOS_PATH", "OUTPUT_PATH", "CHECKPOINT_PATH",
    "DATA_CACHE_PATH", "HOST"}
_SECRET_NAME = re.compile(
    r"(\A|_)(AK|SK|ACCESS_?KEY(_ID)?|SECRET(_?ACCESS)?(_?KEY)?|PASSWORD|PASSWD|TOKEN|CREDENTIALS?)"
    r"(\Z|_)", re.IGNORECASE)
DEFAULT_MOUNT = "/root/pfs"
AIAK_ROOT = "/workspace/AIAK-Training-LLM"
_VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_POSITIVE_RE = re.compile(r"[0-9]+")
MAX_COUNT = 2**31 - 1  # replicas, GPUs, TP/PP, sequence length: Kubernetes int32 fields
MAX_NAME = 200  # VERSION and DATASET_NAME name folders; a file name has at most 255 bytes
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,40}")  # shown as is in messages; other keys quoted
# keys whose own checks explain a wrong number or boolean best ("must be a positive integer")
_NUMBER_KEYS = {"REPLICAS", "TP", "PP", "GPUS_PER_REPLICA", "SEQ_LENGTH", "ENABLE_RDMA"}


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
    json_keys: str  # space-separated, as preprocess_pretrain_data.py --json-keys wants them
    image: str
    options: Dict[str, Any]
    sft_dataset: Optional[tables.Dataset] = None  # pretrain+sft: the SFT data
    evals: List[str] = field(default_factory=list)  # EVAL: benchmark names, in the given order


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _positive(value: Any) -> Optional[int]:
    """A positive integer up to MAX_COUNT given as a number or a string ("1", 1), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    if isinstance(value, int):
        return value if 1 <= value <= MAX_COUNT else None
    text = value.strip()
    if not _POSITIVE_RE.fullmatch(text) or len(text) > 10 or not 1 <= int(text) <= MAX_COUNT:
        return None
    return int(text)


def _boolean(value: Any) -> Optional[bool]:
    if isinstance(value, bool):
        return value
    words = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
    return words.get(_text(value).lower())


def _one_line(source: str, problems: List[Tuple[str, str]]) -> UsageError:
    """Several problems still make one line: the first in full, the others by key."""
    key, message = problems[0]
    first = f"{source}: {key}: {message}"
    if len(problems) == 1:
        return UsageError(first)
    more = ", ".join(dict.fromkeys(k for k, _ in problems[1:]))
    return UsageError(f"{first} (also check: {more})")


def _value_problem(key: str, value: Any) -> Optional[str]:
    """Why a description value cannot be used at all (before its meaning is checked), or None."""
    if isinstance(value, (dict, list)):
        return f"must be a string or a number, found a JSON {json_type(value)}"
    if isinstance(value, bool) and key not in _NUMBER_KEYS:
        return f"must be a string or a number, found {str(value).lower()}"
    if isinstance(value, float) and not math.isfinite(value) and key not in _NUMBER_KEYS:
        return f"must be a string or a number, found {value}"
    if isinstance(value, int) and not isinstance(value, bool) and describe(value).startswith("a number"):
        return "number too large"  # more digits than Python will write out
    if isinstance(value, str) and not value.isprintable():
        return f"must be one line of printable text, found {describe(value)}"
    return None


def parse_spec(raw: Dict[str, Any], source: str = "aiak_job_info.json",
               known_tables: Optional[tables.Tables] = None) -> AiakSpec:
    """Validate a description; raise a one-line UsageError naming file, key and the fix.

    ``known_tables`` are the merged model/dataset tables (default: the shipped ones).
    """
    if not isinstance(raw, dict):
        raise UsageError(f"{source}: expected a JSON object with MODEL_NAME, REPLICAS, ... "
                         f"found {json_type(raw)}")
    problems: List[Tuple[str, str]] = []

    def bad(key: str, message: str) -> None:
        problems.append((key, message))

    known = list(REQUIRED) + list(OPTIONAL) + list(PRETRAIN_SFT_KEYS) + ["EVAL"] + list(EVAL_KEYS)
    for key in sorted(str(k) for k in raw if k not in known):
        close = difflib.get_close_matches(key.upper(), known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f"; known keys: {', '.join(known)}"
        bad(key if _PLAIN_KEY.fullmatch(key) else describe(key, 40), "unknown key" + hint)
    for key in REQUIRED:
        if key not in raw:
            hint = {"TP": ' (use "" to take the AIAK default split)',
                    "PP": ' (use "" to take the AIAK default split)',
                    "JSON_KEYS": ' (use "" if none is needed, e.g. for sft)'}.get(key, "")
            bad(key, f"required key is missing: add \"{key}\" to the file{hint}")
    for key, value in raw.items():
        problem = _value_problem(str(key), value) if key in known and key != "EVAL" else None
        if problem:
            bad(str(key), problem)
    evals = _eval_names(raw.get("EVAL"), bad) if "EVAL" in raw else []
    if problems:
        raise _one_line(source, problems)

    if known_tables is None:
        known_tables = tables.load(environ={})
    models, datasets = known_tables.models, known_tables.datasets
    model_name = _text(raw["MODEL_NAME"])
    model = models.get(model_name)
    if model is None:
        close = tables.suggest(model_name, list(models))
        bad("MODEL_NAME", f"unknown model {describe(model_name)}{close}; run aiak-gen --list-models "
                          "for the supported ones")
    dataset_name = _text(raw["DATASET_NAME"])
    dataset = datasets.get(dataset_name)
    if dataset is None and not _text(raw.get("DATASET_URL")):
        bad("DATASET_NAME", f"unknown dataset {describe(dataset_name)}"
                            f"{tables.suggest(dataset_name, list(datasets))}; run aiak-gen "
                            "--list-datasets, or give DATASET_URL (bos:/...) for your own data")
    elif dataset is None and len(dataset_name) > MAX_NAME:
        bad("DATASET_NAME", f"at most {MAX_NAME} characters (it names a folder), found {len(dataset_name)}")
    phase = _text(raw["TRAINING_PHASE"]).lower()
    if phase not in PHASES:
        bad("TRAINING_PHASE", "must be \"pretrain\", \"sft\" or \"pretrain+sft\", found "
                              f"{describe(raw['TRAINING_PHASE'])}")
    sft_dataset: Optional[tables.Dataset] = None
    sft_name = _text(raw.get("SFT_DATASET_NAME"))
    if phase == "pretrain+sft":
        sft_dataset = datasets.get(sft_name)
        if not sft_name:
            bad("SFT_DATASET_NAME", "required with pretrain+sft: the dataset (a datasets.csv row) "
                                    "the SFT phase is trained on, e.g. \"alpaca_zh-llama3-train\"")
        elif sft_dataset is None:
            bad("SFT_DATASET_NAME", f"unknown dataset {describe(sft_name)}"
                                    f"{tables.suggest(sft_name, list(datasets))}; run aiak-gen "
                                    "--list-datasets, or add it to your own aiak_dict/datasets.csv")
    else:
        for key in PRETRAIN_SFT_KEYS:
            if _text(raw.get(key)):
                bad(key, "only used with TRAINING_PHASE \"pretrain+sft\"")
    replicas = _positive(raw["REPLICAS"])
    if replicas is None:
        bad("REPLICAS", f"must be a positive integer such as \"1\", found {describe(raw['REPLICAS'])}")
    version = _text(raw["VERSION"])
    if not _VERSION_RE.fullmatch(version) or len(version) > MAX_NAME:
        bad("VERSION", "must be a non-empty tag of letters, digits, '.', '_' or '-' (it names "
                       f"the jobs and the checkpoint folder; at most {MAX_NAME}), e.g. \"v1\"; "
                       f"found {describe(raw['VERSION'])}")
    image = _text(raw["IMAGE"])
    if not image:
        bad("IMAGE", "must not be empty: give the AIAK training image, e.g. "
                     "registry.baidubce.com/aihc-aiak/aiak-training-llm:<tag>")
    elif len(image.split()) != 1:
        bad("IMAGE", f"must be an image reference without spaces, found {describe(image)}")
    json_keys = " ".join(k for k in re.split(r"[\s,]+", _text(raw["JSON_KEYS"])) if k)
    if phase != "sft" and not json_keys:
        bad("JSON_KEYS", "must name the dataset's text field(s) for pretrain, e.g. \"text\"")

    tp_text, pp_text = _text(raw["TP"]), _text(raw["PP"])
    tp = pp = 0
    if bool(tp_text) != bool(pp_text):
        given, missing = ("TP", "PP") if tp_text else ("PP", "TP")
        bad(missing, f"{given} is set, so {missing} must be set too (or leave both \"\" for the "
                     "AIAK default split)")
    elif tp_text:
        tp, pp = _positive(raw["TP"]) or 0, _positive(raw["PP"]) or 0
        if not tp:
            bad("TP", f"must be a positive integer such as \"2\", found {describe(raw['TP'])}")
        if not pp:
            bad("PP", f"must be a positive integer such as \"2\", found {describe(raw['PP'])}")
    elif model is not None:
        if model.tp is None or model.pp is None:
            bad("TP", f"{model.name} has no default TP/PP split in the AIAK table (#N/A): "
                      "set both TP and PP, e.g. \"TP\": \"1\", \"PP\": \"1\"")
        else:
            tp, pp = model.tp, model.pp

    if not evals:
        for key in EVAL_KEYS:
            if _text(raw.get(key)):
                bad(key, "only used with EVAL (a list of benchmark names)")
    options: Dict[str, Any] = {}
    for key, default in list(OPTIONAL.items()) + list(PRETRAIN_SFT_KEYS.items()) + list(EVAL_KEYS.items()):
        value = raw.get(key, default)
        if key in ("GPUS_PER_REPLICA", "SEQ_LENGTH"):
            number = _positive(value)
            if number is None:
                bad(key, f"must be a positive integer, found {describe(value)}")
            options[key] = number
        elif key == "ENABLE_RDMA":
            flag = _boolean(value)
            if flag is None:
                bad(key, f"must be true or false, found {describe(value)}")
            options[key] = flag
        elif key == "PRIORITY" and value is not None and _text(value) not in PRIORITIES:
            bad(key, f"must be high, normal or low, found {describe(value)}")
        elif key == "MOUNT_PATH" and _text(value) and not posixpath.isabs(_text(value)):
            bad(key, f"must be an absolute path in the container such as \"/root/pfs\", "
                     f"found {describe(value)}")
        elif key == "GPU_RESOURCE" and not _text(value):
            bad(key, "must not be empty, e.g. \"baidu.com/a800_80g_cgpu\"")
        else:
            options[key] = _text(value) or None if value is not None else None
    if problems:
        raise _one_line(source, problems)
    assert model is not None and replicas is not None
    if options["MOUNT_PATH"]:
        options["MOUNT_PATH"] = posixpath.normpath(options["MOUNT_PATH"])
    if dataset is None:  # the user's own data, named by DATASET_NAME (or the URL's file name)
        url = options["DATASET_URL"]
        dataset = tables.Dataset(dataset_name or posixpath.basename(url.rstrip("/")), url)
    return AiakSpec(model=model, dataset=dataset, replicas=replicas, version=version, phase=phase,
                    tp=tp, pp=pp, json_keys=json_keys, image=image, options=options,
                    sft_dataset=sft_dataset, evals=evals)


def _eval_names(value: Any, bad: Any) -> List[str]:
    """EVAL's benchmark names, or [] after reporting (via ``bad``) why the value is unusable."""
    example = 'e.g. "EVAL": ["ceval", "mmlu"]'
    if not isinstance(value, list) or not value:
        found = describe(value) if isinstance(value, str) else f"a JSON {json_type(value)}"
        bad("EVAL", f"must be a non-empty list of benchmark names, {example}; found {found}")
        return []
    if len(value) > MAX_EVALS:
        bad("EVAL", f"at most {MAX_EVALS} benchmarks (one job each), found {len(value)}")
        return []
    seen: Dict[str, str] = {}
    for index, name in enumerate(value):
        if not isinstance(name, str) or not EVAL_NAME_RE.fullmatch(name):
            shown = describe(name) if isinstance(name, str) else f"a JSON {json_type(name)}"
            bad("EVAL", f"EVAL[{index}] must be a benchmark name of letters, digits, '.', '_' or "
                        f"'-' starting with a letter or digit (at most 64), found {shown}")
            return []
        key = re.sub(r"[^a-z0-9]+", "-", name.lower())  # what the job name keeps of it
        if key in seen:
            bad("EVAL", f"EVAL[{index}] {describe(name)} repeats {describe(seen[key])} (job names "
                        "ignore case and '.', '_', '-'): give each benchmark once")
            return []
        seen[key] = name
    return list(value)


def _path_part(name: str) -> str:
    """A model or dataset name as one folder name (``STDiT-XL/2`` -> ``STDiT-XL_2``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "unnamed"


def default_chat_template(model: tables.Model) -> str:
    """AIAK's --chat-template for a model: the series name, except where AIAK's examples differ.

    AIAK's examples/<family>/finetuning/preprocess_data.sh pass ``--chat-template qwen`` for
    every Qwen generation and ``mistral`` for Mixtral (llama2, llama3, llama3.1, baichuan2: the
    series name).
    """
    series = model.series.lower()
    if series.startswith("qwen"):
        return "qwen"
    return {"mixtral": "mistral"}.get(series, series)


def default_train_script(model: tables.Model, phase: str) -> str:
    """AIAK's example launcher: examples/<series>/{pretrain,finetuning}/<phase>_<name>.sh."""
    name = model.name.replace("-", "_")
    if phase == "pretrain":
        return f"{AIAK_ROOT}/examples/{model.series}/pretrain/pretrain_{name}.sh"
    return f"{AIAK_ROOT}/examples/{model.series}/finetuning/sft_{name}.sh"


@dataclass
class Step:
    """One job of the chain: its phase (in its name), kind (its script), envs and name part."""

    phase: str
    kind: str
    envs: List[Dict[str, str]]
    label: str = ""  # the benchmark of an eval step: part of the job name


def indexed_data_path(prefix: str, json_keys: str) -> str:
    """What training reads after preprocess_pretrain_data.py --output-prefix PREFIX.

    Megatron's preprocessing writes ``<prefix>_<key>_document.{bin,idx}`` for each --json-keys
    key; one key is the data path itself, several are a blend with equal weights
    (``1 <prefix>_a_document 1 <prefix>_b_document``), which --data-path takes as is.
    """
    paths = [f"{prefix}_{key}_document" for key in json_keys.split()]
    return paths[0] if len(paths) == 1 else " ".join(f"1 {p}" for p in paths)


def plan_steps(spec: AiakSpec, mount: str) -> List[Step]:
    """The chain's steps with their parameters as job envs. Every path lives under the mount.

    Layout under ``mount``: ``models/<model>/hf`` (HF weights, also the tokenizer),
    ``models/<model>/mcore/tp<TP>_pp<PP>`` (converted), ``datasets/<dataset>/<raw file>`` and
    ``datasets/<dataset>/processed/<model>/<phase>``, ``checkpoints/<model>/<phase>/<version>``,
    ``tensorboard/<model>/<phase>/<version>``, ``eval/<model>/<phase>/<version>/<benchmark>``.
    Shared inputs are reused across versions. Every
    training uses the TP/PP the checkpoint it loads was converted (or trained) with.
    """
    model, opts = spec.model, spec.options
    mount = mount.rstrip("/")  # a mount at "/" gives "/models/...", not "//models/..."
    model_dir = f"{mount}/models/{_path_part(model.name)}"
    hf_dir = f"{model_dir}/hf"
    converted = f"{model_dir}/mcore/tp{spec.tp}_pp{spec.pp}"

    def preprocess(phase: str, dataset: tables.Dataset, url: str) -> Tuple[List[Tuple[str, Any]], str]:
        dataset_dir = f"{mount}/datasets/{_path_part(dataset.name)}"
        raw_file = _path_part(posixpath.basename(url.rstrip("/")) or dataset.name)
        processed = f"{dataset_dir}/processed/{_path_part(model.name)}/{phase}"
        pairs: List[Tuple[str, Any]] = [
            ("TRAINING_PHASE", phase), ("DATASET_URL", url),
            ("INPUT_DATA", f"{dataset_dir}/{raw_file}"), ("TOKENIZER_PATH", hf_dir)]
        if phase == "pretrain":  # Megatron's indexed dataset, see indexed_data_path
            prefix = f"{processed}/{_path_part(dataset.name)}"
            data_path = indexed_data_path(prefix, spec.json_keys)
            pairs += [("OUTPUT_PREFIX", prefix), ("DATA_PATH", data_path), ("JSON_KEYS", spec.json_keys)]
        else:  # a tokenized dataset directory, trained with --is-tokenized-data
            data_path = processed
            pairs += [("DATA_PATH", data_path),
                      ("CHAT_TEMPLATE", opts["CHAT_TEMPLATE"] or default_chat_template(model)),
                      ("SEQ_LENGTH", opts["SEQ_LENGTH"])]
        return pairs, data_path

    def train(phase: str, load: str, data_path: str, script: Optional[str]) -> List[Tuple[str, Any]]:
        run = f"{_path_part(model.name)}/{phase}/{spec.version}"
        return [("CUDA_DEVICE_MAX_CONNECTIONS", 1), ("TRAINING_PHASE", phase),
                ("TRAIN_SCRIPT", script or default_train_script(model, phase)),
                ("TP", spec.tp), ("PP", spec.pp), ("LOAD", load),
                ("SAVE", f"{mount}/checkpoints/{run}"), ("DATA_PATH", data_path),
                ("TOKENIZER_PATH", hf_dir), ("TENSORBOARD_PATH", f"{mount}/tensorboard/{run}"),
                ("GPUS_PER_NODE", opts["GPUS_PER_REPLICA"])]

    first = "pretrain" if spec.phase == "pretrain+sft" else spec.phase
    data, data_path = preprocess(first, spec.dataset, opts["DATASET_URL"] or spec.dataset.url)
    trained = train(first, converted, data_path, opts["TRAIN_SCRIPT"])
    steps: List[Tuple[str, str, List[Tuple[str, Any]]]] = [
        (first, "convert", [("MODEL_NAME", model.name), ("MODEL_URL", opts["MODEL_URL"] or model.url),
                            ("LOAD", hf_dir), ("SAVE", converted), ("TP", spec.tp), ("PP", spec.pp)]),
        (first, "preprocess", data),
        (first, "train", trained)]
    if spec.phase == "pretrain+sft":
        assert spec.sft_dataset is not None
        sft_data, sft_path = preprocess("sft", spec.sft_dataset, spec.sft_dataset.url)
        pretrained = dict(trained)["SAVE"]  # the SFT fine-tunes what pretraining saved
        steps += [("sft", "preprocess", sft_data),
                  ("sft", "train", train("sft", pretrained, sft_path, opts["SFT_TRAIN_SCRIPT"]))]
    planned = [Step(phase, kind, _envs(pairs)) for phase, kind, pairs in steps]
    if spec.evals:  # evaluate what the last training saved, then one report over all results
        last_phase, last = steps[-1][0], dict(steps[-1][2])
        eval_dir = f"{mount}/eval/{_path_part(model.name)}/{last_phase}/{spec.version}"
        command = [("EVAL_COMMAND", opts["EVAL_COMMAND"])] if opts["EVAL_COMMAND"] else []
        for bench in spec.evals:
            planned.append(Step(last_phase, "eval", _envs([
                ("EVAL_BENCHMARK", bench), ("LOAD", last["SAVE"]), ("TP", spec.tp), ("PP", spec.pp),
                ("TOKENIZER_PATH", hf_dir), ("EVAL_OUTPUT", f"{eval_dir}/{bench}")] + command), bench))
        planned.append(Step(last_phase, "report", _envs([
            ("EVAL_BENCHMARKS", " ".join(spec.evals)), ("EVAL_DIR", eval_dir), ("LOAD", last["SAVE"])])))
    return planned


def _envs(pairs: List[Tuple[str, Any]]) -> List[Dict[str, str]]:
    return [{"name": n, "value": str(v)} for n, v in pairs]


def _depends_on(steps: List[Step], names: List[str]) -> List[List[str]]:
    """Each job's dependencies by name: with EVAL the chain is a graph, so the line is explicit."""
    if not any(step.kind == "eval" for step in steps):
        return [[] for _ in steps]  # a line: no dependsOn anywhere, exactly as before EVAL
    last_train = max(i for i, step in enumerate(steps) if step.kind == "train")
    evals = [names[i] for i, step in enumerate(steps) if step.kind == "eval"]
    return [[] if i == 0 else [names[i - 1]] if i <= last_train
            else [names[last_train]] if step.kind == "eval" else evals
            for i, step in enumerate(steps)]


def is_generated(chain: Dict[str, Any]) -> bool:
    """True when every job of an existing chain came from aiak-gen (safe to replace)."""
    jobs = chain.get("jobs", [])
    return isinstance(jobs, list) and all(
        isinstance(job, dict) and isinstance(job.get("jobChain"), dict)
        and job["jobChain"].get("generatedBy") == GENERATED_BY for job in jobs)


def _first_job(template: Dict[str, Any]) -> Dict[str, Any]:
    jobs = template.get("jobs")
    if isinstance(jobs, list) and jobs and isinstance(jobs[0], dict):
        return jobs[0]
    return {}


def _dict_list(value: Any) -> List[Dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [copy.deepcopy(x) for x in value if isinstance(x, dict)]


def _string(*values: Any) -> Optional[str]:
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


def _carried_envs(first_job: Dict[str, Any], api_config: Any) -> List[Dict[str, str]]:
    """The template job's own valid envs (NCCL_DEBUG, ...) minus ours and anything secret-looking."""
    spec = first_job.get("jobSpec")
    envs = spec.get("envs") if isinstance(spec, dict) else None
    secrets = set()
    if isinstance(api_config, dict):
        secrets = {api_config[k] for k in ("ak", "sk") if isinstance(api_config.get(k), str) and api_config[k]}
    kept = []
    for env in _dict_list(envs):
        name, value = env.get("name"), _env_value(env.get("value"))
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name) or value is None:
            continue
        if name.upper() in _OWN_ENV_NAMES or _SECRET_NAME.search(name):
            continue
        if any(s in value for s in secrets):
            continue
        kept.append({"name": name, "value": value})
    return kept


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
) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """Return the chain and its step scripts ``{file name: text}``; nothing is written.

    ``template`` is an existing chain: everything but its ``jobs`` is kept as is (pool, api
    settings, ...), and its first job lends datasources, labels, queue, priority and its
    non-secret envs to the generated jobs. ``pool``, ``pfs`` and ``mount_path`` override or
    supply the pool id, the PFS datasource name and its mount path.
    """
    if not isinstance(spec, AiakSpec):
        spec = parse_spec(spec, spec_source, known_tables)
    template = copy.deepcopy(template) if template else {}
    first_job = _first_job(template)
    chain: Dict[str, Any] = {k: v for k, v in template.items() if k != "jobs"}
    if pool:
        chain["resourcePoolId"] = pool
    if not isinstance(chain.get("resourcePoolId"), str) or not chain["resourcePoolId"].strip():
        where = f"{template_source} has no resourcePoolId" if template else "no resource pool"
        raise UsageError(f"{where}: pass --pool ID (your AIHC resource pool)")

    datasources = (_dict_list(first_job.get("datasources"))
                   or _dict_list(template.get("datasources")))
    if pfs or mount_path or not datasources:
        if not pfs and not datasources:
            where = f"{template_source} has no datasources" if template else "no storage"
            raise UsageError(f"{where}: pass --pfs NAME (your PFS datasource; mounted at "
                             f"--mount-path, default MOUNT_PATH or {DEFAULT_MOUNT})")
        base = datasources[0] if datasources else {"type": "pfs"}
        mount = (mount_path or (None if datasources else spec.options["MOUNT_PATH"])
                 or _string(base.get("mountPath")) or DEFAULT_MOUNT)
        if not posixpath.isabs(mount):
            where = "--mount-path" if mount_path else f"{template_source}: jobs[0].datasources[0].mountPath"
            raise UsageError(f"{where} must be an absolute path, found {describe(mount)}")
        first = dict(base, type=_string(base.get("type")) or "pfs", name=pfs or base.get("name"),
                     mountPath=mount)
        datasources = [first] + datasources[1:]
    mounts = [str(d["mountPath"]) for d in datasources if isinstance(d.get("mountPath"), str)]
    root = spec.options["MOUNT_PATH"] or (mounts[0] if mounts else DEFAULT_MOUNT)
    root = posixpath.normpath(root)
    if not any(path_under(root, m) for m in mounts):
        raise UsageError(
            f"{spec_source}: MOUNT_PATH: {root} is not on the job storage (mounted at "
            f"{', '.join(mounts) or 'nowhere'}), so the steps could not share files: set "
            f"MOUNT_PATH under {mounts[0] if mounts else DEFAULT_MOUNT} or pass "
            f"--mount-path {root}")

    queue = _string(spec.options["QUEUE"], first_job.get("queue"), template.get("queue")) or "default"
    priority = spec.options["PRIORITY"] or first_job.get("priority")
    if priority not in PRIORITIES:
        priority = "normal"
    labels = [label for label in _dict_list(first_job.get("labels")) or _dict_list(template.get("labels"))
              if isinstance(label.get("key"), str)]
    carried = _carried_envs(first_job, template.get("api_config"))
    jobs = []
    steps = plan_steps(spec, root)
    names = [make_job_name("-".join(p for p in (step.phase, spec.model.name, step.kind, step.label,
                                                spec.version) if p)) for step in steps]
    for step, name, depends_on in zip(steps, names, _depends_on(steps, names)):
        job: Dict[str, Any] = {
            "name": name,
            "queue": queue,
            "priority": priority,
            "jobFramework": "PyTorchJob",
            "jobSpec": {
                "command": {**SCRIPT_NAMES, **EVAL_SCRIPT_NAMES}[step.kind],
                "image": spec.image,
                # converting and tokenizing are single-node work; only training scales out
                "replicas": spec.replicas if step.kind == "train" else 1,
                "resources": [{"name": spec.options["GPU_RESOURCE"],
                               "quantity": spec.options["GPUS_PER_REPLICA"]}],
                "enableRDMA": spec.options["ENABLE_RDMA"],
                "envs": copy.deepcopy(carried) + step.envs,
            },
            "datasources": copy.deepcopy(datasources),
        }
        if labels:
            job["labels"] = copy.deepcopy(labels)
        job["jobChain"] = {"generatedBy": GENERATED_BY}
        if depends_on:
            job["jobChain"]["dependsOn"] = depends_on
        if step.kind == "train":  # Megatron checkpoints in SAVE: a retry after an infra failure resumes there
            save = next(e["value"] for e in step.envs if e["name"] == "SAVE")
            job["jobChain"]["retries"] = dict(TRAIN_RETRIES)
            if save.startswith("/"):  # (a relative mount is refused below, for itself)
                job["jobChain"]["checkpoint"] = {"dir": save}
        jobs.append(job)
    chain["jobs"] = jobs
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
