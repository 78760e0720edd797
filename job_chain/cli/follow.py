"""Printing a pod's log, whole or following it, page by page in bounded memory.

The whole log (or its last N lines) is read with :func:`job_chain.engine.logs.log_records`,
which follows DescribeJobLogs' ``nextMarker``; nothing is held but one page and a few lines.
Following polls for the lines written since the previous poll (``startTime`` minus
:data:`FOLLOW_OVERLAP` seconds; AIHC and the local server both take it) and prints what follows
the last lines already printed (:class:`Resume`), so a huge log is never downloaded again each
second. When an answer does not reach back to them, the last lines are asked for instead; if even
those do not, a line on stderr says lines may be missing there.
"""

from __future__ import annotations

import functools
import sys
import time
from collections import deque
from typing import Any, Callable, Deque, Iterable, Iterator, List, Optional, TypeVar

import click

FOLLOW_OVERLAP = 3  # seconds asked for again on each poll (clock skew, the server's time index)
FOLLOW_ANCHOR = 20  # lines printed last, found again in the next answer to skip what was shown
FOLLOW_CATCH_UP = 200  # lines more than the answer asked for when it does not reach back to them


class Resume:
    """Finds, in a stream of lines that re-reads some already printed, where the new ones begin.

    The first run of ``shown`` in the stream counts (so a repeated line is printed again rather
    than lost); a stream that begins inside ``shown`` is matched by its start. Holds at most
    ``len(shown)`` lines.
    """

    def __init__(self, shown: List[str]) -> None:
        self.shown = shown
        self.found = not shown
        self.head: List[str] = []
        self.recent: Deque[str] = deque(maxlen=max(1, len(shown)))
        self.count = 0

    def _prefix(self, upto: int) -> int:
        for k in range(min(upto, len(self.head)), 0, -1):
            if self.head[:k] == self.shown[-k:]:
                return k
        return 0

    def feed(self, line: str) -> List[str]:
        """The lines to print now that ``line`` came."""
        if self.found:
            return [line]
        self.count += 1
        self.recent.append(line)
        if len(self.head) < len(self.shown):
            self.head.append(line)
        if list(self.recent) == self.shown:
            self.found = True
            return []
        if self.count == len(self.shown):  # the stream's start is known: does it begin inside shown?
            k = self._prefix(len(self.shown) - 1)
            if k:
                self.found = True
                return self.head[k:]
        return []

    def finish(self) -> Optional[List[str]]:
        """The lines still owed at the stream's end; None if it never reached the shown lines."""
        if self.found or self.count == 0:
            return []
        if self.count < len(self.shown):
            k = self._prefix(len(self.head))
            if k:
                return self.head[k:]
        return None


def _complete(lines: Iterable[str], done: bool) -> Iterator[str]:
    """``lines`` without an unfinished last one while the job runs (it is printed once it ends)."""
    last: Optional[str] = None
    for line in lines:
        if last is not None:
            yield last
        last = line
    if last is not None and (done or last.endswith("\n")):
        yield last


F = TypeVar("F", bound=Callable[..., Any])


def detach_on_ctrl_c(what: str) -> Callable[[F], F]:
    """A ``--follow`` command that Ctrl-C leaves: it says "detached" and what goes on (``what``), as
    ``run --follow`` and ``status --watch`` do, never "aborted" (the job or run was not); exit 130."""
    def wrap(command: F) -> F:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return command(*args, **kwargs)
            except KeyboardInterrupt:
                if not kwargs.get("follow"):
                    raise
                click.echo(f"\ndetached: {what}; only this view of its log stopped", err=True)
                sys.exit(130)
        return wrapper  # type: ignore[return-value]
    return wrap


def follow_logs(client: Any, pool: str, job_id: str, pod: str, tail: Optional[int],
                follow: bool, interval: float = 1.0) -> None:
    """Print a pod's whole log (or its last ``tail`` lines), then, with ``follow``, new lines
    until the job ends."""
    from job_chain.aihc.engine import as_engine
    from job_chain.engine.logs import lines_of, log_records
    from job_chain.engine.states import is_terminal
    from job_chain.util.safe_text import for_stream  # a log's control sequences are shown, not obeyed

    engine = as_engine(client)
    shown: Deque[str] = deque(maxlen=FOLLOW_ANCHOR)

    def emit(lines: Iterable[str]) -> None:
        for line in lines:
            click.echo(for_stream(line), nl=False)
            shown.append(line)

    def stream(done: bool, **params: Any) -> Iterator[str]:
        return _complete(lines_of(log_records(engine, pool, job_id, pod, **params)), done)

    if tail is None and not follow:  # the whole log as it comes, record by record
        for record in log_records(engine, pool, job_id, pod):
            click.echo(for_stream(record), nl=False)
        return
    if tail is None:
        emit(stream(False))
    elif tail:
        emit(deque(stream(not follow, max_lines=tail), maxlen=tail))  # at most tail lines held
    since = time.time()
    while follow:
        done = is_terminal(engine.job(pool, job_id).status)
        asked = time.time()
        resume = Resume(list(shown))
        for line in stream(done, start_time=max(0, int(since - FOLLOW_OVERLAP))):
            emit(resume.feed(line))
        rest = resume.finish()
        if rest is None:  # the answer does not reach back to what was printed: ask for the last lines
            more = resume.count + len(shown) + FOLLOW_CATCH_UP
            resume = Resume(list(shown))
            for line in stream(done, max_lines=more):
                emit(resume.feed(line))
            rest = resume.finish()
        if rest is None:
            click.echo(f"# job-chain: the log of {pod} grew faster than it could be followed; lines may be "
                       f"missing here (job-chain logs without --follow prints it whole)", err=True)
            rest = list(stream(done, max_lines=FOLLOW_CATCH_UP))
        emit(rest)
        since = asked
        if done:
            return
        time.sleep(interval)
