"""A restarted local server takes over the pods of the one before it (part of the Executor).

Pods outlive a server that is stopped or killed. At start the new server watches those still
alive until they end, settles those that ended meanwhile (from their exit-code file, or as lost),
starts again a pod whose launch a crash cut short unless its process is found, and resumes a
stop's TERM→KILL sequence; a job it cannot take over is failed with an event saying why.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Dict, Tuple

from job_chain.local import store as st
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


class Adoption:
    """The restart half of :class:`~job_chain.local.executor.Executor`, which provides the state
    below and ``_finish_pod``, ``_settle``, ``_terminate_job``, ``_fail_job``, ``_pod_env``,
    ``_spawn_pod``."""

    store: Store
    state_dir: str
    stop_grace: float
    _exit_lock: threading.Lock
    _live: Dict[Tuple[str, str], LivePod]

    def adopt(self) -> None:
        """Watch pods of a previous server that still live; settle those that ended meanwhile.

        A job that cannot be adopted (whatever the error) is failed with an event, so one bad
        job never keeps the server from starting.
        """
        for job in self.store.jobs_with_status(st.ACTIVE):
            try:
                if job["status"] == st.SCHEDULED and self._adopt_scheduled(job):  # type: ignore[attr-defined]
                    continue
                self._adopt_job(job)
            except Exception as exc:  # noqa: BLE001
                log.warning("job %s could not be adopted: %r", job["id"], exc)
                self._fail_job(job, "FailedAdoption",
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
                self._finish_pod(job["id"], pod["name"], None, lost=True)
            else:
                self._finish_pod(job["id"], pod["name"], code)
        with self._exit_lock:  # a crash may have cut a previous settle short
            self._settle(job["id"], time.time())
            latest = self.store.get_job(job["id"])
            if latest and latest["status"] == st.STOPPING:  # resume the TERM→KILL sequence
                self._terminate_job(job["id"], self.stop_grace)

    def _watch_adopted(self, job: Dict[str, Any], name: str, pid: int, create_time: float,
                       log_path: str) -> None:
        live = LivePod(job["id"], name, pid, create_time, log_path,
                       kill_requested=job["status"] == st.STOPPING)
        with self._exit_lock:
            self._live[(job["id"], name)] = live
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
            shown = self._pod_env(job, pod, replicas, job["master_port"] or 0)[1]
            self.store.set_pod(job_id, name, status=st.RUNNING, pid=pid, create_time=create_time,
                               started_at=create_time, env=[{"name": k, "value": v} for k, v in shown])
            self._watch_adopted(job, name, pid, create_time, log_path)
            return
        code = read_rc(rc_path)
        if code is not None or job["status"] == st.STOPPING:
            self._finish_pod(job_id, name, 143 if code is None else code)
            return
        self.store.add_event(job_id, "Restarted", "the local server stopped while starting this pod; "
                             "starting it now", pod=name)
        self._spawn_pod(job, pod, replicas, job["master_port"] or free_port())

    def _wait_adopted(self, live: LivePod) -> None:
        while process_alive(live.pid, live.create_time):
            time.sleep(ADOPTED_POLL)
        _, _, rc_path = pod_paths(self.state_dir, live.job_id, live.name)
        code = read_rc(rc_path)
        if code is None:  # killed by a signal: no rc file was written
            code = 143 if live.kill_requested else 137
        self._finish_pod(live.job_id, live.name, code)
