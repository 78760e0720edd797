"""aiak-gen's step scripts at run time, against a stand-in AIAK checkout (aiak_stand_ins.aiak_tree)
whose tools take AIAK's own flags and write what AIAK's write. Each test generates a chain with
the real aiak-gen and runs a step script with exactly that job's envs, as the job would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Optional

import pytest
from aiak_stand_ins import aiak_tree, hf_weights, launcher
from test_aiak_gen import PRETRAIN_SFT, SEED_INPUT, SFT_INPUT, STORAGE, envs, gen, load, point_envs

from job_chain.spec.loader import load_chain

BIN = os.path.dirname(sys.executable)  # python and python3 with job-chain; no bcecmd on this PATH


class Job:
    """A generated chain on a stand-in cluster: storage under tmp/pfs, AIAK under tmp/aiak."""

    def __init__(self, tmp_path: Path, spec: Dict[str, Any], launchers: Optional[Dict[str, str]] = None,
                 **tree: Any) -> None:
        self.dir = tmp_path / "gen"
        self.dir.mkdir(parents=True)
        result = gen(self.dir, spec, *STORAGE, "--mount-path", str(tmp_path / "pfs"))
        assert result.exit_code == 0, result.output
        self.chain = load(self.dir)
        self.calls = tmp_path / "calls"
        if launchers is None:  # AIAK's launcher for each training job, at the path the chain names
            launchers = {}
            for job in self.chain["jobs"]:
                env = envs(job)
                if "TRAIN_SCRIPT" in env and not env["TRAIN_SCRIPT"].startswith("/"):
                    launchers[env["TRAIN_SCRIPT"]] = launcher(env["TRAINING_PHASE"], tp=int(env["TP"]),
                                                              pp=int(env["PP"]), ep=int(env.get("EP", 0)) or None)
        self.aiak = aiak_tree(tmp_path / "aiak", launchers=launchers, **tree)
        self.base = {k: v for k, v in os.environ.items() if k not in ("AIHC_AK", "AIHC_SK", "AK", "SK")}
        self.base.update(PATH=f"{BIN}:/usr/bin:/bin", AIAK_TRAINING_PATH=str(self.aiak), AIAK_CALLS=str(self.calls))

    def env(self, index: int) -> Dict[str, str]:
        return envs(self.chain["jobs"][index])

    def run(self, index: int, **override: str) -> subprocess.CompletedProcess:
        script = self.chain["jobs"][index]["jobSpec"]["command"]
        return self.run_script(script, {**self.env(index), **override})

    def point_env(self, benchmark: str) -> Dict[str, str]:
        """The envs the eval matrix's point for ``benchmark`` is submitted with (references replaced)."""
        chain = load_chain(str(self.dir / "chain_info.json"), local=True)
        point = next(s for s in chain.steps if s.point == {"benchmark": benchmark})
        return point_envs(chain, point.name)

    def run_eval(self, benchmark: str, **override: str) -> subprocess.CompletedProcess:
        """aiak_eval.sh as the point for ``benchmark`` runs it."""
        return self.run_script("aiak_eval.sh", {**self.point_env(benchmark), **override})

    def run_script(self, script: str, env: Dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(self.dir / script)], capture_output=True, text=True, timeout=60,
                              env={**self.base, **env})

    def calls_of(self, tool: str) -> list:
        text = self.calls.read_text() if self.calls.exists() else ""
        return [line for line in text.splitlines() if line.startswith(tool)]


def args_line(done: subprocess.CompletedProcess) -> str:
    return next(x for x in done.stdout.splitlines() if x.startswith("ARGS "))


def weights_and_data(job: Job, kind: str = "safetensors") -> None:
    """What an earlier download left: the HF weights (by hand: no record) and the raw data."""
    hf_weights(Path(job.env(0)["LOAD"]), kind)
    for i, j in enumerate(job.chain["jobs"]):
        if j["jobSpec"]["command"] == "aiak_preprocess.sh":
            raw = Path(job.env(i)["INPUT_DATA"])
            raw.parent.mkdir(parents=True, exist_ok=True)
            raw.write_text('{"text": "hi", "title": "t", "instruction": "q", "output": "a"}\n')


# -- convert and preprocess ------------------------------------------------------------------------

