#!/usr/bin/env bash
# A sidecar, the way a pod with shareProcessNamespace runs one: tprof and the target in one new
# PID namespace, each with its own root. Run it inside that namespace:
#   unshare --pid --fork --mount --mount-proc --kill-child \
#     bash sidecar_attach.sh TPROF ROOT DIR_IN_ROOT STEPS TRACE
# The target is tests/workloads/train_loop.py, already copied to ROOT/DIR_IN_ROOT, run chrooted
# into ROOT (the trixie root's torch 2.6); tprof runs from this root, attaches by the pid the
# shared namespace gives the target, records STEPS steps into TRACE and stops. Prints
# "pid PID" last.
set -euo pipefail
tprof=$1 root=$2 dir=$3 steps=$4 trace=$5
here=$root$dir

wait_for() {  # wait_for PATTERN FILE SECONDS
  for _ in $(seq $(($3 * 10))); do grep -q "$1" "$2" 2>/dev/null && return 0; sleep 0.1; done
  echo "sidecar_attach: no '$1' in $2 after $3 s:" >&2
  cat "$2" >&2
  exit 1
}

chroot "$root" env TMPDIR="$dir" python3 "$dir/train_loop.py" --steps "$steps" --trigger fifo \
  --fifo "$dir/go" > "$here/workload.out" 2>&1 &
wait_for READY "$here/workload.out" 180
pid=$(awk '/READY/ {print $2}' "$here/workload.out")

"$tprof" attach "$pid" --output "$trace" --no-et 2> "$here/tprof.err" &
tprof_pid=$!
wait_for attached "$here/tprof.err" 180
echo go > "$here/go"
wait_for DONE "$here/workload.out" 600
kill -INT "$tprof_pid"
wait "$tprof_pid" || { cat "$here/tprof.err" >&2; exit 1; }
echo exit > "$here/go"
wait
cat "$here/tprof.err" >&2
echo "pid $pid"
