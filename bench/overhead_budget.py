#!/usr/bin/env python3
"""--max-overhead P against the target's real slowdown (issue 24), measured in one run.

For each loop of bench/budget_target.py (small: ~170 tiny ops a step; compute: a conv net,
milliseconds an op) and each budget P, a fresh target runs detached for --detached seconds,
with `tprof attach --max-overhead P% -d --seconds` for --seconds, then detached again. It reports:
  slowdown   - the steps' rate detached (mean of before and after) over their rate attached, less 1,
               +- twice its standard error: from the spread of the rate over 5 s chunks of each
               stretch (on the test VM the rate of a loop left alone moves ~8% from one 10 s to the
               next, so a 60 s run cannot resolve a point of slowdown)
  estimate   - tprof's own estimate (tprof_summary.op_windows.estimated_slowdown): where the target
               steps, the windows' cost is the larger of the trap estimate and its CPU per step
               inside them against outside them
  traps      - what the trap estimate alone would have said (op_windows.step_cost's estimated_*)
  exact      - ProfilerSteps written (whole steps a window saw), windows, and the longest stretch
               of the attached time without one
  recall     - per exact step, the share of the ranges torch's own profiler (legacy) records in
               one step of the same loop that the step holds, name by name; the least over steps

A budget of 0 is the control: the same stretches with nothing attached, whose "slowdown" is
the noise of this measurement on the machine.

Usage (root): /usr/bin/python3 bench/overhead_budget.py [--seconds 60] [--detached 20]
              [--loops small,compute] [--budgets 0,1,5,20] [--markdown FILE]
"""
import argparse
import bisect
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPROF = os.path.join(REPO, "build", "tprof")
TARGET = os.path.join(REPO, "bench", "budget_target.py")


