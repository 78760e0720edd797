"""Stand-ins for what a real AIHC cluster gives aiak-gen's step scripts, for the tests.

- :func:`aiak_tree`: an AIAK-Training-LLM checkout whose tools take AIAK's own flags (argparse
  refuses anything else, as AIAK's do), print what AIAK's print and write what AIAK's write:
  the converter's ``latest_checkpointed_iteration.txt`` + ``release/mp_rank_TT[_PPP][_EEE]``,
  Megatron's ``<prefix>_<key>_document.{bin,idx}``, a tokenized SFT folder, and launchers that
  save ``iter_%07d`` checkpoints where ``--save`` says.
- :class:`BosStandIn`: a loopback HTTP server that speaks enough of BOS (HEAD/GET object, list
  objects with markers) and checks every request's BCE signature with the SDK's signer, so the
  BCE SDK's real ``BosClient`` can download from it.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple
from urllib.parse import parse_qsl, unquote, urlsplit

CONVERTER = r'''
"""Stand-in for AIAK's tools/convert_checkpoint/model.py (same flags; see aiak_stand_ins.py)."""
import argparse, glob, json, os, sys
p = argparse.ArgumentParser()
p.add_argument("--load_platform", choices=["huggingface", "mcore"], required=True)
p.add_argument("--save_platform", choices=["huggingface", "mcore"], required=True)
p.add_argument("--common_config_path", required=True)
p.add_argument("--tensor_model_parallel_size", type=int, default=1)
p.add_argument("--pipeline_model_parallel_size", type=int, default=1)
p.add_argument("--num_experts", type=int, default=None)
p.add_argument("--expert_parallel_size", type=int, default=None)
p.add_argument("--megatron_path", default=None)
p.add_argument("--load_ckpt_path", required=True)
p.add_argument("--save_ckpt_path", required=True)
p.add_argument("--no_load_optim", action="store_true")
p.add_argument("--no_save_optim", action="store_true")
p.add_argument("--safetensors", action="store_true")
p.add_argument("--expert_tensor_parallel_size", type=int, default=None)
p.add_argument("--custom_pipeline_layers", type=str, default=None)
p.add_argument("--moe-grouped-gemm", action="store_true")
a = p.parse_args()
if os.environ.get("AIAK_CALLS"):
    with open(os.environ["AIAK_CALLS"], "a") as f:
        f.write("convert " + " ".join(sys.argv[1:]) + "\n")
if not os.path.isfile(a.common_config_path):
    sys.exit(f"FileNotFoundError: {a.common_config_path}")
if a.custom_pipeline_layers and len(a.custom_pipeline_layers.split(",")) != a.pipeline_model_parallel_size:
    sys.exit("custom_pipeline_layers does not match pipeline_model_parallel_size")
pattern = "*.safetensors" if a.safetensors else "pytorch_model*.bin"
if not glob.glob(os.path.join(a.load_ckpt_path, pattern)):
    sys.exit(f"FileNotFoundError: no {pattern} in {a.load_ckpt_path}")
experts = json.load(open(a.common_config_path)).get("num_experts")
if experts and not a.num_experts:
    sys.exit("the config is a mixture of experts but --num_experts is not given: converted as dense")
os.makedirs(a.save_ckpt_path, exist_ok=True)
with open(os.path.join(a.save_ckpt_path, "latest_checkpointed_iteration.txt"), "w") as f:
    f.write("release")
tp, pp, ep = a.tensor_model_parallel_size, a.pipeline_model_parallel_size, a.expert_parallel_size or 1
for t in range(tp):
    for s in range(pp):
        for e in range(ep):
            name = f"mp_rank_{t:02d}" + (f"_{s:03d}" if pp > 1 else "") + (f"_{e:03d}" if ep > 1 else "")
            os.makedirs(os.path.join(a.save_ckpt_path, "release", name), exist_ok=True)
            open(os.path.join(a.save_ckpt_path, "release", name, "model_optim_rng.pt"), "w").close()
print(f"Saving mcore checkpoint to: {a.save_ckpt_path}")
'''

# LoongForge's tools/convert_checkpoint/module_convertor/model.py: the model's and the conversion's
# configs/models/*.yaml instead of a config/<model>.json (examples/*/checkpoint_convert there).
LOONGFORGE_CONVERTER = (CONVERTER
                        .replace('p.add_argument("--common_config_path", required=True)',
                                 'p.add_argument("--config_file", required=True)\n'
                                 'p.add_argument("--convert_file", required=True)')
                        .replace("if not os.path.isfile(a.common_config_path):\n    sys.exit(f\"FileNotFoundError: "
                                 "{a.common_config_path}\")",
                                 "for f in (a.config_file, a.convert_file):\n    if not os.path.isfile(f):\n"
                                 "        sys.exit(f\"FileNotFoundError: {f}\")")
                        .replace("json.load(open(a.common_config_path)).get(\"num_experts\")", "None"))

PRETRAIN_TOOL = r'''
"""Stand-in for AIAK's preprocess_pretrain_data.py (same flags)."""
import argparse, os, sys
p = argparse.ArgumentParser()
p.add_argument("--input", required=True)
p.add_argument("--output-prefix", required=True)
p.add_argument("--tokenizer-type", choices=["HFTokenizer"], required=True)
p.add_argument("--hf-tokenizer-path", required=True)
p.add_argument("--json-keys", nargs="+", default=["text"])
p.add_argument("--model-family", choices=["llama", "llama2", "llama3", "llama3.1", "baichuan", "baichuan2", "qwen",
                                          "qwen1.5", "qwen2", "mixtral"])
