"""Shared fixtures: a real local AIHC server over real HTTP on a free loopback port.

Use ``local_server`` (fresh server, function scope) or ``local_server_factory(**options)``
for several/differently configured servers::

    def test_x(local_server):
        client = local_server.client()            # job_chain.aihc.AIHCClient
        job = client.create_job(local_server.pool, body)
        local_server.wait_status(job["jobId"], "Succeeded")
        local_server.kill(); local_server.start()  # or .restart() (graceful)

Options of the factory: ``max_running``, ``stop_grace`` (default 2), ``sample_interval``
(default 0.5), ``extra_args``. Teardown stops the server and SIGKILLs leftover pod groups.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Union

import pytest

POOL = "pool-local"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalServer:
    """One ``job-chain local serve`` subprocess and handy ways to talk to it."""

    def __init__(self, state_dir: Path, max_running: Optional[int] = None, stop_grace: float = 2.0,
                 sample_interval: float = 0.5, extra_args: Iterable[str] = ()) -> None:
        self.state_dir = Path(state_dir)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.pool = POOL
        self.args = [sys.executable, "-m", "job_chain", "local", "serve", "--port", str(self.port),
                     "--state-dir", str(self.state_dir), "--sample-interval", str(sample_interval),
                     "--stop-grace", str(stop_grace), *extra_args]
        if max_running:
            self.args += ["--max-running", str(max_running)]
        self.proc: Optional[subprocess.Popen] = None

    # -- keys ------------------------------------------------------------------------------
    @property
    def credentials_file(self) -> str:
        return str(self.state_dir / "credentials.json")

    def _creds(self) -> Dict[str, str]:
        return json.loads(Path(self.credentials_file).read_text())

    @property
    def ak(self) -> str:
        return self._creds()["ak"]

    @property
    def sk(self) -> str:
        return self._creds()["sk"]

    # -- process control -------------------------------------------------------------------
    def start(self, timeout: float = 15.0) -> None:
        """Start the server (same port and state dir) and wait for /healthz."""
        log = open(self.state_dir / "server.log", "ab")  # noqa: SIM115
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {(self.state_dir / 'server.log').read_text()}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=0.5) as resp:
                    if json.loads(resp.read())["pid"] == self.proc.pid:
                        return
            except OSError:
                pass
            time.sleep(0.03)
        raise RuntimeError("local server did not answer /healthz in time")

    def stop(self) -> None:
        """Graceful stop (SIGTERM); pods keep running."""
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

    # -- clients ---------------------------------------------------------------------------
    def client(self, **kwargs: Any) -> Any:
        """Our client (``job_chain.aihc.AIHCClient``), without retries unless asked."""
        from job_chain.aihc.client import AIHCClient
        from job_chain.aihc.credentials import Credentials

        kwargs.setdefault("max_retries", 0)
        return AIHCClient(Credentials(self.url, self.ak, self.sk), **kwargs)

    def sdk(self, ak: Optional[str] = None, sk: Optional[str] = None) -> Any:
        """The official SDK's v1 ``AIHCClient`` pointed at this server."""
        from baidubce.auth.bce_credentials import BceCredentials
        from baidubce.bce_client_configuration import BceClientConfiguration
        from baidubce.services.aihc.aihc_client import AIHCClient

        config = BceClientConfiguration(credentials=BceCredentials(ak or self.ak, sk or self.sk),
                                        endpoint=self.url)
        return AIHCClient(config)

    # -- helpers ---------------------------------------------------------------------------
    def db(self) -> sqlite3.Connection:
        """Read-only look at the server's state (for timings the API does not expose)."""
        conn = sqlite3.connect(f"file:{self.state_dir / 'state.db'}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        return conn

    def pod_pids(self) -> List[int]:
        try:
            with self.db() as conn:
                return [r["pid"] for r in conn.execute("SELECT pid FROM pods WHERE pid IS NOT NULL")]
        except sqlite3.Error:
            return []

    def wait_status(self, job_id: str, statuses: Union[str, Iterable[str]], timeout: float = 15.0,
                    pool: Optional[str] = None) -> Dict[str, Any]:
        """Poll the job until its status is one of ``statuses``; return the job detail."""
        wanted = {statuses} if isinstance(statuses, str) else set(statuses)
        client = self.client()
        deadline = time.monotonic() + timeout
        job: Dict[str, Any] = {}
        while time.monotonic() < deadline:
            job = client.get_job(pool or self.pool, job_id)
            if job["status"] in wanted:
                return job
            time.sleep(0.03)
        raise AssertionError(f"job {job_id} is {job.get('status')}, wanted {sorted(wanted)}")

    def cleanup(self) -> None:
        self.stop()
        for pid in self.pod_pids():
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def job_body(name: str, command: str, replicas: int = 1, **extra: Any) -> Dict[str, Any]:
    """A minimal valid create body."""
    spec = {"image": "local", "command": command, "replicas": replicas}
    spec.update(extra.pop("jobSpec", {}))
    return dict({"name": name, "jobSpec": spec}, **extra)


@pytest.fixture
def local_server_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., LocalServer]]:
    servers: List[LocalServer] = []

    def make(**options: Any) -> LocalServer:
        server = LocalServer(tmp_path_factory.mktemp("local-aihc"), **options)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.cleanup()


@pytest.fixture
def local_server(local_server_factory: Callable[..., LocalServer]) -> LocalServer:
    """A fresh local server (stop grace 2 s, samples every 0.5 s)."""
    return local_server_factory()


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """One server for a whole test module, for tests that need no special configuration."""
    server = LocalServer(tmp_path_factory.mktemp("local-aihc-shared"))
    server.start()
    yield server
    server.cleanup()
