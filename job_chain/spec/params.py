"""Parameters and references: ``${params.X}``, ``${matrix.X}``, ``${run.id}`` and ``${steps.S.outputs.K}``.

A chain's top-level ``params`` are defaults; ``--param NAME=VALUE`` overrides them when a run
starts, and the run freezes the result. References are replaced in the *string values* of a
step's create body (its inline command, env values, labels, datasource paths, …) when the step
is submitted; a script *file* runs byte for byte, so it reads ``$JOB_CHAIN_PARAM_X`` instead. Of a
job's ``jobChain`` settings, only ``checkpoint`` (``dir``, ``tracker``) is a place for references
(params, matrix and the run id: what is known when the step is submitted); a reference anywhere else
in ``jobChain`` is refused by ``validate`` (:func:`check_settings_refs`), never kept literally.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Callable, Container, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from job_chain.errors import JobChainError, UsageError
from job_chain.spec.model import SETTINGS_KEY, Chain, Checkpoint, Step
from job_chain.util.jsonfile import describe, json_type
from job_chain.util.suggest import did_you_mean

NAME = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
NAME_RE = re.compile(NAME)
MAX_PARAMS = 64
MAX_VALUE = 4096  # bytes of one parameter or matrix value
PARAM_ENV = "JOB_CHAIN_PARAM_"
MATRIX_ENV = "JOB_CHAIN_MATRIX_"
KINDS = ("params", "matrix", "steps", "run")
RUN_ID = "${run.id}"
# anything shaped like ${word.…}: never valid bash, so always meant as a reference
# (no `$` inside: each try stops at the next `$`, so a scan is linear — `${a.${a.…` was quadratic)
_CANDIDATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\.([^}\s$]*)\}")
_STEP_OUTPUT = re.compile(rf"([A-Za-z0-9][-A-Za-z0-9_]*)\.outputs\.({NAME})")


@dataclass(frozen=True)
class Ref:
    """One reference: ``kind`` params|matrix|steps|run, ``name`` (the param, matrix key or step), ``key``
    (the output, for steps)."""

    kind: str
    name: str
    key: str = ""
    text: str = ""  # as written: ${params.lr}


class MissingOutput(JobChainError):
    """A step refers to an output its ancestor did not record: the step cannot be submitted."""


def as_text(value: Any) -> Optional[str]:
    """A parameter or matrix value as the string it stands for: strings and whole numbers (a
    fraction is refused: 1e-4 would come back as 0.0001)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def value_problem(text: str) -> Optional[str]:
    if "\x00" in text:
        return "contains a NUL byte"
    if len(text.encode("utf-8", "surrogatepass")) > MAX_VALUE:
        return f"longer than {MAX_VALUE} bytes"
    return None


