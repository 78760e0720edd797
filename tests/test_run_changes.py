"""Issue 29 (items 6-10): scripts that travel, a run steered from its record, a changed chain file
said in status, fixes applied while a run goes, and history that stays when a step is renamed.

The real CLI (subprocesses) against the real local server over HTTP.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any, Dict

from chain_helpers import latest_run, write_chain
from conftest import LocalServer


class _Done:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def cli(*args: str, server: LocalServer, check: bool = False) -> Any:
    """The real CLI in-process (its output is what is checked), against the test server; ``--follow``
    too (it waits on the run's own jobs, whose hops are real processes in their pods)."""
    from click.testing import CliRunner

    from job_chain.cli import cli as job_chain_cli

    env = {"JOB_CHAIN_CREDENTIALS": server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None}
    result = CliRunner().invoke(job_chain_cli, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    done = _Done(result.exit_code, result.stdout, result.stderr)
    if check:
        assert done.returncode == 0, done.stderr + done.stdout
    return done


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
    mounted = [{"type": "pfs", "name": "pfs", "mountPath": str(tmp_path)}]  # the chain's folder, as on AIHC
    jobs = [{"name": n, "jobSpec": {"command": c, "image": "local"}, "datasources": mounted} for n, c in
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


def test_status_says_the_file_differs_and_resume_applies_it_to_a_going_run_without_a_stop(
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
        train_job = data["steps"][0]["jobId"]
        (tmp_path / "train.sh").write_text(gate("go") + "\necho train-edited")
        # item 7: resume --dry-run reads a going run; resume applies what it can, stopping nothing
        dry = cli("resume", str(chain), "--dry-run", server=shared_server)
        assert dry.returncode == 0, dry.stderr
        assert "  ~ evaluate: changed (script content (evaluate.sh))" in dry.stdout, dry.stdout
        assert ("  ~ train: changed (script content (train.sh)) — it is running: not applied (it runs what it was "
                "submitted with; stop the run and resume to apply it)") in dry.stdout, dry.stdout
        assert f"run {run_id} is going (train is Running): nothing is stopped or submitted" in dry.stdout
        assert not (tmp_path / "chain_info.json.runs" / run_id / "revision-2.json").exists()
        done = cli("resume", str(chain), server=shared_server)
        assert done.returncode == 0 and f"run {run_id} goes on at revision 2" in done.stdout, done.stdout + done.stderr
        after = json.loads(cli("status", str(chain), "--json", server=shared_server, check=True).stdout)
        assert (after["steps"][0]["status"], after["steps"][0]["jobId"], after["revision"]) == ("Running", train_job, 2)
        assert [c["step"] for c in after["fileChanges"]] == ["train"]  # what could not be applied still differs
    finally:
        (tmp_path / "shared" / "go").write_text("")
    wait_status(chain, shared_server, {"train": "Succeeded", "evaluate": "Succeeded"})
    log = cli("logs", str(chain), "--step", "evaluate", server=shared_server, check=True).stdout
    assert "evaluate-v2" in log, log
    assert "train-edited" not in cli("logs", str(chain), "--step", "train", server=shared_server, check=True).stdout


# -- a going run revised while a hop plans from the previous revision (in-process, the memory API) --

def _line_run(tmp_path: Path, steps: Any) -> Any:
    from chain_helpers import make_chain
    from memory_api import MemoryAPI

    from job_chain import ChainSession

    api = MemoryAPI()
    chain = make_chain(tmp_path, steps, "pool-local")
    s = ChainSession.from_file(str(chain), client=api)
    return api, chain, s, s.start()


def _hop(s: Any, api: Any, run: Any, chain: Any, step: str) -> int:
    from job_chain.hop.advance import advance

    return advance(lambda: s.records.run_chain(run.run_id, lambda: None), api, run_id=run.run_id, step=step,
                   attempt=1, exit_code=0, records=s.records, resume_hint="resume")


def test_a_fix_written_while_a_hop_read_the_old_plan_reaches_the_step_once(tmp_path: Path, monkeypatch: Any) -> None:
    from job_chain.hop.advance import _Hop

    api, chain, s, run = _line_run(tmp_path, [{"name": "a", "script": "echo a"}, {"name": "b", "script": "echo b-v1"}])
    (tmp_path / "b.sh").write_text("echo b-v2")
    read_plan, plans = _Hop.read_plan, []

    def resume_meanwhile(hop: Any, *args: Any) -> bool:  # the hop read its plan (revision 1) …
        held = read_plan(hop, *args)
        plans.append(s.revise_running(run.run_id))  # … then the resume wrote revision 2
        return held

    monkeypatch.setattr(_Hop, "read_plan", resume_meanwhile)
    assert _hop(s, api, run, chain, "a") == 0  # a's job runs its tail: the run is going
    [change] = plans[0].changes
    assert (change.name, change.applied, change.note) == ("b", True, "") and plans[0].revision == 2
    b = [c for c in api.creates if c.labels["job-chain/step"] == "b"]
    assert len(b) == 1 and "echo b-v2" in b[0].body["jobSpec"]["command"], b
    assert b[0].client_token == f"jc-{run.run_id}-b-1"  # the token every revision gives it


def test_a_fix_written_after_the_hop_read_the_revision_is_reported_as_maybe_not_applied(
        tmp_path: Path, monkeypatch: Any) -> None:
    from job_chain.hop.advance import _Hop

    api, chain, s, run = _line_run(tmp_path, [{"name": "a", "script": "echo a"}, {"name": "b", "script": "echo b-v1"}])
    (tmp_path / "b.sh").write_text("echo b-v2")
    current, plans = _Hop._current_revision, []

    def resume_meanwhile(hop: Any) -> None:  # a's marker is written and the hop read revision 1 …
        current(hop)
        plans.append(s.revise_running(run.run_id))  # … then the resume wrote revision 2 and looked

    monkeypatch.setattr(_Hop, "_current_revision", resume_meanwhile)
    assert _hop(s, api, run, chain, "a") == 0
    [change] = plans[0].changes
    assert change.note.startswith("it became ready while the change was written: it may run as before"), change
    b = [c for c in api.creates if c.labels["job-chain/step"] == "b"]
    assert len(b) == 1 and "echo b-v1" in b[0].body["jobSpec"]["command"]


def test_two_branches_at_two_revisions_create_their_join_once(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    from chain_helpers import make_chain
    from memory_api import MemoryAPI

    from job_chain import ChainSession
    from job_chain.hop.advance import _Hop
    from job_chain.submit.create import submit_step

    api = MemoryAPI()
    chain = make_chain(tmp_path, [{"name": n, "script": f"echo {n}"} for n in ("p", "q", "r", "x")], "pool-local")
    data = json.loads(chain.read_text())
    for job in data["jobs"][:3]:
        job["jobChain"] = {"dependsOn": []}
    data["jobs"][3]["jobChain"] = {"dependsOn": ["p", "q"]}  # r keeps the run going
    chain.write_text(json.dumps(data))
    s = ChainSession.from_file(str(chain), client=api)
    run = s.start()
    jobs = {c.labels["job-chain/step"]: c.job_id for c in api.creates}
    for name in ("p", "q"):  # p and q end together: both tails write their markers
        api.finish(jobs[name], 0)
        s.records.record_exit(run.run_id, name, 1, 0)
        s.records.record_succeeded(run.run_id, name, 1)
    stale = s.frozen(run.run_id)  # q's tail read revision 1 …
    (tmp_path / "x.sh").write_text("echo x-v2")
    plan = s.revise_running(run.run_id)  # … then the resume wrote revision 2 and looked
    [change] = plan.changes
    assert plan.revision == 2 and change.name == "x" and "it may run as before" in change.note
    assert submit_step(api, stale, "x", run.run_id, 1, records=s.records)["created"] == "yes"  # q's create
    for entry in (chain.parent / (chain.name + ".runs") / run.run_id).glob("step-x-attempt-1*"):
        entry.unlink()  # p looked before q's create was recorded …
    monkeypatch.setattr(_Hop, "read_plan", lambda *args: False)
    assert _hop(s, api, run, chain, "p") == 0  # … and creates x from revision 2: another body, the same token
    # the API refused the second body under the first's token (IdempotentParameterMismatch): one x
    assert "step x was already submitted as job (made by its token from another revision)" in capsys.readouterr().err
    xs = [c for c in api.creates if c.labels["job-chain/step"] == "x"]
    assert len(xs) == 1 and xs[0].client_token == f"jc-{run.run_id}-x-1" and len(api.jobs) == 4  # p, q, r, x


def test_a_renamed_and_a_removed_step_stay_in_the_runs_history(tmp_path: Path, shared_server: LocalServer) -> None:
    gpus = [{"name": "nvidia.com/gpu", "quantity": 8}]
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "prep", "script": "echo prep-ran; sleep 1.2", "resources": gpus},  # (past its second: hours > 0)
        {"name": "convert", "script": 'echo convert-ran; echo "ckpt=/pfs/c" >> "$JOB_CHAIN_OUTPUTS"',
         "resources": gpus},
        {"name": "train", "script": 'test -f "$SHARED/ok" || exit 3\necho "train-ran with $CKPT"'},
    ])
    data = json.loads(chain.read_text())
    data["jobs"][2]["jobSpec"]["envs"].append({"name": "CKPT", "value": "${steps.convert.outputs.ckpt}"})
    chain.write_text(json.dumps(data))
    failed = cli("run", str(chain), "--follow", server=shared_server)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    run_id = latest_run(chain)
    before = json.loads(cli("status", str(chain), "--json", server=shared_server, check=True).stdout)
    data = json.loads(chain.read_text())
    data["jobs"] = data["jobs"][1:]  # prep removed …
    data["jobs"][0]["name"] = "pretrain-team-llama-9b-convert-v4"  # … convert renamed
    (tmp_path / "pretrain-team-llama-9b-convert-v4.sh").write_text("echo convert-ran")
    data["jobs"][0]["jobSpec"]["command"] = "pretrain-team-llama-9b-convert-v4.sh"
    data["jobs"][1]["jobSpec"]["envs"][-1]["value"] = "${steps.pretrain-team-llama-9b-convert-v4.outputs.ckpt}"
    chain.write_text(json.dumps(data))
    (tmp_path / "shared" / "ok").write_text("")
    rename = "convert=pretrain-team-llama-9b-convert-v4"
    dry = cli("resume", str(chain), "--rename", rename, "--dry-run", server=shared_server, check=True).stdout
    assert ("  ~ pretrain-team-llama-9b-convert-v4: renamed (from convert) — it does not run again: its old name "
            "succeeded") in dry, dry
    assert "  - prep: removed — it ran in this run: its history stays" in dry
    assert "would submit: train (attempt 2)" in dry
    resumed = cli("resume", str(chain), "--rename", rename, "--follow", server=shared_server)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = json.loads(cli("status", str(chain), "--json", server=shared_server, check=True).stdout)
    steps = {s["name"]: s for s in after["steps"]}
    assert after["outcome"] == "succeeded"
    assert steps["prep"]["removed"] == "removed in revision 2" and steps["prep"]["status"] == "Succeeded"
    assert steps["convert"]["removed"] == "renamed to pretrain-team-llama-9b-convert-v4 in revision 2"
    assert steps["pretrain-team-llama-9b-convert-v4"]["attempts"] == [] and steps["train"]["attempt"] == 2
    assert after["gpuHours"] == before["gpuHours"] and before["gpuHours"] > 0  # the hours of prep and convert stay
    shown = cli("status", str(chain), server=shared_server, check=True).stdout
    assert "prep (removed in revision 2)" in shown and "convert (renamed to" in shown, shown
    assert "prep-ran" in cli("logs", str(chain), "--step", "prep", server=shared_server, check=True).stdout
    # the renamed step's outputs, written under its old name, reach the step that reads them by its new one
    assert "train-ran with /pfs/c" in cli("logs", str(chain), "--step", "train", server=shared_server,
                                          check=True).stdout
    again = cli("resume", str(chain), "--dry-run", server=shared_server, check=True).stdout
    assert "removed" not in again and "renamed" not in again, again  # said once, kept after
    assert {s["name"] for s in json.loads(cli("status", "--run", run_id, "--json", server=shared_server,
                                              check=True).stdout)["steps"]} >= {"prep", "convert"}
    import requests
    from ui_helpers import Console

    from job_chain.ui.catalog import chain_id

    served = Console([str(tmp_path)])  # the console draws it apart too
    try:
        page = requests.get(f"{served.url}/run/{chain_id(str(chain))}/{run_id}").text
    finally:
        served.close()
    assert '<span class="removed-note">(removed in revision 2)</span>' in page
    assert re.search(r'class="node ok removed"[^>]*><title>step \d+ prep: Succeeded \(removed in revision 2\)', page)
    assert 'class="rowlabel removed"' in page
