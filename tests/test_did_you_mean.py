"""Issue 29 items 15 and 16, as a user sees them through the real CLI (the local server where a run
is needed): every misspelt name gets the same "did you mean" (job_chain.util.suggest), a parameter
typo is listed with the chain file's other problems at once, and the words say what happened:
Ctrl-C on ``logs --follow`` detaches, ``--rerun`` is not a change in the file, a first submission
is not a resubmission."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from chain_helpers import JOB_CHAIN, cli_env, cli_here, make_chain

from job_chain.util.suggest import closest, did_you_mean


def test_one_did_you_mean_matches_without_case_and_skips_long_words() -> None:
    assert closest("OOM", ["infra", "oom", "hang"]) == "oom"
    assert closest("pretrian", ["pretrain", "eval"]) == "pretrain"
    assert closest("resourcePoolID", ["resourcePoolId", "jobs"]) == "resourcePoolId"
    assert did_you_mean("lrr", ["lr", "tag"]) == " (did you mean 'lr'?)"
    assert did_you_mean("zzz", ["lr", "tag"]) == "" and closest("x" * 101, ["x" * 100]) is None


def test_validate_lists_a_parameter_typo_and_a_cause_typo_with_the_other_problems(tmp_path: Path) -> None:
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": "p", "params": {"lr": "1e-4", "tag": "a"}, "jobs": [
        {"name": "a", "jobSpec": {"command": "python train.py --lr ${params.lrr}", "image": "x", "replicas": 1,
                                  "replica": 2}},
        {"name": "b", "jobSpec": {"command": "echo", "image": "x", "replicas": 1},
         "jobChain": {"retries": {"OOM": 2}, "checkpoint": {"dir": "/mnt/pfs/${params.tga}/ckpt"}}}]}))
    done = subprocess.run([*JOB_CHAIN, "validate", str(chain), "--local"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "4 problems" in done.stderr, done.stderr  # all at once, not one round per kind
    assert 'jobs[0].jobSpec.replica: unknown key (did you mean "replicas"?)' in done.stderr
    assert "jobs[1].jobChain.retries.OOM: unknown cause (did you mean 'oom'? known: infra, oom," in done.stderr
    assert "jobs[0].jobSpec.command: ${params.lrr}: no parameter 'lrr' (did you mean 'lr'?)" in done.stderr
    assert "jobs[1].jobChain.checkpoint.dir: ${params.tga}: no parameter 'tga' (did you mean 'tag'?)" in done.stderr


def test_start_rerun_and_the_run_wording(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [{"name": "pretrain", "script": "echo p"}, {"name": "eval", "script": "echo e"}],
                       shared_server.pool)
    typo = cli_here("run", str(chain), "--start", "pretrian", server=shared_server)
    assert typo.returncode == 2 and "--start pretrian: no such step (did you mean 'pretrain'?)" in typo.stderr
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    wrong = cli_here("resume", str(chain), "--rerun", "evl", "--dry-run", server=shared_server)
    assert wrong.returncode == 2 and "(did you mean 'eval'?)" in wrong.stderr

    rerun = cli_here("resume", str(chain), "--rerun", "eval", server=shared_server, check=True).stdout
    assert "changes in the chain file" not in rerun, rerun  # nothing in the file changed
    assert "the file matches the run as frozen (revision 1)\n--rerun: eval re-runs as attempt 2\n" in rerun
    assert "step eval resubmitted as job" in rerun and "(attempt 2)" in rerun

    cli_here("status", str(chain), "--watch", server=shared_server, check=True)
    data = json.loads(chain.read_text())
    (tmp_path / "report.sh").write_text("echo r\n")
    data["jobs"].append({**data["jobs"][1], "name": "report", "jobSpec": {**data["jobs"][1]["jobSpec"],
                                                                           "command": "report.sh"},
                         "jobChain": {"dependsOn": ["eval"]}})
    chain.write_text(json.dumps(data))
    added = cli_here("resume", str(chain), server=shared_server, check=True).stdout
    assert "+ report: added" in added and "step report submitted as job" in added, added  # its first attempt
    assert "resubmitted" not in added
    cli_here("status", str(chain), "--watch", server=shared_server, check=True)


def test_ctrl_c_on_logs_follow_says_detached(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [{"name": "long", "script": "echo started; sleep 60"}], shared_server.pool)
    cli_here("run", str(chain), server=shared_server, check=True)
    env = cli_env(shared_server)
    follow = subprocess.Popen([*JOB_CHAIN, "logs", str(chain), "--follow"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env,  # Ctrl-C as in a terminal, even when
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # pytest ignores it
    try:
        assert follow.stdout is not None and follow.stdout.readline() == "started\n"  # it is following
        follow.send_signal(signal.SIGINT)
        _, err = follow.communicate(timeout=30)
    finally:
        follow.kill()
        follow.wait()
        cli_here("stop", str(chain), server=shared_server)
    assert follow.returncode == 130, err
    assert "detached: the run keeps going by itself; only this view of its log stopped" in err
    assert "aborted" not in err and "Traceback" not in err