def read_params(value: Any, problems: List[str]) -> Dict[str, str]:
    """The top-level ``params`` object: name -> default value (strings or whole numbers)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(f"params: must be an object of name -> default value, e.g. {{\"lr\": \"1e-4\"}}, "
                        f"found {json_type(value)}")
        return {}
    if len(value) > MAX_PARAMS:
        problems.append(f"params: at most {MAX_PARAMS} parameters, found {len(value)}")
        return {}
    out: Dict[str, str] = {}
    upper: Dict[str, str] = {}
    for name, default in value.items():
        where = name_path("params", name)
        problem = env_name_problem(name, upper, PARAM_ENV, "parameter")
        if problem:
            problems.append(f"{where}: {problem}")
            continue
        text = as_text(default)
        if text is None:
            problems.append(f"{where}: must be a string (write numbers as strings, e.g. \"1e-4\", so they keep "
                            f"their spelling), found {json_type(default)}")
            continue
        problem = value_problem(text)
        if problem:
            problems.append(f"{where}: {problem}")
            continue
        out[name] = text
        upper[name.upper()] = name
    return out


def name_path(where: str, name: str) -> str:
    """``params.lr``, or ``params['a b']`` for a name that is not an identifier."""
    return f"{where}.{name}" if NAME_RE.fullmatch(name) else f"{where}[{describe(name)}]"


def env_name_problem(name: str, taken: Mapping[str, str], prefix: str, what: str) -> Optional[str]:
    """Why ``name`` (a parameter or matrix name, which becomes ``prefix`` + NAME upper-cased) cannot
    be one; ``taken``: upper-cased name -> the name already using it."""
    if not NAME_RE.fullmatch(name):
        return (f"a {what} name is letters, digits and '_', not starting with a digit (it becomes the environment "
                f"variable {prefix}<NAME>)")
    if name.upper() in taken:
        return f"{describe(name)} and {describe(taken[name.upper()])} would both be {prefix}{name.upper()}: rename one"
    return None


def parse_param_args(args: Iterable[str]) -> Dict[str, str]:
    """``["lr=3e-4", "tag=x"]`` (the ``--param`` options) as a dict; :class:`UsageError` if malformed."""
    out: Dict[str, str] = {}
    for arg in args:
        name, sep, value = arg.partition("=")
        if not sep or not NAME_RE.fullmatch(name):
            raise UsageError(f"--param {arg}: write NAME=VALUE, e.g. --param lr=3e-4")
        problem = value_problem(value)
        if problem:
            raise UsageError(f"--param {name}: the value {problem}")
        out[name] = value
    return out


def resolve_params(defaults: Mapping[str, str], given: Mapping[str, str], path: str) -> Dict[str, str]:
    """The values a run uses: the chain's defaults with ``given`` (``--param``) over them. An unknown
    name is an error that lists the known ones."""
    for name in given:
        if name not in defaults:
            known = ", ".join(sorted(defaults)) or "none: add a top-level \"params\" object"
            raise UsageError(f"--param {name}: {path} has no parameter {describe(name)}"
                             f"{did_you_mean(name, defaults)} (its params: {known})")
    return {**defaults, **given}


def env_name(prefix: str, name: str) -> str:
    return prefix + name.upper()


# -- references -----------------------------------------------------------------------------------
def scan(text: str) -> Tuple[List[Ref], List[str]]:
    """The references in ``text``, and why each malformed one is not a reference."""
    refs: List[Ref] = []
    bad: List[str] = []
    for found in _CANDIDATE.finditer(text):
        kind, rest, whole = found.group(1), found.group(2), found.group(0)
        if kind in ("params", "matrix") and NAME_RE.fullmatch(rest):
            refs.append(Ref(kind, rest, text=whole))
            continue
        if kind == "run" and rest == "id":
            refs.append(Ref("run", "id", text=whole))
            continue
        output = _STEP_OUTPUT.fullmatch(rest) if kind == "steps" else None
        if output:
            refs.append(Ref("steps", output.group(1), output.group(2), whole))
            continue
        hint = did_you_mean(kind, KINDS) if kind not in KINDS else ""
        bad.append(f"{whole} is not a reference{hint}: write ${{params.NAME}}, ${{matrix.NAME}}, ${{run.id}} or "
                   "${steps.STEP.outputs.KEY}")
    return refs, bad


def strings(body: Any, *, script_file: bool, where: str = "") -> Iterator[Tuple[str, str]]:
    """(JSON path, text) of each string value of a create body that references are replaced in: not
    the job's ``name`` (its identity), not the command when it is a script file's content."""
    if isinstance(body, dict):
        for key, value in body.items():
            path = f"{where}.{key}" if where else str(key)
            if (path == "name") or (path == "jobSpec.command" and script_file):
                continue
            yield from strings(value, script_file=script_file, where=path)
    elif isinstance(body, list):
        for i, value in enumerate(body):
            yield from strings(value, script_file=script_file, where=f"{where}[{i}]")
    elif isinstance(body, str):
        yield where, body


def step_refs(body: Dict[str, Any], script_file: bool) -> List[Ref]:
    return [ref for _, text in strings(body, script_file=script_file) for ref in scan(text)[0]]


COMMAND = "jobSpec.command"  # the one string a shell runs: values go into it as one quoted word each


def substitute(body: Any, value_of: Callable[[Ref], str], *, script_file: bool, where: str = "") -> Any:
    """A copy of ``body`` with every reference replaced by ``value_of(ref)`` (see :func:`strings`).

    In the inline command (:data:`COMMAND`) each value is put in as ONE shell word, quoted
    (``shlex.quote``): a value a job wrote to ``$JOB_CHAIN_OUTPUTS``, a ``--param`` or a matrix value
    arrives as that string, never as shell syntax (``$(…)``, backticks, ``;``, a quote that breaks
    out). Everywhere else (env values, labels, paths) the value is put in as it is."""
    if isinstance(body, dict):
        out = {}
        for key, value in body.items():
            path = f"{where}.{key}" if where else str(key)
            skip = path == "name" or (path == COMMAND and script_file)
            out[key] = value if skip else substitute(value, value_of, script_file=script_file, where=path)
        return out
    if isinstance(body, list):
        return [substitute(v, value_of, script_file=script_file, where=f"{where}[{i}]") for i, v in enumerate(body)]
    if isinstance(body, str) and "${" in body:
        refs = {ref.text: ref for ref in scan(body)[0]}
        word: Callable[[str], str] = shlex.quote if where == COMMAND else str

        return _CANDIDATE.sub(lambda m: word(value_of(refs[m.group(0)])) if m.group(0) in refs else m.group(0), body)
    return body


def quoted_refs(command: str) -> List[str]:
    """The references of a shell command that sit inside '…' or "…": a value goes in already quoted
    as one word, so there its quotes would be kept literally. One pass over the text (a shell's
    quoting, roughly: backslash escapes outside single quotes; ``$(…)`` is not followed)."""
    found = list(_CANDIDATE.finditer(command))
    if not found:
        return []
    out: List[str] = []
    state, escaped, at = "", False, 0
    for match in found:
        while at < match.start():
            char = command[at]
            if escaped:
                escaped = False
            elif char == "\\" and state != "'":
                escaped = True
            elif state == "" and char in "'\"":
                state = char
            elif char == state:
                state = ""
            at += 1
        if state and not escaped:
            out.append(match.group(0))
    return out


def check_step_refs(body: Dict[str, Any], where: str, *, script_file: bool, script: Optional[str], name: str,
                    params: Mapping[str, str], matrix: Optional[Mapping[str, Any]], ancestors: Container[str],
                    steps: Mapping[str, Tuple[str, int]], problems: List[str], warnings: List[str]) -> None:
    """Every reference of one job (a matrix step before it is expanded), reported at its JSON path.

    ``steps``: every job's name -> (what it is: "step" | "matrix" | "handler", its points);
    ``ancestors``: the names of the jobs this one waits for, directly or not.
    """
    from job_chain.aihc.keys import join_path

    for path, text in strings(body, script_file=script_file):
        refs, bad = scan(text)
        at = join_path(where, path)
        problems.extend(f"{at}: {why}" for why in bad)
        for ref in refs:
            why = _ref_problem(ref, name, params, matrix, ancestors, steps)
            if why:
                problems.append(f"{at}: {ref.text}: {why}")
        if path == COMMAND:
            for text_ in dict.fromkeys(quoted_refs(text)):
                warnings.append(f"{at}: {text_} sits inside shell quotes; a value is put into the command as one "
                                "shell word, already quoted, so there its quotes would stay in the value: write "
                                f"{text_} without quotes around it")
    candidate = _CANDIDATE.search(script) if script_file and script else None
    if candidate:
        warnings.append(f"{where}.jobSpec.command: the script file contains {candidate.group(0)}, which runs as "
                        "written (script files are never rewritten): read $JOB_CHAIN_PARAM_<NAME> / "
                        "$JOB_CHAIN_MATRIX_<NAME> there, or pass the reference in an env value")


def param_typos(job: Dict[str, Any], where: str, known: Iterable[str], problems: List[str]) -> None:
    """Only the ``${params.X}`` references of one job (its create body and its checkpoint) that name
    no parameter: what validate lists with a chain file's other problems, before the rest of the
    reference rules can run."""
    from job_chain.aihc.keys import join_path

    settings = job.get(SETTINGS_KEY)
    checkpoint = settings.get("checkpoint") if isinstance(settings, dict) else None
    body = {k: v for k, v in job.items() if k != SETTINGS_KEY}
    known = set(known)
    places = [(where, body), (f"{where}.{SETTINGS_KEY}.checkpoint", checkpoint)]
    for base, value in places:
        for path, text in strings(value, script_file=False):
            for ref in scan(text)[0]:
                if ref.kind == "params" and ref.name not in known:
                    problems.append(f"{join_path(base, path)}: {ref.text}: no parameter {describe(ref.name)}"
                                    f"{did_you_mean(ref.name, known)}")


def _ref_problem(ref: Ref, name: str, params: Mapping[str, str], matrix: Optional[Mapping[str, Any]],
                 ancestors: Container[str], steps: Mapping[str, Tuple[str, int]]) -> Optional[str]:
    if ref.kind == "run":
        return None
    if ref.kind == "params":
        if ref.name in params:
            return None
        known = ", ".join(sorted(params)) or "none: add a top-level \"params\" object"
        return f"no parameter {describe(ref.name)}{did_you_mean(ref.name, params)} (params: {known})"
    if ref.kind == "matrix":
        if not matrix:
            return "this job has no jobChain.matrix"
        if ref.name in matrix:
            return None
        return f"no {describe(ref.name)} in this job's matrix{did_you_mean(ref.name, matrix)} " \
               f"(it has: {', '.join(matrix)})"
    what = steps.get(ref.name)
    if what is None:
        return f"no job {describe(ref.name)} in this chain{did_you_mean(ref.name, steps)}"
    if ref.name == name:
        return "a job cannot use its own outputs (they exist once it ended)"
    if what[0] == "matrix":
        return (f"{ref.name} is a matrix of {what[1]} points, which each have their own outputs: one "
                "reference cannot name them (write them to shared storage, or read them in a later step)")
    if ref.name not in ancestors:
        return (f"{ref.name} is not a job this one waits for (jobChain.dependsOn, directly or not): its "
                "outputs are not known when this job starts")
    return None


def value_of_for(params: Mapping[str, str], point: Mapping[str, str], outputs: Mapping[str, Mapping[str, str]],
                 step: str, run_id: str) -> Callable[[Ref], str]:
    """How :func:`substitute` finds a reference's value when ``step`` of run ``run_id`` is submitted."""
    def value_of(ref: Ref) -> str:
        if ref.kind == "run":
            return run_id
        if ref.kind == "params" and ref.name in params:
            return params[ref.name]
        if ref.kind == "matrix" and ref.name in point:
            return point[ref.name]
        if ref.kind == "steps":
            recorded = outputs.get(ref.name)
            if recorded is not None and ref.key in recorded:
                return recorded[ref.key]
            if recorded is None:
                raise MissingOutput(f"step {step} uses {ref.text}, but no outputs of step {ref.name} are known "
                                    "in this run (it did not run in it, or did not succeed)")
            keys = ", ".join(sorted(recorded)) or "none"
            raise MissingOutput(f"step {step} uses {ref.text}, but step {ref.name} did not write {ref.key} to "
                                f"$JOB_CHAIN_OUTPUTS (it wrote: {keys}): fix it, then 'resume --rerun "
                                f"{ref.name}'")
        raise MissingOutput(f"step {step} uses {ref.text}, which this run cannot resolve")
    return value_of


