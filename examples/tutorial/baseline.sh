#!/usr/bin/env bash
# baseline: score the untrained model. Its first attempt lands on a "bad GPU" (an infra failure).
set -euo pipefail
if [ ! -e "$WORK/baseline-tried" ]; then
    touch "$WORK/baseline-tried"
    echo "RuntimeError: CUDA error: uncorrectable ECC error encountered" >&2
    exit 1
fi
echo "baseline loss 9.000" | tee "$WORK/baseline.txt"
