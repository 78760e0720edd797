"""What an AIAK image holds, and what a model row must give for a chain to run end to end.

aiak-gen never guesses a path: a launcher, a converter config, a chat template, the SFT
sequence length and the weights' BOS URL come from the model's table row (shipped rows follow
AIAK's own example scripts, see docs/aiak-gen.md) or from the description, which overrides the
row. A chain that needs something neither gives is refused at generation, naming each missing
item, the row it looked at (``shipped`` or ``file:line``) and the key or column that fixes it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

from job_chain.aiak import tables

# The AIAK-Training-LLM checkout in AIAK's images (AIHC's AIAK pages, the SDK's job scripts).
AIAK_ROOT = "/workspace/AIAK-Training-LLM"
# preprocess_sft_data.py --chat-template choices (AIAK-Training, first commit of
# baidu-baige/LoongForge, tools/data_preprocess/preprocess_sft_data.py).
AIAK_CHAT_TEMPLATES = ("llama2", "llama2_zh", "llama3", "llama3.1", "baichuan", "baichuan2", "qwen",
                       "mistral", "qwen2-vl", "alpaca", "deepseek", "deepseek3")
# AIAK's launchers that load with --no-load-optim --no-load-rng, also when they resume their own
# checkpoint: a retried training starts with a fresh optimizer (examples/mixtral/... there).
NO_OPTIMIZER_RESUME = frozenset({
    "examples/mixtral/pretrain/pretrain_mixtral_8x7b.sh", "examples/mixtral/finetuning/sft_mixtral_8x7b.sh",
    "examples/mixtral/pretrain/pretrain_mixtral_8x22b.sh", "examples/mixtral/finetuning/sft_mixtral_8x22b.sh"})
# AIAK's launchers that cannot train a chain's step as shipped (same in AIAK-Training-Omni and
# LoongForge), and why: refused at generation unless TRAIN_SCRIPT / SFT_TRAIN_SCRIPT names another.
UNUSABLE_LAUNCHERS: Dict[str, Tuple[str, str]] = {  # launcher -> (what is wrong, what a launcher must do)
    "examples/qwen3/pretrain/pretrain_qwen3_235b_a22b.sh": (
        "has --save commented out, so it would train 50,000 iterations and save no checkpoint",
        "saves (--save $CHECKPOINT_PATH)"),
    "examples/qwen3/finetuning/sft_qwen3_235b_a22b.sh": (
        "has no --is-tokenized-data (it packs raw JSONL itself), so it cannot read the preprocess step's "
        "tokenized data", "takes --is-tokenized-data"),
}

Bad = Callable[[str, str], None]


@dataclass
class Resolved:
    """What the chain takes from the row or the description (empty where not needed)."""

    model_url: str = ""
    convert_config: str = ""
    launchers: Dict[str, str] = field(default_factory=dict)  # training phase -> launcher
    chat_template: str = ""
    seq_length: Optional[int] = None
    ep: int = 1  # expert-parallel size; 1 for a dense model
    num_experts: Optional[int] = None
    batches: Dict[str, Tuple[int, int]] = field(default_factory=dict)  # phase -> (global, micro) batch


def row_name(model: tables.Model) -> str:
    """Where a row came from, as a message names it."""
    origin = model.origin
    if origin is None or origin.layer == tables.SHIPPED:
        return "the shipped table"
    return f"{origin.file}:{origin.line}"


def resolve(model: tables.Model, phases: Tuple[str, ...], options: Dict[str, Any], bad: Bad) -> Resolved:
    """The row's AIAK items, overridden by the description; each missing one reported via ``bad``."""
    missing: List[str] = []
    got = Resolved(model_url=options["MODEL_URL"] or model.url,
                   convert_config=options["CONVERT_CONFIG"] or model.convert_config)
    if not got.model_url:
        missing.append("no BOS copy of its weights (empty URL column): set MODEL_URL to the bos:/ path of "
                       f"{model.hf_name or model.name}")
    shipped = row_name(model) == "the shipped table"
    if not got.convert_config:
        absent = f"; AIAK has no tools/convert_checkpoint/config/{model.name}.json" if shipped else ""
        missing.append(f"no converter config (convert_config column empty{absent}): set CONVERT_CONFIG to a "
                       "config name or an absolute .json path")
    for phase in phases:
        key = "TRAIN_SCRIPT" if phase == phases[0] else "SFT_TRAIN_SCRIPT"
        row_launcher = model.pretrain_launcher if phase == "pretrain" else model.sft_launcher
        launcher = options[key] or row_launcher
        if launcher and not options[key] and launcher in UNUSABLE_LAUNCHERS:
            wrong, need = UNUSABLE_LAUNCHERS[launcher]
            missing.append(f"AIAK's {phase} launcher {launcher} {wrong}: set {key} to a launcher of your own "
                           f"that {need}")
        elif launcher:
            got.launchers[phase] = launcher
            global_batch, micro_batch = model.batch(phase)
            if launcher == row_launcher and global_batch and micro_batch:  # the row's numbers are its launcher's
                got.batches[phase] = (global_batch, micro_batch)
        else:
            column = "pretrain_launcher" if phase == "pretrain" else "sft_launcher"
            absent = "; AIAK ships none for it" if shipped else ""
            missing.append(f"no AIAK {phase} launcher ({column} column empty{absent}): set {key}")
    if "sft" in phases:
        got.chat_template = options["CHAT_TEMPLATE"] or model.chat_template
        got.seq_length = options["SEQ_LENGTH"] or model.sft_seq_length
        if not got.chat_template:
            missing.append("no chat template (chat_template column): set CHAT_TEMPLATE, one of AIAK's "
                           + ", ".join(AIAK_CHAT_TEMPLATES))
        if not got.seq_length:
            missing.append("no SFT sequence length (sft_seq_length column): set SEQ_LENGTH to your SFT "
                           "launcher's --seq-length")
    if missing:
        shown = "; ".join(missing)
        bad("MODEL_NAME", f"{model.name} ({row_name(model)}) cannot run this chain: {shown}")
    got.num_experts = model.num_experts
    ep = options["EP"]
    if ep not in (None, 1) and model.num_experts is None:  # EP 1 (no expert parallelism) is every dense model's
        bad("EP", f"{model.name} is not a mixture-of-experts model (no num_experts in {row_name(model)}): "
                  "remove EP, or give the row num_experts")
    elif model.num_experts is not None:
        got.ep = ep or model.ep or 1
        if model.num_experts % got.ep:
            bad("EP", f"must divide the {model.num_experts} experts of {model.name}, found {got.ep}")
    return got


