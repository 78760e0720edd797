"""A bot's rate limit, held across every process that sends to it.

The messages of a run are sent by separate processes — each finishing job, the machine that
stopped the run, ``--advance watch`` — so the limiter's state cannot live in memory: it is a small
file in ``FILE.runs/`` (the times of the messages sent and reserved, per bot), read and written
under an exclusive ``flock`` of its lock file. A sender *reserves* the earliest time its message
may go without breaking any window of the bot (first come, first served), writes it down, lets the
lock go and sleeps until then, so a burst is spread out instead of refused by the vendor.
Standard library only: this runs inside training images.
"""

from __future__ import annotations

import json
import os
from typing import List, Optional, Sequence, Tuple

from job_chain.util.files import write_private

Windows = Sequence[Tuple[float, int]]  # (seconds, at most this many messages in any such span)


def earliest(sent: Sequence[float], windows: Windows, now: float) -> float:
    """The earliest time at or after ``now`` (and after every time in ``sent``: first come, first
    served) at which one more message keeps every window: fewer than ``n`` times in ``(t - w, t]``."""
    start = max([now] + list(sent))
    candidates = sorted({start} | {s + w for s in sent for w, _ in windows if s + w > start})
    for t in candidates:
        if all(sum(1 for s in sent if t - w < s <= t) < n for w, n in windows):
            return t
    return candidates[-1]  # unreachable: past the last candidate every window is empty


def reserve(state: str, lock: str, windows: Windows, now: float, max_wait: float) -> Optional[float]:
    """Reserve a send to the bot whose times are in ``state``: the time it may go (>= ``now``), or
    None when that is more than ``max_wait`` seconds away (nothing is reserved then). When the
    state cannot be kept (a read-only record), ``now``: the limit is best effort, never a reason
    not to send."""
    import fcntl

    if not windows:
        return now
    try:
        os.makedirs(os.path.dirname(state), mode=0o700, exist_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o600)
    except OSError:
        return now
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        horizon = max(w for w, _ in windows)
        sent = [t for t in _times(state) if t > now - horizon]
        at = earliest(sent, windows, now)
        if at - now > max_wait:
            return None
        write_private(state, json.dumps(sorted(sent + [at])))
        return at
    except OSError:
        return now
    finally:
        os.close(fd)  # closing releases the lock


def _times(state: str) -> List[float]:
    try:
        with open(state, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return []
    return [float(t) for t in data if isinstance(t, (int, float)) and not isinstance(t, bool)] \
        if isinstance(data, list) else []
