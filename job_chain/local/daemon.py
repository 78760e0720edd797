"""The background local server: start, stop, status, and its credentials file.

``start`` spawns ``python -m job_chain local serve`` in its own session (it outlives the
caller), logs to ``state_dir/server.log`` and returns once ``/healthz`` answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any, Dict, Optional

from job_chain.errors import JobChainError
from job_chain.local.ports import free_port
from job_chain.local.server import AK_ENV, SK_ENV, default_state_dir, paths

START_TIMEOUT = 15.0


def _healthy(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=timeout) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not alive
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return True


def _read_info(state_dir: str) -> Optional[Dict[str, Any]]:
    try:
        with open(paths(state_dir)["server"], encoding="utf-8") as handle:
            info = json.load(handle)
        return info if isinstance(info, dict) else None
    except (OSError, ValueError):
        return None


def running_server(state_dir: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """server.json of a live, answering server in ``state_dir``, else None."""
    info = _read_info(default_state_dir(state_dir))
    if info and _pid_alive(int(info.get("pid", 0))) and _healthy(str(info.get("url"))):
        return info
    return None


def _log_tail(path: str, lines: int = 5) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            tail = [ln.strip() for ln in handle.read().splitlines() if ln.strip()][-lines:]
    except OSError:
        return "(no log)"
    return " | ".join(tail) or "(empty log)"


def start(
    state_dir: Optional[str] = None,
    port: Optional[int] = None,
    host: str = "127.0.0.1",
    max_running: Optional[int] = None,
    stop_grace: Optional[float] = None,
    sample_interval: Optional[float] = None,
    ak: Optional[str] = None,
    sk: Optional[str] = None,
    timeout: float = START_TIMEOUT,
    inject_faults: Optional[float] = None,
    fault_seed: Optional[int] = None,
) -> Dict[str, Any]:
    """Start a background server (or return the one already running); its server.json.

    ``inject_faults``/``fault_seed``: pass ``--inject-faults``/``--fault-seed`` to the server.
    """
    state_dir = default_state_dir(state_dir)
    existing = running_server(state_dir)
    if existing:
        return existing
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    files = paths(state_dir)
    command = [sys.executable, "-m", "job_chain", "local", "serve", "--host", host,
               "--port", str(port or free_port()), "--state-dir", state_dir]
    for flag, value in (("--max-running", max_running), ("--stop-grace", stop_grace),
                        ("--sample-interval", sample_interval),
                        ("--inject-faults", inject_faults or None),
                        ("--fault-seed", fault_seed if inject_faults else None)):
        if value is not None:
            command += [flag, str(value)]
    env = dict(os.environ)
    if ak and sk:  # through the environment, never the command line (ps shows it)
        env[AK_ENV], env[SK_ENV] = ak, sk
    with open(files["log"], "ab") as log:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise JobChainError(f"the local server exited with code {proc.returncode}: "
                                f"{_log_tail(files['log'])} (log: {files['log']})")
        info = _read_info(state_dir)
        if info and info.get("pid") == proc.pid and _healthy(str(info["url"]), timeout=0.5):
            return info
        time.sleep(0.05)
    raise JobChainError(f"the local server did not answer within {timeout:.0f}s: "
                        f"{_log_tail(files['log'])} (log: {files['log']})")


def stop(state_dir: Optional[str] = None, timeout: float = 10.0) -> bool:
    """SIGTERM the running server (pods keep running); False if none was running."""
    info = _read_info(default_state_dir(state_dir))
    pid = int(info.get("pid", 0)) if info else 0
    if not pid or not _pid_alive(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _pid_alive(pid):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return True


def status(state_dir: Optional[str] = None) -> Dict[str, Any]:
    """Whether a server runs, where, and how many jobs it holds by status."""
    from job_chain.local.store import Store

    state_dir = default_state_dir(state_dir)
    files = paths(state_dir)
    info = running_server(state_dir)
    counts: Dict[str, int] = {}
    if os.path.exists(files["db"]):
        store = Store(files["db"])
        try:
            counts = store.count_by_status()
        finally:
            store.close()
    return {
        "running": info is not None,
        "url": info.get("url") if info else None,
        "pid": info.get("pid") if info else None,
        "state_dir": state_dir,
        "credentials_file": files["credentials"],
        "jobs": counts,
    }


def local_credentials_file(start: bool = True, state_dir: Optional[str] = None) -> str:
    """Path of the running local server's credentials file, starting a server if allowed."""
    state_dir = default_state_dir(state_dir)
    info = running_server(state_dir)
    if info is None:
        if not start:
            raise JobChainError(f"no local server is running in {state_dir}; "
                                "start one with: job-chain local start")
        info = globals()["start"](state_dir=state_dir)
    return str(info.get("credentials_file") or paths(state_dir)["credentials"])
