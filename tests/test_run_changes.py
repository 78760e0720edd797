"""Issue 29 (items 6-10): scripts that travel, a run steered from its record, a changed chain file
said in status, fixes applied while a run goes, and history that stays when a step is renamed.

The real CLI (subprocesses) against the real local server over HTTP.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict

from chain_helpers import cli, latest_run, write_chain
from conftest import LocalServer


def test_scripts_named_by_bash_sh_and_dot_slash_travel_and_others_are_warned(
        tmp_path: Path, shared_server: LocalServer) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "prep.sh").write_text("echo prep-ran-in-$(basename \"$0\" | cut -c1-10)\n")
    (tmp_path / "posix.sh").write_text('echo "posix-ran ${BASH_VERSION:-no-bash}"\n')
    (tmp_path / "mark.py").write_text("#!/usr/bin/env python3\nimport sys\nprint('python-ran', sys.version_info[0])\n")
    (tmp_path / "mark.py").chmod(0o755)
    (tmp_path / "common.sh").write_text("X=1\n")
    (tmp_path / "train.py").write_text("print('never shipped')\n")
    (tmp_path / "last.sh").write_text("source ./common.sh\necho last-ran\n")
    jobs = [{"name": n, "jobSpec": {"command": c, "image": "local"}} for n, c in
            (("prep", "bash prep.sh"), ("posix", "sh posix.sh"), ("mark", "./mark.py"), ("last", "last.sh"),
             ("image", "bash -c 'echo image-ran'"))]
    chain = tmp_path / "chain.json"
    chain.write_text(json.dumps({"resourcePoolId": shared_server.pool, "jobs": jobs}))
    checked = cli("validate", str(chain), "--local", server=shared_server)
    assert checked.returncode == 0, checked.stderr
    warned = [line for line in checked.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and warned[0].startswith("warning: jobs[3].jobSpec.command (last.sh line 1): "
                                                     "./common.sh is a file beside the chain"), checked.stderr
    assert "put common.sh on storage the pods mount and name it by its absolute path" in warned[0]
    started = cli("run", str(chain), "--follow", server=shared_server)
    assert started.returncode == 0, started.stderr + started.stdout
    logs = {n: cli("logs", str(chain), "--step", n, server=shared_server).stdout
            for n in ("prep", "posix", "mark", "image")}
    assert "prep-ran-in-script" in logs["prep"], logs["prep"]
    assert "posix-ran no-bash" in logs["posix"], logs["posix"]  # sh X runs with sh, not bash
    assert "python-ran 3" in logs["mark"], logs["mark"]  # ./X runs by its #! line
    assert "image-ran" in logs["image"]
    frozen = json.loads(next((tmp_path / "chain.json.runs").glob("*/revision-1.json")).read_text())
    steps = {s["name"]: s for s in frozen["chain"]["steps"]}
    assert steps["prep"]["body"]["jobSpec"]["command"] == (tmp_path / "prep.sh").read_text()
    assert steps["posix"]["scriptRunner"] == "sh" and steps["posix"]["scriptOrigin"] == "posix.sh"
    assert steps["image"]["body"]["jobSpec"]["command"] == "bash -c 'echo image-ran'"
    os.remove(tmp_path / "prep.sh")  # frozen: the run no longer needs the file


def test_a_script_runs_by_its_runner_in_watch_mode_too(tmp_path: Path) -> None:
    import subprocess

    from job_chain.submit.command import launch, script_runner

    script = "#!/usr/bin/env python3\nprint(6 * 7)\n"
    assert script_runner(script) == "/usr/bin/env python3" and script_runner("#!/bin/bash\n") == "bash"
    assert script_runner("echo\n", "sh") == "sh" and script_runner("echo\n") == "bash"
    done = subprocess.run(["bash", "-c", launch(script, script_runner(script))], capture_output=True, text=True,
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert done.stdout == "42\n", done.stderr


def test_resume_by_run_id_alone_continues_the_run_as_frozen(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "first", "script": "echo first-ran"},
        {"name": "second", "script": 'test -f "$SHARED/ok" || exit 3\necho second-as-frozen'},
    ])
    failed = cli("run", str(chain), "--follow", server=shared_server)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    run_id = latest_run(chain)
    (tmp_path / "second.sh").write_text("echo second-edited")  # the file changed since: not read
    (tmp_path / "shared" / "ok").write_text("")
    dry = cli("resume", "--run", run_id, "--dry-run", server=shared_server)
    assert dry.returncode == 0, dry.stderr
    assert f"run {run_id} continues as frozen (revision 1)" in dry.stdout, dry.stdout
    assert "would submit: second (attempt 2)" in dry.stdout and "changes in the chain file" not in dry.stdout
    resumed = cli("resume", "--run", run_id, "--follow", server=shared_server)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    log = cli("logs", "--run", run_id, "--step", "second", server=shared_server, check=True).stdout
    assert "second-as-frozen" in log and "second-edited" not in log, log
    assert not list((tmp_path / "chain_info.json.runs" / run_id).glob("revision-2.json"))


def gate(name: str) -> str:
    """A script that waits (up to a minute) for ``$SHARED/<name>``."""
    return f'for i in $(seq 600); do test -f "$SHARED/{name}" && break; sleep 0.1; done\necho ran-$JOB_CHAIN_STEP'


def wait_status(chain: Path, server: LocalServer, wanted: Dict[str, str], timeout: float = 60) -> Dict[str, Any]:
    end = time.monotonic() + timeout
    while True:
        status = json.loads(cli("status", str(chain), "--json", server=server, check=True).stdout)
        if all(s["status"] == wanted[s["name"]] for s in status["steps"] if s["name"] in wanted):
            return status
        assert time.monotonic() < end, status
        time.sleep(0.2)


def test_status_says_in_one_line_when_the_chain_file_differs_from_the_run(
        tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "train", "script": gate("go")}, {"name": "evaluate", "script": "echo evaluate-v1"}])
    cli("run", str(chain), server=shared_server, check=True)
    run_id = latest_run(chain)
    try:
        wait_status(chain, shared_server, {"train": "Running"})
        same = cli("status", str(chain), server=shared_server, check=True).stdout
        assert "differs" not in same, same
        (tmp_path / "evaluate.sh").write_text("echo evaluate-v2")
        shown = cli("status", str(chain), server=shared_server, check=True).stdout
        lines = [line for line in shown.splitlines() if "differs" in line]
        assert lines == [f"the chain file differs from run {run_id} (revision 1): ~ evaluate; what a resume would "
                         f"apply: job-chain resume {chain} --run {run_id} --dry-run"], shown
        data = json.loads(cli("status", str(chain), "--json", server=shared_server, check=True).stdout)
        assert [(c["step"], c["kind"], c["what"]) for c in data["fileChanges"]] == [
            ("evaluate", "changed", ["script content (evaluate.sh)"])]
    finally:
        (tmp_path / "shared" / "go").write_text("")
    wait_status(chain, shared_server, {"train": "Succeeded", "evaluate": "Succeeded"})
