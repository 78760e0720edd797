"""The garbage collector held off while a look builds its objects.

A look at a 5,000-step run makes hundreds of thousands of objects that all stay alive until it
ends (the API's pages, the attempts, the steps' statuses): the cyclic collector's passes over them
find nothing to free and cost a look ~20% of its time. :func:`paused` holds the collector off for
such a piece of work and lets it run again after (what became garbage meanwhile is collected then).
Threads may nest it (the console looks at runs from several): the collector runs again when the
last of them leaves, and only if it ran before the first came in.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic garbage collection inside the ``with`` block (reference counting frees as ever)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
