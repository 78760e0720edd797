#!/usr/bin/env bash
# train: one point of the learning-rate sweep, for $STEPS steps (the "steps" parameter).
set -euo pipefail
echo "training on $DATA with lr=$JOB_CHAIN_MATRIX_LR for $STEPS steps"
loss=$(awk -v lr="$JOB_CHAIN_MATRIX_LR" -v n="$STEPS" 'BEGIN { printf "%.3f", 2 + lr * 10000 - n / 1000 }')
echo "$JOB_CHAIN_MATRIX_LR $loss" > "$WORK/loss-$JOB_CHAIN_MATRIX_LR.txt"
echo "final loss $loss"
