"""Jobs as local processes: scheduling, spawning, exit detection, stop, and adoption.

Each replica runs ``bash -c COMMAND`` in its own session (process group), with stdout and
stderr going straight to a log file, so pods outlive a server that is killed. A wrapper writes
the exit code to ``<pod>.rc``; a restarted server reads it for pods it no longer parents.

Scheduling is event-driven: a condition variable is notified on create, exit, stop and
priority change, so a created job starts within milliseconds (no polling loop).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from job_chain.local import store as st
from job_chain.local.lifecycle import Lifecycle
from job_chain.local.ports import free_port
from job_chain.local.store import Store

log = logging.getLogger("job_chain.local")

# The outer bash records the inner command's exit code atomically, then exits with it.
# umask 077 after the command: the exit-code file is 0600 like everything under the state dir.
WRAPPER = 'bash -c "$1"; rc=$?; umask 077; echo $rc > "$2.tmp" && mv "$2.tmp" "$2"; exit $rc'
SECRET_ENV = ("AIHC_AK", "AIHC_SK", "AK", "SK", "HOST", "AIHC_HOST", "JOB_CHAIN_CREDENTIALS",
              "JOB_CHAIN_LOCAL_AK", "JOB_CHAIN_LOCAL_SK")
ADOPTED_POLL = 0.05  # seconds between liveness checks of pods this server does not parent


@dataclass
class LivePod:
    """A replica process this server is watching."""

    job_id: str
    name: str
    pid: int
    create_time: float
    log_path: str
    popen: Optional[subprocess.Popen] = None
    kill_requested: bool = False


def pod_paths(state_dir: str, job_id: str, pod: str) -> Tuple[str, str, str]:
    """(working dir, log file, exit-code file) of one pod."""
    base = os.path.join(state_dir, "jobs", job_id)
    return os.path.join(base, pod), os.path.join(base, f"{pod}.log"), os.path.join(base, f"{pod}.rc")


def pod_tmpdir(state_dir: str, job_id: str, pod: str) -> str:
    """The pod's own TMPDIR, inside its job directory: never shared, removed when the pod ends."""
    return os.path.join(state_dir, "jobs", job_id, "tmp", pod)


def private_dirs(state_dir: str, path: str) -> None:
    """Create ``path`` and the directories between it and ``state_dir`` as 0700 (others' jobs'
    logs and commands are not for other local users)."""
    parts = os.path.relpath(path, state_dir).split(os.sep)
    current = state_dir
    for part in parts:
        current = os.path.join(current, part)
        try:
            os.mkdir(current, 0o700)
        except FileExistsError:
            pass
        if os.stat(current).st_mode & 0o077:
            os.chmod(current, 0o700)


