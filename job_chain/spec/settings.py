"""A step's ``jobChain`` settings: one reader for the chain file and for a run's frozen copy.

The loader reads them from the file (reporting each problem at its JSON path); a frozen run
keeps them as written and reads them again with the same code, so a setting added here is
frozen and thawed without anyone having to remember it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from job_chain.aihc.keys import hint, key_path
from job_chain.spec.graph import GRAPH_SETTINGS, GraphSettings, read_settings
from job_chain.spec.model import CacheSettings, Checkpoint, FailureRule
from job_chain.util.jsonfile import describe, json_type
from job_chain.util.suggest import closest
from job_chain.util.user_regex import compile_user

SETTINGS_KEYS = frozenset({"retries", "generatedBy", "metrics", "failureRules", "checkpoint", "matrix", "maxParallel",
                           "cache"} | GRAPH_SETTINGS)
MAX_RULES = 64
MAX_BUDGET = 1000
_CLASS_NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")


@dataclass
class StepSettings:
    """What ``jobChain`` says about one step (``dependsOn`` still as written: names or indexes)."""

    retries: int = 0
    metrics: Dict[str, str] = field(default_factory=dict)
    graph: GraphSettings = field(default_factory=GraphSettings)
    retry_budgets: Optional[Dict[str, int]] = None
    failure_rules: Tuple[FailureRule, ...] = ()
    checkpoint: Optional[Checkpoint] = None
    matrix: Optional[Dict[str, List[str]]] = None  # name -> values (the file's; a frozen point has none)
    max_parallel: Optional[int] = None
    cache: Optional[CacheSettings] = None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_step_settings(settings: Any, where: str, problems: List[str]) -> StepSettings:
    """Parse one job's ``jobChain`` object; each problem is appended as ``json.path: what is wrong``."""
    if settings == {}:  # (most steps: every setting its default, as reading it would give; thawing a
        return StepSettings()  # 5,000-step run's chain read nothing 5,000 times)
    return _read_step_settings(settings, where, problems)


def _read_step_settings(settings: Any, where: str, problems: List[str]) -> StepSettings:
    out = StepSettings()
    if not isinstance(settings, dict):
        problems.append(f"{where}: must be an object, e.g. {{\"retries\": 2}}")
        return out
    for key in sorted(set(settings) - SETTINGS_KEYS):
        problems.append(f"{key_path(where, key)}: unknown setting" + hint(key, SETTINGS_KEYS))
    out.graph = read_settings(settings, where, problems)
    out.failure_rules = _read_rules(settings.get("failureRules", []), f"{where}.failureRules", problems)
    retries = settings.get("retries", 0)
    if isinstance(retries, dict):
        raw_rules = settings.get("failureRules")
        named = {r.get("class") for r in raw_rules if isinstance(r, dict)} if isinstance(raw_rules, list) else set()
        out.retry_budgets = _read_budgets(retries, f"{where}.retries", {c for c in named if isinstance(c, str)},
                                          problems)
        out.retries = sum((out.retry_budgets or {}).values())
    elif not _is_int(retries) or retries < 0:
        problems.append(f"{where}.retries: must be a whole number >= 0 or retries per cause, e.g. "
                        f"{{\"infra\": 3, \"user\": 0}}, found {describe(retries)}")
    else:
        out.retries = retries
    if settings.get("checkpoint") is not None:
        out.checkpoint = _read_checkpoint(settings["checkpoint"], f"{where}.checkpoint", problems)
    if settings.get("cache") not in (None, False):
        out.cache = _read_cache(settings["cache"], f"{where}.cache", problems)
    out.metrics = _read_metrics(settings.get("metrics", {}), f"{where}.metrics", problems)
    from job_chain.spec.matrix import read_matrix, read_max_parallel

    if "matrix" in settings:
        out.matrix = read_matrix(settings["matrix"], f"{where}.matrix", problems)
    out.max_parallel = read_max_parallel(settings.get("maxParallel"), f"{where}.maxParallel", problems)
    return out


