#!/usr/bin/env bash
# tprof under load: four threads run small ops (16x16 mm + relu) as fast as they can on this
# machine while tprof records them for SECONDS (default 10), shapes and stacks on. Prints the
# events kept and dropped, and tprof's peak RSS. docs/BENCHMARKS.md records a run.
# Usage: sudo bash bench/load.sh [SECONDS] [extra tprof attach arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
shift || true
out=$(mktemp -d)
mkfifo "$out/go"
trap 'kill "$workload_pid" 2>/dev/null; rm -rf "$out"' EXIT

/usr/bin/python3 tests/workloads/torch_threads.py --iterations 100000000 <"$out/go" >"$out/workload" &
workload_pid=$!
exec 3>"$out/go"
until grep -q READY "$out/workload"; do sleep 0.2; done
echo go >&3
sleep 1  # the four threads are running
/usr/bin/time -v ./build/tprof attach "$workload_pid" --duration "$seconds" --output "$out/load.pt.trace.json.gz" \
  "$@" >"$out/tprof" 2>&1
grep -E "^tprof: (attached|[0-9,]+ ranges)|warning" "$out/tprof"
awk -F': ' '/Maximum resident set size/ {printf "peak RSS %.1f MB\n", $2 / 1024}' "$out/tprof"
