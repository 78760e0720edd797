"""The one set of rules for an AIHC create-job body, shared by the chain loader and the local server.

:func:`body_problems` returns *every* problem as ``(json path relative to the body, message)``,
e.g. ``("jobSpec.envs[0].name", "'A=B' is not a valid environment variable name")``. The chain
loader prefixes the paths with ``jobs[i].`` and lists them all; the local server answers 400
naming them. Keeping both on these rules means a chain that validates is a body the local
server accepts, and the other way round.

Known keys come from seed 001 (the create-job request table and its example) and the SDK's
create bodies (``baidubce/services/aihc``: ``chain_info_temp.py``, the ``JobSpec`` and
``Datasource`` models). Anything else is refused with a "did you mean" hint, so a typo such as
``"replica": 2`` cannot silently run one pod.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from job_chain.aihc.names import job_name_problem
from job_chain.jsonfile import describe, json_type

PRIORITIES = ("high", "normal", "low")  # seed 001: 高(high)、中(normal)、低(low); default normal
FRAMEWORK = "PyTorchJob"
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # use with fullmatch
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

TOP_KEYS = frozenset({"name", "queue", "jobFramework", "jobSpec", "faultTolerance", "labels", "priority",
                      "datasources", "enableBccl", "faultToleranceConfig"})
SPEC_KEYS = frozenset({"command", "image", "replicas", "resources", "enableRDMA", "envs",
                       "imageConfig", "hostNetwork"})
ENV_KEYS = frozenset({"name", "value"})
LABEL_KEYS = frozenset({"key", "value"})
DATASOURCE_KEYS = frozenset({"type", "name", "mountPath", "options"})
RESOURCE_KEYS = frozenset({"name", "quantity"})
MAX_REPLICAS = 2**31 - 1  # a Kubernetes int32 field; the local server caps lower (its own capacity)
_BOOLEANS = {"faultTolerance": "", "enableBccl": "", "enableRDMA": "jobSpec.", "hostNetwork": "jobSpec."}

Problem = Tuple[str, str]


def key_path(where: str, key: str) -> str:
    """The JSON path of ``key`` under ``where``: ``jobSpec.image``, or ``...['odd key']``."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{where}.{key}" if where else key
    shown = key if len(key) <= 60 else key[:57] + "..."  # cut inside the quotes, so they still pair
    return f"{where}[{describe(shown, limit=len(repr(shown)))}]"


def nul_problem(text: str) -> Optional[str]:
    """Where a NUL byte sits in ``text`` (no process can take one in an argument or env)."""
    at = text.find("\x00")
    if at < 0:
        return None
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    where = f"line {line} column {column}" if "\n" in text else f"character {at + 1}"
    return f"contains a NUL byte at {where}; no process can be given one (remove it)"


def env_name_problem(name: str) -> Optional[str]:
    if ENV_NAME_RE.fullmatch(name):
        return None
    return (f"{describe(name)} is not a valid environment variable name (letters, digits and '_', "
            "not starting with a digit)")


def unknown_keys(obj: Dict[str, Any], known: FrozenSet[str], where: str) -> List[Problem]:
    """One problem per key of ``obj`` not in ``known``, with the closest known key as a hint."""
    import difflib  # here: a job advancing a chain reads settings, never unknown keys

    problems = []
    for key in sorted(k for k in obj if k not in known):
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6) if len(key) < 100 else []
        hint = f" (did you mean \"{close[0]}\"?)" if close else f" (known: {', '.join(sorted(known))})"
        problems.append((key_path(where, key), "unknown key" + hint))
    return problems


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _quote_hint(value: Any) -> str:
    """`` (quote it: "3")`` for a short number or boolean given where a string belongs."""
    if not isinstance(value, (bool, int, float)):
        return ""
    try:
        text = json.dumps(value)
    except ValueError:  # an int too large to write out
        return ""
    return f" (quote it: \"{text}\")" if len(text) < 30 else ""


def _string(obj: Dict[str, Any], key: str, where: str, problems: List[Problem], *,
            required: bool = False, nul: bool = True) -> Optional[str]:
    """``obj[key]`` if it is a (non-empty, when required) string; else record why not."""
    path = key_path(where, key)
    if key not in obj or obj[key] is None:
        if required:
            problems.append((path, "required"))
        return None
    value = obj[key]
    if not isinstance(value, str):
        problems.append((path, f"must be a string, found {json_type(value)}{_quote_hint(value)}"))
        return None
    if required and not value.strip():
        problems.append((path, "must not be empty"))
        return None
    problem = nul_problem(value) if nul else None
    if problem:
        problems.append((path, problem))
        return None
    return value


