"""Steps cached across runs (``jobChain.cache``, docs/caching.md): what a step's key is made of, and
whether a step about to be submitted reuses an earlier success instead (:func:`lookup`).

The key is the sha256 of the step's *parts* (:func:`key_parts`), each named so that ``cache explain``
can say which one differs:

* the frozen create body after substitution, one part per field (``jobSpec.image``,
  ``jobSpec.resources``, …; each env variable its own part, ``jobSpec.envs.HF_HOME``), the script's
  content as ``script`` — without the step's name, labels, pool, queue and priority (where and
  under what name it runs, not what it computes) and without job-chain's own variables;
* every parameter of the run (a script reads them all from ``$JOB_CHAIN_PARAM_*``), the matrix
  point's values, the value of every output the step consumes, ``cache.version`` and the
  declared ``paths``.

Never the run id. A key that cannot be computed is a miss, never a hit; an entry is used only when
every declared path exists for the process that decides.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Tuple

from job_chain.record.cache import CacheStore, cache_dir

if TYPE_CHECKING:
    from job_chain.record.records import RunRecords
    from job_chain.spec.model import Chain, Step

NOT_IN_KEY = ("name", "labels", "resourcePoolId", "queue", "priority", "jobChain")
OUR_ENV = "JOB_CHAIN_"  # job-chain's own variables (run id, step): never part of a key


class Lookup(NamedTuple):
    """What :func:`lookup` found: ``entry`` on a hit; else why not (``miss``)."""

    key: Optional[str]
    parts: Optional[Dict[str, Any]]
    entry: Optional[Dict[str, Any]] = None
    miss: str = ""


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def store_for(chain: Chain) -> CacheStore:
    return CacheStore(cache_dir(chain.path, chain.cache_dir))


def _values(chain: Chain, step: Step, outputs: Dict[str, Dict[str, str]]) -> Any:
    """How references are replaced for a key: as when the step is submitted, except the run id,
    which stays as written (never part of a key)."""
    from job_chain.spec.params import value_of_for

    values = value_of_for(chain.params, step.point, outputs, step.display, "")
    return lambda ref: ref.text if ref.kind == "run" else values(ref)


def key_parts(chain: Chain, step: Step, outputs: Dict[str, Dict[str, str]]) -> Dict[str, Any]:
    """The named parts of ``step``'s key (see the module's docstring); ``outputs``: the outputs its
    references consume. Raises (KeyError, MissingOutput, …) when a part cannot be computed."""
    from job_chain.spec.params import step_refs, substitute

    assert step.cache is not None
    script_file = step.script_origin != "inline"
    value_of = _values(chain, step, outputs)
    body = substitute(copy.deepcopy(step.body), value_of, script_file=script_file)
    parts: Dict[str, Any] = {}
    for field, value in body.items():
        if field in NOT_IN_KEY:
            continue
        if field != "jobSpec" or not isinstance(value, dict):
            parts[field] = _digest(value)
            continue
        for inner, item in value.items():
            if inner == "envs" and isinstance(item, list):
                for env in item:
                    name = str(env.get("name")) if isinstance(env, dict) else "?"
                    if not name.startswith(OUR_ENV):
                        parts[f"jobSpec.envs.{name}"] = _digest(env)
            elif inner == "command" and script_file:
                parts["script"] = _digest(step.script)
            else:
                parts[f"jobSpec.{inner}"] = _digest(item)
    for name, text in chain.params.items():
        parts[f"params.{name}"] = text
    for name, text in step.point.items():
        parts[f"matrix.{name}"] = text
    for ref in step_refs(step.body, script_file):
        if ref.kind == "steps":
            parts[f"outputs.{ref.name}.{ref.key}"] = value_of(ref)
    parts["version"] = step.cache.version
    parts["paths"] = list(declared_paths(chain, step, outputs))
    return dict(sorted(parts.items()))


def key_of(parts: Dict[str, Any]) -> str:
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def declared_paths(chain: Chain, step: Step, outputs: Dict[str, Dict[str, str]]) -> Tuple[str, ...]:
    """``cache.paths`` with references replaced (``/mnt/pfs/ckpt/${params.model}``)."""
    from job_chain.spec.params import substitute

    assert step.cache is not None
    value_of = _values(chain, step, outputs)
    return tuple(substitute(list(step.cache.paths), value_of, script_file=False))


def lookup(chain: Chain, step: Step, records: Optional[RunRecords], run_id: str,
           outputs: Dict[str, Dict[str, str]]) -> Lookup:
    """Whether ``step`` (about to be submitted in ``run_id``) reuses an earlier success: a hit has the
    ``entry``; a miss says why (and carries the key and parts, kept with the submission so that its
    success writes the entry)."""
    if step.cache is None:
        return Lookup(None, None, miss="not cached")
    try:
        parts = key_parts(chain, step, outputs)
    except Exception as exc:  # noqa: BLE001 - a key that cannot be computed is a miss, never a hit
        return Lookup(None, None, miss=f"its key cannot be computed ({type(exc).__name__}: {exc})")
    key = key_of(parts)
    if records is None:
        return Lookup(key, parts, miss="an inline run keeps no record to reuse from")
    if (records.get_run(run_id) or {}).get("cache") is False:
        return Lookup(key, parts, miss="the run was started with --no-cache")
    entry = store_for(chain).get(key)
    if entry is None:
        return Lookup(key, parts, miss="no earlier success has this key")
    gone = [p for p in parts["paths"] if not os.path.exists(p)]
    if gone:
        return Lookup(key, parts, miss=f"{gone[0]} (a declared path) does not exist")
    return Lookup(key, parts, entry)


def remember(chain: Chain, records: RunRecords, run_id: str, step: Step, attempt: int,
             outputs: Dict[str, str], submission: Optional[Dict[str, Any]]) -> Optional[str]:
    """After (``step``, ``attempt``) succeeded: write its entry (the key its submission recorded, its
    outputs, where it came from, what it cost). None when written, else why not."""
    cache = (submission or {}).get("cache")
    if not isinstance(cache, dict) or not isinstance(cache.get("key"), str):
        return "its submission recorded no key"
    from job_chain.status.cost import gpus

    now = time.time()
    submitted = (submission or {}).get("submitted")
    seconds = max(0.0, now - float(submitted)) if isinstance(submitted, (int, float)) else None
    entry = {"key": cache["key"], "parts": cache.get("parts") or {}, "outputs": dict(outputs), "at": now,
             "from": {"chain": os.path.abspath(chain.path), "run": run_id, "step": step.name,
                      "display": step.display, "attempt": attempt, "jobId": (submission or {}).get("jobId")},
             "gpus": gpus(step.body), "seconds": seconds}
    store = store_for(chain)
    return None if store.put(entry) else f"{store.directory} is not writable here"


def saved_hours(entry: Dict[str, Any]) -> Optional[float]:
    """GPU-hours the reuse saved: the original attempt's GPUs × its time from submission to success
    (an upper bound: it includes its time in the queue)."""
    seconds, count = entry.get("seconds"), entry.get("gpus")
    if not isinstance(seconds, (int, float)) or not isinstance(count, (int, float)):
        return None
    return float(count) * float(seconds) / 3600.0


def explain(parts: Dict[str, Any], entries: List[Dict[str, Any]]) -> Tuple[Optional[Dict[str, Any]], List[str]]:
    """The entry nearest to ``parts`` (fewest parts differ) and the names of the parts that differ."""
    best: Optional[Dict[str, Any]] = None
    differ: List[str] = []
    for entry in entries:
        theirs = entry.get("parts") or {}
        names = sorted(n for n in set(parts) | set(theirs) if parts.get(n) != theirs.get(n))
        if best is None or len(names) < len(differ):
            best, differ = entry, names
    return best, differ
