"""Terminal output: rich tables and human durations, imported only by commands that print."""

from __future__ import annotations

import datetime as _dt
from typing import Any, Iterable, List, Optional, Sequence

from job_chain.aihc.timefmt import parse_time

STATUS_STYLE = {
    "Succeeded": "green", "Running": "cyan", "Pending": "yellow", "Created": "yellow",
    "Failed": "red", "Stopped": "magenta", "Stopping": "magenta", "not submitted": "dim",
}


def human_duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return "-"
    seconds = int(max(0, seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24}h"


def age(created: Optional[str], now: Optional[_dt.datetime] = None) -> str:
    when = parse_time(created)
    if when is None:
        return "-"
    now = now or _dt.datetime.now(_dt.timezone.utc)
    return human_duration((now - when).total_seconds())


def styled_status(status: str) -> str:
    style = STATUS_STYLE.get(status)
    return f"[{style}]{status}[/{style}]" if style else status


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: Optional[str] = None) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*columns, title=title, box=None, header_style="bold", pad_edge=False)
    for row in rows:
        table.add_row(*["" if cell is None else str(cell) for cell in row])
    Console().print(table)


def events_rows(events: List[dict]) -> List[List[str]]:
    return [
        [e.get("lastTimestamp") or e.get("firstTimestamp") or "", e.get("type", ""),
         e.get("reason", ""), str(e.get("count", "")), e.get("message", "")]
        for e in events
    ]