def test_convert_and_preprocess_skip_finished_work(tmp_path: Path) -> None:
    job = Job(tmp_path, SEED_INPUT)
    missing = job.run(0, PATH="/usr/bin:/bin")  # no weights yet, no bcecmd, no job-chain runtime
    assert missing.returncode == 1 and "bcecmd bos sync" in missing.stderr and "job-chain bundle" in missing.stderr
    assert not (Path(job.env(0)["LOAD"]) / ".aiak-gen-fetching").exists()  # nothing started: a hand copy is used
    weights_and_data(job)
    first = job.run(0)
    assert first.returncode == 0, first.stderr
    assert "copied there by hand" in first.stdout
    assert "--tensor_model_parallel_size=1" in job.calls_of("convert")[0]
    again = job.run(0)
    assert again.returncode == 0 and "nothing to do" in again.stdout and len(job.calls_of("convert")) == 1

    first = job.run(1)
    assert first.returncode == 0, first.stderr
    assert Path(job.env(1)["DATA_PATH"] + ".bin").exists()
    assert "--json-keys text" in job.calls_of("preprocess_pretrain_data.py")[0]
    again = job.run(1)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert len(job.calls_of("preprocess")) == 1


def test_preprocess_writes_one_indexed_file_per_json_key(tmp_path: Path) -> None:
    job = Job(tmp_path, dict(SEED_INPUT, JSON_KEYS="title text"))
    weights_and_data(job)
    done = job.run(1, PREPROCESS_WORKERS="4")
    assert done.returncode == 0, done.stderr
    call = job.calls_of("preprocess_pretrain_data.py")[0]
    assert f"--output-prefix {job.env(1)['OUTPUT_PREFIX']} " in call and "--json-keys title text" in call
    assert "--workers 4 --append-eod" in call
    assert Path(job.env(1)["OUTPUT_PREFIX"] + ".aiak-gen-done").exists()


def test_mixtral_convert_passes_its_experts_and_ep_and_training_applies_ep(tmp_path: Path) -> None:
    """Item 1: without --num_experts/--expert_parallel_size AIAK's converter treats Mixtral as dense."""
    job = Job(tmp_path, dict(SEED_INPUT, MODEL_NAME="mixtral-8x7b", REPLICAS=2))
    convert, train = job.env(0), job.env(2)
    assert (convert["NUM_EXPERTS"], convert["EP"], train["EP"]) == ("8", "8", "8")
    assert convert["SAVE"].endswith("/mcore/tp1_pp2_ep8") and train["LOAD"] == convert["SAVE"]
    weights_and_data(job)
    done = job.run(0)
    assert done.returncode == 0, done.stderr
    call = job.calls_of("convert")[0]
    assert "--tensor_model_parallel_size=1 --pipeline_model_parallel_size=2 --num_experts=8 " \
           "--expert_parallel_size=8" in call
    ranks = sorted(p.name for p in (Path(convert["SAVE"]) / "release").iterdir())
    assert ranks[0] == "mp_rank_00_000_000" and len(ranks) == 16  # PP 2 x EP 8: what the launcher looks for
    assert (Path(convert["SAVE"]) / ".aiak-gen-done").read_text().splitlines()[0] == "TP=1 PP=2 EP=8"
    assert job.run(1).returncode == 0
    trained = job.run(2, EP="4")  # a hand-edited chain: the conversion was EP 8
    assert trained.returncode == 1 and "written with TP=1 PP=2 EP=8 but this training uses TP=1 PP=2 EP=4" \
        in trained.stderr
    trained = job.run(2)
    assert trained.returncode == 0, trained.stderr
    assert "--expert-model-parallel-size 8" in args_line(trained)


def test_a_mixtral_launcher_says_it_resumes_with_a_fresh_optimizer(tmp_path: Path) -> None:
    spec = dict(SEED_INPUT, MODEL_NAME="mixtral-8x7b", REPLICAS=2)
    rel = "examples/mixtral/pretrain/pretrain_mixtral_8x7b.sh"
    job = Job(tmp_path, spec, launchers={rel: launcher(tp=1, pp=2, ep=8, no_load_optim=True)})
    save = Path(job.env(2)["SAVE"])
    save.mkdir(parents=True)
    (save / "latest_checkpointed_iteration.txt").write_text("50")  # an earlier attempt's checkpoint
    done = job.run(2)
    assert done.returncode == 0, done.stderr
    assert "loads with --no-load-optim: resuming at the saved iteration with a fresh optimizer" in done.stderr
    result = gen(tmp_path, spec, *STORAGE)  # and aiak-gen says so when it writes the chain
    assert "note: pretrain: AIAK's launcher examples/mixtral/pretrain/pretrain_mixtral_8x7b.sh loads with " \
           "--no-load-optim --no-load-rng" in result.stderr


