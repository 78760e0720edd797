"""The chain's steps and their parameters (job envs), and where each step's files live on the mount.

Every derived folder is keyed by what it was made from, so changing an input never reuses a
folder made from the old one: the weights and the converted checkpoints live under a short hash
of ``MODEL_URL``, the raw data under a hash of its URL, and tokenized data under a hash of the
data, the tokenizer and the settings that shape it (``JSON_KEYS``; ``CHAT_TEMPLATE`` and
``SEQ_LENGTH``). The step scripts also record each source beside what they made and refuse a
folder that records another (a hash collision, a hand-made folder, an edited chain).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from job_chain.aiak import tables
from job_chain.aiak.description import AiakSpec

KEY_LENGTH = 8  # hex digits of sha256: a collision is also caught by the recorded source
FETCH_ENV_NAMES = ("BOS_ENDPOINT", "JOB_CHAIN_CONFIG", "JOB_CHAIN_RUNTIME")
# where AIAK lives in the image, when the description says (else each script finds it)
INSTALL_ENV_NAMES = ("AIAK_TRAINING_PATH", "MEGATRON_PATH")
STEP_ENV_NAMES: Dict[str, Tuple[str, ...]] = {
    "convert": ("MODEL_NAME", "MODEL_URL", "LOAD", "SAVE", "TP", "PP", "EP", "NUM_EXPERTS", "CONVERT_CONFIG",
                "CONVERT_ARGS", "LOONGFORGE_CONFIG", "LOONGFORGE_CONVERT") + FETCH_ENV_NAMES + INSTALL_ENV_NAMES,
    "preprocess": ("TRAINING_PHASE", "DATASET_URL", "INPUT_DATA", "TOKENIZER_PATH", "OUTPUT_PREFIX",
                   "DATA_PATH", "JSON_KEYS", "MODEL_FAMILY", "CHAT_TEMPLATE", "SEQ_LENGTH") + FETCH_ENV_NAMES
    + INSTALL_ENV_NAMES,
    "train": ("CUDA_DEVICE_MAX_CONNECTIONS", "TRAINING_PHASE", "TRAIN_SCRIPT", "TP", "PP", "EP", "LOAD",
              "SAVE", "DATA_PATH", "TOKENIZER_PATH", "TENSORBOARD_PATH", "GPUS_PER_NODE", "SEQ_LENGTH")
    + INSTALL_ENV_NAMES,
    "eval": ("EVAL_BENCHMARK", "LOAD", "TP", "PP", "EP", "TOKENIZER_PATH", "EVAL_OUTPUT", "EVAL_COMMAND")
    + INSTALL_ENV_NAMES,
    "report": ("EVAL_BENCHMARKS", "EVAL_DIR", "LOAD"),
}
# The evaluation is one matrix job over the benchmarks (docs/graphs.md "Matrices"): each point's
# envs name its benchmark through this reference, replaced when the point is submitted.
EVAL_MATRIX = "benchmark"
BENCHMARK_REF = f"${{matrix.{EVAL_MATRIX}}}"


@dataclass
class Step:
    """One job of the chain: its phase (in its name), kind (its script) and envs."""

    phase: str
    kind: str
    envs: List[Dict[str, str]]

    def env(self, name: str) -> Optional[str]:
        return next((e["value"] for e in self.envs if e["name"] == name), None)


def path_part(name: str) -> str:
    """A model or dataset name as one folder name (``STDiT-XL/2`` -> ``STDiT-XL_2``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "unnamed"


def source_key(*parts: Any) -> str:
    """A short, stable hash of what a folder is made from."""
    text = "\n".join(str(p) for p in parts)
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:KEY_LENGTH]


def indexed_data_path(prefix: str, json_keys: str) -> str:
    """What training reads after preprocess_pretrain_data.py --output-prefix PREFIX.

    Megatron's preprocessing writes ``<prefix>_<key>_document.{bin,idx}`` for each --json-keys
    key; one key is the data path itself, several are a blend with equal weights
    (``1 <prefix>_a_document 1 <prefix>_b_document``), which --data-path takes as is.
    """
    paths = [f"{prefix}_{key}_document" for key in json_keys.split()]
    return paths[0] if len(paths) == 1 else " ".join(f"1 {p}" for p in paths)


def _envs(pairs: List[Tuple[str, Any]]) -> List[Dict[str, str]]:
    return [{"name": n, "value": str(v)} for n, v in pairs if v is not None]