# -- references in jobChain settings --------------------------------------------------------------
CHECKPOINT_KEYS = ("dir", "tracker")  # jobChain.checkpoint's strings: references are replaced there
_SHELL_VAR = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")


def check_settings_refs(settings: Any, where: str, *, params: Mapping[str, str],
                        matrix: Optional[Mapping[str, Any]], problems: List[str]) -> None:
    """Every ``${…}`` of one job's ``jobChain`` object (``where``), reported at its JSON path: in
    ``checkpoint.dir``/``tracker`` a parameter, a matrix value or the run id (known when the step
    is submitted; a shell variable is not, no shell reads the path); anywhere else none is replaced,
    so each is refused rather than kept as written."""
    from job_chain.aihc.keys import join_path

    checkpoint = settings.get("checkpoint") if isinstance(settings, dict) else None
    for path, text in strings(settings, script_file=False):
        own = isinstance(checkpoint, dict) and path in (f"checkpoint.{k}" for k in CHECKPOINT_KEYS)
        at = join_path(where, path)
        refs, bad = scan(text)
        if path.startswith("cache.paths[") and not bad:  # replaced as the step's key is computed (docs/caching.md)
            for ref in refs:
                why = ("a cached step's paths are the same in every run that may reuse it: use ${params.NAME} or "
                       "${matrix.NAME}" if ref.kind in ("run", "steps")
                       else _ref_problem(ref, "", params, matrix, (), {}))
                if why:
                    problems.append(f"{at}: {ref.text}: {why}")
            continue
        if not own:
            if refs or bad:
                found = (refs[0].text if refs else _CANDIDATE.search(text).group(0))  # type: ignore[union-attr]
                problems.append(f"{at}: {found}: references are replaced only in the job's create body, "
                                "jobChain.checkpoint and jobChain.cache.paths; write the value itself here")
            continue
        problems.extend(f"{at}: {why}" for why in bad)
        for ref in refs:
            why = ("a step's outputs are not known where its own checkpoint is read: use ${params.NAME}, "
                   "${matrix.NAME} or ${run.id}" if ref.kind == "steps"
                   else _ref_problem(ref, "", params, matrix, (), {}))
            if why:
                problems.append(f"{at}: {ref.text}: {why}")
        shell = _SHELL_VAR.search(_CANDIDATE.sub("", text))
        if shell:
            hint = RUN_ID if shell.group(0).strip("${}") == "JOB_CHAIN_RUN_ID" else "${params.NAME}"
            problems.append(f"{at}: {shell.group(0)} is a shell variable, and no shell reads this path: write "
                            f"{hint} (or ${{matrix.NAME}}, ${{run.id}}), which job-chain replaces")