def test_bin_only_weights_are_converted_without_safetensors(tmp_path: Path) -> None:
    """Item 3: Baichuan2-7B-Base, llama v1 and baichuan v1 ship pytorch_model.bin only."""
    job = Job(tmp_path, dict(SEED_INPUT, MODEL_NAME="baichuan2-7b"), configs=("baichuan2-7b",))
    weights_and_data(job, kind="bin")
    done = job.run(0)
    assert done.returncode == 0, done.stderr
    assert "pytorch_model*.bin weights (no safetensors)" in done.stdout
    assert "--safetensors" not in job.calls_of("convert")[0]
    empty = Job(tmp_path / "empty", SEED_INPUT)
    Path(empty.env(0)["LOAD"]).mkdir(parents=True)
    (Path(empty.env(0)["LOAD"]) / "config.json").write_text("{}")
    none = empty.run(0)
    assert none.returncode == 1 and "neither *.safetensors nor pytorch_model*.bin" in none.stderr


def test_a_folder_recording_another_source_is_refused_never_reused(tmp_path: Path) -> None:
    """Item 4, at run time: what a folder was made from is recorded beside it and checked."""
    job = Job(tmp_path, SEED_INPUT)
    weights_and_data(job)
    assert job.run(0).returncode == 0 and job.run(1).returncode == 0
    load = Path(job.env(0)["LOAD"])
    (load / ".aiak-gen-source").write_text("MODEL_URL=bos:/other/model\n")
    (Path(job.env(0)["SAVE"]) / ".aiak-gen-done").unlink()
    other = job.run(0)
    assert other.returncode == 1 and "holds weights from MODEL_URL=bos:/other/model" in other.stderr
    done = Path(job.env(1)["OUTPUT_PREFIX"] + ".aiak-gen-done")
    done.write_text(done.read_text().replace("JSON_KEYS=text", "JSON_KEYS=content"))
    data = job.run(1)
    assert data.returncode == 1 and "was made from something else" in data.stderr and "JSON_KEYS=content" in data.stderr
    save = Path(job.env(2)["SAVE"])
    save.mkdir(parents=True)
    (save / ".aiak-gen-source").write_text("LOAD=/somewhere/else\nDATA_PATH=/x\n")
    trained = job.run(2)
    assert trained.returncode == 1 and "holds a training of other inputs" in trained.stderr
    assert "new VERSION" in trained.stderr


def test_an_older_image_with_only_preprocess_data_py_tokenizes_with_it(tmp_path: Path) -> None:
    """Item 8: the tool is the one the image has."""
    job = Job(tmp_path, SEED_INPUT, tools=("preprocess_data.py",))
    weights_and_data(job)
    done = job.run(1)
    assert done.returncode == 0, done.stderr
    assert job.calls_of("preprocess_data.py") and "tokenizing with" in done.stdout
    newer = Job(tmp_path / "newer", SEED_INPUT, tools=("llm/preprocess_pretrain_data.py",))
    weights_and_data(newer)
    assert newer.run(1).returncode == 0
    sft = Job(tmp_path / "sft", SFT_INPUT, tools=("preprocess_data.py",))
    weights_and_data(sft)
    refused = sft.run(1)
    assert refused.returncode == 1 and "no sft preprocessing tool: looked for preprocess_sft_data.py " \
        "llm/preprocess_sft_data.py" in refused.stderr


def test_sft_data_is_tokenized_at_the_launchers_length(tmp_path: Path) -> None:
    """Item 5: llama2's SFT launcher trains at 4096, so its data is cut at 4096, not 2048."""
    job = Job(tmp_path, dict(SFT_INPUT, MODEL_NAME="llama2-7b"))
    assert job.env(1)["SEQ_LENGTH"] == job.env(2)["SEQ_LENGTH"] == "4096"
    weights_and_data(job)
    done = job.run(1)
    assert done.returncode == 0, done.stderr
    assert "--seq-length 4096 --chat-template llama2" in job.calls_of("preprocess_sft_data.py")[0]
    info = json.loads((Path(job.env(1)["DATA_PATH"]) / "dataset_info.json").read_text())
    assert info == {"seq_length": 4096, "chat_template": "llama2"}
    trained = job.run(2)
    assert trained.returncode == 0, trained.stderr
    assert "--seq-length 4096" in args_line(trained) and "--is-tokenized-data" in args_line(trained)
    assert "note: the data was tokenized" not in trained.stderr
    shorter = job.run(2, SEQ_LENGTH="2048", SAVE=str(tmp_path / "other-save"))
    assert "note: the data was tokenized at SEQ_LENGTH=2048 but" in shorter.stderr


