"""AIHC behind the engine seam: the one place that reads AIHC's job JSON for the run library.

Both API styles answer in seed 001's v1 shapes (:mod:`job_chain.aihc.v2` maps v2), and the local
server speaks them too, so one adapter serves AIHC v1, v2 and the local server. It turns
``podList.pods[].objectMeta.name``, ``podStatus.podPhase``, the ``job-chain/*`` labels, AIHC's
times and events into :mod:`job_chain.engine.jobs`' neutral view.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Tuple

from job_chain.engine.errors import EngineError
from job_chain.engine.states import SUCCEEDED

if TYPE_CHECKING:  # the view is imported where a job is read: a hop that only creates one never makes it
    from job_chain.engine.jobs import Event, Job, Pod

PAGE_SIZE = 50  # jobs a page of the pool's list holds (walks stop early: the newest come first)
BULK_PAGE_SIZE = 500  # a page when the caller expects many jobs (AIHC documents no maximum: see PagesAhead)
SAFE_PAGE_SIZE = 100  # what AIHC's own CLI pages by: asked for instead when the service refuses BULK_PAGE_SIZE
BULK_AHEAD = 3  # pages asked at once then: the service answers one while this process reads another
_REPLICA_TYPE = "training.kubeflow.org/replica-type"
_REPLICA_INDEX = "training.kubeflow.org/replica-index"
# patterns as text, compiled on first use (re caches them): a hop imports this module to create a job,
# and reads no pods or events
_POD_SUFFIX = r"-(master|worker)-(\d+)$"
# AIHC's fault tolerance records restarts and hangs in the job's events (its page, kljz3qhnq) without
# publishing the reason words: any reason naming a hang, or a fault-tolerance restart (the local
# server's are HangDetected and FaultToleranceRestart)
_HANG_REASON = r"Hang|Hung|\bhang|\bhung"  # a word, never the "hang" of JobStatusChanged
_RESTART_REASON = r"(?i)fault.?tolerance.*restart|restart.*fault.?tolerance"


def _seconds(text: Any) -> Optional[float]:
    return _seconds_of(text) if isinstance(text, str) else None


@lru_cache(maxsize=65536)  # AIHC's times are to the second: a run's jobs share most of them
def _seconds_of(text: str) -> Optional[float]:
    from job_chain.aihc.timefmt import parse_time

    when = parse_time(text)
    return when.timestamp() if when is not None else None


def labels_of(job: Mapping[str, Any]) -> Dict[str, Any]:
    return {str(x.get("key")): x.get("value") for x in job.get("labels") or [] if isinstance(x, dict)}


def _rank(pod: Mapping[str, Any], position: int) -> int:
    """RANK of a PyTorchJob pod: the master is 0, worker i is i + 1 (by its labels, else its name)."""
    meta = pod.get("objectMeta") or {}
    labels = meta.get("labels") or {}
    kind = str(labels.get(_REPLICA_TYPE) or pod.get("replicaType") or "").lower()
    index = labels.get(_REPLICA_INDEX)
    found = re.search(_POD_SUFFIX, str(meta.get("name") or ""))
    if not kind and found:
        kind, index = found.group(1), found.group(2)
    if index is None and found:
        index = found.group(2)
    try:
        number = int(index) if index is not None else position
    except (TypeError, ValueError):
        number = position
    return 0 if kind == "master" else number + 1 if kind == "worker" else number


_view: Any = None  # job_chain.engine.jobs, imported when a job is first read (a hop that only creates one never does)


def _jobs_view() -> Any:
    global _view
    if _view is None:
        import job_chain.engine.jobs

        _view = job_chain.engine.jobs
    return _view


def pods_of(job: Mapping[str, Any]) -> Tuple[Pod, ...]:
    """The job's pods from its detail answer (``podList``), in the API's order."""
    listed = job.get("podList")
    if not listed:
        return ()  # (a listed job: no pods)
    Pod = (_view or _jobs_view()).Pod
    out = []
    for position, pod in enumerate(listed.get("pods") or []):
        name = (pod.get("objectMeta") or {}).get("name")
        if not name:
            continue
        status = pod.get("podStatus") or {}
        phase = str(status.get("podPhase") or status.get("status") or pod.get("status") or "Unknown")
        out.append(Pod(str(name), _rank(pod, position), phase,
                       _seconds(pod.get("finishedAt") or status.get("finishedAt"))))
    return tuple(out)


def job_of(job: Mapping[str, Any]) -> Job:
    """The neutral view of one AIHC job answer (a listed job has no pods)."""
    view = _view or _jobs_view()  # (once, not an import statement per job: ~1 µs each, 5,000 in a long look)
    LABEL_RUN, LABEL_STEP, LABEL_ATTEMPT = view.LABEL_RUN, view.LABEL_STEP, view.LABEL_ATTEMPT

    run = step = attempt_label = None  # (labels_of's, of the three it reads: the last of each key)
    for x in job.get("labels") or ():
        if isinstance(x, dict):
            key = x.get("key")
            if key == LABEL_RUN:
                run = x
            elif key == LABEL_STEP:
                step = x
            elif key == LABEL_ATTEMPT:
                attempt_label = x
    attempt: Optional[int] = None
    if attempt_label is not None:
        try:
            attempt = int(str(attempt_label.get("value")))
        except ValueError:
            pass
    name = step.get("value") if step is not None else None
    status = str(job.get("status") or "Unknown")
    return view.Job(str(job.get("jobId") or ""), str(job.get("name") or job.get("jobName") or ""), status,
                    _seconds(job.get("createdAt")), _seconds(job.get("runningAt")), _seconds(job.get("finishedAt")),
                    0 if status in SUCCEEDED else None,
                    str(run.get("value")) if run is not None else None,
                    str(name) if isinstance(name, str) and name else None,
                    attempt if run is not None and run.get("value") else None, pods_of(job), restarts_of(job))


def restarts_of(job: Mapping[str, Any]) -> Optional[int]:
    """How many times AIHC's fault tolerance restarted the job: 0 without it (``enableFaultTolerance``),
    else its pods' highest ``restartCount`` (the Go SDK's OpenAPIPod), None when the answer has no pods."""
    if not job.get("enableFaultTolerance"):
        return 0
    counts = [p.get("restartCount") for p in ((job.get("podList") or {}).get("pods")) or [] if isinstance(p, dict)]
    numbers = [c for c in counts if isinstance(c, int) and not isinstance(c, bool)]
    return max(numbers) if numbers else None


def event_of(event: Mapping[str, Any]) -> Event:
    """One AIHC event; a fault-tolerance restart or a hang in the seam's words (:data:`RESTARTED`, :data:`HUNG`)."""
    from job_chain.engine.jobs import HUNG, RESTARTED, Event

    reason = str(event.get("reason") or "")
    if re.search(_HANG_REASON, reason):
        reason = HUNG
    elif re.search(_RESTART_REASON, reason):
        reason = RESTARTED
    return Event(reason, str(event.get("type") or "Normal"), str(event.get("message") or ""),
                 _seconds(event.get("lastTimestamp") or event.get("firstTimestamp") or event.get("time")))


