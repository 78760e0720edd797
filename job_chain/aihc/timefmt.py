"""AIHC's two time formats, parsed into aware datetimes."""

from __future__ import annotations

import datetime as _dt
import time
from typing import Any, Optional

from job_chain.util.durations import seconds_of


def parse_time(text: Optional[str]) -> Optional[_dt.datetime]:
    """Parse AIHC's ``2024-07-16T08:33:43Z`` (and event ``2024-07-15 16:52:50 +0000 UTC``; a time
    without a zone is UTC, as AIHC's are). What the clients read and the local server takes."""
    if not text:
        return None
    if text.endswith("Z") and "T" in text:  # the common case, without strptime's slow first call
        try:
            return _dt.datetime.fromisoformat(text[:-1]).replace(tzinfo=_dt.timezone.utc)
        except ValueError:
            pass
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d %H:%M:%S +0000 UTC", "%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%d %H:%M:%S"):
        try:
            return _dt.datetime.strptime(text, fmt).replace(tzinfo=_dt.timezone.utc)
        except ValueError:
            continue
    return None


# The metrics API's times (DescribeJobMetrics, GET .../metrics): the pages show ISO 8601 instants
# and a ``timeStep`` like "5m" (default 5 minutes); unix seconds are taken too.
METRIC_STEP_DEFAULT = 300
_MAX_STEP = 366 * 86400
_MAX_UNIX = 253402300799  # 9999-12-31T23:59:59Z: later is a mistake (and overflows datetime)


def metric_instant(text: Any) -> int:
    """Unix seconds from ``1736950000`` or ISO 8601 (``2026-01-15T14:00:00Z``, ``…+08:00``, a
    fraction; without a zone it is UTC, as the pages' times are). ValueError says what is taken."""
    value = str(text).strip()
    if value.isdigit() and len(value) <= 12:
        number = int(value)
    else:
        iso = value[:-1] + "+00:00" if value[-1:] in ("Z", "z") else value
        try:
            when = _dt.datetime.fromisoformat(iso)
        except ValueError:
            raise ValueError(f"must be unix seconds or an ISO 8601 time like 2026-01-15T14:00:00Z, "
                             f"got {value[:40]!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.timezone.utc)
        number = int(when.timestamp())
    if not 0 <= number <= _MAX_UNIX:
        raise ValueError(f"must be a time between 1970 and 9999, got {value[:40]!r}")
    return number


def metric_step(text: Any) -> int:
    """Seconds from a ``timeStep`` like ``5m``, ``30s``, ``1h`` (or bare seconds, ``300``; read as
    every duration is, :func:`job_chain.util.durations.seconds_of`), whole, more than 0 and at most
    366 days. ValueError says what is taken."""
    value = str(text).strip().lower()
    seconds = float(value) if value.isdigit() and len(value) <= 12 else seconds_of(value)
    if seconds is None or seconds != int(seconds):
        raise ValueError(f"must be a duration like 5m, 30s or 1h (or whole seconds), got {str(text)[:40]!r}")
    if not 0 < seconds <= _MAX_STEP:
        raise ValueError(f"must be more than 0 and at most 366 days, got {str(text)[:40]!r}")
    return int(seconds)


def step_text(seconds: int) -> str:
    """``300`` → ``5m``, ``7200`` → ``2h``, ``45`` → ``45s``: a ``timeStep`` as the pages write it."""
    for suffix, unit in (("h", 3600), ("m", 60)):
        if seconds % unit == 0:
            return f"{seconds // unit}{suffix}"
    return f"{seconds}s"


def iso_utc(unix: float) -> str:
    """Unix seconds as AIHC writes a time, ``2026-01-15T14:00:00Z`` (a fraction dropped)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(unix))
