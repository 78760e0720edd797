#!/usr/bin/env bash
# Step 3 of an aiak-gen chain: train with AIAK's example launcher for the model.
# Written by aiak-gen. Every parameter arrives as an env of the job (jobSpec.envs):
#   TRAINING_PHASE (pretrain|sft)  TRAIN_SCRIPT (the launcher: relative to AIAK_TRAINING_PATH,
#   or absolute)  TP  PP  EP (MoE)  LOAD (converted checkpoint)  SAVE (this training's
#   checkpoints)  DATA_PATH  TOKENIZER_PATH  TENSORBOARD_PATH  CUDA_DEVICE_MAX_CONNECTIONS
#   GPUS_PER_NODE  SEQ_LENGTH (sft: the length the data was tokenized at)
# AIAK's launchers (examples/<family>/pretrain/pretrain_<model>.sh, .../finetuning/sft_<model>.sh,
# see https://cloud.baidu.com/doc/AIHC/s/slqc6kq90 and the images' /workspace/AIAK-Training-LLM)
# read DATA_PATH, TOKENIZER_PATH, CHECKPOINT_PATH and TENSORBOARD_PATH from the environment
# (newer ones CHECKPOINT_LOAD_PATH / CHECKPOINT_SAVE_PATH, also set here) and MASTER_ADDR,
# MASTER_PORT, WORLD_SIZE, RANK from the PyTorchJob, but hard-code GPUS_PER_NODE=8, the
# parallel split and --load/--save $CHECKPOINT_PATH, and keep --is-tokenized-data commented out
# in the sft ones. This script runs a copy of the launcher with GPUS_PER_NODE, --tensor/
# --pipeline/--expert-model-parallel-size set to GPUS_PER_NODE/TP/PP/EP, --load from LOAD (or
# SAVE, to resume) and --save to SAVE, and for sft --is-tokenized-data (DATA_PATH is the
# preprocess step's tokenized data). LOAD holding a trained (not converted) checkpoint, as when
# sft follows pretrain, adds Megatron's --finetune (load the weights, start at iteration 0 with a
# fresh optimizer). It refuses a LOAD written with another TP/PP/EP, a SAVE trained from other
# inputs, and stops with a message if the launcher cannot take the split or saved nothing in SAVE.
# Idempotent: SAVE/.aiak-gen-done marks a finished training (and records its split), which a
# rerun skips; an interrupted training resumes from the latest checkpoint in SAVE.
set -euo pipefail

: "${TRAINING_PHASE:?}" "${TRAIN_SCRIPT:?}" "${TP:?}" "${PP:?}" "${LOAD:?}" "${SAVE:?}"
: "${DATA_PATH:?}" "${TOKENIZER_PATH:?}" "${TENSORBOARD_PATH:?}"
GPUS_PER_NODE=${GPUS_PER_NODE:-8}

if [ -f "$SAVE/.aiak-gen-done" ]; then
    echo "training already finished, checkpoints in $SAVE: nothing to do"
    exit 0
