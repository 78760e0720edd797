#!/bin/sh
# `make demo`'s web console: start `JOB_CHAIN ui ARGS...` in the background, or reuse the one this
# script started before in RUN_DIR if it still runs (so running the demo again starts no second
# console). Prints the console's URL (its first line of output) and how to stop it.
# Usage: scripts/demo-console.sh JOB_CHAIN RUN_DIR [ui arguments...]
set -eu
job_chain=$1
run_dir=$2
shift 2
pid_file="$run_dir/ui.pid"
log="$run_dir/ui.log"
if [ -s "$pid_file" ]; then
    pid=$(cat "$pid_file")
    if kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o args= | grep -q " ui "; then
        echo "web console (already running): $(head -n 1 "$log")   (stop it: kill $pid)"
        exit 0
    fi
fi
# the log's first line is the console's URL with its token: readable by this user only (a log left
# by an older demo may be 0644, and truncating a file keeps its mode)
umask 077
: > "$log"
chmod 600 "$log"
nohup "$job_chain" ui "$@" --port 0 > "$log" 2>&1 &
echo $! > "$pid_file"
i=0
while [ ! -s "$log" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
echo "web console: $(head -n 1 "$log")   (stop it: kill $(cat "$pid_file"))"
