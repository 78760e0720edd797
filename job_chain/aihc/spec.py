"""The one set of rules for an AIHC create-job body, in two modes: strict (``job-chain validate``)
and accepting (the local server).

:func:`body_problems` (strict) returns *every* problem as ``(json path relative to the body,
message)``, e.g. ``("jobSpec.envs[0].name", "'A=B' is not a valid environment variable name")``,
an unknown key included, with a "did you mean" hint: a typo such as ``"replica": 2`` must not
silently run one pod. :func:`accepted_body` (accepting) applies the same rules but *ignores* an
unknown key, as BCE's API rule asks of every service ("all unrecognisable items should be
ignored", the InappropriateJSON row of BCE's common error table), and returns the ignored paths
so the local server can log them. One set of rules, so a chain that validates is a body the
local server accepts, and what the local server accepts is what AIHC takes.

Known keys: seed 001's create table, Baidu's current CreateJob page (``Hmayv96tj``, 2026-01),
the Python SDK's ``JobConfig``/``JobSpec``/``Resource``/``Datasource`` models
(``baidubce/services/aihc/modules/job/job_model.py``) and the Go SDK's
``OpenAPIJobCreateRequest``/``OpenAPIAIJobSpec``/``OpenAPIDatasource``
(``services/aihc/api/v1/aiJob.go``). docs/api-v2.md lists each with its source.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from job_chain.aihc.keys import BODY, Shape, _unknown_in, _without_unknown, key_path
from job_chain.aihc.names import job_name_problem
from job_chain.util.jsonfile import describe, json_type
from job_chain.util.safe_text import surrogate_at

PRIORITIES = ("high", "normal", "low")  # seed 001: 高(high)、中(normal)、低(low); default normal
FRAMEWORK = "PyTorchJob"
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # use with fullmatch

MAX_REPLICAS = 2**31 - 1  # a Kubernetes int32 field; the local server caps lower (its own capacity)
# Linux takes at most 32 pages per argument or environment string (MAX_ARG_STRLEN, with its
# closing NUL), and a job's command is one argument of ``bash -c``; all of them together at most
# ARG_MAX, 2 MiB with the default 8 MiB stack (less what the platform adds: PATH, RANK, ...).
MAX_ARG_BYTES = 32 * 4096 - 1
MAX_ARGS_TOTAL = 2 * 1024 * 1024 - 128 * 1024
# a Kubernetes resource quantity, as the SDK's ``Resource`` model sends it ("8", "1.5", "16Gi")
QUANTITY_RE = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")


_BOOLEANS = {"faultTolerance": "", "enableBccl": "", "enableRDMA": "jobSpec.", "hostNetwork": "jobSpec.",
             "privileged": "jobSpec."}
_STRINGS = ("faultToleranceArgs", "retentionPeriod", "runningTimeoutStopTimeUnit", "resourcePoolId")
_STRING_LISTS = ("logCollectionFilePatterns", "requiredNodeAffinity", "preferredNodeAffinity")
DATASOURCE_TYPES = ("pfs", "hostpath", "bos", "cfs", "rapidfs", "dataset")  # the job-spec page's list
_OBJECTS = ("tensorboardConfig", "alertConfig", "codeSource", "faultToleranceConfig")

Problem = Tuple[str, str]


def nul_problem(text: str) -> Optional[str]:
    """Where a NUL byte sits in ``text`` (no process can take one in an argument or env)."""
    at = text.find("\x00")
    if at < 0:
        return None
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    where = f"line {line} column {column}" if "\n" in text else f"character {at + 1}"
    return f"contains a NUL byte at {where}; no process can be given one (remove it)"


def surrogate_problem(text: str) -> Optional[str]:
    """Where a lone UTF-16 surrogate sits in ``text`` (JSON ``"\\udce9"``: half of a pair, no
    character, so it cannot be written as UTF-8 to a log, a process or an HTTP answer)."""
    at = surrogate_at(text)
    if at < 0:
        return None
    return (f"holds a lone UTF-16 surrogate {text[at]!a} at character {at + 1} (half of a pair, not a "
            "character): write the character itself, or remove the escape")


def surrogate_problems(value: Any, where: str = "") -> List[Problem]:
    """One problem per string (value or key) anywhere in ``value`` holding a lone surrogate."""
    try:  # the common case, at C speed: UTF-8 has no lone surrogates, so the encode fails on one
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return []
    except (UnicodeEncodeError, TypeError, ValueError, RecursionError):
        pass  # find each one, with its path
    problems: List[Problem] = []
    stack = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            problem = surrogate_problem(item)
            if problem:
                problems.append((path, problem))
        elif isinstance(item, dict):
            children = []
            for key, child in item.items():
                child_path = key_path(path, key)
                problem = surrogate_problem(key)
                if problem:
                    problems.append((child_path, "the key " + problem))
                children.append((child_path, child))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([(f"{path}[{k}]", child) for k, child in enumerate(item)]))
    return problems


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def argument_problems(spec: Dict[str, Any], command_room: int = 0) -> List[Problem]:
    """The command and envs against the kernel's limits (:data:`MAX_ARG_BYTES`, :data:`MAX_ARGS_TOTAL`).

    ``command_room``: bytes the command grows by before it runs (job-chain's tail).
    """
    problems: List[Problem] = []
    command = spec.get("command")
    total = 0
    if isinstance(command, str):
        size = _size(command) + command_room
        total += size
        if size > MAX_ARG_BYTES:
            grown = f" with room for job-chain's tail ({command_room} bytes)" if command_room else ""
            problems.append(("jobSpec.command", f"is {size} bytes{grown}; a job's command is one argument of "
                             f"bash -c and Linux takes at most {MAX_ARG_BYTES} bytes per argument, so the job "
                             "could not start: keep the script in a file on the mounted storage and run that"))
    envs = spec.get("envs")
    for k, env in enumerate(envs if isinstance(envs, list) else []):
        if not isinstance(env, dict) or not isinstance(env.get("name"), str) \
                or not isinstance(env.get("value", ""), str):
            continue
        size = _size(env["name"]) + 1 + _size(env.get("value") or "")
        total += size
        if size > MAX_ARG_BYTES:
            problems.append((f"jobSpec.envs[{k}].value", f"NAME=value is {size} bytes; Linux takes at most "
                             f"{MAX_ARG_BYTES} bytes per environment string: pass a file path instead"))
    if total > MAX_ARGS_TOTAL and not problems:
        problems.append(("jobSpec", f"the command and envs are {total} bytes together; Linux starts a process "
                         f"with at most about {MAX_ARGS_TOTAL} bytes of arguments and environment: move the "
                         "large parts into files on the mounted storage"))
    return problems


def env_name_problem(name: str) -> Optional[str]:
    if ENV_NAME_RE.fullmatch(name):
        return None
    return (f"{describe(name)} is not a valid environment variable name (letters, digits and '_', "
            "not starting with a digit)")


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


def body_problems(body: Any, *, max_replicas: Optional[int] = None, command_room: int = 0,
                  also_known: FrozenSet[str] = frozenset()) -> List[Problem]:
    """Every problem of a create-job body, as (path relative to the body, message): strict
    mode (``job-chain validate``), where an unknown key is a problem with a "did you mean" hint.

    ``max_replicas`` adds a cap (the local server runs each replica as a process on one machine).
    ``jobSpec.command`` is the command itself: the chain loader resolves script files first, and
    passes ``command_room``, what job-chain's tail adds to it. ``also_known``: keys the caller took
    out of the body before (a chain's ``jobChain``), so a misspelling of them is still told what it
    means.
    """
    if not isinstance(body, dict):
        return [("", f"must be an object (an AIHC create-job body), found {json_type(body)}")]
    top = {k: v for k, v in body.items() if k not in also_known}
    shape = Shape(BODY.keys | also_known, BODY.children) if also_known else BODY
    return _unknown_in(top, shape, "") + _value_problems(body, max_replicas, command_room) + surrogate_problems(body)


def accepted_body(body: Any, *, max_replicas: Optional[int] = None) -> Tuple[Any, List[Problem], List[str]]:
    """Accepting mode (the local server, as AIHC): (the body without unknown keys, its problems,
    the paths of the keys ignored). The same rules as :func:`body_problems`, but an item the
    service does not recognise is ignored, as BCE's API rule asks. A lone surrogate is refused
    anywhere, ignored keys included: nothing could log or store it."""
    if not isinstance(body, dict):
        return body, body_problems(body), []
    surrogates = surrogate_problems(body)
    if surrogates:
        return body, surrogates, []
    ignored: List[str] = []
    clean = _without_unknown(body, BODY, "", ignored)
    return clean, _value_problems(clean, max_replicas), ignored


def _value_problems(body: Dict[str, Any], max_replicas: Optional[int], command_room: int = 0) -> List[Problem]:
    """Every problem of a body's values (types, names, required fields), unknown keys aside."""
    problems: List[Problem] = []
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
    for key in _STRINGS:
        _string(body, key, "", problems)
    for key in _STRING_LISTS:
        value = body.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            problems.append((key, f"must be a list of strings, found {describe(value)}"))
    for key in _OBJECTS:
        if body.get(key) is not None and not isinstance(body[key], dict):
            problems.append((key, f"must be an object, found {json_type(body[key])}"))
    _fault_tolerance_problems(body.get("faultToleranceConfig"), problems)

    spec = body.get("jobSpec")
    if not isinstance(spec, dict):
        problems.append(("jobSpec", "required (an object with image, command, replicas)"))
    else:
        _spec_problems(spec, max_replicas, problems)
        problems.extend(argument_problems(spec, command_room))

    for lw, label in _objects(body.get("labels"), "labels", "key and value", problems):
        _string(label, "key", lw, problems, required=True)
        if label.get("value") is None:
            problems.append((f"{lw}.value", "required (a string; \"\" for none)"))
        else:
            _string(label, "value", lw, problems)

    for dw, source in _objects(body.get("datasources"), "datasources", "type, name and mountPath", problems):
        for key in ("type", "name", "id", "sourcePath"):
            _string(source, key, dw, problems)
        kind = source.get("type")
        if isinstance(kind, str) and kind not in DATASOURCE_TYPES:
            problems.append((f"{dw}.type", f"must be one of {', '.join(DATASOURCE_TYPES)} (AIHC's job-spec page), "
                                           f"found {describe(kind)}"))
        mount = _string(source, "mountPath", dw, problems, required=True)
        if mount is not None and not posixpath.isabs(mount):
            problems.append((f"{dw}.mountPath", f"must be an absolute path, found {describe(mount)}"))
    return problems



def _spec_problems(spec: Dict[str, Any], max_replicas: Optional[int], problems: List[Problem]) -> None:
    _string(spec, "image", "jobSpec", problems, required=True)
    _string(spec, "command", "jobSpec", problems, required=True)
    replicas = spec.get("replicas", 1)
    if not _is_int(replicas) or not 1 <= replicas <= MAX_REPLICAS:
        problems.append(("jobSpec.replicas", f"must be a positive integer, found {describe(replicas)}"))
    elif max_replicas is not None and replicas > max_replicas:
        problems.append(("jobSpec.replicas", f"at most {max_replicas} on the local server, found {replicas}"))
    for ew, env in _objects(spec.get("envs"), "jobSpec.envs", "name and value", problems):
        env_name = _string(env, "name", ew, problems, required=True)
        if env_name is not None:
            problem = env_name_problem(env_name)
            if problem:
                problems.append((f"{ew}.name", problem))
        _string(env, "value", ew, problems)
    for rw, resource in _objects(spec.get("resources"), "jobSpec.resources", "name and quantity", problems):
        _string(resource, "name", rw, problems, required=True)
        problem = quantity_problem(resource.get("quantity"))
        if problem:
            problems.append((f"{rw}.quantity", problem))
    config = spec.get("imageConfig")
    if config is not None and not isinstance(config, dict):
        problems.append(("jobSpec.imageConfig", f"must be an object with username and password, "
                                                f"found {json_type(config)}"))
    elif config:
        for key in ("username", "password"):
            _string(config, key, "jobSpec.imageConfig", problems)


MAX_QUANTITY = 2 ** 53  # far beyond any machine; keeps a pool's sums and unit conversions finite


def quantity_parts(text: str) -> Optional[Tuple[float, str]]:
    """(its number, its unit: "" for none) of a quantity string such as "16Gi"; None if it is not one."""
    if not QUANTITY_RE.fullmatch(text):
        return None
    unit = text.lstrip("0123456789.")
    return float(text[:len(text) - len(unit)]), unit


def quantity_problem(quantity: Any) -> Optional[str]:
    """Why a resource ``quantity`` is not a number >= 0 or a quantity string ("8", "16Gi"), or is
    beyond :data:`MAX_QUANTITY`."""
    if quantity is None:
        return None
    if isinstance(quantity, str):
        parts = quantity_parts(quantity)
        if parts is None:
            return f"must be a number >= 0 or a quantity such as \"8\" or \"16Gi\", found {describe(quantity)}"
        number = parts[0]  # the number before its unit
    elif isinstance(quantity, bool) or not isinstance(quantity, (int, float)) or not quantity >= 0:
        return f"must be a number >= 0, found {describe(quantity)}"
    else:
        number = float(quantity) if quantity <= MAX_QUANTITY else float("inf")
    return None if number <= MAX_QUANTITY else f"must be at most {MAX_QUANTITY}, found {describe(quantity)}"


def _fault_tolerance_problems(config: Any, problems: List[Problem]) -> None:
    """``faultToleranceConfig`` as the Go SDK's OpenAPIJobFaultToleranceConfig types it."""
    if not isinstance(config, dict):
        return
    where = "faultToleranceConfig"
    for key, most in (("faultToleranceLimit", DEFAULT_RESTARTS), ("hangDetectionTimeoutMinutes", 1000)):
        value = config.get(key)
        if value is not None and (not _is_int(value) or not 0 <= value <= most):
            problems.append((f"{where}.{key}", f"must be a whole number from 0 to {most}, found {describe(value)}"
                             + (" (AIHC restarts a failed job at most 3 times)" if most == DEFAULT_RESTARTS else "")))
    hang = config.get("enabledHangDetection")
    if hang is not None and not isinstance(hang, bool):
        problems.append((f"{where}.enabledHangDetection", f"must be true or false, found {describe(hang)}"))
    patterns = config.get("customFaultTolerancePattern")
    if patterns is not None and (not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns)):
        problems.append((f"{where}.customFaultTolerancePattern",
                         f"must be a list of strings, found {describe(patterns)}"))


# -- AIHC's own fault tolerance (the training fault-tolerance page, kljz3qhnq, 2026-01) ------------------
DEFAULT_RESTARTS = 3  # "无条件重试": AIHC retries a failed job at most 3 times (the page's maximum, and the most
# faultToleranceLimit may say)
DEFAULT_HANG_MINUTES = 30  # the local server's own default when hang detection is on without a timeout


def _tolerance_args(body: Dict[str, Any]) -> Dict[str, str]:
    """``faultToleranceArgs`` (v2, a string of flags such as ``--enable-hang-detection=true
    --hang-detection-log-timeout-minutes=7``) as flag name -> value (``true`` for a bare flag)."""
    import shlex

    text = body.get("faultToleranceArgs")
    try:
        words = shlex.split(text) if isinstance(text, str) else []
    except ValueError:
        words = text.split() if isinstance(text, str) else []
    out: Dict[str, str] = {}
    for at, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, sep, value = word[2:].partition("=")
        if not sep:
            following = words[at + 1] if at + 1 < len(words) else ""
            value = following if following and not following.startswith("--") else "true"
        out[name] = value
    return out


def restart_limit(body: Dict[str, Any]) -> int:
    """How many times AIHC's fault tolerance restarts a failed job of this create body itself: 0
    without ``faultTolerance``; else ``faultToleranceConfig.faultToleranceLimit`` (the Go SDK's
    OpenAPIJobFaultToleranceConfig), else :data:`DEFAULT_RESTARTS`."""
    if body.get("faultTolerance") is not True:
        return 0
    limit: Any = (body.get("faultToleranceConfig") or {}).get("faultToleranceLimit")
    return int(limit) if _is_int(limit) and limit >= 0 else DEFAULT_RESTARTS


def hang_minutes(body: Dict[str, Any]) -> Optional[int]:
    """After how many minutes without a line from any pod AIHC's hang detection finds a job of
    this body hung (None: it does not look). On with ``faultTolerance`` and either
    ``faultToleranceConfig.enabledHangDetection`` (+ ``hangDetectionTimeoutMinutes``, v1) or
    ``faultToleranceArgs`` ``--enable-hang-detection=true`` (+ ``--hang-detection-log-timeout-minutes``)."""
    if body.get("faultTolerance") is not True:
        return None
    config = body.get("faultToleranceConfig") or {}
    args = _tolerance_args(body)
    if config.get("enabledHangDetection") is True:
        minutes: Any = config.get("hangDetectionTimeoutMinutes")
    elif args.get("enable-hang-detection", "").lower() == "true":
        minutes = args.get("hang-detection-log-timeout-minutes")
        minutes = int(minutes) if isinstance(minutes, str) and minutes.isdigit() else None
    else:
        return None
    return int(minutes) if _is_int(minutes) and minutes > 0 else DEFAULT_HANG_MINUTES
