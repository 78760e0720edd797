"""How runs look in a terminal: the status table, the live view, the runs list, and the hints.

Only presentation: every fact comes from :class:`~job_chain.session.ChainSession`.
"""

from __future__ import annotations

import datetime as _dt
import shlex
import threading
import time
from functools import lru_cache
from typing import Any, Dict, Iterable, List, Optional, Sequence

import click

from job_chain.cli.render import Cell, Styled, human_duration, make_table, show, styled_status
from job_chain.engine.states import FAILED
from job_chain.spec.model import display_group
from job_chain.status.cost import hours_text
from job_chain.status.types import Outcome, RunStatus, StepStatus, counts_text


def quoted(path: str) -> str:
    return shlex.quote(path)


def log_hint(status: RunStatus) -> Optional[str]:
    """For a failed run, the exact command that shows the failing attempt's log."""
    step = status.failed_step
    if step is None or not step.submitted:
        return None
    return (f"job-chain logs {quoted(status.chain_path)} --run {status.run_id} --step {quoted(step.name)} "
            f"--attempt {step.attempt}")


@lru_cache(maxsize=8192)
def _local(when: Optional[_dt.datetime]) -> Optional[_dt.datetime]:
    """``when`` in local time (asked once per time: a 5,000-step table shows a few hundred seconds)."""
    return when.astimezone() if when is not None else None


@lru_cache(maxsize=8192)
def _shown(when: Optional[_dt.datetime], fmt: str) -> str:
    """``when`` as a table shows it (local time, ``fmt``), or ``-``."""
    local = _local(when)
    return local.strftime(fmt) if local is not None else "-"


def time_format(times: Iterable[Optional[_dt.datetime]]) -> str:
    """``%H:%M:%S`` while everything shown is on one local date, else with the date."""
    days = {_local(t).date() for t in set(times) if t is not None}  # type: ignore[union-attr]
    return "%H:%M:%S" if len(days) <= 1 else "%Y-%m-%d %H:%M:%S"


def status_table(status: RunStatus, points: bool = True) -> Any:
    """The run as a table, one row per step (REASON says why a step failed: its cause, else AIHC's
    reason); a matrix is one row with its counts, followed by its points (all of them with
    ``points``, else those that run or failed)."""
    fmt = time_format([status.started] + [s.started for s in status.steps] + [s.finished for s in status.steps])
    with_reason = any(s.why() for s in status.steps)
    with_gpus = any(s.gpu_hours for s in status.steps)
    groups = {g["name"]: g for g in status.groups()}
    by_index = {s.index: s for s in status.steps}
    rows = []
    for s in status.steps:
        group = groups.get(s.group)
        if group is not None and group["steps"][0] == s.index:
            rows.append(_group_row(status, group, with_reason, with_gpus, by_index))
        if group is not None and not points and not (s.active or s.status in FAILED):
            continue
        rows.append(_step_row(status, s, fmt, with_reason, with_gpus, by_index))
    columns = ["STEP", "NAME", "STATUS", "ATTEMPT", "EXIT", "JOB ID", "STARTED", "DURATION"]
    if status.graph:
        columns.insert(2, "NEEDS")
    return make_table(columns + (["GPU-H"] if with_gpus else []) + (["REASON"] if with_reason else []), rows,
                      title=f"{status.chain_path} · run {status.run_id}")


def gpu_line(status: RunStatus) -> Optional[str]:
    """``GPU-hours: 12.40 (2.10 lost in failed attempts)`` when the run used GPUs."""
    saved_hours, hours = status.saved_gpu_hours, status.gpu_hours  # (each a sum over the run's steps)
    saved = f"; {saved_hours:.2f} saved by cached steps" if saved_hours else ""
    if not hours:
        return f"GPU-hours: 0.00{saved}" if saved else None
    lost = f" ({status.lost_gpu_hours:.2f} lost in failed attempts)" if status.lost_gpu_hours else ""
    return f"GPU-hours: {hours:.2f}{lost}{saved}"


