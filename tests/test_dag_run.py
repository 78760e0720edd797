"""Graphs on the real local server: joins exactly once, failure handlers, webhooks, timeouts."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from chain_helpers import Hooks, credentials_env, write_chain
from conftest import LocalServer, job_body

from job_chain import ChainSession, Outcome

BARRIER = ('touch "$SHARED/{me}.arrived"\n'
           'while [ ! -f "$SHARED/b.arrived" ] || [ ! -f "$SHARED/c.arrived" ]; do sleep 0.002; done\n'
           'echo {me} done')


def diamond(directory: Path, pool: str, **top: Any) -> Path:
    return write_chain(directory, pool, [
        {"name": "a", "script": "echo a"},
        {"name": "b", "script": BARRIER.format(me="b"), "jobChain": {"dependsOn": ["a"]}},
        {"name": "c", "script": BARRIER.format(me="c"), "jobChain": {"dependsOn": ["a"]}},
        {"name": "d", "script": "echo d", "jobChain": {"dependsOn": ["b", "c"]}},
    ], **top)


def jobs_by_step(server: LocalServer, run_id: str) -> Dict[str, int]:
    """step/attempt -> how many jobs the server stored (read from SQLite: no injected faults)."""
    counts: Dict[str, int] = {}
    with server.db() as conn:
        for row in conn.execute("SELECT spec FROM jobs"):
            labels = {x["key"]: x["value"] for x in json.loads(row["spec"]).get("labels") or []}
            if labels.get("job-chain/run") == run_id:
                key = f"{labels['job-chain/step']}/{labels['job-chain/attempt']}"
                counts[key] = counts.get(key, 0) + 1
    return counts


def test_a_diamond_whose_branches_finish_together_joins_exactly_once(tmp_path: Path,
                                                                     shared_server: LocalServer) -> None:
    planned: List[int] = []

    def one(i: int) -> Dict[str, int]:
        path = diamond(tmp_path / f"d{i}", shared_server.pool)
        s = ChainSession.from_file(str(path), client=shared_server.client(max_retries=3))
        run = s.start()
        assert s.wait(run.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
        record = Path(f"{path}.runs") / run.run_id
        for branch in "bc":  # the split planned its branches (lean.py); one that followed its plan removed it
            followed = json.loads((record / f"exit-{branch}-attempt-1.json").read_text()).get("planned") is True
            assert (record / f"lean-{branch}-attempt-1.json").exists() is not followed
            planned.append(followed)
        return jobs_by_step(shared_server, run.run_id)

    with ThreadPoolExecutor(max_workers=5) as pool:
        results = list(pool.map(one, range(20)))
    assert results == [{"a/1": 1, "b/1": 1, "c/1": 1, "d/1": 1}] * 20
    # a branch that sees the other between its exit and its marker leaves the join to the full
    # advance (so the drill covers both); most join by plan
    assert sum(planned) >= len(planned) // 2, planned


def test_a_fan_out_and_in_under_injected_faults_runs_every_step_once(tmp_path: Path,
                                                                      local_server_factory: Any) -> None:
    server = local_server_factory(extra_args=["--inject-faults", "0.3", "--fault-seed", "11"])
    jobs = [{"name": "split", "script": "echo split"}]
    jobs += [{"name": f"w{i}", "script": f"echo w{i}", "jobChain": {"dependsOn": ["split"]}} for i in range(8)]
    jobs += [{"name": "merge", "script": "echo merge", "jobChain": {"dependsOn": [f"w{i}" for i in range(8)]}}]
    s = ChainSession.from_file(str(write_chain(tmp_path, server.pool, jobs)), client=server.client(max_retries=6))
    run = s.start()
    assert s.wait(run.run_id, timeout=180, interval=0.5).outcome is Outcome.SUCCEEDED
    assert jobs_by_step(server, run.run_id) == {f"{n}/1": 1 for n in ["split", *(f"w{i}" for i in range(8)), "merge"]}


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    receiver = Hooks()
    yield receiver
    receiver.server.shutdown()


def test_a_failed_branch_skips_its_join_runs_the_failure_handler_and_notifies_once(
        tmp_path: Path, shared_server: LocalServer, hooks: Hooks) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "a", "script": "echo a"},
        {"name": "b", "script": "echo b-broke >&2; exit 3", "jobChain": {"dependsOn": ["a"]}},
        {"name": "c", "script": "sleep 1; echo c", "jobChain": {"dependsOn": ["a"]}},
        {"name": "d", "script": "echo d", "jobChain": {"dependsOn": ["b", "c"]}},
        {"name": "cleanup", "script": 'echo handled >> "$SHARED/handled"', "jobChain": {"runOn": "failure"}},
        {"name": "always", "script": 'echo always >> "$SHARED/always"', "jobChain": {"runOn": "always"}},
    ], notify=[{"url": hooks.url, "on": ["failed", "stepFailed"], "format": "json"},
               {"url": hooks.url, "on": ["failed"], "format": "feishu"}])
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    run = s.start()
    final = s.wait(run.run_id, timeout=120, interval=0.3)
    assert final.outcome is Outcome.FAILED and "step b failed with exit code 3" in final.reason
    assert [(x.name, x.status) for x in final.steps] == [("a", "Succeeded"), ("b", "Failed"), ("c", "Succeeded"),
                                                         ("d", "skipped"), ("cleanup", "Succeeded"),
                                                         ("always", "Succeeded")]
    assert final.steps[3].reason == "needs b"
    assert (tmp_path / "shared" / "handled").read_text() == "handled\n"
    assert (tmp_path / "shared" / "always").read_text() == "always\n"
    events = sorted(b.get("event", "feishu") for b in hooks.bodies)
    assert events == ["failed", "feishu", "stepFailed"]
    failed = next(b for b in hooks.bodies if b.get("event") == "failed")
    assert failed["run"] == run.run_id and failed["command"].startswith("job-chain status")
    step_failed = next(b for b in hooks.bodies if b.get("event") == "stepFailed")
    assert (step_failed["step"], step_failed["name"], step_failed["exitCode"]) == ("b", "b", 3)
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "c/1": 1, "cleanup/1": 1, "always/1": 1}


def test_hang_timeout_kills_a_silent_step_and_its_retry_succeeds(tmp_path: Path, shared_server: LocalServer) -> None:
    silent_once = ('if [ ! -f "$SHARED/tried" ]; then touch "$SHARED/tried"; echo started; sleep 60; fi\n'
                   'echo second-try')
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "hangs", "script": silent_once, "jobChain": {"hangTimeout": "2s", "retries": 1,
                                                             "retryOnExitCodes": [7]}},
        {"name": "after", "script": "echo after"},
    ])
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    run = s.start()
    final = s.wait(run.run_id, timeout=120, interval=0.3)
    assert final.outcome is Outcome.SUCCEEDED
    attempts = final.steps[0].attempts
    assert [(a.status, a.exit_code) for a in attempts] == [("Failed", 124), ("Succeeded", 0)]
    assert "hangTimeout" in s.log(run.run_id, step=0, attempt=1)


@pytest.mark.parametrize("mode", ["inline", "watch"])
def test_joins_work_inline_and_in_watch_mode(tmp_path: Path, shared_server: LocalServer, mode: str) -> None:
    chain = diamond(tmp_path, shared_server.pool)
    s = ChainSession.from_file(str(credentials_env(chain, shared_server) if mode == "inline" else chain),
                               client=shared_server.client(max_retries=3))
    run = s.start(mode=mode)
    assert s.wait(run.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "c/1": 1, "d/1": 1}


def test_inline_joins_with_the_submitting_clock_over_an_hour_ahead(tmp_path: Path, shared_server: LocalServer,
                                                                    monkeypatch: Any) -> None:
    """Issue 18, item 8: the run id (and so the submitting machine's clock) two hours ahead of the
    API. The inline jobs bound their pool walks by the API's createdAt of the run's first job,
    carried in their snapshots, so the join still runs, once, and no step is submitted again."""
    import job_chain.session.start as session_module

    real = session_module.new_run_id
    monkeypatch.setattr(session_module, "new_run_id", lambda: time.strftime(
        "%Y%m%d-%H%M%S", time.gmtime(time.time() + 2 * 3600)) + real()[15:])
    client = shared_server.client(max_retries=3)
    client.create_job(shared_server.pool, job_body("before-the-run", "true"))  # the pool holds older jobs
    chain = credentials_env(diamond(tmp_path, shared_server.pool), shared_server)
    s = ChainSession.from_file(str(chain), client=client)
    run = s.start(mode="inline")
    assert s.wait(run.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "c/1": 1, "d/1": 1}
    logs = "".join(s.log(run.run_id, step=name) for name in ("a", "b", "c", "d")).splitlines()
    assert not [line for line in logs if line.startswith("job-chain: step a ")]  # never taken for not submitted
    assert [line for line in logs if line.startswith("job-chain: step d submitted")]


def test_stop_runs_the_always_handler_and_resume_reruns_only_what_did_not_succeed(
        tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "a", "script": "echo a"},
        {"name": "slow", "script": 'test -f "$SHARED/go" || sleep 60', "jobChain": {"dependsOn": ["a"]}},
        {"name": "fast", "script": "echo fast", "jobChain": {"dependsOn": ["a"]}},
        {"name": "join", "script": "echo join", "jobChain": {"dependsOn": ["slow", "fast"]}},
        {"name": "always", "script": 'echo x >> "$SHARED/always"', "jobChain": {"runOn": "always"}},
    ])
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    run = s.start()
    end = time.monotonic() + 60
    while [x.status for x in s.status(run.run_id).steps][:3] != ["Succeeded", "Running", "Succeeded"]:
        assert time.monotonic() < end
        time.sleep(0.2)
    s.stop(run.run_id, settle=30)
    stopped = s.wait(run.run_id, timeout=60, interval=0.3)
    assert stopped.outcome is Outcome.STOPPED
    assert (tmp_path / "shared" / "always").read_text() == "x\n"
    (tmp_path / "shared" / "go").write_text("now")
    assert [(x.step, x.attempt) for x in s.resume(run.run_id)] == [("slow", 2)]
    assert s.wait(run.run_id, timeout=60, interval=0.3).outcome is Outcome.SUCCEEDED
    assert (tmp_path / "shared" / "always").read_text() == "x\nx\n"  # once per round
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "slow/1": 1, "slow/2": 1, "fast/1": 1, "join/1": 1,
                                                       "always/1": 1, "always/2": 1}


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs (root and mount(8) needed; else the test is skipped: the in-memory test of the
    same rule, test_advance_memory, still runs)."""
    import subprocess

    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_under_the_run_record_fails_the_join_loudly_and_resume_continues_it(
        tmp_path: Path, small_disk: Path, shared_server: LocalServer) -> None:
    # With the disk under the record full, neither branch of a -> (b, c) -> d could write its marker;
    # each read the other's missing marker and stopped: d was never submitted, status said "running".
    shared = tmp_path / "shared"
    shared.mkdir()
    wait = 'touch "$SHARED/$JOB_CHAIN_STEP.running"; while [ ! -f "$SHARED/go" ]; do sleep 0.05; done'
    path = write_chain(small_disk, shared_server.pool, [
        {"name": "a", "script": "true"},
        {"name": "b", "script": wait, "jobChain": {"dependsOn": ["a"]}},
        {"name": "c", "script": wait, "jobChain": {"dependsOn": ["a"]}},
        {"name": "d", "script": "true", "jobChain": {"dependsOn": ["b", "c"]}}])
    path.write_text(path.read_text().replace(str(small_disk / "shared"), str(shared)))
    s = ChainSession.from_file(str(path), client=shared_server.client(max_retries=3))
    run = s.start()
    end = time.monotonic() + 60
    while not ((shared / "b.running").exists() and (shared / "c.running").exists()):
        assert time.monotonic() < end, "b and c did not start"
        time.sleep(0.05)
    filler = small_disk / "filler"
    with open(filler, "wb") as handle:  # fill the disk to the last block
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    (shared / "go").touch()
    look = s.wait(run.run_id, timeout=120, interval=0.3)
    assert look.outcome is Outcome.FAILED and "could not write the run record" in look.reason, look.reason
    for branch in ("b", "c"):
        step = next(st for st in look.steps if st.name == branch)
        # its job ended 75 (EX_TEMPFAIL); where the script's exit 0 was written before the disk refused
        # the success marker (a page freed meanwhile: seen under load), status shows the script's own 0,
        # as for any job whose script's exit the record holds: it failed all the same, for the record
        assert step.status == "Failed" and step.attempts[-1].failure.signature == "run-record-unwritable"
        assert step.exit_code == 75 or (step.exit_code == 0 and s.records.script_exit(run.run_id, branch, 1) == 0)
        log = "".join(s.log(run.run_id, branch))
        assert "but the run record could not be written" in log and "No space left on device" in log
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "c/1": 1}  # nothing decided
    filler.unlink()  # space is freed
    (shared / "go").unlink()
    (shared / "go").touch()
    s.resume(run.run_id)
    assert s.wait(run.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
    assert jobs_by_step(shared_server, run.run_id) == {"a/1": 1, "b/1": 1, "c/1": 1, "b/2": 1, "c/2": 1, "d/1": 1}
