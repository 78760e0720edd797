"""Commands for the cluster side: ``advance`` (runs inside each job) and ``bundle`` (its runtime)."""

from __future__ import annotations

import sys
from typing import Any, Optional

import click

from job_chain.cli.options import api_options


@click.command()
@click.argument("config_path", required=False)
@click.option("--run", "run_id", required=True, help="Run id.")
@click.option("--step", required=True, help="Name of the step that just ended.")
@click.option("--attempt", type=int, default=1, show_default=True,
              help="Which attempt of the step ended (1, then 2, ... for retries).")
@click.option("--exit-code", type=int, required=True, help="The user script's exit code.")
@click.option("--snapshot", type=click.File("rb"), default=None, help="Inline snapshot ('-' for stdin).")
@click.option("--outputs", "outputs_file", default=None, help="The step's $JOB_CHAIN_OUTPUTS file.")
@api_options
def advance(config_path: Optional[str], run_id: str, step: str, attempt: int, exit_code: int,
            snapshot: Any, outputs_file: Optional[str], **kwargs: Any) -> None:
    """(inside a job) Act on this step's exit: submit the next step, retry it, or stop the chain.

    The chain is the run's frozen copy (from the run record, or the inline snapshot): the chain
    file is read only for the credentials it may hold, and only when no other source has them.
    Jobs run the same thing without the CLI: ``python3 -m job_chain.hop`` (see job_chain/hop/entry.py).
    """
    import functools

    from job_chain.hop.entry import run_advance
    from job_chain.session.places import connect_to

    connection = {k: kwargs.pop(k) for k in ("host", "ak", "sk", "session_token", "credentials_file", "api_version")}
    connection["local"] = kwargs.pop("use_local")
    sys.exit(run_advance(config_path=config_path, run_id=run_id, step=step, attempt=attempt, exit_code=exit_code,
                         snapshot=snapshot, connect=functools.partial(connect_to, **connection),
                         outputs_file=outputs_file))


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--wheels", type=click.Path(file_okay=False, exists=True), default=None,
              help="Use wheels from this directory instead of the package index (offline).")
def bundle(directory: str, wheels: Optional[str]) -> None:
    """Write a job-chain runtime into DIRECTORY (on shared storage) for training images."""
    from job_chain.submit.bundle import write_bundle

    click.echo(write_bundle(directory, wheels))


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--timeout", type=float, default=None, help="Seconds the command may run.")
@click.option("--hang-timeout", type=float, default=None, help="Seconds the command may print nothing.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def watchdog(timeout: Optional[float], hang_timeout: Optional[float], command: Any) -> None:
    """(inside a job) Run COMMAND; kill it after --timeout, or --hang-timeout without output (exit 124)."""
    from job_chain.hop.watchdog import run

    sys.exit(run(list(command), timeout, hang_timeout))
