"""Load a chain file (the seed's format, unchanged) and list every problem with its JSON path.

Nothing is submitted from a chain that has any problem: :func:`load_chain` raises
:class:`ChainFileError` carrying all of them, one line each (``jobs[1].jobSpec.image: required``).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Any, Dict, List, Optional, Tuple

from job_chain.aihc.keys import join_path, key_path
from job_chain.aihc.spec import MAX_ARG_BYTES, body_problems, surrogate_problems
from job_chain.errors import ChainFileInvalid, UsageError
from job_chain.spec import notify as notify_
from job_chain.spec.graph import GraphSettings, check_graph
from job_chain.spec.matrix import MAX_STEPS
from job_chain.spec.model import SETTINGS_KEY, Chain, Step
from job_chain.spec.scripts import beside, bytes_digest, script_bytes, text_digest
from job_chain.spec.settings import read_step_settings, step_fields
from job_chain.util.jsonfile import decode_utf8, describe, json_type, load_json_with_text, shown
from job_chain.util.suggest import closest

TOP_LEVEL_KEYS = {"scrips_path", "config_path", "api_config", "resourcePoolId", "jobs", "notify", "params",
                  "maxRunning", "cacheDir", "engine", "slurm", SETTINGS_KEY}
ENGINES = ("aihc", "slurm")
# what AIHC reads of a create body and Slurm has no use for: told, not refused, so one file can name
# either engine (docs/slurm.md: what maps to what)
AIHC_ONLY = {"jobSpec.image": "Slurm runs the command on the nodes as they are (no container image)",
             "datasources": "Slurm nodes see the shared filesystem directly (no mounts to declare)",
             "queue": "use the \"slurm\" section's \"partition\"/\"qos\"",
             "priority": "use the \"slurm\" section's \"qos\" or \"nice\"",
             "faultToleranceConfig": "use jobChain.retries / retryBudgets (Slurm's requeue is not used)",
             "tensorboardConfig": "not on Slurm", "enableBccl": "not on Slurm"}
_SCRIPT_TOKEN = re.compile(r"\S+\.sh")  # use with fullmatch
_RUNNERS = ("bash", "sh")  # `bash X` / `sh X`: the script runs with that shell
# a word of a command or script that may be a relative path: no quote, operator, `=` or `$`
_WORD = re.compile(r"[^\s'\"`;|&<>()=${}]+")
TAIL_ROOM = 4096  # bytes job-chain's tail may add to a step's script (~1.4 KB with every option)


class ChainFileError(ChainFileInvalid):
    """A chain file with problems; ``problems`` lists each as ``json.path: what is wrong``."""

    def __init__(self, path: str, problems: List[str]) -> None:
        self.path = path
        self.problems = problems
        count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
        super().__init__(f"{path}: {count}, nothing submitted:\n" + "\n".join(f"  {p}" for p in problems))


class _Checker:
    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: List[str] = []
        self.warnings: List[str] = []
        self.beside: Dict[str, bool] = {}  # words of commands that name a file beside the chain
        self.read: Dict[str, Optional[str]] = {}  # script files consulted: name -> digest (None: not one)

    def problem(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def string(self, obj: Dict[str, Any], key: str, where: str, *, required: bool = False) -> Optional[str]:
        if key not in obj or obj[key] is None:
            if required:
                self.problem(key_path(where, key), "required")
            return None
        value = obj[key]
        if not isinstance(value, str):
            self.problem(key_path(where, key), f"must be a string, found {json_type(value)}")
            return None
        if required and not value.strip():
            self.problem(key_path(where, key), "must not be empty")
            return None
        return value


def _read_script(chain_dir: str, name: str, scripts: Optional[Dict[str, str]] = None,
                 read: Optional[Dict[str, Optional[str]]] = None) -> Tuple[Optional[str], Optional[str]]:
    """(the script's text, None), or (None, why not: ``line:column: ...``, or None if unreadable).
    Only a regular file in the chain's directory, of at most :data:`MAX_ARG_BYTES` (what a job's
    command can carry), read without blocking (a FIFO is refused, never waited on). ``read``: where
    what was read is noted (name -> its digest, None when there was no file to read)."""
    if scripts and name in scripts:
        text = scripts[name]
    else:
        raw, why = script_bytes(chain_dir, name)
        if read is not None:
            read[name] = bytes_digest(raw)
        if raw is None:
            return None, why
        if len(raw) > MAX_ARG_BYTES:
            return None, f" is larger than {MAX_ARG_BYTES // 1024} KiB, more than a job's command can carry"
        decoded, why = decode_utf8(raw)
        if decoded is None:
            return None, why
        text = decoded
    at = text.find("\x00")
    if at >= 0:
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        return None, f"{line}:{column}: contains a NUL byte, which no process can be given (remove it)"
    return text, None


def script_call(command: str) -> Optional[Tuple[str, str, bool]]:
    """(file, runner, required) when ``command`` only runs one script file: ``X.sh`` (required: it
    must be beside the chain), ``./X``, ``bash X``, ``sh X`` (frozen when X is beside the chain).
    ``runner`` is ``bash``/``sh``, or "" for a file that is executed (its ``#!`` line decides)."""
    text = command.strip()
    if _SCRIPT_TOKEN.fullmatch(text):
        return text, "", True
    if len(text) > 2 * 4096 or "\n" in text:  # not one or two words of a path (shlex.split is quadratic)
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if len(words) == 1 and words[0].startswith("./") and len(words[0]) > 2:
        return words[0], "", False
    if len(words) == 2 and words[0] in _RUNNERS and not words[1].startswith(("-", "/")):
        return words[1], words[0], False
    return None


def _resolve_script(c: _Checker, spec: Dict[str, Any], sw: str, chain_dir: str,
                    scripts: Optional[Dict[str, str]]) -> Tuple[Optional[str], str, str, bool]:
    """The step's command text from ``scriptFile`` or ``command``: (text, origin, runner, reported).

    ``reported`` says a problem about the command was recorded here (chain-only: script files),
    so the shared body rules need not repeat it.
    """
    script_file = spec.get("scriptFile")
    command = spec.get("command")
    if script_file is not None:
        if not isinstance(script_file, str) or not script_file.strip():
            c.problem(f"{sw}.scriptFile", "must be a file name")
            return None, "inline", "", True
        script, why = _read_script(chain_dir, script_file, scripts, c.read)
        if script is None:
            c.problem(f"{sw}.scriptFile", f"script file {shown(script_file)}:{why}" if why else
                      f"script file {shown(script_file)} not found or unreadable (looked in {chain_dir})")
        return script, script_file, "", script is None
    if command is None or (isinstance(command, str) and not command.strip()):
        c.problem(f"{sw}.command", "required: a script file name next to the chain file "
                                   "(e.g. \"job1.sh\") or the command itself")
        return None, "inline", "", True
    call = script_call(command) if isinstance(command, str) else None
    if call is not None:
        name, runner, required = call
        there = beside(chain_dir, name)
        if not required and not (there and os.path.isfile(there)) and name not in (scripts or {}):
            c.read.setdefault(name, None)  # not beside the chain now: a file written there later changes the chain
            return command, "inline", "", False  # a file of the image (or a typo the pod will report)
        script, why = _read_script(chain_dir, name, scripts, c.read)
        if script is None:
            c.problem(f"{sw}.command", f"names script file {shown(name)}:{why}" if why else
                      f"names script file {shown(name)}, which is not found or unreadable (looked in {chain_dir})")
        return script, name, runner, script is None
    return (command if isinstance(command, str) else None), "inline", "", False


def _stay_behind(where: str, text: str, origin: str, chain_dir: str, chain_name: str,
                 beside: Dict[str, bool]) -> List[str]:
    """Warnings for relative paths in a command or script that name a file beside the chain: only a
    step's own script travels with its job (a pod's working directory is not the chain's folder)."""
    out: List[str] = []
    seen = set()
    for number, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        for match in _WORD.finditer(code):
            word = match.group(0)
            if (word in seen or word.startswith(("/", "~", "-")) or word in (origin, chain_name)
                    or not ("." in word or "/" in word)):
                continue
            if word not in beside:  # one look per word for the whole chain
                try:
                    beside[word] = os.path.isfile(os.path.join(chain_dir, word))
                except (OSError, ValueError):
                    beside[word] = False
            if not beside[word]:
                continue
            seen.add(word)
            at = f"{where} ({origin} line {number})" if origin != "inline" else where
            bare = word[2:] if word.startswith("./") else word
            out.append(f"{at}: {shown(word)} is a file beside the chain, but only the step's own script travels "
                       f"with its job (the pod does not run in the chain's folder): put {shown(bare)} on storage the "
                       f"pods mount and name it by its absolute path" +
                       (f" (or, if it is all the step runs, \"command\": \"bash {bare}\")"
                        if bare.endswith(".sh") else ""))
    return out


def _check_step(c: _Checker, job: Any, index: int, chain_dir: str, chain_name: str, secret: Optional[str],
                scripts: Optional[Dict[str, str]] = None, engine: str = "aihc",
                graph: Optional[Dict[int, GraphSettings]] = None,
                matrices: Optional[Dict[int, Dict[str, List[str]]]] = None) -> Optional[Step]:
    """One job: the shared create-body rules (:mod:`job_chain.aihc.spec`) plus the chain-only ones."""
    where = f"jobs[{index}]"
    if not isinstance(job, dict):
        c.problem(where, f"must be an object (an AIHC create-job body), found {json_type(job)}")
        return None
    before = len(c.problems)
    body = {k: v for k, v in job.items() if k != SETTINGS_KEY}
    spec = body.get("jobSpec")
    script: Optional[str] = None
    origin, runner, reported = "inline", "", False
    if isinstance(spec, dict):
        sw = f"{where}.jobSpec"
        script, origin, runner, reported = _resolve_script(c, spec, sw, chain_dir, scripts)
        if script is not None and scripts is None:
            c.warnings.extend(_stay_behind(f"{sw}.command", script, origin, chain_dir, chain_name, c.beside))
        spec = {k: v for k, v in spec.items() if k != "scriptFile"}
        if script is not None:
            spec["command"] = script
        body["jobSpec"] = spec
        raw_envs = spec.get("envs")
        envs: List[Any] = raw_envs if isinstance(raw_envs, list) else []
        for k, env in enumerate(envs):
            if secret and isinstance(env, dict) and isinstance(env.get("value"), str) and secret in env["value"]:
                c.problem(f"{sw}.envs[{k}].value", "holds the secret key from api_config; credentials never "
                                                   "belong in job envs (jobs find them via the chain file)")
        if script is not None and secret and secret in script:
            c.problem(f"{sw}.command", "the script contains the secret key from api_config; it would be "
                                       "visible to anyone who can list jobs")
    for path, message in body_problems(body, command_room=TAIL_ROOM, also_known=frozenset({SETTINGS_KEY, "slurm"})):
        if reported and path == "jobSpec.command" or engine == "slurm" and path == "jobSpec.image":
            continue
        c.problem(join_path(where, path), message)
    if "slurm" in job:
        from job_chain.slurm.options import option_problems

        for path, message in option_problems(job["slurm"], f"{where}.slurm"):
            c.problem(path, message)
    if engine == "slurm":
        for path, why in AIHC_ONLY.items():
            head, _, leaf = path.rpartition(".")
            holder = body.get(head) if head else body
            if isinstance(holder, dict) and holder.get(leaf) not in (None, "", [], {}):
                c.warnings.append(f"{where}.{path}: AIHC only, ignored on Slurm: {why}")

    settings = job.get(SETTINGS_KEY, {})
    for path, message in surrogate_problems(settings, f"{where}.{SETTINGS_KEY}"):
        c.problem(path, message)
    parsed = read_step_settings(settings, f"{where}.{SETTINGS_KEY}", c.problems)
    if graph is not None:
        graph[index] = parsed.graph
    if parsed.matrix and matrices is not None:
        matrices[index] = parsed.matrix
        if parsed.graph.run_on:
            c.problem(f"{where}.{SETTINGS_KEY}.matrix", "an exit handler (runOn) runs once after the run: it takes "
                                                       "no matrix")
    if isinstance(settings, dict) and "maxParallel" in settings and "matrix" not in settings:
        c.problem(f"{where}.{SETTINGS_KEY}.maxParallel", "caps the points of a matrix: only with \"matrix\" "
                                                          "(the top-level \"maxRunning\" caps the whole run)")
    if len(c.problems) > before or script is None:
        return None
    return Step(index=index, body=body, script=script, script_origin=origin, script_runner=runner,
                settings_raw=dict(settings), **step_fields(parsed))


def check_chain_data(data: Dict[str, Any], path: str, *, local: bool = False,
                     scripts: Optional[Dict[str, str]] = None) -> Chain:
    """Validate a parsed chain; raise :class:`ChainFileError` listing every problem.

    ``scripts`` (file name -> text) stands in for script files not written yet (aiak-gen).
    """
    c = _Checker(path)
    chain_dir = os.path.dirname(os.path.abspath(path))
    for key in sorted(set(data) - TOP_LEVEL_KEYS):
        near = closest(key, TOP_LEVEL_KEYS)
        if near:  # scripts_path, resourcePoolID: a misspelt key would be silently ignored
            c.problem(key_path("", key), f"unknown key (did you mean \"{near}\"?)")
        else:
            c.warnings.append(f"{key_path('', key)}: unknown top-level key, ignored")
    for where, message in surrogate_problems({k: v for k, v in data.items() if k != "jobs"}):
        c.problem(where, message)
    engine = data.get("engine", "aihc")
    if engine not in ENGINES:
        c.problem("engine", f"must be \"aihc\" (the default: AIHC or the local server) or \"slurm\", "
                            f"found {describe(engine)}")
        engine = "aihc"
    slurm_options: Dict[str, Any] = {}
    if "slurm" in data:
        from job_chain.slurm.options import option_problems

        for where, message in option_problems(data["slurm"], "slurm"):
            c.problem(where, message)
        slurm_options = dict(data["slurm"]) if isinstance(data["slurm"], dict) else {}
    pool = c.string(data, "resourcePoolId", "", required=engine == "aihc")
    if pool and not (pool.isprintable() and len(pool.split()) == 1 and pool.strip() == pool):
        c.problem("resourcePoolId", f"must be a resource pool id such as cce-xxxxxxxx, found {describe(pool)}")
        pool = None
    scrips_path = c.string(data, "scrips_path", "")
    config_path = c.string(data, "config_path", "")
    api_config = data.get("api_config")
    if api_config is None:
        api_config = {}
    elif not isinstance(api_config, dict):
        c.problem("api_config", "must be an object with host, ak, sk")
        api_config = {}
    else:
        for key in ("host", "ak", "sk", "sessionToken"):  # sessionToken: of temporary (STS) keys
            c.string(api_config, key, "api_config")
        if "version" in api_config:
            from job_chain.aihc.v2 import version_problem

            problem = version_problem(api_config["version"])
            if problem:
                c.problem("api_config.version", problem + " (the AIHC OpenAPI version; default v1)")
    secret = api_config.get("sk") if isinstance(api_config.get("sk"), str) and len(api_config["sk"]) >= 8 else None
    from job_chain.spec.matrix import read_max_parallel
    from job_chain.spec.params import read_params

    params = read_params(data.get("params"), c.problems)
    max_running = read_max_parallel(data.get("maxRunning"), "maxRunning", c.problems)
    cache_dir = c.string(data, "cacheDir", "")
    if cache_dir is not None and (not cache_dir.strip() or "\0" in cache_dir or len(cache_dir) > 4096):
        c.problem("cacheDir", "must be a directory path (absolute, or relative to the chain file) where cached "
                              "steps' entries are shared")
        cache_dir = None
    jobs = data.get("jobs")
    steps: List[Step] = []
    stand_ins: List[Step] = []  # jobs with problems, as the graph rules see them: by index and name
    graph: Dict[int, GraphSettings] = {}
    matrices: Dict[int, Dict[str, List[str]]] = {}
    if not isinstance(jobs, list) or not jobs:
        c.problem("jobs", "required: a non-empty list of AIHC create-job bodies")
    elif len(jobs) > MAX_STEPS:  # refused before any job is read: 100,000 took 5 s and 335 MB
        c.problem("jobs", f"at most {MAX_STEPS} jobs in a chain, found {len(jobs)}: split it into several chains")
    else:
        seen: Dict[str, int] = {}
        for index, job in enumerate(jobs):
            step = _check_step(c, job, index, chain_dir, os.path.basename(path), secret, scripts, engine, graph,
                               matrices)
            if step is not None:
                steps.append(step)
                if step.name in seen:
                    c.problem(f"jobs[{index}].name",
                              f"{describe(step.name)} is already the name of jobs[{seen[step.name]}]")
                seen.setdefault(step.name, index)
            else:
                name = job.get("name") if isinstance(job, dict) and isinstance(job.get("name"), str) else ""
                stand_ins.append(Step(index=index, body={"name": name}, script="", script_origin="inline"))
    notify = notify_.check(data.get("notify"), c.problems, c.warnings)
    from job_chain.spec.params import check_top_level_refs

    check_top_level_refs(data, c.problems)
    if steps or stand_ins:  # graph problems in the same pass as the others: every problem at once
        check_graph(sorted(steps + stand_ins, key=lambda s: s.index), graph, c.problems)
    if steps and not c.problems:
        from job_chain.spec.matrix import expand

        _check_references(c, steps, matrices, params)
        steps = expand(steps, matrices, c.problems)
        _check_checkpoints(c, chain_of(steps, params))
    elif isinstance(jobs, list) and c.problems:  # the other reference rules need a sound chain; a
        from job_chain.spec.params import param_typos  # misspelt parameter is listed with the rest now

        raw = data.get("params")
        known = set(params) | (set(str(k) for k in raw) if isinstance(raw, dict) else set())
        for index, job in enumerate(jobs):
            if isinstance(job, dict):
                param_typos(job, f"jobs[{index}]", known, c.problems)
    if c.problems:
        raise ChainFileError(path, c.problems)
    chain = Chain(path=path, pool=pool or ("slurm" if engine == "slurm" else ""), steps=steps, api_config=api_config,
                  scrips_path=scrips_path or None, config_path=config_path or None, warnings=c.warnings,
                  notify=notify, graph=any(g.depends_on for g in graph.values()) or bool(matrices),
                  params=params, max_running=max_running, cache_dir=cache_dir, engine=engine,
                  slurm=slurm_options, inputs=dict(c.read))
    refuse, say = reachability(chain, "job", local)
    chain.warnings.extend([f"{line} (a job-mode run on a cluster is refused)" for line in refuse] + say)
    return chain


def _check_references(c: _Checker, steps: List[Step], matrices: Dict[int, Dict[str, List[str]]],
                      params: Dict[str, str]) -> None:
    """Every ``${…}`` of every job: known parameters and matrix names, outputs only of jobs it waits for."""
    from job_chain.spec.matrix import points_of
    from job_chain.spec.params import check_settings_refs, check_step_refs

    by_index = {s.index: s for s in steps}
    kinds = {s.name: ("matrix", len(points_of(matrices[s.index]))) if s.index in matrices else
             ("handler" if s.is_handler else "step", 1) for s in steps}
    for step in steps:
        check_step_refs(step.body, f"jobs[{step.index}]", script_file=step.script_origin != "inline",
                        script=step.script, name=step.name, params=params, matrix=matrices.get(step.index),
                        ancestors=_Ancestors(step, by_index), steps=kinds, problems=c.problems, warnings=c.warnings)
        check_settings_refs(step.settings_raw, f"jobs[{step.index}].{SETTINGS_KEY}", params=params,
                            matrix=matrices.get(step.index), problems=c.problems)


def chain_of(steps: List[Step], params: Dict[str, str]) -> Chain:
    return Chain(path="", pool="", steps=steps, params=params)


def _check_checkpoints(c: _Checker, chain: Chain) -> None:
    """Each checkpoint as the step's run will read it (the parameters' defaults, each matrix point's
    values, a run id) is still an absolute directory and a tracker file name."""
    from job_chain.spec.params import checkpoint_of, checkpoint_problem

    for step in chain.steps:
        spec = None if c.problems else checkpoint_of(chain, step, "RUN")
        problem = spec and checkpoint_problem(spec)
        if problem:
            c.problem(f"jobs[{step.index}].{SETTINGS_KEY}.checkpoint", f"{step.display}: {problem}")


class _Ancestors:
    """The names of the jobs ``step`` waits for, directly or not, walked on first use: only a step
    that names another's outputs asks, so a long linear chain is not checked in quadratic time."""

    def __init__(self, step: Step, by_index: Dict[int, Step]) -> None:
        self._step, self._by_index = step, by_index
        self._names: Optional[set] = None

    def __contains__(self, name: object) -> bool:
        if self._names is None:
            self._names, todo = set(), list(self._step.depends_on)
            while todo:
                parent = self._by_index[todo.pop()]
                if parent.name not in self._names:
                    self._names.add(parent.name)
                    todo.extend(parent.depends_on)
        return name in self._names


def path_under(path: str, mount: str) -> bool:
    """True when ``path`` is ``mount`` or lies below it (what a job with that mount can read)."""
    base = mount.rstrip("/")
    return path in (mount, base) or path.startswith(base + "/")


def reachability(chain: Chain, mode: str = "job", local: bool = False) -> Tuple[List[str], List[str]]:
    """Where a step's pods read job-chain's files in the cluster, said when it matters (issue 29
    item 14, issue 30 item 1): (what refuses a run in ``mode``, what is only said).

    A job-mode run's jobs read and write the run record beside ``config_path`` (``FILE.runs/``:
    the chain they advance, the API's host and keys): a step none of whose datasource mounts holds
    it could not advance the run, so ``run`` refuses it with the fix. ``scrips_path`` (the runtime)
    may be in the image: said, never refused. An ``--inline`` run reads no record and a
    ``--advance watch`` run's jobs run no tail; a ``--local`` run's pods run on this machine and read
    its files, and a Slurm chain's nodes share a filesystem: for them nothing matters here.
    """
    if local or chain.engine != "aihc" or mode == "watch":
        return [], []
    refuse: List[str] = []
    say: List[str] = []
    for label, value in (("config_path", chain.cluster_config_path), ("scrips_path", chain.scrips_path)):
        if not value or (label == "config_path" and mode != "job"):
            continue
        for step in chain.steps:
            mounts = step.mount_paths()
            if any(path_under(value, m) for m in mounts):
                continue
            listed = ", ".join(shown(m) for m in mounts) or "none"
            where = f"{label} {shown(value)} is under none of jobs[{step.index}]'s datasource mountPaths ({listed})"
            if label == "config_path":
                refuse.append(
                    f"{where}: that step's pods could not read the run record beside the chain file in the "
                    "cluster, nor advance the run. Mount the storage that holds the chain file in every step "
                    "(a datasource whose mountPath contains it), or set \"config_path\" to the file's path as the "
                    "pods see it; without shared storage, run with --inline or --advance watch")
            else:
                say.append(f"{where}: that step could not read it in the cluster unless its image has it")
            break
    return refuse, say


def load_chain(path: str, *, local: bool = False) -> Chain:
    """Read and validate a chain file. ``local`` skips cluster-only reachability warnings. The
    chain's :attr:`~job_chain.spec.model.Chain.inputs` name what was read (the file's digest under
    ``""``, each script file's under its name): :func:`job_chain.spec.scripts.same_inputs` says whether a load now would
    read the same (:mod:`job_chain.spec.scripts`)."""
    try:
        data, text = load_json_with_text(path, "chain file")
    except ChainFileInvalid:
        raise
    except UsageError as exc:  # unreadable, not UTF-8, bad JSON: still "this chain file is invalid"
        raise ChainFileInvalid(str(exc)) from None
    chain = check_chain_data(data, path, local=local)
    chain.inputs[""] = text_digest(text)
    return chain