def plan_steps(spec: AiakSpec, mount: str, fetch: Optional[List[Tuple[str, str]]] = None) -> List[Step]:
    """The chain's steps with their parameters as job envs. Every path lives under the mount.

    Layout under ``mount`` (``<m>``: a hash of MODEL_URL, ``<d>``: of the data URL, ``<t>``: of
    what shapes tokenized data): ``models/<model>/<m>/hf`` (HF weights, also the tokenizer),
    ``models/<model>/<m>/mcore/tp<TP>_pp<PP>[_ep<EP>]`` (converted),
    ``datasets/<dataset>/<d>/<raw file>``, ``datasets/<dataset>/processed/<model>/<phase>-<t>``,
    ``checkpoints/<model>/<phase>/<version>``, ``tensorboard/<model>/<phase>/<version>``,
    ``eval/<model>/<phase>/<version>/<benchmark>`` (the matrix point's, :data:`BENCHMARK_REF`).
    ``fetch`` are the envs a step that downloads needs to find credentials and the BOS endpoint
    (never a secret).
    """
    model, opts, aiak = spec.model, spec.options, spec.aiak
    mount = mount.rstrip("/")  # a mount at "/" gives "/models/...", not "//models/..."
    model_dir = f"{mount}/models/{path_part(model.name)}/{source_key(aiak.model_url)}"
    hf_dir = f"{model_dir}/hf"
    moe = aiak.num_experts is not None
    split = f"tp{spec.tp}_pp{spec.pp}" + (f"_ep{aiak.ep}" if moe else "")
    converted = f"{model_dir}/mcore/{split}"
    ep = [("EP", aiak.ep)] if moe else []
    fetch_pairs: List[Tuple[str, Any]] = list(fetch or [])
    install: List[Tuple[str, Any]] = [(key, opts[key]) for key in INSTALL_ENV_NAMES if opts.get(key)]
    if opts["BOS_ENDPOINT"]:
        fetch_pairs.append(("BOS_ENDPOINT", opts["BOS_ENDPOINT"]))

    def preprocess(phase: str, dataset: tables.Dataset, url: str) -> Tuple[List[Tuple[str, Any]], str]:
        dataset_dir = f"{mount}/datasets/{path_part(dataset.name)}"
        raw_file = path_part(posixpath.basename(url.rstrip("/")) or dataset.name)
        shaping: Tuple[Any, ...] = (spec.json_keys,) if phase == "pretrain" else (aiak.chat_template, aiak.seq_length)
        if phase == "pretrain" and model.model_family:  # another tokenization (Qwen-1's eos), another folder
            shaping += (model.model_family,)
        key = source_key(url, aiak.model_url, phase, *shaping)
        processed = f"{dataset_dir}/processed/{path_part(model.name)}/{phase}-{key}"
        pairs: List[Tuple[str, Any]] = [
            ("TRAINING_PHASE", phase), ("DATASET_URL", url),
            ("INPUT_DATA", f"{dataset_dir}/{source_key(url)}/{raw_file}"), ("TOKENIZER_PATH", hf_dir)]
        if phase == "pretrain":  # Megatron's indexed dataset, see indexed_data_path
            prefix = f"{processed}/{path_part(dataset.name)}"
            data_path = indexed_data_path(prefix, spec.json_keys)
            pairs += [("OUTPUT_PREFIX", prefix), ("DATA_PATH", data_path), ("JSON_KEYS", spec.json_keys),
                      ("MODEL_FAMILY", model.model_family or None)]
        else:  # a tokenized dataset directory, trained with --is-tokenized-data
            data_path = processed
            pairs += [("DATA_PATH", data_path), ("CHAT_TEMPLATE", aiak.chat_template),
                      ("SEQ_LENGTH", aiak.seq_length)]
        return pairs + fetch_pairs + install, data_path

    def train(phase: str, load: str, data_path: str) -> List[Tuple[str, Any]]:
        run = f"{path_part(model.name)}/{phase}/{spec.version}"
        return [("CUDA_DEVICE_MAX_CONNECTIONS", 1), ("TRAINING_PHASE", phase),
                ("TRAIN_SCRIPT", aiak.launchers[phase]), ("TP", spec.tp), ("PP", spec.pp), *ep,
                ("LOAD", load), ("SAVE", f"{mount}/checkpoints/{run}"), ("DATA_PATH", data_path),
                ("TOKENIZER_PATH", hf_dir), ("TENSORBOARD_PATH", f"{mount}/tensorboard/{run}"),
                ("GPUS_PER_NODE", opts["GPUS_PER_REPLICA"]),
                ("SEQ_LENGTH", aiak.seq_length if phase == "sft" else None)] + install

    first = spec.phases[0]
    data, data_path = preprocess(first, spec.dataset, opts["DATASET_URL"] or spec.dataset.url)
    trained = train(first, converted, data_path)
    experts = [("NUM_EXPERTS", aiak.num_experts)] if moe else []
    steps: List[Tuple[str, str, List[Tuple[str, Any]]]] = [
        (first, "convert", [("MODEL_NAME", model.name), ("MODEL_URL", aiak.model_url), ("LOAD", hf_dir),
                            ("SAVE", converted), ("TP", spec.tp), ("PP", spec.pp), *ep, *experts,
                            ("CONVERT_CONFIG", aiak.convert_config), ("CONVERT_ARGS", model.convert_args or None),
                            ("LOONGFORGE_CONFIG", model.loongforge_config or None),
                            ("LOONGFORGE_CONVERT", model.loongforge_convert or None)] + fetch_pairs + install),
        (first, "preprocess", data),
        (first, "train", trained)]
    if spec.phase == "pretrain+sft":
        assert spec.sft_dataset is not None
        sft_data, sft_path = preprocess("sft", spec.sft_dataset, spec.sft_dataset.url)
        pretrained = dict(trained)["SAVE"]  # the SFT fine-tunes what pretraining saved
        steps += [("sft", "preprocess", sft_data), ("sft", "train", train("sft", pretrained, sft_path))]
    planned = [Step(phase, kind, _envs(pairs)) for phase, kind, pairs in steps]
    if spec.evals:  # evaluate what the last training saved (one point per benchmark), then report
        last_phase, last = steps[-1][0], dict(steps[-1][2])
        eval_dir = f"{mount}/eval/{path_part(model.name)}/{last_phase}/{spec.version}"
        command = [("EVAL_COMMAND", opts["EVAL_COMMAND"])] if opts["EVAL_COMMAND"] else []
        planned.append(Step(last_phase, "eval", _envs([
            ("EVAL_BENCHMARK", BENCHMARK_REF), ("LOAD", last["SAVE"]), ("TP", spec.tp), ("PP", spec.pp), *ep,
            ("TOKENIZER_PATH", hf_dir), ("EVAL_OUTPUT", f"{eval_dir}/{BENCHMARK_REF}")] + command + install)))
        planned.append(Step(last_phase, "report", _envs([
            ("EVAL_BENCHMARKS", " ".join(spec.evals)), ("EVAL_DIR", eval_dir), ("LOAD", last["SAVE"])])))
    return planned