class Target:
    """A budget_target.py process and the (monotonic s, steps) lines it prints."""

    def __init__(self, loop):
        self.process = subprocess.Popen(["/usr/bin/python3", TARGET, loop], stdout=subprocess.PIPE, text=True)
        self.reference = None
        for line in self.process.stdout:
            word, _, rest = line.partition(" ")
            if word == "REFERENCE":
                self.reference = collections.Counter(json.loads(rest))
            elif word == "READY":
                self.pid = int(rest)
                break
        else:
            raise SystemExit(f"target did not start: exit {self.process.wait()}")
        self.samples = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            at, steps = line.split()
            self.samples.append((float(at), int(steps)))

    def rate(self, start, end):
        """Steps per second between the samples nearest inside [start, end]."""
        times = [at for at, _ in self.samples]
        first, last = bisect.bisect_left(times, start), bisect.bisect_right(times, end) - 1
        if last <= first:
            raise SystemExit(f"no samples in [{start}, {end}]")
        (t0, s0), (t1, s1) = self.samples[first], self.samples[last]
        return (s1 - s0) / (t1 - t0)

    def chunk_rates(self, start, end, chunk=5.0):
        """The rate over each whole `chunk` seconds of [start, end]."""
        count = int((end - start) // chunk)
        return [self.rate(start + i * chunk, start + (i + 1) * chunk) for i in range(count)]

    def stop(self):
        self.process.kill()
        self.process.wait()


def exact_steps(trace):
    """The ProfilerSteps of a trace, each with the names of the ranges inside it, and its start (s)."""
    events = [event for event in trace["traceEvents"] if event.get("ph") == "X"]
    steps = [event for event in events if event["name"].startswith("ProfilerStep#")]
    ranges = sorted((event for event in events if event.get("cat") in ("cpu_op", "user_annotation")
                     and not event["name"].startswith(("ProfilerStep#", "Partial step"))), key=lambda e: e["ts"])
    starts = [event["ts"] for event in ranges]
    found = []
    for step in steps:
        end = step["ts"] + step["dur"]
        inside = ranges[bisect.bisect_left(starts, step["ts"]):bisect.bisect_right(starts, end)]
        found.append((step["ts"] / 1e6, collections.Counter(e["name"] for e in inside if e["ts"] + e["dur"] <= end)))
    return found


def slowdown_error(detached, attached, ratio):
    """Twice the standard error of detached/attached - 1, from the chunks' rates of each side."""
    if len(detached) < 2 or len(attached) < 2:
        return None
    relative = [statistics.stdev(side) / statistics.mean(side) / len(side) ** 0.5 for side in (detached, attached)]
    return 2 * ratio * (relative[0] ** 2 + relative[1] ** 2) ** 0.5


def traps_alone(summary):
    """The slowdown the trap estimate alone gives, where the windows' cost was measured by steps."""
    cost = summary.get("op_windows", {}).get("step_cost")
    cpu = summary.get("probe_cost", {}).get("target_cpu_ns", 0)
    if not cost or not cpu:
        return None
    estimate = cost["estimated_inside_ns"] + cost["estimated_rest_ns"]
    return estimate / (cpu - estimate)


def recall(step, reference):
    return sum(min(count, step[name]) for name, count in reference.items()) / sum(reference.values())


def measure(loop, budget, seconds, detached, directory):
    target = Target(loop)
    try:
        time.sleep(3)
        before = time.monotonic()
        time.sleep(detached)
        trace_path = os.path.join(directory, f"{loop}-{budget}.pt.trace.json")
        attach_start = time.monotonic()
        if budget == 0:  # the control: nothing attached, so what it measures is the method's noise
            time.sleep(seconds)
            trace_path = None
        else:
            result = subprocess.run([TPROF, "attach", str(target.pid), f"--max-overhead={budget}%", "-d",
                                     str(seconds), "-o", trace_path, "--no-et", "--force", "-q"],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                raise SystemExit(f"tprof failed: {result.stderr.strip()}")
        attach_end = time.monotonic()
        time.sleep(detached)
        after = time.monotonic()
        # Attached: from when the probes are surely in (planning takes up to a second) to the stop.
        attached_rate = target.rate(attach_start + 2, attach_end - 0.5)
        detached_rate = (target.rate(before, attach_start) + target.rate(attach_end + 0.5, after)) / 2
        error = slowdown_error(target.chunk_rates(before, attach_start) + target.chunk_rates(attach_end + 0.5, after),
                               target.chunk_rates(attach_start + 2, attach_end - 0.5), detached_rate / attached_rate)
    finally:
        target.stop()
    trace = {"traceEvents": [], "tprof_summary": {}}
    if trace_path:
        with open(trace_path) as file:
            trace = json.load(file)
    windows = trace["tprof_summary"].get("op_windows", {})
    steps = exact_steps(trace)
    starts = [start for start, _ in steps]
    window_start = trace["traceEvents"][0]["ts"] / 1e6 if trace["traceEvents"] else 0
    edges = [window_start + 2] + starts + [window_start + seconds]
    longest_gap = max(b - a for a, b in zip(edges, edges[1:])) if len(edges) > 1 else seconds
    return {
        "loop": loop, "budget": budget,
        "slowdown": detached_rate / attached_rate - 1,
        "error": error,
        "estimate": windows.get("estimated_slowdown"),
        "traps_alone": traps_alone(trace["tprof_summary"]),
        "windows": windows.get("windows", 0), "exact_steps": len(steps),
        "steps_seen": windows.get("steps_seen", 0), "longest_gap_s": longest_gap,
        "least_recall": min((recall(counts, target.reference) for _, counts in steps), default=None),
        "detached_steps_per_s": detached_rate,
    }


def print_table(lines, markdown_path):
    """Prints a markdown table's lines, and writes them to `markdown_path` if one is given."""
    print("\n".join(lines))
    if markdown_path:
        with open(markdown_path, "w") as file:
            file.write("\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--detached", type=float, default=20)
    parser.add_argument("--loops", default="small,compute")
    parser.add_argument("--budgets", default="0,1,5,20")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: tprof attaches uprobes")
    rows = []
    with tempfile.TemporaryDirectory() as directory:
        for loop in args.loops.split(","):
            for budget in args.budgets.split(","):
                row = measure(loop, float(budget), args.seconds, args.detached, directory)
                print(json.dumps(row), flush=True)
                rows.append(row)
    lines = ["| loop | --max-overhead | measured slowdown (+- 2 SE) | tprof's estimate | traps alone | windows "
             "| exact steps (of seen) | longest stretch without one | least recall vs torch.profiler |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    percent = lambda value: f"{100 * value:.1f}%" if value is not None else "none"  # noqa: E731
    for row in rows:
        least = f"{row['least_recall']:.3f}" if row["least_recall"] is not None else "no step"
        budget = f"{row['budget']:g}%" if row["budget"] else "not attached"
        error = f" +- {100 * row['error']:.1f}" if row["error"] is not None else ""
        lines.append(f"| {row['loop']} | {budget} | {100 * row['slowdown']:.1f}%{error} | {percent(row['estimate'])} "
                     f"| {percent(row['traps_alone'])} | {row['windows']} | {row['exact_steps']} ({row['steps_seen']}) "
                     f"| {row['longest_gap_s']:.1f} s | {least} |")
    print_table(lines, args.markdown)


if __name__ == "__main__":
    main()
