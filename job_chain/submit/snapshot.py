"""Inline runs keep no record: each step's command carries a compressed, secret-free snapshot of
the run's chain, which its tail thaws."""

from __future__ import annotations

import json
import os
import zlib
from typing import Any, Dict, Optional

from job_chain.spec.model import Chain, Step


def encode_snapshot(chain: Chain, first: Step, host: Optional[str]) -> str:
    """A compressed, secret-free copy of the run's chain for ``--inline`` runs: the frozen form,
    without the steps of a line that are already behind ``first``."""
    import base64

    from job_chain.record.outputs import referenced
    from job_chain.spec.frozen import freeze

    keep = [s for s in chain.steps if s.index >= first.index or s.is_handler or chain.graph]
    data: Dict[str, Any] = {"v": 2, "host": host, "chain": os.path.abspath(chain.path),
                            "frozen": freeze(chain, steps=keep), "began": chain.began, "first": chain.first_job}
    used = referenced(chain)
    carried = {n: v for n, v in chain.outputs.items() if n in used}
    if carried:  # the outputs later steps use, as far as this step knows them
        data["outputs"] = carried
    raw = zlib.compress(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"), 9)
    text = base64.b64encode(raw).decode("ascii")
    return "\n".join(text[i:i + 76] for i in range(0, len(text), 76))


def decode_snapshot(text: str) -> Chain:
    """Rebuild the run's chain from an inline snapshot."""
    import base64

    from job_chain.errors import UsageError
    from job_chain.spec.frozen import FrozenDamaged, thaw

    try:
        data = json.loads(zlib.decompress(base64.b64decode("".join(text.split()))).decode("utf-8"))
        path = data.get("chain") if isinstance(data.get("chain"), str) else "CHAIN_FILE"
        chain = thaw(data["frozen"], path)
    except (ValueError, KeyError, TypeError, zlib.error, FrozenDamaged) as exc:
        raise UsageError(f"the inline chain snapshot is damaged: {exc}") from None
    if data.get("host"):
        chain.api_config["host"] = data["host"]
    if isinstance(data.get("outputs"), dict):
        chain.outputs = {str(k): dict(v) for k, v in data["outputs"].items() if isinstance(v, dict)}
    chain.began = float(data["began"]) if isinstance(data.get("began"), (int, float)) else None
    chain.first_job = data.get("first") is True
    return chain


def inline_origin(chain: Chain, client: Any, first_job_id: Optional[str]) -> None:
    """Before an inline submission: what its snapshot says about where the run began, in the engine's
    clock (the createdAt of the run's first job), so its pool walks never trust this machine's
    clock (issue 18, item 8). Without a first job yet, the snapshot says it is the first."""
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.errors import EngineError

    chain.first_job = first_job_id is None
    if first_job_id is None or chain.began is not None:
        return
    try:
        chain.began = as_engine(client).job(chain.pool, first_job_id).created
    except EngineError:
        return  # the walk falls back to the run id's time, an hour of skew allowed
