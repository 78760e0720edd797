"""Chain commands: parse the options, call :class:`~job_chain.session.ChainSession`, render."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, Optional

import click

from job_chain.cli.options import api_options, echo_json
from job_chain.errors import JobChainError, UsageError

CHAIN_FILE = click.argument("chain_file", metavar="CHAIN_FILE", type=click.Path(dir_okay=False))
RUN_OPTION = click.option("--run", "run_id", default=None, help="Run id (default: the latest run recorded here).")


def _warn(message: str) -> None:
    click.secho(f"warning: {message}", fg="yellow", err=True)


def open_session(chain_file: str, kwargs: Dict[str, Any], warnings: bool = False) -> Any:
    """A ChainSession from the api options (which are removed from ``kwargs``)."""
    from job_chain.session import ChainSession

    opts = {k: kwargs.pop(k) for k in ("host", "ak", "sk", "credentials_file", "use_local", "api_version")}
    return ChainSession.from_file(chain_file, local=opts["use_local"], host=opts["host"], ak=opts["ak"],
                                  sk=opts["sk"], credentials=opts["credentials_file"],
                                  api_version=opts["api_version"],
                                  warn=_warn if warnings else lambda _: None)


def _follow(session: Any, run_id: str, watch_mode: bool) -> int:
    from job_chain.cli.run_view import follow

    return follow(session.watch(run_id, interval=0.5, on_error=lambda e: _warn(f"{e}; still watching")),
                  session.chain.path, watch_mode)


@click.command()
@CHAIN_FILE
@click.option("--local", "use_local", is_flag=True, help="Skip checks that matter only in a cluster.")
def validate(chain_file: str, use_local: bool) -> None:
    """Check CHAIN_FILE: JSON syntax (line:column) and every schema problem (JSON path)."""
    from job_chain.chain.loader import load_chain

    chain = load_chain(chain_file, local=use_local)
    for warning in chain.warnings:
        _warn(warning)
    click.echo(f"{chain_file}: OK, {len(chain.steps)} steps, resource pool {chain.pool}")


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
@click.option("--force", is_flag=True, help="Start even if another run of this chain is still going.")
@api_options
def run(chain_file: str, start_index: Optional[int], start: Optional[int], dry_run: bool, follow: bool,
        advance_mode: str, inline: bool, force: bool, **kwargs: Any) -> None:
    """Submit step N of CHAIN_FILE (default 0); each later step starts when the previous one succeeds."""
    if start is not None and start_index is not None and start != start_index:
        raise UsageError(f"two different start steps given: {start_index} and --start {start}")
    if inline and advance_mode == "watch":
        raise UsageError("--inline and --advance watch exclude each other: watch mode needs no snapshot")
    first = start if start is not None else (start_index or 0)
    mode = "watch" if advance_mode == "watch" else ("inline" if inline else "job")
    secret = kwargs.get("sk")
    session = open_session(chain_file, kwargs, warnings=True)
    if dry_run:
        _dry_run(session, first, mode, secret)
        return
    started = session.start(first, mode=mode, force=force)
    for index in session.roots(first):
        submitted = session.records.submission(started.run_id, index, 1) or {}
        click.echo(f"run {started.run_id}: step {index} ({submitted.get('jobName', '')}) submitted as job "
                   f"{submitted.get('jobId', '?')}")
    if mode == "watch":
        click.echo("this process submits each next step (--advance watch): keep it running")
    else:
        click.echo(f"later steps start by themselves; watch with: job-chain status {chain_file} --watch")
    if follow or mode == "watch":
        sys.exit(_follow(session, started.run_id, mode == "watch"))


def _dry_run(session: Any, first: int, mode: str, secret: Optional[str]) -> None:
    from job_chain.chain.command import tail_size

    plan = session.plan(first, mode)
    host = session.planned_host
    if session.api_version == "v2":
        from job_chain.aihc.v2 import describe_create

        text = describe_create(host, plan["resourcePoolId"], plan["body"], plan["clientToken"])
    else:
        text = (f"POST {host}/api/v1/aijobs?resourcePoolId={plan['resourcePoolId']}&clientToken={plan['clientToken']}\n"
                + json.dumps(plan["body"], indent=2, ensure_ascii=False))
    for value in (session.chain.secret, secret):
        if value:
            text = text.replace(value, "****")
    click.echo(text)
    if session.chain.graph or session.chain.handlers:
        from job_chain.chain.graph import levels

        names = {s.index: s.name for s in session.chain.steps}
        for wave, indexes in enumerate(levels(session.chain, first)):
            click.echo(f"# wave {wave}: " + ", ".join(f"{i} {names[i]}" for i in indexes), err=True)
        for handler in session.chain.handlers:
            click.echo(f"# after the run ({handler.run_on}): {handler.index} {handler.name}", err=True)
    added = tail_size(plan["body"]["jobSpec"]["command"], session.chain.step(first).script)
    click.echo(f"# the run id is chosen at submission; job-chain adds {added} bytes around your script", err=True)


@click.command()
@CHAIN_FILE
@RUN_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@click.option("--watch", "-w", "watch", is_flag=True, help="Keep showing the run live until it ends.")
@api_options
def status(chain_file: str, run_id: Optional[str], as_json: bool, watch: bool, **kwargs: Any) -> None:
    """Show every step of a run: status, attempt, exit code, reason, and the run's outcome."""
    from job_chain.cli.run_view import print_status, status_json

    session = open_session(chain_file, kwargs)
    if watch:
        run = session.run(run_id)
        sys.exit(_follow(session, run.run_id, run.mode == "watch"))
    result = session.status(run_id)
    if as_json:
        echo_json(status_json(result))
    else:
        print_status(result)


