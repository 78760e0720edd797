#!/usr/bin/env bash
# prepare: write the data set to shared storage and tell later steps where it is (an output).
set -euo pipefail
mkdir -p "$WORK"
seq 1 1000 > "$WORK/data.txt"
echo "data=$WORK/data.txt" >> "$JOB_CHAIN_OUTPUTS"
echo "prepared $(wc -l < "$WORK/data.txt") samples"
