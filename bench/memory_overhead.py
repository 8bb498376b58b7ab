#!/usr/bin/env python3
"""What --memory costs the training loop, as ratios measured in one run (docs/BENCHMARKS.md).

On the e2e training loop (torch 1.13, /usr/bin/python3), rounds interleaved so that drift hits
every mode alike, the mean step time of:
  none      - no probes
  floor     - empty BPF programs on tprof's op sites (build/tprof-floor-probe PID)
  floormem  - the same plus empty programs on --memory's sites (tprof-floor-probe PID --memory)
  tprof     - tprof attach (ops, shapes, Python stacks)
  tprofmem  - tprof attach --memory
  torch     - torch's legacy profiler in-process, names only
  torchmem  - the same with profile_memory=True
and reports (tprofmem - none) / (floormem - none), the memory probes' own share
(tprofmem - tprof) / (floormem - floor), and their cost per allocation or free recorded.

Usage (root): /usr/bin/python3 bench/memory_overhead.py [--rounds R] [--steps N] [--markdown FILE]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import FLOOR, REPO, TPROF, Attached, StepTimer  # noqa: E402


def memory_events_per_step(trace_path, steps):
    with open(trace_path) as trace:
        events = json.load(trace)["traceEvents"]
    return sum(1 for event in events if event.get("name") == "[memory]") / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--markdown", help="also write the report to this file")
    args = parser.parse_args()
    for binary in (TPROF, FLOOR):
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"{binary} missing: run scripts/build.sh")
    timer = StepTimer(["/usr/bin/python3", os.path.join(REPO, "bench", "step_timer.py")])
    modes = ("none", "floor", "floormem", "tprof", "tprofmem", "torch", "torchmem")
    samples = {mode: [] for mode in modes}
    events_per_step = []
    try:
        for round_index in range(args.rounds):
            samples["none"].append(timer.measure("run", args.steps))
            for mode, extra in (("floor", []), ("floormem", ["--memory"])):
                floor = Attached([FLOOR, str(timer.pid)] + extra)
                samples[mode].append(timer.measure("run", args.steps))
                floor.close()
            for mode, extra in (("tprof", []), ("tprofmem", ["--memory"])):
                with tempfile.TemporaryDirectory() as scratch:
                    trace = os.path.join(scratch, "bench.pt.trace.json")
                    tprof = Attached([TPROF, "attach", str(timer.pid), "--no-et", "--output", trace] + extra)
                    samples[mode].append(timer.measure("run", args.steps))
                    tprof.close()
                    if mode == "tprofmem":
                        events_per_step.append(memory_events_per_step(trace, args.steps))
            samples["torch"].append(timer.measure("torch", args.steps))
            samples["torchmem"].append(timer.measure("torchmem", args.steps))
            print(f"round {round_index + 1}/{args.rounds}: " +
                  ", ".join(f"{mode} {values[-1]:.1f} us" for mode, values in samples.items()), file=sys.stderr)
    finally:
        timer.close()

    median = {mode: statistics.median(values) for mode, values in samples.items()}
    none = median["none"]
    events = statistics.median(events_per_step)
    memory_cost = median["tprofmem"] - median["tprof"]
    memory_floor = median["floormem"] - median["floor"]
    lines = [
        f"Workload: tests/workloads/train_loop.py model, {args.steps} steps per sample, median of {args.rounds} "
        f"interleaved rounds, torch 1.13.1 on /usr/bin/python3; {events:.0f} [memory] events a step "
        "(allocations and frees) recorded by --memory.",
        "",
        "| mode | step time (us) | over none (us/step) |",
        "|---|---:|---:|",
    ]
    for mode, label in (("none", "no probes"), ("floor", "empty BPF programs on the op sites (floor)"),
                        ("floormem", "the same plus --memory's sites (memory floor)"),
                        ("tprof", "tprof attach"), ("tprofmem", "tprof attach --memory"),
                        ("torch", "torch profiler (legacy, names only)"),
                        ("torchmem", "torch profiler (legacy, profile_memory=True)")):
        lines.append(f"| {label} | {median[mode]:.1f} | {median[mode] - none:.1f} |")
    lines += [
        "",
        f"- tprof --memory against its floor: (tprofmem - none) / (floormem - none) = "
        f"**{(median['tprofmem'] - none) / (median['floormem'] - none):.2f}**",
        f"- the memory probes alone: (tprofmem - tprof) / (floormem - floor) = "
        f"**{memory_cost / memory_floor:.2f}**, i.e. **{memory_cost / events:.2f} us** per event recorded "
        f"against the floor's **{memory_floor / events:.2f} us**",
        f"- --memory's share of the step: (tprofmem - tprof) / tprofmem = "
        f"**{100 * memory_cost / median['tprofmem']:.1f}%**",
        f"- torch's profile_memory over its names-only profiler: (torchmem - torch) = "
        f"**{median['torchmem'] - median['torch']:.1f} us** a step",
    ]
    report = "\n".join(lines)
    print(report)
    if args.markdown:
        with open(args.markdown, "w") as out:
            out.write(report + "\n")


if __name__ == "__main__":
    main()
