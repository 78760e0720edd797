"""Item 2 of issue 23: the step scripts fetch from BOS with the BCE SDK's own BosClient when the
image has no bcecmd, with the run's credentials (never a key in a command, env or log).

The BOS here is :class:`aiak_stand_ins.BosStandIn`: real HTTP on loopback, every request's BCE
signature checked with the SDK's signer, listings paged so the client must follow markers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator

import pytest
from aiak_stand_ins import BosStandIn, aiak_tree, hf_weights

from job_chain.aiak import bos_fetch

AK, SK = "AKID-bos-test", "SECRET-bos-test-1234"
BIN = os.path.dirname(sys.executable)


@pytest.fixture
def bos(tmp_path: Path) -> Iterator[BosStandIn]:
    root = tmp_path / "bos"
    hf_weights(root / "models" / "llama" / "Llama-2-7b-hf")
    (root / "models" / "llama" / "Llama-2-7b-hf" / "sub").mkdir()
    (root / "models" / "llama" / "Llama-2-7b-hf" / "sub" / "extra.txt").write_text("x")
    (root / "data" / "corpus.jsonl").parent.mkdir(parents=True)
    (root / "data" / "corpus.jsonl").write_text('{"text": "hello"}\n')
    with BosStandIn(root, {AK: SK}) as server:
        yield server


def job_env(bos: BosStandIn, tmp_path: Path, **extra: str) -> Dict[str, str]:
    """A job's environment: keys only in the credentials file JOB_CHAIN_CREDENTIALS names."""
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"host": "http://127.0.0.1:9", "ak": AK, "sk": SK}))
    env = {k: v for k, v in os.environ.items() if k not in ("AIHC_AK", "AIHC_SK", "AK", "SK", "AIHC_HOST")}
    return dict(env, JOB_CHAIN_CREDENTIALS=str(creds), BOS_ENDPOINT=bos.url, **extra)


def run_fetch(env: Dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "job_chain.aiak.bos_fetch", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_model_folder_is_fetched_through_the_sdks_bos_client_and_resumes(bos: BosStandIn, tmp_path: Path) -> None:
    dest = tmp_path / "pfs" / "hf"
    done = run_fetch(job_env(bos, tmp_path), "bos:/models/llama/Llama-2-7b-hf", str(dest))
    assert done.returncode == 0, done.stderr
    source = bos.root / "models" / "llama" / "Llama-2-7b-hf"
    fetched = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert fetched == sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file())
    assert all((dest / f).read_bytes() == (source / f).read_bytes() for f in fetched)
    assert not list(dest.rglob("*.partial"))
    lists = [p for m, p in bos.requests if m == "GET" and p.startswith("/models?")]
    assert len(lists) == 3  # 5 objects, pages of 2: the client followed nextMarker
    gets = len([1 for m, p in bos.requests if m == "GET" and not p.startswith("/models?")])
    assert gets == 5
    again = run_fetch(job_env(bos, tmp_path), "bos:/models/llama/Llama-2-7b-hf", str(dest))
    assert again.returncode == 0, again.stderr
    assert len([1 for m, p in bos.requests if m == "GET" and not p.startswith("/models?")]) == gets  # all there
    assert SK not in done.stdout + done.stderr + again.stdout + again.stderr


def test_one_object_is_fetched_to_a_file_with_keys_from_the_chain_file(bos: BosStandIn, tmp_path: Path) -> None:
    chain = tmp_path / "chain_info.json"
    chain.write_text(json.dumps({"resourcePoolId": "p", "api_config": {"host": "http://127.0.0.1:9", "ak": AK,
                                                                       "sk": SK}, "jobs": []}))
    env = {k: v for k, v in job_env(bos, tmp_path).items() if k != "JOB_CHAIN_CREDENTIALS"}
    dest = tmp_path / "corpus.jsonl.partial"
    done = run_fetch(dict(env, JOB_CHAIN_CONFIG=str(chain)), "bos:/data/corpus.jsonl", str(dest))
    assert done.returncode == 0, done.stderr
    assert dest.read_text() == '{"text": "hello"}\n'
    assert ("HEAD", "/data/corpus.jsonl") in bos.requests


def test_a_running_run_fetches_with_the_keys_it_saved_at_start_whatever_the_file_says_now(
        bos: BosStandIn, tmp_path: Path) -> None:
    from job_chain.record.records import RunRecords

    chain = tmp_path / "chain_info.json"
    run_id = "20260101-000000-b05f"
    RunRecords(str(chain)).save_credentials(run_id, {"host": "http://127.0.0.1:9", "ak": AK, "sk": SK})
    chain.write_text('{"resourcePoolId": "p", "api_config": {"ak": "EDITED-SINCE", ')  # broken since the run began
    env = {k: v for k, v in job_env(bos, tmp_path).items() if k != "JOB_CHAIN_CREDENTIALS"}
    dest = tmp_path / "corpus.jsonl"
    done = run_fetch(dict(env, JOB_CHAIN_CONFIG=str(chain), JOB_CHAIN_RUN_ID=run_id), "bos:/data/corpus.jsonl",
                     str(dest))
    assert done.returncode == 0, done.stderr
    assert dest.read_text() == '{"text": "hello"}\n'


