"""Read a run's jobs from the API: by id where the run record names them, else by walking the pool.

A finished job never changes, so its attempt (status, times, exit code, reason) is cached in
the run record. :func:`by_id` asks for the other jobs the record names — what it costs grows
with the run's own jobs, never with what else the pool holds: a listed page is read only while
it pays its way (:data:`PAGE_WORTH` of the wanted jobs per page), the rest are asked for one by
one. :func:`observe` walks the pool newest first, for what no record names (inline runs, a
create whose answer was lost): down to the newest job it already knows and the oldest one still
going, else to the run's first job, else to ``began`` (the API's own createdAt of the run's first
job), else an hour (:data:`CLOCK_SKEW_ALLOWANCE`) before the run's start by this machine's clock.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from job_chain.aihc.engine import as_engine
from job_chain.engine.errors import EngineError
from job_chain.engine.jobs import Event, Job
from job_chain.engine.states import SUCCEEDED
from job_chain.status.types import CLOCK_SKEW_ALLOWANCE, Attempt, attempt_of, explain, restarts_from

PAGE_WORTH = 5  # a listed page must hold this many wanted jobs, else the rest are asked for by id
BY_ID_WIDTH = 8  # get_job calls in flight at once


def walk_floor(began: Optional[float], since: Optional[float]) -> Optional[float]:
    """How far back (epoch seconds, the engine's clock) a walk of the pool for a run's jobs goes when
    nothing else bounds it: just before ``began`` (the engine's createdAt of the run's first job),
    else an hour (:data:`CLOCK_SKEW_ALLOWANCE`) before ``since`` (the run's start by the clock of
    the machine that started it); None: no bound."""
    if began is not None:
        return began - 1.0
    return since - CLOCK_SKEW_ALLOWANCE if since is not None else None


def observe(
    client: Any,
    pool: str,
    run_id: str,
    *,
    cache: Dict[str, Attempt],
    final: Optional[Set[str]] = None,
    first_job_id: Optional[str] = None,
    since: Optional[float] = None,
    began: Optional[float] = None,
    explain_failures: bool = True,
) -> Tuple[List[Attempt], Dict[str, Attempt], Set[str]]:
    """(every attempt of the run, every attempt known now, the ids of those that can no longer change).

    ``cache``: the attempts a previous look knew; ``final``: which of them had finished (and
    been explained). The walk goes down to every attempt that had not, and to the newest one it
    knew: anything older was seen then. ``began`` (the API's clock) bounds a walk without any
    of these; ``since`` (this machine's clock) only with :data:`CLOCK_SKEW_ALLOWANCE`.
    """
    engine = as_engine(client)
    final = set(final or ()) & set(cache)
    pending = set(cache) - final
    newest = max(cache.values(), key=lambda a: (a.started.timestamp() if a.started else 0.0, a.step, a.attempt),
                 default=None)
    reached_newest = newest is None
    seen: Dict[str, Attempt] = {}
    floor = walk_floor(began, since)
    for job in engine.jobs(pool):
        job_id = job.id
        found = attempt_of(job, run_id)
        if found is not None:
            seen[job_id] = found
        if first_job_id and job_id == first_job_id:
            break  # everything older was there before the run
        if job_id in cache:
            pending.discard(job_id)
            reached_newest = reached_newest or job_id == newest.job_id  # type: ignore[union-attr]
            if reached_newest and not pending:
                break  # what is older was seen before, and had finished
        if not cache and not first_job_id and floor is not None and job.created is not None and job.created < floor:
            break
    return _merge(engine, pool, cache, final, seen, explain_failures)


def by_id(client: Any, pool: str, run_id: str, wanted: Set[str], *, cache: Dict[str, Attempt],
          final: Optional[Set[str]] = None, explain_failures: bool = True,
          listed: Optional[Iterator[Job]] = None) -> Tuple[List[Attempt], Dict[str, Attempt], Set[str]]:
    """:func:`observe`'s answer for a run whose record names its jobs (``wanted``: their ids).

    The newest pages of the pool are read while each 50 jobs listed hold :data:`PAGE_WORTH` of the
    jobs still wanted (a run alone in its pool: all of them; more than a page wanted, the engine may
    send several pages at once, ``engine.jobs(pool, expected=…)``); then the rest are asked for by
    id, a few at a time. Either way the cost follows the run's own jobs, not the pool's. A job gone from
    the API (deleted) is left out, as a listing would. ``listed``: the pool's jobs already asked for
    (``engine.jobs(pool, expected=…)``, made while the caller read the record), read instead of
    asking again (closed when not needed).
    """
    engine = as_engine(client)
    final = set(final or ()) & set(cache)
    pending = set(wanted) - final
    seen: Dict[str, Attempt] = {}
    if len(pending) <= PAGE_WORTH and listed is not None:
        getattr(listed, "close", lambda: None)()
    if len(pending) > PAGE_WORTH:
        missing, hits = set(pending), 0
        jobs = listed if listed is not None else engine.jobs(pool, expected=len(pending))
        try:
            for listed_count, job in enumerate(jobs, 1):
                job_id = job.id
                found = attempt_of(job, run_id)
                if found is not None:
                    seen[job_id] = found  # also a job the record does not name (its create's answer was lost)
                if job_id in missing:
                    missing.discard(job_id)
                    hits += 1
                if not missing:
                    break
                if listed_count % engine.page_size == 0:
                    if hits < PAGE_WORTH:
                        break  # this page did not pay its way: ask for the rest by id
                    hits = 0
        finally:
            getattr(jobs, "close", lambda: None)()  # no page is asked for after this
    rest = sorted(pending - set(seen))
    if rest:
        for job_id, job in _get_jobs(engine, pool, rest):
            found = attempt_of(job, run_id) if job is not None else None
            if found is not None:
                seen[job_id] = found
    return _merge(engine, pool, cache, final, seen, explain_failures)


def _get_jobs(engine: Any, pool: str, ids: List[str]) -> List[Tuple[str, Optional[Job]]]:
    """(id, job or None when the engine no longer has it) for each id, :data:`BY_ID_WIDTH` at a time."""

    def one(job_id: str) -> Tuple[str, Optional[Job]]:
        try:
            return job_id, engine.job(pool, job_id)
        except EngineError as exc:
            if exc.status == 404:
                return job_id, None
            raise

    if len(ids) <= 2:
        return [one(job_id) for job_id in ids]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(BY_ID_WIDTH, len(ids))) as workers:
        return list(workers.map(one, ids))


def _merge(engine: Any, pool: str, cache: Dict[str, Attempt], final: Set[str], seen: Dict[str, Attempt],
           explain_failures: bool) -> Tuple[List[Attempt], Dict[str, Attempt], Set[str]]:
    """The cache with what was seen now; failed attempts newly finished explained by their events."""
    merged = dict(cache)
    settled = set(final)
    for job_id, item in seen.items():
        if job_id in final:
            continue  # finished and explained before
        failed = item.terminal and item.status not in SUCCEEDED
        # a look (not a hop) reads a failed job's events, and those of a job the engine may have restarted
        events = _events(engine, pool, job_id) if explain_failures and (failed or item.restarts is None) else None
        if events is not None and item.restarts is None:  # the engine may have restarted it: its events say
            item = restarts_from(item, events)
        if failed and explain_failures:
            if events is not None:
                item = explain(item, events)
                settled.add(job_id)
        elif item.terminal and item.status in SUCCEEDED and item.restarts is not None:
            settled.add(job_id)
        merged[job_id] = item
    attempts = sorted(merged.values(), key=lambda a: (a.step, a.attempt))
    return attempts, merged, settled


def _events(engine: Any, pool: str, job_id: str) -> Optional[List[Event]]:
    try:
        return engine.events(pool, job_id)
    except EngineError:
        return None  # the reason is a nicety; the status is not
