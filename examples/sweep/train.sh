#!/usr/bin/env bash
# train: one point of the lr × seed matrix. CKPT is convert's output "ckpt" (an env value of the chain).
set -euo pipefail
echo "training from $CKPT with lr=$JOB_CHAIN_MATRIX_LR seed=$JOB_CHAIN_MATRIX_SEED"
sleep 1
score=$(awk -v lr="$JOB_CHAIN_MATRIX_LR" -v s="$JOB_CHAIN_MATRIX_SEED" 'BEGIN { printf "%.3f", 2 + lr * 1000 + s / 100 }')
echo "$score" > "$SWEEP_DIR/loss-lr$JOB_CHAIN_MATRIX_LR-seed$JOB_CHAIN_MATRIX_SEED.txt"
echo "final loss $score"
