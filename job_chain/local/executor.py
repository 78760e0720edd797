"""Jobs as local processes: scheduling, spawning, exit detection, stop, and adoption.

The executor holds the live pods and the lock over them; two collaborators it holds ask it for
what only it does: :class:`~job_chain.local.lifecycle.Lifecycle` (Scheduled, the schedule delay,
fault-tolerance restarts) and :class:`~job_chain.local.adoption.Adoption` (a restarted server
taking over its predecessor's pods).

Each replica is a process of its own (:mod:`job_chain.local.pod_process`: its session, log,
exit-code file and mark), so pods outlive a server that is killed; a restarted server adopts
them. A pod ends with everything it started: when its wrapper exits, whatever is left of its
process tree is killed before the pod is recorded finished (as a container's processes end with
it), and a stop's SIGKILL after the grace period reaches the whole tree, not just its group.

Scheduling is event-driven: a condition variable is notified on create, exit, stop and
priority change, so a created job starts within milliseconds (no polling loop).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from job_chain.engine.resources import gpus_per_replica
from job_chain.local import HANG_MINUTE
from job_chain.local import store as st
from job_chain.local.adoption import Adoption
from job_chain.local.host import HOSTNAME
from job_chain.local.lifecycle import Lifecycle
from job_chain.local.pod_process import (
    SECRET_ENV,
    LivePod,
    kill_pod,
    killpg,
    pod_paths,
    pod_tmpdir,
    pod_token,
    prepare_mount,
    private_dirs,
    reason,
    start_process,
)
from job_chain.local.ports import free_port
from job_chain.local.store import Store
from job_chain.util import proctree

log = logging.getLogger("job_chain.local")
HALTED_KEPT = 4096  # stopped or deleted jobs remembered so that none of their pods starts late


def host_network(job_spec: Dict[str, Any]) -> bool:
    """Whether a job's pods share their node's network and UTS namespace: ``hostNetwork`` when
    given, else AIHC's default, on with RDMA (``HOSTNAME`` is then the node's name, not the pod's)."""
    given = job_spec.get("hostNetwork")
    return bool(job_spec.get("enableRDMA")) if given is None else bool(given)


def platform_env(job: Dict[str, Any], pod: Dict[str, Any], replicas: int, port: int) -> List[Tuple[str, str]]:
    """What AIHC injects into a pod, and nothing else (its platform environment-variable page,
    2026-01; the job-spec page adds ``NCCL_DEBUG`` and, with RDMA, ``NCCL_IB_DISABLE=0``): no API
    host, no credentials, no job id, no ``POD_NAME``. The in-job code must find everything else in
    the run record. ``MASTER_ADDR`` is this machine (AIHC's is ``{name}-master-0``)."""
    job_spec = job["spec"].get("jobSpec") or {}
    tensorboard = job["spec"].get("tensorboardConfig")
    log_dir = tensorboard.get("logDir") if isinstance(tensorboard, dict) else None
    env = [
        ("RANK", str(pod["rank"])), ("WORLD_SIZE", str(replicas)),
        ("NPROC_PER_NODE", str(int(gpus_per_replica(job["spec"])) or 1)),  # its GPUs (not rdma/hca, devshm)
        ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port)), ("AIHC_JOB_NAME", job["name"]),
        ("AIHC_TENSORBOARD_LOG_PATH", str(log_dir or "")), ("NCCL_DEBUG", "INFO"),
    ]
    if job_spec.get("enableRDMA"):
        env.append(("NCCL_IB_DISABLE", "0"))
    return env


