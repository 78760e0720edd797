"""Terminal output: rich tables and human durations, imported only by commands that print."""

from __future__ import annotations

import datetime as _dt
import os
import sys
from typing import Any, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from job_chain.aihc.timefmt import parse_time

STATUS_STYLE = {
    "Succeeded": "green", "Running": "cyan", "Pending": "yellow", "Created": "yellow", "Scheduled": "yellow",
    "Failed": "red", "Stopped": "magenta", "Stopping": "magenta", "not submitted": "dim", "skipped": "dim",
    "waiting": "yellow",
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


class Styled(NamedTuple):
    """A table cell shown in a style. Cells are never parsed as rich markup: a plain cell is
    shown as given (a ``[`` in a job name stays a ``[``), and parsing markup in every cell was
    most of the time a 2,000-row table took."""

    text: str
    style: str

    def __str__(self) -> str:
        return self.text


Cell = Union[str, Styled]


_STYLED_STATUS = {status: Styled(status, style) for status, style in STATUS_STYLE.items()}  # (made once, not per row)


def styled_status(status: str) -> Cell:
    return _STYLED_STATUS.get(status, status)


# Columns a narrow terminal may hide, least useful first; ids, names and statuses never are.
DROP_ORDER = ("AGE", "PRIORITY", "QUEUE", "RESTARTS", "NODE", "COUNT", "TYPE", "STARTED", "GPU-H", "ATTEMPT",
              "DURATION", "POINTS", "DEFAULT PP", "DEFAULT TP", "HF NAME", "SERIES")
FOLD_MIN = 12  # narrowest a wrapping free-text column is worth showing
SQUEEZE_MIN = 8  # narrowest a name or status gets when it wraps so that an id stays whole
GAP = 2  # rich's padding between two columns (box=None, pad_edge=False)


def _is_identifier(header: str) -> bool:
    words = header.upper().split()
    return bool(words) and words[-1] in ("ID", "NAME", "POD", "MODEL_NAME", "DATASET_NAME")


class FittedTable:
    """A rich renderable that fits its table to the width it is given, without cutting ids.

    People copy job ids and names out of tables, so nothing is ever cut (rich would crop
    no-wrap columns without an ellipsis). Short values stay on one line and long free text
    (messages, URLs) wraps. When that does not fit: droppable columns go, least useful first,
    with one dim line saying which; then names and other values wrap while ids stay whole;
    only then do ids wrap too (awkward to copy, but unlike a cut id, still right).
    """

    def __init__(self, columns: Sequence[str], rows: List[Sequence[Any]], title: Optional[str],
                 droppable: Sequence[str]) -> None:
        self.columns = list(columns)
        self.rows = rows  # as given: a Styled cell keeps its style here
        self.title = title
        # what each column shows, by row (as :func:`cell_text` has it)
        self.texts = [[cell if type(cell) is str else cell_text(cell) for cell in column] for column in zip(*rows)] \
            if rows else [[] for _ in self.columns]
        self.widest = [max(len(h), _widest(texts)) for h, texts in zip(self.columns, self.texts)]
        self.fixed = [_is_identifier(h) or self.widest[i] <= 24 for i, h in enumerate(columns)]
        ids = [i for i, h in enumerate(columns) if h.upper().split()[-1:] == ["ID"]]
        self.primary = set(ids or [i for i, h in enumerate(columns) if _is_identifier(h)])
        self.droppable = [self.columns.index(h) for h in droppable
                          if h in self.columns and not _is_identifier(h)]

    def _needed(self, keep: List[int], level: int) -> int:
        """Width of the columns ``keep`` at wrap ``level`` (0 none, 1 all but ids, 2 all)."""
        def one_line(i: int) -> bool:
            return self.fixed[i] and (level == 0 or (level == 1 and i in self.primary))

        narrowest = FOLD_MIN if level == 0 else SQUEEZE_MIN
        return sum(self.widest[i] if one_line(i) else min(self.widest[i], narrowest) for i in keep) \
            + GAP * (len(keep) - 1)

    def fit(self, width: int) -> Tuple[List[int], List[str], int]:
        """The columns to show at ``width``, the headers hidden to get there, and the wrap level."""
        keep = list(range(len(self.columns)))
        hidden: List[str] = []
        for index in self.droppable:
            if self._needed(keep, 0) <= width:
                break
            keep.remove(index)
            hidden.append(self.columns[index])
        level = next((lv for lv in (0, 1) if self._needed(keep, lv) <= width), 2)
        return keep, hidden, level

    def table(self, keep: List[int], level: int = 0) -> Any:
        from rich.table import Table
        from rich.text import Text

        title = Text(self.title, style="table.title") if self.title else None
        table = Table(title=title, box=None, header_style="bold", pad_edge=False, title_justify="left")
        for i in keep:
            if self.fixed[i] and (level == 0 or (level == 1 and i in self.primary)):
                table.add_column(Text(self.columns[i]), no_wrap=True, min_width=self.widest[i])
            else:
                table.add_column(Text(self.columns[i]), overflow="fold")
        for number, row in enumerate(self.rows):
            table.add_row(*[Text(self.texts[i][number], style=_style(row[i])) for i in keep])
        return table

    def _lines(self) -> Iterator[Tuple[str, List[Tuple[int, int, str]]]]:
        """Each line with every column full width, as rich lays out this table when it fits (same
        gaps), and the (start, end, style) of its styled cells; the title first."""
        if self.title:
            yield self.title, [(0, len(self.title), "table.title")]
        lines: List[Tuple[Sequence[str], List[str]]] = [(self.columns, ["bold"] * len(self.columns))]
        lines += [(texts, [_style(cell) for cell in row]) for texts, row in zip(zip(*self.texts), self.rows)]
        for texts, styles in lines:
            parts: List[str] = []
            spans: List[Tuple[int, int, str]] = []
            at = 0
            for shown, style, width in zip(texts, styles, self.widest):
                if style:
                    spans.append((at, at + len(shown), style))
                parts.append(shown + " " * (width - cell_len(shown)))
                at += len(parts[-1]) + GAP
            yield (" " * GAP).join(parts).rstrip(), spans

    def plain(self) -> str:
        """The whole table as text, for a pipe: every column full width, no styles.

        Laid out as rich lays out this table (the lines :meth:`_lines` gives, without their
        styles), but without rendering it: rich takes about a second for a 500-step status, this
        takes milliseconds (a 5,000-step one: ~3 ms). Column by column: each column's texts are
        padded at once, then the rows are joined.
        """
        padded = [_padded([header, *texts], width)
                  for header, texts, width in zip(self.columns, self.texts, self.widest)]
        lines = [self.title] if self.title else []
        lines += [(" " * GAP).join(row).rstrip() for row in zip(*padded)]
        return "\n".join(lines)

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.text import Span, Text

        if sum(self.widest) + GAP * (len(self.widest) - 1) <= options.max_width:
            # everything fits whole: rich's table would lay it out as _lines do, at ~1 ms a row
            text = Text(no_wrap=True, overflow="ignore")
            for line, spans in self._lines():
                start = len(text)
                text.append(line + "\n")
                text.spans.extend(Span(start + a, start + b, style) for a, b, style in spans)
            text.rstrip()
            yield text
            return
        keep, hidden, level = self.fit(options.max_width)
        yield self.table(keep, level)
        if hidden:
            yield Text(f"(hidden to fit: {', '.join(hidden)})", style="dim")

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement.get(console, options, self.table(list(range(len(self.columns)))))


def cell_len(text: str) -> int:
    """Columns ``text`` takes in a terminal (wide CJK characters take two)."""
    if text.isascii():
        return len(text)  # the common case, without importing rich
    from rich.cells import cell_len as rich_cell_len

    return int(rich_cell_len(text))


def cell_text(cell: Any) -> str:
    """What a table shows of a cell: a :class:`Styled` cell's text, nothing for None, else its ``str``."""
    if isinstance(cell, Styled):
        return cell.text
    return "" if cell is None else str(cell)


def _style(cell: Any) -> str:
    return cell.style if isinstance(cell, Styled) else ""


def _widest(texts: Sequence[str]) -> int:
    """Columns the widest of ``texts`` takes in a terminal (0 for none)."""
    if not texts:
        return 0
    return max(map(len if "".join(texts).isascii() else cell_len, texts))  # (ASCII, the common case: by len)


def _padded(texts: Sequence[str], width: int) -> List[str]:
    """``texts`` padded with spaces to take ``width`` columns in a terminal (a longer one as it is)."""
    if "".join(texts).isascii():
        return [shown.ljust(width) for shown in texts]  # (the common case: by len)
    return [shown + " " * (width - cell_len(shown)) for shown in texts]


def make_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: Optional[str] = None,
               droppable: Optional[Sequence[str]] = None) -> FittedTable:
    """A borderless table that never cuts an id or name (people copy them out of tables).

    ``droppable``: headers that may be hidden on a narrow terminal, least useful first
    (default: those of :data:`DROP_ORDER` present).
    """
    return FittedTable(columns, list(rows), title, DROP_ORDER if droppable is None else droppable)


def console() -> Any:
    """A rich console; into a pipe or file, as wide as the content, so scripts see whole rows."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=4096)


def plainly_piped() -> bool:
    """True when rich too would see no terminal: stdout is no tty and neither TTY_COMPATIBLE nor
    FORCE_COLOR says otherwise. Asked without rich, whose console is ~50 modules a pipe needs not."""
    if os.environ.get("TTY_COMPATIBLE") or os.environ.get("FORCE_COLOR") is not None:
        return False
    try:
        return not sys.stdout.isatty()
    except (AttributeError, ValueError):  # no stdout, or a closed one
        return True


def show(table: FittedTable) -> None:
    """Print a table: fitted to a terminal, or whole rows of plain text into a pipe or file."""
    out = None if plainly_piped() else console()
    if out is not None and out.is_terminal:
        out.print(table)
    else:
        import click

        click.echo(table.plain())


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], title: Optional[str] = None) -> None:
    show(make_table(columns, rows, title))


def events_rows(events: List[dict]) -> List[List[str]]:
    return [
        [e.get("lastTimestamp") or e.get("firstTimestamp") or "", e.get("type", ""),
         e.get("reason", ""), str(e.get("count", "")), e.get("message", "")]
        for e in events
    ]
