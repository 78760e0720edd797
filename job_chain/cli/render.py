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


def _is_identifier(header: str) -> bool:
    words = header.upper().split()
    return bool(words) and words[-1] in ("ID", "NAME", "POD", "MODEL_NAME", "DATASET_NAME")


def make_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: Optional[str] = None) -> Any:
    """A borderless rich table whose ids, names and short values are never cut or wrapped.

    People copy job ids and names out of tables, so on a narrow terminal only long free text
    (messages, URLs) wraps.
    """
    from rich.table import Table
    from rich.text import Text

    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    table = Table(title=title, box=None, header_style="bold", pad_edge=False, title_justify="left")
    for i, header in enumerate(columns):
        widest = max([len(header)] + [Text.from_markup(row[i]).cell_len for row in cells])
        if _is_identifier(header) or widest <= 24:
            table.add_column(header, no_wrap=True, min_width=widest)
        else:
            table.add_column(header, overflow="fold")
    for row in cells:
        table.add_row(*row)
    return table


def console() -> Any:
    """A rich console; into a pipe or file, as wide as the content, so scripts see whole rows."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=4096)


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: Optional[str] = None) -> None:
    console().print(make_table(columns, rows, title))


def events_rows(events: List[dict]) -> List[List[str]]:
    return [
        [e.get("lastTimestamp") or e.get("firstTimestamp") or "", e.get("type", ""),
         e.get("reason", ""), str(e.get("count", "")), e.get("message", "")]
        for e in events
    ]