def check_top_level_refs(data: Mapping[str, Any], problems: List[str]) -> None:
    """A ``${…}`` in a top-level string of the chain (``config_path``, ``scrips_path``, ``cacheDir``, a
    parameter's default, a webhook, …) is never replaced: refused at its JSON path, not kept as written.
    ``jobs`` (checked job by job) and ``api_config`` (keys: never quoted back) are not walked."""
    rest = {k: v for k, v in data.items() if k not in ("jobs", "api_config")}
    for path, text in strings(rest, script_file=False):
        found = _CANDIDATE.search(text)
        if found:
            problems.append(f"{path}: {found.group(0)}: references are replaced only in a job's create body and in "
                            "its jobChain.checkpoint; write the value itself here")


def resolve_text(text: str, params: Mapping[str, str], point: Mapping[str, str], run_id: str, step: str) -> str:
    """``text`` (a ``jobChain.checkpoint`` string) with its parameters, matrix values and run id
    replaced."""
    return substitute(text, value_of_for(params, point, {}, step, run_id), script_file=False)


def checkpoint_of(chain: Chain, step: Step, run_id: str) -> Optional[Checkpoint]:
    """Where ``step`` of run ``run_id`` saves its checkpoints: its ``jobChain.checkpoint`` with the
    run's parameters, the step's matrix values and the run id in place (None: no checkpoint)."""
    spec = step.checkpoint
    if spec is None:
        return None
    return Checkpoint(*(resolve_text(text, chain.params, step.point, run_id, step.display)
                        for text in (spec.dir, spec.tracker)))


def checkpoint_problem(spec: Checkpoint) -> Optional[str]:
    """Why a checkpoint's settings, references replaced, cannot be used (None: they can)."""
    if not spec.dir.startswith("/"):
        return f"dir becomes {spec.dir!r}, not an absolute path"
    if not spec.tracker or "/" in spec.tracker or spec.tracker in (".", ".."):
        return f"tracker becomes {spec.tracker!r}, not a file name"
    return None
