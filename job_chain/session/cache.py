"""``job-chain cache``: the cached steps' entries of a chain, why a step would (not) reuse one, and
forgetting them (docs/caching.md). The rule itself is :mod:`job_chain.submit.cache`'s."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from job_chain.errors import UsageError
from job_chain.session.context import RunContext
from job_chain.spec.model import Chain, Step


@dataclass
class Explained:
    """``cache explain``: the step's key now and its parts; the nearest entry, the parts that differ."""

    step: str
    key: Optional[str]
    parts: Dict[str, Any] = field(default_factory=dict)
    problem: str = ""  # why the key cannot be computed now
    nearest: Optional[Dict[str, Any]] = None
    differ: List[str] = field(default_factory=list)
    missing_paths: List[str] = field(default_factory=list)

    @property
    def hit(self) -> bool:
        return self.nearest is not None and not self.differ and not self.missing_paths


def entries(ctx: RunContext) -> List[Dict[str, Any]]:
    """Every entry this chain's cached steps can reuse, newest first."""
    from job_chain.submit.cache import store_for

    return store_for(_chain(ctx)).entries()


def _chain(ctx: RunContext, params: Optional[Dict[str, str]] = None) -> Chain:
    chain = ctx.file.reload()
    if params:
        from job_chain.spec.params import resolve_params

        chain.params = resolve_params(chain.params, params, ctx.path)
    return chain


def _cached_step(chain: Chain, name: str) -> Step:
    from job_chain.spec.params import did_you_mean

    step = chain.find(name)
    if step is None:
        names = [s.display for s in chain.steps]
        raise UsageError(f"no step {name!r} in {chain.path}{did_you_mean(name, names)}")
    if step.cache is None:
        raise UsageError(f"step {step.display} of {chain.path} is not cached: add \"cache\": true to its "
                         "jobChain (docs/caching.md)")
    return step


def explain(ctx: RunContext, name: str, params: Optional[Dict[str, str]] = None) -> Explained:
    """What key step ``name`` of the chain file as it is now would have, and how it compares with the
    entries there are: the outputs it consumes are those of the chain's latest run."""
    from job_chain.submit.cache import explain as nearest_to
    from job_chain.submit.cache import key_of, key_parts, store_for

    chain = _chain(ctx, params)
    step = _cached_step(chain, name)
    latest = ctx.records.latest_run()
    consumed: Dict[str, Dict[str, str]] = {}
    if latest is not None:
        from job_chain.record.outputs import recorded

        consumed = recorded(ctx.records, str(latest["id"]))
    try:
        parts = key_parts(chain, step, consumed)
    except Exception as exc:  # noqa: BLE001 - said, as a run would: a key that cannot be computed is a miss
        return Explained(step.display, None, problem=f"{type(exc).__name__}: {exc}")
    found = Explained(step.display, key_of(parts), parts)
    every = store_for(chain).entries()
    mine = [e for e in every if (e.get("from") or {}).get("step") == step.name]
    found.nearest, found.differ = nearest_to(parts, mine or every)
    found.missing_paths = [p for p in parts.get("paths") or [] if not os.path.exists(p)]
    return found


def forget(ctx: RunContext, name: Optional[str] = None) -> int:
    """Remove the entries of step ``name`` (default: every entry of this chain's steps); how many."""
    from job_chain.submit.cache import store_for

    chain = _chain(ctx)
    store = store_for(chain)
    wanted = {_cached_step(chain, name).name} if name else {s.name for s in chain.steps}
    gone = 0
    for entry in store.entries():
        if (entry.get("from") or {}).get("step") in wanted and store.forget(str(entry["key"])):
            gone += 1
    return gone
