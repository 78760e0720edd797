"""How runs look in a terminal: the status table, the live view, the runs list, and the hints.

Only presentation: every fact comes from :class:`~job_chain.session.ChainSession`.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from typing import Any, Dict, Iterable, List, Optional, Sequence

import click

from job_chain.chain.progress import Outcome, RunStatus, StepStatus


def quoted(path: str) -> str:
    return shlex.quote(path)


def log_hint(status: RunStatus) -> Optional[str]:
    """For a failed run, the exact command that shows the failing attempt's log."""
    step = status.failed_step
    if step is None or not step.submitted:
        return None
    return (f"job-chain logs {quoted(status.chain_path)} --run {status.run_id} --step {step.index} "
            f"--attempt {step.attempt}")


def _local(when: Optional[_dt.datetime]) -> Optional[_dt.datetime]:
    return when.astimezone() if when is not None else None


def time_format(times: Iterable[Optional[_dt.datetime]]) -> str:
    """``%H:%M:%S`` while everything shown is on one local date, else with the date."""
    days = {t.astimezone().date() for t in times if t is not None}
    return "%H:%M:%S" if len(days) <= 1 else "%Y-%m-%d %H:%M:%S"


def status_table(status: RunStatus) -> Any:
    from job_chain.cli.render import human_duration, make_table, styled_status

    fmt = time_format([status.started] + [s.started for s in status.steps] + [s.finished for s in status.steps])
    with_reason = any(s.reason for s in status.steps)
    rows = []
    for s in status.steps:
        started = _local(s.started)
        row = [str(s.index), s.name, styled_status(s.status), str(s.attempt or "-"),
               "-" if s.exit_code is None else str(s.exit_code), s.job_id or "-",
               started.strftime(fmt) if started else "-", human_duration(s.duration())]
        if status.graph:  # what each step waits for: the graph, one row per step
            row.insert(2, f"after the run ({s.run_on})" if s.run_on else ", ".join(map(str, s.depends_on)) or "-")
        if with_reason:
            row.append(s.reason or "")
        rows.append(row)
    columns = ["STEP", "NAME", "STATUS", "ATTEMPT", "EXIT", "JOB ID", "STARTED", "DURATION"]
    if status.graph:
        columns.insert(2, "NEEDS")
    return make_table(columns + (["REASON"] if with_reason else []), rows,
                      title=f"{status.chain_path} · run {status.run_id}")


def outcome_line(status: RunStatus) -> str:
    text = f"run {status.run_id}: {status.outcome}"
    if status.reason and status.outcome is not Outcome.SUCCEEDED:
        text += f" ({status.reason})"
    return text


def print_status(status: RunStatus) -> None:
    from job_chain.cli.render import show

    show(status_table(status))
    click.echo(outcome_line(status))
    hint = log_hint(status)
    if hint:
        click.echo(f"read its log: {hint}")


def status_json(status: RunStatus) -> Dict[str, Any]:
    data = status.as_json()
    hint = log_hint(status)
    if hint:
        data["hint"] = hint
    return data


def follow(watching: Iterable[RunStatus], chain_path: str, watch_mode: bool) -> int:
    """Show each status as it changes until the run ends; exit 0 only if it succeeded."""
    from rich.live import Live

    from job_chain.cli.render import console as render_console

    out = render_console()
    seen: Dict[int, str] = {}
    final: Optional[RunStatus] = None
    try:
        with Live(console=out, auto_refresh=False, transient=False) as live:
            for status in watching:
                final = status
                if out.is_terminal:
                    live.update(status_table(status), refresh=True)
                    continue
                for s in status.steps:
                    if s.job_id and seen.get(s.index) != f"{s.status}/{s.attempt}":
                        click.echo(f"step {s.index} {s.name}: {s.status} (job {s.job_id}, attempt {s.attempt})")
                        seen[s.index] = f"{s.status}/{s.attempt}"
    except KeyboardInterrupt:
        run = f" --run {final.run_id}" if final else ""
        if watch_mode:
            click.echo(f"\nstopped watching: in --advance watch mode no later step starts until you run "
                       f"'job-chain resume {quoted(chain_path)}{run} --advance watch'", err=True)
        else:
            click.echo(f"\ndetached: the chain keeps running by itself; see 'job-chain status {quoted(chain_path)}"
                       f"{run} --watch'", err=True)
        return 130
    if final is None:
        return 1
    click.echo(outcome_line(final))
    hint = log_hint(final)
    if hint:
        click.echo(f"read its log: {hint}")
    return 0 if final.outcome is Outcome.SUCCEEDED else 1


def runs_rows(entries: Sequence[Dict[str, Any]]) -> List[List[Any]]:
    from job_chain.cli.render import styled_status

    rows = []
    for entry in entries:
        started = _dt.datetime.fromisoformat(entry["started"]).astimezone() if entry.get("started") else None
        current = ", ".join(f"{c['step']} {c['name']} {c['status']}" for c in entry.get("current") or []) or "-"
        rows.append([entry["run"], started.strftime("%Y-%m-%d %H:%M:%S") if started else "-",
                     styled_status(entry["outcome"]), current, "local" if entry.get("local") else
                     (entry.get("endpoint") or "cloud")])
    return rows


def current_json(steps: Iterable[StepStatus]) -> List[Dict[str, Any]]:
    return [{"step": s.index, "name": s.name, "status": s.status, "attempt": s.attempt or None} for s in steps]