# -- train -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("base", [SEED_INPUT, SFT_INPUT])
def test_train_applies_tp_pp_load_save_to_the_launcher(tmp_path: Path, base: Dict[str, Any]) -> None:
    job = Job(tmp_path, dict(base, TP="4", PP="2"), launchers={})  # AIAK's launcher, written for 1/1
    rel = job.env(2)["TRAIN_SCRIPT"]
    aiak_tree(job.aiak, launchers={rel: launcher(job.env(2)["TRAINING_PHASE"])})
    done = job.run(2)
    assert done.returncode == 0, done.stderr
    train, line = job.env(2), args_line(done)
    assert f"--load {train['LOAD']} --save {train['SAVE']} --save-interval 100" in line
    assert "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2" in line
    assert ("--is-tokenized-data" in line) == (base is SFT_INPUT)
    assert f"DATA={train['DATA_PATH']}" in line
    assert (Path(train["SAVE"]) / ".aiak-gen-done").read_text() == "TP=4 PP=2\n"
    again = job.run(2)
    assert again.returncode == 0 and "nothing to do" in again.stdout


def test_train_resumes_from_its_own_checkpoint(tmp_path: Path) -> None:
    job = Job(tmp_path, SEED_INPUT)
    save = Path(job.env(2)["SAVE"])
    save.mkdir(parents=True)
    (save / "latest_checkpointed_iteration.txt").write_text("100")
    done = job.run(2)
    assert done.returncode == 0, done.stderr
    assert f"--load {save} --save {save}" in done.stdout


def test_train_refuses_a_split_the_launcher_cannot_take(tmp_path: Path) -> None:
    own = tmp_path / "launcher.sh"
    own.write_text("#!/bin/bash\necho no parallel flags here\n")
    job = Job(tmp_path, dict(SEED_INPUT, TP="2", PP="1", TRAIN_SCRIPT=str(own)))
    done = job.run(2)
    assert done.returncode == 1 and "--tensor-model-parallel-size" in done.stderr
    missing = job.run(2, TRAIN_SCRIPT="/nonexistent.sh")
    assert missing.returncode == 1 and "not in this image" in missing.stderr
    relative = job.run(2, TRAIN_SCRIPT="examples/none/pretrain_none.sh")
    assert relative.returncode == 1 and f"{job.aiak}/examples/none/pretrain_none.sh is not in this image" in \
        relative.stderr


def test_a_launcher_that_saves_elsewhere_leaves_no_done_marker(tmp_path: Path) -> None:
    """Item 8: a custom TRAIN_SCRIPT with a hard-coded CHECKPOINT_SAVE_PATH saved nothing in SAVE."""
    own = tmp_path / "launcher.sh"
    elsewhere = tmp_path / "elsewhere"
    own.write_text(f"#!/bin/bash\nCHECKPOINT_SAVE_PATH={elsewhere}\nmkdir -p $CHECKPOINT_SAVE_PATH\n"
                   "echo 10 > $CHECKPOINT_SAVE_PATH/latest_checkpointed_iteration.txt\n")
    job = Job(tmp_path, dict(SEED_INPUT, TRAIN_SCRIPT=str(own)))
    done = job.run(2)
    assert done.returncode == 1 and "saved no checkpoint in" in done.stderr
    assert not (Path(job.env(2)["SAVE"]) / ".aiak-gen-done").exists()  # the next phase cannot load an empty SAVE


def test_train_takes_the_gpus_per_replica_and_fine_tunes_a_trained_checkpoint(tmp_path: Path) -> None:
    job = Job(tmp_path, dict(PRETRAIN_SFT, GPUS_PER_REPLICA=4))
    convert, pretrain, sft = job.env(0), job.env(2), job.env(4)
    weights_and_data(job)
    assert job.run(0).returncode == 0  # a release checkpoint
    done = job.run(2)
    assert done.returncode == 0, done.stderr
    line = args_line(done)
    assert f"--load {convert['SAVE']} --save {pretrain['SAVE']}" in line and "GPUS=4" in line
    assert "--finetune" not in line  # a conversion is loaded as is
    done = job.run(4)
    assert done.returncode == 0, done.stderr
    line = args_line(done)
    assert f"--load {pretrain['SAVE']} --finetune --save {sft['SAVE']}" in line  # iteration 0, fresh optimizer
    assert "--is-tokenized-data" in line and (Path(sft["SAVE"]) / ".aiak-gen-done").read_text() == "TP=1 PP=1\n"


