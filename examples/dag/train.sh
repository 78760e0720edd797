#!/usr/bin/env bash
# train: print Megatron-style progress lines (the web console charts them) and save a "model".
set -euo pipefail
DAG_DIR="$DAG_DIR/$(id -un 2>/dev/null || id -u)"  # your own directory in the shared mount
loss=4.0
for iteration in $(seq 1 20); do
    loss=$(awk -v l="$loss" 'BEGIN { printf "%.4f", l * 0.9 }')
    printf ' iteration %8d/      20 | consumed samples: %8d | learning rate: 1.000000E-04 | lm loss: %.6E |\n' \
        "$iteration" "$((iteration * 50))" "$loss"
    sleep 0.1
done
echo "$loss" > "$DAG_DIR/model.txt"
echo "trained: final loss $loss"