class PagesAhead:
    """The pool's jobs, newest first, for a caller that expects ``expected`` of them (a run's jobs by
    id): pages of :data:`BULK_PAGE_SIZE`, :data:`BULK_AHEAD` asked at once while the expected jobs
    fill them (the service answers one while this process reads another), then one by one to the
    end. The first pages are asked for when it is made, so a caller can read its own files meanwhile.
    :meth:`close` (or reading to the end) sends no more requests; pages asked for and not read are
    left unread.

    AIHC documents no largest page. The first page tells what the service takes: one that answers
    fewer jobs than asked while more remain capped the size, and the jobs are read on at that size
    from the second page; one that refuses the size (a 400) is asked again at
    :data:`SAFE_PAGE_SIZE`. Either way every job is read once, and the pages asked ahead at the
    first size are left unread."""

    def __init__(self, client: Any, pool: str, expected: int) -> None:
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        self._client, self._pool, self._expected = client, pool, expected
        self._workers = ThreadPoolExecutor(max_workers=BULK_AHEAD)
        self._asked: Any = deque()  # of futures: the pages asked for, in order
        self._seen = 0
        self._page: List[Dict[str, Any]] = []
        self._at = 0
        self._last = False
        self._first = True  # the first page not read yet: it says whether the service takes the size
        self._from(BULK_PAGE_SIZE, 1)

    def _from(self, size: int, number: int) -> None:
        """Ask for pages of ``size`` from page ``number`` on (what was asked before is left unread)."""
        self._drop_asked()
        self._size, self._number = size, number  # the size, the next page to ask for
        self._planned = -(-self._expected // size)  # the pages the expected jobs fill
        while len(self._asked) < BULK_AHEAD and (self._number <= self._planned or not self._asked):
            self._ask()

    def _ask(self) -> None:
        self._asked.append(self._workers.submit(self._client.list_jobs, self._pool, order_by="createdAt",
                                                order="desc", page_no=self._number, page_size=self._size))
        self._number += 1

    def __iter__(self) -> PagesAhead:
        return self

    def __next__(self) -> Job:
        while self._at >= len(self._page):
            if self._last or not self._asked:
                self.close()
                raise StopIteration
            try:
                answer = self._asked.popleft().result()
            except EngineError as exc:
                if not (self._first and exc.status == 400 and self._size > SAFE_PAGE_SIZE):
                    self.close()
                    raise
                self._from(SAFE_PAGE_SIZE, 1)  # the service refuses the size: AIHC's CLI's
                continue
            except BaseException:
                self.close()
                raise
            page = list(answer.get("jobs") or [])
            total = int(answer.get("total") or 0)
            if self._first:
                self._first = False
                if 0 < len(page) < self._size and len(page) < total:  # capped: read on at the service's size
                    self._from(len(page), 2)
            self._page, self._at = page, 0
            self._seen += len(page)
            if len(page) < self._size or self._seen >= total:
                self._last = True  # (a page asked beyond it answers nothing new: never read)
            elif self._number <= self._planned or not self._asked:
                self._ask()
        self._at += 1
        return job_of(self._page[self._at - 1])

    def close(self) -> None:
        self._drop_asked()
        self._page, self._at, self._last = [], 0, True
        self._workers.shutdown(wait=False)

    def _drop_asked(self) -> None:
        """Pages asked for and not read are left unread (those not sent yet, never sent)."""
        for waiting in self._asked:
            waiting.cancel()
        self._asked.clear()


class AIHCEngine:
    """The engine seam over an AIHC client (:class:`~job_chain.aihc.api.JobsAPI`: v1, v2, a lazy one)."""

    is_engine = True
    page_size = PAGE_SIZE

    def __init__(self, client: Any) -> None:
        self.client = client

    def __repr__(self) -> str:
        return f"AIHCEngine({self.client!r})"

    @property
    def endpoint(self) -> str:
        return str(getattr(self.client, "endpoint", ""))

    def create(self, pool: str, body: Dict[str, Any], key: str) -> Tuple[str, str]:
        answer = self.client.create_job(pool, body, client_token=key)
        return str(answer.get("jobId") or ""), str(answer.get("jobName") or body.get("name") or "")

    def job(self, pool: str, job_id: str) -> Job:
        return job_of(self.client.get_job(pool, job_id))

    def jobs(self, pool: str, expected: int = 0) -> Iterator[Job]:
        if expected > PAGE_SIZE:
            return PagesAhead(self.client, pool, expected)  # asks for its first pages at once
        return self._walk(pool)

    def _walk(self, pool: str) -> Iterator[Job]:
        for job in self.client.iter_jobs(pool, order_by="createdAt", order="desc", page_size=PAGE_SIZE):
            yield job_of(job)

    def stop(self, pool: str, job_id: str) -> None:
        self.client.stop_job(pool, job_id)

    def events(self, pool: str, job_id: str) -> List[Event]:
        return [event_of(e) for e in self.client.job_events(pool, job_id).get("events") or [] if isinstance(e, dict)]

    def log_page(self, pool: str, job_id: str, pod: str, *, max_lines: Optional[int] = None,
                 marker: Optional[str] = None, **params: Any) -> Tuple[List[str], Optional[str]]:
        answer = self.client.pod_logs(pool, job_id, pod, max_lines=max_lines, marker=marker, **params)
        return [str(x) for x in answer.get("logs") or []], (answer.get("nextMarker") or None)


def as_engine(client: Any) -> Any:
    """``client`` as an engine: an engine as it is, an AIHC client (or a test's stand-in for one)
    behind :class:`AIHCEngine`. Every library entry point that takes a client calls this."""
    if client is None or getattr(type(client), "is_engine", False):  # never a lazy client's own getattr
        return client
    return AIHCEngine(client)
