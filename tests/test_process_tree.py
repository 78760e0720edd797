"""Issue 18 item 2: whatever a step started ends when the step ends (timeout, hang, stop, retry).

Real processes: the step's script starts a child that ignores SIGTERM, one that calls setsid,
and a double-forked daemon; each writes its pid. After the watchdog's timeout, a stop, or the
step's own end, none of them may still run — on the local server as under the watchdog.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Iterator, List

import psutil
import pytest
from conftest import LocalServer, job_body

# A step that leaves three kinds of stragglers, then waits (or exits at once with LEAVE=1).
STRAGGLERS = textwrap.dedent("""\
    bash -c 'trap "" TERM; echo $$ > "$PIDS/ignores-term"; exec sleep 300' &
    setsid bash -c 'echo $$ > "$PIDS/setsid"; exec sleep 300' &
    ( setsid bash -c 'echo $$ > "$PIDS/daemon"; exec sleep 300' & ) &
    while [ "$(ls "$PIDS" | wc -l)" -lt 3 ]; do sleep 0.02; done
    echo started
    [ -n "${LEAVE:-}" ] && exit 0
    sleep 300
    """)
KINDS = ["ignores-term", "setsid", "daemon"]


def straggler_pids(pids: Path) -> List[int]:
    deadline = time.monotonic() + 30
    while len(list(pids.iterdir())) < len(KINDS):
        assert time.monotonic() < deadline, "the stragglers did not start"
        time.sleep(0.02)
    time.sleep(0.05)  # each file is written before its sleep starts: let the exec happen
    return [int((pids / kind).read_text()) for kind in KINDS]


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_all_ended(pids: List[int], within: float = 0.0) -> None:
    deadline = time.monotonic() + within
    while True:
        alive = [(kind, pid) for kind, pid in zip(KINDS, pids) if running(pid)]
        if not alive or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for _, pid in alive:  # never leave them behind, whatever the assertion says
        psutil.Process(pid).kill()
    assert alive == [], f"still running after the step ended: {alive}"


@contextlib.contextmanager
def watchdog(tmp_path: Path, timeout: float, env_extra: str = "") -> Iterator[subprocess.Popen]:
    """The watchdog over STRAGGLERS; whatever fails in the test, nothing it started outlives it."""
    script = tmp_path / "step.sh"
    script.write_text(STRAGGLERS)
    pids = tmp_path / "pids"
    pids.mkdir()
    code = ("import sys; from job_chain.hop.watchdog import run; "
            f"sys.exit(run(['bash', {str(script)!r}], {timeout!r}, None, grace=0.5, poll=0.05))")
    proc = subprocess.Popen(["env", f"PIDS={pids}", *([env_extra] if env_extra else []), sys.executable, "-c", code],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        for written in pids.iterdir():
            try:
                straggler = psutil.Process(int(written.read_text()))
                if straggler.cmdline()[-2:] == ["sleep", "300"]:  # still ours, not a pid reused since
                    straggler.kill()
            except (ValueError, psutil.Error):
                pass


def test_a_child_that_ignores_sigterm_or_setsids_ends_with_its_step(tmp_path: Path) -> None:
    """The watchdog's timeout ends the whole tree, not just the group whose leader obeyed TERM."""
    with watchdog(tmp_path, timeout=1.0) as proc:
        pids = straggler_pids(tmp_path / "pids")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 124 and b"killed after 1s (timeout)" in err
        assert_all_ended(pids)  # at once: the watchdog exits only after its tree is gone


def test_a_stopped_watchdog_ends_its_whole_tree(tmp_path: Path) -> None:
    with watchdog(tmp_path, timeout=300.0) as proc:
        pids = straggler_pids(tmp_path / "pids")
        proc.send_signal(signal.SIGTERM)  # what the step wrapper's trap sends on a stop
        proc.communicate(timeout=60)
        assert proc.returncode == 143
        assert_all_ended(pids)


def test_what_a_step_leaves_running_ends_when_it_exits(tmp_path: Path) -> None:
    with watchdog(tmp_path, timeout=300.0, env_extra="LEAVE=1") as proc:
        pids = straggler_pids(tmp_path / "pids")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and out == b"started\n"
        assert_all_ended(pids)


