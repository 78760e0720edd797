"""A pod's whole log, page after page, in bounded memory, through the engine seam.

Engines answer a log in pages (:meth:`~job_chain.engine.api.Engine.log_page`; AIHC's
DescribeJobLogs: "first call without marker; while nextMarker is not empty, send it back as
marker"; the local server does the same with at most 4 MiB of log per page). Every reader of a
whole log (``job-chain logs``, ``jobs logs``, the web console's download, ``ChainSession.log``)
goes through :func:`log_records`, so a log of any size arrives whole, holding one page at a time,
and a log that cannot be read to its end says so (:class:`LogIncomplete`) instead of ending early
without a word.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Optional

from job_chain.engine.errors import EngineError

MAX_PAGES = 1_000_000  # 4 TiB of log at 4 MiB a page: a server that never stops paging is stuck


class LogIncomplete(EngineError):
    """The rest of a log could not be read (the pages before were delivered)."""


def log_records(engine: Any, pool: str, job_id: str, pod: str, **params: Any) -> Iterator[str]:
    """The records of a pod's log (``params``: ``max_lines``, ``start_time``, ``chunk``, …) across
    every page. Raises :class:`LogIncomplete` when a later page fails, naming what was missed."""
    marker: Optional[str] = None
    for number in range(MAX_PAGES):
        try:
            records, following = engine.log_page(pool, job_id, pod, marker=marker, **params)
        except EngineError as exc:
            if marker is None:
                raise
            raise LogIncomplete(f"the log of pod {pod} stops here: page {number + 1} could not be read "
                                f"({exc.message}); what follows was not shown", status=exc.status,
                                code=exc.code, request_id=exc.request_id) from None
        yield from records
        if not following:
            return
        if following == marker:
            raise LogIncomplete(f"the log of pod {pod} stops here: the server handed back the same page "
                                "marker twice; what follows was not shown")
        marker = following
    raise LogIncomplete(f"the log of pod {pod} stops here: more than {MAX_PAGES} pages")


def lines_of(records: Iterable[str]) -> Iterator[str]:
    """Whole lines (each with its ``\\n``; the last may lack one) from records that may split a
    line anywhere, a long line over several records or pages."""
    partial: List[str] = []
    for record in records:
        parts = record.split("\n")
        for part in parts[:-1]:
            partial.append(part + "\n")
            yield "".join(partial)
            partial = []
        if parts[-1]:
            partial.append(parts[-1])
    if partial:
        yield "".join(partial)
