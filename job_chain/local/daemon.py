"""The background local server: start, stop, status, and its credentials file.

``start`` spawns ``python -m job_chain local serve`` in its own session (it outlives the
caller) with a scrubbed environment, logs to ``state_dir/server.log`` and returns once
``/healthz`` answers with the instance named in ``server.json``.

A server is *running* when the process that wrote ``server.json`` is still alive (pid and
start time, so a reused pid does not count); whether it *answers* is a separate question. A
running server that is slow to answer is busy, not gone: it is used, never started twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any, Dict, Optional, Sequence

from job_chain.errors import JobChainError, UsageError
from job_chain.local import HANG_MINUTE
from job_chain.local.server import (
    default_state_dir,
    keep_keys,
    open_private_log,
    open_store,
    paths,
    prepare_state_dir,
)
from job_chain.util.files import read_json_dict

START_TIMEOUT = 15.0

# All the background server gets of its caller's environment (its jobs inherit it): the
# basics a process needs, never keys (AIHC_*, AK/SK, JOB_CHAIN_LOCAL_SK, ...) or anything else.
SERVER_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ",
              "TMPDIR", "TEMP", "TMP", "PYTHONPATH", "VIRTUAL_ENV", "JOB_CHAIN_LOCAL_DIR")

# loopback only, whatever proxy the environment names
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def server_environment(environ: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The environment ``local start`` gives its server: :data:`SERVER_ENV` and ``LC_*``."""
    environ = dict(os.environ if environ is None else environ)
    return {k: v for k, v in environ.items() if k in SERVER_ENV or k.startswith("LC_")}


def read_info(state_dir: str) -> Optional[Dict[str, Any]]:
    """server.json (pid, create_time, url, instance, ...), or None if missing or unreadable."""
    return read_json_dict(paths(state_dir)["server"])


def answers(info: Dict[str, Any], timeout: float = 1.0) -> bool:
    """Whether the server of ``info`` answers ``/healthz`` as itself (its instance) in time."""
    try:
        with _NO_PROXY.open(f"{info.get('url')}/healthz", timeout=timeout) as response:
            body = json.loads(response.read())
        return isinstance(body, dict) and body.get("instance") == info.get("instance")
    except (OSError, ValueError):
        return False


def _alive(info: Dict[str, Any]) -> bool:
    from job_chain.local.pod_process import process_alive

    try:
        pid, created = int(info.get("pid") or 0), info.get("create_time")
        return process_alive(pid, float(created) if created is not None else None)
    except (TypeError, ValueError):
        return False


def running_server(state_dir: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """server.json of the live server of ``state_dir`` (answering or busy), else None."""
    info = read_info(default_state_dir(state_dir))
    return info if info and _alive(info) else None


def _log_since(path: str, offset: int) -> str:
    """What the server wrote to its log since ``offset``: its error line if it printed one."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            lines = [ln.strip() for ln in handle.read().decode("utf-8", "replace").splitlines()
                     if ln.strip()]
    except OSError:
        return "(no log)"
    errors = [ln.split(": error: ", 1)[1] for ln in lines if ": error: " in ln]
    return errors[-1] if errors else (" | ".join(lines[-5:]) or "(nothing in the log)")


def _end(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server child that failed to start, so none is left that `local stop` cannot see."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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
    pools: Sequence[str] = (),
    queues: Sequence[str] = (),
    schedule_delay: Optional[float] = None,
    hang_minute: Optional[float] = None,
) -> Dict[str, Any]:
    """Start a background server (or return the one already running); its server.json.

    ``port`` None: the server comes back on the port its jobs expect (recorded in its
    credentials file), else a free one. ``ak``/``sk`` reach the server through its private
    credentials file, never its environment or command line.
    ``inject_faults``/``fault_seed``: pass ``--inject-faults``/``--fault-seed`` to the server.
    """
    state_dir = default_state_dir(state_dir)
    existing = running_server(state_dir)
    if existing:
        return existing
    files = prepare_state_dir(state_dir)
    if bool(ak) != bool(sk):
        raise UsageError("pass both --ak and --sk, or neither (a key pair is generated)")
    if ak and sk:
        keep_keys(state_dir, ak, sk)
    command = [sys.executable, "-m", "job_chain", "local", "serve", "--host", host,
               "--state-dir", state_dir]
    for flag, value in (("--port", port), ("--max-running", max_running),
                        ("--stop-grace", stop_grace), ("--sample-interval", sample_interval),
                        ("--inject-faults", inject_faults or None),
                        ("--fault-seed", fault_seed if inject_faults else None),
                        ("--schedule-delay", schedule_delay or None),
                        ("--hang-minute", hang_minute if hang_minute not in (None, HANG_MINUTE) else None)):
        if value is not None:
            command += [flag, str(value)]
    for flag, names in (("--pool", pools), ("--queue", queues)):
        for name in names:
            command += [flag, name]
    with open_private_log(files["log"]) as log:
        offset = log.seek(0, os.SEEK_END)
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env=server_environment())
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise JobChainError(f"the local server did not start: "
                                    f"{_log_since(files['log'], offset)} (log: {files['log']})")
            info = read_info(state_dir)
            if info and info.get("pid") == proc.pid and answers(info, timeout=0.5):
                return info
            time.sleep(0.05)
        raise JobChainError(f"the local server did not answer within {timeout:.0f}s and was "
                            f"stopped: {_log_since(files['log'], offset)} (log: {files['log']})")
    except BaseException:
        _end(proc)
        raise


def stop(state_dir: Optional[str] = None, timeout: float = 10.0) -> bool:
    """SIGTERM the running server (pods keep running); False if none was running."""
    info = running_server(state_dir)
    if info is None:
        return False
    pid = int(info["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(info):
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return True


def status(state_dir: Optional[str] = None) -> Dict[str, Any]:
    """Whether a server runs, where, whether it answers, and its jobs by status."""
    state_dir = default_state_dir(state_dir)
    files = paths(state_dir)
    info = running_server(state_dir)
    counts: Dict[str, int] = {}
    if os.path.exists(files["db"]):
        store = open_store(files["db"])
        try:
            counts = store.count_by_status()
        finally:
            store.close()
    return {
        "running": info is not None,
        "answering": answers(info) if info else None,
        "url": info.get("url") if info else None,
        "pid": info.get("pid") if info else None,
        "state_dir": state_dir,
        "credentials_file": files["credentials"],
        "jobs": counts,
    }


class LocalServerStopped(JobChainError):
    """A read-only command found the local server stopped: it says so instead of starting one."""

    def __init__(self, state_dir: str) -> None:
        import shlex

        flag = "" if state_dir == default_state_dir() else f" --state-dir {shlex.quote(state_dir)}"
        ran = os.path.exists(paths(state_dir)["db"])
        super().__init__(f"the local server {'is stopped' if ran else 'is not running'} (state dir "
                         f"{state_dir}); this command only reads, so it does not start one: "
                         f"start it with 'job-chain local start{flag}' and try again")


def local_credentials_file(start: bool = True, state_dir: Optional[str] = None) -> str:
    """Path of the running local server's credentials file, starting a server if allowed.

    A running server that is slow to answer is used as it is (the client retries): starting
    another one on the same state dir could only fail.
    """
    state_dir = default_state_dir(state_dir)
    info = running_server(state_dir)
    if info is None:
        if not start:
            raise LocalServerStopped(state_dir)
        info = globals()["start"](state_dir=state_dir)
    return str(info.get("credentials_file") or paths(state_dir)["credentials"])
