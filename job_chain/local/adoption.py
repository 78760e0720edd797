"""A restarted local server takes over the pods of the one before it (held by the Executor).

Pods outlive a server that is stopped or killed. At start the new server watches those still
alive until they end, settles those that ended meanwhile (from their exit-code file, or as lost),
starts again a pod whose launch a crash cut short unless its process is found, and resumes a
stop's TERM→KILL sequence; a job it cannot take over is failed with an event saying why.
What only the executor does (start, track and finish pods, settle a job) it asks of
:class:`AdoptedPods`.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, List, Optional, Protocol, Tuple

from job_chain.local import store as st
from job_chain.local.lifecycle import Lifecycle
from job_chain.local.pod_process import (
    ADOPTED_POLL,
    LivePod,
    find_pod_process,
    pod_paths,
    process_alive,
    read_rc,
    reason,
)
from job_chain.local.ports import free_port
from job_chain.local.store import Store

log = logging.getLogger("job_chain.local")


class AdoptedPods(Protocol):
    """What adoption asks of the executor, which holds the live processes and their lock."""

    def pod_env(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int,
                port: int) -> Tuple[Dict[str, str], List[Tuple[str, str]]]:
        """(the process environment, the part the API shows) of one replica."""

    def spawn_pod(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int, port: int) -> None:
        """Start one replica of ``job``."""

    def track(self, live: LivePod) -> None:
        """Count ``live`` among the job's live pods (a stop signals it)."""

    def finish_pod(self, job_id: str, name: str, code: Optional[int], lost: bool = False) -> None:
        """Record one replica's end and decide the job's status."""

    def settle_adopted(self, job_id: str) -> None:
        """Decide the job's status from its pods again, and go on stopping a Stopping job."""

    def fail_job(self, job: Dict[str, Any], why: str, message: str) -> None:
        """Mark a job Failed with a Warning event saying why."""


class Adoption:
    """The restart half of the local server: ``pods`` (the executor) tracks and finishes what it
    adopts, ``lifecycle`` takes back the jobs left Scheduled."""

    def __init__(self, store: Store, state_dir: str, pods: AdoptedPods, lifecycle: Lifecycle) -> None:
        self.store = store
        self.state_dir = state_dir
        self.pods = pods
        self.lifecycle = lifecycle

    def adopt(self) -> None:
        """Watch pods of a previous server that still live; settle those that ended meanwhile.

        A job that cannot be adopted (whatever the error) is failed with an event, so one bad
        job never keeps the server from starting.
        """
        for job in self.store.jobs_with_status(st.ACTIVE):
            try:
                if job["status"] == st.SCHEDULED and self.lifecycle.adopt_scheduled(job):
                    continue
                self._adopt_job(job)
            except Exception as exc:  # noqa: BLE001
                log.warning("job %s could not be adopted: %r", job["id"], exc)
                self.pods.fail_job(job, "FailedAdoption",
                                   f"the restarted local server could not take this job over: {reason(exc)}")

    def _adopt_job(self, job: Dict[str, Any]) -> None:
        """Adopt or settle the pods of one Running/Stopping job left by a previous server."""
        pods = self.store.pods(job["id"])
        for pod in pods:
            if pod["finished_at"] is None and pod["status"] == st.PENDING:
                self._recover_launch(job, pod, len(pods))
                continue
            if pod["finished_at"] is not None or pod["status"] != st.RUNNING:
                continue
            _, log_path, rc_path = pod_paths(self.state_dir, job["id"], pod["name"])
            if process_alive(pod["pid"], pod["create_time"]):
                self._watch_adopted(job, pod["name"], pod["pid"], pod["create_time"], log_path)
                continue
            code = read_rc(rc_path)
            if code is None:
                self.pods.finish_pod(job["id"], pod["name"], None, lost=True)
            else:
                self.pods.finish_pod(job["id"], pod["name"], code)
        self.pods.settle_adopted(job["id"])  # a crash may have cut a settle or a stop short
        if job["status"] == st.RUNNING:  # hang detection goes on watching it (it ends when the job does)
            self.lifecycle.watch_hang(job)

    def _watch_adopted(self, job: Dict[str, Any], name: str, pid: int, create_time: float,
                       log_path: str) -> None:
        live = LivePod(job["id"], name, pid, create_time, log_path,
                       kill_requested=job["status"] == st.STOPPING)
        self.pods.track(live)
        self.store.add_event(job["id"], "Adopted", "the restarted local server is watching this pod again",
                             pod=name)
        threading.Thread(target=self._wait_adopted, args=(live,), daemon=True, name=f"adopt-{name}").start()

    def _recover_launch(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int) -> None:
        """A pod the previous server died launching (job Running, pod never recorded as started).

        Its process may have started (then it is found by its exit-code path in its command line
        and adopted, or finished from its exit-code file) or not (then it starts now), so the job
        neither hangs in Running nor runs its command twice.
        """
        job_id, name = job["id"], pod["name"]
        _, log_path, rc_path = pod_paths(self.state_dir, job_id, name)
        found = find_pod_process(rc_path)
        if found is not None:
            pid, create_time = found
            shown = self.pods.pod_env(job, pod, replicas, job["master_port"] or 0)[1]
            self.store.set_pod(job_id, name, status=st.RUNNING, pid=pid, create_time=create_time,
                               started_at=create_time, env=[{"name": k, "value": v} for k, v in shown])
            self._watch_adopted(job, name, pid, create_time, log_path)
            return
        code = read_rc(rc_path)
        if code is not None or job["status"] == st.STOPPING:
            self.pods.finish_pod(job_id, name, 143 if code is None else code)
            return
        self.store.add_event(job_id, "Restarted", "the local server stopped while starting this pod; "
                             "starting it now", pod=name)
        self.pods.spawn_pod(job, pod, replicas, job["master_port"] or free_port())

    def _wait_adopted(self, live: LivePod) -> None:
        while process_alive(live.pid, live.create_time):
            time.sleep(ADOPTED_POLL)
        _, _, rc_path = pod_paths(self.state_dir, live.job_id, live.name)
        code = read_rc(rc_path)
        if code is None:  # killed by a signal: no rc file was written
            code = 143 if live.kill_requested else 137
        self.pods.finish_pod(live.job_id, live.name, code)