def test_train_refuses_a_checkpoint_converted_with_another_split(tmp_path: Path) -> None:
    job = Job(tmp_path, SEED_INPUT)
    weights_and_data(job)
    assert job.run(0).returncode == 0
    assert (Path(job.env(0)["SAVE"]) / ".aiak-gen-done").read_text().startswith("TP=1 PP=1\n")
    done = job.run(2, TP="2")  # a hand-edited chain, say
    assert done.returncode == 1
    assert "was written with TP=1 PP=1 but this training uses TP=2 PP=1" in done.stderr


# -- eval and report ---------------------------------------------------------------------------------

def eval_job(tmp_path: Path, command: str = "") -> Job:
    spec = dict(SEED_INPUT, EVAL=["ceval", "mmlu"], **({"EVAL_COMMAND": command} if command else {}))
    return Job(tmp_path, spec)


def test_eval_script_without_eval_command_says_what_to_set(tmp_path: Path) -> None:
    job = eval_job(tmp_path)
    done = job.run_eval("ceval")
    assert done.returncode == 2
    assert "AIAK documents no evaluation command" in done.stderr and '"EVAL_COMMAND"' in done.stderr
    assert not Path(job.point_env("ceval")["EVAL_OUTPUT"]).exists()


@pytest.mark.parametrize("tracker, directory", [("release", "release"), ("1500\n", "iter_0001500")])
def test_the_eval_command_is_given_the_iteration_directory(tmp_path: Path, tracker: str, directory: str) -> None:
    """Item 8: AIAK's mcore->HF converter takes <root>/iter_NNNNNNN or <root>/release, not the root."""
    job = eval_job(tmp_path, 'echo "$EVAL_CHECKPOINT" > "$EVAL_OUTPUT/result.json"')
    root = Path(job.env(3)["LOAD"])
    (root / directory).mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text(tracker)
    done = job.run_eval("ceval")
    assert done.returncode == 0, done.stderr
    assert (Path(job.point_env("ceval")["EVAL_OUTPUT"]) / "result.json").read_text() == f"{root / directory}\n"
    (root / "latest_checkpointed_iteration.txt").write_text("abc")
    bad = job.run_eval("mmlu")
    assert bad.returncode == 1 and "neither an iteration number nor release" in bad.stderr


def test_eval_and_report_scripts_run_once_and_skip_finished_work(tmp_path: Path) -> None:
    calls = tmp_path / "eval-calls"
    job = eval_job(tmp_path, f'echo "$EVAL_BENCHMARK TP=$TP" >> {calls}; echo "{{\\"acc\\": 0.5}}" > '
                             '"$EVAL_OUTPUT/result.json"')
    root = Path(job.env(3)["LOAD"])
    (root / "iter_0000100").mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text("100")
    for bench in ("ceval", "mmlu", "ceval", "mmlu"):
        done = job.run_eval(bench)
        assert done.returncode == 0, done.stderr
    assert calls.read_text() == "ceval TP=1\nmmlu TP=1\n"  # the second run of each skipped
    (root / "iter_0000200").mkdir()
    (root / "latest_checkpointed_iteration.txt").write_text("200")  # a resumed training saved more
    assert job.run_eval("ceval").returncode == 0 and calls.read_text().endswith("ceval TP=1\n") and \
        len(calls.read_text().splitlines()) == 3
    eval_dir = Path(job.env(4)["EVAL_DIR"])
    (eval_dir / "mmlu" / "result.json").write_text("not json: 71.2\n")
    done = job.run(4)
    assert done.returncode == 0, done.stderr
    assert json.loads((eval_dir / "report.json").read_text()) == {
        "checkpoint": str(root), "results": {"ceval": {"acc": 0.5}, "mmlu": "not json: 71.2"}}
    again = job.run(4)
    assert again.returncode == 0 and "already up to date" in again.stdout
    missing = job.run(4, EVAL_BENCHMARKS="ceval gsm8k")
    assert missing.returncode == 1 and "no result for gsm8k" in missing.stderr
    no_result = job.run_eval("ceval", EVAL_COMMAND="true", EVAL_OUTPUT=str(eval_dir / "arc"))
    assert no_result.returncode == 1 and "wrote no" in no_result.stderr
    assert not (eval_dir / "arc" / ".aiak-gen-done").exists()


