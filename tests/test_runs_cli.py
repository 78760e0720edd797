"""The run commands as a user meets them: runs, status, logs, stop, resume and their errors."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any, List

import pytest
from chain_helpers import JOB_CHAIN, cli_env, cli_here, latest_run, make_chain, wait_outcome
from click.testing import CliRunner

from job_chain.cli import cli as job_chain_cli


@pytest.mark.parametrize("command", [["status"], ["logs"], ["stop"], ["resume"], ["status", "--watch"]])
def test_a_mistyped_run_is_an_error_listing_the_known_runs(tmp_path: Path, command: List[str]) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}], "pool-x")
    runs = tmp_path / "chain_info.json.runs"
    (runs / "20261101-101010-abcd").mkdir(parents=True)
    (runs / "20261101-101010-abcd" / "run.json").write_text(json.dumps({"id": "20261101-101010-abcd",
                                                                        "started": 1.0}))
    before = sorted(p.name for p in runs.rglob("*"))
    for bad in ("20261101-101010-abce", "../x"):
        result = CliRunner().invoke(job_chain_cli, [*command, str(chain), "--run", bad])
        assert result.exit_code == 2, result.output
        assert "20261101-101010-abcd" in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
    # nothing written to any run (.file-check.json is the chain file's own check, kept by whatever reads it)
    assert sorted(p.name for p in runs.rglob("*") if p.name != ".file-check.json") == before


def test_a_runs_path_that_is_a_file_is_one_clear_line(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}], "pool-x")
    (tmp_path / "chain_info.json.runs").write_text("not a directory")
    result = CliRunner().invoke(job_chain_cli, ["runs", str(chain)])
    assert result.exit_code == 2 and "is not a directory" in result.output and "move that file away" in result.output


def test_a_damaged_snapshot_is_one_clear_line() -> None:
    result = CliRunner().invoke(job_chain_cli, ["advance", "--run", "r", "--step", "s0", "--exit-code", "0",
                                                "--snapshot", "-", "--host", "127.0.0.1:9", "--ak", "a", "--sk", "b"],
                                input=b"\xff\xfe\x00binary")
    assert result.exit_code == 2 and "snapshot is damaged" in result.output


def test_local_with_explicit_credentials_is_refused(tmp_path: Path) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}], "pool-x")
    result = CliRunner().invoke(job_chain_cli, ["run", str(chain), "--local", "--host", "aihc.bj.baidubce.com"])
    assert result.exit_code == 2 and "--local uses the local server's own host and keys" in result.output


def test_status_explains_a_failure_and_the_hint_works_when_pasted(tmp_path: Path, local_server: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "echo fine"}, {"script": "echo broken-input >&2; exit 3",
                                                            "retries": 1}], local_server.pool)
    assert cli_here("run", str(chain), "--follow", server=local_server).returncode == 1
    status = json.loads(cli_here("status", str(chain), "--json", server=local_server, check=True).stdout)
    step = status["steps"][1]
    assert (status["outcome"], step["status"], step["exitCode"], step["attempt"]) == ("failed", "Failed", 3, 2)
    assert [(a["attempt"], a["status"], a["exitCode"]) for a in step["attempts"]] == [(1, "Failed", 3),
                                                                                      (2, "Failed", 3)]
    assert step["reason"] and step["started"].endswith("+00:00")
    table = cli_here("status", str(chain), server=local_server, check=True).stdout
    hint = table.strip().splitlines()[-1].split("read its log: ", 1)[1]
    assert hint == f"job-chain logs {chain} --run {latest_run(chain)} --step step-1 --attempt 2"
    pasted = cli_here(*shlex.split(hint)[1:], server=local_server, check=True)
    assert "broken-input" in pasted.stdout
    first = cli_here("logs", str(chain), "--step", "1", "--attempt", "1", "--all-pods", server=local_server, check=True)
    assert "[step-1-master-0] broken-input" in first.stdout


def test_a_local_run_is_steered_without_repeating_local(tmp_path: Path) -> None:
    gate = 'test -f "$SHARED/go" || sleep 60\necho step-one-done'
    chain = make_chain(tmp_path, [{"script": "echo step-zero"}, {"script": gate}], "any-pool")
    env = {k: v for k, v in os.environ.items() if k not in ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AK", "SK",
                                                             "JOB_CHAIN_CREDENTIALS")}
    env["JOB_CHAIN_LOCAL_DIR"] = str(tmp_path / "local-server")

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([*JOB_CHAIN, *args], capture_output=True, text=True, env=env, timeout=120)
        assert not check or done.returncode == 0, done.stdout + done.stderr
        return done

    try:
        started = run("run", str(chain), "--local")
        assert f"job-chain status {chain} --watch" in started.stdout
        run_id = latest_run(chain)
        end = time.monotonic() + 60
        while json.loads(run("status", str(chain), "--json").stdout)["steps"][1]["status"] != "Running":
            assert time.monotonic() < end
            time.sleep(0.3)
        again = run("run", str(chain), "--local", check=False)  # one run at a time, unless --force
        assert again.returncode == 2 and run_id in again.stderr and "--force" in again.stderr
        listed = json.loads(run("runs", str(chain), "--json").stdout)
        assert [(r["run"], r["outcome"], r["local"]) for r in listed] == [(run_id, "running", True)]
        assert listed[0]["current"][0]["step"] == 1
        assert "step-zero" in run("logs", str(chain), "--step", "0").stdout
        stopped = run("stop", str(chain))
        hint = stopped.stdout.strip().splitlines()[-1].split("continue it with: ", 1)[1]
        end = time.monotonic() + 30
        while json.loads(run("status", str(chain), "--json").stdout)["outcome"] != "stopped":
            assert time.monotonic() < end
            time.sleep(0.3)
        (tmp_path / "shared" / "go").write_text("yes")
        run(*shlex.split(hint)[1:], "--follow")  # the hint, pasted
        assert json.loads(run("status", str(chain), "--json").stdout)["outcome"] == "succeeded"
    finally:
        subprocess.run([*JOB_CHAIN, "local", "stop"], env=env, capture_output=True, timeout=60)


def test_status_watch_reopens_the_live_view(tmp_path: Path, local_server: Any) -> None:
    gate = 'while [ ! -e "$SHARED/go" ]; do sleep 0.05; done'  # step 0 runs until the watch is open
    chain = make_chain(tmp_path, [{"script": gate}, {"script": "echo b"}], local_server.pool)
    cli_here("run", str(chain), server=local_server, check=True)
    env = cli_env(local_server)
    watch = subprocess.Popen([*JOB_CHAIN, "status", str(chain), "--watch"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = watch.stdout.readline()  # type: ignore[union-attr]
        (tmp_path / "shared" / "go").touch()
        out, err = watch.communicate(timeout=60)
    finally:
        watch.kill()
        watch.wait()
    assert watch.returncode == 0, err
    assert "step-0: Running" in first or "step-0: Pending" in first, first  # it opened on a running run
    assert f"run {latest_run(chain)}: succeeded" in out
    assert "step 1 step-1: Succeeded" in out
    wait_outcome(chain, local_server, "succeeded")