def utc_event_time(ts: float) -> str:
    """Event timestamps as AIHC writes them: ``2024-07-15 16:52:50 +0000 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(ts))


class Executor:
    """Starts queued jobs as processes and records what happens to them in the store.

    It is the :class:`~job_chain.local.lifecycle.Pods` of its lifecycle and the
    :class:`~job_chain.local.adoption.AdoptedPods` of its adoption: ``closing``, ``spawn_pod``,
    ``fail_job``, ``terminate_job``, ``pod_env``, ``track``, ``finish_pod``, ``settle_adopted``.
    """

    def __init__(
        self, store: Store, state_dir: str, max_running: Optional[int] = None, stop_grace: float = 10.0,
        schedule_delay: float = 0.0, hang_minute: float = HANG_MINUTE,
    ) -> None:
        self.store = store
        self.state_dir = state_dir
        self.max_running = max_running if max_running and max_running > 0 else None
        self.stop_grace = stop_grace
        self._cond = threading.Condition()
        self._woken = False  # set by wake(); the scheduler clears it before each pass
        self._exit_lock = threading.Lock()
        self._closing = False
        self._live: Dict[Tuple[str, str], LivePod] = {}
        # jobs a stop or a delete reached while their pods may still be starting: none of theirs starts
        # any more (kept here, not read from the store: a launch does not read its job back). The
        # newest HALTED_KEPT are enough: a launch in flight is seconds old.
        self._halted: Dict[str, None] = {}  # in the order they were halted
        self._thread = threading.Thread(target=self._schedule_loop, name="scheduler", daemon=True)
        self.lifecycle = Lifecycle(store, state_dir, self, stop_grace=stop_grace, schedule_delay=schedule_delay,
                                   hang_minute=hang_minute)
        self.adoption = Adoption(store, state_dir, self, self.lifecycle)

    # -- the executor itself --------------------------------------------------------------
    def start(self) -> None:
        """Adopt pods left by a previous server, then start scheduling."""
        self.adoption.adopt()
        self._thread.start()

    def close(self) -> None:
        """Stop scheduling; running pods are left alone for the next server to adopt."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    @property
    def closing(self) -> bool:
        """close() was called: no job starts any more (a Scheduled job stays so, for the next server)."""
        return self._closing

    def wake(self) -> None:
        """Ask for a scheduling pass; returns at once, even while a pass is launching pods."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def live_pods(self) -> List[LivePod]:
        with self._exit_lock:
            return list(self._live.values())

    # -- scheduling ------------------------------------------------------------------------
    def _schedule_loop(self) -> None:
        """One pass per wake-up. The condition is held only to take the wake-up, never while
        launching, so a create (or a pod's exit) is not queued behind a pass's process spawns."""
        while True:
            try:
                self._start_ready()
            except Exception:  # never let one bad job kill the scheduler
                log.exception("scheduler error")
            with self._cond:
                while not self._woken and not self._closing:
                    self._cond.wait()
                if self._closing:
                    return
                self._woken = False

    def _start_ready(self) -> None:
        while not self._closing:
            if self.store.pools():  # configured pools and queues: each has its own capacity
                full_pools, full_queues = self.store.full(self.max_running)
                job = self.store.next_pending(full_pools, full_queues)
            else:
                if self.max_running is not None and self.store.count_active() >= self.max_running:
                    return
                job = self.store.next_pending()
            if job is None:
                return
            self._launch(job)

    def _launch(self, job: Dict[str, Any]) -> None:
        """Start a queued job; whatever goes wrong fails this job only, never the queue."""
        try:
            self._launch_job(job)
        except Exception as exc:  # noqa: BLE001 - a bad job must not stall every job behind it
            log.warning("job %s failed to launch: %r", job["id"], exc)
            self.fail_job(job, "FailedLaunch", f"the local server could not start this job: {reason(exc)}")

    def fail_job(self, job: Dict[str, Any], why: str, message: str) -> None:
        """Mark a job Failed with a Warning event saying why (from Pending or Running)."""
        job_id, now = job["id"], time.time()
        with self._exit_lock:
            for pod in self.store.pods(job_id):
                if pod["finished_at"] is None:
                    self.store.set_pod(job_id, pod["name"], status=st.FAILED, finished_at=now,
                                       exit_code=pod["exit_code"] if pod["exit_code"] is not None else 127)
            if self.store.transition(job_id, [st.PENDING, *st.ACTIVE], status=st.FAILED, finished_at=now):
                self.store.add_event(job_id, why, message, kind="Warning")
                self.store.add_event(job_id, "JobFailed", f"PyTorchJob {job['name']} is failed: {message}")
            self.terminate_job(job_id, self.stop_grace)

    def _launch_job(self, job: Dict[str, Any]) -> None:
        job_id, spec = job["id"], job["spec"]
        now = time.time()
        for source in spec.get("datasources") or []:
            mount = source.get("mountPath") if isinstance(source, dict) else None
            if not mount:
                continue
            problem = prepare_mount(mount)
            if problem:
                if self.store.transition(job_id, [st.PENDING], status=st.FAILED, finished_at=now):
                    self.store.add_event(job_id, "FailedMount", f"cannot mount {mount!r} for datasource "
                                         f"{source.get('name', '')!r}: {problem}", kind="Warning")
                    self.store.add_event(job_id, "JobFailed", f"PyTorchJob {job['name']} is failed "
                                         "because a datasource could not be mounted.")
                return
        scheduled = {"status": st.SCHEDULED, "scheduled_at": now, "master_port": free_port()}
        if self.store.transition(job_id, [st.PENDING], **scheduled):
            self.store.add_event(job_id, "JobScheduled", f"PyTorchJob {job['name']} is scheduled; its pods are "
                                 "being created")
            self.lifecycle.schedule(dict(job, **scheduled))  # the row as just written: not read back

    def pod_env(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int,
                port: int) -> Tuple[Dict[str, str], List[Tuple[str, str]]]:
        """(the process environment, the part the API shows) of one replica: the job's envs and
        what AIHC documents that it injects (:func:`platform_env`), nothing more."""
        job_spec = job["spec"].get("jobSpec") or {}
        job_envs = [(str(e.get("name")), str(e.get("value", ""))) for e in job_spec.get("envs") or []]
        platform = platform_env(job, pod, replicas, port)
        # the "image's" own environment: the server's, without anything AIHC would not give a pod
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV and not k.startswith("AIHC_")}
        env.update(job_envs)
        env.update(platform)
        env["HOSTNAME"] = HOSTNAME if host_network(job_spec) else pod["name"]  # as a container's UTS namespace
        if "TMPDIR" not in dict(job_envs):  # a job's own TMPDIR wins, as it would in a container
            env["TMPDIR"] = pod_tmpdir(self.state_dir, job["id"], pod["name"])
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        return proctree.marked(env, pod_token(job["id"], pod["name"])), job_envs + platform

    def spawn_pod(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int, port: int) -> None:
        """Start one replica of ``job`` (at launch, or again after a crash cut its launch short)."""
        job_spec = job["spec"].get("jobSpec") or {}
        env, shown = self.pod_env(job, pod, replicas, port)
        self._spawn(job["id"], pod["name"], job_spec.get("image", ""), str(job_spec.get("command", "")),
                    env, shown)

    def _spawn(self, job_id: str, name: str, image: str, command: str,
               env: Dict[str, str], shown: List[Tuple[str, str]]) -> None:
        import psutil

        paths = pod_paths(self.state_dir, job_id, name)
        workdir, log_path, rc_path = paths
        self.store.add_event(job_id, "Pulled", f"Container image \"{image}\" already present on "
                             "machine (local server: the image is not used)", pod=name)
        try:
            private_dirs(self.state_dir, workdir)
            private_dirs(self.state_dir, pod_tmpdir(self.state_dir, job_id, name))
            for stale in (rc_path, rc_path + ".tmp"):
                if os.path.exists(stale):
                    os.unlink(stale)
        except Exception as exc:  # noqa: BLE001 - OSError
            self._cannot_start(job_id, name, exc)
            return
        # The process starts and is counted among the job's live pods under the lock a stop takes:
        # a stop that came first leaves nothing to start, and one that comes after finds the pod
        # to signal (started outside it, a pod could outlive a job that a stop already settled).
        with self._exit_lock:
            if job_id in self._halted:  # stopped (or deleted) meanwhile: this pod never starts
                if self.store.get_job(job_id) is None:
                    return
                now = time.time()
                self.store.set_pod(job_id, name, status=st.FAILED, exit_code=143, finished_at=now)
                self.store.add_event(job_id, "Killing", "the job was stopped before this pod started",
                                     pod=name)
                self._settle(job_id, now)  # a Stopping job whose other pods ended is Stopped now
                return
            try:
                proc = start_process(command, paths, env)
            except Exception as exc:  # noqa: BLE001 - OSError, or ValueError for a NUL byte or "A=B"
                failed: Optional[BaseException] = exc
            else:
                failed = None
                now = time.time()  # running: its exec is done; stamped before psutil reads /proc
                try:
                    create_time = psutil.Process(proc.pid).create_time()
                except psutil.Error:
                    create_time = now
                live = LivePod(job_id, name, proc.pid, create_time, log_path, popen=proc)
                self._live[(job_id, name)] = live
        if failed is not None:
            self._cannot_start(job_id, name, failed)
            return
        self._index_log(job_id, name, now)
        self.store.set_pod(job_id, name, status=st.RUNNING, pid=proc.pid, create_time=create_time,
                           started_at=now, env=[{"name": k, "value": v} for k, v in shown])
        self.store.add_event(job_id, "Created", "Created container pytorch", pod=name, ts=now)
        self.store.add_event(job_id, "Started", "Started container pytorch", pod=name, ts=now)
        threading.Thread(target=self._wait_child, args=(live,), name=f"wait-{name}",
                         daemon=True).start()

    def _cannot_start(self, job_id: str, name: str, exc: BaseException) -> None:
        self.store.add_event(job_id, "Failed", f"Error: cannot start container: {reason(exc)}",
                             pod=name, kind="Warning")
        self.finish_pod(job_id, name, 127)

    def track(self, live: LivePod) -> None:
        """Count ``live`` among its job's live pods: a stop or a delete signals it from now on."""
        with self._exit_lock:
            self._live[(live.job_id, live.name)] = live

    def _index_log(self, job_id: str, name: str, ts: float) -> None:
        """Add a time→log-offset point (the sampler adds one per tick while the pod runs)."""
        try:
            size = os.path.getsize(pod_paths(self.state_dir, job_id, name)[1])
        except OSError:
            return
        self.store.add_samples([], [(job_id, name, ts, size)])

    # -- exits -----------------------------------------------------------------------------
    def _wait_child(self, live: LivePod) -> None:
        assert live.popen is not None
        code = live.popen.wait()
        self.finish_pod(live.job_id, live.name, code if code >= 0 else 128 - code)

    def finish_pod(self, job_id: str, name: str, code: Optional[int], lost: bool = False) -> None:
        """Record one replica's end and decide the job's status; wakes the scheduler.

        Whatever the replica left running (a background child, one that called setsid) is killed
        first, so a finished, failed or stopped pod has no process left.
        """
        with self._exit_lock:
            live = self._live.get((job_id, name))
        left = kill_pod(job_id, name, wait_until=live.stop_deadline if live else None)
        if left:
            self.store.add_event(job_id, "Killing", f"Killed {left} process(es) the pod left running when its "
                                 "command ended", pod=name)
        now = time.time()
        shutil.rmtree(pod_tmpdir(self.state_dir, job_id, name), ignore_errors=True)  # as a container's /tmp
        with self._exit_lock:
            self._live.pop((job_id, name), None)
            job = self.store.get_job(job_id)
            if job is None:  # deleted meanwhile
                return
            phase = st.SUCCEEDED if code == 0 else st.FAILED
            self._index_log(job_id, name, now)
            self.store.set_pod(job_id, name, status=phase, exit_code=code, finished_at=now)
            if lost:
                self.store.add_event(job_id, "ProcessLost", f"Pod: default.{name} process was lost "
                                     "while the local server was down; its exit code is unknown",
                                     kind="Warning")
                self.store.add_event(job_id, "ProcessLost", "the process ended while the local "
                                     "server was down and left no exit code", pod=name,
                                     kind="Warning")
            else:
                self.store.add_event(job_id, "ExitedWithCode",
                                     f"Pod: default.{name} exited with code {code}")
                if code != 0:
                    self.store.add_event(job_id, "Error", f"Error pod {name} container pytorch "
                                         f"exitCode: {code} terminated message: ", kind="Warning")
            self._settle(job_id, now)
        self.wake()

    def _settle(self, job_id: str, now: float) -> None:
        """Derive the job's status from its pods (callers hold ``_exit_lock``)."""
        job = self.store.get_job(job_id)
        if job is None:
            return
        pods = self.store.pods(job_id)
        all_done = all(p["finished_at"] is not None for p in pods)
        failed = [p for p in pods if p["finished_at"] is not None and p["exit_code"] != 0]
        name, status = job["name"], job["status"]
        why = f"pod {failed[0]['name']} exited with code {failed[0]['exit_code']}" if failed else ""
        if status == st.RUNNING and failed and self.lifecycle.restart(job, why, now):
            status = st.SCHEDULED  # fault tolerance: restarted once every pod has ended
        if status == st.SCHEDULED and all_done:
            self.lifecycle.relaunch(job, pods)
        elif status == st.RUNNING and failed:
            if self.store.transition(job_id, [st.RUNNING], status=st.FAILED, finished_at=now):
                kind = "Master" if failed[0]["replica_type"] == "master" else "Worker"
                self.store.add_event(job_id, "JobFailed", f"PyTorchJob {name} is failed "
                                     f"because 1 {kind} replica(s) failed.")
                self.terminate_job(job_id, self.stop_grace)
        elif status == st.RUNNING and all_done:
            if self.store.transition(job_id, [st.RUNNING], status=st.SUCCEEDED, finished_at=now):
                self.store.add_event(job_id, "JobSucceeded", f"PyTorchJob {name} is successfully completed.")
        elif status == st.STOPPING and all_done and self.store.transition(
                job_id, [st.STOPPING], status=st.STOPPED, finished_at=now):
            self.store.add_event(job_id, "JobStopped", f"PyTorchJob {name} is stopped.")

    def hung(self, job_id: str, restarts: int, minutes: int) -> None:
        """Hang detection found every pod of a Running job (after ``restarts`` restarts) silent for
        ``minutes``: a ``HangDetected`` event, then a restart while fault tolerance allows, else the
        job fails (its pods are stopped; the stop is not their failure)."""
        now = time.time()
        with self._exit_lock:
            job = self.store.get_job(job_id)
            if job is None or job["status"] != st.RUNNING or (job["restarts"] or 0) != restarts:
                return
            silent = f"no pod wrote to its log for {minutes} minute{'s' if minutes != 1 else ''}"
            self.store.add_event(job_id, "HangDetected", f"PyTorchJob {job['name']} is hung: {silent} "
                                 "(hang detection)", kind="Warning")
            if not self.lifecycle.restart(job, f"it hung ({silent})", now) and self.store.transition(
                    job_id, [st.RUNNING], status=st.FAILED, finished_at=now):
                self.store.add_event(job_id, "JobFailed", f"PyTorchJob {job['name']} is failed because it "
                                     f"hung: {silent}.")
                self.terminate_job(job_id, self.stop_grace)
        self.wake()

    def settle_adopted(self, job_id: str) -> None:
        """A job adopted from a previous server: decide its status from its pods again (a crash may
        have cut a settle short), and resume the TERM→KILL sequence of a job still Stopping."""
        with self._exit_lock:
            self._settle(job_id, time.time())
            latest = self.store.get_job(job_id)
            if latest and latest["status"] == st.STOPPING:
                self.terminate_job(job_id, self.stop_grace)

    def terminate_job(self, job_id: str, grace: float) -> None:
        """SIGTERM every live pod group of a job; after ``grace``, SIGKILL each pod's group and
        whole process tree (a member that ignores SIGTERM, or left the group with setsid). Callers
        hold ``_exit_lock``."""
        targets = [p for p in self._live.values() if p.job_id == job_id]
        for pod in targets:
            pod.kill_requested = True
            pod.stop_deadline = pod.stop_deadline or time.monotonic() + grace
            self.store.add_event(job_id, "Killing", "Stopping container pytorch", pod=pod.name)
            killpg(pod.pid, signal.SIGTERM)

        def finish() -> None:
            with self._exit_lock:
                now_live = dict(self._live)
            for pod in targets:  # the group id stays the pod's while any member lives
                again = now_live.get((pod.job_id, pod.name))
                if again is not None and again is not pod:
                    continue  # fault tolerance started it again meanwhile: that pod is not stopped
                kill_pod(pod.job_id, pod.name, pod.pid)

        if targets:
            timer = threading.Timer(grace, finish)
            timer.daemon = True
            timer.start()

    # -- API actions -----------------------------------------------------------------------
    def stop(self, job_id: str) -> None:
        """Stop a job: queued → Stopped at once; running → Stopping, then Stopped (idempotent)."""
        now = time.time()
        with self._exit_lock:
            self._halt(job_id)
            for _ in range(3):  # a launch moves Scheduled → Running without this lock: look again then
                job = self.store.get_job(job_id)
                if job is None:
                    return
                live = any(p.job_id == job_id for p in self._live.values())
                if job["status"] == st.PENDING or job["status"] == st.SCHEDULED and not live:
                    if not self.store.transition(job_id, [st.PENDING, st.SCHEDULED], status=st.STOPPED,
                                                 finished_at=now):
                        continue
                    self.store.add_event(job_id, "JobStopped", f"PyTorchJob {job['name']} is stopped.")
                elif job["status"] in (st.RUNNING, st.SCHEDULED):  # Scheduled with pods: stopping for a restart
                    if not self.store.transition(job_id, [st.RUNNING, st.SCHEDULED], status=st.STOPPING):
                        continue
                    self.store.add_event(job_id, "JobStopping", f"PyTorchJob {job['name']} is stopping.")
                    if live:
                        self.terminate_job(job_id, self.stop_grace)
                    elif self.store.transition(job_id, [st.STOPPING], status=st.STOPPED, finished_at=now):
                        self.store.add_event(job_id, "JobStopped", f"PyTorchJob {job['name']} is stopped.")
                break
        self.wake()

    def _halt(self, job_id: str) -> None:
        """No pod of ``job_id`` starts from now on (callers hold ``_exit_lock``)."""
        self._halted.pop(job_id, None)
        self._halted[job_id] = None
        while len(self._halted) > HALTED_KEPT:
            del self._halted[next(iter(self._halted))]

    def delete(self, job_id: str) -> None:
        """Forget a job; its processes get SIGTERM and then SIGKILL after the grace period."""
        with self._exit_lock:
            self._halt(job_id)
            self.terminate_job(job_id, self.stop_grace)
            self.store.delete_job(job_id)
        self.wake()