def test_a_wrong_key_or_a_missing_object_is_one_line_without_the_secret(bos: BosStandIn, tmp_path: Path) -> None:
    env = job_env(bos, tmp_path)
    (tmp_path / "credentials.json").write_text(json.dumps({"host": "h", "ak": AK, "sk": "WRONG-SECRET-999"}))
    denied = run_fetch(env, "bos:/data/corpus.jsonl", str(tmp_path / "out"))
    assert denied.returncode == 1 and "Traceback" not in denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1  # a HEAD answer has no body: the status says it
    assert "400" in denied.stderr and f"keys from credentials file {tmp_path / 'credentials.json'}" in denied.stderr
    assert "WRONG-SECRET-999" not in denied.stderr + denied.stdout
    missing = run_fetch(job_env(bos, tmp_path), "bos:/data/nothing-here", str(tmp_path / "out"))
    assert missing.returncode == 1 and "nothing at bos:/data/nothing-here" in missing.stderr
    no_keys = run_fetch({k: v for k, v in env.items() if k != "JOB_CHAIN_CREDENTIALS"}, "bos:/data/x", "out")
    assert no_keys.returncode == 1 and "JOB_CHAIN_CREDENTIALS" in no_keys.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("host, endpoint", [
    ("aihc.bj.baidubce.com", "https://bj.bcebos.com"), ("https://aihc.gz.baidubce.com/", "https://gz.bcebos.com"),
])
def test_the_bos_endpoint_follows_the_aihc_region_unless_given(host: str, endpoint: str) -> None:
    assert bos_fetch.bos_endpoint(None, host) == endpoint
    assert bos_fetch.bos_endpoint("su.bcebos.com", host) == "https://su.bcebos.com"
    with pytest.raises(bos_fetch.FetchError, match="set BOS_ENDPOINT"):
        bos_fetch.bos_endpoint(None, "http://127.0.0.1:8080")


def test_object_names_that_would_leave_the_folder_are_skipped() -> None:
    assert bos_fetch._relative("m/config.json", "m/") == "config.json"
    assert bos_fetch._relative("m/a/b.bin", "m/") == "a/b.bin"
    for unsafe in ("m/../etc/passwd", "m/a//b", "m/", "m/dir/", "m/./x"):
        assert bos_fetch._relative(unsafe, "m/") is None
    assert bos_fetch.parse_url("bos:/cce-ai-models/huggingface.co/Qwen/") == ("cce-ai-models", "huggingface.co/Qwen")
    with pytest.raises(bos_fetch.FetchError):
        bos_fetch.parse_url("s3://bucket/key")


def test_the_convert_step_fetches_with_the_sdk_when_the_image_has_no_bcecmd(bos: BosStandIn, tmp_path: Path) -> None:
    """aiak_convert.sh on a stock image: no bcecmd, weights not on the PFS yet."""
    from job_chain.aiak.generator import step_scripts

    script = tmp_path / "aiak_convert.sh"
    script.write_text(step_scripts()["aiak_convert.sh"])
    aiak = aiak_tree(tmp_path / "AIAK-Training-LLM")
    load, save = tmp_path / "pfs" / "hf", tmp_path / "pfs" / "mcore" / "tp1_pp1"
    env = job_env(bos, tmp_path, PATH=f"{BIN}:/usr/bin:/bin", AIAK_TRAINING_PATH=str(aiak), MODEL_NAME="llama2-7b",
                  MODEL_URL="bos:/models/llama/Llama-2-7b-hf", LOAD=str(load), SAVE=str(save), TP="1", PP="1",
                  CONVERT_CONFIG="llama2-7b", AIAK_CALLS=str(tmp_path / "calls"))
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (load / "config.json").exists() and (load / ".aiak-gen-source").read_text() == \
        "MODEL_URL=bos:/models/llama/Llama-2-7b-hf\n"
    assert "--safetensors" in (tmp_path / "calls").read_text()
    assert (save / "release").is_dir() and (save / ".aiak-gen-done").read_text().splitlines()[0] == "TP=1 PP=1"
    assert SK not in done.stdout + done.stderr




def test_an_interrupted_weights_download_resumes_instead_of_passing_for_a_copy(bos: BosStandIn, tmp_path: Path) -> None:
    from job_chain.aiak.generator import step_scripts

    script = tmp_path / "aiak_convert.sh"
    script.write_text(step_scripts()["aiak_convert.sh"])
    load, save = tmp_path / "pfs" / "hf", tmp_path / "pfs" / "mcore"
    load.mkdir(parents=True)  # what an attempt killed after the first file left
    (load / "config.json").write_bytes((bos.root / "models" / "llama" / "Llama-2-7b-hf" / "config.json").read_bytes())
    (load / ".aiak-gen-fetching").write_text("MODEL_URL=bos:/models/llama/Llama-2-7b-hf\n")
    env = job_env(bos, tmp_path, PATH=f"{BIN}:/usr/bin:/bin", AIAK_TRAINING_PATH=str(aiak_tree(tmp_path / "aiak")),
                  MODEL_NAME="llama2-7b", MODEL_URL="bos:/models/llama/Llama-2-7b-hf", LOAD=str(load),
                  SAVE=str(save), TP="1", PP="1", CONVERT_CONFIG="llama2-7b")
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "copied there by hand" not in done.stdout and (load / "model-00002-of-00002.safetensors").exists()
    assert ("GET", "/models/llama/Llama-2-7b-hf/config.json") not in bos.requests  # already complete: skipped
    assert not (load / ".aiak-gen-fetching").exists() and (load / ".aiak-gen-source").exists()