def _objects(value: Any, where: str, what: str, problems: List[Problem]) -> List[Tuple[str, Dict[str, Any]]]:
    """(path, item) of each object in a list field; problems for a non-list or non-object items."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append((where, f"must be a list of {what} objects, found {json_type(value)}"))
        return []
    items = []
    for k, item in enumerate(value):
        if isinstance(item, dict):
            items.append((f"{where}[{k}]", item))
        else:
            problems.append((f"{where}[{k}]", f"must be an object with {what}, found {json_type(item)}"))
    return items


def priority_problem(priority: Any) -> Optional[str]:
    """Why ``priority`` is not one of :data:`PRIORITIES` (None if it is)."""
    if isinstance(priority, str) and priority in PRIORITIES:
        return None
    return f"must be one of {', '.join(PRIORITIES)}, found {describe(priority)}"


def body_problems(body: Any, *, max_replicas: Optional[int] = None) -> List[Problem]:
    """Every problem of a create-job body, as (path relative to the body, message).

    ``max_replicas`` adds a cap (the local server runs each replica as a process on one machine).
    ``jobSpec.command`` is the command itself: the chain loader resolves script files first.
    """
    if not isinstance(body, dict):
        return [("", f"must be an object (an AIHC create-job body), found {json_type(body)}")]
    problems: List[Problem] = unknown_keys(body, TOP_KEYS, "")
    name_problem = job_name_problem(body.get("name"))
    if name_problem:
        problems.append(("name", name_problem))
    if body.get("priority") is not None:
        problem = priority_problem(body["priority"])
        if problem:
            problems.append(("priority", problem))
    _string(body, "queue", "", problems)
    framework = body.get("jobFramework")
    if framework is not None and framework != FRAMEWORK:
        problems.append(("jobFramework", f"only {FRAMEWORK} is supported, found {describe(framework)}"))
    for key, where in _BOOLEANS.items():
        holder = body.get("jobSpec") if where else body
        if isinstance(holder, dict) and holder.get(key) is not None and not isinstance(holder[key], bool):
            problems.append((where + key, f"must be true or false, found {describe(holder[key])}"))

    spec = body.get("jobSpec")
    if not isinstance(spec, dict):
        problems.append(("jobSpec", "required (an object with image, command, replicas)"))
    else:
        problems.extend(unknown_keys(spec, SPEC_KEYS, "jobSpec"))
        _string(spec, "image", "jobSpec", problems, required=True)
        _string(spec, "command", "jobSpec", problems, required=True)
        replicas = spec.get("replicas", 1)
        if not _is_int(replicas) or not 1 <= replicas <= MAX_REPLICAS:
            problems.append(("jobSpec.replicas", f"must be a positive integer, found {describe(replicas)}"))
        elif max_replicas is not None and replicas > max_replicas:
            problems.append(("jobSpec.replicas", f"at most {max_replicas} on the local server, found {replicas}"))
        for ew, env in _objects(spec.get("envs"), "jobSpec.envs", "name and value", problems):
            problems.extend(unknown_keys(env, ENV_KEYS, ew))
            env_name = _string(env, "name", ew, problems, required=True)
            if env_name is not None:
                problem = env_name_problem(env_name)
                if problem:
                    problems.append((f"{ew}.name", problem))
            _string(env, "value", ew, problems)
        for rw, resource in _objects(spec.get("resources"), "jobSpec.resources", "name and quantity", problems):
            problems.extend(unknown_keys(resource, RESOURCE_KEYS, rw))
            _string(resource, "name", rw, problems, required=True)
            quantity = resource.get("quantity")
            if quantity is not None and (isinstance(quantity, bool) or not isinstance(quantity, (int, float))
                                         or quantity < 0):
                problems.append((f"{rw}.quantity", f"must be a number >= 0, found {describe(quantity)}"))

    for lw, label in _objects(body.get("labels"), "labels", "key and value", problems):
        problems.extend(unknown_keys(label, LABEL_KEYS, lw))
        _string(label, "key", lw, problems, required=True)
        if label.get("value") is None:
            problems.append((f"{lw}.value", "required (a string; \"\" for none)"))
        else:
            _string(label, "value", lw, problems)

    for dw, source in _objects(body.get("datasources"), "datasources", "type, name and mountPath", problems):
        problems.extend(unknown_keys(source, DATASOURCE_KEYS, dw))
        _string(source, "type", dw, problems)
        _string(source, "name", dw, problems)
        mount = _string(source, "mountPath", dw, problems, required=True)
        if mount is not None and not posixpath.isabs(mount):
            problems.append((f"{dw}.mountPath", f"must be an absolute path, found {describe(mount)}"))
    return problems


def join_path(prefix: str, path: str) -> str:
    """``prefix`` + a relative path: ``jobs[0]`` + ``jobSpec.image`` → ``jobs[0].jobSpec.image``."""
    if not path:
        return prefix
    if not prefix or path.startswith("["):
        return prefix + path
    return f"{prefix}.{path}"
