#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, torch built with CUDA, and BPF:
#   bash tests/gpu/gpu_check.sh [BUILD_DIR] [OUT_DIR] [PYTHON]
# 1. torch's own profiler records STEPS training steps (the reference, Kineto's trace);
# 2. `tprof record` starts the same loop and records it from its first op;
# 3. the loop is started with CUDA_INJECTION64_PATH (tprof env) and `tprof attach` records it.
# The steps run inside record_function("measured_steps"). In each trace, the kernels, copies and
# memsets launched there must be torch.profiler's, within 2%, each with the same name, op (by
# External id) and launching CUDA call (by correlation), and start after that call; its ops must
# be torch.profiler's by name, within 2%; its deviceProperties must equal Kineto's,
# and its kernels' occupancy estimates Kineto's for the same kernel and launch shape (98% of
# them). Both paths are checked even if one fails. Exits 77 (skipped) without a GPU, torch.cuda
# or BPF, saying why.
set -uo pipefail
check=gpu_check
source "$(dirname "$0")/gpu_machine.sh"
steps=${STEPS:-50}
workload=$repo/tests/workloads/cuda_train_loop.py

echo "== reference: torch.profiler, $steps steps"
"$python" "$workload" --steps "$steps" --reference-out "$out/reference.pt.trace.json" || fail "the reference run failed"

# Checks one trace against the reference; prints its figures.
check_trace() {
  "$python" - "$1" "$out/reference.pt.trace.json" <<'PY'
import collections, json, sys
trace = json.load(open(sys.argv[1]))
kineto = json.load(open(sys.argv[2]))

def measured_gpu_work(trace):
    """The kernels, copies and memsets launched inside the measured_steps annotation (tprof
    record's trace holds the warm-up steps too), each as (category, name, the name of the op its
    External id names, its launching call's name), and the kernels themselves."""
    events = trace["traceEvents"]
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
    # Launches are CUPTI's API records, which carry a correlation.
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    measured = [e for e in events if e.get("cat") == "user_annotation" and e["name"] == "measured_steps"]
    if len(measured) != 1:
        sys.exit(f"{len(measured)} measured_steps annotations, not 1")
    begin, end = measured[0]["ts"], measured[0]["ts"] + measured[0]["dur"]
    work, kernels, late = collections.Counter(), [], 0
    for event in events:
        if event.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = launches.get(event["args"].get("correlation"))
        if launch is None or not begin <= launch["ts"] <= end:
            continue
        op = ops.get(event["args"].get("External id"))
        work[(event["cat"], event["name"], op["name"] if op else None, launch["name"])] += 1
        if event["cat"] == "kernel":
            kernels.append(event)
        late += event["ts"] >= launch["ts"]  # a GPU activity starts after its launch: one clock
    return work, kernels, late

ours, kernels, after_launch = measured_gpu_work(trace)
theirs, kineto_kernels, _ = measured_gpu_work(kineto)
all_kernels = sum(1 for e in trace["traceEvents"] if e.get("cat") == "kernel")
linked = sum(count for (_, _, op, _), count in ours.items() if op is not None)
arrows = [e for e in trace["traceEvents"] if e.get("cat") == "ac2g"]
same = sum((ours & theirs).values())
print(f"{sys.argv[1]}: {all_kernels} kernels, {len(kernels)} of them launched in the measured steps "
      f"(torch.profiler: {len(kineto_kernels)}); {sum(ours.values())} GPU activities there, {linked} linked to an op, "
      f"{same} of torch.profiler's {sum(theirs.values())} with the same name, op and launching call; "
      f"{len({e['id'] for e in arrows if e['ph'] == 's'} & {e['id'] for e in arrows if e['ph'] == 'f'})} ac2g arrows")
if not kernels:
    sys.exit("no kernels")
print(f"clock: {after_launch} of {sum(ours.values())} GPU activities start after their launching call starts")
if after_launch < 0.98 * sum(ours.values()):
    sys.exit("GPU activities start before their launches: the GPU and CPU clocks disagree")
if same < 0.98 * sum(theirs.values()) or sum(ours.values()) > 1.02 * sum(theirs.values()):
    for key in list(((ours - theirs) + (theirs - ours)).keys())[:10]:
        print(f"  tprof {ours[key]}, torch.profiler {theirs[key]}: {key}")
    sys.exit("the GPU activities differ from torch.profiler's by more than 2%")
def measured_ops(trace):
    events = trace["traceEvents"]
    measured = next(e for e in events if e.get("cat") == "user_annotation" and e["name"] == "measured_steps")
    return collections.Counter(e["name"] for e in events if e.get("cat") == "cpu_op"
                               and measured["ts"] <= e["ts"] <= measured["ts"] + measured["dur"])
ours, theirs = measured_ops(trace), measured_ops(kineto)
print(f"cpu_op: {sum((ours & theirs).values())} of torch.profiler's {sum(theirs.values())} in the measured steps "
      f"by name (tprof: {sum(ours.values())})")
if sum((ours & theirs).values()) < 0.98 * sum(theirs.values()):
    sys.exit("the ops differ from torch.profiler's by more than 2%")
theirs = kineto.get("deviceProperties", [])
ours = trace.get("deviceProperties", [])
print(f"deviceProperties: tprof {ours}, Kineto {theirs}")
if not ours or any(ours[0].get(key) != value for key, value in theirs[0].items() if key in ours[0]):
    sys.exit("deviceProperties differ from Kineto's")
OCCUPANCY = ("blocks per SM", "warps per SM", "est. achieved occupancy %")
def shape(kernel):
    return kernel["name"], tuple(kernel["args"]["grid"]), tuple(kernel["args"]["block"])
expected = {shape(k): [k["args"].get(key) for key in OCCUPANCY] for k in kineto_kernels}
compared = [k for k in kernels if shape(k) in expected]
agree = [k for k in compared if all(abs(float(k["args"].get(key, -1)) - float(want)) <= 1e-4 * max(1.0, abs(float(want)))
                                    for key, want in zip(OCCUPANCY, expected[shape(k)]) if want is not None)]
print(f"occupancy: {len(agree)} of {len(compared)} kernels with a Kineto twin agree")
if not compared or len(agree) < 0.98 * len(compared):
    sys.exit("kernel occupancy differs from Kineto's")
PY
}

