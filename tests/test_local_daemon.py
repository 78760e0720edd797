"""The local server as a process: where it comes back, what it inherits, what it bounds,
which state dirs it refuses, and that a failed start leaves nothing running.

Real processes throughout: ``job-chain local start/stop/serve/status`` in subprocesses, jobs
on the background server, raw sockets on loopback.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Dict, Iterator, List, Optional

import psutil
import pytest
from chain_helpers import cli, cli_here, make_chain, wait_outcome
from conftest import LocalServer, job_body

from job_chain.aihc.client import AIHCClient
from job_chain.aihc.credentials import resolve_credentials
from job_chain.errors import JobChainError
from job_chain.local import daemon
from job_chain.local.process import ServerProcess

JOB_CHAIN = [sys.executable, "-m", "job_chain"]
CREDENTIAL_ENV = ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AIHC_SESSION_TOKEN", "AK", "SK", "HOST", "JOB_CHAIN_CREDENTIALS",
                  "JOB_CHAIN_LOCAL_AK", "JOB_CHAIN_LOCAL_SK")


def clean_env(**extra: str) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIAL_ENV}
    env.update(extra)
    return env


def local(*args: str, env: Optional[Dict[str, str]] = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*JOB_CHAIN, "local", *args], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else clean_env())


def servers_of(state: Path) -> List[psutil.Process]:
    """Every ``local serve`` process working on ``state``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if "serve" in cmdline and str(state) in cmdline:
            found.append(proc)
    return found


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    """A state dir for a background server; teardown stops it and kills its pods."""
    path = tmp_path / "state"
    yield path
    daemon.stop(str(path))
    if (path / "state.db").is_file():
        ServerProcess(path).kill_pods()
    for proc in servers_of(path):  # whatever a failed test left behind
        proc.kill()


def info_of(state: Path) -> Dict[str, object]:
    return json.loads((state / "server.json").read_text())


def wait_gone(pid: int) -> None:
    end = time.monotonic() + 20
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < end, f"process {pid} did not end"
        time.sleep(0.02)


# -- item 1: a restarted server comes back where its jobs expect it -----------------------------

RAN = 'echo "$AIHC_JOB_NAME" >> "$SHARED/ran"'


@pytest.mark.parametrize("how", ["stop", "kill-9"])
def test_a_chain_outlives_a_restart_of_the_background_server(tmp_path: Path, state: Path, how: str) -> None:
    """Step 0 is running when the server is stopped (or SIGKILLed) and started again: the
    server comes back on its port, so step 0's advance reaches it and step 1 runs once."""
    env = {"JOB_CHAIN_LOCAL_DIR": str(state)}
    started = local("start", env=clean_env(**env))
    assert started.returncode == 0, started.stderr
    url = info_of(state)["url"]
    shared = tmp_path / "shared"
    hold = f'touch "$SHARED/started"; while [ ! -e "$SHARED/go" ]; do sleep 0.05; done; {RAN}'
    chain = make_chain(tmp_path, [{"script": hold}, {"script": RAN}], "pool-local")
    server = SimpleNamespace(credentials_file=str(state / "credentials.json"))
    try:
        done = cli("run", str(chain), "--local", server=server, **env)
        assert done.returncode == 0, done.stdout + done.stderr
        end = time.monotonic() + 30
        while not (shared / "started").exists():
            assert time.monotonic() < end, "step 0 did not start"
            time.sleep(0.05)
        if how == "stop":
            assert local("stop", env=clean_env(**env)).stdout.strip() == "stopped"
        else:
            pid = int(info_of(state)["pid"])
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid)  # its server.json stays behind, stale
        again = local("start", env=clean_env(**env))
        assert again.returncode == 0, again.stderr
        assert info_of(state)["url"] == url and f"at {url} " in again.stdout
    finally:
        (shared / "go").touch()
    status = wait_outcome(chain, server, "succeeded", timeout=90)
    assert [s["status"] for s in status["steps"]] == ["Succeeded", "Succeeded"]
    ran = (shared / "ran").read_text().split()
    assert len(ran) == 2 and len(set(ran)) == 2  # each step ran exactly once
    with ServerProcess(state).db() as conn:
        names = [r["name"] for r in conn.execute("SELECT name FROM jobs")]
    assert sorted(names) == ["step-0", "step-1"]  # and was created once


