"""Chains as graphs: ``dependsOn``, exit handlers, step timeouts, and what may start next.

A chain without any ``dependsOn`` keeps its old meaning: each step waits for the one before it.
Once any job names ``dependsOn``, every job without it is a root. Exit handlers
(``"runOn": "failure" | "always"``) are outside the graph: they start once, after the run ended.

:func:`check_graph` validates the settings with JSON paths (cycles are printed as
``train -> eval -> train``). What may start next is :mod:`job_chain.rules.plan`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from job_chain.spec.model import Step
from job_chain.util.durations import seconds_of
from job_chain.util.jsonfile import describe

GRAPH_SETTINGS = {"dependsOn", "runOn", "timeout", "hangTimeout", "retryOnExitCodes"}
RUN_ON = ("failure", "always")



def parse_duration(value: Any) -> Optional[float]:
    """``"6h"``, ``"30m"``, ``"1h30m"``, ``"90s"``, ``"2d"`` or a number of seconds, more than 0 and less
    than 1e9 (:func:`job_chain.util.durations.seconds_of`); None if invalid."""
    seconds = seconds_of(value)
    return seconds if seconds is not None and 0 < seconds < 1e9 else None


def duration_problem(value: Any) -> Optional[str]:
    """Why ``value`` is no step duration (None if it is one): its form, or its size."""
    seconds = seconds_of(value)
    if seconds is None:
        return f"{describe(value)} is not a duration: write e.g. \"6h\", \"30m\", \"1h30m\" or \"90s\""
    if seconds != seconds:  # NaN
        return f"{describe(value)} is not a duration: write e.g. \"6h\""
    if seconds <= 0:
        return f"must be more than 0, found {describe(value)} (leave the key out for no limit)"
    if seconds >= 1e9:
        return f"must be less than 1e9 seconds (about 31 years), found {describe(value)}"
    return None


@dataclass
class GraphSettings:
    depends_on: List[Any] = field(default_factory=list)  # names or indexes, as written
    run_on: Optional[str] = None
    timeout: Optional[float] = None
    hang_timeout: Optional[float] = None
    retry_on: Optional[Tuple[int, ...]] = None


def read_settings(settings: Dict[str, Any], where: str, problems: List[str]) -> GraphSettings:
    """The graph keys of one job's ``jobChain``; each problem as ``json.path: what is wrong``."""
    out = GraphSettings()
    deps = settings.get("dependsOn")
    if deps is not None:
        if not isinstance(deps, list) or not all(isinstance(d, (str, int)) and not isinstance(d, bool) for d in deps):
            problems.append(f"{where}.dependsOn: must be a list of job names or indexes, e.g. [\"prep\", 2]")
        else:
            out.depends_on = list(deps)
    run_on = settings.get("runOn")
    if run_on is not None:
        if run_on not in RUN_ON:
            problems.append(f"{where}.runOn: must be \"failure\" or \"always\", found {describe(run_on)}")
        else:
            out.run_on = run_on
    for key in ("timeout", "hangTimeout"):
        if settings.get(key) is None:
            continue
        problem = duration_problem(settings[key])
        seconds = parse_duration(settings[key])
        if problem or seconds is None:
            problems.append(f"{where}.{key}: {problem}")
        elif key == "timeout":
            out.timeout = seconds
        else:
            out.hang_timeout = seconds
    codes = settings.get("retryOnExitCodes")
    if codes is not None:
        if not isinstance(codes, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 1 <= c <= 255
                                                  for c in codes):
            problems.append(f"{where}.retryOnExitCodes: must be a list of exit codes from 1 to 255, e.g. [1, 137]")
        else:
            out.retry_on = tuple(sorted(set(codes)))
    return out


def check_graph(steps: Sequence[Step], raw: Dict[int, GraphSettings], problems: List[str],
                graph: Optional[bool] = None) -> bool:
    """Resolve ``dependsOn`` into ``step.depends_on`` (in place); False when a problem was found.

    Without any ``dependsOn`` the chain is a line: each non-handler step depends on the one before
    (``graph``, when given, says which it is: a frozen run's matrix points are a graph without any).
    """
    by_name = {s.name: s.index for s in steps}
    indexes = {s.index for s in steps}
    handlers = {i for i, g in raw.items() if g.run_on}
    graph = any(g.depends_on for g in raw.values()) if graph is None else graph
    before = len(problems)
    unset = GraphSettings()
    for step in steps:
        settings = raw.get(step.index, unset)
        step.run_on, step.timeout, step.hang_timeout = settings.run_on, settings.timeout, settings.hang_timeout
        step.retry_on = settings.retry_on
        if not settings.depends_on:
            step.depends_on = ()
            continue
        where = f"jobs[{step.index}].jobChain.dependsOn"
        if step.is_handler:
            problems.append(f"{where}: an exit handler (runOn) starts after the whole run ended; it takes no "
                            "dependsOn")
            continue
        resolved: List[int] = []
        for k, dep in enumerate(settings.depends_on):
            target = by_name.get(dep) if isinstance(dep, str) else (dep if dep in indexes else None)
            if target is None:
                known = ", ".join(sorted(by_name)) if isinstance(dep, str) else f"0 to {len(steps) - 1}"
                problems.append(f"{where}[{k}]: no job {describe(dep)} in this chain (known: {known})")
            elif target in handlers:
                problems.append(f"{where}[{k}]: {describe(dep)} is an exit handler (runOn): it runs after the "
                                "run ended, so nothing can wait for it")
            elif target not in resolved:
                resolved.append(target)
        step.depends_on = tuple(resolved)
    if not graph:
        line = [s for s in steps if not s.is_handler]
        for previous, step in zip(line, line[1:]):
            step.depends_on = (previous.index,)
    cycle = find_cycle(steps)
    if cycle:
        names = [next(s.name for s in steps if s.index == i) for i in cycle]
        problems.append(f"jobs[{cycle[0]}].jobChain.dependsOn: a cycle: {' -> '.join(names)}")
    return len(problems) == before


def find_cycle(steps: Sequence[Step]) -> Optional[List[int]]:
    """The first cycle of ``depends_on`` edges as indexes (first repeated at the end), or None."""
    deps = {s.index: s.depends_on for s in steps}
    color: Dict[int, int] = {}
    for root in deps:
        if root in color:
            continue
        stack: List[Tuple[int, int]] = [(root, 0)]
        path: List[int] = []
        while stack:
            node, i = stack.pop()
            if i == 0:
                color[node] = 1
                path.append(node)
            children = deps.get(node, ())
            if i < len(children):
                stack.append((node, i + 1))
                child = children[i]
                if color.get(child) == 1:
                    return path[path.index(child):] + [child]
                if child not in color:
                    stack.append((child, 0))
            else:
                color[node] = 2
                path.pop()
    return None
