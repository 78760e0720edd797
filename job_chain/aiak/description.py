"""The description (``aiak_job_info.json``): its keys, and the checks that turn it into an AiakSpec.

Every problem is reported at once and becomes one line naming the file, the key and the fix
(:func:`parse_spec`); nothing here knows about chain files or step scripts.
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from job_chain.aiak import layout, tables
from job_chain.aiak.resources import RESOURCE_KINDS, resources_problem
from job_chain.aihc.spec import PRIORITIES
from job_chain.errors import UsageError
from job_chain.util.jsonfile import describe, json_type
from job_chain.util.suggest import closest

PHASES = ("pretrain", "sft", "pretrain+sft")
REQUIRED = ("MODEL_NAME", "REPLICAS", "VERSION", "TRAINING_PHASE", "TP", "PP", "DATASET_NAME",
            "JSON_KEYS", "IMAGE")
# Optional keys and their defaults (None: derived from the tables, the template or the model).
# GPU defaults follow the AIHC create-job example: 8 x baidu.com/a800_80g_cgpu with RDMA.
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
    "SEQ_LENGTH": None,  # the SFT launcher's --seq-length (the row's sft_seq_length)
    "EP": None,  # MoE only: expert-parallel size (default the row's ep)
    "CONVERT_CONFIG": None,  # the converter's config (default the row's convert_config)
    "BOS_ENDPOINT": None,  # where the jobs fetch bos:/ URLs (default: from the AIHC host's region)
    "RESOURCES": None,  # per step kind: AIHC resources replacing the defaults
    # where AIAK is installed in the image (default: whichever of AIAK's and LoongForge's usual
    # folders the image has, see the step scripts)
    "AIAK_TRAINING_PATH": None,
    "MEGATRON_PATH": None,
}
INSTALL_KEYS = ("AIAK_TRAINING_PATH", "MEGATRON_PATH")
# Optional keys of TRAINING_PHASE pretrain+sft only (refused with the other phases).
PRETRAIN_SFT_KEYS: Dict[str, Any] = {
    "SFT_DATASET_NAME": None,  # the SFT data (a datasets.csv row); required with pretrain+sft
    "SFT_TRAIN_SCRIPT": None,  # the SFT launcher (default the row's sft_launcher)
}
# EVAL: benchmark names, each a point of the eval matrix (part of its job name) and a folder name
# on the mount.
EVAL_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_EVALS = 16
# Optional keys used only with EVAL (refused without it).
EVAL_KEYS: Dict[str, Any] = {
    "EVAL_COMMAND": None,  # the evaluation command aiak_eval.sh runs (AIAK documents none)
    "EVAL_PARALLEL": None,  # the eval matrix's maxParallel: benchmarks evaluated at once (default all)
}
_VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_POSITIVE_RE = re.compile(r"[0-9]+")
_BOS_URL_RE = re.compile(r"bos:/+[a-z0-9][a-z0-9-]{1,62}(/.*)?")
_ENDPOINT_RE = re.compile(r"(https?://)?[A-Za-z0-9.-]+(:[0-9]{1,5})?/?")
MAX_COUNT = 2**31 - 1  # replicas, GPUs, TP/PP, sequence length: Kubernetes int32 fields
MAX_NAME = 200  # VERSION and DATASET_NAME name folders; a file name has at most 255 bytes
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,40}")  # shown as is in messages; other keys quoted
# keys whose own checks explain a wrong number or boolean best ("must be a positive integer")
_NUMBER_KEYS = {"REPLICAS", "TP", "PP", "EP", "GPUS_PER_REPLICA", "SEQ_LENGTH", "ENABLE_RDMA", "EVAL_PARALLEL"}
_OBJECT_KEYS = {"EVAL", "RESOURCES"}  # values that are JSON arrays/objects by design


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
    aiak: layout.Resolved = field(default_factory=layout.Resolved)  # launchers, config, EP, ...

    @property
    def phases(self) -> Tuple[str, ...]:
        return training_phases(self.phase)


def training_phases(phase: str) -> Tuple[str, ...]:
    """The training phases of a TRAINING_PHASE, in order: pretrain+sft is two."""
    return ("pretrain", "sft") if phase == "pretrain+sft" else (phase,)


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def positive(value: Any) -> Optional[int]:
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


def _option_problem(key: str, value: Any) -> Optional[str]:
    """Why an optional value (already a string) is malformed, or None."""
    text = _text(value)
    if not text:
        return None
    if key in INSTALL_KEYS and not (posixpath.isabs(text) and tables.cell_problem("sft_launcher", text) is None):
        return f"must be an absolute path in the image such as \"/workspace/LoongForge\", found {describe(value)}"
    if key == "MOUNT_PATH" and not posixpath.isabs(text):
        return f"must be an absolute path in the container such as \"/root/pfs\", found {describe(value)}"
    if key == "PRIORITY" and text not in PRIORITIES:
        return f"must be high, normal or low, found {describe(value)}"
    if key in ("MODEL_URL", "DATASET_URL") and not _BOS_URL_RE.fullmatch(text):
        return f"must be a BOS URL such as \"bos:/bucket/path\", found {describe(value)}"
    if key == "DATASET_URL" and text.endswith("/"):
        return f"must name one file (the raw data), not a folder, found {describe(value)}"
    if key == "BOS_ENDPOINT" and not _ENDPOINT_RE.fullmatch(text):
        return f"must be a host such as \"bj.bcebos.com\" or a URL, found {describe(value)}"
    if key in ("CONVERT_CONFIG", "CHAT_TEMPLATE"):
        return tables.cell_problem(key.lower(), text)
    return None


def _options(raw: Dict[str, Any], bad: Any) -> Dict[str, Any]:
    """The optional keys with their defaults, each checked; problems go to ``bad``."""
    options: Dict[str, Any] = {}
    for key, default in list(OPTIONAL.items()) + list(PRETRAIN_SFT_KEYS.items()) + list(EVAL_KEYS.items()):
        value = raw.get(key, default)
        if key in ("GPUS_PER_REPLICA", "SEQ_LENGTH", "EP"):
            if key != "GPUS_PER_REPLICA" and (value is None or _text(value) == ""):
                options[key] = None  # the model's row decides
                continue
            options[key] = positive(value)
            if options[key] is None:
                bad(key, f"must be a positive integer, found {describe(value)}")
        elif key == "EVAL_PARALLEL":
            options[key] = _eval_parallel(value, bad)
        elif key == "ENABLE_RDMA":
            flag = _boolean(value)
            if flag is None:
                bad(key, f"must be true or false, found {describe(value)}")
            options[key] = flag
        elif key == "RESOURCES":
            problem = resources_problem(value) if value is not None else None
            if problem:
                bad(key, problem)
            options[key] = value or {}
        elif key == "GPU_RESOURCE" and not _text(value):
            bad(key, "must not be empty, e.g. \"baidu.com/a800_80g_cgpu\"")
        else:
            problem = _option_problem(key, value)
            if problem:
                bad(key, problem)
            options[key] = _text(value) or None if value is not None else None
    if options["MOUNT_PATH"]:
        options["MOUNT_PATH"] = posixpath.normpath(options["MOUNT_PATH"])
    return options


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
        close = closest(key, known)
        hint = f" (did you mean {close}?)" if close else f"; known keys: {', '.join(known)}"
        bad(key if _PLAIN_KEY.fullmatch(key) else describe(key, 40), "unknown key" + hint)
    for key in REQUIRED:
        if key not in raw:
            hint = {"TP": ' (use "" to take the AIAK default split)',
                    "PP": ' (use "" to take the AIAK default split)',
                    "JSON_KEYS": ' (use "" if none is needed, e.g. for sft)'}.get(key, "")
            bad(key, f"required key is missing: add \"{key}\" to the file{hint}")
    for key, value in raw.items():
        problem = _value_problem(str(key), value) if key in known and key not in _OBJECT_KEYS else None
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
        did_you_mean = tables.suggest(model_name, list(models))
        bad("MODEL_NAME", f"unknown model {describe(model_name)}{did_you_mean}; run aiak-gen --list-models "
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
    sft_dataset = _sft_dataset(raw, phase, datasets, bad)
    replicas = positive(raw["REPLICAS"])
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
    tp, pp = _split(raw, model, bad)
    if not evals:
        for key in EVAL_KEYS:
            if _text(raw.get(key)):
                bad(key, "only used with EVAL (a list of benchmark names)")
    options = _options(raw, bad)
    aiak = layout.Resolved()
    if model is not None and phase in PHASES:
        aiak = layout.resolve(model, training_phases(phase), options, bad)
    if model is not None and pp:
        layout.check_stages(model, pp, bad)
    if replicas and tp and pp and options["GPUS_PER_REPLICA"]:
        count = len(problems)
        layout.check_world(replicas, options["GPUS_PER_REPLICA"], tp, pp, aiak.ep, bad)
        if len(problems) == count:
            layout.check_batch(replicas, options["GPUS_PER_REPLICA"], tp, pp, aiak.ep, aiak.batches, bad)
    if problems:
        raise _one_line(source, problems)
    assert model is not None and replicas is not None
    if dataset is None:  # the user's own data, named by DATASET_NAME (or the URL's file name)
        url = options["DATASET_URL"]
        dataset = tables.Dataset(dataset_name or posixpath.basename(url.rstrip("/")), url)
    return AiakSpec(model=model, dataset=dataset, replicas=replicas, version=version, phase=phase,
                    tp=tp, pp=pp, json_keys=json_keys, image=image, options=options,
                    sft_dataset=sft_dataset, evals=evals, aiak=aiak)


def _sft_dataset(raw: Dict[str, Any], phase: str, datasets: Dict[str, tables.Dataset],
                 bad: Any) -> Optional[tables.Dataset]:
    """SFT_DATASET_NAME's row with pretrain+sft; the pretrain+sft keys refused with other phases."""
    sft_name = _text(raw.get("SFT_DATASET_NAME"))
    if phase != "pretrain+sft":
        for key in PRETRAIN_SFT_KEYS:
            if _text(raw.get(key)):
                bad(key, "only used with TRAINING_PHASE \"pretrain+sft\"")
        return None
    if not sft_name:
        bad("SFT_DATASET_NAME", "required with pretrain+sft: the dataset (a datasets.csv row) "
                                "the SFT phase is trained on, e.g. \"alpaca_zh-llama3-train\"")
    elif sft_name not in datasets:
        bad("SFT_DATASET_NAME", f"unknown dataset {describe(sft_name)}"
                                f"{tables.suggest(sft_name, list(datasets))}; run aiak-gen "
                                "--list-datasets, or add it to your own aiak_dict/datasets.csv")
    return datasets.get(sft_name)


