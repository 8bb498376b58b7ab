#!/usr/bin/env bash
# torch.compile's GPU side, for a machine with an NVIDIA GPU, torch with CUDA and Triton, and BPF:
#   bash tests/gpu/compiled_kernels_check.sh [BUILD_DIR] [OUT_DIR] [PYTHON]
# `tprof record` runs tests/workloads/cuda_compiled_function.py (inductor) from its first op; its
# trace must hold, in the measured steps, every Triton kernel torch.profiler records there (by
# name and count), each linked (External id) to the range that launched it: a forward graph's to
# its "Torch-Compiled Region", a backward graph's to the autograd node that runs it. Exits 77
# (skipped) without a GPU, torch.cuda or BPF, saying why.
set -uo pipefail
check=compiled_kernels_check
python_modules="torch, triton"
source "$(dirname "$0")/gpu_machine.sh"
workload=$repo/tests/workloads/cuda_compiled_function.py

echo "== reference: torch.profiler"
"$python" "$workload" --reference-out "$out/reference.pt.trace.json" > "$out/reference.log" 2>&1 \
  || { cat "$out/reference.log"; fail "the reference run failed"; }
echo "== tprof record"
timeout 300 "$build/tprof" record -o "$out/record.pt.trace.json" --no-et -- "$python" "$workload" \
  > "$out/record_target.log" 2> "$out/record.log" || { cat "$out/record.log"; fail "tprof record failed"; }
grep -A12 "torch.compile:" "$out/record.log"
"$python" - "$out/record.pt.trace.json" "$out/reference.pt.trace.json" <<'PY'
import collections, json, sys

def measured_triton_kernels(path):
    events = json.load(open(path))["traceEvents"]
    ranges = {e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    measured = next(e for e in events if e.get("cat") == "user_annotation" and e["name"] == "measured_steps")
    kernels = []
    for e in events:
        launch = launches.get(e.get("args", {}).get("correlation"))
        if e.get("cat") == "kernel" and e["name"].startswith("triton_") and launch is not None \
                and measured["ts"] <= launch["ts"] <= measured["ts"] + measured["dur"]:
            linked = ranges.get(e["args"].get("External id"))
            kernels.append((e["name"], linked["name"] if linked else None))
    return kernels

ours = measured_triton_kernels(sys.argv[1])
theirs = measured_triton_kernels(sys.argv[2])
by_link = collections.Counter(ours)
for (name, linked), count in sorted(by_link.items(), key=str):
    print(f"  tprof: {count} x {name} linked to {linked}")
ours_by_name = collections.Counter(name for name, _ in ours)
theirs_by_name = collections.Counter(name for name, _ in theirs)
print(f"Triton kernels in the measured steps: tprof {sum(ours_by_name.values())}, torch.profiler {sum(theirs_by_name.values())}")
if not theirs_by_name:
    sys.exit("torch.profiler recorded no Triton kernel: the workload did not compile for the GPU")
if ours_by_name != theirs_by_name:
    sys.exit(f"Triton kernels differ: tprof {dict(ours_by_name)}, torch.profiler {dict(theirs_by_name)}")
in_region = sum(c for (_, linked), c in by_link.items() if linked and linked.startswith("Torch-Compiled Region: "))
in_backward = sum(c for (_, linked), c in by_link.items() if linked and linked.startswith("autograd::engine::evaluate_function: "))
print(f"linked: {in_region} to a compiled region, {in_backward} to a backward node, {len(ours) - in_region - in_backward} elsewhere")
if in_region == 0 or in_region + in_backward != len(ours):
    sys.exit("a Triton kernel is linked to neither its compiled region nor its backward node")
PY
[ $? -eq 0 ] || fail "see above (files in $out)"
echo "compiled_kernels_check: PASSED (files in $out)"
