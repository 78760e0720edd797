"""Presentation helpers for the console's templates: colours, durations, the timeline's geometry
and JSON shown line by line with the problems that point into it (redaction: :mod:`job_chain.util.redaction`).

Nothing here decides anything about a run: it only shapes what ChainSession answered.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from job_chain.aihc.keys import key_path
from job_chain.engine.jobs import LABEL_RUN
from job_chain.engine.states import FAILED, STOPPED, SUCCEEDED
from job_chain.status.summary import run_span
from job_chain.status.types import NOT_SUBMITTED, SKIPPED, RunStatus, StepStatus

LABEL_PREFIX = LABEL_RUN.split("/")[0] + "/"  # job-chain's own labels: job-chain/run, /step, /attempt


def tone(status: str) -> str:
    """The CSS class of a job status (or a run outcome)."""
    if status in SUCCEEDED or status == "succeeded":
        return "ok"
    if status in FAILED or status == "failed":
        return "fail"
    if status in STOPPED or status == "stopped":
        return "stop"
    if status in (NOT_SUBMITTED, SKIPPED):
        return "none"
    if status in ("Running", "running"):
        return "run"
    return "wait"  # Pending, Queueing, Creating, ...


def own_labels(labels: Dict[str, Any]) -> Dict[str, Any]:
    """A job's labels without AIHC's own (``aijob.cce.baidubce.com/…``) and job-chain's (the run
    and step have their own column): what the user put on the job."""
    return {k: v for k, v in labels.items() if not str(k).startswith(LABEL_PREFIX) and ".baidubce.com/" not in str(k)}


def duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return ""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def when(moment: Optional[_dt.datetime]) -> str:
    """Date and time in UTC, to the second."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


def run_duration(status: RunStatus) -> Optional[float]:
    start, end = run_span(status)
    return None if start is None or end is None else end - start


@dataclass
class Bar:
    x: float
    width: float
    tone: str
    label: str


@dataclass
class Row:
    step: StepStatus
    y: float
    bars: List[Bar] = field(default_factory=list)
    label: str = ""  # "3 pretrain-team-llama-9b-convert-v4"; cut in its middle when it cannot fit


@dataclass
class Timeline:
    rows: List[Row]
    width: int
    height: int
    row_height: int
    label_width: int
    ticks: List[Tuple[float, str]]


def _offset_label(offset: float, span: float) -> str:
    """A tick's distance from the run's start: exact for short runs (a quarter of 1 s is +0.25s,
    not a rounded +0.2s), as a duration for long ones."""
    if span >= 20:
        return "+" + duration(offset)
    return "+" + f"{offset:.2f}".rstrip("0").rstrip(".") + "s"


def timeline(status: RunStatus, width: int = 1180, now: Optional[float] = None) -> Timeline:
    """Each step a row, each attempt a bar from its start to its end (or now): where the time went."""
    start, end = run_span(status, now)
    names = [f"{step.index} {step.label}" for step in status.steps]
    most = 48  # characters a row label shows (320 px); a longer one keeps its start and its end
    label_width = int(min(max([170] + [len(n) * 6.6 + 16 for n in names]), most * 6.6 + 16))
    row_height = 18 if len(status.steps) <= 40 else 8
    span = max(1.0, (end or 0) - (start or 0))
    scale = (width - label_width - 10) / span
    rows = []
    for i, step in enumerate(status.steps):
        row = Row(step, 4 + i * row_height, label=_middle_cut(names[i], most))
        for attempt in step.attempts:
            if attempt.started is None or start is None:
                continue
            a0 = attempt.started.timestamp()
            a1 = attempt.finished.timestamp() if attempt.finished else (time.time() if now is None else now)
            row.bars.append(Bar(label_width + (a0 - start) * scale, max(2.0, (a1 - a0) * scale), tone(attempt.status),
                                f"step {step.index} attempt {attempt.attempt}: {attempt.status}, "
                                f"{duration(a1 - a0)}"))
        rows.append(row)
    ticks = []
    if start is not None:
        for k in range(5):
            offset = k * span / 4
            label = _offset_label(offset, span) if k else \
                _dt.datetime.fromtimestamp(start, _dt.timezone.utc).strftime("%m-%d %H:%M:%S")
            ticks.append((label_width + k * (width - label_width - 10) / 4, label))
    return Timeline(rows, width, 4 + len(status.steps) * row_height + 18, row_height, label_width, ticks)