failures=()
# Waits up to 60 s for a line matching $2 in file $1.
await_line() { for _ in $(seq 600); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# Each path is checked even when the one before failed, so that one run on a lent GPU reports both.
echo "== tprof record, $steps steps"
rm -f "$out/start"
timeout 180 "$build/tprof" record -o "$out/record.pt.trace.json" --no-et -- "$python" "$workload" --steps "$steps" \
  --start-file "$out/start" > "$out/record_target.log" 2> "$out/record.log" &
record_pid=$!
await_line "$out/record.log" "attached to" || echo "gpu_check: no 'attached' line from tprof record in 60 s"
touch "$out/start"
wait "$record_pid"; rc=$?
if [ "$rc" -eq 0 ]; then
  check_trace "$out/record.pt.trace.json" || failures+=("tprof record's trace")
else
  cat "$out/record.log"; failures+=("tprof record exited with $rc")
fi

echo "== started with the injection variable, then tprof attach"
rm -f "$out/start"
eval "$("$build/tprof" env)"
timeout 180 "$python" "$workload" --steps "$steps" --start-file "$out/start" > "$out/attach_target.log" 2>&1 &
workload_job=$!
unset CUDA_INJECTION64_PATH
await_line "$out/attach_target.log" READY || echo "gpu_check: the workload said no READY in 60 s"
target=$(awk '/^READY/ {print $2; exit}' "$out/attach_target.log")  # python's pid, not timeout's
timeout 180 "$build/tprof" attach "$target" -o "$out/attach.pt.trace.json" --no-et 2> "$out/attach.log" &
tprof_pid=$!
await_line "$out/attach.log" "attached to" || echo "gpu_check: no 'attached' line from tprof attach in 60 s"
sleep 0.5  # the library wakes within 200 ms of the attach
touch "$out/start"
wait "$workload_job" || { cat "$out/attach_target.log"; failures+=("the attached workload failed"); }
wait "$tprof_pid"; rc=$?
if [ "$rc" -eq 0 ]; then
  check_trace "$out/attach.pt.trace.json" || failures+=("tprof attach's trace")
else
  cat "$out/attach.log"; failures+=("tprof attach exited with $rc")
fi
[ ${#failures[@]} -eq 0 ] || fail "$(IFS=';'; echo "${failures[*]}") (files in $out)"
echo "gpu_check: PASSED (files in $out)"
