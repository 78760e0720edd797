"""``python3 -m job_chain.hop``: what a step's tail runs when its script ends, and nothing more.

Every hop of every run starts a fresh Python inside the finishing job, so what it imports is
paid on every hop: no click, no rich, no CLI package. The API client is built on first use, so
a branch whose join is not ready yet (decided from the run record) never loads the HTTP stack;
when a request is made, it is signed and sent by the BCE SDK's own signer and HTTP client.
``job-chain advance`` (the same thing with the CLI's options) stays for people who call it by hand.

Usage (what :func:`job_chain.submit.command.step_command` writes)::

    python3 -m job_chain.hop --run RUN --step NAME --attempt N --exit-code RC [--outputs FILE] CONFIG_PATH
    python3 -m job_chain.hop --run RUN --step NAME --attempt N --exit-code RC [--outputs FILE] --snapshot - <<'...'

``--outputs``: the step's ``$JOB_CHAIN_OUTPUTS`` file, read when the script succeeded.
``--ended`` (instead of ``--exit-code``): a Slurm job ended without its tail; its watcher job runs
the advance for it (:func:`run_ended`, ``docs/slurm.md``).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from job_chain.errors import JobChainError, UsageError

USAGE = ("usage: python3 -m job_chain.hop --run RUN --step NAME [--attempt N] (--exit-code RC | --ended) "
         "[--outputs FILE] (CONFIG_PATH | --snapshot -)")
_OPTIONS = ("--run", "--step", "--attempt", "--exit-code", "--snapshot", "--outputs")


def parse(argv: List[str]) -> Dict[str, Any]:
    """The tail's arguments (``--flag value`` or ``--flag=value``, one positional path)."""
    found: Dict[str, Any] = {}
    words = list(argv)
    while words:
        word = words.pop(0)
        if word in ("-h", "--help"):
            raise UsageError(USAGE)
        flag, eq, value = word.partition("=")
        if word == "--ended":
            found["ended"] = True
            found.setdefault("exit_code", "0")  # the watcher's advance finds the real one
        elif flag in _OPTIONS:
            if not eq:
                if not words:
                    raise UsageError(f"{flag} needs a value; {USAGE}")
                value = words.pop(0)
            found[flag[2:].replace("-", "_")] = value
        elif word.startswith("--"):
            raise UsageError(f"unknown option {word}; {USAGE}")
        elif "config_path" in found:
            raise UsageError(f"unexpected argument {word!r}; {USAGE}")
        else:
            found["config_path"] = word
    for name in ("run", "step", "exit_code"):
        if name not in found:
            raise UsageError(f"--{name.replace('_', '-')} is required; {USAGE}")
    for name in ("attempt", "exit_code"):
        try:
            found[name] = int(found.get(name, "1"))
        except ValueError:
            raise UsageError(f"--{name.replace('_', '-')} must be a whole number, not {found[name]!r}") from None
    return found


def load_run(config_path: Optional[str], run_id: str, snapshot: Optional[Any]) -> Tuple[Any, Any, Dict[str, Any]]:
    """(the run's chain, its records or None, api_config) from the run record or the inline snapshot.

    The chain and the API config are decided as the session decides them (rules 7 and 8:
    :meth:`~job_chain.record.records.RunRecords.run_chain`, :meth:`~job_chain.record.records.RunRecords.api_config`):
    the run's frozen copy, and the record's copy of the file's ``api_config``; the chain file is read
    only for a run recorded before runs were frozen, and for keys only when the record holds none.
    """
    if snapshot is not None:
        from job_chain.submit.snapshot import decode_snapshot

        try:
            text = snapshot.read().decode("ascii")
        except UnicodeDecodeError:
            raise UsageError("the inline chain snapshot is damaged: it is not base64 text") from None
        chain = decode_snapshot(text)
        return chain, None, dict(chain.api_config)
    if not config_path:
        raise UsageError("advance needs the chain file path or --snapshot")
    from job_chain.record.records import RunRecords

    path: str = config_path

    def load_file() -> Any:  # a run recorded before runs were frozen runs the file as it is now
        from job_chain.spec.loader import load_chain

        return load_chain(path, local=True)

    records = RunRecords(path)
    chain = records.run_chain(run_id, load_file)
    return chain, records, records.api_config(run_id, chain.api_config.get("version"))