# -- issue 30 items 9, 10 and 12 at run time -------------------------------------------------------

def test_qwen1_pretrain_data_is_tokenized_with_model_family_qwen(tmp_path: Path) -> None:
    """Item 9: Qwen-1's tiktoken tokenizer has no eos without it (AIAK's preprocess_data.sh passes it)."""
    job = Job(tmp_path, dict(SEED_INPUT, MODEL_NAME="qwen-7b"), configs=("qwen-7b",))
    weights_and_data(job)
    done = job.run(1)
    assert done.returncode == 0, done.stderr
    assert "--model-family qwen --input " in job.calls_of("preprocess_pretrain_data.py")[0]
    other = Job(tmp_path / "llama", SEED_INPUT)
    weights_and_data(other)
    assert other.run(1).returncode == 0 and "--model-family" not in other.calls_of("preprocess_pretrain_data.py")[0]


def test_qwen3_235b_converts_with_the_flags_of_aiaks_own_convert_script(tmp_path: Path) -> None:
    """Item 10: --custom_pipeline_layers, --expert_tensor_parallel_size=1 and --moe-grouped-gemm."""
    spec = dict(SEED_INPUT, MODEL_NAME="qwen3-235b-a22b", MODEL_URL="bos:/mine/q", REPLICAS=64,
                TRAIN_SCRIPT="/w/pretrain_qwen3_235b_a22b.sh")
    job = Job(tmp_path, spec, configs=(), moe_configs=("qwen3-235b-a22b",))
    weights_and_data(job)
    done = job.run(0)
    assert done.returncode == 0, done.stderr
    assert ("--pipeline_model_parallel_size=8 --num_experts=128 --expert_parallel_size=16 "
            "--expert_tensor_parallel_size=1 --custom_pipeline_layers=11,11,12,12,12,12,12,12 --moe-grouped-gemm "
            in job.calls_of("convert")[0])
    assert "CONVERT_ARGS=--expert_tensor_parallel_size=1" in (Path(job.env(0)["SAVE"]) / ".aiak-gen-done").read_text()


def test_a_loongforge_image_at_the_described_paths_converts_tokenizes_and_trains(tmp_path: Path) -> None:
    """Item 12: the description sets the install paths; LoongForge's converter is module_convertor/model.py
    with configs/models/*.yaml, its tools are under tools/data_preprocess/llm, its launchers read LOONGFORGE_PATH."""
    root = tmp_path / "LoongForge"
    spec = dict(SEED_INPUT, AIAK_TRAINING_PATH=str(root), MEGATRON_PATH=str(tmp_path / "Loong-Megatron"))
    rel = "examples/llama2/pretrain/pretrain_llama2_7b.sh"
    loong_launcher = launcher().replace("#! /bin/bash",
                                        '#! /bin/bash\necho "ROOT=$LOONGFORGE_PATH MEGATRON=$MEGATRON_PATH"')
    job = Job(tmp_path, spec, launchers={rel: loong_launcher}, tools=("llm/preprocess_pretrain_data.py",),
              loongforge=("configs/models/llama2/llama2_7b.yaml",
                          "configs/models/llama2/ckpt_convert/llama2_convert.yaml"))
    (tmp_path / "aiak").rename(root)
    del job.base["AIAK_TRAINING_PATH"]  # only the description says where it is
    weights_and_data(job)
    converted = job.run(0)
    assert converted.returncode == 0, converted.stderr
    call = job.calls_of("convert")[0]
    assert f"--config_file={root}/configs/models/llama2/llama2_7b.yaml " \
           f"--convert_file={root}/configs/models/llama2/ckpt_convert/llama2_convert.yaml " in call
    assert job.run(1).returncode == 0 and job.calls_of("preprocess_pretrain_data.py")
    trained = job.run(2)
    assert trained.returncode == 0, trained.stderr
    assert f"ROOT={root} MEGATRON={tmp_path / 'Loong-Megatron'}" in trained.stdout
    unknown = job.run(0, LOONGFORGE_CONFIG="", SAVE=str(tmp_path / "other"))  # a row without LoongForge's files
    assert unknown.returncode == 1 and "has no loongforge_config/loongforge_convert" in unknown.stderr
    nowhere = job.run(0, AIAK_TRAINING_PATH=str(tmp_path / "nowhere"), SAVE=str(tmp_path / "other"))
    assert nowhere.returncode == 1 and "set AIAK_TRAINING_PATH in the description" in nowhere.stderr
