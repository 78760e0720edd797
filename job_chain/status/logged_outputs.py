"""Inline runs keep no record: a join reads its other branches' outputs from the line each printed
to its log (``job-chain: outputs of <step>: {json}``, see :mod:`job_chain.record.outputs`)."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Optional, Tuple

from job_chain.record.outputs import MARKER, recorded, referenced, save
from job_chain.spec.model import Chain, Step

LOG_LINES = 5000  # how far back a join looks for that line in a sibling's log


def from_log(text: str, step: str) -> Optional[Dict[str, str]]:
    """The outputs ``step`` announced in its log (the last such line), or None."""
    prefix = MARKER + step + ": "
    for line in reversed(text.splitlines()):
        at = line.find(prefix)
        if at >= 0:
            try:
                data = json.loads(line[at + len(prefix):])
            except ValueError:
                return None
            return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else None
    return None


def complete(client: Any, chain: Chain, step: Step, run_id: str, since: Optional[float],
             records: Any = None) -> None:
    """Inline runs: put into ``chain.outputs`` every output some step uses that an ancestor of ``step``
    wrote and the chain does not carry yet (a join's other branches), read once from their logs.

    ``records`` (the starting machine's record, for ``resume``) caches what was read.
    """
    from job_chain.rules.revise import ancestors_of

    wanted = (referenced(chain) & ancestors_of(chain, step.name)) - set(chain.outputs)
    if records is not None and wanted:
        cached = recorded(records, run_id)
        chain.outputs.update({n: cached[n] for n in wanted if n in cached})
        wanted -= set(cached)
    if not wanted:
        return
    for name, (attempt, values) in harvest(client, chain.pool, run_id, wanted, since).items():
        chain.outputs[name] = values
        if records is not None:
            save(records, run_id, name, attempt, values)


def harvest(client: Any, pool: str, run_id: str, names: Iterable[str],
            since: Optional[float]) -> Dict[str, Tuple[int, Dict[str, str]]]:
    """step -> (attempt, outputs) read from the log of each named step's succeeded job."""
    from job_chain.engine.states import SUCCEEDED
    from job_chain.status.observe import observe

    wanted = set(names)
    attempts, _, _ = observe(client, pool, run_id, cache={}, since=since, explain_failures=False)
    done = {a.step: a for a in sorted(attempts, key=lambda a: a.attempt) if a.step in wanted and a.status in SUCCEEDED}
    return read_logged(client, pool, [(a.step, a.attempt, a.job_id) for a in done.values()])


def read_logged(client: Any, pool: str, jobs: Iterable[Tuple[str, int, str]]) -> Dict[str, Tuple[int, Dict[str, str]]]:
    """step -> (attempt, outputs) from the outputs line in each (step, attempt, job id)'s log ({} when
    its log has none). A job whose log cannot be read is left out."""
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.errors import EngineError

    engine = as_engine(client)
    found: Dict[str, Tuple[int, Dict[str, str]]] = {}
    for step, attempt, job_id in jobs:
        try:
            values = None
            for pod in engine.job(pool, job_id).pod_names:
                records, _ = engine.log_page(pool, job_id, pod, max_lines=LOG_LINES)
                values = from_log("".join(records), step)
                if values is not None:
                    break
        except EngineError:
            continue
        found[step] = (attempt, values or {})
    return found
