#!/usr/bin/env bash
# Evaluation step of an aiak-gen chain (EVAL): evaluate the trained checkpoint on one benchmark.
# Written by aiak-gen. The eval job is a matrix over the benchmarks, and this runs once per point.
# Every parameter arrives as an env of the job (jobSpec.envs; job-chain writes the point's
# benchmark into EVAL_BENCHMARK and EVAL_OUTPUT, whose values name it as a matrix reference):
#   EVAL_BENCHMARK (the benchmark name)  LOAD (the last training's checkpoint root)  TP  PP
#   EP (MoE)  TOKENIZER_PATH  EVAL_OUTPUT (this benchmark's folder on the mount)
#   EVAL_COMMAND (optional: the command that evaluates; from the description's EVAL_COMMAND)
# Baidu's AIAK documentation (the AIHC "训练说明" https://cloud.baidu.com/doc/AIHC/s/Vlyo4r4gj and
# the AIAK-Training-LLM page https://cloud.baidu.com/doc/AIHC/s/slqc6kq90) documents conversion,
# preprocessing and training, but no evaluation entry point, so this script does not guess one:
# it runs EVAL_COMMAND with bash, with the envs above exported, and that command must write the
# benchmark's result to "$EVAL_OUTPUT/result.json" (any text; JSON is kept as JSON in the report).
# EVAL_CHECKPOINT is the iteration directory the command should read: Megatron's tracker
# LOAD/latest_checkpointed_iteration.txt holds an iteration N (-> LOAD/iter_%07d) or "release"
# (-> LOAD/release), which is what AIAK's mcore-to-HF converter takes as --load_ckpt_path.
# Idempotent: EVAL_OUTPUT/.aiak-gen-done records the evaluated iteration directory; a rerun
# skips it, and a newer checkpoint (a resumed training) is evaluated again.
set -euo pipefail

: "${EVAL_BENCHMARK:?}" "${LOAD:?}" "${TP:?}" "${PP:?}" "${TOKENIZER_PATH:?}" "${EVAL_OUTPUT:?}"
RESULT="$EVAL_OUTPUT/result.json"
if [ -z "${EVAL_COMMAND:-}" ]; then
    echo "no EVAL_COMMAND: AIAK documents no evaluation command, so aiak-gen cannot run" \
        "$EVAL_BENCHMARK by itself. Set \"EVAL_COMMAND\" in aiak_job_info.json to the command" \
        "that evaluates the checkpoint \$EVAL_CHECKPOINT (TP=\$TP PP=\$PP, tokenizer \$TOKENIZER_PATH) on" \
        "\$EVAL_BENCHMARK and writes \$EVAL_OUTPUT/result.json, regenerate the chain and resume it" >&2
    exit 2
fi
tracker="$LOAD/latest_checkpointed_iteration.txt"
if [ ! -f "$tracker" ]; then
    echo "no $tracker: the training saved no checkpoint in $LOAD" >&2
    exit 1
fi
iteration=$(tr -d '[:space:]' < "$tracker")
case "$iteration" in
    release) EVAL_CHECKPOINT="$LOAD/release" ;;
    '' | *[!0-9]*)
        echo "$tracker holds '$iteration', neither an iteration number nor release" >&2
        exit 1 ;;
    *) EVAL_CHECKPOINT=$(printf '%s/iter_%07d' "$LOAD" "$((10#$iteration))") ;;
esac
if [ ! -d "$EVAL_CHECKPOINT" ]; then
    echo "$tracker names $iteration but $EVAL_CHECKPOINT does not exist" >&2
    exit 1
fi

if [ -f "$EVAL_OUTPUT/.aiak-gen-done" ] && [ -f "$RESULT" ] &&
    [ "$(cat "$EVAL_OUTPUT/.aiak-gen-done")" = "$EVAL_CHECKPOINT" ]; then
    echo "$EVAL_BENCHMARK already evaluated on $EVAL_CHECKPOINT, result in $RESULT: nothing to do"
    exit 0
fi

mkdir -p "$EVAL_OUTPUT"
rm -f "$RESULT" "$EVAL_OUTPUT/.aiak-gen-done"
export EVAL_BENCHMARK LOAD EVAL_CHECKPOINT TP PP TOKENIZER_PATH EVAL_OUTPUT
echo "evaluating $EVAL_CHECKPOINT on $EVAL_BENCHMARK (TP=$TP PP=$PP${EP:+ EP=$EP}) with EVAL_COMMAND"
bash -c "$EVAL_COMMAND"
if [ ! -f "$RESULT" ]; then
    echo "EVAL_COMMAND finished but wrote no $RESULT: make it write the $EVAL_BENCHMARK" \
        "result there" >&2
    exit 1
fi
echo "$EVAL_CHECKPOINT" > "$EVAL_OUTPUT/.aiak-gen-done"
echo "$EVAL_BENCHMARK evaluated; result in $RESULT"
