"""A run is what you started: frozen at start, steps known by name, steerable without its file.

Real local server over real HTTP; the CLI in-process through CliRunner where its output is what
is checked, subprocesses where simultaneity across processes is the point.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List

from chain_helpers import JOB_CHAIN, Hooks, labels, run_jobs, write_chain
from click.testing import CliRunner, Result
from conftest import LocalServer

from job_chain import ChainSession, Outcome
from job_chain.cli import cli as job_chain_cli


def invoke(server: LocalServer, *args: str) -> Result:
    """The real CLI, in-process, against the test server."""
    env = {"JOB_CHAIN_CREDENTIALS": server.credentials_file, "AIHC_HOST": None, "AIHC_AK": None, "AIHC_SK": None}
    return CliRunner().invoke(job_chain_cli, list(args), env=env)


def session(chain: Path, server: LocalServer) -> ChainSession:
    return ChainSession.from_file(str(chain), client=server.client(max_retries=3), strict=False)


def gate(name: str) -> str:
    """A script that waits (up to a minute) for ``$SHARED/<name>`` before saying who it is."""
    return f'for i in $(seq 600); do test -f "$SHARED/{name}" && break; sleep 0.1; done\necho ran-$JOB_CHAIN_STEP'


def open_gate(chain: Path, name: str) -> None:
    (chain.parent / "shared" / name).write_text("go")


def wait_for(s: ChainSession, run_id: str, statuses: List[str], timeout: float = 60) -> Any:
    end = time.monotonic() + timeout
    while True:
        status = s.status(run_id)
        if [x.status for x in status.steps][:len(statuses)] == statuses:
            return status
        assert time.monotonic() < end, [x.status for x in status.steps]
        time.sleep(0.2)


def jobs_by_step(server: LocalServer, run_id: str) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for job in run_jobs(server, run_id):
        key = f"{labels(job)['job-chain/step']}/{labels(job)['job-chain/attempt']}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def edit(chain: Path, change: Any) -> None:
    data = json.loads(chain.read_text())
    change(data)
    chain.write_text(json.dumps(data, indent=2))


def insert_first(name: str, chain: Path) -> Any:
    def change(data: Dict[str, Any]) -> None:
        first = json.loads(json.dumps(data["jobs"][0]))
        first["name"], first["jobSpec"]["command"] = name, f"echo {name}-ran"
        data["jobs"].insert(0, first)
    return change


def test_a_mid_run_edit_leaves_the_run_exactly_as_started(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "convert", "script": gate("go-1")},
        {"name": "train", "script": gate("go-2")},
        {"name": "evaluate", "script": "echo evaluate-as-started"},
    ])
    s = session(chain, shared_server)
    run = s.start()
    wait_for(s, run.run_id, ["Running"])
    text = chain.read_text()
    chain.write_text(text.replace('"jobs"', '"jobz"', 1) + "}")  # a typo while step 0 runs
    assert invoke(shared_server, "status", str(chain)).exit_code == 0
    open_gate(chain, "go-1")
    wait_for(s, run.run_id, ["Succeeded", "Running"])
    chain.write_text(text)
    edit(chain, insert_first("inserted", chain))  # a step inserted at index 0 …
    (tmp_path / "evaluate.sh").write_text("echo evaluate-edited; exit 9")  # … and a script edited
    open_gate(chain, "go-2")
    final = s.wait(run.run_id, timeout=60, interval=0.3)
    assert final.outcome is Outcome.SUCCEEDED, final.reason
    assert [(x.index, x.name, x.status) for x in final.steps] == [
        (0, "convert", "Succeeded"), (1, "train", "Succeeded"), (2, "evaluate", "Succeeded")]
    assert jobs_by_step(shared_server, run.run_id) == {"convert/1": 1, "train/1": 1, "evaluate/1": 1}
    assert "evaluate-as-started" in s.log(run.run_id, step="evaluate")
    assert "ran-train" in s.log(run.run_id, step=1)
    frozen = json.loads((tmp_path / "chain_info.json.runs" / run.run_id / "revision-1.json").read_text())
    assert frozen["digest"] == final.digest and len(frozen["digest"]) == 64
    assert [step["name"] for step in frozen["chain"]["steps"]] == ["convert", "train", "evaluate"]
    assert frozen["chain"]["steps"][2]["body"]["jobSpec"]["command"] == "echo evaluate-as-started"


def test_fix_and_resume_by_name(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "a", "script": "echo a"},
        {"name": "b", "script": "echo b-v1"},
        {"name": "c", "script": "echo c-broken >&2; exit 3"},
    ])
    s = session(chain, shared_server)
    run = s.start()
    assert s.wait(run.run_id, timeout=60, interval=0.3).outcome is Outcome.FAILED
    edit(chain, insert_first("x", chain))  # upstream of succeeded steps: must not run in this run
    (tmp_path / "c.sh").write_text("echo c-fixed")
    preview = invoke(shared_server, "resume", str(chain), "--dry-run")
    assert preview.exit_code == 0, preview.output
    assert "+ x: added — upstream of succeeded steps: it does not run in this run" in preview.output
    assert "~ c: changed (script content (c.sh))" in preview.output
    assert "would submit: c (attempt 2)" in preview.output and "revision 2" in preview.output
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "c/1": 1}  # the dry run submitted nothing
    resumed = invoke(shared_server, "resume", str(chain))
    assert resumed.exit_code == 0, resumed.output
    final = s.wait(run.run_id, timeout=60, interval=0.3)
    assert final.outcome is Outcome.SUCCEEDED, final.reason
    assert [(x.name, x.status) for x in final.steps] == [("x", "skipped"), ("a", "Succeeded"), ("b", "Succeeded"),
                                                         ("c", "Succeeded")]
    assert "it does not run in this run" in final.steps[0].reason
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "c/1": 1, "c/2": 1}
    assert final.revision == 2 and "c: changed" in final.revisions[-1]["reason"]
    table = invoke(shared_server, "status", str(chain))
    assert f"run {run.run_id} runs revision 2 of its chain" in table.output

    # a change to a succeeded step is not applied unless asked; --rerun runs it and what follows it
    (tmp_path / "b.sh").write_text("echo b-v2")
    plan = s.preview_resume(run.run_id)
    assert [(c.name, c.applied) for c in plan.changes] == [("b", False)] and plan.targets == []
    assert s.resume(run.run_id) == []
    again = s.resume(run.run_id, rerun=("b",))
    assert [(x.step, x.attempt) for x in again] == [("b", 2)]
    final = s.wait(run.run_id, timeout=60, interval=0.3)
    assert final.outcome is Outcome.SUCCEEDED and final.revision == 3
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "b/2": 1, "c/1": 1, "c/2": 1, "c/3": 1}
    assert "b-v2" in s.log(run.run_id, step="b") and "b-v1" in s.log(run.run_id, step="b", attempt=1)
    assert [a.attempt for a in final.steps[2].history] == [1]  # b's first run is history of revision 1


def test_a_run_is_steered_with_its_file_broken_or_gone(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path / "a dir with spaces", shared_server.pool, [
        {"name": "first", "script": "echo first"}, {"name": "long", "script": "sleep 60"}])
    started = invoke(shared_server, "run", str(chain))
    assert started.exit_code == 0, started.output
    run_id = json.loads(invoke(shared_server, "runs", str(chain), "--json").output)[0]["run"]
    s = session(chain, shared_server)
    wait_for(s, run_id, ["Succeeded", "Running"])
    chain.write_text("{ not json")
    status = invoke(shared_server, "status", str(chain))
    assert status.exit_code == 0 and "working from the run's frozen copy" in status.output
    assert "long" in status.output and "Running" in status.output
    assert "first" in invoke(shared_server, "logs", str(chain), "--step", "first").output
    chain.unlink()
    by_id = invoke(shared_server, "status", "--run", run_id, "--json")
    assert by_id.exit_code == 0, by_id.output
    assert json.loads(by_id.output[by_id.output.index("{"):])["outcome"] == "running"
    stopped = invoke(shared_server, "stop", "--run", run_id)
    assert stopped.exit_code == 0, stopped.output
    hint = stopped.output.strip().splitlines()[-1].split("continue it with: ", 1)[1]
    assert shlex.split(hint)[:3] == ["job-chain", "resume", str(chain)]  # a path with spaces survives pasting
    assert s.wait(run_id, timeout=30, interval=0.3).outcome is Outcome.STOPPED
    again = invoke(shared_server, "stop", "--run", run_id)
    assert again.exit_code == 2 and f"run {run_id} already stopped" in again.output
    assert s.status(run_id).outcome is Outcome.STOPPED


def test_stop_on_a_finished_run_is_refused_and_its_outcome_stays(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [{"name": "only", "script": "echo done"}])
    s = session(chain, shared_server)
    run = s.start()
    assert s.wait(run.run_id, timeout=60, interval=0.3).outcome is Outcome.SUCCEEDED
    refused = invoke(shared_server, "stop", str(chain))
    assert refused.exit_code == 2 and f"run {run.run_id} already succeeded" in refused.output
    assert s.status(run.run_id).outcome is Outcome.SUCCEEDED
    assert not (tmp_path / "chain_info.json.runs" / run.run_id / "stopped.json").exists()
    active = write_chain(tmp_path / "other", shared_server.pool, [{"name": "long", "script": "sleep 60"}])
    other = session(active, shared_server)
    going = other.start()
    refused = invoke(shared_server, "runs", str(active), "--delete", going.run_id)
    assert refused.exit_code == 2 and "still going" in refused.output
    other.stop(going.run_id)
    assert invoke(shared_server, "runs", str(chain), "--delete", run.run_id).exit_code == 0
    assert not (tmp_path / "chain_info.json.runs" / run.run_id).exists()


def test_simultaneous_runs_start_exactly_one(tmp_path: Path, shared_server: LocalServer) -> None:
    """Four ``job-chain run`` processes at once, twice: one starts the run, the others say it is going.
    (The same race 20 more times in-process: the next test.)"""
    env = dict(os.environ, JOB_CHAIN_CREDENTIALS=shared_server.credentials_file)
    for name in ("AIHC_HOST", "AIHC_AK", "AIHC_SK"):
        env.pop(name, None)
    for round_ in range(2):
        chain = write_chain(tmp_path / f"r{round_}", shared_server.pool, [{"name": "hold", "script": "sleep 60"}])
        racers = [subprocess.Popen([*JOB_CHAIN, "run", str(chain)], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for _ in range(4)]
        outputs = [(p.wait(timeout=120), p.stderr.read()) for p in racers]  # type: ignore[union-attr]
        for p in racers:
            p.stdout.close()  # type: ignore[union-attr]
            p.stderr.close()  # type: ignore[union-attr]
        codes = sorted(code for code, _ in outputs)
        assert codes == [0, 2, 2, 2], outputs
        assert all("is still going" in err for code, err in outputs if code)
        runs = [p for p in (chain.parent / "chain_info.json.runs").iterdir() if p.name[0] != "."]
        assert len(runs) == 1
        assert jobs_by_step(shared_server, runs[0].name) == {"hold/1": 1}
        session(chain, shared_server).stop(runs[0].name)


def test_simultaneous_starts_race_on_the_start_lock_and_make_one_run(tmp_path: Path) -> None:
    """Four sessions of one chain file start at the same instant, 20 times over, on one in-memory API:
    the start lock (a file lock, as between processes) lets exactly one run and one create through."""
    from memory_api import MemoryAPI

    from job_chain.errors import RunStillActive

    for round_ in range(20):
        chain = write_chain(tmp_path / f"r{round_}", "pool-local", [{"name": "hold", "script": "sleep 60"}])
        api = MemoryAPI()
        barrier = threading.Barrier(4)

        def start(api: MemoryAPI = api, chain: Path = chain, barrier: threading.Barrier = barrier) -> Any:
            s = ChainSession.from_file(str(chain), client=api)
            barrier.wait()
            try:
                return s.start().run_id
            except RunStillActive as exc:
                return exc

        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(lambda _: start(), range(4)))
        started = [o for o in outcomes if isinstance(o, str)]
        refused = [o for o in outcomes if isinstance(o, RunStillActive)]
        assert len(started) == 1 and len(refused) == 3, outcomes
        assert all("is still going" in str(error) and error.run_id == started[0] for error in refused)
        runs = [p.name for p in (chain.parent / "chain_info.json.runs").iterdir() if p.name[0] != "."]
        assert runs == started
        assert [(c.labels["job-chain/step"], c.created) for c in api.creates] == [("hold", True)]


def test_a_failed_graph_run_names_the_failed_step_everywhere(tmp_path: Path, shared_server: LocalServer) -> None:
    hooks = Hooks()
    try:
        chain = write_chain(tmp_path, shared_server.pool, [
            {"name": "prep", "script": "echo prep"},
            {"name": "train", "script": "echo train-broke >&2; exit 3", "jobChain": {"dependsOn": ["prep"]}},
            {"name": "eval", "script": "echo eval", "jobChain": {"dependsOn": ["prep"]}},
            {"name": "alert", "script": 'env | grep ^JOB_CHAIN_ | sort > "$SHARED/handler-env.$JOB_CHAIN_RUN_ID"',
             "jobChain": {"runOn": "failure"}},
        ], notify=[{"url": hooks.url, "on": ["failed"]}])
        s = session(chain, shared_server)
        run = s.start()
        final = s.wait(run.run_id, timeout=90, interval=0.3)
        assert final.outcome is Outcome.FAILED and final.reason == "step train failed with exit code 3"
        assert [x.name for x in final.failed_steps] == ["train"] and [x.name for x in final.current] == ["train"]
        status = json.loads(invoke(shared_server, "status", str(chain), "--json").output)
        assert status["failedSteps"] == [{"step": 1, "name": "train", "exitCode": 3,
                                          "reason": status["steps"][1]["reason"],
                                          "failure": {"class": "unknown", "signature": None, "line": None,
                                                      "pod": None}}]
        listed = json.loads(invoke(shared_server, "runs", str(chain), "--json").output)[0]
        assert [c["name"] for c in listed["current"]] == ["train"]
        table = invoke(shared_server, "runs", str(chain)).output
        assert "train failed (exit 3)" in table and "alert" not in table
        log = invoke(shared_server, "logs", str(chain))
        assert "train-broke" in log.output and "# step 1 train" in log.output
        env = dict(line.split("=", 1) for line in (tmp_path / "shared" / f"handler-env.{run.run_id}")
                   .read_text().splitlines())
        assert env["JOB_CHAIN_RUN_ID"] == run.run_id and env["JOB_CHAIN_OUTCOME"] == "failed"
        assert env["JOB_CHAIN_FAILED_STEPS"] == "train"
        assert shlex.split(env["JOB_CHAIN_STATUS_COMMAND"])[:2] == ["job-chain", "status"]
        end = time.monotonic() + 10
        while not hooks.bodies and time.monotonic() < end:
            time.sleep(0.1)
        [failed] = hooks.bodies
        assert failed["failedSteps"][0]["name"] == "train" and "train failed with exit code 3" in failed["text"]

        # a resumed run that fails again notifies again, and its handler runs again
        s.resume(run.run_id)
        assert s.wait(run.run_id, timeout=90, interval=0.3).outcome is Outcome.FAILED
        end = time.monotonic() + 10
        while len(hooks.bodies) < 2 and time.monotonic() < end:
            time.sleep(0.1)
        assert [b["event"] for b in hooks.bodies] == ["failed", "failed"]
        assert jobs_by_step(shared_server, run.run_id) == {"prep/1": 1, "train/1": 1, "eval/1": 1, "alert/1": 1,
                                                           "train/2": 1, "alert/2": 1}
    finally:
        hooks.server.shutdown()


def test_a_run_that_never_started_says_so(tmp_path: Path, local_server_factory: Any) -> None:
    server = local_server_factory(extra_args=["--pool", "pool-real"])
    chain = write_chain(tmp_path, "pool-missing", [{"name": "only", "script": "echo x"}])
    refused = invoke(server, "run", str(chain))
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    [entry] = json.loads(invoke(server, "runs", str(chain), "--json").output)
    assert entry["outcome"] == "failed" and entry["reason"].startswith("the run never started:")
    table = invoke(server, "runs", str(chain)).output
    assert "the run never started" in table and "unknown" not in table
    assert invoke(server, "runs", str(chain), "--delete", entry["run"]).exit_code == 0
    assert json.loads(invoke(server, "runs", str(chain), "--json").output) == []


def test_each_failed_round_notifies_once_without_exit_handlers(tmp_path: Path, shared_server: LocalServer) -> None:
    """Issue 29 item 11: a resumed run that fails again sends ``failed`` again though it has no exit
    handler (the round moved on only when a handler had run, so the second claim was the first's)."""
    hooks = Hooks()
    try:
        chain = write_chain(tmp_path, shared_server.pool, [{"name": "train", "script": "exit 3"}],
                            notify=[{"url": hooks.url, "on": ["failed", "stepFailed"]}])
        s = session(chain, shared_server)
        run = s.start()
        for round_ in (1, 2):
            if round_ == 2:
                s.resume(run.run_id)
            assert s.wait(run.run_id, timeout=90, interval=0.3).outcome is Outcome.FAILED
            end = time.monotonic() + 10
            while len(hooks.bodies) < 2 * round_ and time.monotonic() < end:
                time.sleep(0.1)
        assert sorted(b["event"] for b in hooks.bodies) == ["failed", "failed", "stepFailed", "stepFailed"]
        assert jobs_by_step(shared_server, run.run_id) == {"train/1": 1, "train/2": 1}
    finally:
        hooks.server.shutdown()
