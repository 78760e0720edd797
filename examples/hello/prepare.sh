#!/usr/bin/env bash
# Step 0: write the "dataset" (the numbers 1..100) to shared storage.
set -euo pipefail
HELLO_DIR="$HELLO_DIR/$(id -un 2>/dev/null || id -u)"  # your own directory in the shared mount
mkdir -p "$HELLO_DIR"
rm -f "$HELLO_DIR"/part-*.txt "$HELLO_DIR"/result.txt
seq 1 100 > "$HELLO_DIR/input.txt"
echo "prepared $(wc -l < "$HELLO_DIR/input.txt") numbers in $HELLO_DIR/input.txt"
