"""Training curves from a step's log: loss, learning rate, throughput, as Megatron/AIAK print them.

A Megatron line looks like ``iteration 10/ 1000 | ... | learning rate: 1.0E-05 | ...
| lm loss: 2.345E+00 | ... throughput per GPU (TFLOP/s/GPU): 123.4``. A step's
``jobChain.metrics`` (name -> regex, first group the number) adds curves or replaces these.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from job_chain.util.user_regex import PatternTimeout, line_groups

NUMBER = r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
DEFAULT_PATTERNS: Dict[str, str] = {
    "loss": r"lm loss: " + NUMBER,
    "learning rate": r"learning rate: " + NUMBER,
    "throughput": r"throughput per GPU \(TFLOP/s/GPU\): " + NUMBER,
}
ITERATION = re.compile(r"\biteration\s+(\d+)")
_DEFAULTS = {name: re.compile(pattern) for name, pattern in DEFAULT_PATTERNS.items()}
MAX_POINTS = 5000  # per curve: the newest are kept, charts stay light


def parse_curves(lines: List[str], step_metrics: Optional[Dict[str, str]] = None
                 ) -> Tuple[Dict[str, Dict[str, List[float]]], str]:
    """``{name: {"x": [...], "y": [...]}}`` for each curve with points (x is the iteration when printed),
    and what could not be read: a step's own patterns run in bounded time
    (:mod:`job_chain.util.user_regex`); when they do not finish, only the built-in curves are drawn."""
    own = dict(step_metrics or {})
    values: List[Dict[str, float]] = [{} for _ in lines]
    for name, regex in _DEFAULTS.items():
        if name in own:
            continue
        for i, line in enumerate(lines):
            match = regex.search(line)
            if match:
                _point(values[i], name, match.group(1))
    problem = ""
    try:
        found = line_groups(list(own.values()), lines)
    except PatternTimeout as exc:
        found, problem = [], f"the step's metrics patterns were not applied: they {exc}"
    for name, matched in zip(own, found):
        for i, text in matched:
            _point(values[i], name, text)
    curves: Dict[str, Dict[str, List[float]]] = {}
    ordinal = 0
    order = list(DEFAULT_PATTERNS) + [name for name in own if name not in DEFAULT_PATTERNS]
    for line, hits in zip(lines, values):
        if not hits:
            continue
        ordinal += 1
        iteration = ITERATION.search(line)
        x = float(iteration.group(1)) if iteration else float(ordinal)
        for name in order:
            if name in hits:
                curve = curves.setdefault(name, {"x": [], "y": []})
                curve["x"].append(x)
                curve["y"].append(hits[name])
    for curve in curves.values():
        if len(curve["x"]) > MAX_POINTS:
            curve["x"], curve["y"] = curve["x"][-MAX_POINTS:], curve["y"][-MAX_POINTS:]
    return curves, problem


def _point(hits: Dict[str, float], name: str, text: str) -> None:
    try:
        hits[name] = float(text)
    except ValueError:
        pass
