"""A generated AIAK chain passes `job-chain validate` and runs on the local server.

The real step scripts need GPUs and AIAK images, so each is replaced by a stand-in that checks
the parameters its step receives through ``jobSpec.envs`` and writes what a real step would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from chain_helpers import Ran, cli_here, labels, latest_run, run_jobs, wait_outcome
from test_dag_run import jobs_by_step

from job_chain.engine.jobs import LABEL_STEP

STAND_IN = """#!/usr/bin/env bash
set -euo pipefail
# stand-in for {script}: every parameter the step needs must have arrived as an env
for name in {needed}; do
    [ -n "${{!name:-}}" ] || {{ echo "missing env $name" >&2; exit 3; }}
done
mkdir -p "$STAND_IN_DIR"
env | grep -E '^({pattern})=' | sort > "$STAND_IN_DIR/{script}.env"
"""


def aiak_gen_here(*args: str) -> Ran:
    """aiak-gen in this process (click's runner; tests/test_aiak_gen.py runs the installed command)."""
    from click.testing import CliRunner

    from job_chain.cli.aiak import aiak_gen

    result = CliRunner().invoke(aiak_gen, list(args))
    return Ran(result.exit_code, result.stdout, result.stderr)


def step_names(chain: Dict[str, Any]) -> List[str]:
    """Every step's name (how jobs are labelled), exit handlers aside."""
    return sorted(j["name"] for j in chain["jobs"] if "runOn" not in (j.get("jobChain") or {}))


def test_generated_chain_runs_with_stand_in_scripts(tmp_path: Path, shared_server: Any) -> None:
    spec = {"MODEL_NAME": "llama3.1-8b", "REPLICAS": "2", "VERSION": "ci-1", "TRAINING_PHASE": "sft",
            "TP": "2", "PP": "1", "DATASET_NAME": "alpaca_zh-llama3-train", "JSON_KEYS": "instruction,output",
            "IMAGE": "registry.baidubce.com/aihc-aiak/aiak-training-llm:test"}
    (tmp_path / "aiak_job_info.json").write_text(json.dumps(spec))
    chain_path = tmp_path / "chain_info.json"
    mount = tmp_path  # the storage the steps mount holds the chain and its record, as on AIHC
    done = aiak_gen_here(str(chain_path), str(tmp_path / "aiak_job_info.json"), "--pool", shared_server.pool,
                         "--pfs", "pfs-local", "--mount-path", str(mount))
    assert done.returncode == 0, done.stderr

    cli_here("validate", str(chain_path), server=shared_server, check=True)
    chain = json.loads(chain_path.read_text())
    assert len(chain["jobs"]) == 3
    for job in chain["jobs"]:
        script = job["jobSpec"]["command"]
        envs = {e["name"]: e["value"] for e in job["jobSpec"]["envs"]}
        assert not any(k in envs for k in ("AK", "SK", "AIHC_AK", "AIHC_SK"))
        needed = " ".join(sorted(envs))
        (tmp_path / script).write_text(STAND_IN.format(script=script, needed=needed,
                                                       pattern="|".join(sorted(envs))))
        job["jobSpec"]["envs"].append({"name": "STAND_IN_DIR", "value": str(tmp_path / "out")})
    chain_path.write_text(json.dumps(chain, indent=2))

    cli_here("run", str(chain_path), "--follow", server=shared_server, check=True)
    jobs = run_jobs(shared_server, latest_run(chain_path))
    assert sorted(labels(j)[LABEL_STEP] for j in jobs) == step_names(chain)
    assert all(j["status"] == "Succeeded" for j in jobs)
    seen = {p.name: p.read_text() for p in (tmp_path / "out").glob("*.env")}
    assert len(seen) == 3
    assert any("TP=2" in text for text in seen.values())


# Stand-ins that also do what the real steps leave behind, so a later step can check that it
# finds its input: a conversion (with its TP/PP), indexed/tokenized data, a trained checkpoint.
STAND_INS = {
    "aiak_convert.sh": 'mkdir -p "$SAVE"; echo "TP=$TP PP=$PP" > "$SAVE/.aiak-gen-done"',
    "aiak_preprocess.sh": 'mkdir -p "$(dirname "$DATA_PATH")"; touch "$DATA_PATH.$TRAINING_PHASE-data"',
    "aiak_train.sh": """
[ "$(cat "$LOAD/.aiak-gen-done")" = "TP=$TP PP=$PP" ] || { echo "LOAD $LOAD is not TP=$TP PP=$PP" >&2; exit 4; }
data=${DATA_PATH##* }
[ -e "$data.$TRAINING_PHASE-data" ] || { echo "no $TRAINING_PHASE data at $data" >&2; exit 5; }
mkdir -p "$SAVE/iter_0000100"; echo 100 > "$SAVE/latest_checkpointed_iteration.txt"
echo "TP=$TP PP=$PP" > "$SAVE/.aiak-gen-done"
""",
}
STAND_IN_HEAD = """#!/usr/bin/env bash
set -euo pipefail
for name in $STAND_IN_NEEDS; do
    [ -n "${!name:-}" ] || { echo "missing env $name" >&2; exit 3; }
done
mkdir -p "$STAND_IN_DIR"
env | grep -E "^($(echo "$STAND_IN_NEEDS" | tr ' ' '|'))=" | sort > "$STAND_IN_DIR/$STAND_IN_STEP.env"
"""


def test_pretrain_sft_chain_runs_with_stand_in_scripts(tmp_path: Path, shared_server: Any) -> None:
    spec = {"MODEL_NAME": "qwen1.5-0.5b", "REPLICAS": "1", "VERSION": "ps-1", "TRAINING_PHASE": "pretrain+sft",
            "TP": "", "PP": "", "DATASET_NAME": "team_corpus", "JSON_KEYS": "text",
            "SFT_DATASET_NAME": "alpaca_zh-llama3-train", "IMAGE": "registry.baidubce.com/aihc-aiak/x:test"}
    (tmp_path / "aiak_job_info.json").write_text(json.dumps(spec))
    (tmp_path / "aiak_dict").mkdir()  # the pretraining data is the team's own table row
    (tmp_path / "aiak_dict" / "datasets.csv").write_text("dataset_name,url\nteam_corpus,bos:/team/c.jsonl\n")
    chain_path = tmp_path / "chain_info.json"
    done = aiak_gen_here(str(chain_path), str(tmp_path / "aiak_job_info.json"), "--pool", shared_server.pool,
                         "--pfs", "pfs-local", "--mount-path", str(tmp_path))
    assert done.returncode == 0, done.stderr
    cli_here("validate", str(chain_path), server=shared_server, check=True)

    chain = json.loads(chain_path.read_text())
    assert len(chain["jobs"]) == 5
    for script, body in STAND_INS.items():
        (tmp_path / script).write_text(STAND_IN_HEAD + body + "\n")
    for index, job in enumerate(chain["jobs"]):
        needed = " ".join(sorted(e["name"] for e in job["jobSpec"]["envs"]))
        job["jobSpec"]["envs"] += [{"name": "STAND_IN_DIR", "value": str(tmp_path / "out")},
                                   {"name": "STAND_IN_NEEDS", "value": needed},
                                   {"name": "STAND_IN_STEP", "value": str(index)}]
    chain_path.write_text(json.dumps(chain, indent=2))

    cli_here("run", str(chain_path), "--follow", server=shared_server, check=True)
    jobs = run_jobs(shared_server, latest_run(chain_path))
    assert sorted(labels(j)[LABEL_STEP] for j in jobs) == step_names(chain)
    assert all(j["status"] == "Succeeded" for j in jobs)
    seen = [dict(line.split("=", 1) for line in (tmp_path / "out" / f"{i}.env").read_text().splitlines())
            for i in range(5)]
    assert seen[1]["DATASET_URL"] == "bos:/team/c.jsonl"
    assert seen[3]["TRAINING_PHASE"] == seen[4]["TRAINING_PHASE"] == "sft"
    assert seen[4]["LOAD"] == seen[2]["SAVE"]  # the SFT fine-tuned what pretraining saved
    assert (Path(seen[4]["SAVE"]) / ".aiak-gen-done").read_text() == "TP=1 PP=1\n"


def test_eval_matrix_runs_each_benchmark_once_at_most_eval_parallel_at_once_then_reports(
        tmp_path: Path, shared_server: Any) -> None:
    """EVAL of three benchmarks with EVAL_PARALLEL 2: the eval matrix runs each point once after
    training, never more than two at once, then the report once after every point.

    Training steps are stand-ins; the evaluation and report steps are the shipped scripts, with
    EVAL_COMMAND (the user's evaluation command) a stand-in that records its run and its times.
    The first two points wait for each other (at most 20 s), so the cap is reached however slow
    the machine; a third running at the same time would be seen.
    """
    out, shared = tmp_path / "out", tmp_path / "shared"
    shared.mkdir()
    command = "; ".join([
        f'echo "start $(date +%s.%N) $EVAL_BENCHMARK" >> {shared}/times',
        f'echo "$EVAL_BENCHMARK $JOB_CHAIN_MATRIX_BENCHMARK $EVAL_CHECKPOINT $EVAL_OUTPUT" >> {shared}/runs',
        f'touch {shared}/arrived-$EVAL_BENCHMARK; n=0',
        f'while [ "$(ls {shared} | grep -c ^arrived-)" -lt 2 ] && [ $n -lt 400 ]; do sleep 0.05; n=$((n+1)); done',
        'sleep 0.2; echo "{\\"benchmark\\": \\"$EVAL_BENCHMARK\\", \\"acc\\": 0.5}" > "$EVAL_OUTPUT/result.json"',
        f'echo "end $(date +%s.%N) $EVAL_BENCHMARK" >> {shared}/times'])
    benches = ["ceval", "mmlu", "gsm8k"]
    spec = {"MODEL_NAME": "qwen1.5-0.5b", "REPLICAS": "1", "VERSION": "ev-1", "TRAINING_PHASE": "sft",
            "TP": "", "PP": "", "DATASET_NAME": "alpaca_zh-llama3-train", "JSON_KEYS": "",
            "IMAGE": "registry.baidubce.com/aihc-aiak/x:test", "EVAL": benches, "EVAL_PARALLEL": 2,
            "EVAL_COMMAND": command}
    (tmp_path / "aiak_job_info.json").write_text(json.dumps(spec))
    chain_path = tmp_path / "chain_info.json"
    done = aiak_gen_here(str(chain_path), str(tmp_path / "aiak_job_info.json"), "--pool", shared_server.pool,
                         "--pfs", "pfs-local", "--mount-path", str(tmp_path))
    assert done.returncode == 0, done.stderr
    cli_here("validate", str(chain_path), server=shared_server, check=True)

    chain = json.loads(chain_path.read_text())
    evaluate, report = chain["jobs"][3:]
    assert [evaluate["jobSpec"]["command"], report["jobSpec"]["command"]] == ["aiak_eval.sh", "aiak_report.sh"]
    assert evaluate["jobChain"]["matrix"] == {"benchmark": benches} and evaluate["jobChain"]["maxParallel"] == 2
    for script, body in STAND_INS.items():  # only the training steps; eval and report are the real scripts
        (tmp_path / script).write_text(STAND_IN_HEAD + body + "\n")
    for index, job in enumerate(chain["jobs"][:3]):
        needed = " ".join(sorted(e["name"] for e in job["jobSpec"]["envs"]))
        job["jobSpec"]["envs"] += [{"name": "STAND_IN_DIR", "value": str(out)},
                                   {"name": "STAND_IN_NEEDS", "value": needed},
                                   {"name": "STAND_IN_STEP", "value": str(index)}]
    chain_path.write_text(json.dumps(chain, indent=2))

    cli_here("run", str(chain_path), "--follow", server=shared_server, check=True)
    run_id = latest_run(chain_path)
    points = [f"{evaluate['name']}-benchmark-{b}" for b in benches]
    training = [j["name"] for j in chain["jobs"][:3]]
    assert jobs_by_step(shared_server, run_id) == {f"{n}/1": 1 for n in training + points + [report["name"]]}
    assert all(j["status"] == "Succeeded" for j in run_jobs(shared_server, run_id))
    trained = dict(line.split("=", 1) for line in (out / "2.env").read_text().splitlines())["SAVE"]
    eval_dir = tmp_path / "eval" / "qwen1.5-0.5b" / "sft" / "ev-1"
    assert sorted((shared / "runs").read_text().splitlines()) == sorted(  # each point once, with its own envs
        f"{b} {b} {trained}/iter_0000100 {eval_dir}/{b}" for b in benches)
    times = [line.split() for line in (shared / "times").read_text().splitlines()]
    events = sorted((float(when), kind) for kind, when, _ in times)  # at one instant an end counts first
    running = most = 0
    for _, kind in events:
        running += 1 if kind == "start" else -1
        most = max(most, running)
    assert most == 2  # the cap was reached, and never a third at once
    assert sorted(bench for kind, _, bench in times if kind == "start") == sorted(benches)
    report_file = eval_dir / "report.json"
    assert report_file.stat().st_mtime > max(when for when, kind in events if kind == "end")  # after every point
    assert json.loads(report_file.read_text()) == {
        "checkpoint": trained, "results": {b: {"benchmark": b, "acc": 0.5} for b in benches}}
    status = wait_outcome(chain_path, shared_server, "succeeded", timeout=10)
    assert [g["counts"] for g in status["matrices"]] == [{"Succeeded": 3}]


def test_a_chain_fetches_from_bos_with_the_sdk_and_runs_aiaks_tools(tmp_path: Path, shared_server: Any) -> None:
    """Issue 23 on a stand-in cluster: no bcecmd in the image, weights and data only on BOS.

    The real step scripts run as local jobs against a stand-in AIAK checkout (its tools take
    AIAK's flags and write what AIAK's write) and download from a signed loopback BOS through
    the BCE SDK's BosClient, with the run's own keys (the job's JOB_CHAIN_CREDENTIALS file).
    """
    from aiak_stand_ins import BosStandIn, aiak_tree, hf_weights, launcher

    aiak = aiak_tree(tmp_path / "aiak", launchers={
        "examples/llama2/pretrain/pretrain_llama2_7b.sh": launcher()})
    hf_weights(tmp_path / "bos" / "team-models" / "Llama-2-7b-hf")
    (tmp_path / "bos" / "team-data").mkdir(parents=True)
    (tmp_path / "bos" / "team-data" / "corpus.jsonl").write_text('{"text": "hello"}\n')
    chain_path, mount = tmp_path / "chain_info.json", tmp_path  # the mount holds the chain, as on AIHC
    chain_path.write_text(json.dumps({"resourcePoolId": shared_server.pool, "jobs": [{  # the template: AIAK's place
        "jobSpec": {"envs": [{"name": "AIAK_TRAINING_PATH", "value": str(aiak)},
                             {"name": "AIAK_CALLS", "value": str(tmp_path / "calls")}]},
        "datasources": [{"type": "pfs", "name": "pfs-local", "mountPath": str(mount)}],
        "jobChain": {"generatedBy": "aiak-gen"}}]}))
    with BosStandIn(tmp_path / "bos", {shared_server.ak: shared_server.sk}) as bos:
        spec = {"MODEL_NAME": "llama2-7b", "REPLICAS": "1", "VERSION": "bos-1", "TRAINING_PHASE": "pretrain",
                "TP": "", "PP": "", "DATASET_NAME": "corpus", "JSON_KEYS": "text", "IMAGE": "aiak:stock",
                "MODEL_URL": "bos:/team-models/Llama-2-7b-hf", "DATASET_URL": "bos:/team-data/corpus.jsonl",
                "BOS_ENDPOINT": bos.url}
        (tmp_path / "aiak_job_info.json").write_text(json.dumps(spec))
        done = aiak_gen_here(str(chain_path), str(tmp_path / "aiak_job_info.json"))
        assert done.returncode == 0, done.stderr
        chain_text = chain_path.read_text()
        assert shared_server.sk not in chain_text and shared_server.ak not in chain_text
        cli_here("run", str(chain_path), "--follow", server=shared_server, check=True)
        gets = [p for m, p in bos.requests if m == "GET"]
    jobs = json.loads(chain_text)["jobs"]
    convert, preprocess, train = ({e["name"]: e["value"] for e in j["jobSpec"]["envs"]} for j in jobs)
    assert (Path(convert["LOAD"]) / ".aiak-gen-source").read_text() == "MODEL_URL=bos:/team-models/Llama-2-7b-hf\n"
    assert sorted(p.name for p in Path(convert["LOAD"]).iterdir() if not p.name.startswith(".")) == sorted(
        p.name for p in (tmp_path / "bos" / "team-models" / "Llama-2-7b-hf").iterdir())
    assert "/team-data/corpus.jsonl" in gets and len([p for p in gets if p.startswith("/team-models/")]) == 4
    calls = (tmp_path / "calls").read_text()
    assert "--safetensors" in calls and "--json-keys text" in calls
    assert Path(preprocess["DATA_PATH"] + ".bin").exists()
    assert (Path(train["SAVE"]) / "iter_0000100").is_dir()
    assert (Path(train["SAVE"]) / ".aiak-gen-done").read_text() == "TP=1 PP=1\n"
    wait_outcome(chain_path, shared_server, "succeeded", timeout=10)
