"""Planned hops' files, ``lean-<step>-attempt-<n>.json``: what a step's success submits, written
when the step was submitted (see :mod:`job_chain.submit.plans`) and read by its tail."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional

from job_chain.record.layout import PLAN, fact_name

if TYPE_CHECKING:
    from job_chain.record.records import RunRecords

FORMAT = 1


def write_plan(records: RunRecords, run_id: str, step: str, attempt: int, revision: int, version: Any,
               pool: str, steps: List[Dict[str, Any]]) -> bool:
    """Keep the plan of (``step``, ``attempt``); False (not an error) when it cannot be written."""
    if not steps or revision < 1:
        return False
    plan_ = {"format": FORMAT, "revision": revision, "version": version, "pool": pool, "steps": steps}
    # for the tail, not for people: compact, at C speed (a hop writes the rest of its plan)
    return records.write(run_id, fact_name(PLAN, step, attempt), plan_, compact=True)


def read_plan(records: RunRecords, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
    """The plan of (``step``, ``attempt``) in this format, or None."""
    own = records.read(run_id, fact_name(PLAN, step, attempt))
    if not own or own.get("format") != FORMAT or not own.get("steps"):
        return None
    return own


def remove_plan(records: RunRecords, run_id: str, step: str, attempt: int) -> None:
    try:
        records.remove(run_id, fact_name(PLAN, step, attempt))
    except OSError:
        pass
