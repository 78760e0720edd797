"""A duration as people write it: ``"6h"``, ``"30m"``, ``"1h30m"``, ``"90s"``, ``"2d"`` or a number of
seconds. The one reading of a duration; each caller keeps its own bounds (a step's ``timeout``, the
metrics API's ``timeStep``, the local server's ``--hang-minute``, ``local sts --duration``)."""

from __future__ import annotations

import re
from typing import Any, Optional

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)([smhd]))+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds_of(value: Any) -> Optional[float]:
    """The seconds ``value`` says (a number as it is, a text with units), or None when it is no duration
    (a bool, another type, another text). No bounds: 0, huge and NaN numbers are returned as they are."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str) or not _DURATION.fullmatch(value.strip()):
        return None
    return sum(float(n) * UNITS[u] for n, u in _PART.findall(value.strip()))
