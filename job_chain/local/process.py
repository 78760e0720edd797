"""One ``job-chain local serve`` child process that its owner can start, crash and restart.

Why: tests, benchmarks and scripted demos need a server on a port and state dir of their own
that they can kill -9 and bring back on the same port, and pods they can clean up afterwards.
The per-user background server of :mod:`job_chain.local.daemon` is none of that.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from job_chain.errors import JobChainError
from job_chain.local.ports import free_port
from job_chain.util.files import read_json_dict


class ServerProcess:
    """``python -m job_chain local serve`` on 127.0.0.1:``port`` with ``state_dir``.

    ``options`` are extra ``local serve`` arguments (``--max-running 8``, ...); ``env`` and
    ``cwd`` are the server's, which its pods inherit.
    """

    def __init__(self, state_dir: Union[str, Path], options: Sequence[str] = (), *, port: Optional[int] = None,
                 env: Optional[Dict[str, str]] = None, cwd: Optional[Union[str, Path]] = None) -> None:
        self.state_dir = Path(state_dir)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "job_chain", "local", "serve", "--host", "127.0.0.1",
                     "--port", str(self.port), "--state-dir", str(self.state_dir), *options]
        self.env = env
        self.cwd = str(cwd) if cwd else None
        self.proc: Optional[subprocess.Popen] = None

    # -- keys ----------------------------------------------------------------------------------
    @property
    def credentials_file(self) -> str:
        return str(self.state_dir / "credentials.json")

    def creds(self) -> Dict[str, str]:
        """The server's host and key pair; an error naming the file when it is missing or damaged
        (the server writes it before it answers: not started yet, or another state dir)."""
        data = read_json_dict(self.credentials_file)
        if data is None:
            raise JobChainError(f"{self.credentials_file} is missing or not a JSON object: is the server of "
                                f"{self.state_dir} started?")
        return data

    @property
    def ak(self) -> str:
        return self.creds()["ak"]

    @property
    def sk(self) -> str:
        return self.creds()["sk"]

    # -- process control -----------------------------------------------------------------------
    def start(self, timeout: float = 20.0) -> None:
        """Spawn the server in its own session; return once it answers as itself.

        Itself: ``server.json`` names this child's pid, and ``/healthz`` echoes the instance
        written there (``/healthz`` never tells a pid).
        """
        from job_chain.local.daemon import answers, read_info
        from job_chain.local.server import open_private_log, prepare_state_dir

        files = prepare_state_dir(str(self.state_dir))
        with open_private_log(files["log"]) as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=self.env, cwd=self.cwd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the local server exited {self.proc.returncode}: "
                                   f"{Path(files['log']).read_text(errors='replace')[-2000:]}")
            info = read_info(str(self.state_dir))
            if info and info.get("pid") == self.proc.pid and answers(info, timeout=0.5):
                return
            time.sleep(0.03)
        self.kill()
        raise RuntimeError(f"the local server did not answer on {self.url} within {timeout:.0f}s")

    def stop(self) -> None:
        """Graceful stop (SIGTERM, SIGKILL after 10 s); pods keep running, as in production."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; pods keep running."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Stop the server, then SIGKILL the process group of every pod still running."""
        try:
            self.stop()
        finally:
            self.kill_pods()

    # -- state -----------------------------------------------------------------------------------
    def db(self) -> sqlite3.Connection:
        """A read-only look at state.db (for timings and pids the API does not expose)."""
        conn = sqlite3.connect(f"file:{self.state_dir / 'state.db'}?mode=ro", uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        return conn

    def pod_processes(self) -> List[Tuple[int, float]]:
        """(pid, create time) of every pod that was started, finished or not."""
        try:
            with self.db() as conn:
                return [(r["pid"], r["create_time"] or 0.0)
                        for r in conn.execute("SELECT pid, create_time FROM pods WHERE pid IS NOT NULL")]
        except sqlite3.Error:
            return []

    def kill_pods(self) -> int:
        """SIGKILL every pod's process group and every process carrying a pod's mark (what its
        script left behind, in the group or out of it with setsid).

        A pid now held by another process is skipped. A pod whose leader is gone is still
        signalled by group id: Linux gives no new process the id of a group that still exists.
        """
        import psutil

        from job_chain.local.pod_process import pod_token
        from job_chain.util import proctree

        try:
            with self.db() as conn:
                tokens = [pod_token(r["job_id"], r["name"]) for r in conn.execute("SELECT job_id, name FROM pods")]
        except sqlite3.Error:
            tokens = []
        killed = len(proctree.kill_tree(tokens))
        for pid, create_time in self.pod_processes():
            try:
                if create_time and abs(psutil.Process(pid).create_time() - create_time) > 0.5:
                    continue
            except psutil.Error:
                pass
            try:
                os.killpg(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        return killed

    def client(self, **kwargs: Any) -> Any:
        """job-chain's own AIHCClient for this server (no retries unless asked)."""
        from job_chain.aihc.client import AIHCClient
        from job_chain.aihc.credentials import Credentials

        kwargs.setdefault("max_retries", 0)
        data = self.creds()
        return AIHCClient(Credentials(self.url, data["ak"], data["sk"]), **kwargs)