fi
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
case "$TRAIN_SCRIPT" in
    /*) launcher_path=$TRAIN_SCRIPT ;;
    *) launcher_path="$AIAK_TRAINING_PATH/$TRAIN_SCRIPT" ;;
esac
if [ ! -f "$launcher_path" ]; then
    echo "AIAK launcher $launcher_path is not in this image: set TRAIN_SCRIPT in the" \
        "description (aiak_job_info.json) to the launcher for this model" >&2
    exit 1
fi
case "$TP$PP${EP:-}$GPUS_PER_NODE" in
    *[!0-9]*) echo "TP, PP, EP and GPUS_PER_NODE must be whole numbers, found TP=$TP PP=$PP" \
        "EP=${EP:-} GPUS_PER_NODE=$GPUS_PER_NODE" >&2; exit 2 ;;
esac
split="TP=$TP PP=$PP${EP:+ EP=$EP}"
inputs=$(printf 'LOAD=%s\nDATA_PATH=%s' "$LOAD" "$DATA_PATH")

mkdir -p "$SAVE" "$TENSORBOARD_PATH"
if [ -f "$SAVE/.aiak-gen-source" ] && [ "$(cat "$SAVE/.aiak-gen-source")" != "$inputs" ]; then
    echo "$SAVE holds a training of other inputs ($(tr '\n' ' ' < "$SAVE/.aiak-gen-source")), not" \
        "$(echo "$inputs" | tr '\n' ' '): give the chain a new VERSION (or move $SAVE away)" >&2
    exit 1
fi
printf '%s\n' "$inputs" > "$SAVE/.aiak-gen-source"
if [ -f "$SAVE/latest_checkpointed_iteration.txt" ]; then
    echo "resuming from the latest checkpoint in $SAVE"
    AIAK_GEN_LOAD="$SAVE"
else
    AIAK_GEN_LOAD="$LOAD"
    made=$(head -n 1 "$LOAD/.aiak-gen-done" 2>/dev/null || true)
    if [ -n "$made" ] && [ "$made" != "$split" ]; then
        echo "$LOAD was written with $made but this training uses $split: conversion" \
            "and training must use the same split (regenerate the chain)" >&2
        exit 1
    fi
fi
AIAK_GEN_FINETUNE=""
if [ "$AIAK_GEN_LOAD" = "$LOAD" ] && [ -f "$LOAD/latest_checkpointed_iteration.txt" ] &&
    [ "$(cat "$LOAD/latest_checkpointed_iteration.txt")" != release ]; then
    AIAK_GEN_FINETUNE=--finetune  # a trained checkpoint of an earlier phase, not a conversion
fi
export AIAK_GEN_LOAD AIAK_GEN_SAVE="$SAVE" AIAK_GEN_FINETUNE
export CHECKPOINT_PATH="$AIAK_GEN_LOAD" CHECKPOINT_LOAD_PATH="$AIAK_GEN_LOAD" CHECKPOINT_SAVE_PATH="$SAVE"
export TENSORBOARD_PATH DATA_PATH TOKENIZER_PATH

launcher=$(mktemp "${TMPDIR:-/tmp}/aiak-launcher.XXXXXX")
trap 'rm -f "$launcher"' EXIT
# shellcheck disable=SC2016  # the launcher, not this script, expands $AIAK_GEN_LOAD/$AIAK_GEN_SAVE
sed -E \
    -e "s/^GPUS_PER_NODE=[0-9]+/GPUS_PER_NODE=$GPUS_PER_NODE/" \
    -e "s/--tensor-model-parallel-size([ =]+)[0-9]+/--tensor-model-parallel-size\\1$TP/g" \
    -e "s/--pipeline-model-parallel-size([ =]+)[0-9]+/--pipeline-model-parallel-size\\1$PP/g" \
    -e "s/--expert-model-parallel-size([ =]+)[0-9]+/--expert-model-parallel-size\\1${EP:-1}/g" \
    -e 's/--load([ =]+)"?\$\{?CHECKPOINT_PATH\}?"?/--load\1"$AIAK_GEN_LOAD" $AIAK_GEN_FINETUNE/g' \
    -e 's/--save([ =]+)"?\$\{?CHECKPOINT_PATH\}?"?/--save\1"$AIAK_GEN_SAVE"/g' \
    "$launcher_path" > "$launcher"

uses() { grep -Eq -- "^[^#]*$1" "$launcher"; }
for pair in "tensor:$TP" "pipeline:$PP" "expert:${EP:-1}"; do
    kind=${pair%%:*} size=${pair#*:}
    if ! uses "--$kind-model-parallel-size" && [ "$size" != 1 ]; then
        echo "$launcher_path does not set --$kind-model-parallel-size, so $size cannot be" \
            "applied: use a launcher that does (TRAIN_SCRIPT) or the split it was written for" >&2
        exit 1
    fi
done
if ! uses '--save[ =]+"[$]AIAK_GEN_SAVE"' && ! uses 'CHECKPOINT_SAVE_PATH'; then
    echo "note: $launcher_path saves where its own CHECKPOINT_PATH says ($AIAK_GEN_LOAD)," \
        "not in $SAVE" >&2
fi
if [ "$TRAINING_PHASE" = sft ] && ! uses '--is-tokenized-data'; then
    sed -E -i 's/^([[:space:]]*)#[[:space:]]*--is-tokenized-data/\1--is-tokenized-data/' "$launcher"
    if ! uses '--is-tokenized-data'; then
        echo "$launcher_path has no --is-tokenized-data option to enable, but DATA_PATH" \
            "($DATA_PATH) is pre-tokenized: set TRAIN_SCRIPT to an sft launcher that has it" >&2
        exit 1
    fi
fi

if [ "$TRAINING_PHASE" = sft ] && [ -n "${SEQ_LENGTH:-}" ]; then
    trained=$(grep -Eo -- '^[^#]*--seq-length[ =]+[0-9]+' "$launcher" | grep -Eo '[0-9]+$' | head -n 1 || true)
    if [ -n "$trained" ] && [ "$trained" != "$SEQ_LENGTH" ]; then
        echo "note: the data was tokenized at SEQ_LENGTH=$SEQ_LENGTH but $launcher_path trains at" \
            "--seq-length $trained" >&2
    fi
fi
if [ "$AIAK_GEN_LOAD" = "$SAVE" ] && uses '--no-load-optim'; then
    echo "note: $launcher_path loads with --no-load-optim: resuming at the saved iteration with a" \
        "fresh optimizer state" >&2
fi

echo "training with $launcher_path ($split): loading $AIAK_GEN_LOAD, saving to $SAVE"
bash "$launcher"
if [ ! -f "$SAVE/latest_checkpointed_iteration.txt" ]; then
    echo "$launcher_path finished but saved no checkpoint in $SAVE (no" \
        "latest_checkpointed_iteration.txt): does it hard-code its save path" \
        "(CHECKPOINT_SAVE_PATH / --save)? Make it save to \$CHECKPOINT_SAVE_PATH, then resume" >&2
    exit 1
fi
echo "$split" > "$SAVE/.aiak-gen-done"
echo "training finished; checkpoints in $SAVE"