def advice_lines(status: RunStatus) -> List[str]:
    """For each failed step: the line that says why, and what to do about it."""
    out = []
    for step in status.failed_steps:
        failure = step.failure
        if failure is None:
            continue
        if failure.line:
            out.append(f"{step.name}: {failure.line[:240]}" + (f"  (pod {failure.pod})" if failure.pod else ""))
        if failure.explanation:
            out.append(f"{step.name}: what to do: {failure.explanation}")
    return out


def needs(step: StepStatus, by_index: Dict[int, StepStatus]) -> str:
    """What a step waits for, a matrix by its name: ``prep, train`` (``by_index``: the run's steps by
    index, made once per table)."""
    out: List[str] = []
    for dep in step.depends_on:
        found = by_index.get(dep)
        name = (found.group or found.name) if found is not None else str(dep)
        if name not in out:
            out.append(name)
    return ", ".join(out) or "-"


def _step_row(status: RunStatus, s: StepStatus, fmt: str, with_reason: bool, with_gpus: bool,
              by_index: Dict[int, StepStatus]) -> List[Cell]:
    row: List[Cell] = [
        str(s.index), ("  " if s.group else "") + s.label + (f" ({s.removed})" if s.removed else ""),
        styled_status(s.status), _attempt_cell(s),
        "-" if s.exit_code is None else str(s.exit_code), s.job_id or "-",
        _shown(s.started, fmt), human_duration(s.duration())]
    if status.graph:  # what each step waits for: the graph, one row per step
        row.insert(2, f"after the run ({s.run_on})" if s.run_on else needs(s, by_index))
    if with_gpus:
        row.append(hours_text(s.gpu_hours) + (f" ({hours_text(s.lost_gpu_hours)} lost)" if s.lost_gpu_hours else ""))
    if with_reason:
        row.append(s.why() or "")
    return row


def _attempt_cell(s: StepStatus) -> str:
    """``2`` or ``2 (restarted by AIHC ×1)``: the latest attempt, and AIHC's own restarts of its job."""
    restarted = s.attempts[-1].restarted() if s.attempts else ""
    return f"{s.attempt or '-'}" + (f" ({restarted})" if restarted else "")


def _group_row(status: RunStatus, group: Dict[str, Any], with_reason: bool, with_gpus: bool,
               by_index: Dict[int, StepStatus]) -> List[Cell]:
    points = [by_index[i] for i in sorted(group["steps"]) if i in by_index]
    starts = [p.started for p in points if p.started]
    ends = [p.finished for p in points if p.finished]
    span = (max(ends) - min(starts)).total_seconds() if starts and ends and len(ends) == len(points) else None
    first = _local(min(starts)) if starts else None
    row: List[Cell] = [f"{points[0].index}-{points[-1].index}", f"{group['name']} ×{group['points']}",
                       Styled(counts_text(group["counts"]), "bold"), "-", "-", "-",
                       first.strftime("%H:%M:%S") if first else "-", human_duration(span)]
    if status.graph:
        row.insert(2, needs(points[0], by_index))
    if with_gpus:
        row.append(hours_text(sum(p.gpu_hours or 0.0 for p in points)))
    if with_reason:
        row.append("")
    return row


def outcome_line(status: RunStatus) -> str:
    text = f"run {status.run_id}: {status.outcome}"
    if status.reason and status.outcome is not Outcome.SUCCEEDED:
        text += f" ({status.reason})"
    return text


def revision_line(status: RunStatus) -> Optional[str]:
    """``revision 2 (resumed with …)`` when a resume changed the run; None while it runs as started."""
    if status.revision <= 1 or not status.revisions:
        return None
    latest = status.revisions[-1]
    return f"run {status.run_id} runs revision {status.revision} of its chain: {latest.get('reason') or 'changed'}"


