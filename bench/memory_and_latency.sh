#!/usr/bin/env bash
# Peak RSS of tprof and the time from SIGINT to the final files, for attaches of increasing
# length to the demo training loop (shapes and stacks on, gzip output, as the demo runs it).
# Usage: sudo bash bench/memory_and_latency.sh [SECONDS...]   (default: 10 60 300)
# Prints one line per attach; docs/BENCHMARKS.md records a run.
set -euo pipefail
cd "$(dirname "$0")/.."
durations=("$@")
[ ${#durations[@]} -gt 0 ] || durations=(10 60 300)
out=$(mktemp -d)
trap 'kill "$workload_pid" 2>/dev/null; rm -rf "$out"' EXIT

/usr/bin/python3 tests/workloads/train_loop.py --steps 100000000 --trigger none --annotate-steps >"$out/workload" &
workload_pid=$!
until grep -q READY "$out/workload"; do sleep 0.2; done

printf '%8s %14s %16s %12s %14s %10s\n' attach_s peak_rss_mb stop_to_file_s ops trace_mb dropped
for seconds in "${durations[@]}"; do
  log="$out/tprof.$seconds"
  /usr/bin/time -v ./build/tprof attach "$workload_pid" --output "$out/t$seconds.pt.trace.json.gz" >"$log" 2>&1 &
  time_pid=$!
  until grep -q "attached to" "$log" 2>/dev/null; do sleep 0.1; done
  tprof_pid=$(pgrep -P "$time_pid" -x tprof)
  sleep "$seconds"
  stop=$(date +%s.%N)
  kill -INT "$tprof_pid"
  wait "$time_pid"
  done_at=$(date +%s.%N)
  rss_kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  ops=$(grep -o '^tprof: [0-9,]* ranges' "$log" | grep -o '[0-9,]*' | tr -d ,)
  dropped=$(grep -o '[0-9,]* events dropped' "$log" | grep -o '^[0-9,]*' | tr -d ,)
  trace_mb=$(du -m "$out/t$seconds.pt.trace.json.gz" | cut -f1)
  printf '%8s %14.1f %16.2f %12s %14s %10s\n' "$seconds" "$(awk -v kb="$rss_kb" 'BEGIN {print kb / 1024}')" \
    "$(awk -v a="$stop" -v b="$done_at" 'BEGIN {print b - a}')" "$ops" "$trace_mb" "$dropped"
  rm -f "$out"/t"$seconds".*
done
