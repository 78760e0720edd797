"""Parameters, outputs and matrices on the real local server: values reach the jobs, every point runs
exactly once, and maxParallel / maxRunning hold however many points end at the same instant."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest
from chain_helpers import cli_here, credentials_env, write_chain
from conftest import LocalServer
from test_dag_run import jobs_by_step

from job_chain import ChainSession, Outcome

# each script notes when it started and ended (one appended line each: O_APPEND keeps them whole)
TIMED = ('echo "start $(date +%s.%N) $JOB_CHAIN_STEP" >> "$SHARED/times"\n{body}\n'
         'echo "end $(date +%s.%N) $JOB_CHAIN_STEP" >> "$SHARED/times"\n')
# sleep until the next half second: every point that runs ends at the same instant
TOGETHER = 'ns=$(date +%s%N); sleep "0.$(printf %09d $(( 500000000 - ns % 500000000 )))"'
# the first {n} scripts wait for each other (at most 20 s), so a cap is reached however slow the machine
MEET = ('touch "$SHARED/arrived-$JOB_CHAIN_STEP"; n=0\n'
        'while [ "$(ls "$SHARED" | grep -c "^arrived-")" -lt {n} ] && [ $n -lt 400 ]; do\n'
        '  sleep 0.05; n=$((n + 1))\ndone\n')


def timings(directory: Path) -> Tuple[Dict[str, List[float]], Dict[str, List[float]], int]:
    """(step -> start times, step -> end times, the most scripts that ran at once)."""
    starts: Dict[str, List[float]] = {}
    ends: Dict[str, List[float]] = {}
    events = []
    for line in (directory / "shared" / "times").read_text().splitlines():
        kind, when, step = line.split()
        (starts if kind == "start" else ends).setdefault(step, []).append(float(when))
        events.append((float(when), 0 if kind == "end" else 1))
    running = most = 0
    for _, delta in sorted(events):
        running += 1 if delta else -1
        most = max(most, running)
    return starts, ends, most


def sweep(directory: Path, pool: str, points: Dict[str, List[Any]], cap: int, body: str = "sleep 0.2",
          **top: Any) -> Path:
    return write_chain(directory, pool, [
        {"name": "sweep", "script": TIMED.format(body=MEET.format(n=cap) + body),
         "jobChain": {"matrix": points, "maxParallel": cap}},
        {"name": "report", "script": TIMED.format(body="true"), "jobChain": {"dependsOn": ["sweep"]}},
    ], **top)


def test_a_param_override_and_an_output_reach_the_next_step(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "convert", "script": 'echo "ckpt=$SHARED/ckpt-$JOB_CHAIN_PARAM_TAG" >> "$JOB_CHAIN_OUTPUTS"'},
        {"name": "train", "script": 'echo "$CKPT lr=$LR $JOB_CHAIN_PARAM_LR" > "$SHARED/train.out"'},
    ], params={"lr": "1e-4", "tag": "base"})
    data = json.loads(chain.read_text())
    data["jobs"][1]["jobSpec"]["envs"] += [{"name": "CKPT", "value": "${steps.convert.outputs.ckpt}"},
                                          {"name": "LR", "value": "${params.lr}"}]
    chain.write_text(json.dumps(data))
    unknown = cli_here("run", str(chain), "--param", "lrr=1", server=shared_server)
    assert unknown.returncode == 2 and "no parameter 'lrr' (did you mean 'lr'?)" in unknown.stderr
    cli_here("run", str(chain), "--param", "lr=3e-4", "--follow", server=shared_server, check=True)
    assert (tmp_path / "shared" / "train.out").read_text() == f"{tmp_path}/shared/ckpt-base lr=3e-4 3e-4\n"
    status = json.loads(cli_here("status", str(chain), "--json", server=shared_server, check=True).stdout)
    assert status["params"] == {"lr": "3e-4", "tag": "base"}
    assert status["steps"][0]["outputs"] == {"ckpt": f"{tmp_path}/shared/ckpt-base"}
    assert "lr=3e-4 tag=base" in cli_here("runs", str(chain), server=shared_server, check=True).stdout


@pytest.mark.parametrize("faults", [None, "0.3"], ids=["clean", "faults-0.3"])
def test_a_2x3_matrix_runs_each_point_once_two_at_a_time_then_its_dependent(
        tmp_path: Path, local_server_factory: Any, shared_server: LocalServer, faults: Any) -> None:
    server = shared_server if faults is None else local_server_factory(
        extra_args=["--inject-faults", faults, "--fault-seed", "7"])
    chain = sweep(tmp_path, server.pool, {"lr": ["1e-4", "3e-4"], "seed": [1, 2, 3]}, cap=2)
    s = ChainSession.from_file(str(chain), client=server.client(max_retries=6))
    run = s.start()
    final = s.wait(run.run_id, timeout=240, interval=0.5)
    assert final.outcome is Outcome.SUCCEEDED, final.reason
    points = [f"sweep-lr-{lr}-seed-{seed}" for lr in ("1e-4", "3e-4") for seed in (1, 2, 3)]
    assert jobs_by_step(server, run.run_id) == {f"{n}/1": 1 for n in points + ["report"]}
    starts, ends, most = timings(tmp_path)
    assert most == 2 and all(len(starts[p]) == len(ends[p]) == 1 for p in points)
    assert starts["report"][0] > max(ends[p][0] for p in points)
    data = final.as_json()
    assert [g["counts"] for g in data["matrices"]] == [{"Succeeded": 6}]
    assert {k: data["steps"][1][k] for k in ("name", "display", "group", "matrix")} == {
        "name": "sweep-lr-1e-4-seed-2", "display": "sweep[lr=1e-4,seed=2]", "group": "sweep",
        "matrix": {"lr": "1e-4", "seed": "2"}}


def test_64_points_ending_at_the_same_instant_start_each_next_one_once_never_above_8(
        tmp_path: Path, shared_server: LocalServer) -> None:
    chain = sweep(tmp_path, shared_server.pool, {"i": list(range(64))}, cap=8, body=TOGETHER)
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    run = s.start()
    assert s.wait(run.run_id, timeout=300, interval=0.5).outcome is Outcome.SUCCEEDED
    counts = jobs_by_step(shared_server, run.run_id)
    assert counts == {**{f"sweep-i-{i}/1": 1 for i in range(64)}, "report/1": 1}
    starts, ends, most = timings(tmp_path)
    assert most <= 8 and all(len(starts[f"sweep-i-{i}"]) == 1 for i in range(64))
    together = sorted(round(ends[f"sweep-i-{i}"][0] * 2) for i in range(64))
    assert max(together.count(t) for t in together) > 1  # points did end together


def test_a_failed_point_skips_the_dependent_and_resume_reruns_only_it(tmp_path: Path,
                                                                       shared_server: LocalServer) -> None:
    fails = 'if [ "$JOB_CHAIN_MATRIX_I" = 2 ] && [ "$JOB_CHAIN_PARAM_FIX" != yes ]; then exit 3; fi'
    chain = sweep(tmp_path, shared_server.pool, {"i": [0, 1, 2, 3, 4]}, cap=2, body=fails, params={"fix": "no"})
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    run = s.start()
    failed = s.wait(run.run_id, timeout=120, interval=0.3)
    assert failed.outcome is Outcome.FAILED and "step sweep-i-2 failed with exit code 3" in failed.reason
    assert [x.status for x in failed.steps] == ["Succeeded", "Succeeded", "Failed", "Succeeded", "Succeeded",
                                                "skipped"]
    assert failed.steps[5].reason == "needs sweep[i=2]"
    plan = s.preview_resume(run.run_id, params={"fix": "yes"})
    assert [c.line() for c in plan.changes][0].startswith("~ params: changed (fix: no -> yes)")
    assert [(x.step, x.attempt) for x in s.resume(run.run_id, params={"fix": "yes"})] == [("sweep-i-2", 2)]
    assert s.wait(run.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
    assert jobs_by_step(shared_server, run.run_id) == {**{f"sweep-i-{i}/1": 1 for i in range(5)}, "sweep-i-2/2": 1,
                                                       "report/1": 1}
    assert s.frozen(run.run_id).params == {"fix": "yes"} and s.status(run.run_id).revision == 2


def test_watch_mode_hands_the_slots_on_from_the_watching_process(tmp_path: Path,
                                                                  shared_server: LocalServer) -> None:
    chain = sweep(tmp_path, shared_server.pool, {"i": [0, 1, 2, 3]}, cap=2, body="true")
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    run = s.start(mode="watch")
    assert s.wait(run.run_id, timeout=120, interval=0.2).outcome is Outcome.SUCCEEDED
    assert jobs_by_step(shared_server, run.run_id) == {**{f"sweep-i-{i}/1": 1 for i in range(4)}, "report/1": 1}
    assert timings(tmp_path)[2] <= 2


def test_max_running_caps_the_whole_run(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "prep", "script": TIMED.format(body="true")},
        {"name": "work", "script": TIMED.format(body=MEET.format(n=2) + "sleep 0.2"),
         "jobChain": {"matrix": {"i": [1, 2, 3, 4, 5]}}},
        {"name": "side", "script": TIMED.format(body=MEET.format(n=2) + "sleep 0.2"),
         "jobChain": {"dependsOn": ["prep"]}},
        {"name": "report", "script": TIMED.format(body="true"), "jobChain": {"dependsOn": ["work", "side"]}},
    ], maxRunning=2)
    s = ChainSession.from_file(str(chain), client=shared_server.client(max_retries=3))
    run = s.start()
    assert s.wait(run.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
    assert set(jobs_by_step(shared_server, run.run_id).values()) == {1} and len(jobs_by_step(
        shared_server, run.run_id)) == 8
    assert timings(tmp_path)[2] == 2


def test_inline_runs_carry_params_outputs_and_points(tmp_path: Path, shared_server: LocalServer) -> None:
    chain = write_chain(tmp_path, shared_server.pool, [
        {"name": "convert", "script": 'echo "ckpt=/pfs/$JOB_CHAIN_PARAM_TAG" >> "$JOB_CHAIN_OUTPUTS"'},
        {"name": "side", "script": 'echo "note=from side" >> "$JOB_CHAIN_OUTPUTS"',
         "jobChain": {"dependsOn": ["convert"]}},
        {"name": "train", "script": 'echo "$JOB_CHAIN_MATRIX_SEED $CKPT" >> "$SHARED/train.out"',
         "jobChain": {"dependsOn": ["convert"], "matrix": {"seed": [1, 2]}}},
        {"name": "report", "script": 'echo "$CKPT / $NOTE" > "$SHARED/report.out"',
         "jobChain": {"dependsOn": ["train", "side"]}},
    ], params={"tag": "base"})
    data = json.loads(chain.read_text())
    for job in data["jobs"][2:]:
        job["jobSpec"]["envs"] += [{"name": "CKPT", "value": "${steps.convert.outputs.ckpt}"}]
    data["jobs"][3]["jobSpec"]["envs"] += [{"name": "NOTE", "value": "${steps.side.outputs.note}"}]
    chain.write_text(json.dumps(data))
    s = ChainSession.from_file(str(credentials_env(chain, shared_server)), client=shared_server.client(max_retries=3))
    run = s.start(mode="inline", params={"tag": "v2"})
    assert s.wait(run.run_id, timeout=120, interval=0.3).outcome is Outcome.SUCCEEDED
    assert sorted((tmp_path / "shared" / "train.out").read_text().splitlines()) == ["1 /pfs/v2", "2 /pfs/v2"]
    assert (tmp_path / "shared" / "report.out").read_text() == "/pfs/v2 / from side\n"  # a join: read from a log
    outputs = {x.name: x.outputs for x in s.status(run.run_id, outputs=True).steps}
    assert outputs["convert"] == {"ckpt": "/pfs/v2"} and outputs["side"] == {"note": "from side"}
