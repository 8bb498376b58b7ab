#!/usr/bin/env python3
"""What tprof costs a torch.compile'd program per call of a compiled function, measured in one
run (docs/BENCHMARKS.md).

On torch 2.6 (the trixie root) and torch 2.14 (the sid root; scripts/make-torch-root.sh builds
both), a step of step_timer.py --compiled is one call of tests/workloads/compiled_function.py's
function (backend "eager", one graph break): two compiled regions and four ATen ops, plus on
torch 2.6 two cache lookups. Rounds interleaved so that drift hits every mode alike, the mean
call time of:
  none  - no probes
  ops   - tprof attach --no-python --no-shapes (ops and dynamo's ranges)
  tprof - tprof attach (with shapes and Python stacks)
and, from the ops-only trace, the ranges tprof recorded per call, so that (ops - none) per range
is what each probed op or region costs there.

With --aot-eager, the same function compiled by backend "aot_eager": its graphs call their
ops as torch.ops.aten.<op>.<overload>, which tprof probes where they pass libtorch_python's
boxed dispatch (counted as "ops" below).

With --inductor, the function is tests/workloads/inductor_function.py's, compiled by inductor
in the roots with its C++ toolchain (scripts/make-inductor-root.sh): a call is two compiled
regions, three fused C++ kernels (which tprof probes as it finds them) and an ATen mm. More
modes isolate what a kernel call costs:
  nokernels   - ops, with --skip-ops '^cpp_fused_': every probe but the kernels'
  noops       - ops, with --ops '^$': no op or kernel probed, dynamo's ranges still
  kernelsonly - ops, with --ops '^cpp_fused_': the kernels and dynamo's ranges
  floorkernel - empty BPF programs on the kernels' sites alone (tprof-floor-probe --inductor-kernels)
Per kernel call: tprof among all its probes, (ops - nokernels) / kernels; tprof alone,
(kernelsonly - noops) / kernels; the floor, the traps alone, (floorkernel - none) / kernels.

Usage (root): /usr/bin/python3 bench/compile_overhead.py [--inductor | --aot-eager] [--rounds R] [--steps N] [--markdown FILE]
"""
import collections
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import FLOOR, REPO, TPROF, Attached, StepTimer, bench_arguments, print_report  # noqa: E402

COPIED = ("bench/step_timer.py", "tests/workloads/train_loop.py", "tests/workloads/compiled_function.py",
          "tests/workloads/inductor_function.py")
KINDS = ("ops", "regions", "lookups", "kernels")
STEP_OPTIONS = {"eager": ["--compiled"], "aot_eager": ["--compiled", "--aot-eager"], "inductor": ["--inductor"]}
OPS_ONLY = ["--no-python", "--no-shapes"]


def ranges_per_call(trace_path, calls):
    """Per call: the ATen ops, compiled regions, cache lookups and inductor kernels the trace holds."""
    with open(trace_path) as trace:
        events = json.load(trace)["traceEvents"]
    counts = collections.Counter()
    for event in events:
        name = event.get("name", "")
        if event.get("cat") != "cpu_op":
            continue
        kind = "regions" if name.startswith("Torch-Compiled Region") else \
            "lookups" if name == "TorchDynamo Cache Lookup" else \
            "kernels" if name.startswith("cpp_fused_") else "ops"
        counts[kind] += 1
    return {kind: counts[kind] / calls for kind in KINDS}


