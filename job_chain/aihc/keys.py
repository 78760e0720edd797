"""JSON paths and the keys a create-job body may hold: where a problem is, and what a misspelt
key most likely means ("did you mean"). The known keys (:data:`BODY`) are AIHC's: the v1 create
table, Baidu's current CreateJob page, the Python SDK's models and the Go SDK's request types
(docs/api-v2.md lists each with its source)."""

from __future__ import annotations

import re
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Tuple

from job_chain.util.jsonfile import describe
from job_chain.util.suggest import closest

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
Problem = Tuple[str, str]


def key_path(where: str, key: str) -> str:
    """The JSON path of ``key`` under ``where``: ``jobSpec.image``, or ``...['odd key']``."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{where}.{key}" if where else key
    shown = key if len(key) <= 60 else key[:57] + "..."  # cut inside the quotes, so they still pair
    return f"{where}[{describe(shown, limit=len(repr(shown)))}]"


def join_path(prefix: str, path: str) -> str:
    """``prefix`` + a relative path: ``jobs[0]`` + ``jobSpec.image`` → ``jobs[0].jobSpec.image``."""
    if not path:
        return prefix
    if not prefix or path.startswith("["):
        return prefix + path
    return f"{prefix}.{path}"


def hint(key: str, known: Iterable[str]) -> str:
    """`` (did you mean "jobChain"?)``, else `` (known: a, b, c)``."""
    near = closest(key, known)
    return f" (did you mean \"{near}\"?)" if near else f" (known: {', '.join(sorted(known))})"


def unknown_keys(obj: Dict[str, Any], known: FrozenSet[str], where: str) -> List[Problem]:
    """One problem per key of ``obj`` not in ``known``, with the closest known key as a hint."""
    unknown = sorted(k for k in obj if k not in known)
    return [(key_path(where, key), "unknown key" + hint(key, known)) for key in unknown]


def _unknown_in(obj: Any, shape: Shape, where: str) -> List[Problem]:
    """Every unknown key of ``obj`` and of the objects nested in it that ``shape`` describes."""
    if not isinstance(obj, dict):
        return []
    problems = unknown_keys(obj, shape.keys, where) if shape.keys else []
    for key, (kind, child) in shape.children.items():
        value = obj.get(key)
        if kind == "object":
            problems += _unknown_in(value, child, key_path(where, key))
        elif isinstance(value, list):
            for k, item in enumerate(value):
                problems += _unknown_in(item, child, f"{key_path(where, key)}[{k}]")
    return problems


def _without_unknown(obj: Any, shape: Shape, where: str, ignored: List[str]) -> Any:
    """A copy of ``obj`` without the keys ``shape`` does not know (their paths go to ``ignored``)."""
    if not isinstance(obj, dict):
        return obj
    out = {}
    for key, value in obj.items():
        path = key_path(where, key)
        if shape.keys and key not in shape.keys:
            ignored.append(path)
            continue
        kind, child = shape.children.get(key, ("", LEAF))
        if kind == "object":
            value = _without_unknown(value, child, path, ignored)
        elif kind == "list" and isinstance(value, list):
            value = [_without_unknown(item, child, f"{path}[{k}]", ignored) for k, item in enumerate(value)]
        out[key] = value
    return out


class Shape:
    """The keys an object may hold, and the objects (or lists of objects) nested under some."""

    def __init__(self, keys: FrozenSet[str], children: Optional[Dict[str, Tuple[str, Shape]]] = None) -> None:
        self.keys = keys
        self.children = children or {}


def _keys(*names: str) -> FrozenSet[str]:
    return frozenset(names)


LEAF = Shape(frozenset())
# seed 001's create table, its tensorboardConfig (2025 v1 page), Baidu's CreateJob page (2026:
# faultToleranceArgs, alertConfig, retentionPeriod), the SDK's JobConfig (resourcePoolId in the
# body) and the Go SDK's OpenAPIJobCreateRequest (codeSource … runningTimeoutStopTimeUnit)
BODY = Shape(_keys("name", "queue", "jobFramework", "jobSpec", "faultTolerance", "labels", "priority",
                   "datasources", "enableBccl", "faultToleranceConfig", "faultToleranceArgs",
                   "tensorboardConfig", "alertConfig", "retentionPeriod", "resourcePoolId", "codeSource",
                   "logCollectionFilePatterns", "requiredNodeAffinity", "preferredNodeAffinity",
                   "runningTimeoutStopTimeUnit"), {
    "jobSpec": ("object", Shape(_keys("command", "image", "replicas", "resources", "enableRDMA", "envs",
                                      "imageConfig", "hostNetwork", "privileged"), {
        "envs": ("list", Shape(_keys("name", "value"))),
        "resources": ("list", Shape(_keys("name", "quantity"))),
        "imageConfig": ("object", Shape(_keys("username", "password"))),
    })),
    "labels": ("list", Shape(_keys("key", "value"))),
    "datasources": ("list", Shape(_keys("type", "name", "mountPath", "options", "id", "sourcePath"))),
    # the Go SDK's OpenAPIJobFaultToleranceConfig
    "faultToleranceConfig": ("object", Shape(_keys("enabledHangDetection", "hangDetectionTimeoutMinutes",
                                                    "faultToleranceLimit", "customFaultTolerancePattern"))),
})
