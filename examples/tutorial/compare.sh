#!/usr/bin/env bash
# compare: runs once, after the baseline and every point of the sweep (a join).
set -euo pipefail
cat "$WORK"/loss-*.txt
best=$(sort -k2 -g "$WORK"/loss-*.txt | head -n 1)
echo "best=lr ${best% *}, loss ${best#* }" >> "$JOB_CHAIN_OUTPUTS"
echo "best: $best"
