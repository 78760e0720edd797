"""An AIHC jobs API kept in memory, for tests of logic (the moto pattern).

:class:`MemoryAPI` satisfies :class:`job_chain.aihc.api.JobsAPI`: the advance, the session and the
status read it as they read the local server, in milliseconds and without a process. Nothing runs:
a created job is Running at once, and a test ends it with :meth:`MemoryAPI.finish` (then, where
the real thing would, calls the step's advance itself). It keeps what a test asks about: every
create call with its client token (:attr:`MemoryAPI.creates`), and answers as the local server does
where the library depends on it (``tests/test_memory_api.py`` runs the same calls on both):

- a client token names one request: the same token gives the same job back, however often it is
  sent; with another body or pool it is refused (403 ``IdempotentParameterMismatch``);
- an unknown job is a 404 ``NoSuchJob``; stopping a job is idempotent;
- job views carry AIHC's fields the library reads (``jobId``, ``name``, ``status``, ``labels``,
  ``createdAt``/``runningAt``/``finishedAt`` cut to the second, ``podList`` in the detail), and
  events say how a job ended in AIHC's words (``exited with code N``, ``JobFailed``).

Real HTTP, signatures, processes and the server's own rules stay with the tests on the local server.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional

from job_chain.aihc.errors import AIHCError

TERMINAL = ("Succeeded", "Failed", "Stopped")


def _iso(ts: Optional[float]) -> str:
    """AIHC's time form, cut to the second ("" when unset), as the local server writes it."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts)) if ts else ""


