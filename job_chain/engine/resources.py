"""What a step asks of the machines, read the same way by every engine and by the GPU-hours: its
GPUs per replica (every ``jobSpec.resources`` entry whose name names a GPU: ``nvidia.com/gpu``,
``baidu.com/a800_80g_cgpu``, …). AIHC takes the resources as they are; Slurm asks ``--gres=gpu:N``."""

from __future__ import annotations

import re
from typing import Any, Dict

GPU_RESOURCE = re.compile(r"gpu", re.IGNORECASE)


def gpus_per_replica(body: Dict[str, Any]) -> float:
    """The GPUs one replica asks for (0 for a CPU-only step)."""
    total = 0.0
    for item in (body.get("jobSpec") or {}).get("resources") or []:
        if isinstance(item, dict) and GPU_RESOURCE.search(str(item.get("name") or "")):
            quantity = item.get("quantity")  # a number, or a number as text ("8": AIHC takes both)
            if isinstance(quantity, bool) or not isinstance(quantity, (int, float, str)):
                continue
            try:
                count = float(quantity)
            except ValueError:
                continue
            if 0 < count < float("inf"):
                total += count
    return total