def _middle_cut(text: str, most: int) -> str:
    """``text`` when it fits in ``most`` characters, else its start and end around "…": the end
    is where long step names differ (…-convert-v4, …-preprocess-v4, …-train-v4)."""
    if len(text) <= most:
        return text
    keep = most - 1
    return text[:keep // 2] + "…" + text[len(text) - (keep - keep // 2):]


def log_download(records: Iterator[str], secrets: Iterable[str]) -> Iterator[bytes]:
    """A log's records as the download's pieces, secrets redacted. The first page is read now, so
    a log that cannot be read at all is an error answer; one that cannot be read to its end ends
    with a line saying so (the answer has started: its status can no longer change)."""
    from job_chain.errors import JobChainError
    from job_chain.util.redaction import redact

    known = list(secrets)
    first = next(records, None)

    def pieces() -> Iterator[bytes]:
        if first is not None:
            yield redact(first, known).encode("utf-8")
        try:
            for record in records:
                yield redact(record, known).encode("utf-8")
        except JobChainError as exc:
            yield f"\n[job-chain: the log is cut here: {exc}]\n".encode()

    return pieces()


# -- JSON with problems next to their path ---------------------------------------------------------
@dataclass
class Line:
    indent: int
    text: str
    path: str
    problems: List[str] = field(default_factory=list)


def split_problem(problem: str) -> Tuple[str, str]:
    """``jobs[0].name: required`` -> (``jobs[0].name``, ``required``); brackets may hold ': '."""
    depth = 0
    quote = ""
    for i, ch in enumerate(problem):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"" and depth:
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == ":" and depth == 0 and problem[i + 1:i + 2] == " ":
            return problem[:i], problem[i + 2:]
    return "", problem


def json_lines(data: Any) -> List[Line]:
    """``data`` pretty-printed, each line knowing the JSON path of the value it shows."""
    out: List[Line] = []

    def emit(value: Any, path: str, indent: int, prefix: str, comma: str) -> None:
        if isinstance(value, dict) and value:
            out.append(Line(indent, prefix + "{", path))
            items = list(value.items())
            for n, (k, v) in enumerate(items):
                emit(v, key_path(path, str(k)), indent + 1, json.dumps(str(k)) + ": ",
                     "," if n < len(items) - 1 else "")
            out.append(Line(indent, "}" + comma, path))
        elif isinstance(value, list) and value:
            out.append(Line(indent, prefix + "[", path))
            for n, v in enumerate(value):
                emit(v, f"{path}[{n}]", indent + 1, "", "," if n < len(value) - 1 else "")
            out.append(Line(indent, "]" + comma, path))
        else:
            out.append(Line(indent, prefix + json.dumps(value, ensure_ascii=False) + comma, path))

    emit(data, "", 0, "", "")
    return out


def annotate(lines: List[Line], problems: List[str]) -> List[str]:
    """Attach each problem to the line of its path (or of the nearest parent shown); the rest are returned."""
    first: Dict[str, Line] = {}
    for line in lines:
        first.setdefault(line.path, line)
    loose = []
    for problem in problems:
        path, _ = split_problem(problem)
        probe = path
        while path and probe and probe not in first:
            shorter = re.sub(r"(\[[^\[\]]*\]|\.[^.\[\]]*)$", "", probe)
            probe = "" if shorter == probe else shorter  # a top-level key: the whole object's line
        target = first.get(probe) if path else None
        if target is None:
            loose.append(problem)
        else:
            target.problems.append(problem)
    return loose