def _split(raw: Dict[str, Any], model: Optional[tables.Model], bad: Any) -> Tuple[int, int]:
    """TP and PP from the description (both or neither), else the model's row."""
    tp_text, pp_text = _text(raw["TP"]), _text(raw["PP"])
    if bool(tp_text) != bool(pp_text):
        given, missing = ("TP", "PP") if tp_text else ("PP", "TP")
        bad(missing, f"{given} is set, so {missing} must be set too (or leave both \"\" for the "
                     "AIAK default split)")
        return 0, 0
    if tp_text:
        tp, pp = positive(raw["TP"]) or 0, positive(raw["PP"]) or 0
        if not tp:
            bad("TP", f"must be a positive integer such as \"2\", found {describe(raw['TP'])}")
        if not pp:
            bad("PP", f"must be a positive integer such as \"2\", found {describe(raw['PP'])}")
        return tp, pp
    if model is not None and (model.tp is None or model.pp is None):
        bad("TP", f"{model.name} has no default TP/PP split in the AIAK table (#N/A): "
                  "set both TP and PP, e.g. \"TP\": \"1\", \"PP\": \"1\"")
        return 0, 0
    return (model.tp or 0, model.pp or 0) if model is not None else (0, 0)


def _eval_parallel(value: Any, bad: Any) -> Optional[int]:
    """EVAL_PARALLEL: the eval matrix's maxParallel, or None (no cap: every benchmark at once)."""
    if value is None or _text(value) == "":
        return None
    cap = positive(value)
    if cap is None or cap > MAX_EVALS:
        bad("EVAL_PARALLEL", f"must be a whole number from 1 to {MAX_EVALS} (how many benchmarks are evaluated "
                             f"at once; leave it out for all at once), found {describe(value)}")
        return None
    return cap