def run_ended(config_path: Optional[str], run_id: str, step: str, attempt: int) -> int:
    """In a Slurm step's watcher (the job ended in a failed state before its tail finished: Slurm
    ended it, or its tail died): advance for it, exactly as its tail would have.

    Nothing when the run was stopped or the tail finished its advance. Otherwise the exit code is
    the script's from the record (its tail recorded it, then was killed), else Slurm's (asked through
    slurmctld's hiccups like every call of an advance, ``engine/deadline.submit_with_deadline``; of a job
    Slurm forgot, what it left: ``SlurmEngine.verdict``); the cause is
    found as for any failure (``status/causes.classify_job``: the log's slurmstepd line, else Slurm's
    verdict on the job). Every step of the advance is idempotent, its creates exactly once (the
    record, the job's key).
    """
    from job_chain.hop.advance import advance
    from job_chain.record.records import RunRecords
    from job_chain.slurm.engine import WATCHED_ENV, engine_from_env
    from job_chain.util.log import log

    engine = engine_from_env()
    if not config_path or engine is None:
        raise UsageError("--ended is for a Slurm step's watcher job (its chain file path and its Slurm environment)")
    records = RunRecords(config_path)
    records.require_run(run_id)
    if records.is_stopped(run_id):
        log(f"run {run_id} was stopped; nothing to do")
        return 0
    entry = records.exit_entry(run_id, step, attempt) or {}
    if "ended" in entry:
        log(f"step {step} attempt {attempt}: its tail finished its advance; nothing to do")
        return 0
    job_id = os.environ.get(WATCHED_ENV) or str((records.submission(run_id, step, attempt) or {}).get("jobId") or "")
    if not job_id:
        raise UsageError(f"step {step} attempt {attempt}: which job to look after is not known")
    from job_chain.engine.deadline import submit_with_deadline
    from job_chain.engine.errors import EngineError

    try:  # through slurmctld's hiccups, as every call of an advance
        state, code = submit_with_deadline(lambda: engine.verdict(job_id), env_deadline())
    except EngineError as exc:
        if exc.status != 404:
            raise
        log(f"job {job_id}: {exc.message}; it ended in a failed state (Slurm started this watcher after it)")
        state, code = "FAILED", 1
    exit_code = entry.get("exitCode")
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        exit_code = code
    log(f"step {step} attempt {attempt} (job {job_id}) ended {state} without its tail finishing: advancing for it")
    chain, _, _ = load_run(config_path, run_id, None)
    client: Any = engine  # the engine seam: what advance calls
    code = advance(chain, client, run_id=run_id, step=step, attempt=attempt, exit_code=exit_code, records=records,
                   resume_hint=resume_hint(config_path, run_id), deadline=env_deadline(),
                   in_job=False)
    return 0 if code == exit_code else code  # the step's failure is its job's; the watcher did what it had to


def resume_hint(path: str, run_id: str) -> Callable[[], str]:
    """How to make the command that continues the run, for a message that needs it: a hop that goes
    well never does, and never imports ``shlex`` (its module and pattern cost every hop ~0.3 ms)."""
    def hint() -> str:
        import shlex

        return f"job-chain resume {shlex.quote(path)} --run {run_id}"

    return hint


def run_advance(*, config_path: Optional[str], run_id: str, step: str, attempt: int, exit_code: int,
                snapshot: Optional[Any] = None, connect: Optional[Callable[..., Any]] = None,
                outputs_file: Optional[str] = None) -> int:
    """Act on the step's exit (see :func:`job_chain.hop.advance.advance`); the job's exit code.

    ``connect``: how the CLI's ``advance`` builds a client from its ``--host/--ak/--sk/--credentials/
    --local/--api-version`` (called with ``api_config`` and ``api_config_origin``); none in a job.
    ``outputs_file``: the step's ``$JOB_CHAIN_OUTPUTS`` (read only when the script succeeded).
    In job mode the chain is thawed only if the advance needs it: a step whose plan holds never does.
    """
    from job_chain.aihc.api import LazyClient
    from job_chain.hop.advance import advance

    outputs: Tuple[Dict[str, str], Optional[str]] = ({}, None)
    if outputs_file and exit_code == 0 and _has_content(outputs_file):
        from job_chain.record.outputs import read_file

        outputs = read_file(outputs_file)
    plan_reader: Optional[Callable[[], Optional[Dict[str, Any]]]] = None
    if snapshot is not None or not config_path:
        chain, records, api_config = load_run(config_path, run_id, snapshot)
        source: Any = chain
        path = chain.path
        config: Callable[[], Dict[str, Any]] = lambda: api_config  # noqa: E731
    else:
        from job_chain.record.records import RunRecords

        records = RunRecords(config_path)
        records.require_run(run_id)
        path = config_path
        loaded: List[Any] = []
        plans: List[Optional[Dict[str, Any]]] = []

        def own_plan() -> Optional[Dict[str, Any]]:  # read once: for the advance, and for the API version
            if not plans:
                from job_chain.record.plans import read_plan

                plans.append(read_plan(records, run_id, step, attempt))
            return plans[0]

        plan_reader = own_plan

        def source() -> Any:  # the run's chain, thawed once, when the advance first needs it
            if not loaded:
                loaded.extend(load_run(config_path, run_id, None))
            return loaded[0]

        def config() -> Dict[str, Any]:
            if loaded:
                return loaded[2]
            plan = own_plan()  # a planned hop: the version it was planned for
            if plan is not None:
                return records.api_config(run_id, plan.get("version"))
            source()
            return loaded[2]

    def build() -> Any:
        if connect is not None:
            return connect(api_config=config(), api_config_origin=f"{path} api_config")
        from job_chain.aihc.connect import connect as from_credentials

        # the record's credentials first: an AIHC pod's environment holds no host and no keys
        return from_credentials(api_config=config(), api_config_origin=f"{path} api_config",
                                carried=records.credentials(run_id) if records is not None else None,
                                carried_origin=f"the record of run {run_id}")

    def reconnect() -> Optional[Any]:
        carried = records.credentials(run_id) if records is not None else {}
        return reconnect_from_credentials_file(carried.get("credentialsFile"))

    client: Any = None
    if os.environ.get("JOB_CHAIN_ENGINE") == "slurm":  # a Slurm job: sbatch from here (slurm/engine.py)
        from job_chain.slurm.engine import engine_from_env

        client = engine_from_env()
    code = advance(source, client or LazyClient(build), run_id=run_id, step=step, attempt=attempt, exit_code=exit_code,
                   records=records, resume_hint=resume_hint(path, run_id), deadline=env_deadline(),
                   reconnect=reconnect, outputs=outputs, own_plan=plan_reader)
    if client is not None and os.environ.get("SLURM_JOB_ID"):  # done: this job's watcher has nothing to do
        client.release(os.environ["SLURM_JOB_ID"])
    return code