def _read_budgets(budgets: Dict[str, Any], where: str, own: Any, problems: List[str]) -> Dict[str, int]:
    """``retries`` per cause: a built-in class or one the step's failureRules name -> a whole number."""
    from job_chain.failures.signatures import BUILTIN_CLASSES

    known = list(BUILTIN_CLASSES) + sorted(set(own) - set(BUILTIN_CLASSES))
    good: Dict[str, int] = {}
    for cause, count in budgets.items():
        if cause not in known:
            near = closest(cause, known)  # OOM, Infra: the causes are lower case
            hint = f"did you mean {describe(near)}? " if near else ""
            problems.append(f"{key_path(where, cause)}: unknown cause ({hint}known: {', '.join(known)}; a "
                            "failureRules class can have a budget too)")
        elif not _is_int(count) or not 0 <= count <= MAX_BUDGET:
            problems.append(f"{key_path(where, cause)}: must be a whole number from 0 to {MAX_BUDGET}, found "
                            f"{describe(count)}")
        else:
            good[cause] = count
    return good


def _read_rules(rules: Any, where: str, problems: List[str]) -> Tuple[FailureRule, ...]:
    """``failureRules``: ``[{"match": regex, "class": name, "name"?, "explanation"?}]``, tried before the built-ins."""
    if not isinstance(rules, list) or len(rules) > MAX_RULES:
        problems.append(f"{where}: must be a list of at most {MAX_RULES} rules, e.g. "
                        "[{\"match\": \"loss is nan\", \"class\": \"nan\"}]")
        return ()
    good = []
    for i, rule in enumerate(rules):
        at = f"{where}[{i}]"
        if not isinstance(rule, dict):
            problems.append(f"{at}: must be an object like {{\"match\": \"loss is nan\", \"class\": \"nan\"}}")
            continue
        before = len(problems)
        for key in sorted(set(rule) - {"match", "class", "name", "explanation"}):
            problems.append(f"{key_path(at, key)}: unknown key (known: class, explanation, match, name)")
        pattern, cls = rule.get("match"), rule.get("class")
        if not isinstance(pattern, str) or not pattern or len(pattern) > 2000:
            problems.append(f"{at}.match: must be a regex of 1 to 2000 characters, found {describe(pattern)}")
        else:
            try:
                compile_user(pattern, multiline=True)
            except re.error as exc:
                problems.append(f"{at}.match: is not a valid regex: {exc}")
        if not isinstance(cls, str) or not _CLASS_NAME.fullmatch(cls):
            problems.append(f"{at}.class: must be a name like \"nan\" (lower-case letters, digits, - and _), "
                            f"found {describe(cls)}")
        name = rule.get("name", f"failureRules[{i}]")
        if not isinstance(name, str) or not 0 < len(name) <= 64:
            problems.append(f"{at}.name: must be a text of 1 to 64 characters, found {describe(name)}")
        explanation = rule.get("explanation", "")
        if not isinstance(explanation, str) or len(explanation) > 500:
            problems.append(f"{at}.explanation: must be a text of at most 500 characters")
        # (the isinstance checks repeat what a problem above said, for the type checker)
        if len(problems) == before and isinstance(cls, str) and isinstance(pattern, str):
            good.append(FailureRule(name, cls, pattern, explanation))
    return tuple(good)


