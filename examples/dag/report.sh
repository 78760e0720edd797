#!/usr/bin/env bash
# report: the join. Runs once, after every evaluation succeeded.
set -euo pipefail
DAG_DIR="$DAG_DIR/$(id -un 2>/dev/null || id -u)"  # your own directory in the shared mount
echo "report for the model in $DAG_DIR:"
for score in "$DAG_DIR"/score-*.txt; do
    echo "  $(basename "$score" .txt | sed 's/^score-//'): $(cat "$score")"
done
