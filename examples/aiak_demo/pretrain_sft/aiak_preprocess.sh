#!/usr/bin/env bash
# Step 2 of an aiak-gen chain: tokenize the dataset for pre-training or SFT.
# Written by aiak-gen. Every parameter arrives as an env of the job (jobSpec.envs):
#   TRAINING_PHASE (pretrain|sft)  DATASET_URL (bos:/... of the raw data)  INPUT_DATA (raw file)
#   TOKENIZER_PATH (the HF weights dir)  DATA_PATH (what training reads)
#   pretrain: OUTPUT_PREFIX  JSON_KEYS (space-separated)  MODEL_FAMILY (--model-family: Qwen-1's
#   tokenizer needs "qwen", as AIAK's examples/qwen/pretrain/preprocess_data.sh passes)
#   sft: CHAT_TEMPLATE  SEQ_LENGTH
#   Downloads: BOS_ENDPOINT  JOB_CHAIN_CONFIG  JOB_CHAIN_RUNTIME (as in aiak_convert.sh)
# Optional: AIAK_TRAINING_PATH, MEGATRON_PATH, PREPROCESS_WORKERS (default 50, as AIAK's examples).
# The commands are AIAK's documented ones (https://cloud.baidu.com/doc/AIHC/s/Vlyo4r4gj "数据处理";
# AIAK's examples/<family>/{pretrain,finetuning}/preprocess_data.sh): PYTHONPATH=MEGATRON_PATH:
# AIAK_TRAINING_PATH, tools/data_preprocess/preprocess_pretrain_data.py --input --output-prefix
# --tokenizer-type HFTokenizer --hf-tokenizer-path --json-keys --workers 50 --append-eod, which
# writes <prefix>_<key>_document.{bin,idx} per key (DATA_PATH names them), and
# preprocess_sft_data.py --input --output --seq-length --chat-template --tokenizer-type
# HFTokenizer --hf-tokenizer-path --workers 50 --split 100,0,0. The tool is the one the image
# has: tools/data_preprocess/preprocess_{pretrain,sft}_data.py, llm/preprocess_{pretrain,sft}_data.py
# (newer layout), or for pretraining an older image's preprocess_data.py (same flags).
# Idempotent: <OUTPUT_PREFIX or DATA_PATH>.aiak-gen-done records what finished data was made
# from, and a rerun keeps it; INPUT_DATA.aiak-gen-source records the URL the raw data came from.
# A record naming another source is refused, never reused.
set -euo pipefail

: "${TRAINING_PHASE:?}" "${DATASET_URL:?}" "${INPUT_DATA:?}" "${TOKENIZER_PATH:?}" "${DATA_PATH:?}"
# Where AIAK is in the image: the description's AIAK_TRAINING_PATH / MEGATRON_PATH, else the image's
# LOONGFORGE_PATH, else the first of AIAK's and LoongForge's usual folders that the image has.
first_dir() {
    for dir in "$@"; do
        if [ -d "$dir" ]; then echo "$dir"; return; fi
    done
    echo "$1"
}
AIAK_TRAINING_PATH=${AIAK_TRAINING_PATH:-${LOONGFORGE_PATH:-$(first_dir /workspace/AIAK-Training-LLM \
    /workspace/LoongForge /workspace/AIAK-Training-Omni)}}
MEGATRON_PATH=${MEGATRON_PATH:-$(first_dir /workspace/AIAK-Megatron /workspace/Loong-Megatron)}
export AIAK_TRAINING_PATH MEGATRON_PATH LOONGFORGE_PATH="$AIAK_TRAINING_PATH"  # LoongForge's launchers read that
PREPROCESS_WORKERS=${PREPROCESS_WORKERS:-50}
TOOLS="$AIAK_TRAINING_PATH/tools/data_preprocess"
case "$TRAINING_PHASE" in
    pretrain)
        : "${OUTPUT_PREFIX:?}" "${JSON_KEYS:?}"
        DONE="$OUTPUT_PREFIX.aiak-gen-done"
        shaping="JSON_KEYS=$JSON_KEYS${MODEL_FAMILY:+ MODEL_FAMILY=$MODEL_FAMILY}"
        candidates=(preprocess_pretrain_data.py llm/preprocess_pretrain_data.py preprocess_data.py)
        ;;
    sft)
        : "${CHAT_TEMPLATE:?}" "${SEQ_LENGTH:?}"
        DONE="$DATA_PATH.aiak-gen-done"
        shaping="CHAT_TEMPLATE=$CHAT_TEMPLATE SEQ_LENGTH=$SEQ_LENGTH"
        candidates=(preprocess_sft_data.py llm/preprocess_sft_data.py)
        ;;
    *)
        echo "TRAINING_PHASE must be pretrain or sft, not '$TRAINING_PHASE'" >&2
        exit 2
        ;;
