#!/usr/bin/env bash
# Step 1 (2 replicas): each rank sums its share of the lines, like data-parallel workers.
set -euo pipefail
HELLO_DIR="$HELLO_DIR/$(id -un 2>/dev/null || id -u)"  # your own directory in the shared mount
echo "rank $RANK of $WORLD_SIZE (master $MASTER_ADDR:$MASTER_PORT) on job $AIHC_JOB_NAME"
awk -v rank="$RANK" -v world="$WORLD_SIZE" '(NR - 1) % world == rank { s += $1 } END { print s }' \
    "$HELLO_DIR/input.txt" > "$HELLO_DIR/part-$RANK.tmp"
mv "$HELLO_DIR/part-$RANK.tmp" "$HELLO_DIR/part-$RANK.txt"
echo "rank $RANK partial sum: $(cat "$HELLO_DIR/part-$RANK.txt")"
