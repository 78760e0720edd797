"""What each step asks AIHC for: GPUs for training and evaluation, CPUs for data jobs.

Converting a checkpoint, tokenizing data and writing the evaluation report run on CPUs (AIAK's
converter and preprocessing tools are CPU programs; Baidu's own chain template gives those jobs
no GPU and no RDMA), so by default they ask for CPU cores only and never queue behind training
for a GPU node. ``RESOURCES`` in the description replaces the default of any step kind with
AIHC resources as the create-job API takes them (``[{"name": "cpu", "quantity": 32}, ...]``).
"""

from __future__ import annotations

import math
import re
from typing import Any, Dict, List, Optional, Tuple

RESOURCE_KINDS = ("convert", "preprocess", "train", "eval", "report")
DATA_KINDS = frozenset({"convert", "preprocess", "report"})  # CPU work
# A CPU job as in AIHC's create-job examples (resource "cpu", quantity in cores; "memory" in GB).
DATA_RESOURCES: List[Dict[str, Any]] = [{"name": "cpu", "quantity": 16}]
MAX_RESOURCES = 16
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}")
EXAMPLE = '{"convert": [{"name": "cpu", "quantity": 32}, {"name": "memory", "quantity": 512}]}'


def resources_problem(value: Any) -> Optional[str]:
    """Why a RESOURCES value is unusable, or None."""
    if not isinstance(value, dict):
        return f"must be an object of step kind -> AIHC resources, e.g. {EXAMPLE}"
    for kind, items in value.items():
        if kind not in RESOURCE_KINDS:
            return f"unknown step kind {kind!r}: use {', '.join(RESOURCE_KINDS)}"
        if not isinstance(items, list) or not 1 <= len(items) <= MAX_RESOURCES:
            return (f"RESOURCES.{kind} must be a list of 1 to {MAX_RESOURCES} resources, e.g. "
                    '[{"name": "cpu", "quantity": 32}]')
        for index, item in enumerate(items):
            where = f"RESOURCES.{kind}[{index}]"
            if not isinstance(item, dict) or set(item) != {"name", "quantity"}:
                return f"{where} must be an object with exactly name and quantity"
            name, quantity = item["name"], item["quantity"]
            if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
                return f"{where}.name must be a resource name such as \"cpu\" or \"baidu.com/a800_80g_cgpu\""
            if (isinstance(quantity, bool) or not isinstance(quantity, (int, float))
                    or not math.isfinite(quantity) or not 0 < quantity <= 2**31 - 1):
                return f"{where}.quantity must be a number above 0"
    return None


def step_resources(kind: str, options: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], bool]:
    """(``jobSpec.resources``, ``jobSpec.enableRDMA``) of a step of this kind."""
    gpus = [{"name": options["GPU_RESOURCE"], "quantity": options["GPUS_PER_REPLICA"]}]
    default = DATA_RESOURCES if kind in DATA_KINDS else gpus
    resources = options.get("RESOURCES", {}).get(kind) or default
    rdma = bool(options["ENABLE_RDMA"]) and kind not in DATA_KINDS  # RDMA serves multi-node training
    return [dict(r) for r in resources], rdma
