"""The garbage collector held off while a look builds its objects.

A look at a 5,000-step run makes hundreds of thousands of objects that all stay alive until it
ends (the API's pages, the attempts, the steps' statuses): the cyclic collector's passes over them
find nothing to free and cost a look ~20% of its time. :func:`paused` holds the collector off for
such a piece of work and lets it run again after (what became garbage meanwhile is collected then).
Threads may nest it (the console looks at runs from several): the collector runs again when the
last of them leaves, and only if it ran before the first came in.

A one-off command (``job-chain status``) ends soon after its look: its first passes after the look
(~30 ms of a 5,000-step look, over objects that all live until the process ends) would buy
nothing, so it pauses ``for_good``: what it made is then frozen (``gc.freeze``), never scanned
again. A process that goes on (the console, ``--watch``, a library caller) never pauses for good,
so whatever became garbage in its looks is collected as ever.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False
_for_good = False
_froze = False


@contextmanager
def paused(for_good: bool = False) -> Iterator[None]:
    """No cyclic garbage collection inside the ``with`` block (reference counting frees as ever);
    ``for_good``: the process ends after it (see the module's docstring)."""
    global _depth, _was_enabled, _for_good, _froze
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
            if _froze:  # (a process that went on after all: what was frozen is old again, collectable)
                gc.unfreeze()
                _froze = False
        _depth += 1
        _for_good = _for_good or for_good
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _for_good:
                    gc.freeze()
                    _for_good, _froze = False, True
                if _was_enabled:
                    gc.enable()