def _eval_names(value: Any, bad: Any) -> List[str]:
    """EVAL's benchmark names, or [] after reporting (via ``bad``) why the value is unusable."""
    example = 'e.g. "EVAL": ["ceval", "mmlu"]'
    if not isinstance(value, list) or not value:
        found = describe(value) if isinstance(value, str) else f"a JSON {json_type(value)}"
        bad("EVAL", f"must be a non-empty list of benchmark names, {example}; found {found}")
        return []
    if len(value) > MAX_EVALS:
        bad("EVAL", f"at most {MAX_EVALS} benchmarks (one evaluation job each), found {len(value)}")
        return []
    seen: Dict[str, str] = {}
    for index, name in enumerate(value):
        if not isinstance(name, str) or not EVAL_NAME_RE.fullmatch(name):
            shown = describe(name) if isinstance(name, str) else f"a JSON {json_type(name)}"
            bad("EVAL", f"EVAL[{index}] must be a benchmark name of letters, digits, '.', '_' or "
                        f"'-' starting with a letter or digit (at most 64), found {shown}")
            return []
        key = re.sub(r"[^a-z0-9]+", "-", name.lower())  # what its point's job name shows of it
        if key in seen:
            bad("EVAL", f"EVAL[{index}] {describe(name)} repeats {describe(seen[key])} (names that differ "
                        "only in case or '.', '_', '-' give look-alike job names): give each benchmark once")
            return []
        seen[key] = name
    return list(value)


__all__ = ["AiakSpec", "EVAL_KEYS", "MAX_EVALS", "OPTIONAL", "PHASES", "PRETRAIN_SFT_KEYS", "REQUIRED",
           "RESOURCE_KINDS", "parse_spec", "positive"]
