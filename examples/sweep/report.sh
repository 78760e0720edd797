#!/usr/bin/env bash
# report: runs once, after every point of the matrix succeeded.
set -euo pipefail
echo "sweep $JOB_CHAIN_PARAM_TAG, final loss per point:"
for f in "$SWEEP_DIR"/loss-*.txt; do
    echo "  $(basename "$f" .txt | sed 's/^loss-//'): $(cat "$f")"
done
