"""Query parameters as the local server reads them: whole numbers within bounds, and times.

A parameter that is not what its API takes is a 400 naming it, never a 500 or a silent default.
"""

from __future__ import annotations

from typing import Optional, Tuple

from job_chain.aihc.timefmt import METRIC_STEP_DEFAULT, metric_instant, metric_step
from job_chain.aihc.timefmt import parse_time as aihc_time
from job_chain.local.errors import BadRequest
from job_chain.util.jsonfile import describe

MAX_QUERY_INT = 2**53  # larger numbers in a query are mistakes (and overflow SQLite and floats)
STS_DEFAULT_SECONDS = 43200  # 12 h when durationSeconds is not given (the local server's default)
STS_MAX_SECONDS = 129600  # 36 h: the local server's bound on temporary credentials (and local sts --duration's)


def parse_int(name: str, value: Optional[str], default: Optional[int] = None,
              minimum: Optional[int] = None, maximum: Optional[int] = None) -> Optional[int]:
    """A query parameter as an int within bounds, or a 400 naming the parameter."""
    if value is None or value == "":
        return default
    text = value.strip()
    if not text.lstrip("-").isdigit() or len(text) > 20:
        raise BadRequest(f"{name} must be a whole number, got {describe(value, 40)}")
    number = int(text)
    if minimum is not None and number < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {number}")
    limit = MAX_QUERY_INT if maximum is None else maximum
    if number > limit:
        raise BadRequest(f"{name} must be at most {limit}, got {number}")
    return number


def parse_time(name: str, value: Optional[str]) -> Optional[float]:
    """Event time filters: unix seconds, or a time as AIHC writes them (``2024-07-15 16:52:50 +0000 UTC``,
    ``…T…Z``: :func:`job_chain.aihc.timefmt.parse_time`)."""
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except ValueError:
        pass
    else:
        if not 0 <= number <= MAX_QUERY_INT:  # also NaN and inf
            raise BadRequest(f"{name} must be unix seconds between 0 and {MAX_QUERY_INT}, "
                             f"got {describe(value, 40)}")
        return number
    when = aihc_time(value)
    if when is not None:
        return when.timestamp()
    raise BadRequest(f"{name} must be unix seconds or like 2024-07-15T16:52:50Z, got {describe(value, 40)}")


def parse_metric_window(start: Optional[str], end: Optional[str], step: Optional[str],
                        code: str = "") -> Tuple[Optional[int], Optional[int], int]:
    """The metrics API's ``startTime``, ``endTime`` (unix seconds or ISO 8601) and ``timeStep``
    (``5m``, ``30s``, ``1h`` or seconds; default 5 minutes, as the pages say); a bad one is a 400
    naming it."""
    times = []
    for name, value in (("startTime", start), ("endTime", end)):
        try:
            times.append(None if value is None or value == "" else metric_instant(value))
        except ValueError as exc:
            raise BadRequest(f"{name} {exc}", code=code) from None
    try:
        seconds = METRIC_STEP_DEFAULT if step is None or step == "" else metric_step(step)
    except ValueError as exc:
        raise BadRequest(f"timeStep {exc}", code=code) from None
    if times[0] is not None and times[1] is not None and times[1] < times[0]:
        raise BadRequest(f"endTime ({end}) is before startTime ({start})", code=code)
    return times[0], times[1], seconds
