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
and reports (tprofmem - none) / (floormem - none) and --memory's share of the step. The memory
probes' own cost is a small difference of two large step times there; it is measured again on
a loop of 100 allocations and frees a step (step_timer.py --allocations), where it stands out:
(tprofmem - tprof) / (floormem - floor), and its cost per event recorded.

Usage (root): /usr/bin/python3 bench/memory_overhead.py [--rounds R] [--steps N] [--markdown FILE]
"""
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead import FLOOR, REPO, TPROF, Attached, StepTimer, bench_arguments, print_report  # noqa: E402


def memory_events_per_step(trace_path, steps):
    with open(trace_path) as trace:
        events = json.load(trace)["traceEvents"]
    return sum(1 for event in events if event.get("name") == "[memory]") / steps


def measure(rounds, steps, allocations):
    """Median step time (us) of every mode, and the [memory] events a step --memory recorded."""
    command = ["/usr/bin/python3", os.path.join(REPO, "bench", "step_timer.py")]
    timer = StepTimer(command + (["--allocations"] if allocations else []))
    modes = ("none", "floor", "floormem", "tprof", "tprofmem", "torch", "torchmem")
    samples = {mode: [] for mode in modes}
    events_per_step = []
    try:
        for round_index in range(rounds):
            samples["none"].append(timer.measure("run", steps))
            for mode, extra in (("floor", []), ("floormem", ["--memory"])):
                floor = Attached([FLOOR, str(timer.pid)] + extra)
                samples[mode].append(timer.measure("run", steps))
                floor.close()
            for mode, extra in (("tprof", []), ("tprofmem", ["--memory"])):
                with tempfile.TemporaryDirectory() as scratch:
                    trace = os.path.join(scratch, "bench.pt.trace.json")
                    tprof = Attached([TPROF, "attach", str(timer.pid), "--no-et", "--output", trace] + extra)
                    samples[mode].append(timer.measure("run", steps))
                    tprof.close()
                    if mode == "tprofmem":
                        events_per_step.append(memory_events_per_step(trace, steps))
            samples["torch"].append(timer.measure("torch", steps))
            samples["torchmem"].append(timer.measure("torchmem", steps))
            print(f"{'allocations' if allocations else 'training'} round {round_index + 1}/{rounds}: " +
                  ", ".join(f"{mode} {values[-1]:.1f} us" for mode, values in samples.items()), file=sys.stderr)
    finally:
        timer.close()
    return {mode: statistics.median(values) for mode, values in samples.items()}, statistics.median(events_per_step)


LABELS = (("none", "no probes"), ("floor", "empty BPF programs on the op sites (floor)"),
          ("floormem", "the same plus --memory's sites (memory floor)"),
          ("tprof", "tprof attach"), ("tprofmem", "tprof attach --memory"),
          ("torch", "torch profiler (legacy, names only)"),
          ("torchmem", "torch profiler (legacy, profile_memory=True)"))


def table(median):
    none = median["none"]
    lines = ["| mode | step time (us) | over none (us/step) |", "|---|---:|---:|"]
    for mode, label in LABELS:
        lines.append(f"| {label} | {median[mode]:.1f} | {median[mode] - none:.1f} |")
    return lines


def main():
    args = bench_arguments(__doc__)
    training, training_events = measure(args.rounds, args.steps, allocations=False)
    loop, loop_events = measure(args.rounds, args.steps, allocations=True)
    none = training["none"]
    loop_cost = loop["tprofmem"] - loop["tprof"]
    loop_floor = loop["floormem"] - loop["floor"]
    lines = [f"Training loop (tests/workloads/train_loop.py model), {args.steps} steps per sample, median of "
             f"{args.rounds} interleaved rounds, torch 1.13.1 on /usr/bin/python3; {training_events:.0f} [memory] "
             "events a step recorded by --memory.", ""]
    lines += table(training)
    lines += [
        "",
        f"- tprof --memory against its floor: (tprofmem - none) / (floormem - none) = "
        f"**{(training['tprofmem'] - none) / (training['floormem'] - none):.2f}** (tprof without --memory: "
        f"**{(training['tprof'] - none) / (training['floor'] - none):.2f}**)",
        f"- --memory's share of the step: (tprofmem - tprof) / tprofmem = "
        f"**{100 * (training['tprofmem'] - training['tprof']) / training['tprofmem']:.1f}%**",
        f"- torch's profile_memory over its names-only profiler: torchmem - torch = "
        f"**{training['torchmem'] - training['torch']:.1f} us** a step",
        "",
        f"Allocation loop (step_timer.py --allocations: 100 torch.empty(256) and frees a step), same rounds; "
        f"{loop_events:.0f} [memory] events a step.",
        "",
    ]
    lines += table(loop)
    lines += [
        "",
        f"- the memory probes alone: (tprofmem - tprof) / (floormem - floor) = **{loop_cost / loop_floor:.2f}**, "
        f"i.e. **{loop_cost / loop_events:.2f} us** per event recorded against the floor's "
        f"**{loop_floor / loop_events:.2f} us**",
    ]
    print_report(lines, args.markdown)


if __name__ == "__main__":
    main()