esac
record=$(printf 'DATASET_URL=%s\nTOKENIZER_PATH=%s\n%s' "$DATASET_URL" "$TOKENIZER_PATH" "$shaping")

# fetch URL DEST: bcecmd when the image has it, else the BCE SDK's BOS client (job-chain's runtime)
fetch() {
    if command -v bcecmd >/dev/null 2>&1; then
        bcecmd bos cp "$1" "$2" --restart --quiet --yes
        return
    fi
    export PYTHONPATH="${JOB_CHAIN_RUNTIME:+$JOB_CHAIN_RUNTIME:}${PYTHONPATH:-}"
    if ! python3 -c 'import job_chain.aiak.bos_fetch' 2>/dev/null; then
        echo "no bcecmd in this image and no job-chain runtime with the BCE SDK: run 'job-chain bundle" \
            "DIR' on the storage, set \"scrips_path\" in the chain, regenerate and resume; or copy" \
            "$1 to $INPUT_DATA by hand ('bcecmd bos cp $1 $INPUT_DATA')" >&2
        exit 1
    fi
    python3 -m job_chain.aiak.bos_fetch "$1" "$2"
}

if [ -f "$DONE" ]; then
    if [ "$(cat "$DONE")" = "$record" ]; then
        echo "dataset already preprocessed at $DATA_PATH: nothing to do"
        exit 0
    fi
    echo "$DATA_PATH was made from something else ($(tr '\n' ' ' < "$DONE")), not from" \
        "$(echo "$record" | tr '\n' ' '): move it and $DONE away, then resume the chain" >&2
    exit 1
fi

if [ -f "$INPUT_DATA.aiak-gen-source" ]; then
    if [ "$(cat "$INPUT_DATA.aiak-gen-source")" != "DATASET_URL=$DATASET_URL" ]; then
        echo "$INPUT_DATA was downloaded from $(cat "$INPUT_DATA.aiak-gen-source"), not" \
            "$DATASET_URL: move it away, then resume the chain" >&2
        exit 1
    fi
elif [ -f "$INPUT_DATA" ]; then
    echo "using the raw data already at $INPUT_DATA (copied there by hand: no download record)"
else
    echo "downloading $DATASET_URL to $INPUT_DATA"
    mkdir -p "$(dirname "$INPUT_DATA")"
    fetch "$DATASET_URL" "$INPUT_DATA.partial"
    mv "$INPUT_DATA.partial" "$INPUT_DATA"
    echo "DATASET_URL=$DATASET_URL" > "$INPUT_DATA.aiak-gen-source"
fi

tool=""
for name in "${candidates[@]}"; do
    if [ -f "$TOOLS/$name" ]; then
        tool="$TOOLS/$name"
        break
    fi
done
if [ -z "$tool" ]; then
    echo "this image has no $TRAINING_PHASE preprocessing tool: looked for ${candidates[*]} in" \
        "$TOOLS (set AIAK_TRAINING_PATH if AIAK lives elsewhere in the image)" >&2
    exit 1
fi
export PYTHONPATH="$MEGATRON_PATH:$AIAK_TRAINING_PATH${PYTHONPATH:+:$PYTHONPATH}"
echo "tokenizing with $tool"
if [ "$TRAINING_PHASE" = pretrain ]; then
    read -r -a json_keys <<< "$JSON_KEYS"
    family=()
    if [ -n "${MODEL_FAMILY:-}" ]; then
        family=(--model-family "$MODEL_FAMILY")
    fi
    mkdir -p "$(dirname "$OUTPUT_PREFIX")"
    python "$tool" \
        ${family[@]+"${family[@]}"} \
        --input "$INPUT_DATA" \
        --output-prefix "$OUTPUT_PREFIX" \
        --tokenizer-type HFTokenizer \
        --hf-tokenizer-path "$TOKENIZER_PATH" \
        --json-keys "${json_keys[@]}" \
        --workers "$PREPROCESS_WORKERS" \
        --append-eod
else
    mkdir -p "$(dirname "$DATA_PATH")"
    rm -rf "$DATA_PATH"  # a half-written directory from an interrupted run
    python "$tool" \
        --input "$INPUT_DATA" \
        --output "$DATA_PATH" \
        --seq-length "$SEQ_LENGTH" \
        --chat-template "$CHAT_TEMPLATE" \
        --tokenizer-type HFTokenizer \
        --hf-tokenizer-path "$TOKENIZER_PATH" \
        --workers "$PREPROCESS_WORKERS" \
        --split 100,0,0
fi
printf '%s\n' "$record" > "$DONE"
echo "dataset preprocessed into $DATA_PATH"