def test_a_taken_port_is_refused_in_one_line_and_port_moves_it(state: Path) -> None:
    assert local("start", "--state-dir", str(state)).returncode == 0
    port = int(str(info_of(state)["url"]).rsplit(":", 1)[1])
    assert local("stop", "--state-dir", str(state)).returncode == 0
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen(1)
        refused = local("start", "--state-dir", str(state))
        assert refused.returncode == 1, refused.stdout
        line = refused.stderr.strip()
        assert len(line.splitlines()) == 1 and "Traceback" not in line
        assert f"127.0.0.1:{port}" in line and str(state / "credentials.json") in line
        assert "--port N" in line and "lose their server" in line
        assert not servers_of(state)
        moved = local("start", "--state-dir", str(state), "--port", "0")  # deliberately elsewhere
        assert moved.returncode == 0, moved.stderr
    new_url = str(info_of(state)["url"])
    assert not new_url.endswith(f":{port}")
    assert json.loads((state / "credentials.json").read_text())["host"] == new_url


# -- item 4: nothing of the caller's environment reaches the server -----------------------------

def test_the_server_and_its_jobs_hold_no_secret_of_the_caller(state: Path) -> None:
    values = {name: f"{name.lower()}-{secrets.token_hex(12)}" for name in CREDENTIAL_ENV}
    started = local("start", "--state-dir", str(state), env=clean_env(**values))
    assert started.returncode == 0, started.stderr
    info = info_of(state)
    creds = json.loads((state / "credentials.json").read_text())
    # --ak/--sk from JOB_CHAIN_LOCAL_AK/SK reached the server through its private file
    assert (creds["ak"], creds["sk"]) == (values["JOB_CHAIN_LOCAL_AK"], values["JOB_CHAIN_LOCAL_SK"])
    server = psutil.Process(int(info["pid"]))
    environ = Path(f"/proc/{server.pid}/environ").read_bytes().decode(errors="replace")
    cmdline = " ".join(server.cmdline())
    for name, value in values.items():
        assert value not in environ and value not in cmdline, name
    assert "PATH=" in environ

    health = healthz(str(info["url"]))
    assert set(health) == {"status", "instance"} and str(server.pid) not in json.dumps(health)

    # a job that reads every environment it can finds none of the values
    found = state.parent / "found"
    pattern = " ".join(f"-e {v}" for v in values.values())
    command = f"cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c {pattern} > {found}; true"
    client = AIHCClient(resolve_credentials(credentials_file=str(state / "credentials.json"), env={}))
    job_id = client.create_job("pool-local", job_body("snoop", command))["jobId"]
    end = time.monotonic() + 30
    while client.get_job("pool-local", job_id)["status"] != "Succeeded":
        assert time.monotonic() < end
        time.sleep(0.05)
    assert found.read_text().strip() == "0"


def healthz(url: str) -> Dict[str, object]:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
    with opener.open(url + "/healthz", timeout=10) as response:
        return json.loads(response.read())


# -- item 3: bounded request heads, idle connections, busy is not gone --------------------------

