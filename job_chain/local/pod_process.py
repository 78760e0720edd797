"""One pod's operating-system processes: where they live, how they start, how they are found
and how they end.

A pod is ``bash -c WRAPPER`` in its own session (process group) with its output straight to a
log file, so it outlives a server that is killed; the wrapper writes the command's exit code to
``<pod>.rc`` for a restarted server that no longer parents it. Every process of the pod carries
the pod's mark (:mod:`job_chain.util.proctree`), so what it started is found and ended with it even
after ``setsid`` took it out of the group: when the pod's wrapper exits (as a container's
processes end with it; during a stop, once its grace period has run out) and when a stop's grace
period runs out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from job_chain.util import proctree

# The outer bash records the inner command's exit code atomically, then exits with it.
# umask 077 after the command: the exit-code file is 0600 like everything under the state dir.
WRAPPER = 'bash -c "$1"; rc=$?; umask 077; echo $rc > "$2.tmp" && mv "$2.tmp" "$2"; exit $rc'
# never passed from the server's environment to a pod (nor is any AIHC_*: AIHC gives a pod only its
# documented variables, executor.platform_env)
SECRET_ENV = ("AK", "SK", "HOST", "JOB_CHAIN_CREDENTIALS", "JOB_CHAIN_LOCAL_AK", "JOB_CHAIN_LOCAL_SK", "POD_NAME",
              "HOSTNAME")
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
    stop_deadline: Optional[float] = None  # time.monotonic() when a stop's grace period ends


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


def read_rc(path: str) -> Optional[int]:
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


def killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def prepare_mount(path: str) -> Optional[str]:
    """Make a datasource's ``mountPath`` usable on this machine; None, or why it cannot be.

    A directory that exists is used as it is. A missing one is created only inside the
    temporary directory, like /tmp itself (sticky, writable by every local user: a shared volume
    in which each user's jobs make their own directories); anywhere else (``/root/pfs``, a home
    directory) the server creates nothing outside its state dir, and says how to create it.
    """
    import tempfile

    try:
        if os.path.isdir(path):
            return None
        if os.path.lexists(path):
            return "it exists on this machine and is not a directory"
        temp = os.path.realpath(tempfile.gettempdir())
        if os.path.commonpath([temp, os.path.realpath(path)]) != temp:
            return (f"no such directory on this machine, and the local server creates a missing mountPath only "
                    f"under {temp}: create it (mkdir -p {path}) or use a mountPath that exists")
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o1777)
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        return reason(exc)
    return None


def pod_token(job_id: str, pod: str) -> str:
    """The mark of one pod's processes: the same for a restarted server, unique across servers."""
    return f"{job_id}/{pod}"


def start_process(command: str, paths: Tuple[str, str, str], env: Dict[str, str]) -> subprocess.Popen:
    """Start one pod's wrapper in its own session, output appended to its 0600 log."""
    workdir, log_path, rc_path = paths
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with open(fd, "ab") as out:
        os.fchmod(fd, 0o600)
        return subprocess.Popen(
            ["bash", "-c", WRAPPER, "job-chain-pod", command, rc_path],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=workdir, env=env, start_new_session=True, close_fds=True,
        )


def kill_pod(job_id: str, pod: str, pid: Optional[int] = None, wait_until: Optional[float] = None,
             poll: float = 0.1) -> int:
    """SIGKILL a pod's process group (``pid``: its wrapper) and every process carrying its mark,
    wherever it went; how many marked processes were killed.

    ``wait_until`` (a stop in progress): first give what is left until then to end by itself,
    so a script saving a checkpoint on SIGTERM keeps its grace period after its shell is gone.
    """
    tokens = [pod_token(job_id, pod)]
    while wait_until is not None and time.monotonic() < wait_until and proctree.members(tokens):
        time.sleep(poll)
    if pid:
        killpg(pid, signal.SIGKILL)
    return len(proctree.kill_tree(tokens))


def find_pod_process(rc_path: str) -> Optional[Tuple[int, float]]:
    """(pid, create time) of the live pod wrapper whose exit-code file is ``rc_path``, if any."""
    import psutil

    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = proc.info.get("cmdline") or []
        if len(cmdline) >= 2 and cmdline[-1] == rc_path and "job-chain-pod" in cmdline:
            return proc.pid, float(proc.info["create_time"])
    return None


def reason(exc: BaseException) -> str:
    """An exception as one short line for an event (``strerror`` for OS errors)."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."
