"""``job-chain local start/status/stop`` and the daemon helpers that ``--local`` relies on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from job_chain.errors import JobChainError


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "job_chain", "local", *args],
                          capture_output=True, text=True, timeout=30)


def test_start_status_stop(tmp_path: Path) -> None:
    from job_chain.local import daemon

    state = str(tmp_path / "state")
    with pytest.raises(JobChainError, match="the local server is not running"):
        daemon.local_credentials_file(start=False, state_dir=state)
    started = run("start", "--state-dir", state, "--max-running", "2")
    try:
        assert started.returncode == 0, started.stderr
        assert "local AIHC server at http://127.0.0.1:" in started.stdout
        again = run("start", "--state-dir", state)  # a second start reuses the server
        assert again.stdout.splitlines()[0] == started.stdout.splitlines()[0]
        creds_path = daemon.local_credentials_file(start=False, state_dir=state)
        creds = json.loads(Path(creds_path).read_text())
        assert set(creds) == {"host", "ak", "sk"} and creds["host"] in started.stdout

        from job_chain.aihc.client import AIHCClient
        from job_chain.aihc.credentials import resolve_credentials

        client = AIHCClient(resolve_credentials(credentials_file=creds_path, env={}))
        client.create_job("p", {"name": "cli", "jobSpec": {"image": "i", "command": "true"}})
        status = json.loads(run("status", "--state-dir", state, "--json").stdout)
        assert status["running"] is True and status["url"] == creds["host"]
        assert sum(status["jobs"].values()) == 1
        assert creds["sk"] not in run("status", "--state-dir", state).stdout
    finally:
        stopped = run("stop", "--state-dir", state)
    assert stopped.stdout.strip() == "stopped"
    assert json.loads(run("status", "--state-dir", state, "--json").stdout)["running"] is False
    assert run("stop", "--state-dir", state).stdout.strip() == "no local server was running"


def test_start_failure_quotes_the_log(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = run("start", "--state-dir", str(tmp_path / "s"), "--port", str(port))
    assert result.returncode != 0
    assert "cannot listen" in result.stderr and len(result.stderr.strip().splitlines()) == 1
