#!/usr/bin/env bash
# eval-a / eval-b / eval-c: three benchmarks of the same model, run side by side.
set -euo pipefail
DAG_DIR="$DAG_DIR/$(id -un 2>/dev/null || id -u)"  # your own directory in the shared mount
model=$(cat "$DAG_DIR/model.txt")
score=$(awk -v m="$model" -v b="$BENCHMARK" 'BEGIN { printf "%.2f", 100 - m * 10 - length(b) }')
echo "$score" > "$DAG_DIR/score-$BENCHMARK.txt"
echo "benchmark $BENCHMARK: $score"
