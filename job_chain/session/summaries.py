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


def listed(ctx: RunContext, *, since: Optional[float] = None) -> List[summary.Listed]:
    """Every run of the chain as the listing found it (newest first; those started at or after
    ``since``): its ``run.json`` and, where its summary stands in, what that says. Nothing is looked
    at: a page shows some of these and works out (:func:`summary_of`) only those."""
    from job_chain.record.records import run_start

    found = summary.listing(ctx.records)
    if since is not None:
        found = [item for item in found if (run_start(item.run, item.run_id) or 0.0) >= since]
    return found


def summary_of(ctx: RunContext, item: summary.Listed) -> RunSummary:
    """One listed run as lists show it: from its summary, else from one look (which writes it)."""
    from job_chain.session import look
    from job_chain.status.summary import fields

    if item.run is None:
        return RunSummary(item.run_id, None, "unknown", error=ctx.records.damaged_message(item.run_id))
    run = Run.from_record(ctx.path, item.run)
    if item.fields is not None:
        return RunSummary.of(item.run_id, run, item.fields)
    try:
        return RunSummary.of(item.run_id, run, fields(look.status(ctx, run.run_id)))
    except JobChainError as exc:
        return RunSummary(item.run_id, run, "unknown", error=str(exc))


def summaries(ctx: RunContext, *, limit: Optional[int] = None, since: Optional[float] = None) -> List[RunSummary]:
    """The chain's runs, newest first: those started at or after ``since`` (epoch seconds), at most
    ``limit`` of them. A damaged record is listed with why (outcome ``unknown``)."""
    found = listed(ctx, since=since)
    return [summary_of(ctx, item) for item in (found if limit is None else found[:limit])]


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
