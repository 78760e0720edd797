"""Planned hops' files, ``lean-<step>-attempt-<n>.json``: what a step's success submits, written
when the step was submitted (see :mod:`job_chain.submit.plans`) and read by its tail."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:
    from job_chain.record.records import RunRecords

KIND = "lean"  # the plan's file: lean-<step>-attempt-<n>.json in the run record
FORMAT = 1


def write_plan(records: RunRecords, run_id: str, step: str, attempt: int, revision: int, version: Any,
               pool: str, steps: List[Dict[str, Any]]) -> bool:
    """Keep the plan of (``step``, ``attempt``); False (not an error) when it cannot be written."""
    import json

    from job_chain.util.files import write_private

    if not steps or revision < 1:
        return False
    plan_ = {"format": FORMAT, "revision": revision, "version": version, "pool": pool, "steps": steps}
    try:  # for the tail, not for people: compact, at C speed (a hop writes the rest of its plan)
        write_private(path(records, run_id, step, attempt), json.dumps(plan_, separators=(",", ":")).encode("ascii"))
        return True
    except OSError:
        return False


def path(records: RunRecords, run_id: str, step: str, attempt: int) -> str:
    return os.path.join(records.directory(run_id), f"{KIND}-{step}-attempt-{attempt}.json")


def read_plan(records: RunRecords, run_id: str, step: str, attempt: int) -> Optional[Dict[str, Any]]:
    """The plan of (``step``, ``attempt``) in this format, or None."""
    from job_chain.util.files import read_json_dict

    own = read_json_dict(path(records, run_id, step, attempt))
    if not own or own.get("format") != FORMAT or not own.get("steps"):
        return None
    return own


def remove_plan(records: RunRecords, run_id: str, step: str, attempt: int) -> None:
    try:
        os.unlink(path(records, run_id, step, attempt))
    except OSError:
        pass
