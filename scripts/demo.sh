#!/usr/bin/env bash
# Sets up a fresh machine, starts the demo training loop that ships with the repo, attaches
# tprof to it for a few seconds, and leaves the trace in ./demo.pt.trace.json.gz.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh

workload_out=$(mktemp)
/usr/bin/python3 tests/workloads/train_loop.py --steps 1000000 --trigger none --annotate-steps >"$workload_out" &
workload_pid=$!
trap 'kill "$workload_pid" 2>/dev/null; rm -f "$workload_out"' EXIT
until grep -q READY "$workload_out"; do
  kill -0 "$workload_pid" 2>/dev/null || { echo "demo: the workload died" >&2; exit 1; }
  sleep 0.2
done
echo "demo: training loop running as pid $workload_pid; attaching for 3 s" >&2
# --mode 0644: the demo trace is meant to be opened by whoever ran the demo through sudo.
# --force: a second demo replaces the first one's files (tprof refuses existing files unasked).
./build/tprof attach "$workload_pid" --duration 3 --output demo.pt.trace.json.gz --mode 0644 --force
echo "demo: open demo.pt.trace.json.gz in https://ui.perfetto.dev or chrome://tracing" >&2
