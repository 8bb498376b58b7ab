#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, torch built with CUDA, and BPF:
#   bash tests/gpu/gpu_check.sh [BUILD_DIR] [OUT_DIR] [PYTHON]
# 1. torch's own profiler counts the kernels of STEPS training steps (the reference);
# 2. `tprof record` starts the same loop and records the same steps;
# 3. the loop is started with CUDA_INJECTION64_PATH (tprof env) and `tprof attach` records it.
# Each trace must hold kernels with ac2g arrows from cuda_runtime launches inside ops, and as
# many kernels as torch's profiler saw, within 2%; its deviceProperties must equal Kineto's, and
# its kernels' occupancy estimates Kineto's for the same kernel and launch shape (98% of them). Exits 77 (skipped) without a GPU, torch.cuda
# or BPF, saying why.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:-$repo/build}
out=${2:-$(mktemp -d)}
python=${3:-python3}
steps=${STEPS:-50}
workload=$repo/tests/workloads/cuda_train_loop.py
mkdir -p "$out"

skip() { echo "*** SKIPPED LOUDLY: $* ***"; exit 77; }
fail() { echo "gpu_check: FAILED: $*"; exit 1; }

command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || skip "no NVIDIA GPU here; the GPU check did NOT run"
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
  || skip "$python has no torch with CUDA; the GPU check did NOT run"
[ -x "$build/tprof" ] && [ -f "$build/libtprof_cupti.so" ] || fail "no tprof or libtprof_cupti.so in $build"
[ "$(id -u)" -eq 0 ] || skip "BPF needs root; the GPU check did NOT run"
bpftool_probe=$( (grep -q . /sys/kernel/btf/vmlinux && echo ok) 2>/dev/null )
[ "$bpftool_probe" = ok ] || skip "this kernel has no BTF (gVisor?): tprof cannot attach; the GPU check did NOT run"

echo "== reference: torch.profiler, $steps steps"
"$python" "$workload" --steps "$steps" --reference-out "$out/reference.json" || fail "the reference run failed"
reference=$("$python" -c "import json; print(json.load(open('$out/reference.json'))['kernels'])")
echo "torch.profiler: $reference kernels"

# Checks one trace against the reference; prints its figures.
check_trace() {
  "$python" - "$1" "$reference" "$out/reference.pt.trace.json" <<'PY'
import json, sys
trace = json.load(open(sys.argv[1]))
reference = int(sys.argv[2])
kineto = json.load(open(sys.argv[3]))
events = trace["traceEvents"]
ops = {e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
kernels = [e for e in events if e.get("cat") == "kernel"]
launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
flows_s = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
flows_f = {e["id"] for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
linked = [k for k in kernels if k["args"]["correlation"] in launches and k["args"].get("External id") in ops]
print(f"{sys.argv[1]}: {len(kernels)} kernels, {len(linked)} linked to a launch inside an op, "
      f"{len(flows_s & flows_f)} ac2g arrows; gpu: {trace['tprof'].get('gpu')}")
if not kernels:
    sys.exit("no kernels")
if len(linked) < 0.98 * len(kernels):
    sys.exit("fewer than 98% of kernels linked to their op")
if abs(len(kernels) - reference) > 0.02 * reference:
    sys.exit(f"{len(kernels)} kernels against torch's {reference}: more than 2% apart")
theirs = kineto.get("deviceProperties", [])
ours = trace.get("deviceProperties", [])
print(f"deviceProperties: tprof {ours}, Kineto {theirs}")
if not ours or any(ours[0].get(key) != value for key, value in theirs[0].items() if key in ours[0]):
    sys.exit("deviceProperties differ from Kineto's")
OCCUPANCY = ("blocks per SM", "warps per SM", "est. achieved occupancy %")
def shape(kernel):
    return kernel["name"], tuple(kernel["args"]["grid"]), tuple(kernel["args"]["block"])
expected = {shape(k): [k["args"].get(key) for key in OCCUPANCY]
            for k in kineto["traceEvents"] if k.get("cat") == "kernel"}
compared = [k for k in kernels if shape(k) in expected]
same = [k for k in compared if all(abs(float(k["args"].get(key, -1)) - float(want)) <= 1e-4 * max(1.0, abs(float(want)))
                                   for key, want in zip(OCCUPANCY, expected[shape(k)]) if want is not None)]
print(f"occupancy: {len(same)} of {len(compared)} kernels with a Kineto twin agree")
if not compared or len(same) < 0.98 * len(compared):
    sys.exit("kernel occupancy differs from Kineto's")
PY
}

echo "== tprof record, $steps steps"
rm -f "$out/start"
"$build/tprof" record -o "$out/record.pt.trace.json" --no-et -- "$python" "$workload" --steps "$steps" \
  --start-file "$out/start" 2> "$out/record.log" &
record_pid=$!
for _ in $(seq 600); do grep -q "^tprof: attached\|attached to" "$out/record.log" 2>/dev/null && break; sleep 0.1; done
touch "$out/start"
wait "$record_pid" || { cat "$out/record.log"; fail "tprof record failed"; }
check_trace "$out/record.pt.trace.json" || fail "tprof record's trace"

echo "== started with the injection variable, then tprof attach"
rm -f "$out/start"
eval "$("$build/tprof" env)"
"$python" "$workload" --steps "$steps" --start-file "$out/start" > "$out/attach_target.log" &
target=$!
unset CUDA_INJECTION64_PATH
for _ in $(seq 600); do grep -q READY "$out/attach_target.log" && break; sleep 0.1; done
"$build/tprof" attach "$target" -o "$out/attach.pt.trace.json" --no-et 2> "$out/attach.log" &
tprof_pid=$!
for _ in $(seq 600); do grep -q "attached to" "$out/attach.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5  # the library wakes within 200 ms of the attach
touch "$out/start"
wait "$target" || fail "the attached workload failed"
wait "$tprof_pid" || { cat "$out/attach.log"; fail "tprof attach failed"; }
check_trace "$out/attach.pt.trace.json" || fail "tprof attach's trace"
echo "gpu_check: PASSED (files in $out)"
