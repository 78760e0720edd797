"""The runs of a chain as lists show them (``runs``, the console's runs page, the Python API):
each from its summary, and where that is missing or stale (a run that changed, one copied in by
hand, one still going), from one look at it, which writes its summary for the next reader.

The cost follows what is shown: one listing of ``FILE.runs/``, per run a look at its directory's
time and its summary, and a status only for the runs shown whose summary cannot stand in.
"""

from __future__ import annotations

from typing import List, Optional

from job_chain.errors import JobChainError
from job_chain.record import summary
from job_chain.session.context import RunContext
from job_chain.session.runs import Run, RunSummary


def summaries(ctx: RunContext, *, limit: Optional[int] = None, since: Optional[float] = None) -> List[RunSummary]:
    """The chain's runs, newest first: those started at or after ``since`` (epoch seconds), at most
    ``limit`` of them. A damaged record is listed with why (outcome ``unknown``)."""
    from job_chain.record.records import run_start
    from job_chain.session import look
    from job_chain.status.summary import fields

    out: List[RunSummary] = []
    for item in summary.listing(ctx.records):
        if limit is not None and len(out) >= limit:
            break
        if since is not None and (run_start(item.run, item.run_id) or 0.0) < since:
            break  # newest first: every later one is older
        if item.run is None:
            out.append(RunSummary(item.run_id, None, "unknown", error=ctx.records.damaged_message(item.run_id)))
            continue
        run = Run.from_record(ctx.path, item.run)
        if item.fields is not None:
            out.append(RunSummary.of(item.run_id, run, item.fields))
            continue
        try:
            out.append(RunSummary.of(item.run_id, run, fields(look.status(ctx, run.run_id))))
        except JobChainError as exc:
            out.append(RunSummary(item.run_id, run, "unknown", error=str(exc)))
    return out


_AGO = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(text: str, now: Optional[float] = None) -> float:
    """``--since`` (and the console's time filter) as epoch seconds: an age (``30m``, ``12h``,
    ``7d``, ``2w``) or a UTC date or time (``2026-11-01``, ``2026-11-01T08:00``, with an offset
    when not UTC). :class:`UsageError` says what is accepted."""
    import datetime as _dt
    import re
    import time

    from job_chain.errors import UsageError

    value = text.strip()
    ago = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([mhdw])", value)
    if ago:
        return (time.time() if now is None else now) - float(ago.group(1)) * _AGO[ago.group(2)]
    try:
        moment = _dt.datetime.fromisoformat(value.replace(" ", "T", 1) if len(value) > 10 else value)
    except ValueError:
        raise UsageError(f"--since {text!r} is neither an age (30m, 12h, 7d, 2w) nor a UTC date or time "
                         "(2026-11-01, 2026-11-01T08:00)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.timestamp()
