#!/usr/bin/env bash
# Step 1 of an aiak-gen chain: convert Hugging Face weights to a Megatron-core checkpoint.
# Written by aiak-gen. Every parameter arrives as an env of the job (jobSpec.envs):
#   MODEL_NAME  MODEL_URL (bos:/... of the HF weights)  LOAD (HF weights dir)
#   SAVE (converted checkpoint dir)  TP  PP  CONVERT_CONFIG (a name in the converter's config/,
#   or an absolute .json path)  MoE models: NUM_EXPERTS  EP
#   Downloads: BOS_ENDPOINT  JOB_CHAIN_CONFIG  JOB_CHAIN_RUNTIME (where credentials and the BCE
#   SDK are found when the image has no bcecmd; never a key)
#   CONVERT_ARGS (more flags AIAK's own convert script for the model passes, e.g. qwen3-235b-a22b's
#   --custom_pipeline_layers)  LOONGFORGE_CONFIG LOONGFORGE_CONVERT (LoongForge's converter's
#   --config_file/--convert_file, relative to its root)
# Optional: AIAK_TRAINING_PATH, MEGATRON_PATH (default: found in the image, see below).
# Two layouts: AIAK-Training-LLM/-Omni's tools/convert_checkpoint/model.py with config/<model>.json,
# and LoongForge's tools/convert_checkpoint/module_convertor/model.py with configs/models/*.yaml.
# The command is AIAK's documented one: tools/convert_checkpoint/model.py with
# --load_platform=huggingface --save_platform=mcore --common_config_path=config/<model>.json
# --tensor/pipeline_model_parallel_size (MoE: --num_experts --expert_parallel_size)
# --megatron_path --load_ckpt_path --save_ckpt_path --no_load_optim --no_save_optim, plus
# --safetensors only when the weights are safetensors (the converter then reads *.safetensors,
# else pytorch_model*.bin) (https://cloud.baidu.com/doc/AIHC/s/Vlyo4r4gj "Checkpoint及格式转换";
# AIAK's examples/<family>/checkpoint_convert/convert_<model>_hf_to_mcore.sh).
# Idempotent: SAVE/.aiak-gen-done records what a finished conversion was made from (its split on
# the first line, which the training step checks), and a rerun keeps it; a conversion is written
# to SAVE.partial and moved into place only when complete. LOAD/.aiak-gen-source records the
# URL the weights came from (.aiak-gen-fetching while a download is under way, so an interrupted
# one resumes): a folder that records another URL is refused, never reused.
set -euo pipefail