def file_line(status: RunStatus, changes: List[Any]) -> Optional[str]:
    """One line when the chain file differs from the revision the run runs, with the command that
    shows what a resume would apply."""
    if not changes:
        return None
    named = [c.line().split(":", 1)[0] for c in changes]
    shown = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
    return (f"the chain file differs from run {status.run_id} (revision {status.revision or 1}): {shown}; "
            f"what a resume would apply: job-chain resume {quoted(status.chain_path)} --run {status.run_id} "
            "--dry-run")


def print_status(status: RunStatus, points: bool = True, changes: Optional[List[Any]] = None) -> None:
    show(status_table(status, points))
    revision = revision_line(status)
    if revision:
        click.echo(revision)
    differs = file_line(status, changes or [])
    if differs:
        click.echo(differs)
    for line in [gpu_line(status)] + retry_lines(status) + advice_lines(status):
        if line:
            click.echo(line)
    click.echo(outcome_line(status))
    for failed in status.notify_failed:
        click.echo(f"notification failed: {failed}")
    hint = log_hint(status)
    if hint:
        click.echo(f"read its log: {hint}")


def retry_lines(status: RunStatus) -> List[str]:
    """``step train: attempt 1 failed: …; retrying as attempt 2 from iteration 200 (/pfs/…)``: each
    retried step's latest retry, with the checkpoint it was told."""
    out = []
    for step in status.steps:
        note = step.retried()
        if note:
            out.append(f"step {step.label}: {note}")
    return out


def status_json(status: RunStatus) -> Dict[str, Any]:
    data = status.as_json()
    hint = log_hint(status)
    if hint:
        data["hint"] = hint
    return data


class _Newest:
    """The newest status as a table, built anew at each refresh: the watcher yields a status only
    when something changed, and a running step's duration must grow in between."""

    def __init__(self) -> None:
        self.status: Optional[RunStatus] = None

    def __rich__(self) -> Any:
        return status_table(self.status, points=False) if self.status is not None else ""


def _tick(live: Any, stop: threading.Event) -> None:
    """Refresh the live view every second, or less often when drawing it is slow (long chains)."""
    wait = 1.0
    while not stop.wait(wait):
        began = time.monotonic()
        live.refresh()
        wait = max(1.0, 5 * (time.monotonic() - began))


def follow(watching: Iterable[RunStatus], chain_path: str, watch_mode: bool, out: Any = None) -> int:
    """Show each status as it changes until the run ends; exit 0 only if it succeeded.

    ``out``: the rich console to draw on (default: the terminal's, or plain lines into a pipe).
    """
    from rich.live import Live

    from job_chain.cli.render import console as render_console

    out = out or render_console()
    seen: Dict[str, str] = {}
    said: Dict[str, int] = {}
    final: Optional[RunStatus] = None
    newest = _Newest()
    try:
        with Live(newest if out.is_terminal else "", console=out, auto_refresh=False, transient=False) as live:
            stop = threading.Event()
            ticker = threading.Thread(target=_tick, args=(live, stop), daemon=True)
            if out.is_terminal:
                ticker.start()
            try:
                for status in watching:
                    final = status
                    for line in _narration(status, said):  # a failed attempt: why, and what follows
                        if out.is_terminal:
                            live.console.print(line, markup=False, highlight=False)
                        else:
                            click.echo(line)
                    if out.is_terminal:
                        newest.status = status
                        live.refresh()
                        continue
                    for s in status.steps:
                        restarted = s.attempts[-1].restarted() if s.attempts else ""
                        shape = f"{s.status}/{s.attempt}/{restarted}"
                        if s.job_id and seen.get(s.name) != shape:
                            click.echo(f"step {s.index} {s.label}: {s.status} (job {s.job_id}, attempt {s.attempt}"
                                       + (f", {restarted})" if restarted else ")"))
                            seen[s.name] = shape
            finally:
                stop.set()
                if ticker.is_alive():
                    ticker.join(timeout=5)
    except KeyboardInterrupt:
        run = f" --run {final.run_id}" if final else ""  # (the chain path is quoted below)
        if watch_mode:
            click.echo(f"\nstopped watching: in --advance watch mode no later step starts until you run "
                       f"'job-chain resume {quoted(chain_path)}{run} --advance watch'", err=True)
        else:
            click.echo(f"\ndetached: the chain keeps running by itself; see 'job-chain status {quoted(chain_path)}"
                       f"{run} --watch'", err=True)
        return 130
    if final is None:
        return 1
    gpus = gpu_line(final)
    if gpus:
        click.echo(gpus)
    click.echo(outcome_line(final))
    hint = log_hint(final)
    if hint:
        click.echo(f"read its log: {hint}")
    return 0 if final.outcome is Outcome.SUCCEEDED else 1