def test_a_huge_request_head_is_refused_without_growing_the_server(local_server: LocalServer) -> None:
    server = psutil.Process(local_server.proc.pid)
    before = server.memory_info().rss
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", local_server.port), timeout=10) as sock:
            answer = b""
            try:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
                chunk = b"a" * (1 << 20)
                for _ in range(20):  # 20 MB of one header
                    sock.sendall(chunk)
                sock.sendall(b"\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                answer = sock.recv(4096)
            except ConnectionResetError:
                pass
        status = answer.split(b" ", 2)[1] if answer else b"closed"
        assert status in (b"400", b"431", b"closed"), answer[:200]
    assert server.memory_info().rss - before < 20 * (1 << 20)
    assert healthz(local_server.url)["status"] == "ok"


def closed_by_server(sock: socket.socket, trickle: bool, bound: float = 30) -> bool:
    """Whether the server closes ``sock`` within ``bound`` seconds (sending a byte of an
    unfinished header every 0.3 s if ``trickle``)."""
    sock.settimeout(0.3)
    end = time.monotonic() + bound
    while time.monotonic() < end:
        try:
            if trickle:
                sock.sendall(b"a")
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


def test_idle_and_trickling_connections_are_closed(local_server: LocalServer) -> None:
    silent = socket.create_connection(("127.0.0.1", local_server.port), timeout=10)
    trickling = socket.create_connection(("127.0.0.1", local_server.port), timeout=10)
    try:
        trickling.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        assert closed_by_server(silent, trickle=False)
        assert closed_by_server(trickling, trickle=True)
    finally:
        silent.close()
        trickling.close()


def test_a_busy_server_is_used_not_taken_for_another(state: Path) -> None:
    """A server that does not answer in time (here: SIGSTOPped) is busy, not gone: `local start`
    reports it instead of starting a second server that could only fail on the lock."""
    assert local("start", "--state-dir", str(state)).returncode == 0
    info = info_of(state)
    pid = int(info["pid"])
    os.kill(pid, signal.SIGSTOP)
    try:
        again = local("start", "--state-dir", str(state))
        assert again.returncode == 0, again.stderr
        assert f"at {info['url']} (pid {pid})" in again.stdout and "did not answer" in again.stdout
        status = json.loads(local("status", "--state-dir", str(state), "--json").stdout)
        assert status["running"] is True and status["answering"] is False
        assert daemon.local_credentials_file(start=True, state_dir=str(state)) == str(state / "credentials.json")
        assert [p.pid for p in servers_of(state)] == [pid]
    finally:
        os.kill(pid, signal.SIGCONT)
    assert json.loads(local("status", "--state-dir", str(state), "--json").stdout)["answering"] is True


# -- item 11: private state dir and log --------------------------------------------------------

def test_state_dir_and_server_log_are_private(state: Path, tmp_path: Path) -> None:
    for directory in (state, tmp_path / "process"):
        directory.mkdir(mode=0o755)
        directory.chmod(0o755)
        (directory / "server.log").write_text("an old line\n")
        (directory / "server.log").chmod(0o644)
    assert local("start", "--state-dir", str(state)).returncode == 0
    own = ServerProcess(tmp_path / "process")
    own.start()
    try:
        for directory in (state, tmp_path / "process"):
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
            assert stat.S_IMODE((directory / "server.log").stat().st_mode) == 0o600, directory
            assert (directory / "server.log").read_text().startswith("an old line\n")
    finally:
        own.cleanup()


# -- item 12: a broken layout is refused, a failed start leaves no server -----------------------

@pytest.mark.parametrize("broken", ["server.json", "credentials.json", "state.db", "jobs"])
def test_a_broken_state_dir_is_refused_and_leaves_no_server(state: Path, broken: str) -> None:
    state.mkdir()
    path = state / broken
    if broken == "jobs":
        path.write_text("not a directory\n")
    else:
        path.mkdir()
    for command in ("start", "serve"):
        done = local(command, "--state-dir", str(state), timeout=30)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1 and "internal error" not in line, line
        assert str(path) in line and f"mv {path} {path}.bak" in line, line
        assert not servers_of(state)


def test_a_start_that_fails_stops_its_server(state: Path) -> None:
    with pytest.raises(JobChainError, match="did not answer within 0s and was stopped"):
        daemon.start(str(state), timeout=0)
    assert not servers_of(state)


# -- item 15: a corrupt state.db --------------------------------------------------------------

def test_a_corrupt_state_db_is_one_clear_line(state: Path) -> None:
    state.mkdir()
    db = state / "state.db"
    db.write_bytes(b"certainly not SQLite\n" * 300)
    for command in ("start", "serve", "status"):
        done = local(command, "--state-dir", str(state), timeout=30)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        line = done.stderr.strip()
        assert len(line.splitlines()) == 1 and "internal error" not in line, line
        assert f"{db} is not a job-chain state database or is damaged" in line, line
        assert f"mv {db} {db}.broken" in line
        assert not servers_of(state)
    assert db.read_bytes() == b"certainly not SQLite\n" * 300  # left as it was


def test_server_environment_is_a_short_list_of_basics() -> None:
    given = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C.UTF-8", "TMPDIR": "/t", "PYTHONPATH": "/p",
             "JOB_CHAIN_LOCAL_DIR": "/s", "http_proxy": "http://user:pw@proxy:3128", "MY_TOKEN": "x",
             **{name: "secret" for name in CREDENTIAL_ENV}}
    assert daemon.server_environment(given) == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C.UTF-8", "TMPDIR": "/t",
                                                "PYTHONPATH": "/p", "JOB_CHAIN_LOCAL_DIR": "/s"}


