"""aiak-gen's chains checked against AIAK's own layout, at generation: every shipped row, MoE,
user rows without a launcher, keyed folders, the SFT length, CPU data jobs, and the module split.
Run-time behaviour of the same items is in test_aiak_steps.py (stand-in AIAK) and test_aiak_bos.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List

import pytest
from aiak_layout import BATCHES, CHAT_TEMPLATES, CONFIGS, LAUNCHERS, NO_SAVE, NO_TOKENIZED
from click.testing import CliRunner
from test_aiak_gen import SEED_INPUT, SFT_INPUT, STORAGE, TEAM_HEADER, assert_refused, envs, files, gen, load, user_dict

from job_chain.aiak import layout, tables
from job_chain.aiak.generator import generate_chain, parse_spec
from job_chain.cli.aiak import aiak_gen
from job_chain.errors import UsageError

SHIPPED = tables.models()


def chain_for(spec: Dict[str, Any]) -> List[Dict[str, str]]:
    chain, _ = generate_chain(spec, None, pool="p", pfs="f")
    return [envs(job) for job in chain["jobs"]]


def runnable_spec(model: tables.Model, phase: str) -> Dict[str, Any]:
    """A description that gives the row nothing but what the table cannot: its split if #N/A, a URL."""
    tp, pp = (model.tp, model.pp) if model.tp else (1, 1)
    gpus = tp * pp * (model.ep or 1)
    spec = dict(SEED_INPUT, MODEL_NAME=model.name, TRAINING_PHASE=phase, TP=tp, PP=pp,
                REPLICAS=max(1, -(-gpus // 8)), DATASET_NAME="alpaca_zh-llama3-train")
    if not model.url:
        spec["MODEL_URL"] = f"bos:/my-bucket/{model.hf_name}"
    return spec


# -- item 6: every shipped row runs end to end, or is refused naming what is missing --------------

@pytest.mark.parametrize("phase", ["pretrain", "sft"])
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_shipped_row_names_aiaks_own_launcher_config_and_template_or_is_refused(name: str, phase: str) -> None:
    model = SHIPPED[name]
    spec = runnable_spec(model, phase)
    launcher = model.pretrain_launcher if phase == "pretrain" else model.sft_launcher
    missing = [what for what, absent in (
        ("no converter config", f"{model.name}" not in CONFIGS),
        (f"no AIAK {phase} launcher", not launcher),
        ("no chat template", phase == "sft" and not model.chat_template),
        ("no SFT sequence length", phase == "sft" and not model.sft_seq_length),
        ("has --save commented out", launcher in NO_SAVE),  # item 10: refused, with the reason
        ("has no --is-tokenized-data", phase == "sft" and launcher in NO_TOKENIZED)) if absent]
    if missing:
        with pytest.raises(UsageError) as info:
            parse_spec(spec)
        message = str(info.value)
        assert f"MODEL_NAME: {name} (the shipped table) cannot run this chain" in message
        assert all(what in message for what in missing), (missing, message)
        return
    convert, preprocess, train = chain_for(spec)
    assert convert["CONVERT_CONFIG"] in CONFIGS  # tools/convert_checkpoint/config/<name>.json exists in AIAK
    assert train["TRAIN_SCRIPT"] in LAUNCHERS
    assert f"/{'pretrain' if phase == 'pretrain' else 'finetuning'}/" in train["TRAIN_SCRIPT"]
    tp, pp, ep, seq = LAUNCHERS[train["TRAIN_SCRIPT"]]
    assert model.batch(phase) == BATCHES[train["TRAIN_SCRIPT"]]  # item 11: the launcher's global/micro batch
    assert int(train.get("EP", 1)) == ep  # the launcher's expert parallelism
    if phase == "sft":
        assert preprocess["CHAT_TEMPLATE"] in CHAT_TEMPLATES
        assert preprocess["SEQ_LENGTH"] == train["SEQ_LENGTH"] == str(seq)  # item 5: the launcher's length
    if model.series in ("qwen2.5", "qwen3"):  # rows added from AIAK's launchers take their split
        assert (model.tp, model.pp) == (tp, pp)


def test_the_rows_the_issue_names_are_refused_with_what_is_missing() -> None:
    refusals = {"llama-7b": ["no AIAK sft launcher", "no chat template"],
                "llama-13b": ["no converter config", "AIAK has no tools/convert_checkpoint/config/llama-13b.json"],
                "baichuan-7b": ["no AIAK sft launcher"],
                "STDiT-XL/2": ["no converter config", "no AIAK sft launcher", "no chat template"]}
    for name, words in refusals.items():
        spec = dict(SFT_INPUT, MODEL_NAME=name, TP=1, PP=1)
        with pytest.raises(UsageError) as info:
            parse_spec(spec)
        assert all(w in str(info.value) for w in words), str(info.value)
    assert SHIPPED["llama-7b"].chat_template == ""  # not "llama": preprocess_sft_data.py has no such choice
    given = dict(SFT_INPUT, MODEL_NAME="llama-7b", TP=1, PP=1, TRAIN_SCRIPT="/root/pfs/llama/sft_llama_7b.sh",
                 CHAT_TEMPLATE="alpaca", SEQ_LENGTH=2048)
    convert, preprocess, train = chain_for(given)  # what the description gives, the chain runs with
    assert (train["TRAIN_SCRIPT"], preprocess["CHAT_TEMPLATE"], preprocess["SEQ_LENGTH"]) == \
        ("/root/pfs/llama/sft_llama_7b.sh", "alpaca", "2048")
    assert convert["CONVERT_CONFIG"] == "llama-7b"


def test_rows_without_a_public_copy_need_model_url(tmp_path: Path) -> None:
    assert_refused(gen(tmp_path, dict(SEED_INPUT, MODEL_NAME="qwen3-8b"), *STORAGE),
                   "MODEL_NAME: qwen3-8b (the shipped table) cannot run this chain: no BOS copy of its weights")
    assert files(tmp_path) == ["aiak_job_info.json"]
    convert, _, train = chain_for(dict(SEED_INPUT, MODEL_NAME="qwen3-8b", MODEL_URL="bos:/mine/Qwen3-8B"))
    assert convert["MODEL_URL"] == "bos:/mine/Qwen3-8B" and train["TRAIN_SCRIPT"].endswith("pretrain_qwen3_8b.sh")


# -- issue 18 item 13: a user row's launcher is never guessed -------------------------------------

def test_a_user_table_model_without_a_known_launcher_is_refused(tmp_path: Path) -> None:
    user_dict(tmp_path / "aiak_dict", models="llama2,team-llama-1b,Team-Llama-1B,bos:/team/llama-1b,1,1\n",
              datasets="team_corpus,bos:/team/corpus.jsonl,\n")
    spec = dict(SEED_INPUT, MODEL_NAME="team-llama-1b", DATASET_NAME="team_corpus")
    result = gen(tmp_path, spec, *STORAGE)
    models_csv = tmp_path / "aiak_dict" / "models.csv"
    assert_refused(result, f"MODEL_NAME: team-llama-1b ({models_csv}:2) cannot run this chain")
    assert "no AIAK pretrain launcher (pretrain_launcher column empty" in result.stderr and "set TRAIN_SCRIPT" in \
        result.stderr
    assert "examples/llama2" not in result.stderr  # nothing guessed from the series
    assert files(tmp_path) == ["aiak_dict", "aiak_job_info.json"]
    given = gen(tmp_path, dict(spec, TRAIN_SCRIPT="/root/pfs/team/pretrain.sh",
                               CONVERT_CONFIG="/root/pfs/team/llama-1b.json"), *STORAGE)
    assert given.exit_code == 0, given.output
    convert, _, train = (envs(j) for j in load(tmp_path)["jobs"])
    assert train["TRAIN_SCRIPT"] == "/root/pfs/team/pretrain.sh"
    assert convert["CONVERT_CONFIG"] == "/root/pfs/team/llama-1b.json"


@pytest.mark.parametrize("row, message", [
    ("m,M,bos:/m,1,1,2,,,,,,", "ep 2 needs num_experts"),
    ("m,M,bos:/m,1,1,3,8,,,,,", "ep 3 needs num_experts, a multiple of it"),
    ("m,M,bos:/m,1,1,,,../x,,,,", "convert_config must be a config name"),
    ("m,M,bos:/m,1,1,,,rel/x.json,,,,", "convert_config must be a config name"),
    ("m,M,bos:/m,1,1,,,,,,examples/../../evil.sh,", "pretrain_launcher must be a path relative to the AIAK root"),
    ("m,M,bos:/m,1,1,,,,qwen chat,,,", "chat_template must be a name such as qwen"),
    ("m,M,bos:/m,1,1,,,,,4k,,", "sft_seq_length must be a positive integer"),
])
def test_malformed_aiak_columns_are_one_line_with_file_and_line(tmp_path: Path, row: str, message: str) -> None:
    header = "series,model_name,hf_name,url,tp,pp,ep,num_experts,convert_config,chat_template,sft_seq_length," \
             "pretrain_launcher,sft_launcher\n"
    user_dict(tmp_path / "aiak_dict", models="llama2," + row + "\n", header=header)
    result = gen(tmp_path, SEED_INPUT, *STORAGE)
    assert_refused(result, f"{tmp_path / 'aiak_dict' / 'models.csv'}:2: ")
    assert message in result.stderr
    assert files(tmp_path) == ["aiak_dict", "aiak_job_info.json"]


def test_a_full_user_row_runs_like_a_shipped_one(tmp_path: Path) -> None:
    user_dict(tmp_path / "aiak_dict", header=TEAM_HEADER.replace("\n", ",chat_template,sft_seq_length\n"),
              models="qwen2,team-7b,Team-7B,bos:/team/7b,1,1,qwen2-7b,/w/pre.sh,/w/sft.sh,qwen,8192\n")
    assert gen(tmp_path, dict(SFT_INPUT, MODEL_NAME="team-7b"), *STORAGE).exit_code == 0
    _, preprocess, train = (envs(j) for j in load(tmp_path)["jobs"])
    assert (train["TRAIN_SCRIPT"], preprocess["CHAT_TEMPLATE"], preprocess["SEQ_LENGTH"]) == \
        ("/w/sft.sh", "qwen", "8192")


# -- item 1: MoE rows -------------------------------------------------------------------------------

def test_moe_chains_need_the_gpus_megatron_asks_for_and_an_ep_dividing_the_experts(tmp_path: Path) -> None:
    mixtral = dict(SEED_INPUT, MODEL_NAME="mixtral-8x7b")
    assert_refused(gen(tmp_path, mixtral, *STORAGE),
                   "REPLICAS: 1 x 8 GPUs cannot hold TP 1 x PP 2 x EP 8 = 16: Megatron needs the GPU count to be a "
                   "multiple of 16 (e.g. REPLICAS 2")
    assert_refused(gen(tmp_path, dict(mixtral, REPLICAS=2, EP=3), *STORAGE), "EP: must divide the 8 experts")
    assert_refused(gen(tmp_path, dict(SEED_INPUT, EP=2), *STORAGE), "EP: llama2-7b is not a mixture-of-experts model")
    assert_refused(gen(tmp_path, dict(SEED_INPUT, TP=4, PP=4), *STORAGE), "GPU count to be a multiple of 16")
    assert files(tmp_path) == ["aiak_job_info.json"]
    convert, _, train = chain_for(dict(mixtral, EP=4))  # 8 GPUs hold TP 1 x PP 2 x EP 4
    assert convert["SAVE"].endswith("/mcore/tp1_pp2_ep4") and (convert["EP"], train["EP"]) == ("4", "4")
    qwen3 = chain_for(dict(SEED_INPUT, MODEL_NAME="qwen3-30b-a3b", MODEL_URL="bos:/mine/q", REPLICAS=2))
    assert (qwen3[0]["NUM_EXPERTS"], qwen3[0]["EP"], qwen3[0]["TP"], qwen3[0]["PP"]) == ("128", "4", "2", "2")
    assert "EP" not in chain_for(SEED_INPUT)[0] and "NUM_EXPERTS" not in chain_for(SEED_INPUT)[0]


def test_a_huge_split_is_refused_at_once_with_the_replicas_it_would_need() -> None:
    with pytest.raises(UsageError, match=r"multiple of 2147483647 \(e\.g\. REPLICAS 2147483647"):
        parse_spec(dict(SEED_INPUT, TP=2**31 - 1, PP=1))  # found by review: the hint was a counting loop
    with pytest.raises(UsageError, match=r"multiple of 12 \(e\.g\. REPLICAS 3,"):
        parse_spec(dict(SEED_INPUT, TP=3, PP=4))
    with pytest.raises(UsageError, match=r"data-parallel size 3, .* use REPLICAS 131072, 262144, 524288,"):
        parse_spec(dict(SEED_INPUT, TP=2**20, PP=1, REPLICAS=3 * 2**17))  # the valid counts, without a long loop


def test_a_moe_launcher_without_optimizer_resume_is_noted_on_stderr_only(tmp_path: Path) -> None:
    result = gen(tmp_path, dict(SEED_INPUT, MODEL_NAME="mixtral-8x7b", REPLICAS=2), *STORAGE, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("{") and "--no-load-optim" not in result.stdout
    assert result.stderr.startswith("note: pretrain: AIAK's launcher") and "fresh optimizer" in result.stderr
    assert "note" not in gen(tmp_path, SEED_INPUT, *STORAGE, "--dry-run").stderr


# -- item 4: folders keyed by what they are made from ------------------------------------------------

@pytest.mark.parametrize("change, moved", [
    ({"MODEL_URL": "bos:/mirror/llama2-7b"}, {"LOAD", "SAVE", "TOKENIZER_PATH", "DATA_PATH", "OUTPUT_PREFIX"}),
    ({"DATASET_URL": "bos:/mine/other.jsonl"}, {"INPUT_DATA", "DATA_PATH", "OUTPUT_PREFIX"}),
    ({"JSON_KEYS": "content"}, {"DATA_PATH", "OUTPUT_PREFIX"}),
])
def test_a_changed_model_url_or_data_never_reuses_the_old_folder(change: Dict[str, Any], moved: set) -> None:
    before, after = chain_for(SEED_INPUT), chain_for(dict(SEED_INPUT, **change))
    for old, new in zip(before, after):
        for name in set(old) & set(new) & {"LOAD", "SAVE", "TOKENIZER_PATH", "DATA_PATH", "OUTPUT_PREFIX",
                                           "INPUT_DATA"}:
            if name == "SAVE" and "TRAIN_SCRIPT" in old:
                continue  # a training's own folder is named by VERSION; its inputs are recorded in it
            assert (old[name] != new[name]) == (name in moved), (name, old[name], new[name])


@pytest.mark.parametrize("change", [{"SEQ_LENGTH": 8192}, {"CHAT_TEMPLATE": "llama3"}])
def test_a_changed_seq_length_or_chat_template_never_reuses_the_old_data(change: Dict[str, Any]) -> None:
    before, after = chain_for(SFT_INPUT), chain_for(dict(SFT_INPUT, **change))
    assert before[1]["DATA_PATH"] != after[1]["DATA_PATH"] == after[2]["DATA_PATH"]
    assert before[1]["INPUT_DATA"] == after[1]["INPUT_DATA"]  # the raw download is reused
    assert before[0]["SAVE"] == after[0]["SAVE"]  # and the conversion


# -- item 7: data jobs without GPUs ------------------------------------------------------------------

def test_data_jobs_ask_for_cpus_training_and_evaluation_for_gpus(tmp_path: Path) -> None:
    spec = dict(SEED_INPUT, EVAL=["ceval"])
    chain, _ = generate_chain(spec, None, pool="p", pfs="f")
    kinds = {job["jobSpec"]["command"]: job["jobSpec"] for job in chain["jobs"]}
    for script in ("aiak_convert.sh", "aiak_preprocess.sh", "aiak_report.sh"):
        assert kinds[script]["resources"] == [{"name": "cpu", "quantity": 16}] and kinds[script]["enableRDMA"] is False
    for script in ("aiak_train.sh", "aiak_eval.sh"):
        assert kinds[script]["resources"] == [{"name": "baidu.com/a800_80g_cgpu", "quantity": 8}]
        assert kinds[script]["enableRDMA"] is True
    mine = {"convert": [{"name": "cpu", "quantity": 32}, {"name": "memory", "quantity": 512}],
            "train": [{"name": "baidu.com/h800_80g_cgpu", "quantity": 8}]}
    chain, _ = generate_chain(dict(spec, RESOURCES=mine), None, pool="p", pfs="f")
    kinds = {job["jobSpec"]["command"]: job["jobSpec"] for job in chain["jobs"]}
    assert kinds["aiak_convert.sh"]["resources"] == mine["convert"] and kinds["aiak_train.sh"]["resources"] == \
        mine["train"]
    assert kinds["aiak_preprocess.sh"]["resources"] == [{"name": "cpu", "quantity": 16}]  # others keep the default


@pytest.mark.parametrize("value, message", [
    ([1], "RESOURCES: must be an object of step kind"),
    ({"tokenize": []}, "RESOURCES: unknown step kind 'tokenize'"),
    ({"convert": []}, "RESOURCES.convert must be a list of 1 to 16 resources"),
    ({"convert": [{"name": "cpu"}]}, "RESOURCES.convert[0] must be an object with exactly name and quantity"),
    ({"convert": [{"name": "cpu", "quantity": 0}]}, "RESOURCES.convert[0].quantity must be a number above 0"),
    ({"convert": [{"name": "a b", "quantity": 1}]}, "RESOURCES.convert[0].name must be a resource name"),
])
def test_bad_resources_are_one_line_and_write_nothing(tmp_path: Path, value: Any, message: str) -> None:
    assert_refused(gen(tmp_path, dict(SEED_INPUT, RESOURCES=value), *STORAGE), message)
    assert files(tmp_path) == ["aiak_job_info.json"]


@pytest.mark.parametrize("change, message", [
    ({"MODEL_URL": "s3://bucket/m"}, "MODEL_URL: must be a BOS URL such as"),
    ({"DATASET_URL": "bos:/bucket/dir/"}, "DATASET_URL: must name one file"),
    ({"BOS_ENDPOINT": "bj bcebos"}, "BOS_ENDPOINT: must be a host such as"),
    ({"CONVERT_CONFIG": "a/b.json"}, "CONVERT_CONFIG: must be a config name"),
    ({"SEQ_LENGTH": "long"}, "SEQ_LENGTH: must be a positive integer"),
    ({"EP": 0}, "EP: must be a positive integer"),
])
def test_new_keys_are_checked_in_one_line(tmp_path: Path, change: Dict[str, Any], message: str) -> None:
    assert_refused(gen(tmp_path, dict(SEED_INPUT, **change), *STORAGE), message)


def test_bos_endpoint_reaches_only_the_jobs_that_download(tmp_path: Path) -> None:
    jobs = chain_for(dict(SEED_INPUT, BOS_ENDPOINT="su.bcebos.com", EVAL=["ceval"]))
    assert [j.get("BOS_ENDPOINT") for j in jobs] == ["su.bcebos.com", "su.bcebos.com", None, None, None]


def test_template_credentials_file_path_is_carried_but_keys_never(tmp_path: Path) -> None:
    template = {"resourcePoolId": "p", "api_config": {"host": "aihc.bj.baidubce.com", "ak": "AKID1", "sk": "SK-1"},
                "jobs": [{"jobSpec": {"envs": [{"name": "JOB_CHAIN_CREDENTIALS", "value": "/root/pfs/creds.json"},
                                               {"name": "BOS_SK", "value": "x"}]},
                          "datasources": [{"type": "pfs", "name": "f", "mountPath": "/root/pfs"}],
                          "jobChain": {"generatedBy": "aiak-gen"}}]}
    chain, _ = generate_chain(SEED_INPUT, template, chain_path="/root/pfs/chain_info.json")
    first = envs(chain["jobs"][0])
    assert first["JOB_CHAIN_CREDENTIALS"] == "/root/pfs/creds.json" and first["JOB_CHAIN_CONFIG"] == \
        "/root/pfs/chain_info.json"
    assert "BOS_SK" not in first and "SK-1" not in str(chain["jobs"]) and "AKID1" not in str(chain["jobs"])


# -- issue 18 item 24: generator.py (662 lines) split along its seams ------------------------------

def test_aiak_generator_is_split_into_modules_under_400_lines() -> None:
    package = Path(layout.__file__).parent
    sizes = {p.name: len(p.read_text().splitlines()) for p in package.glob("*.py")}
    assert {"description.py", "layout.py", "plan.py", "template.py", "resources.py", "generator.py",
            "bos_fetch.py", "tables.py"} <= set(sizes)
    assert all(n <= 400 for n in sizes.values()), sizes
    assert CliRunner().invoke(aiak_gen, ["--help"]).exit_code == 0 and os.path.isdir(package / "scripts")


# -- issue 30 items 10 and 11: what AIAK's launchers and converter scripts need, at generation ------

def test_qwen3_235b_converts_as_aiaks_script_does_and_its_launchers_are_refused_with_the_reason(
        tmp_path: Path) -> None:
    """Item 10: AIAK's pretrain launcher saves nothing, its SFT one cannot read tokenized data."""
    spec = dict(SEED_INPUT, MODEL_NAME="qwen3-235b-a22b", MODEL_URL="bos:/mine/Qwen3-235B-A22B", REPLICAS=64)
    assert_refused(gen(tmp_path, spec, *STORAGE),
                   "AIAK's pretrain launcher examples/qwen3/pretrain/pretrain_qwen3_235b_a22b.sh has --save commented "
                   "out, so it would train 50,000 iterations and save no checkpoint: set TRAIN_SCRIPT to a launcher "
                   "of your own that saves")
    assert_refused(gen(tmp_path, dict(spec, TRAINING_PHASE="sft", JSON_KEYS=""), *STORAGE),
                   "sft_qwen3_235b_a22b.sh has no --is-tokenized-data")
    assert_refused(gen(tmp_path, dict(spec, TP=4, PP=4, TRAIN_SCRIPT="/w/pre.sh"), *STORAGE),
                   "PP: qwen3-235b-a22b's converter puts its layers on 8 pipeline stages")
    assert files(tmp_path) == ["aiak_job_info.json"]
    convert, _, train = chain_for(dict(spec, TRAIN_SCRIPT="/w/pretrain_qwen3_235b_a22b.sh"))
    assert convert["CONVERT_ARGS"] == ("--expert_tensor_parallel_size=1 --custom_pipeline_layers=11,11,12,12,12,12,"
                                       "12,12 --moe-grouped-gemm")  # examples/qwen3/checkpoint_convert's flags
    assert train["TRAIN_SCRIPT"] == "/w/pretrain_qwen3_235b_a22b.sh"


def test_a_data_parallel_size_that_does_not_divide_the_global_batch_is_refused_naming_valid_replicas(
        tmp_path: Path) -> None:
    """Item 11: llama2-7b with 3 replicas is DP 24 against AIAK's global batch 1024."""
    assert_refused(gen(tmp_path, dict(SEED_INPUT, REPLICAS=3), *STORAGE),
                   "REPLICAS: 3 x 8 GPUs with TP 1 x PP 1 give data-parallel size 24, which does not divide the "
                   "pretrain launcher's global batch 1024 (Megatron stops at start): use REPLICAS 1, 2, 4, 8, 16")
    assert files(tmp_path) == ["aiak_job_info.json"]
    assert_refused(gen(tmp_path, dict(SEED_INPUT, MODEL_NAME="qwen2.5-0.5b", MODEL_URL="bos:/mine/q", REPLICAS=64),
                       *STORAGE), "global batch 1024 / micro batch 4")  # DP 512 x micro 4 > 1024
    assert_refused(gen(tmp_path, dict(SFT_INPUT, REPLICAS=3), *STORAGE), "sft launcher's global batch 128")
    assert chain_for(dict(SEED_INPUT, REPLICAS=4))[2]["TP"] == "1"  # DP 32 divides 1024
    # a launcher of the user's own: its batch is not the table's, nothing to check against
    assert chain_for(dict(SEED_INPUT, REPLICAS=3, TRAIN_SCRIPT="/w/mine.sh"))[2]["TRAIN_SCRIPT"] == "/w/mine.sh"


def test_the_description_sets_aiaks_install_paths_for_every_step(tmp_path: Path) -> None:
    """Item 12: LoongForge images install under /workspace/LoongForge and /workspace/Loong-Megatron."""
    paths = {"AIAK_TRAINING_PATH": "/workspace/LoongForge", "MEGATRON_PATH": "/workspace/Loong-Megatron"}
    jobs = chain_for(dict(SEED_INPUT, EVAL=["ceval"], **paths))
    assert all({k: job.get(k) for k in paths} == paths for job in jobs if "EVAL_BENCHMARKS" not in job)
    assert all("AIAK_TRAINING_PATH" not in job for job in chain_for(SEED_INPUT))  # else each script finds it
    assert_refused(gen(tmp_path, dict(SEED_INPUT, MEGATRON_PATH="Loong-Megatron"), *STORAGE),
                   "MEGATRON_PATH: must be an absolute path in the image")
    template = {"resourcePoolId": "p", "jobs": [{"jobSpec": {"envs": [
        {"name": "AIAK_TRAINING_PATH", "value": "/opt/aiak"}, {"name": "NCCL_DEBUG", "value": "INFO"}]},
        "datasources": [{"type": "pfs", "name": "f", "mountPath": "/root/pfs"}]}]}
    kept, _ = generate_chain(SEED_INPUT, template)  # a template's install path is kept, as every env of its own
    assert all(envs(job)["AIAK_TRAINING_PATH"] == "/opt/aiak" for job in kept["jobs"])
    described, _ = generate_chain(dict(SEED_INPUT, **paths), template)  # the description's replaces it, once
    for job in described["jobs"]:
        names = [e["name"] for e in job["jobSpec"]["envs"]]
        assert names.count("AIAK_TRAINING_PATH") == 1 and envs(job)["AIAK_TRAINING_PATH"] == "/workspace/LoongForge"