def _narration(status: RunStatus, said: Dict[str, int]) -> List[str]:
    """``step train: attempt 1 failed: infra (…); retrying as attempt 2 from iteration 200; infra budget
    4 left`` once per failed attempt, when its cause is known."""
    out = []
    for s in status.steps:
        for attempt, note in sorted(s.notes.items()):
            if attempt > said.get(s.name, 0):
                out.append(f"step {s.name}: {note}")
                said[s.name] = attempt
    return out


RUNS_COLUMNS = ["RUN", "STARTED", "OUTCOME", "FAILED / CURRENT", "GPU-H", "WHERE", "NOTE"]


def runs_columns(entries: Sequence[Dict[str, Any]]) -> List[str]:
    """The runs table's columns: PARAMS when any run listed has parameters."""
    columns = list(RUNS_COLUMNS)
    if any(e.get("params") for e in entries):
        columns.insert(3, "PARAMS")
    return columns


def runs_rows(entries: Sequence[Dict[str, Any]]) -> List[List[Any]]:
    """One row per run (``RunSummary.as_json``), as :func:`runs_columns` names them."""
    with_params = any(e.get("params") for e in entries)  # once: not once per row
    rows = []
    for entry in entries:
        started = _dt.datetime.fromisoformat(entry["started"]).astimezone() if entry.get("started") else None
        failed = entry.get("failedSteps") or []
        if failed:
            current = _grouped([(c["display"], "failed" + (f" (exit {c['exitCode']})" if c.get("exitCode") is not None
                                                          else "") + (f": {c['cause']}" if c.get("cause") else ""))
                                for c in failed])
        else:
            current = _grouped([(c["display"], c["status"]) for c in entry.get("current") or []]) or "-"
        note = "" if entry.get("outcome") in ("succeeded", "running") or failed else (entry.get("reason") or "")
        hours = entry.get("gpuHours")
        gpus = hours_text(hours) + (f" ({hours_text(entry['lostGpuHours'])} lost)" if entry.get("lostGpuHours")
                                    else "") if hours else "-"
        if entry.get("cached"):  # steps that reused a cached success (docs/caching.md)
            saved = f", {hours_text(entry['savedGpuHours'])} saved" if entry.get("savedGpuHours") else ""
            gpus += f" ({len(entry['cached'])} cached{saved})"
        row = [entry["run"], started.strftime("%Y-%m-%d %H:%M:%S") if started else "-",
               styled_status(entry["outcome"]), current, gpus, "local" if entry.get("local") else
               (entry.get("endpoint") or "cloud"), note]
        if with_params:
            row.insert(3, " ".join(f"{k}={v}" for k, v in (entry.get("params") or {}).items()) or "-")
        rows.append(row)
    return rows


def _grouped(items: List[Any]) -> str:
    """``prep Running, train ×16 Running``: points of one matrix in the same state make one entry."""
    groups: Dict[Any, List[str]] = {}
    for label, what in items:
        base = display_group(label)
        groups.setdefault((base, what), []).append(label)
    return ", ".join(f"{labels[0] if len(labels) == 1 else f'{base} ×{len(labels)}'} {what}"
                     for (base, what), labels in groups.items())