@pytest.mark.parametrize("how", ["stop", "exit"])
def test_a_local_pod_ends_with_everything_it_started(local_server: LocalServer, tmp_path: Path, how: str) -> None:
    """On the local server: a stopped job, and a job whose script exits leaving stragglers."""
    pids = tmp_path / "pids"
    pids.mkdir()
    envs = [{"name": "PIDS", "value": str(pids)}] + ([{"name": "LEAVE", "value": "1"}] if how == "exit" else [])
    client = local_server.client()
    job = client.create_job(local_server.pool, job_body(f"tree-{how}", STRAGGLERS, jobSpec={"envs": envs}))["jobId"]
    found = straggler_pids(pids)
    if how == "stop":
        client.stop_job(local_server.pool, job)
    final = local_server.wait_status(job, ["Stopped", "Succeeded", "Failed"], timeout=30)
    assert final["status"] == ("Stopped" if how == "stop" else "Succeeded")
    assert_all_ended(found)  # already when the status says the pod ended
    if how == "exit":
        events = client.pod_events(local_server.pool, job, f"tree-{how}-master-0")["events"]
        assert any("Killed 3 process(es) the pod left running" in e["message"] for e in events), events


def test_a_timed_out_attempts_orphan_never_writes_beside_its_retry(local_server: LocalServer, tmp_path: Path) -> None:
    """The issue's case: attempt 1 times out; its setsid'd writer must be gone before attempt 2."""
    from chain_helpers import make_chain

    from job_chain import ChainSession, Outcome

    writer = ('if [ ! -e "$SHARED/tried" ]; then touch "$SHARED/tried"\n'
              '  setsid bash -c \'while :; do echo attempt-1 >> "$SHARED/out"; sleep 0.05; done\' &\n'
              '  sleep 300\nfi\n'
              'sleep 1; echo attempt-2 >> "$SHARED/out"\n')
    chain = make_chain(tmp_path, [{"name": "writer", "script": writer}], local_server.pool)
    data = json.loads(chain.read_text())
    data["jobs"][0]["jobChain"] = {"timeout": "2s", "retries": 1}
    chain.write_text(json.dumps(data))
    session = ChainSession.from_file(str(chain), client=local_server.client(max_retries=3))
    run = session.start()
    final = session.wait(run.run_id, timeout=120, interval=0.3)
    assert final.outcome is Outcome.SUCCEEDED
    assert [(a.status, a.exit_code) for a in final.steps[0].attempts] == [("Failed", 124), ("Succeeded", 0)]
    lines = (tmp_path / "shared" / "out").read_text().split()
    assert lines[-1] == "attempt-2" and lines.count("attempt-2") == 1  # nothing of attempt 1 after it
    time.sleep(0.3)
    assert (tmp_path / "shared" / "out").read_text().split()[-1] == "attempt-2"


def test_a_stop_still_gives_a_sigterm_handler_its_grace_period(local_server: LocalServer, tmp_path: Path) -> None:
    """Ending the tree must not cut a stop's grace short: the pod's shells die on SIGTERM at once,
    while their Python child saves its checkpoint for a second before exiting."""
    (tmp_path / "saver.py").write_text(textwrap.dedent("""\
        import signal, sys, time
        def save(*_):
            time.sleep(1)
            open(sys.argv[1], "w").write("saved")
            sys.exit(0)
        signal.signal(signal.SIGTERM, save)
        open(sys.argv[2], "w").write("up")
        time.sleep(300)
        """))
    command = f"{sys.executable} {tmp_path / 'saver.py'} {tmp_path / 'saved'} {tmp_path / 'up'}; echo after"
    client = local_server.client()
    job = client.create_job(local_server.pool, job_body("saver", command))["jobId"]
    deadline = time.monotonic() + 30
    while not (tmp_path / "up").exists():
        assert time.monotonic() < deadline, "the saver did not start"
        time.sleep(0.02)
    client.stop_job(local_server.pool, job)
    local_server.wait_status(job, "Stopped", timeout=30)
    assert (tmp_path / "saved").read_text() == "saved"
