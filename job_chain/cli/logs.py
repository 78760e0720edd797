"""``job-chain logs``: one attempt's log, every pod's, or the whole run as it goes."""

from __future__ import annotations

import sys
import time
from typing import Any, Optional

import click

from job_chain.cli.chain import OPTIONAL_CHAIN_FILE, RUN_OPTION, open_runs
from job_chain.cli.follow import detach_on_ctrl_c
from job_chain.cli.options import api_options


@click.command()
@OPTIONAL_CHAIN_FILE
@click.option("--step", default=None, metavar="NAME|N",
              help="Step name or number (default: a failed run's failed step, else the latest submitted step).")
@click.option("--attempt", type=click.IntRange(min=1), default=None, help="Attempt (default: the step's latest).")
@RUN_OPTION
@click.option("--pod", default=None, help="Pod name (default: the pod a failure's cause names, else the master).")
@click.option("--all-pods", is_flag=True, help="Every pod of the step, each line prefixed with its pod.")
@click.option("-f", "--follow", is_flag=True,
              help="Keep printing new lines: until the step ends with --step, else through every later step "
                   "until the run ends.")
@click.option("--tail", type=click.IntRange(min=0), default=None, help="Only the last N lines.")
@api_options
@detach_on_ctrl_c("the run keeps going by itself")
def logs(chain_file: Optional[str], step: Optional[str], attempt: Optional[int], run_id: Optional[str],
         pod: Optional[str], all_pods: bool, follow: bool, tail: Optional[int], **kwargs: Any) -> None:
    """Print the log of a chain step (with --follow and no --step: of the whole run, step after step)."""
    from job_chain.errors import UsageError

    if all_pods and (pod or follow):
        raise UsageError("--all-pods prints every pod once: it does not combine with --pod or --follow")
    session = open_runs(chain_file, run_id, kwargs, read_only=True)
    run = session.run(run_id)
    client = session.client_for(run)
    pool = session.frozen(run).pool
    state, chosen = session.attempt(run.run_id, step, attempt)
    if all_pods:
        _print_all_pods(client, pool, state, chosen, tail)
        return
    _print_attempt(client, pool, state, chosen, pod, tail, follow)
    if not follow or step is not None:
        return
    shown = {chosen.job_id}
    while True:  # the run goes on: follow each next job (a later step, or a retry) as it appears
        status = session.status(run.run_id)
        later = [(s, a) for s in status.steps for a in s.attempts if a.job_id not in shown and s.index >= state.index]
        if later:
            state, chosen = later[0]
            shown.add(chosen.job_id)
            _print_attempt(client, pool, state, chosen, None, None, True)
            continue
        if status.outcome != "running":
            click.echo(f"# run {run.run_id}: {status.outcome}", err=True)
            sys.exit(0 if status.outcome == "succeeded" else 1)
        time.sleep(1.0)


def _where(state: Any, chosen: Any) -> str:
    return f"# step {state.index} {state.name} · attempt {chosen.attempt} · job {chosen.job_id}"


def _print_attempt(client: Any, pool: str, state: Any, chosen: Any, pod: Optional[str], tail: Optional[int],
                   follow: bool) -> None:
    """One attempt's log; with ``follow``, an attempt still queued (no pod yet) is waited for."""
    from job_chain.aihc.client import naming_pods
    from job_chain.aihc.engine import as_engine
    from job_chain.cli.follow import follow_logs
    from job_chain.engine.states import is_terminal
    from job_chain.errors import UsageError

    engine = as_engine(client)
    job = engine.job(pool, chosen.job_id)
    if pod is None and follow:
        if not job.pods and not is_terminal(job.status):
            click.echo(f"{_where(state, chosen)} · {job.status}: waiting for its pod", err=True)
        while not job.pods and not is_terminal(job.status):
            time.sleep(2.0)
            job = engine.job(pool, chosen.job_id)
    if pod is None and not job.pods:
        raise UsageError(f"job {chosen.job_id} has no pods yet; pass --pod NAME once it is scheduled")
    pod_name = pod or chosen.log_pod(job.pod_names) or job.pod_names[0]
    click.echo(f"{_where(state, chosen)} · pod {pod_name}", err=True)
    with naming_pods(client, pool, chosen.job_id, pod_name):
        follow_logs(engine, pool, chosen.job_id, pod_name, tail, follow)


def _print_all_pods(client: Any, pool: str, state: Any, chosen: Any, tail: Optional[int]) -> None:
    """Every pod's log (or its last ``tail`` lines), each line prefixed with its pod, page by page."""
    from collections import deque

    from job_chain.aihc.engine import as_engine
    from job_chain.engine.logs import lines_of, log_records
    from job_chain.errors import UsageError
    from job_chain.util.safe_text import for_stream

    engine = as_engine(client)
    names = engine.job(pool, chosen.job_id).pod_names
    if not names:
        raise UsageError(f"job {chosen.job_id} has no pods yet")
    click.echo(_where(state, chosen), err=True)
    for name in names:
        lines = lines_of(log_records(engine, pool, chosen.job_id, name, max_lines=tail))
        for line in lines if tail is None else deque(lines, maxlen=tail):
            click.echo(for_stream(f"[{name}] {line.rstrip(chr(10))}"))