def _digest(body: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass
class Create:
    """One ``create_job`` call as it arrived: ``created`` is False when its token gave an existing job."""

    pool: str
    body: Dict[str, Any]
    client_token: Optional[str]
    job_id: str
    created: bool

    @property
    def labels(self) -> Dict[str, str]:
        return {x["key"]: x["value"] for x in self.body.get("labels") or []}


@dataclass
class MemoryJob:
    id: str
    pool: str
    body: Dict[str, Any]
    token: Optional[str]
    digest: str
    created: float
    status: str = "Running"
    running: Optional[float] = None
    finished: Optional[float] = None
    events: List[Dict[str, Any]] = field(default_factory=list)
    logs: Dict[str, List[str]] = field(default_factory=dict)  # pod name -> its lines

    @property
    def name(self) -> str:
        return str(self.body.get("name") or "")

    @property
    def pods(self) -> List[str]:
        replicas = int((self.body.get("jobSpec") or {}).get("replicas", 1))
        return [f"{self.name}-master-0"] + [f"{self.name}-worker-{i}" for i in range(replicas - 1)]


class MemoryAPI:
    """The training-job calls of :class:`~job_chain.aihc.api.JobsAPI` over a dict, thread-safe.

    ``clock``: the time jobs are created, started and ended at (default ``time.time``).
    """

    endpoint = "memory://aihc"
    api_version = "v1"

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.jobs: Dict[str, MemoryJob] = {}
        self.creates: List[Create] = []
        self._order: List[str] = []  # ids, oldest first
        self._lock = threading.RLock()
        self.list_calls = 0  # pages asked for (list_jobs)

    def __repr__(self) -> str:
        return f"MemoryAPI({len(self.jobs)} jobs)"

    # -- JobsAPI -----------------------------------------------------------------------------
    def create_job(self, pool: str, body: Dict[str, Any], client_token: Optional[str] = None) -> Dict[str, Any]:
        if not isinstance(body, dict) or not body.get("name"):
            raise AIHCError("request body must be a job with a name", status=400, code="InappropriateJSON")
        body = json.loads(json.dumps(body))  # what was sent, never the caller's object
        with self._lock:
            digest = _digest(body)
            job = next((j for j in self.jobs.values() if client_token and j.token == client_token), None)
            if job is not None:
                if job.pool != pool:
                    raise AIHCError(f"clientToken {client_token} was used for job {job.id} in resource pool "
                                    f"{job.pool}; use a new clientToken for a job in {pool}", status=403,
                                    code="IdempotentParameterMismatch")
                if job.digest != digest:
                    raise AIHCError(f"clientToken {client_token} was used for job {job.id} with a different "
                                    "request body; use a new clientToken for a different job", status=403,
                                    code="IdempotentParameterMismatch")
                self.creates.append(Create(pool, body, client_token, job.id, created=False))
            else:
                now = self.clock()
                job = MemoryJob(f"pytorchjob-{uuid.uuid4()}", pool, body, client_token, digest, now, running=now)
                self.jobs[job.id] = job
                self._order.append(job.id)
                self.creates.append(Create(pool, body, client_token, job.id, created=True))
            return {"jobId": job.id, "jobName": job.name}

    def iter_jobs(self, pool: str, *, queue: Optional[str] = None, order_by: Optional[str] = None,
                  order: Optional[str] = None, page_size: int = 100, status: Optional[str] = None,
                  name: Optional[str] = None) -> Iterator[Dict[str, Any]]:
        """The pool's jobs by creation, newest first unless ``order="asc"``."""
        with self._lock:
            ids = [i for i in self._order if self.jobs[i].pool == pool]
            views = [self._view(self.jobs[i]) for i in (ids if order == "asc" else reversed(ids))]
        yield from (v for v in views if (not status or v["status"] == status) and (not name or name in v["name"]))

    def list_jobs(self, pool: str, *, queue: Optional[str] = None, order_by: Optional[str] = None,
                  order: Optional[str] = None, page_no: Optional[int] = None,
                  page_size: Optional[int] = None) -> Dict[str, Any]:
        """One page of :meth:`iter_jobs` in v1's list shape (``pageNo`` from 1, ``pageSize`` default 10)."""
        with self._lock:
            self.list_calls += 1
            every = list(self.iter_jobs(pool, order=order))
        number, size = page_no or 1, page_size or 10
        return {"total": len(every), "jobs": every[(number - 1) * size:number * size], "pageNo": number,
                "pageSize": size}

    def get_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        with self._lock:
            job = self._find(pool, job_id)
            view = self._view(job)
            pods = [{"objectMeta": {"name": pod}, "podStatus": {"podPhase": self._phase(job)}} for pod in job.pods]
            view["podList"] = {"listMeta": {"totalItems": len(pods)}, "pods": pods}
            return view

    def stop_job(self, pool: str, job_id: str) -> Dict[str, Any]:
        with self._lock:
            job = self._find(pool, job_id)
            if job.status not in TERMINAL:
                self._end(job, "Stopped", [("JobStopped", f"PyTorchJob {job.name} is stopped.", "Normal")])
            return {"jobId": job_id}

    def job_events(self, pool: str, job_id: str, *, framework: str = "PyTorchJob",
                   start_time: Optional[str] = None, end_time: Optional[str] = None) -> Dict[str, Any]:
        with self._lock:
            events = list(self._find(pool, job_id).events)
        return {"events": events, "total": len(events)}

    def pod_logs(self, pool: str, job_id: str, pod: str, *, start_time: Optional[int] = None,
                 max_lines: Optional[int] = None, chunk: Optional[int] = None, end_time: Optional[int] = None,
                 keywords: Optional[str] = None, marker: Optional[str] = None) -> Dict[str, Any]:
        """The whole log in one page (the paging itself is tested on the local server)."""
        with self._lock:
            job = self._find(pool, job_id)
            if pod not in job.pods:
                raise AIHCError(f"pod {pod} does not exist in job {job_id}", status=404, code="NoSuchPod")
            lines = list(job.logs.get(pod) or [])
        if keywords:
            lines = [line for line in lines if keywords in line]
        if max_lines:
            lines = lines[-max_lines:]
        return {"jobId": job_id, "podName": pod, "logs": lines, "nextMarker": ""}

    # -- what a test does where the real thing would run a process --------------------------------
    def finish(self, job_id: str, exit_code: int = 0, log: str = "") -> None:
        """End a running job as its pods exiting with ``exit_code`` would (``log``: its master's log)."""
        with self._lock:
            job = self.jobs[job_id]
            assert job.status not in TERMINAL, f"{job_id} already ended {job.status}"
            if log:
                job.logs[job.pods[0]] = log.splitlines(keepends=True)
            pod = job.pods[0]
            events = [("ExitedWithCode", f"Pod: default.{pod} exited with code {exit_code}", "Normal")]
            if exit_code:
                events += [("Error", f"Error pod {pod} container pytorch exitCode: {exit_code} terminated message: ",
                            "Warning"),
                           ("JobFailed", f"PyTorchJob {job.name} is failed because 1 Master replica(s) failed.",
                            "Normal")]
                self._end(job, "Failed", events)
            else:
                self._end(job, "Succeeded", events + [
                    ("JobSucceeded", f"PyTorchJob {job.name} is successfully completed.", "Normal")])

    # -- inside ---------------------------------------------------------------------------------
    def _find(self, pool: str, job_id: str) -> MemoryJob:
        job = self.jobs.get(job_id)
        if job is None or job.pool != pool:
            raise AIHCError(f"job {job_id} does not exist in resource pool {pool}", status=404, code="NoSuchJob")
        return job

    def _end(self, job: MemoryJob, status: str, events: List[Any]) -> None:
        job.status, job.finished = status, self.clock()
        stamp = _iso(job.finished)
        job.events += [{"reason": reason, "message": message, "type": kind, "firstTimestamp": stamp,
                        "lastTimestamp": stamp, "count": 1} for reason, message, kind in events]

    @staticmethod
    def _phase(job: MemoryJob) -> str:
        return {"Stopped": "Failed"}.get(job.status, job.status)

    @staticmethod
    def _view(job: MemoryJob) -> Dict[str, Any]:
        spec = job.body.get("jobSpec") or {}
        return {"jobId": job.id, "name": job.name, "resourcePoolId": job.pool, "status": job.status,
                "labels": [dict(x) for x in job.body.get("labels") or []], "command": spec.get("command", ""),
                "createdAt": _iso(job.created), "runningAt": _iso(job.running), "finishedAt": _iso(job.finished),
                "replicas": spec.get("replicas", 1), "resources": spec.get("resources") or [],
                "envs": spec.get("envs") or [], "priority": job.body.get("priority") or "normal",
                "queue": job.body.get("queue") or "default", "jobFramework": "PyTorchJob"}