def test_a_read_only_command_says_the_local_server_is_stopped_instead_of_starting_it(
        tmp_path: Path, state: Path) -> None:
    """Issue 18 item 16: status/runs/logs, and the read-only `jobs`/`pools` commands, after `local stop`
    say so; run and resume start it again."""
    env = {"JOB_CHAIN_LOCAL_DIR": str(state)}
    chain = make_chain(tmp_path, [{"script": "echo done"}], "pool-local")
    server = SimpleNamespace(credentials_file=str(state / "credentials.json"))
    assert local("start", env=clean_env(**env)).returncode == 0
    done = cli("run", str(chain), "--local", "--follow", server=server, **env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert local("stop", env=clean_env(**env)).stdout.strip() == "stopped"
    for args in (["status", str(chain)], ["logs", str(chain)], ["status", str(chain), "--local"],
                 ["jobs", "list", "--local", "--pool", "pool-local"], ["pools", "--local"]):
        refused = cli_here(*args, server=server, **env)
        assert refused.returncode == 1, refused.stdout
        assert "the local server is stopped" in refused.stderr
        assert "start it with 'job-chain local start' and try again" in refused.stderr
        assert daemon.running_server(str(state)) is None  # and it was not started behind the user's back
    listed = cli_here("runs", str(chain), "--json", server=server, **env)
    assert "the local server is stopped" in json.loads(listed.stdout)[0]["reason"]
    assert daemon.running_server(str(state)) is None
    again = cli("run", str(chain), "--local", "--follow", server=server, **env)  # submitting starts it
    assert again.returncode == 0, again.stdout + again.stderr
    assert cli_here("status", str(chain), server=server, **env).returncode == 0


def test_the_request_head_bound_is_the_documented_64_kib_exactly(local_server: LocalServer) -> None:
    # h11 bounds a head only while it is incomplete: one that arrived whole passed at 80-128 KiB
    from job_chain.local.server import MAX_HEAD

    docs = (Path(__file__).resolve().parent.parent / "docs" / "local-server.md").read_text()
    assert f"headers over {MAX_HEAD // 1024} KiB is refused" in docs

    def status_for(size: int) -> bytes:
        start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
        head = start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"
        assert len(head) == size
        with socket.create_connection(("127.0.0.1", local_server.port), timeout=10) as sock:
            sock.sendall(head)
            answer = sock.recv(4096)
        return answer.split(b" ", 2)[1]

    assert status_for(MAX_HEAD) == b"200"
    for size in (MAX_HEAD + 1, 80 * 1024, 100 * 1024, 127 * 1024):
        assert status_for(size) == b"400", size
    assert healthz(local_server.url)["status"] == "ok"