p.add_argument("--workers", type=int, default=1)
p.add_argument("--append-eod", action="store_true")
a = p.parse_args()
if os.environ.get("AIAK_CALLS"):
    with open(os.environ["AIAK_CALLS"], "a") as f:
        f.write(os.path.basename(sys.argv[0]) + " " + " ".join(sys.argv[1:]) + "\n")
open(a.input).read()
for key in a.json_keys:
    for ext in ("bin", "idx"):
        open(f"{a.output_prefix}_{key}_document.{ext}", "w").close()
print(f"Done! {a.input} -> {a.output_prefix}")
'''

SFT_TOOL = r'''
"""Stand-in for AIAK's preprocess_sft_data.py (same flags, AIAK's --chat-template choices)."""
import argparse, json, os, sys
p = argparse.ArgumentParser()
p.add_argument("--input", required=True)
p.add_argument("--seq-length", type=int, default=None)
p.add_argument("--output-path", required=True)
p.add_argument("--split", default="100,0,0")
p.add_argument("--chat-template", required=True, choices=["llama2", "llama2_zh", "llama3", "llama3.1", "baichuan",
               "baichuan2", "qwen", "mistral", "qwen2-vl", "alpaca", "deepseek", "deepseek3"])
p.add_argument("--tokenizer-type", choices=["HFTokenizer"], default="HFTokenizer")
p.add_argument("--hf-tokenizer-path", required=True)
p.add_argument("--workers", type=int, default=1)
a = p.parse_args()
if os.environ.get("AIAK_CALLS"):
    with open(os.environ["AIAK_CALLS"], "a") as f:
        f.write("preprocess_sft_data.py " + " ".join(sys.argv[1:]) + "\n")
open(a.input).read()
os.makedirs(a.output_path, exist_ok=True)
json.dump({"seq_length": a.seq_length, "chat_template": a.chat_template},
          open(os.path.join(a.output_path, "dataset_info.json"), "w"))