def measure(root, rounds, steps, backend):
    """Median µs per call of each mode in `root`, and the ranges per call."""
    with tempfile.TemporaryDirectory(dir=os.path.join(root, "tmp")) as scratch:
        for relative in COPIED:
            os.makedirs(os.path.join(scratch, os.path.dirname(relative)), exist_ok=True)
            shutil.copy(os.path.join(REPO, relative), os.path.join(scratch, relative))
        inside = "/tmp/" + os.path.basename(scratch)
        timer = StepTimer(["chroot", root, "env", f"TORCHINDUCTOR_CACHE_DIR={inside}/inductor-cache", "python3",
                           inside + "/bench/step_timer.py"] + STEP_OPTIONS[backend])
        traced = [("ops", OPS_ONLY), ("tprof", [])]
        if backend == "inductor":
            traced += [("nokernels", OPS_ONLY + ["--skip-ops", "^cpp_fused_"]), ("noops", OPS_ONLY + ["--ops", "^$"]),
                       ("kernelsonly", OPS_ONLY + ["--ops", "^cpp_fused_"])]
        samples = {mode: [] for mode in ["none"] + [mode for mode, _ in traced] +
                   (["floorkernel"] if backend == "inductor" else [])}
        per_call = None
        try:
            for round_index in range(rounds):
                samples["none"].append(timer.measure("run", steps))
                for mode, extra in traced:
                    trace = os.path.join(scratch, f"{mode}{round_index}.pt.trace.json")
                    tprof = Attached([TPROF, "attach", str(timer.pid), "--output", trace, "--no-et"] + extra)
                    samples[mode].append(timer.measure("run", steps))
                    tprof.close()
                    if mode == "ops" and per_call is None:
                        per_call = ranges_per_call(trace, steps)
                if "floorkernel" in samples:
                    floor = Attached([FLOOR, str(timer.pid), "--inductor-kernels"])
                    samples["floorkernel"].append(timer.measure("run", steps))
                    floor.close()
        finally:
            timer.close()
    return {mode: statistics.median(values) for mode, values in samples.items()}, per_call


def main():
    backend = "eager"
    for option, chosen in (("--inductor", "inductor"), ("--aot-eager", "aot_eager")):
        if option in sys.argv[1:]:
            sys.argv.remove(option)
            backend = chosen
    args = bench_arguments(__doc__)
    maker = "make-inductor-root.sh" if backend == "inductor" else "make-torch-root.sh"
    lines = [f"torch.compile (backend {backend}) overhead ({args.rounds} rounds of {args.steps} calls, medians):"]
    for suite, torch_name in (("trixie", "torch 2.6"), ("sid", "torch 2.14")):
        root = subprocess.run(["bash", os.path.join(REPO, "scripts", maker), suite], capture_output=True, text=True)
        if root.returncode != 0:
            lines.append(f"- {torch_name}: NOT MEASURED (scripts/{maker} {suite} failed)")
            continue
        medians, per_call = measure(root.stdout.strip(), args.rounds, args.steps, backend)
        ranges = sum(per_call.values())
        added = medians["ops"] - medians["none"]
        lines.append(f"- {torch_name} ({suite} chroot): a call takes {medians['none']:.1f} us untraced, "
                     f"{medians['ops']:.1f} us with ops and regions ({medians['ops'] / medians['none']:.2f}x), "
                     f"{medians['tprof']:.1f} us with shapes and Python stacks ({medians['tprof'] / medians['none']:.2f}x); "
                     f"per call tprof recorded {per_call['ops']:.1f} ops, {per_call['regions']:.1f} compiled regions, "
                     f"{per_call['lookups']:.1f} cache lookups and {per_call['kernels']:.1f} inductor kernels: "
                     f"{added / ranges:.1f} us per recorded range")
        if backend == "inductor" and per_call["kernels"]:
            kernels = per_call["kernels"]
            among_all = (medians["ops"] - medians["nokernels"]) / kernels
            alone = (medians["kernelsonly"] - medians["noops"]) / kernels
            floor = (medians["floorkernel"] - medians["none"]) / kernels
            lines.append(f"  - per kernel call: {medians['nokernels']:.1f} us a call with every probe but the kernels', "
                         f"{medians['noops']:.1f} us with no op or kernel probed, {medians['kernelsonly']:.1f} us with "
                         f"the kernels alone, {medians['floorkernel']:.1f} us with empty programs on the kernels' "
                         f"sites alone: tprof {among_all:.1f} us among all its probes, {alone:.1f} us alone; "
                         f"floor {floor:.1f} us" + (f" (alone: {alone / floor:.2f}x the floor)" if floor > 0 else ""))
    print_report(lines, args.markdown)


if __name__ == "__main__":
    main()
