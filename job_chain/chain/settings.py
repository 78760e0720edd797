"""A step's ``jobChain`` settings: one reader for the chain file and for a run's frozen copy.

The loader reads them from the file (reporting each problem at its JSON path); a frozen run
keeps them as written and reads them again with the same code, so a setting added here is
frozen and thawed without anyone having to remember it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from job_chain.aihc.spec import key_path
from job_chain.chain.graph import GRAPH_SETTINGS, GraphSettings, read_settings
from job_chain.jsonfile import describe, json_type

SETTINGS_KEYS = frozenset({"retries", "generatedBy", "metrics", "matrix", "maxParallel"} | GRAPH_SETTINGS)


@dataclass
class StepSettings:
    """What ``jobChain`` says about one step (``dependsOn`` still as written: names or indexes)."""

    retries: int = 0
    metrics: Dict[str, str] = field(default_factory=dict)
    graph: GraphSettings = field(default_factory=GraphSettings)
    matrix: Optional[Dict[str, List[str]]] = None  # name -> values (the file's; a frozen point has none)
    max_parallel: Optional[int] = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_step_settings(settings: Any, where: str, problems: List[str]) -> StepSettings:
    """Parse one job's ``jobChain`` object; each problem is appended as ``json.path: what is wrong``."""
    out = StepSettings()
    if not isinstance(settings, dict):
        problems.append(f"{where}: must be an object, e.g. {{\"retries\": 2}}")
        return out
    for key in sorted(set(settings) - SETTINGS_KEYS):
        problems.append(f"{key_path(where, key)}: unknown setting (known: {', '.join(sorted(SETTINGS_KEYS))})")
    out.graph = read_settings(settings, where, problems)
    retries = settings.get("retries", 0)
    if not _is_int(retries) or retries < 0:
        problems.append(f"{where}.retries: must be a whole number >= 0, found {describe(retries)}")
    else:
        out.retries = retries
    out.metrics = _read_metrics(settings.get("metrics", {}), f"{where}.metrics", problems)
    from job_chain.chain.matrix import read_matrix, read_max_parallel

    if "matrix" in settings:
        out.matrix = read_matrix(settings["matrix"], f"{where}.matrix", problems)
    out.max_parallel = read_max_parallel(settings.get("maxParallel"), f"{where}.maxParallel", problems)
    return out


def _read_metrics(metrics: Any, where: str, problems: List[str]) -> Dict[str, str]:
    """``jobChain.metrics``: curve name -> a regex whose first group is the number (the web console plots it)."""
    if not isinstance(metrics, dict):
        problems.append(f"{where}: must be an object of name -> regex, e.g. {{\"loss\": \"lm loss: ([0-9.E+-]+)\"}}")
        return {}
    good: Dict[str, str] = {}
    for name, pattern in metrics.items():
        if not isinstance(pattern, str):
            problems.append(f"{key_path(where, name)}: must be a regex string, found {json_type(pattern)}")
            continue
        try:
            groups = re.compile(pattern).groups
        except re.error as exc:
            problems.append(f"{key_path(where, name)}: is not a valid regex: {exc}")
            continue
        if groups < 1:
            problems.append(f"{key_path(where, name)}: needs a group around the number, e.g. \"lm loss: ([0-9.E+-]+)\"")
            continue
        good[name] = pattern
    return good


def step_fields(parsed: StepSettings) -> Dict[str, Any]:
    """The :class:`~job_chain.chain.model.Step` fields these settings set (``depends_on`` is resolved later)."""
    graph = parsed.graph
    retry_on: Optional[Tuple[int, ...]] = graph.retry_on
    return {"retries": parsed.retries, "metrics": parsed.metrics, "run_on": graph.run_on, "timeout": graph.timeout,
            "hang_timeout": graph.hang_timeout, "retry_on": retry_on, "max_parallel": parsed.max_parallel}
