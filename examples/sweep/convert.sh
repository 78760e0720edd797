#!/usr/bin/env bash
# convert: make the checkpoint every training point starts from, and hand its path on as an output.
set -euo pipefail
ckpt="$SWEEP_DIR/ckpt-$JOB_CHAIN_PARAM_TAG"
mkdir -p "$ckpt"
echo "converted weights ($JOB_CHAIN_PARAM_TAG)" > "$ckpt/model.txt"
echo "ckpt=$ckpt" >> "$JOB_CHAIN_OUTPUTS"
echo "converted into $ckpt"