: "${MODEL_NAME:?}" "${MODEL_URL:?}" "${LOAD:?}" "${SAVE:?}" "${TP:?}" "${PP:?}" "${CONVERT_CONFIG:?}"
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
CONVERT_CHECKPOINT_PATH="$AIAK_TRAINING_PATH/tools/convert_checkpoint"
case "$CONVERT_CONFIG" in
    /*) config=$CONVERT_CONFIG ;;
    *) config="$CONVERT_CHECKPOINT_PATH/config/$CONVERT_CONFIG.json" ;;
esac
split="TP=$TP PP=$PP${EP:+ EP=$EP}"
record=$(printf '%s\nMODEL_URL=%s\nCONVERT_CONFIG=%s' "$split" "$MODEL_URL" "$CONVERT_CONFIG")
if [ -n "${CONVERT_ARGS:-}" ]; then
    record=$(printf '%s\nCONVERT_ARGS=%s' "$record" "$CONVERT_ARGS")
fi

# fetch URL DEST: bcecmd when the image has it, else the BCE SDK's BOS client (job-chain's runtime).
# DEST/.aiak-gen-fetching marks a download under way (written once a tool is there to do it).
fetch() {
    if command -v bcecmd >/dev/null 2>&1; then
        echo "MODEL_URL=$1" > "$2/.aiak-gen-fetching"
        bcecmd bos sync "$1" "$2"
        return
    fi
    export PYTHONPATH="${JOB_CHAIN_RUNTIME:+$JOB_CHAIN_RUNTIME:}${PYTHONPATH:-}"
    if ! python3 -c 'import job_chain.aiak.bos_fetch' 2>/dev/null; then
        echo "no bcecmd in this image and no job-chain runtime with the BCE SDK: run 'job-chain bundle" \
            "DIR' on the storage, set \"scrips_path\" in the chain, regenerate and resume; or copy" \
            "$1 to $2 by hand ('bcecmd bos sync $1 $2')" >&2
        exit 1
    fi
    echo "MODEL_URL=$1" > "$2/.aiak-gen-fetching"
    if ! python3 -m job_chain.aiak.bos_fetch "$1" "$2"; then
        echo "the download of $1 stopped: resume the chain to continue it (or, once you copied the" \
            "weights by hand, remove $2/.aiak-gen-fetching)" >&2
        exit 1
    fi
}

if [ -f "$SAVE/.aiak-gen-done" ]; then
    if [ "$(cat "$SAVE/.aiak-gen-done")" = "$record" ]; then
        echo "converted checkpoint already in $SAVE ($split): nothing to do"
        exit 0
    fi
    echo "$SAVE holds a conversion made from something else ($(tr '\n' ' ' < "$SAVE/.aiak-gen-done"))," \
        "not from $MODEL_URL with $CONVERT_CONFIG ($split): move it away, then resume the chain" >&2
    exit 1
fi

if [ -f "$LOAD/.aiak-gen-source" ]; then
    if [ "$(cat "$LOAD/.aiak-gen-source")" != "MODEL_URL=$MODEL_URL" ]; then
        echo "$LOAD holds weights from $(cat "$LOAD/.aiak-gen-source"), not $MODEL_URL: move it" \
            "away, then resume the chain" >&2
        exit 1
    fi
elif [ -f "$LOAD/config.json" ] && [ ! -f "$LOAD/.aiak-gen-fetching" ]; then
    echo "using the Hugging Face weights already in $LOAD (copied there by hand: no download record)"
else  # a first download, or one an earlier attempt did not finish (it resumes)
    echo "downloading $MODEL_URL to $LOAD"
    mkdir -p "$LOAD"
    fetch "$MODEL_URL" "$LOAD"
    if [ ! -f "$LOAD/config.json" ]; then
        echo "$MODEL_URL holds no config.json: is it a Hugging Face model folder?" >&2
        exit 1
    fi
    mv "$LOAD/.aiak-gen-fetching" "$LOAD/.aiak-gen-source"
fi

if [ -f "$CONVERT_CHECKPOINT_PATH/model.py" ]; then  # AIAK-Training-LLM / -Omni
    converter="$CONVERT_CHECKPOINT_PATH/model.py"
    if [ ! -f "$config" ]; then
        echo "no converter config $config in this image: set CONVERT_CONFIG in the description to the" \
            "config of $MODEL_NAME (a name in $CONVERT_CHECKPOINT_PATH/config, or an absolute path)," \
            "regenerate and resume the chain" >&2
        exit 1
    fi
    layout=(--common_config_path="$config" --megatron_path="$MEGATRON_PATH")
elif [ -f "$CONVERT_CHECKPOINT_PATH/module_convertor/model.py" ]; then  # LoongForge
    converter="$CONVERT_CHECKPOINT_PATH/module_convertor/model.py"
    if [ -z "${LOONGFORGE_CONFIG:-}" ] || [ -z "${LOONGFORGE_CONVERT:-}" ]; then
        echo "$AIAK_TRAINING_PATH is LoongForge, whose converter needs the model's configs/models/*.yaml," \
            "but $MODEL_NAME's table row has no loongforge_config/loongforge_convert: add them to your" \
            "aiak_dict/models.csv row, regenerate and resume the chain" >&2
        exit 1
    fi
    for file in "$LOONGFORGE_CONFIG" "$LOONGFORGE_CONVERT"; do
        if [ ! -f "$AIAK_TRAINING_PATH/$file" ]; then
            echo "no $AIAK_TRAINING_PATH/$file in this image: fix loongforge_config/loongforge_convert" \
                "of $MODEL_NAME in your aiak_dict/models.csv, regenerate and resume the chain" >&2
            exit 1
        fi
    done
    layout=(--config_file="$AIAK_TRAINING_PATH/$LOONGFORGE_CONFIG"
        --convert_file="$AIAK_TRAINING_PATH/$LOONGFORGE_CONVERT")
    export PYTHONPATH="$MEGATRON_PATH${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "no checkpoint converter in $AIAK_TRAINING_PATH (neither tools/convert_checkpoint/model.py nor" \
        "tools/convert_checkpoint/module_convertor/model.py): set AIAK_TRAINING_PATH in the description" \
        "to where AIAK or LoongForge is in the image, regenerate and resume the chain" >&2
    exit 1
fi
weights=()
if compgen -G "$LOAD/*.safetensors" >/dev/null; then
    weights=(--safetensors)
elif compgen -G "$LOAD/pytorch_model*.bin" >/dev/null; then
    echo "$LOAD holds pytorch_model*.bin weights (no safetensors): converting without --safetensors"
else
    echo "no weights in $LOAD: neither *.safetensors nor pytorch_model*.bin" >&2
    exit 1
fi
moe=()
if [ -n "${NUM_EXPERTS:-}" ]; then
    moe=(--num_experts="$NUM_EXPERTS" --expert_parallel_size="${EP:-1}")
fi
read -r -a extra <<< "${CONVERT_ARGS:-}"

echo "converting $LOAD -> $SAVE with $split"
rm -rf "$SAVE.partial"
mkdir -p "$(dirname "$SAVE")"
python "$converter" \
    --load_platform=huggingface \
    --save_platform=mcore \
    "${layout[@]}" \
    --tensor_model_parallel_size="$TP" \
    --pipeline_model_parallel_size="$PP" \
    ${moe[@]+"${moe[@]}"} \
    ${extra[@]+"${extra[@]}"} \
    --load_ckpt_path="$LOAD" \
    --save_ckpt_path="$SAVE.partial" \
    --no_load_optim \
    --no_save_optim \
    ${weights[@]+"${weights[@]}"}
rm -rf "$SAVE"
mv "$SAVE.partial" "$SAVE"
printf '%s\n' "$record" > "$SAVE/.aiak-gen-done"
echo "converted checkpoint saved in $SAVE"
