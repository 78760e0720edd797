"""Commands for the cluster side: ``advance`` (runs inside each job) and ``bundle`` (its runtime)."""

from __future__ import annotations

import shlex
import sys
from typing import Any, Dict, Optional, Tuple

import click

from job_chain.cli.options import api_options
from job_chain.errors import UsageError


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
    """
    from job_chain.aihc.connect import connect
    from job_chain.chain.advance import advance as do_advance
    from job_chain.chain.advance import env_deadline, reconnect_from_credentials_file

    opts = {k: kwargs.pop(k) for k in ("host", "ak", "sk", "credentials_file", "use_local", "api_version")}
    api_config: Dict[str, Any] = {}
    if snapshot is not None:
        from job_chain.chain.submit import decode_snapshot

        try:
            text = snapshot.read().decode("ascii")
        except UnicodeDecodeError:
            raise UsageError("the inline chain snapshot is damaged: it is not base64 text") from None
        chain, records = decode_snapshot(text), None
        api_config = dict(chain.api_config)
    elif config_path:
        chain, records, api_config = _frozen_run(config_path, run_id)
    else:
        raise UsageError("advance needs the chain file path or --snapshot")
    hint = f"job-chain resume {shlex.quote(chain.path)} --run {run_id}"
    opts["local"] = opts.pop("use_local")
    client = connect(api_config=api_config, api_config_origin=f"{chain.path} api_config", **opts)
    outputs: Tuple[Dict[str, str], Optional[str]] = ({}, None)
    if outputs_file and exit_code == 0:
        from job_chain.chain.outputs import read_file

        outputs = read_file(outputs_file)
    sys.exit(do_advance(chain, client, run_id=run_id, step=step, attempt=attempt, exit_code=exit_code,
                        records=records, resume_hint=hint, deadline=env_deadline(),
                        reconnect=reconnect_from_credentials_file, outputs=outputs))


def _frozen_run(config_path: str, run_id: str) -> Tuple[Any, Any, Dict[str, Any]]:
    """(the run's chain, its records, api_config for credentials) for an advancing job."""
    from job_chain.chain.record import RunRecords

    records = RunRecords(config_path)
    run = records.require_run(run_id)
    chain = records.frozen(run_id, run)
    api_config = {**records.credentials(run_id), **({"version": chain.api_config["version"]}
                                                    if chain is not None and chain.api_config.get("version") else {})}
    if chain is None:  # a run recorded before runs were frozen: the file as it is now (the old behaviour)
        from job_chain.chain.loader import load_chain

        chain = load_chain(config_path, local=True)
        api_config = chain.api_config
        if run.get("local"):  # a --local run stays local
            chain.config_path = chain.scrips_path = None
    elif not api_config.get("ak"):  # keys may still be in the file (written after the run started)
        api_config = {**_file_api_config(config_path), **api_config}
    return chain, records, api_config


def _file_api_config(path: str) -> Dict[str, Any]:
    """The chain file's ``api_config`` if the file is there and is JSON; {} otherwise (never an error:
    the run does not depend on the file)."""
    import json

    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    found = data.get("api_config") if isinstance(data, dict) else None
    return {k: v for k, v in found.items() if isinstance(v, str)} if isinstance(found, dict) else {}


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
