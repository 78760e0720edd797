#!/usr/bin/env bash
# report: what the sweep found (compare's output "best").
set -euo pipefail
echo "sweep done: $BEST"
