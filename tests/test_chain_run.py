"""Chains on the real local server over real HTTP: exactly once, failure-aware, secret-free.

One server for the module (each test reads its own run's jobs), a fresh one where a test counts
every job the server holds; the CLI in this process where what it says is the subject, a real
process where a process is (``logs --follow`` interrupted, ``advance`` as a job runs it, ``--advance
watch``, ``--local``'s background server)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from chain_helpers import (
    EXAMPLE_USER,
    EXAMPLES,
    JOB_CHAIN,
    cli,
    cli_env,
    cli_here,
    credentials_env,
    labels,
    latest_run,
    make_chain,
    run_jobs,
    wait_outcome,
)

from job_chain.engine.jobs import LABEL_ATTEMPT, LABEL_STEP


def test_hello_chain_passes_data_and_runs_each_step_once(tmp_path: Path, shared_server: Any) -> None:
    data_dir = tmp_path / "pfs"
    demo = data_dir / "hello"  # on the storage the steps mount, as on AIHC (its pods read the record)
    shutil.copytree(EXAMPLES / "hello", demo)
    text = (demo / "chain_info.json").read_text().replace("/tmp/job-chain-hello", str(data_dir))
    (demo / "chain_info.json").write_text(text.replace("your-resource-pool-id", shared_server.pool))
    done = cli_here("run", str(demo / "chain_info.json"), "--follow", server=shared_server)
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = latest_run(demo / "chain_info.json")
    jobs = run_jobs(shared_server, run_id)
    names = [job["name"] for job in json.loads((demo / "chain_info.json").read_text())["jobs"]]
    assert sorted(labels(j)[LABEL_STEP] for j in jobs) == sorted(names) and len(names) == 3
    assert all(j["status"] == "Succeeded" for j in jobs)
    assert (data_dir / EXAMPLE_USER / "result.txt").read_text().strip() == "5050"
    assert f"run {run_id}: succeeded" in done.stdout


def test_failing_step_stops_the_chain(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "echo one"}, {"script": "echo failing >&2; exit 4"},
                                  {"script": "echo never"}], shared_server.pool)
    done = cli_here("run", str(chain), "--follow", server=shared_server)
    assert done.returncode == 1
    status = wait_outcome(chain, shared_server, "failed")
    assert [s["status"] for s in status["steps"]] == ["Succeeded", "Failed", "not submitted"]
    job = shared_server.client().get_job(shared_server.pool, status["steps"][1]["jobId"])
    assert job["status"] == "Failed"
    logs = cli_here("logs", str(chain), "--step", "1", server=shared_server, check=True)
    assert "failing" in logs.stdout
    assert "the chain stops here" in logs.stdout


def test_retries_resubmit_a_failed_step(tmp_path: Path, shared_server: Any) -> None:
    flaky = 'if [ ! -f "$SHARED/tried" ]; then touch "$SHARED/tried"; exit 7; fi\necho ok'
    chain = make_chain(tmp_path, [{"script": flaky, "retries": 2}, {"script": "echo after"}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    jobs = run_jobs(shared_server, latest_run(chain))
    attempts = sorted((labels(j)[LABEL_STEP], labels(j)[LABEL_ATTEMPT], j["status"]) for j in jobs)
    assert attempts == [("step-0", "1", "Failed"), ("step-0", "2", "Succeeded"), ("step-1", "1", "Succeeded")]


def test_start_index_and_positional_index(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "exit 9"}, {"script": "echo b"}, {"script": "echo c"}],
                       shared_server.pool)
    cli_here("run", str(chain), "1", "--follow", server=shared_server, check=True)
    status = wait_outcome(chain, shared_server, "succeeded")
    assert [s["status"] for s in status["steps"]] == ["skipped", "Succeeded", "Succeeded"]
    cli_here("run", str(chain), "--start", "2", "--follow", server=shared_server, check=True)
    assert len(run_jobs(shared_server, latest_run(chain))) == 1
    bad = cli_here("run", str(chain), "--start", "3", server=shared_server)
    assert bad.returncode == 2 and "has 3 steps, numbered 0 to 2" in bad.stderr


def test_resume_starts_at_the_first_unsucceeded_step(tmp_path: Path, shared_server: Any) -> None:
    gate = 'test -f "$SHARED/fixed" || { echo "not fixed yet" >&2; exit 1; }'
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": gate}, {"script": "echo c"}], shared_server.pool)
    assert cli_here("run", str(chain), "--follow", server=shared_server).returncode == 1
    (tmp_path / "shared" / "fixed").write_text("yes")
    cli_here("resume", str(chain), "--follow", server=shared_server, check=True)
    jobs = run_jobs(shared_server, latest_run(chain))
    steps = sorted((labels(j)[LABEL_STEP], labels(j)[LABEL_ATTEMPT]) for j in jobs)
    assert steps == [("step-0", "1"), ("step-1", "1"), ("step-1", "2"), ("step-2", "1")]
    again = cli_here("resume", str(chain), server=shared_server, check=True)
    assert "nothing to resume" in again.stdout


def test_stop_stops_the_running_step_and_no_later_step_starts(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "sleep 60"}, {"script": "echo never"}], shared_server.pool)
    cli_here("run", str(chain), server=shared_server, check=True)
    wait_outcome(chain, shared_server, "running")
    end = time.time() + 20
    while json.loads(cli_here("status", str(chain), "--json", server=shared_server).stdout)["steps"][0]["status"] \
            != "Running":
        assert time.time() < end
        time.sleep(0.2)
    cli_here("stop", str(chain), server=shared_server, check=True)
    status = wait_outcome(chain, shared_server, "stopped", timeout=30)
    assert [s["status"] for s in status["steps"]] == ["Stopped", "not submitted"]


def test_repeated_advance_creates_the_next_step_once(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    run_id = latest_run(chain)
    # a pod restart, a fault-tolerance re-run or a retried call: advance again for step 0
    advance = ("advance", str(chain), "--run", run_id, "--step", "step-0", "--exit-code", "0")
    for _ in range(3):
        again = cli(*advance, server=shared_server)
        assert again.returncode == 0, again.stderr
        assert "already submitted" in again.stderr
    # even with the record gone, the client token keeps it to one job
    for entry in (chain.parent / (chain.name + ".runs") / run_id).glob("step-step-1-*"):
        entry.unlink()
    cli(*advance, server=shared_server, check=True)
    steps = [labels(j)[LABEL_STEP] for j in run_jobs(shared_server, run_id)]
    assert sorted(steps) == ["step-0", "step-1"]


def test_two_replica_step_advances_once(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [
        {"script": 'echo "rank $RANK"; if [ "$RANK" = 1 ]; then sleep 1; fi; touch "$SHARED/done-$RANK"',
         "replicas": 2},
        {"script": 'test -f "$SHARED/done-0" && test -f "$SHARED/done-1"'},
    ], shared_server.pool)
    cli_here("run", str(chain), "--follow", server=shared_server, check=True)
    jobs = run_jobs(shared_server, latest_run(chain))
    assert sorted(labels(j)[LABEL_STEP] for j in jobs) == ["step-0", "step-1"]
    assert all(j["status"] == "Succeeded" for j in jobs)


def test_no_job_contains_the_secret_key(tmp_path: Path, shared_server: Any) -> None:
    api = {"host": shared_server.url, "ak": shared_server.ak, "sk": shared_server.sk}
    chain = make_chain(tmp_path, [{"script": "env"}, {"script": "echo two"}], shared_server.pool, api_config=api)
    env = dict(os.environ)
    env.pop("JOB_CHAIN_CREDENTIALS", None)
    done = subprocess.run([*JOB_CHAIN, "run", str(chain), "--follow"], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in env.items() if k not in ("AIHC_HOST", "AIHC_AK",
                                                                                      "AIHC_SK")})
    assert done.returncode == 0, done.stderr
    client = shared_server.client()
    for job in run_jobs(shared_server, latest_run(chain)):
        detail = client.get_job(shared_server.pool, job["jobId"])
        assert shared_server.sk not in json.dumps(detail) + json.dumps(job)
        logs = "".join(client.pod_logs(shared_server.pool, job["jobId"], f"{job['name']}-master-0")["logs"])
        assert shared_server.sk not in logs
    assert shared_server.sk not in done.stdout + done.stderr


def test_bad_chain_submits_nothing(tmp_path: Path, local_server: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}], local_server.pool)
    data = json.loads(chain.read_text())
    data["jobs"][0]["jobSpec"]["image"] = ""
    chain.write_text(json.dumps(data))
    before = len(run_jobs(local_server))
    done = cli_here("run", str(chain), server=local_server)
    assert done.returncode == 2
    assert "jobs[0].jobSpec.image: must not be empty" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(run_jobs(local_server)) == before


def test_dry_run_redacts_and_submits_nothing(tmp_path: Path, local_server: Any) -> None:
    api = {"host": local_server.url, "ak": local_server.ak, "sk": local_server.sk}
    chain = make_chain(tmp_path, [{"script": "echo a"}], local_server.pool, api_config=api)
    before = len(run_jobs(local_server))
    done = cli_here("run", str(chain), "--dry-run", server=local_server, check=True)
    assert "POST " + local_server.url + "/api/v1/aijobs" in done.stdout
    assert json.loads(done.stdout.split("\n", 1)[1])["name"] == "step-0"
    assert local_server.sk not in done.stdout + done.stderr
    assert len(run_jobs(local_server)) == before


def test_watch_mode_advances_from_this_process(tmp_path: Path, shared_server: Any) -> None:
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}], shared_server.pool)
    cli("run", str(chain), "--advance", "watch", server=shared_server, check=True)
    jobs = run_jobs(shared_server, latest_run(chain))
    assert sorted(labels(j)[LABEL_STEP] for j in jobs) == ["step-0", "step-1"]
    assert all("job-chain" not in j["command"] for j in jobs)  # plain scripts, no tail


def test_inline_mode_needs_no_chain_file_in_the_job(tmp_path: Path, shared_server: Any) -> None:
    chain = credentials_env(make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}, {"script": "echo c"}],
                                       shared_server.pool), shared_server)
    cli_here("run", str(chain), "--inline", server=shared_server, check=True)
    moved = chain.with_name("elsewhere.json")
    runs_dir = chain.parent / (chain.name + ".runs")
    chain.rename(moved)  # the jobs must not need it
    end = time.time() + 60
    while True:
        jobs = run_jobs(shared_server, sorted(runs_dir.iterdir())[-1].name)
        if len(jobs) == 3 and all(j["status"] == "Succeeded" for j in jobs):
            break
        assert not any(j["status"] == "Failed" for j in jobs), jobs
        assert time.time() < end, jobs
        time.sleep(0.3)


def test_logs_follow_goes_through_every_later_step(tmp_path: Path, shared_server: Any) -> None:
    flaky = 'if [ ! -f "$SHARED/tried" ]; then touch "$SHARED/tried"; echo first-try; exit 7; fi\necho second-try'
    gate = 'while [ ! -e "$SHARED/go" ]; do sleep 0.05; done; echo from-step-0'  # ends once logs follows it
    chain = make_chain(tmp_path, [{"script": gate}, {"script": flaky, "retries": 1},
                                  {"script": "echo from-step-2; exit 5"}], shared_server.pool)
    cli_here("run", str(chain), server=shared_server, check=True)
    env = cli_env(shared_server)
    follow = subprocess.Popen([*JOB_CHAIN, "logs", str(chain), "--follow"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    try:
        header = follow.stderr.readline()  # type: ignore[union-attr]
        (tmp_path / "shared" / "go").touch()
        out, err = follow.communicate(timeout=60)
    finally:
        follow.kill()
        follow.wait()
    assert follow.returncode == 1, header + err  # the run failed at its last step
    assert header.startswith("# step 0 "), header  # it was following step 0 before step 0 printed
    assert out.index("from-step-0") < out.index("first-try") < out.index("second-try") < out.index("from-step-2")
    assert err.count("# step 1 ") == 2 and f"# run {latest_run(chain)}: failed" in err


def test_local_flag_keeps_every_step_off_cluster_paths(tmp_path: Path) -> None:
    """--local on a chain written for a cluster: step 0 *and* the steps advanced from inside jobs run here."""
    chain = make_chain(tmp_path, [{"script": "echo a"}, {"script": "echo b"}, {"script": "echo c"}], "cce-pool",
                       scrips_path="/root/pfs/no-such-runtime", config_path="/root/pfs/no-such/chain_info.json",
                       api_config={"host": "aihc.bj.baidubce.com"})
    env = {k: v for k, v in os.environ.items() if k not in ("AIHC_HOST", "AIHC_AK", "AIHC_SK", "AK", "SK",
                                                             "JOB_CHAIN_CREDENTIALS")}
    env["JOB_CHAIN_LOCAL_DIR"] = str(tmp_path / "local-server")
    try:
        done = subprocess.run([*JOB_CHAIN, "run", str(chain), "--local", "--follow"], capture_output=True,
                              text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        status = subprocess.run([*JOB_CHAIN, "status", str(chain), "--local", "--json"], capture_output=True,
                                text=True, env=env, timeout=60)
        assert [s["status"] for s in json.loads(status.stdout)["steps"]] == ["Succeeded"] * 3
    finally:
        subprocess.run([*JOB_CHAIN, "local", "stop"], env=env, capture_output=True, timeout=60)
