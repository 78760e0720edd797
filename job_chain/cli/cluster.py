"""Commands for the cluster side: ``advance`` (runs inside each job) and ``bundle`` (its runtime)."""

from __future__ import annotations

import sys
from typing import Any, Optional

import click

from job_chain.cli.options import api_options
from job_chain.errors import UsageError


@click.command()
@click.argument("config_path", required=False)
@click.option("--run", "run_id", required=True, help="Run id.")
@click.option("--step", type=int, required=True, help="Index of the step that just ended.")
@click.option("--attempt", type=int, default=1, show_default=True,
              help="Which attempt of the step ended (1, then 2, ... for retries).")
@click.option("--exit-code", type=int, required=True, help="The user script's exit code.")
@click.option("--snapshot", type=click.File("rb"), default=None, help="Inline snapshot ('-' for stdin).")
@api_options
def advance(config_path: Optional[str], run_id: str, step: int, attempt: int, exit_code: int,
            snapshot: Any, **kwargs: Any) -> None:
    """(inside a job) Act on this step's exit: submit the next step, retry it, or stop the chain."""
    from job_chain.aihc.connect import connect
    from job_chain.chain.advance import advance as do_advance
    from job_chain.chain.advance import env_deadline, reconnect_from_credentials_file
    from job_chain.chain.loader import load_chain
    from job_chain.chain.record import RunRecords

    opts = {k: kwargs.pop(k) for k in ("host", "ak", "sk", "credentials_file", "use_local", "api_version")}
    if snapshot is not None:
        from job_chain.chain.submit import decode_snapshot

        try:
            text = snapshot.read().decode("ascii")
        except UnicodeDecodeError:
            raise UsageError("the inline chain snapshot is damaged: it is not base64 text") from None
        chain, records = decode_snapshot(text), None
        hint = f"job-chain resume {chain.path} --run {run_id}"
    elif config_path:
        records, hint = RunRecords(config_path), f"job-chain resume {config_path} --run {run_id}"
        run = records.get_run(run_id) or {}
        chain = load_chain(config_path, local=True)
        if run.get("local"):  # a --local run stays local
            chain.config_path = chain.scrips_path = None
    else:
        raise UsageError("advance needs the chain file path or --snapshot")
    opts["local"] = opts.pop("use_local")
    client = connect(api_config=chain.api_config, api_config_origin=f"{chain.path} api_config", **opts)
    sys.exit(do_advance(chain, client, run_id=run_id, step=step, attempt=attempt, exit_code=exit_code,
                        records=records, resume_hint=hint, deadline=env_deadline(),
                        reconnect=reconnect_from_credentials_file))


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--wheels", type=click.Path(file_okay=False, exists=True), default=None,
              help="Use wheels from this directory instead of the package index (offline).")
def bundle(directory: str, wheels: Optional[str]) -> None:
    """Write a job-chain runtime into DIRECTORY (on shared storage) for training images."""
    from job_chain.chain.bundle import write_bundle

    click.echo(write_bundle(directory, wheels))


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--timeout", type=float, default=None, help="Seconds the command may run.")
@click.option("--hang-timeout", type=float, default=None, help="Seconds the command may print nothing.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def watchdog(timeout: Optional[float], hang_timeout: Optional[float], command: Any) -> None:
    """(inside a job) Run COMMAND; kill it after --timeout, or --hang-timeout without output (exit 124)."""
    from job_chain.chain.watchdog import run

    sys.exit(run(list(command), timeout, hang_timeout))