def _has_content(path: str) -> bool:
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def env_deadline() -> float:
    from job_chain.hop.advance import DEFAULT_DEADLINE

    try:
        return float(os.environ.get("JOB_CHAIN_ADVANCE_DEADLINE", DEFAULT_DEADLINE))
    except ValueError:
        return DEFAULT_DEADLINE


def reconnect_from_credentials_file(path: Optional[str] = None) -> Optional[Any]:
    """A client for the host a credentials file names now: ``path`` (a local run's record names the
    local server's), else ``JOB_CHAIN_CREDENTIALS``; None without one.

    A client keeps the host it was made with; when that stops answering (the local server
    restarted elsewhere), the file the server rewrites on start says where it is now.
    """
    from job_chain.aihc.client import AIHCClient
    from job_chain.aihc.credentials import CREDENTIALS_ENV, resolve_credentials
    from job_chain.util.log import log

    path = path or os.environ.get(CREDENTIALS_ENV)
    if not path:
        return None
    try:
        return AIHCClient(resolve_credentials(credentials_file=path, env={}))
    except JobChainError as exc:
        log(f"cannot re-read {path}: {exc}")
        return None


def main(argv: Optional[List[str]] = None) -> int:
    """Errors are one line on stderr (the job's log) and a non-zero exit, never a traceback."""
    try:
        args = parse(sys.argv[1:] if argv is None else argv)
        snapshot = args.pop("snapshot", None)
        if args.get("ended"):
            return run_ended(args.get("config_path"), args["run"], args["step"], args["attempt"])
        if snapshot not in (None, "-"):
            raise UsageError(f"--snapshot takes '-' (the snapshot on stdin), not {snapshot!r}")
        return run_advance(config_path=args.get("config_path"), run_id=args["run"], step=args["step"],
                           attempt=args["attempt"], exit_code=args["exit_code"],
                           snapshot=sys.stdin.buffer if snapshot == "-" else None, outputs_file=args.get("outputs"))
    except JobChainError as exc:
        print(f"job-chain: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        print("job-chain: interrupted", file=sys.stderr, flush=True)
        return 130
    except OSError as exc:  # the machine said no (disk full, permission): not a bug in job-chain
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"job-chain: error: {where}{exc.strerror or exc}", file=sys.stderr, flush=True)
        return 1
    except Exception as exc:  # a bug: one line in the job's log unless asked for more
        if os.environ.get("JOB_CHAIN_DEBUG"):
            raise
        print(f"job-chain: internal error: {type(exc).__name__}: {exc} "
              "(set JOB_CHAIN_DEBUG=1 for the traceback and please report it)", file=sys.stderr, flush=True)
        return 70


def exit_now(code: int) -> None:
    """End once everything is written, without the interpreter's teardown: with the SDK loaded
    that is ~9 ms of CPU on every hop, spent while the next step's pod starts. Not under a
    profiler or a tracer (coverage), which write their data at exit."""
    sys.stdout.flush()
    sys.stderr.flush()
    if sys.getprofile() is None and sys.gettrace() is None:
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    exit_now(main())