def _read_checkpoint(value: Any, where: str, problems: List[str]) -> Optional[Checkpoint]:
    """``checkpoint``: ``{"dir": "/mnt/pfs/ckpt/run1", "tracker"?: "latest_checkpointed_iteration.txt"}``."""
    if not isinstance(value, dict):
        problems.append(f"{where}: must be an object like {{\"dir\": \"/mnt/pfs/ckpt/run1\"}}")
        return None
    before = len(problems)
    for key in sorted(set(value) - {"dir", "tracker"}):
        problems.append(f"{key_path(where, key)}: unknown key (known: dir, tracker)")
    folder, tracker = value.get("dir"), value.get("tracker", Checkpoint.tracker)
    if (not isinstance(folder, str) or not folder.startswith(("/", "${")) or "\0" in folder
            or len(folder) > 4096):
        problems.append(f"{where}.dir: must be an absolute path (where the job saves its checkpoints; it may use "
                        f"${{params.NAME}}, ${{matrix.NAME}}, ${{run.id}}), found {describe(folder)}")
    if (not isinstance(tracker, str) or not tracker or "/" in tracker or "\0" in tracker or tracker in (".", "..")
            or len(tracker) > 255):
        problems.append(f"{where}.tracker: must be a file name in dir, e.g. \"latest_checkpointed_iteration.txt\", "
                        f"found {describe(tracker)}")
    # (the isinstance checks repeat what a problem above said, for the type checker)
    if len(problems) != before or not isinstance(folder, str) or not isinstance(tracker, str):
        return None
    return Checkpoint(folder, tracker)


MAX_CACHE_PATHS = 64


def _read_cache(value: Any, where: str, problems: List[str]) -> Optional[CacheSettings]:
    """``cache``: ``true``, or ``{"version"?: "2", "paths"?: ["/mnt/pfs/ckpt/llama2-7b-tp2"]}``."""
    if value is True:
        return CacheSettings()
    if not isinstance(value, dict):
        problems.append(f"{where}: must be true or an object like {{\"version\": \"2\", \"paths\": "
                        f"[\"/mnt/pfs/ckpt/llama2-7b-tp2\"]}}, found {describe(value)}")
        return None
    before = len(problems)
    for key in sorted(set(value) - {"version", "paths"}):
        problems.append(f"{key_path(where, key)}: unknown key (known: paths, version)"
                        + hint(key, {"version", "paths"}))
    version = value.get("version", "")
    if isinstance(version, int) and not isinstance(version, bool):
        version = str(version)
    if not isinstance(version, str) or len(version) > 100 or "\0" in version:
        problems.append(f"{where}.version: must be a text of at most 100 characters (bump it to run the step "
                        f"again), found {describe(version)}")
    paths = value.get("paths", [])
    if not isinstance(paths, list) or len(paths) > MAX_CACHE_PATHS:
        problems.append(f"{where}.paths: must be a list of at most {MAX_CACHE_PATHS} absolute paths (what the step "
                        f"makes; each must exist for a hit), found {describe(paths)}")
        paths = []
    for i, path in enumerate(paths):
        if not isinstance(path, str) or not path.startswith("/") or "\0" in path or len(path) > 4096:
            problems.append(f"{where}.paths[{i}]: must be an absolute path, found {describe(path)}")
    if len(problems) != before or not isinstance(version, str):
        return None
    return CacheSettings(version, tuple(paths))


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
            groups = compile_user(pattern).groups
        except re.error as exc:
            problems.append(f"{key_path(where, name)}: is not a valid regex: {exc}")
            continue
        if groups < 1:
            problems.append(f"{key_path(where, name)}: needs a group around the number, e.g. \"lm loss: ([0-9.E+-]+)\"")
            continue
        good[name] = pattern
    return good


def step_fields(parsed: StepSettings) -> Dict[str, Any]:
    """The :class:`~job_chain.spec.model.Step` fields these settings set (``depends_on`` is resolved later)."""
    graph = parsed.graph
    retry_on: Optional[Tuple[int, ...]] = graph.retry_on
    return {"retries": parsed.retries, "metrics": parsed.metrics, "run_on": graph.run_on, "timeout": graph.timeout,
            "hang_timeout": graph.hang_timeout, "retry_on": retry_on, "retry_budgets": parsed.retry_budgets,
            "failure_rules": parsed.failure_rules, "checkpoint": parsed.checkpoint, "max_parallel": parsed.max_parallel,
            "cache": parsed.cache}
