"""Chain commands: run, validate, status, logs, stop, resume, advance, bundle."""

from __future__ import annotations

import sys
import time
from typing import Any, Dict, List, Optional

import click

from job_chain.cli.options import api_options, echo_json, make_client
from job_chain.errors import JobChainError, UsageError

SUBMIT_DEADLINE = 60.0  # seconds run and resume keep retrying a step's create through transient errors
CHAIN_FILE = click.argument("chain_file", metavar="CHAIN_FILE", type=click.Path(dir_okay=False))


def _warn(message: str) -> None:
    click.secho(f"warning: {message}", fg="yellow", err=True)


def _load(path: str, local: bool = False, quiet: bool = False) -> Any:
    """Load a chain; with ``local`` its jobs run on this machine, so cluster paths do not apply."""
    from job_chain.chain.loader import load_chain

    chain = load_chain(path, local=local or quiet)
    if local:
        chain.config_path = chain.scrips_path = None  # local pods read this file and this installation
    for warning in chain.warnings:
        _warn(warning)
    return chain


def _client(chain: Any, opts: Dict[str, Any], **kwargs: Any) -> Any:
    return make_client(api_config=chain.api_config, api_config_origin=f"{chain.path} api_config",
                       **opts, **kwargs)


def _api_opts(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    return {k: kwargs.pop(k) for k in ("host", "ak", "sk", "credentials_file", "use_local")}


def _pick_run(records: Any, chain_path: str, run_id: Optional[str]) -> Dict[str, Any]:
    if run_id:
        run = records.get_run(run_id)
        return run or {"id": run_id}
    run = records.latest_run()
    if run is None:
        raise UsageError(f"no run of {chain_path} is recorded here: start one with "
                         f"'job-chain run {chain_path}', or pass --run ID")
    return run


def _redact(text: str, secret: Optional[str]) -> str:
    return text.replace(secret, "****") if secret else text


# -- validate -------------------------------------------------------------------------------
@click.command()
@CHAIN_FILE
@click.option("--local", "use_local", is_flag=True, help="Skip checks that matter only in a cluster.")
def validate(chain_file: str, use_local: bool) -> None:
    """Check CHAIN_FILE: JSON syntax (line:column) and every schema problem (JSON path)."""
    chain = _load(chain_file, local=use_local)
    click.echo(f"{chain_file}: OK, {len(chain.steps)} steps, resource pool {chain.pool}")


# -- run ------------------------------------------------------------------------------------
@click.command()
@CHAIN_FILE
@click.argument("start_index", metavar="[N]", required=False, type=int)
@click.option("--start", "start", type=int, default=None, help="Index of the first step to submit (from 0).")
@click.option("--dry-run", is_flag=True, help="Print the exact request, secrets redacted; submit nothing.")
@click.option("--follow", "-f", is_flag=True, help="Stay and show live status until the chain ends.")
@click.option("--advance", "advance_mode", type=click.Choice(["job", "watch"]), default="job",
              help="job: each job submits the next (default). watch: this process does it (implies --follow).")
@click.option("--inline", is_flag=True,
              help="Embed a compressed snapshot of the remaining steps in each command (no shared storage).")
@api_options
def run(chain_file: str, start_index: Optional[int], start: Optional[int], dry_run: bool, follow: bool,
        advance_mode: str, inline: bool, **kwargs: Any) -> None:
    """Submit step N of CHAIN_FILE (default 0); each later step starts when the previous one succeeds."""
    from job_chain.chain.record import RunRecords, new_run_id

    opts = _api_opts(kwargs)
    if start is not None and start_index is not None and start != start_index:
        raise UsageError(f"two different start steps given: {start_index} and --start {start}")
    if inline and advance_mode == "watch":
        raise UsageError("--inline and --advance watch exclude each other: watch mode needs no snapshot")
    first = start if start is not None else (start_index or 0)
    chain = _load(chain_file, local=opts["use_local"])
    if not 0 <= first < len(chain.steps):
        raise UsageError(f"--start {first}: {chain_file} has {len(chain.steps)} steps, numbered 0 to "
                         f"{len(chain.steps) - 1}")
    mode = "watch" if advance_mode == "watch" else ("inline" if inline else "job")
    if dry_run:
        _dry_run(chain, first, mode, opts)
        return
    client = _client(chain, opts)
    records = RunRecords(chain_file)
    run_id = new_run_id()
    run_meta = records.create_run(run_id, chain=chain_file, startStep=first, mode=mode, endpoint=client.endpoint,
                                  pool=chain.pool, local=bool(opts["use_local"]))
    result = _submit(client, chain, chain_file, first, run_id, 1, records, mode)
    click.echo(f"run {run_id}: step {first} ({result['jobName']}) submitted as job {result['jobId']}")
    if mode == "watch":
        click.echo("this process submits each next step (--advance watch): keep it running")
    else:
        click.echo(f"later steps start by themselves; watch with: job-chain status {chain_file}")
    if follow or mode == "watch":
        sys.exit(_follow(client, chain, run_meta, records, mode))


def _submit(client: Any, chain: Any, chain_file: str, index: int, run_id: str, attempt: int, records: Any,
            mode: str) -> Dict[str, str]:
    """Submit one step, retrying transient API errors for up to SUBMIT_DEADLINE seconds.

    The client token makes every retry safe, and giving up early is not: a create can fail after
    the job was committed, and that job would then advance a run the user believes failed.
    """
    from job_chain.aihc.errors import AIHCError
    from job_chain.chain.advance import submit_with_deadline
    from job_chain.chain.submit import submit_step

    try:
        return submit_with_deadline(
            lambda: submit_step(client, chain, index, run_id, attempt, records=records, mode=mode),
            SUBMIT_DEADLINE)
    except AIHCError as exc:
        if not exc.retryable:
            raise
        raise JobChainError(f"{exc}. Step {index} may have been created all the same: 'job-chain status "
                            f"{chain_file}' shows it, and 'job-chain resume {chain_file}' continues run {run_id} "
                            "without ever creating it twice") from None


def _dry_run(chain: Any, first: int, mode: str, opts: Dict[str, Any]) -> None:
    import json

    from job_chain.aihc.endpoint import normalize_endpoint
    from job_chain.chain.command import tail_size
    from job_chain.chain.submit import build_request, client_token

    host = chain.api_config.get("host") if not opts.get("use_local") else "<local server>"
    host = opts.get("host") or host or "<AIHC host>"
    try:
        endpoint = normalize_endpoint(host) if not host.startswith("<") else host
    except JobChainError:
        endpoint = host
    body = build_request(chain, first, "DRY-RUN", 1, mode=mode, host=chain.api_config.get("host"))
    secrets = [s for s in (chain.secret, opts.get("sk")) if s]
    text = (f"POST {endpoint}/api/v1/aijobs?resourcePoolId={chain.pool}&clientToken="
            f"{client_token('DRY-RUN', first, 1)}\n" + json.dumps(body, indent=2, ensure_ascii=False))
    for secret in secrets:
        text = _redact(text, secret)
    click.echo(text)
    step = chain.step(first)
    added = tail_size(body["jobSpec"]["command"], step.script)
    click.echo(f"# the run id is chosen at submission; job-chain adds {added} bytes around your script",
               err=True)


# -- follow / status ------------------------------------------------------------------------
def _states(client: Any, chain: Any, run: Dict[str, Any]) -> List[Any]:
    from job_chain.chain.progress import run_jobs, step_states

    jobs = run_jobs(client, chain.pool, run["id"], since=run.get("started"))
    return step_states(chain, jobs, start=int(run.get("startStep", 0)))


def _status_table(chain: Any, run: Dict[str, Any], states: List[Any]) -> Any:
    from job_chain.cli.render import human_duration, make_table, styled_status

    rows = [[str(s.index), s.name, styled_status(s.status), str(s.attempt or "-"), s.job_id or "-",
             time.strftime("%H:%M:%S", time.localtime(s.created)) if s.created else "-", human_duration(s.duration)]
            for s in states]
    return make_table(["STEP", "NAME", "STATUS", "ATTEMPT", "JOB ID", "STARTED", "DURATION"], rows,
                      title=f"{chain.path} · run {run['id']}")


def _watch_advance(client: Any, chain: Any, run: Dict[str, Any], records: Any, states: List[Any],
                   handled: set) -> None:
    """--advance watch: do from here what each job's tail would have done."""
    from job_chain.aihc.status import FAILED, SUCCEEDED
    from job_chain.chain.advance import advance

    for state in states:
        key = (state.index, state.attempt, state.status)
        if key in handled or state.status not in SUCCEEDED | FAILED:
            continue
        handled.add(key)
        exit_code = 0 if state.status in SUCCEEDED else 1
        advance(chain, client, run_id=run["id"], step=state.index, attempt=state.attempt, exit_code=exit_code,
                records=records, resume_hint=f"job-chain resume {chain.path} --advance watch", mode="watch")


def _follow(client: Any, chain: Any, run: Dict[str, Any], records: Any, mode: str, interval: float = 0.5) -> int:
    from rich.live import Live

    from job_chain.aihc.errors import AIHCError
    from job_chain.chain.progress import outcome
    from job_chain.cli.render import console as render_console

    console = render_console()
    handled: set = set()
    last_seen: Dict[int, str] = {}
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            while True:
                try:
                    states = _states(client, chain, run)
                except AIHCError as exc:  # the chain runs on without us: keep watching
                    if not exc.retryable:
                        raise
                    _warn(f"{exc}; still watching")
                    time.sleep(max(interval, 2.0))
                    continue
                if mode == "watch":
                    _watch_advance(client, chain, run, records, states, handled)
                if console.is_terminal:
                    live.update(_status_table(chain, run, states), refresh=True)
                else:
                    for s in states:
                        if last_seen.get(s.index) != s.status and s.job_id:
                            click.echo(f"step {s.index} {s.name}: {s.status} (job {s.job_id}, attempt {s.attempt})")
                            last_seen[s.index] = s.status
                result = outcome(states, chain)
                if result != "running" and not (mode == "watch" and _watch_pending(states, handled)):
                    break
                time.sleep(interval)
    except KeyboardInterrupt:
        if mode == "watch":
            click.echo(f"\nstopped watching: in --advance watch mode no later step starts until you run "
                       f"'job-chain resume {chain.path} --advance watch'", err=True)
        else:
            click.echo(f"\ndetached: the chain keeps running by itself; see 'job-chain status {chain.path}'",
                       err=True)
        return 130
    click.echo(f"run {run['id']}: {result}")
    return 0 if result == "succeeded" else 1


def _watch_pending(states: List[Any], handled: set) -> bool:
    return any((s.index, s.attempt, s.status) not in handled for s in states if s.job_id)


@click.command()
@CHAIN_FILE
@click.option("--run", "run_id", default=None, help="Run id (default: the latest run recorded here).")
@click.option("--json", "as_json", is_flag=True, help="Print the steps as JSON.")
@api_options
def status(chain_file: str, run_id: Optional[str], as_json: bool, **kwargs: Any) -> None:
    """Show every step of a run: not submitted, Pending, Running, Succeeded, Failed, Stopped."""
    from job_chain.chain.progress import outcome
    from job_chain.chain.record import RunRecords

    opts = _api_opts(kwargs)
    chain = _load(chain_file, quiet=True)
    run = _pick_run(RunRecords(chain_file), chain_file, run_id)
    client = _client(chain, opts)
    states = _states(client, chain, run)
    result = outcome(states, chain)
    if as_json:
        echo_json({"run": run["id"], "outcome": result, "steps": [s.as_json() for s in states]})
        return
    from job_chain.cli.render import console

    console().print(_status_table(chain, run, states))
    click.echo(f"run {run['id']}: {result}")


# -- logs / stop / resume -------------------------------------------------------------------
@click.command()
@CHAIN_FILE
@click.option("--step", type=int, default=None, help="Step index (default: the latest submitted step).")
@click.option("--run", "run_id", default=None, help="Run id (default: the latest run recorded here).")
@click.option("--pod", default=None, help="Pod name (default: the step's master pod).")
@click.option("-f", "--follow", is_flag=True,
              help="Keep printing new lines: until the step ends with --step, else through every later step "
                   "until the run ends.")
@click.option("--tail", type=click.IntRange(min=0), default=None, help="Only the last N lines.")
@api_options
def logs(chain_file: str, step: Optional[int], run_id: Optional[str], pod: Optional[str], follow: bool,
         tail: Optional[int], **kwargs: Any) -> None:
    """Print the log of a chain step (with --follow and no --step: of the whole run, step after step)."""
    from job_chain.chain.progress import attempts, outcome, run_jobs, step_states
    from job_chain.chain.record import RunRecords

    opts = _api_opts(kwargs)
    chain = _load(chain_file, quiet=True)
    run = _pick_run(RunRecords(chain_file), chain_file, run_id)
    client = _client(chain, opts)
    submitted = [s for s in _states(client, chain, run) if s.job_id]
    if step is not None:
        submitted = [s for s in submitted if s.index == step]
        if not submitted:
            raise UsageError(f"step {step} of run {run['id']} has not been submitted")
    if not submitted:
        raise UsageError(f"run {run['id']} has no submitted step yet")
    state = submitted[-1]
    _print_step_log(client, chain, state, pod, tail, follow)
    if not follow or step is not None:
        return
    shown = {state.job_id}
    while True:  # the run goes on: follow each next job (a later step, or a retry) as it appears
        jobs = run_jobs(client, chain.pool, run["id"], since=run.get("started"))
        later = [a for a in attempts(chain, jobs) if a.job_id not in shown and a.index >= state.index]
        if later:
            state = later[0]
            shown.add(state.job_id)
            _print_step_log(client, chain, state, None, None, True)
            continue
        result = outcome(step_states(chain, jobs, start=int(run.get("startStep", 0))), chain)
        if result != "running":
            click.echo(f"# run {run['id']}: {result}", err=True)
            sys.exit(0 if result == "succeeded" else 1)
        time.sleep(1.0)


def _print_step_log(client: Any, chain: Any, state: Any, pod: Optional[str], tail: Optional[int],
                    follow: bool) -> None:
    """One step's log; with ``follow``, a step still queued (no pod yet) is waited for."""
    from job_chain.aihc.client import pod_names
    from job_chain.aihc.status import is_terminal
    from job_chain.cli.jobs import _first_pod, follow_logs

    where = f"# step {state.index} {state.name} · job {state.job_id}"
    if pod is None and follow:
        job = client.get_job(chain.pool, state.job_id)
        if not pod_names(job) and not is_terminal(job.get("status")):
            click.echo(f"{where} · {job.get('status')}: waiting for its pod", err=True)
        while not pod_names(job) and not is_terminal(job.get("status")):
            time.sleep(2.0)
            job = client.get_job(chain.pool, state.job_id)
    pod_name = _first_pod(client, chain.pool, state.job_id, pod)
    click.echo(f"{where} · pod {pod_name}", err=True)
    follow_logs(client, chain.pool, state.job_id, pod_name, tail, follow)


@click.command()
@CHAIN_FILE
@click.option("--run", "run_id", default=None, help="Run id (default: the latest run recorded here).")
@api_options
def stop(chain_file: str, run_id: Optional[str], **kwargs: Any) -> None:
    """Stop a run: its running step is stopped and no later step starts."""
    from job_chain.aihc.status import is_terminal
    from job_chain.chain.record import RunRecords

    opts = _api_opts(kwargs)
    chain = _load(chain_file, quiet=True)
    records = RunRecords(chain_file)
    run = _pick_run(records, chain_file, run_id)
    records.mark_stopped(run["id"])
    client = _client(chain, opts)
    stopped = [s for s in _states(client, chain, run) if s.job_id and not is_terminal(s.status)]
    for state in stopped:
        client.stop_job(chain.pool, state.job_id)
        click.echo(f"stopping step {state.index} ({state.name}) job {state.job_id}")
    click.echo(f"run {run['id']} stopped: no later step will start (continue with 'job-chain resume {chain_file}')")


@click.command()
@CHAIN_FILE
@click.option("--run", "run_id", default=None, help="Run id (default: the latest run recorded here).")
@click.option("--follow", "-f", is_flag=True, help="Stay and show live status until the chain ends.")
@click.option("--advance", "advance_mode", type=click.Choice(["job", "watch"]), default=None,
              help="Advance mode for the rest of the run (default: as the run started).")
@api_options
def resume(chain_file: str, run_id: Optional[str], follow: bool, advance_mode: Optional[str], **kwargs: Any) -> None:
    """Start a run again at its first step that did not succeed."""
    from job_chain.aihc.status import SUCCEEDED, is_terminal
    from job_chain.chain.progress import NOT_SUBMITTED, SKIPPED
    from job_chain.chain.record import RunRecords

    opts = _api_opts(kwargs)
    records = RunRecords(chain_file)
    run = _pick_run(records, chain_file, run_id)
    chain = _load(chain_file, local=opts["use_local"] or bool(run.get("local")))
    client = _client(chain, opts)
    states = _states(client, chain, run)
    active = [s for s in states if s.job_id and not is_terminal(s.status)]
    if active:
        raise UsageError(f"run {run['id']} is still going (step {active[0].index} is {active[0].status}); "
                         f"stop it first with 'job-chain stop {chain_file}'")
    todo = next((s for s in states if s.status != SKIPPED and s.status not in SUCCEEDED), None)
    if todo is None:
        click.echo(f"run {run['id']}: every step succeeded; nothing to resume")
        return
    mode = "watch" if advance_mode == "watch" else (run.get("mode") or "job")
    if advance_mode == "job" and mode == "watch":
        mode = "job"
    records.clear_stopped(run["id"])
    attempt = (todo.attempt + 1) if todo.status != NOT_SUBMITTED else 1
    result = _submit(client, chain, chain_file, todo.index, run["id"], attempt, records, mode)
    click.echo(f"run {run['id']}: step {todo.index} ({result['jobName']}) resubmitted as job {result['jobId']} "
               f"(attempt {attempt})")
    if follow or mode == "watch":
        sys.exit(_follow(client, chain, run, records, mode))


# -- advance (runs inside jobs) -------------------------------------------------------------
@click.command(hidden=False)
@click.argument("config_path", required=False)
@click.option("--run", "run_id", required=True, help="Run id.")
@click.option("--step", type=int, required=True, help="Index of the step that just ended.")
@click.option("--attempt", type=int, default=1, show_default=True)
@click.option("--exit-code", type=int, required=True, help="The user script's exit code.")
@click.option("--snapshot", type=click.File("r"), default=None, help="Inline snapshot ('-' for stdin).")
@api_options
def advance(config_path: Optional[str], run_id: str, step: int, attempt: int, exit_code: int,
            snapshot: Any, **kwargs: Any) -> None:
    """(inside a job) Act on this step's exit: submit the next step, retry it, or stop the chain."""
    from job_chain.chain.advance import advance as do_advance
    from job_chain.chain.advance import env_deadline
    from job_chain.chain.record import RunRecords

    opts = _api_opts(kwargs)
    if snapshot is not None:
        from job_chain.chain.submit import decode_snapshot

        chain, records, hint = decode_snapshot(snapshot.read()), None, "job-chain resume CHAIN_FILE"
    elif config_path:
        records, hint = RunRecords(config_path), f"job-chain resume {config_path}"
        run = records.get_run(run_id) or {}
        chain = _load(config_path, local=bool(run.get("local")), quiet=True)  # a --local run stays local
    else:
        raise UsageError("advance needs the chain file path or --snapshot")
    client = _client(chain, opts)
    sys.exit(do_advance(chain, client, run_id=run_id, step=step, attempt=attempt, exit_code=exit_code,
                        records=records, resume_hint=hint, deadline=env_deadline()))


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--wheels", type=click.Path(file_okay=False, exists=True), default=None,
              help="Use wheels from this directory instead of the package index (offline).")
def bundle(directory: str, wheels: Optional[str]) -> None:
    """Write a job-chain runtime into DIRECTORY (on shared storage) for training images."""
    from job_chain.chain.bundle import write_bundle

    summary = write_bundle(directory, wheels)
    click.echo(summary)