print(f">>> Saved preprocessed dataset to {a.output_path}")
'''

# A launcher as AIAK writes them (examples/<family>/{pretrain,finetuning}/...): hard-coded
# GPUS_PER_NODE and split, --load/--save $CHECKPOINT_PATH, #--is-tokenized-data in SFT ones.
LAUNCHER = """#! /bin/bash
CHECKPOINT_PATH=${{CHECKPOINT_PATH:-"/mnt/cluster/aiak-training-llm/ckpt"}}
GPUS_PER_NODE=8
TRAINING_ARGS=(
    --training-phase {phase}
    --seq-length {seq}
    --load $CHECKPOINT_PATH
    --save $CHECKPOINT_PATH
    --save-interval 100
{optim}
)
MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size {tp}
    --pipeline-model-parallel-size {pp}
{ep}
)
SFT_ARGS=(
    #--is-tokenized-data
)
echo "ARGS ${{TRAINING_ARGS[*]}} ${{MODEL_PARALLEL_ARGS[*]}} ${{SFT_ARGS[*]}} DATA=$DATA_PATH GPUS=$GPUS_PER_NODE"
args=("${{TRAINING_ARGS[@]}}")
for i in "${{!args[@]}}"; do
    if [ "${{args[$i]}}" = --save ]; then save=${{args[$((i + 1))]}}; fi
done
mkdir -p "$save/iter_0000100"
echo 100 > "$save/latest_checkpointed_iteration.txt"
echo " iteration      100/     100 | lm loss: 1.234E+00 |"
"""


def launcher(phase: str = "pretrain", seq: int = 4096, tp: int = 1, pp: int = 1, ep: Optional[int] = None,
             no_load_optim: bool = False) -> str:
    return LAUNCHER.format(phase=phase, seq=seq, tp=tp, pp=pp,
                           ep=f"    --expert-model-parallel-size {ep}" if ep else "",
                           optim="    --no-load-optim\n    --no-load-rng" if no_load_optim else "")


def aiak_tree(root: Path, configs: Tuple[str, ...] = ("llama2-7b", "qwen2-7b", "qwen1.5-0.5b", "llama3.1-8b"),
              moe_configs: Tuple[str, ...] = ("mixtral-8x7b",),
              tools: Tuple[str, ...] = ("preprocess_pretrain_data.py", "preprocess_sft_data.py"),
              launchers: Optional[Dict[str, str]] = None, loongforge: Tuple[str, ...] = ()) -> Path:
    """An AIAK checkout under ``root`` (pass it to the scripts as AIAK_TRAINING_PATH)."""
    if loongforge:  # LoongForge's layout: module_convertor/model.py and configs/models/*.yaml
        convert = root / "tools" / "convert_checkpoint" / "module_convertor"
        convert.mkdir(parents=True, exist_ok=True)
        (convert / "model.py").write_text(LOONGFORGE_CONVERTER)
        for rel in loongforge:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text("model: {}\n")
        configs, moe_configs = (), ()
    convert = root / "tools" / "convert_checkpoint"
    (convert / "config").mkdir(parents=True, exist_ok=True)
    if not loongforge:
        (convert / "model.py").write_text(CONVERTER)
    for name in configs:
        (convert / "config" / f"{name}.json").write_text(json.dumps({"args": {"common": {}}}))
    for name in moe_configs:
        (convert / "config" / f"{name}.json").write_text(json.dumps({"num_experts": 8}))
    data = root / "tools" / "data_preprocess"
    for tool in tools:
        (data / tool).parent.mkdir(parents=True, exist_ok=True)
        (data / tool).write_text(SFT_TOOL if "sft" in tool else PRETRAIN_TOOL)
    for rel, text in (launchers or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def hf_weights(folder: Path, kind: str = "safetensors") -> Path:
    """A Hugging Face model folder: config.json, tokenizer, and .safetensors or .bin weights."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (folder / "tokenizer.json").write_text("{}")
    if kind == "safetensors":
        (folder / "model-00001-of-00002.safetensors").write_bytes(b"w1" * 1000)
        (folder / "model-00002-of-00002.safetensors").write_bytes(b"w2" * 1000)
    else:
        (folder / "pytorch_model.bin").write_bytes(b"b" * 3000)
    return folder


class BosStandIn:
    """BOS on loopback: objects are the files under ``root/<bucket>/``; every request is signed.

    ``page`` caps a listing page (real BOS returns up to ``maxKeys``), so clients must follow
    ``nextMarker``. ``requests`` records (method, path) of every signed request served.
    """

    def __init__(self, root: Path, keys: Mapping[str, str], page: int = 2) -> None:
        self.root, self.keys, self.page = root, dict(keys), page
        self.requests: List[Tuple[str, str]] = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:  # noqa: N802 (http.server's naming)
                stand_in.serve(self, body=False)

            def do_GET(self) -> None:  # noqa: N802
                stand_in.serve(self, body=True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> BosStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def _answer(self, handler: BaseHTTPRequestHandler, status: int, data: bytes, body: bool,
                content_type: str = "application/json") -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("x-bce-request-id", str(uuid.uuid4()))
        handler.end_headers()
        if body:
            handler.wfile.write(data)

    def _error(self, handler: BaseHTTPRequestHandler, status: int, code: str, message: str, body: bool) -> None:
        data = json.dumps({"code": code, "message": message, "requestId": str(uuid.uuid4())}).encode()
        self._answer(handler, status, data, body)

    def serve(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        from job_chain.local.auth import verify
        from job_chain.local.errors import LocalAPIError

        raw = urlsplit(handler.path)
        query = parse_qsl(raw.query, keep_blank_values=True)
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in handler.headers.items()]
        try:
            verify(handler.command, raw.path.encode("latin-1"), query, headers, self.keys)
        except LocalAPIError as exc:
            self._error(handler, exc.status, exc.code, exc.message, body)
            return
        self.requests.append((handler.command, handler.path))
        bucket, _, key = unquote(raw.path).lstrip("/").partition("/")
        if not key:
            self._list(handler, bucket, dict(query), body)
            return
        path = self.root / bucket / key
        if not path.is_file():
            self._error(handler, 404, "NoSuchKey", f"no object {key} in {bucket}", body)
            return
        self._answer(handler, 200, path.read_bytes(), body, "application/octet-stream")

    def _list(self, handler: BaseHTTPRequestHandler, bucket: str, params: Dict[str, str], body: bool) -> None:
        folder = self.root / bucket
        if not folder.is_dir():
            self._error(handler, 404, "NoSuchBucket", f"no bucket {bucket}", body)
            return
        prefix, marker = params.get("prefix", ""), params.get("marker", "")
        keys = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        keys = [k for k in keys if k.startswith(prefix) and k > marker]
        page = keys[:min(self.page, int(params.get("maxKeys", 1000)))]
        truncated = len(keys) > len(page)
        answer = {"name": bucket, "prefix": prefix, "marker": marker, "maxKeys": int(params.get("maxKeys", 1000)),
                  "isTruncated": truncated,
                  "contents": [{"key": k, "lastModified": "2026-01-01T00:00:00Z", "eTag": "e", "storageClass":
                                "STANDARD", "size": (folder / k).stat().st_size,
                                "owner": {"id": "o", "displayName": "o"}} for k in page]}
        if truncated:
            answer["nextMarker"] = page[-1]
        self._answer(handler, 200, json.dumps(answer).encode(), body)
