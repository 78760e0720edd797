"""Matrices: one job of a chain file run once per combination of values.

``"jobChain": {"matrix": {"lr": ["1e-4", "3e-4"], "seed": [1, 2, 3]}, "maxParallel": 2}`` expands
the job into six *points*, ordinary steps of the run, shown as ``train[lr=1e-4,seed=1]`` and named
(their identity in records, labels and tokens) by an AIHC-valid job name derived from that,
``train-lr-1e-4-seed-1``. A job that depends on ``train`` waits for every point. The expansion is
part of what a run freezes, so every hop sees the same points.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence

from job_chain.aihc.names import MAX_JOB_NAME, make_job_name
from job_chain.spec.model import Step, point_display
from job_chain.spec.params import MATRIX_ENV, as_text, env_name_problem, name_path, value_problem
from job_chain.util.jsonfile import describe, json_type

MAX_POINTS = 1024  # points of one matrix
MAX_DIMENSIONS = 8
MAX_STEPS = 5000  # steps of a chain once its matrices are expanded
_FAITHFUL = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # a value that survives in a job name as written


def read_matrix(value: Any, where: str, problems: List[str]) -> Optional[Dict[str, List[str]]]:
    """``jobChain.matrix``: name -> non-empty list of values (strings or whole numbers)."""
    example = 'e.g. {"lr": ["1e-4", "3e-4"], "seed": [1, 2, 3]}'
    if not isinstance(value, dict) or not value:
        problems.append(f"{where}: must be an object of name -> list of values, {example}")
        return None
    if len(value) > MAX_DIMENSIONS:
        problems.append(f"{where}: at most {MAX_DIMENSIONS} names, found {len(value)}")
        return None
    out: Dict[str, List[str]] = {}
    before = len(problems)
    for name, values in value.items():
        at = name_path(where, name)
        problem = env_name_problem(name, {k.upper(): k for k in out}, MATRIX_ENV, "matrix")
        if problem:
            problems.append(f"{at}: {problem}")
            continue
        if not isinstance(values, list) or not values:
            problems.append(f"{at}: must be a non-empty list of values, {example}")
            continue
        texts: List[str] = []
        for i, item in enumerate(values):
            text = as_text(item)
            problem = value_problem(text) if text is not None else None
            if text is None:
                problems.append(f"{at}[{i}]: must be a string or a whole number (write \"1e-4\", not 1e-4, so it "
                                f"keeps its spelling), found {json_type(item)}")
            elif problem:
                problems.append(f"{at}[{i}]: {problem}")
            elif text in texts:
                problems.append(f"{at}[{i}]: {describe(text)} is listed twice")
            else:
                texts.append(text)
        out[name] = texts
    if len(problems) > before:
        return None
    count = 1
    for texts in out.values():
        count *= len(texts)
    if count > MAX_POINTS:
        problems.append(f"{where}: {count} points; at most {MAX_POINTS} per matrix")
        return None
    return out


def read_max_parallel(value: Any, where: str, problems: List[str]) -> Optional[int]:
    """``maxParallel`` (or the top-level ``maxRunning``): a whole number >= 1, or absent."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_STEPS:
        problems.append(f"{where}: must be a whole number from 1 to {MAX_STEPS}, found {describe(value)}")
        return None
    return value


def points_of(matrix: Dict[str, List[str]]) -> List[Dict[str, str]]:
    """Every combination, in the order written (the last name changes fastest)."""
    names = list(matrix)
    return [dict(zip(names, combo)) for combo in itertools.product(*(matrix[n] for n in names))]


def point_name(group: str, point: Dict[str, str]) -> str:
    """The job name of one point: ``train-lr-1e-4-seed-1`` when the values survive in a job name as
    written; otherwise (``0.1``, ``A``, too long) with a short hash of the display name, so two
    points never share a name and a point keeps its name whatever other values the matrix gets."""
    text = "-".join([group] + [f"{k}-{v}" for k, v in point.items()])
    if all(_FAITHFUL.fullmatch(k) and _FAITHFUL.fullmatch(v) for k, v in point.items()):
        return make_job_name(text)
    display = point_display(group, point)
    digest = hashlib.sha1(display.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    return f"{make_job_name(text, MAX_JOB_NAME - 7)}-{digest}"


def expand(templates: Sequence[Step], matrices: Dict[int, Dict[str, List[str]]], problems: List[str]) -> List[Step]:
    """The chain's steps with each matrix job replaced by its points, renumbered in order.

    ``templates`` have ``depends_on`` resolved (indexes of templates); a step that depended on a
    matrix job depends on all its points. Each point's ``jobChain`` is its job's, minus ``matrix``.
    """
    taken = {s.name: f"jobs[{s.index}]" for s in templates if s.index not in matrices}
    mapped: Dict[int, List[int]] = {}
    out: List[Step] = []
    for template in templates:
        matrix = matrices.get(template.index)
        if not matrix:
            mapped[template.index] = [len(out)]
            out.append(replace(template, index=len(out)))
            continue
        settings = {k: v for k, v in template.settings_raw.items() if k != "matrix"}
        mapped[template.index] = []
        for point in points_of(matrix):
            name = point_name(template.name, point)
            display = point_display(template.name, point)
            if name in taken:
                problems.append(f"jobs[{template.index}].jobChain.matrix: the point {display} would be named "
                                f"{name}, which is already the name of {taken[name]}: rename one")
                continue
            taken[name] = display
            body = dict(template.body, name=name)
            mapped[template.index].append(len(out))
            out.append(replace(template, index=len(out), body=body, settings_raw=settings, group=template.name,
                               point=point))
        if len(out) > MAX_STEPS:
            problems.append(f"jobs[{template.index}].jobChain.matrix: the chain would have more than {MAX_STEPS} "
                            "steps once its matrices are expanded")
            return []
    for step in out:
        step.depends_on = tuple(i for dep in step.depends_on for i in mapped.get(dep, ()))
    return out