@click.command()
@CHAIN_FILE
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
@api_options
def runs(chain_file: str, as_json: bool, **kwargs: Any) -> None:
    """List every run of CHAIN_FILE, newest first: id, start, outcome, current step, where."""
    from job_chain.chain.progress import iso
    from job_chain.cli.render import print_table
    from job_chain.cli.run_view import current_json, runs_rows

    session = open_session(chain_file, kwargs)
    entries = []
    for item in session.runs():
        entry: Dict[str, Any] = {"run": item.run_id, "started": iso(item.started), "local": item.local,
                                 "endpoint": item.endpoint or None, "mode": item.mode, "firstStep": item.first_step}
        try:
            found = session.status(item.run_id)
            entry.update(outcome=found.outcome.value, reason=found.reason or None, current=current_json(found.current))
        except JobChainError as exc:
            entry.update(outcome="unknown", reason=str(exc), current=[])
        entries.append(entry)
    if as_json:
        echo_json(entries)
    elif not entries:
        click.echo(f"no run of {chain_file} is recorded here: start one with 'job-chain run {chain_file}'")
    else:
        print_table(["RUN", "STARTED", "OUTCOME", "CURRENT", "WHERE"], runs_rows(entries))


@click.command()
@CHAIN_FILE
@RUN_OPTION
@api_options
def stop(chain_file: str, run_id: Optional[str], **kwargs: Any) -> None:
    """Stop a run: every step still going is stopped and no later step starts."""
    session = open_session(chain_file, kwargs)
    run = session.run(run_id)
    for step in session.stop(run.run_id):
        click.echo(f"stopping step {step.index} ({step.name}) job {step.job_id}")
    click.echo(f"run {run.run_id} stopped: no later step will start (continue with "
               f"'job-chain resume {chain_file} --run {run.run_id}')")


@click.command()
@CHAIN_FILE
@RUN_OPTION
@click.option("--follow", "-f", is_flag=True, help="Stay and show live status until the chain ends.")
@click.option("--advance", "advance_mode", type=click.Choice(["job", "watch"]), default=None,
              help="Advance mode for the rest of the run (default: as the run started).")
@api_options
def resume(chain_file: str, run_id: Optional[str], follow: bool, advance_mode: Optional[str],
           **kwargs: Any) -> None:
    """Start a run again at its first step that did not succeed (never creating a step twice)."""
    session = open_session(chain_file, kwargs)
    run = session.run(run_id)
    mode = advance_mode if advance_mode != "job" or run.mode != "inline" else None
    submitted = session.resume(run.run_id, mode=mode)
    if not submitted:
        click.echo(f"run {run.run_id}: every step succeeded; nothing to resume")
        return
    for done in submitted:
        verb = "resubmitted as" if done.created else "was already submitted as"
        click.echo(f"run {run.run_id}: step {done.step} ({done.job_name}) {verb} job {done.job_id} "
                   f"(attempt {done.attempt})")
    watch_mode = (mode or run.mode) == "watch"
    if follow or watch_mode:
        sys.exit(_follow(session, run.run_id, watch_mode))