def check_world(replicas: int, gpus: int, tp: int, pp: int, ep: int, bad: Bad) -> None:
    """Megatron's rule: the GPUs are TP x PP x DP, and EP divides DP (parallel_state.py)."""
    world, unit = replicas * gpus, tp * pp * ep
    if world % unit == 0:
        return
    parts = f"TP {tp} x PP {pp}" + (f" x EP {ep}" if ep > 1 else "")
    need = unit // math.gcd(unit, gpus)  # the fewest replicas whose GPUs are a multiple of unit
    bad("REPLICAS", f"{replicas} x {gpus} GPUs cannot hold {parts} = {unit}: Megatron needs the GPU count "
                    f"to be a multiple of {unit} (e.g. REPLICAS {need}, or another TP/PP"
                    f"{'/EP' if ep > 1 else ''})")


def divisors(number: int) -> List[int]:
    """The divisors of ``number`` (at most 2**31), in order (trial division up to its square root)."""
    low = [d for d in range(1, math.isqrt(number) + 1) if number % d == 0]
    return sorted(set(low + [number // d for d in low]))


def check_batch(replicas: int, gpus: int, tp: int, pp: int, ep: int, batches: Dict[str, Tuple[int, int]],
                bad: Bad) -> None:
    """Megatron's rule: the launcher's global batch is a multiple of micro batch x data-parallel size
    (DP = GPUs / (TP x PP)); else training stops at start, after convert and preprocess ran. The
    valid replica counts come from the divisors of global / micro (DP must be one, and a multiple
    of EP), so a huge split costs no loop over replica counts."""
    for phase, (global_batch, micro_batch) in batches.items():
        dp = replicas * gpus // (tp * pp)
        if global_batch % (micro_batch * dp) == 0:
            continue
        sizes = divisors(global_batch // micro_batch) if global_batch % micro_batch == 0 else []
        valid = sorted(size * tp * pp // gpus for size in sizes if size % ep == 0 and (size * tp * pp) % gpus == 0)
        shown = ", ".join(str(r) for r in valid[:12]) or "none (change TP/PP)"
        bad("REPLICAS", f"{replicas} x {gpus} GPUs with TP {tp} x PP {pp} give data-parallel size {dp}, which does "
                        f"not divide the {phase} launcher's global batch {global_batch}"
                        f"{f' / micro batch {micro_batch}' if micro_batch > 1 else ''} (Megatron stops at start): "
                        f"use REPLICAS {shown}")


def check_stages(model: tables.Model, pp: int, bad: Bad) -> None:
    """A converter told where each pipeline stage's layers go needs that many stages (PP)."""
    stages = re.search(r"--custom_pipeline_layers=([0-9,]+)", model.convert_args)
    count = len(stages.group(1).split(",")) if stages else pp
    if count != pp:
        bad("PP", f"{model.name}'s converter puts its layers on {count} pipeline stages "
                  f"(--custom_pipeline_layers={stages.group(1) if stages else ''} in {row_name(model)}), found PP "
                  f"{pp}: use PP {count}, or give your own row other convert_args (aiak_dict/models.csv)")
