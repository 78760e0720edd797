#!/usr/bin/env bash
# prep: write the "dataset" every later step reads from shared storage.
set -euo pipefail
DAG_DIR="$DAG_DIR/$(id -un 2>/dev/null || id -u)"  # your own directory in the shared mount
mkdir -p "$DAG_DIR"
rm -f "$DAG_DIR"/*.txt
seq 1 1000 > "$DAG_DIR/data.txt"
echo "prepared $(wc -l < "$DAG_DIR/data.txt") samples in $DAG_DIR"