def utc_event_time(ts: float) -> str:
    """Event timestamps as AIHC writes them: ``2024-07-15 16:52:50 +0000 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(ts))


def _read_rc(path: str) -> Optional[int]:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def process_alive(pid: Optional[int], create_time: Optional[float]) -> bool:
    """True if ``pid`` is still the process started at ``create_time`` (guards pid reuse)."""
    import psutil

    if not pid:
        return False
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 0.5:
            return False
        return proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Executor(Lifecycle):
    """Starts queued jobs as processes and records what happens to them in the store."""

    def __init__(
        self, store: Store, state_dir: str, server_url: str, credentials_file: str,
        max_running: Optional[int] = None, stop_grace: float = 10.0, schedule_delay: float = 0.0,
    ) -> None:
        self.store = store
        self.state_dir = state_dir
        self.server_url = server_url
        self.credentials_file = credentials_file
        self.max_running = max_running if max_running and max_running > 0 else None
        self.stop_grace = stop_grace
        self.schedule_delay = schedule_delay  # seconds a job stays Scheduled before its pods start
        self._cond = threading.Condition()
        self._exit_lock = threading.Lock()
        self._closing = False
        self._live: Dict[Tuple[str, str], LivePod] = {}
        self._thread = threading.Thread(target=self._schedule_loop, name="scheduler", daemon=True)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Adopt pods left by a previous server, then start scheduling."""
        self.adopt()
        self._thread.start()

    def close(self) -> None:
        """Stop scheduling; running pods are left alone for the next server to adopt."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def live_pods(self) -> List[LivePod]:
        with self._exit_lock:
            return list(self._live.values())

    # -- scheduling ------------------------------------------------------------------------
    def _schedule_loop(self) -> None:
        with self._cond:
            while not self._closing:
                try:
                    self._start_ready()
                except Exception:  # never let one bad job kill the scheduler
                    log.exception("scheduler error")
                self._cond.wait()

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
            self._fail_job(job, "FailedLaunch", f"the local server could not start this job: {_reason(exc)}")

    def _fail_job(self, job: Dict[str, Any], reason: str, message: str) -> None:
        """Mark a job Failed with a Warning event saying why (from Pending or Running)."""
        job_id, now = job["id"], time.time()
        with self._exit_lock:
            for pod in self.store.pods(job_id):
                if pod["finished_at"] is None:
                    self.store.set_pod(job_id, pod["name"], status=st.FAILED, finished_at=now,
                                       exit_code=pod["exit_code"] if pod["exit_code"] is not None else 127)
            if self.store.transition(job_id, [st.PENDING, *st.ACTIVE], status=st.FAILED, finished_at=now):
                self.store.add_event(job_id, reason, message, kind="Warning")
                self.store.add_event(job_id, "JobFailed", f"PyTorchJob {job['name']} is failed: {message}")
            self._terminate_job(job_id, self.stop_grace)

    def _launch_job(self, job: Dict[str, Any]) -> None:
        job_id, spec = job["id"], job["spec"]
        now = time.time()
        for source in spec.get("datasources") or []:
            mount = source.get("mountPath") if isinstance(source, dict) else None
            if not mount:
                continue
            try:
                os.makedirs(mount, exist_ok=True)
            except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
                if self.store.transition(job_id, [st.PENDING], status=st.FAILED, finished_at=now):
                    self.store.add_event(job_id, "FailedMount", f"cannot create mountPath {mount!r} of "
                                         f"datasource {source.get('name', '')!r}: {_reason(exc)}",
                                         kind="Warning")
                    self.store.add_event(job_id, "JobFailed", f"PyTorchJob {job['name']} is failed "
                                         "because a datasource could not be mounted.")
                return
        if self.store.transition(job_id, [st.PENDING], status=st.SCHEDULED, scheduled_at=now,
                                 master_port=free_port()):
            self.store.add_event(job_id, "JobScheduled", f"PyTorchJob {job['name']} is scheduled; its pods are "
                                 "being created")
            self._schedule(job)

    def _pod_env(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int,
                 port: int) -> Tuple[Dict[str, str], List[Tuple[str, str]]]:
        """(the process environment, the part the API shows) of one replica."""
        job_spec = job["spec"].get("jobSpec") or {}
        job_envs = [(str(e.get("name")), str(e.get("value", ""))) for e in job_spec.get("envs") or []]
        platform = [
            ("RANK", str(pod["rank"])), ("WORLD_SIZE", str(replicas)),
            ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port)),
            ("AIHC_JOB_NAME", job["name"]), ("AIHC_JOB_ID", job["id"]), ("POD_NAME", pod["name"]),
            ("PYTHONUNBUFFERED", "1"), ("AIHC_HOST", self.server_url),
            ("JOB_CHAIN_CREDENTIALS", self.credentials_file),
        ]
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        env.update(job_envs)
        env.update(platform)
        if "TMPDIR" not in dict(job_envs):  # a job's own TMPDIR wins, as it would in a container
            env["TMPDIR"] = pod_tmpdir(self.state_dir, job["id"], pod["name"])
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        return env, job_envs + platform

    def _spawn_pod(self, job: Dict[str, Any], pod: Dict[str, Any], replicas: int, port: int) -> None:
        """Start one replica of ``job`` (at launch, or again after a crash cut its launch short)."""
        job_spec = job["spec"].get("jobSpec") or {}
        env, shown = self._pod_env(job, pod, replicas, port)
        self._spawn(job["id"], pod["name"], job_spec.get("image", ""), str(job_spec.get("command", "")),
                    env, shown)

    def _spawn(self, job_id: str, name: str, image: str, command: str,
               env: Dict[str, str], shown: List[Tuple[str, str]]) -> None:
        import psutil

        workdir, log_path, rc_path = pod_paths(self.state_dir, job_id, name)
        self.store.add_event(job_id, "Pulled", f"Container image \"{image}\" already present on "
                             "machine (local server: the image is not used)", pod=name)
        try:
            private_dirs(self.state_dir, workdir)
            private_dirs(self.state_dir, pod_tmpdir(self.state_dir, job_id, name))
            for stale in (rc_path, rc_path + ".tmp"):
                if os.path.exists(stale):
                    os.unlink(stale)
            fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with open(fd, "ab") as out:
                os.fchmod(fd, 0o600)
                proc = subprocess.Popen(
                    ["bash", "-c", WRAPPER, "job-chain-pod", command, rc_path],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    cwd=workdir, env=env, start_new_session=True, close_fds=True,
                )
        except Exception as exc:  # noqa: BLE001 - OSError, or ValueError for a NUL byte or "A=B"
            self.store.add_event(job_id, "Failed", f"Error: cannot start container: {_reason(exc)}",
                                 pod=name, kind="Warning")
            self._finish_pod(job_id, name, 127)
            return
        try:
            create_time = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            create_time = time.time()
        now = time.time()
        self._index_log(job_id, name, now)
        self.store.set_pod(job_id, name, status=st.RUNNING, pid=proc.pid, create_time=create_time,
                           started_at=now, env=[{"name": k, "value": v} for k, v in shown])
        self.store.add_event(job_id, "Created", "Created container pytorch", pod=name, ts=now)
        self.store.add_event(job_id, "Started", "Started container pytorch", pod=name, ts=now)
        live = LivePod(job_id, name, proc.pid, create_time, log_path, popen=proc)
        with self._exit_lock:
            self._live[(job_id, name)] = live
        threading.Thread(target=self._wait_child, args=(live,), name=f"wait-{name}",
                         daemon=True).start()

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
        self._finish_pod(live.job_id, live.name, code if code >= 0 else 128 - code)

    def _wait_adopted(self, live: LivePod) -> None:
        while process_alive(live.pid, live.create_time):
            time.sleep(ADOPTED_POLL)
        _, _, rc_path = pod_paths(self.state_dir, live.job_id, live.name)
        code = _read_rc(rc_path)
        if code is None:  # killed by a signal: no rc file was written
            code = 143 if live.kill_requested else 137
        self._finish_pod(live.job_id, live.name, code)

    def _finish_pod(self, job_id: str, name: str, code: Optional[int], lost: bool = False) -> None:
        """Record one replica's end and decide the job's status; wakes the scheduler."""
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
        if status == st.RUNNING and failed and self._restart(job, failed, now):
            status = st.SCHEDULED  # fault tolerance: restarted once every pod has ended
        if status == st.SCHEDULED and all_done:
            self._relaunch(job, pods)
        elif status == st.RUNNING and failed:
            if self.store.transition(job_id, [st.RUNNING], status=st.FAILED, finished_at=now):
                kind = "Master" if failed[0]["replica_type"] == "master" else "Worker"
                self.store.add_event(job_id, "JobFailed", f"PyTorchJob {name} is failed "
                                     f"because 1 {kind} replica(s) failed.")
                self._terminate_job(job_id, self.stop_grace)
        elif status == st.RUNNING and all_done:
            if self.store.transition(job_id, [st.RUNNING], status=st.SUCCEEDED, finished_at=now):
                self.store.add_event(job_id, "JobSucceeded", f"PyTorchJob {name} is successfully completed.")
        elif status == st.STOPPING and all_done and self.store.transition(
                job_id, [st.STOPPING], status=st.STOPPED, finished_at=now):
            self.store.add_event(job_id, "JobStopped", f"PyTorchJob {name} is stopped.")

    def _terminate_job(self, job_id: str, grace: float) -> None:
        """SIGTERM every live pod group of a job, SIGKILL whatever is left after ``grace``."""
        targets = [p for p in self._live.values() if p.job_id == job_id]
        for pod in targets:
            pod.kill_requested = True
            self.store.add_event(job_id, "Killing", "Stopping container pytorch", pod=pod.name)
            _killpg(pod.pid, signal.SIGTERM)

        def finish() -> None:
            # the group leader (the wrapper) may be gone while members that ignore SIGTERM live
            for pod in targets:
                _killpg(pod.pid, signal.SIGKILL)

        if targets:
            timer = threading.Timer(grace, finish)
            timer.daemon = True
            timer.start()

    # -- API actions -----------------------------------------------------------------------
    def stop(self, job_id: str) -> None:
        """Stop a job: queued → Stopped at once; running → Stopping, then Stopped (idempotent)."""
        now = time.time()
        with self._exit_lock:
            job = self.store.get_job(job_id)
            if job is None:
                return
            live = any(p.job_id == job_id for p in self._live.values())
            if job["status"] == st.PENDING or job["status"] == st.SCHEDULED and not live:
                if self.store.transition(job_id, [st.PENDING, st.SCHEDULED], status=st.STOPPED, finished_at=now):
                    self.store.add_event(job_id, "JobStopped", f"PyTorchJob {job['name']} is stopped.")
            elif job["status"] in (st.RUNNING, st.SCHEDULED):  # Scheduled with pods: stopping for a restart
                self.store.transition(job_id, [st.RUNNING, st.SCHEDULED], status=st.STOPPING)
                self.store.add_event(job_id, "JobStopping", f"PyTorchJob {job['name']} is stopping.")
                if live:
                    self._terminate_job(job_id, self.stop_grace)
                elif self.store.transition(job_id, [st.STOPPING], status=st.STOPPED, finished_at=now):
                    self.store.add_event(job_id, "JobStopped", f"PyTorchJob {job['name']} is stopped.")
        self.wake()

    def delete(self, job_id: str) -> None:
        """Forget a job; its processes get SIGTERM and then SIGKILL after the grace period."""
        with self._exit_lock:
            self._terminate_job(job_id, self.stop_grace)
            self.store.delete_job(job_id)
        self.wake()

    # -- restart ---------------------------------------------------------------------------
    def adopt(self) -> None:
        """Watch pods of a previous server that still live; settle those that ended meanwhile.

        A job that cannot be adopted (whatever the error) is failed with an event, so one bad
        job never keeps the server from starting.
        """
        for job in self.store.jobs_with_status(st.ACTIVE):
            try:
                if job["status"] == st.SCHEDULED and self._adopt_scheduled(job):
                    continue
                self._adopt_job(job)
            except Exception as exc:  # noqa: BLE001
                log.warning("job %s could not be adopted: %r", job["id"], exc)
                self._fail_job(job, "FailedAdoption",
                               f"the restarted local server could not take this job over: {_reason(exc)}")

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
            code = _read_rc(rc_path)
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
        found = _find_pod_process(rc_path)
        if found is not None:
            pid, create_time = found
            shown = self._pod_env(job, pod, replicas, job["master_port"] or 0)[1]
            self.store.set_pod(job_id, name, status=st.RUNNING, pid=pid, create_time=create_time,
                               started_at=create_time, env=[{"name": k, "value": v} for k, v in shown])
            self._watch_adopted(job, name, pid, create_time, log_path)
            return
        code = _read_rc(rc_path)
        if code is not None or job["status"] == st.STOPPING:
            self._finish_pod(job_id, name, 143 if code is None else code)
            return
        self.store.add_event(job_id, "Restarted", "the local server stopped while starting this pod; "
                             "starting it now", pod=name)
        self._spawn_pod(job, pod, replicas, job["master_port"] or free_port())


def _reason(exc: BaseException) -> str:
    """An exception as one short line for an event (``strerror`` for OS errors)."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."


def _find_pod_process(rc_path: str) -> Optional[Tuple[int, float]]:
    """(pid, create time) of the live pod wrapper whose exit-code file is ``rc_path``, if any."""
    import psutil

    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = proc.info.get("cmdline") or []
        if len(cmdline) >= 2 and cmdline[-1] == rc_path and "job-chain-pod" in cmdline:
            return proc.pid, float(proc.info["create_time"])
    return None
