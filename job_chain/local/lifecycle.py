"""A local job's way from queued to running, and back after a failure: Scheduled and fault tolerance.

AIHC reports a job ``Scheduled`` between being given its place and its pods running (Baidu's
DescribeJobs example answer shows one; the Go SDK's job result has ``scheduledAt`` and
``runningAt``), and image pulls make that take a while. Locally a job passes ``Pending`` (queued)
→ ``Scheduled`` (its place taken, counted against its queue and pool) → ``Running``, and stays
Scheduled for ``--schedule-delay`` seconds (default 0, so tests stay fast), so code tuned here is
not tuned to an instant cluster.

``faultTolerance``: AIHC restarts a failed job (its pods, all of them) while fault tolerance
allows. Locally a job with ``"faultTolerance": true`` whose pod exits non-zero is restarted up
to ``faultToleranceConfig.faultToleranceLimit`` times (the Go SDK's
``OpenAPIJobFaultToleranceConfig``; AIHC's 3 when unset: :func:`job_chain.aihc.spec.restart_limit`):
a ``Warning`` event ``FaultToleranceRestart`` saying why, the other pods stopped, then Scheduled →
Running again with each pod's ``restartCount`` one higher and its log continued. When the limit is
reached the job fails as any other.

Hang detection (AIHC: "if no instance's stdout or stderr is updated within the set time, the job is
judged hung and it is recorded in the job's events"): with it on
(:func:`job_chain.aihc.spec.hang_minutes`), a Running job none of whose pods wrote to its log for
that many minutes gets a ``Warning`` event ``HangDetected`` and is restarted while fault tolerance
allows, else fails. A minute lasts ``--hang-minute`` seconds (60 unless a test makes it shorter).

Held by :class:`~job_chain.local.executor.Executor`, which it asks for what only the executor
does (:class:`Pods`: start a replica, fail a job, stop a job's pods); no HTTP here.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Dict, List, Optional, Protocol

from job_chain.aihc.spec import hang_minutes, restart_limit
from job_chain.local import HANG_MINUTE
from job_chain.local import store as st
from job_chain.local.host import HOSTNAME
from job_chain.local.pod_process import pod_paths
from job_chain.local.store import Store

log = logging.getLogger("job_chain.local")


class Pods(Protocol):
    """What the lifecycle asks of the executor, which holds the live processes and their lock."""

    @property
    def closing(self) -> bool:
        """The server is stopping: a job still Scheduled stays so, for the next server."""

    def spawn_pod(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int, port: int) -> None:
        """Start one replica of ``job``."""

    def fail_job(self, job: Dict[str, Any], why: str, message: str) -> None:
        """Mark a job Failed with a Warning event saying why."""

    def terminate_job(self, job_id: str, grace: float) -> None:
        """TERM every live pod of a job, KILL after ``grace`` (callers hold the executor's lock)."""

    def hung(self, job_id: str, restarts: int, minutes: int) -> None:
        """Hang detection found ``job_id`` (after ``restarts`` restarts) silent for ``minutes``."""


class Lifecycle:
    """Scheduled, the schedule delay, and restarts; ``pods`` (the executor) starts and signals pods."""

    def __init__(self, store: Store, state_dir: str, pods: Pods, *, stop_grace: float,
                 schedule_delay: float, hang_minute: float = HANG_MINUTE) -> None:
        self.store = store
        self.state_dir = state_dir
        self.pods = pods
        self.stop_grace = stop_grace
        self.schedule_delay = schedule_delay  # seconds a job stays Scheduled before its pods start
        self.hang_minute = hang_minute  # seconds a minute of hang detection lasts (--hang-minute)

    def schedule(self, job: Dict[str, Any], delay: Optional[float] = None, now: bool = True) -> None:
        """Start a Scheduled job's pods after ``delay`` (default ``--schedule-delay``): at once
        when there is none and ``now`` (the caller holds no lock and passes the row it has just
        written, so it is not read again), else from a timer (which reads the row when it fires)."""
        wait = self.schedule_delay if delay is None else max(0.0, delay)
        if wait <= 0 and now:
            self._start_pods(job["id"], job)
            return
        timer = threading.Timer(wait, self._start_pods, (job["id"],))
        timer.daemon = True
        timer.start()

    def _start_pods(self, job_id: str, job: Optional[Dict[str, Any]] = None) -> None:
        """Scheduled → Running: spawn every pod (a job stopped or deleted meanwhile stays so: the
        compare-and-set below fails). ``job``: its row as of Scheduled, if the caller has it."""
        job = job or self.store.get_job(job_id)
        if job is None or self.pods.closing:  # a stopping server leaves it Scheduled for the next one
            return
        try:
            now = time.time()
            fields: Dict[str, Any] = {"status": st.RUNNING}
            if not job["started_at"]:
                fields["started_at"] = now
            if not self.store.transition(job_id, [st.SCHEDULED], **fields):
                return
            pods = self.store.pods(job_id)
            for pod in pods:
                name = pod["name"]
                self.store.add_event(job_id, "SuccessfulCreatePod", f"Created pod: {name}", ts=now)
                self.store.add_event(job_id, "Scheduled", f"Successfully assigned default/{name} to {HOSTNAME}",
                                     pod=name, ts=now)
            # said before any pod starts: a pod that ends at once must not tell its exit before the job runs
            self.store.add_event(job_id, "Started", f"PyTorchJob {job['name']} is running.")
            for pod in pods:
                self.pods.spawn_pod(job, pod, len(pods), job["master_port"])
            self.watch_hang(job)
        except Exception as exc:  # noqa: BLE001 - one job that cannot start fails alone
            log.warning("job %s failed to start: %r", job_id, exc)
            self.pods.fail_job(job, "FailedLaunch", f"the local server could not start this job: {exc}")

    def restart(self, job: Dict[str, Any], why: str, now: float) -> bool:
        """A Running job that failed (``why``: ``pod … exited with code 1``, ``it hung …``): True if
        fault tolerance restarts it (callers hold the lock)."""
        done, limit = job["restarts"] or 0, restart_limit(job["spec"])
        if done >= limit or not self.store.transition(job["id"], [st.RUNNING], status=st.SCHEDULED,
                                                      restarts=done + 1, scheduled_at=now):
            return False
        self.store.add_event(job["id"], "FaultToleranceRestart", f"PyTorchJob {job['name']}: {why}; fault "
                             f"tolerance restarts the job ({done + 1} of {limit})", kind="Warning")
        self.pods.terminate_job(job["id"], self.stop_grace)
        return True

    def watch_hang(self, job: Dict[str, Any]) -> None:
        """With hang detection on, watch a job whose pods have just started (this run of them)."""
        minutes = hang_minutes(job["spec"])
        if minutes is None:
            return
        watcher = threading.Thread(target=self._watch_hang, args=(job["id"], job["restarts"] or 0, minutes),
                                   name=f"hang-{job['id']}", daemon=True)
        watcher.start()

    def _watch_hang(self, job_id: str, restarts: int, minutes: int) -> None:
        """Until this run of the job's pods ends: the last time any pod wrote to its log (or started);
        silent for ``minutes`` -> :meth:`Pods.hung`. A server's own polling, not a test's sleep."""
        limit = minutes * self.hang_minute
        tick = min(1.0, max(0.05, limit / 10))
        said = ""
        while not self.pods.closing:
            time.sleep(tick)
            try:
                job = self.store.get_job(job_id)
                if job is None or job["status"] != st.RUNNING or (job["restarts"] or 0) != restarts:
                    return
                last = max([job["started_at"] or 0.0] + [self._written(job_id, p) for p in self.store.pods(job_id)])
                if time.time() - last >= limit:
                    self.pods.hung(job_id, restarts, minutes)
                    return
            except Exception as exc:  # noqa: BLE001 - a look that failed (a locked store) is tried again next tick
                if repr(exc) != said:  # said once, not every tick
                    log.warning("hang detection of job %s: %r; still watching", job_id, exc)
                said = repr(exc)

    def _written(self, job_id: str, pod: Dict[str, Any]) -> float:
        """When a pod of this run last wrote to its log (its start when it has not)."""
        try:
            written = os.path.getmtime(pod_paths(self.state_dir, job_id, pod["name"])[1])
        except OSError:
            written = 0.0
        return max(written, pod["started_at"] or 0.0)

    def relaunch(self, job: Dict[str, Any], pods: List[Dict[str, Any]]) -> None:
        """Every pod of a restarting job has ended: start them again (callers hold the lock)."""
        for pod in pods:
            rc_path = pod_paths(self.state_dir, job["id"], pod["name"])[2]
            for stale in (rc_path, rc_path + ".tmp"):  # a crash now must not read the old exit code
                if os.path.exists(stale):
                    os.unlink(stale)
            self.store.set_pod(job["id"], pod["name"], status=st.PENDING, pid=None, create_time=None,
                               exit_code=None, started_at=None, finished_at=None,
                               restart_count=(pod["restart_count"] or 0) + 1)
        self.schedule(job, now=False)

    def adopt_scheduled(self, job: Dict[str, Any]) -> bool:
        """At start, a Scheduled job: False if pods are still being stopped for a restart (then
        they are adopted as a Running job's are); else its pods start after what is left of its delay (True)."""
        pods = self.store.pods(job["id"])
        if any(p["status"] == st.RUNNING and p["finished_at"] is None for p in pods):
            return False
        if all(p["status"] == st.PENDING for p in pods):
            self.schedule(job, (job["scheduled_at"] or 0) + self.schedule_delay - time.time(), now=False)
        else:  # every pod ended for a restart, or the server stopped while resetting them
            self.relaunch(job, pods)
        return True
