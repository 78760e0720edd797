"""What ``status`` (and so ``resume``, ``stop``, ``wait``) reads of a run: its own jobs, not the pool.

The run record names the run's jobs (``step-<name>-attempt-N.json``, written by whoever created
each one, with the job's id), so a look asks the API for those (:func:`~job_chain.status.observe.by_id`)
and its cost grows with the run, whatever else the pool holds. The pool is walked only where the
record cannot name every job:

- an ``--inline`` round (its jobs advance without the record);
- a start that failed or was interrupted, or an advance that gave up (a create may have been
  stored while its answer was lost);
- a look that would otherwise report a step as never submitted although what it needs ended
  (its job may have been created by a submitter that died before writing the record).

Jobs found that way are written into the record (without a mode: a join asks the API about
them), so the next look needs no walk for them.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Set

from job_chain.aihc.names import is_job_id
from job_chain.engine.deadline import CALL_DEADLINE, submit_with_deadline
from job_chain.errors import JobChainError
from job_chain.record.records import Key, Listed, RunRecords, StartFacts
from job_chain.spec.model import Chain
from job_chain.status.types import NOT_SUBMITTED, Attempt, Outcome, RunStatus


class Cached(NamedTuple):
    """What the previous look at a run knew: every attempt by job id, the ids of those that had
    finished for good, and the recorded submissions of those (by step and attempt): a finished job's
    submission does not change, so a look reads the files of the others only."""

    known: Dict[str, Attempt]
    final: Set[str]
    submissions: Dict[Key, Dict[str, Any]]


def cached_attempts(records: RunRecords, run_id: str) -> Cached:
    """What the previous look knew (:class:`Cached`)."""
    data = records.attempts_cache(run_id)
    found = Cached({}, set(), {})
    for job_id, item in data.items():  # a planted key or entry (markup for a job id) is left out
        attempt = Attempt.from_cache(item) if isinstance(item, dict) and is_job_id(job_id) else None
        if attempt is not None and attempt.job_id == job_id:
            found.known[job_id] = attempt
            if item.get("final") is True:
                found.final.add(job_id)
                entry = item.get("submission")
                if isinstance(entry, dict) and entry.get("jobId") == job_id and isinstance(entry.get("step"), str) \
                        and isinstance(entry.get("attempt"), int):
                    found.submissions[(entry["step"], entry["attempt"])] = entry
    return found


def save_attempts(records: RunRecords, run_id: str, attempts: Dict[str, Attempt], final: Set[str],
                  entries: List[Dict[str, Any]]) -> None:
    """Keep what this look knew (each attempt marked final or not, a final one with its recorded
    submission from ``entries``); not an error where the record is not writable."""
    by_job = {str(e["jobId"]): e for e in entries}
    data = {}
    for job_id, a in sorted(attempts.items()):
        item = a.to_cache()  # (a new dict each time)
        item["final"] = job_id in final
        if job_id in final and job_id in by_job:
            item["submission"] = by_job[job_id]
        data[job_id] = item
    records.keep_attempts_cache(run_id, data)


def must_walk(records: RunRecords, run_id: str, mode: str, ids: Set[str], start: StartFacts,
              listing: Optional[Listed] = None) -> bool:
    """Whether the record may not name every job of the run (see the module's docstring); ``start``:
    what the record says of its start; ``listing``: the run's, when the caller has just made it."""
    return (mode == "inline" or not ids or start.failed is not None
            or bool((listing or records.listed(run_id))["advance-failed"]))


class Looked(NamedTuple):
    """What :func:`run_attempts` found: every attempt, the endpoint asked, and the ids of the jobs that
    can no longer change (finished, their events read): a later look asks the API again for the others."""

    attempts: List[Attempt]
    endpoint: str
    settled: Set[str]


def run_attempts(records: RunRecords, client_for: Callable[[], Any], chain: Chain, run: Any,
                 entries: List[Dict[str, Any]], start: StartFacts, walk: bool = False, patient: bool = False,
                 listing: Optional[Listed] = None, cached: Optional[Cached] = None,
                 listed: Optional[Iterator[Any]] = None) -> Looked:
    """Every attempt of the run, the endpoint asked and the ids of the jobs that can no longer change
    (:class:`Looked`), caching finished attempts in the record.
    ``patient``: through transient API errors, retry the reads for as long as ``run`` retries a
    create (:data:`~job_chain.engine.deadline.CALL_DEADLINE`): a one-off ``status``. A look among
    many (``runs``, a start checking for a live run, the console) answers with what it has.

    ``entries``: the run's recorded submissions (:meth:`RunRecords.submissions`, read once by the
    caller); an attempt only the pool told of is recorded and appended to them. ``start``: what the
    record says of the run's start (read once by the caller). ``listing``: the
    run's, when the caller has just made it (one listing of a 5,000-step run's directory, not three);
    ``cached``: what the previous look knew, when the caller has read it (:func:`cached_attempts`);
    ``listed``: the pool's jobs, asked for ahead by the caller (:func:`~job_chain.status.observe.by_id`
    reads them; a retried look asks again)."""
    from job_chain.status.observe import by_id, observe

    ids = {str(e["jobId"]) for e in entries}
    never_started = start.failed is not None and not entries
    kept = cached if cached is not None else cached_attempts(records, run.run_id)
    cache, final = kept.known, kept.final
    try:
        client = client_for()

        ahead = [listed] if listed is not None else []

        def look() -> Any:
            given = ahead.pop() if ahead else None  # read once: a retried look asks the API again
            if walk or must_walk(records, run.run_id, run.mode, ids, start, listing):
                if given is not None:
                    getattr(given, "close", lambda: None)()
                return observe(client, chain.pool, run.run_id, cache=cache, final=final,
                               first_job_id=entries[0]["jobId"] if entries else None, since=run.started.timestamp())
            return by_id(client, chain.pool, run.run_id, ids, cache=cache, final=final, listed=given)

        # a look only reads: through transient errors it may retry for as long as a create of run does
        attempts, known, settled = submit_with_deadline(look, CALL_DEADLINE) if patient else look()
    except JobChainError:
        if never_started:  # the API may be why it never started: nothing to show, not an error
            return Looked([], run.endpoint, set())
        raise
    if known != cache or settled != final or any(
            str(e["jobId"]) in settled and (e["step"], e["attempt"]) not in kept.submissions for e in entries):
        save_attempts(records, run.run_id, known, settled, entries)
    recorded = {(str(e["step"]), int(e["attempt"])) for e in entries}
    attempts = attempts + reused_attempts(records, run.run_id, listing)
    for item in attempts:  # the record learns what only the pool told
        if item.cached is not None:
            continue
        if (item.step, item.attempt) not in recorded:
            records.record_submission(run.run_id, item.step, item.attempt, item.job_id, "")
            learned = records.submission(run.run_id, item.step, item.attempt)
            if learned is not None:
                entries.append({**learned, "step": item.step, "attempt": item.attempt})
    return Looked(attempts, run.endpoint or getattr(client, "endpoint", ""), settled)


def reused_attempts(records: RunRecords, run_id: str, listing: Optional[Listed] = None) -> List[Attempt]:
    """The run's attempts that reused a cached success (no job ran them): status ``Cached``, where from."""
    from job_chain.engine.states import CACHED
    from job_chain.status.types import utc

    out = []
    for entry in records.cached(run_id, listing):
        origin: Dict[str, Any] = entry["from"] if isinstance(entry.get("from"), dict) else {}
        at = entry.get("at") if isinstance(entry.get("at"), (int, float)) else None
        where = {"run": origin.get("run"), "step": origin.get("display") or origin.get("step"),
                 "attempt": origin.get("attempt"), "chain": origin.get("chain"), "key": entry.get("key"),
                 "savedGpuHours": entry.get("savedGpuHours")}
        out.append(Attempt(str(entry["step"]), int(entry["attempt"]), "", CACHED, utc(at), utc(at), 0,
                           f"reused the success of run {where['run']} (step {where['step']}, attempt "
                           f"{where['attempt']})", cached=where))
    return out


def may_hide_a_job(status: RunStatus) -> bool:
    """A failed outcome with a step that should have started but is not seen: a walk may find its job."""
    return status.outcome is Outcome.FAILED and any(
        s.status == NOT_SUBMITTED and not s.reason and not s.is_handler for s in status.steps)
