#!/usr/bin/env python3
"""tprof's overhead, as ratios measured in one run (see docs/BENCHMARKS.md).

On the e2e training loop (torch 1.13, /usr/bin/python3), with rounds interleaved so that
drift hits every mode alike, it measures the mean step time:
  none   - no probes
  floor  - empty BPF programs on the same op sites, same uprobe_multi mode (build/tprof-floor-probe)
  ops    - tprof attach --no-python --no-shapes (op tracing only)
  shapes - tprof attach --no-python (ops with their inputs and outputs: record_shapes)
  tprof  - tprof attach (ops with shapes, plus the Python stack walked at every op and the 1 kHz sampler)
  noviews - tprof attach --no-view-ops (the same, without probes on view and metadata ops)
  torch  - torch.autograd.profiler.profile(use_kineto=False) in-process, names only
  torchfull - the same with record_shapes=True and with_stack=True
and reports (ops - none) / (floor - none), the cost of shape capture and of stack capture over
op tracing, the per-op costs, and tprof's attach time on torch 1.13 and on torch 2.6 (the trixie root from
scripts/make-torch-root.sh trixie), where it also measures none / floor / ops only.

Usage (root): /usr/bin/python3 bench/overhead.py [--rounds R] [--steps N] [--markdown FILE]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TPROF = os.path.join(REPO, "build", "tprof")
FLOOR = os.path.join(REPO, "build", "tprof-floor-probe")
ATTACH_MS = re.compile(r"in ([0-9.]+) ms")


class StepTimer:
    def __init__(self, command):
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        # torch 2.6 in a bare chroot prints its own complaints (no boot id) first.
        for line in self.process.stdout:
            ready = line.split()
            if ready and ready[0] == "READY":
                self.pid = int(ready[1])
                return
        raise SystemExit(f"step timer did not start: exit {self.process.wait()}")

    def measure(self, command, steps):
        self.process.stdin.write(f"{command} {steps}\n")
        self.process.stdin.flush()
        reply = self.process.stdout.readline().split()
        if not reply or reply[0] != "STEP_US":
            raise SystemExit(f"step timer failed: {reply}")
        return float(reply[1])

    def close(self):
        try:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        self.process.wait(timeout=30)


class Attached:
    """A probe process (tprof or the floor) attached to `pid` until closed."""

    def __init__(self, command):
        self.process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        self.attach_ms = None
        said = []
        for line in self.process.stderr:
            said.append(line)
            if "attached" in line:
                self.attach_ms = float(ATTACH_MS.search(line).group(1))
                self.sites = int(re.search(r"(\d+) op sites", line).group(1))
                break
        if self.attach_ms is None:
            raise SystemExit(f"{command[0]} did not attach: exit {self.process.wait()}: {''.join(said).strip()}")

    def close(self):
        self.process.send_signal(signal.SIGINT)
        rest = self.process.stderr.read()
        if self.process.wait(timeout=120) != 0:
            raise SystemExit(f"probe process failed:\n{rest}")
        return rest


def ops_per_step(trace_path, steps):
    with open(trace_path) as trace:
        events = json.load(trace)["traceEvents"]
    return sum(1 for event in events if event.get("cat") == "cpu_op") / steps


def estimated_share(trace_path):
    """tprof's own estimate of the share of the target's CPU its probes took (tprof_summary.probe_cost)."""
    with open(trace_path) as trace:
        cost = json.load(trace)["tprof_summary"]["probe_cost"]
    return cost["estimate_ns"] / cost["target_cpu_ns"] if cost["target_cpu_ns"] else None


def trap_calibration_us(trace_path):
    """What tprof measured a range's traps to cost (a `push` entry and a `ret`), in us: its
    tprof_summary.probe_cost, to set beside the floor of the same run."""
    with open(trace_path) as trace:
        traps = json.load(trace)["tprof_summary"]["probe_cost"]["trap_ns"]
    return (traps["emulated_entry"] + traps["return"]) / 1e3


def attach_time_ms(python_command, library_hint):
    """On a process that imported torch and idles: the time tprof reports for creating the
    probe links, and the wall time from starting tprof to its 'attached' line (reading the
    library's symbols and schemas, loading BPF, attaching)."""
    target = subprocess.Popen(python_command + ["-c", "import torch, sys; print('READY', flush=True); sys.stdin.read()"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        # torch 2.6 in a bare chroot prints its own complaints (no /proc/cpuinfo) first.
        if not any(line.strip() == "READY" for line in target.stdout):
            raise SystemExit(f"{library_hint}: target did not start")
        with tempfile.TemporaryDirectory() as scratch:
            started = time.monotonic()
            tprof = Attached([TPROF, "attach", str(target.pid), "--output", os.path.join(scratch, "t.json")])
            to_attached_ms = (time.monotonic() - started) * 1e3
            tprof.close()
        return tprof.attach_ms, to_attached_ms, tprof.sites
    finally:
        target.stdin.close()
        target.wait(timeout=30)


def floor_on_torch26(root, rounds, steps):
    """Median step times (none, floor, ops only) on torch 2.6 in the trixie root, whose functions
    all begin with endbr64 (a CET build): the case where the probe placement matters most."""
    with tempfile.TemporaryDirectory(dir=os.path.join(root, "tmp")) as scratch:
        for relative in ("bench/step_timer.py", "tests/workloads/train_loop.py"):
            os.makedirs(os.path.join(scratch, os.path.dirname(relative)), exist_ok=True)
            shutil.copy(os.path.join(REPO, relative), os.path.join(scratch, relative))
        inside = "/tmp/" + os.path.basename(scratch)
        timer = StepTimer(["chroot", root, "python3", inside + "/bench/step_timer.py"])
        samples = {mode: [] for mode in ("none", "floor", "ops")}
        try:
            for round_index in range(rounds):
                samples["none"].append(timer.measure("run", steps))
                floor = Attached([FLOOR, str(timer.pid)])
                samples["floor"].append(timer.measure("run", steps))
                floor.close()
                # A file of its own each round: tprof refuses to replace one without --force.
                tprof = Attached([TPROF, "attach", str(timer.pid), "--output", os.path.join(scratch, f"t{round_index}.json"),
                                  "--no-python", "--no-shapes", "--no-et"])
                samples["ops"].append(timer.measure("run", steps))
                tprof.close()
        finally:
            timer.close()
    return {mode: statistics.median(values) for mode, values in samples.items()}


def print_report(lines, markdown_path):
    """Prints the report's lines and, with --markdown, writes them to that file too."""
    report = "\n".join(lines)
    print(report)
    if markdown_path:
        with open(markdown_path, "w") as out:
            out.write(report + "\n")


def bench_arguments(description):
    """The options the overhead benches share (--rounds, --steps, --markdown), parsed, once tprof
    and the floor probe are known to be built."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--markdown", help="also write the report to this file")
    args = parser.parse_args()
    for binary in (TPROF, FLOOR):
        if not os.access(binary, os.X_OK):
            raise SystemExit(f"{binary} missing: run scripts/build.sh")
    return args


def main():
    args = bench_arguments(__doc__)

    timer = StepTimer(["/usr/bin/python3", os.path.join(REPO, "bench", "step_timer.py")])
    samples = {mode: [] for mode in ("none", "floor", "ops", "shapes", "tprof", "noviews", "torch", "torchfull")}
    per_step_ops = None
    per_step_ops_without_views = None
    calibrations = []
    estimates = []
    try:
        for round_index in range(args.rounds):
            samples["none"].append(timer.measure("run", args.steps))
            floor = Attached([FLOOR, str(timer.pid)])
            samples["floor"].append(timer.measure("run", args.steps))
            floor.close()
            for mode, extra in (("ops", ["--no-python", "--no-shapes"]), ("shapes", ["--no-python"]),
                                ("tprof", []), ("noviews", ["--no-view-ops"])):
                with tempfile.TemporaryDirectory() as scratch:
                    trace = os.path.join(scratch, "bench.pt.trace.json")
                    tprof = Attached([TPROF, "attach", str(timer.pid), "--output", trace] + extra)
                    samples[mode].append(timer.measure("run", args.steps))
                    tprof.close()
                    if mode == "noviews":
                        if per_step_ops_without_views is None:
                            per_step_ops_without_views = ops_per_step(trace, args.steps)
                        continue
                    if per_step_ops is None:
                        per_step_ops = ops_per_step(trace, args.steps)
                    calibrations.append(trap_calibration_us(trace))
                    if mode == "tprof":
                        estimates.append(estimated_share(trace))
            samples["torch"].append(timer.measure("torch", args.steps))
            samples["torchfull"].append(timer.measure("torchfull", args.steps))
            print(f"round {round_index + 1}/{args.rounds}: " +
                  ", ".join(f"{mode} {values[-1]:.1f} us" for mode, values in samples.items()), file=sys.stderr)
    finally:
        timer.close()

    median = {mode: statistics.median(values) for mode, values in samples.items()}
    none = median["none"]
    floor_cost = median["floor"] - none
    ops_cost = median["ops"] - none
    shapes_cost = median["shapes"] - none
    tprof_cost = median["tprof"] - none
    noviews_cost = median["noviews"] - none

    attach_113 = attach_time_ms(["/usr/bin/python3"], "torch 1.13")
    trixie = subprocess.run(["bash", os.path.join(REPO, "scripts", "make-torch-root.sh"), "trixie"],
                            stdout=subprocess.PIPE, text=True)
    attach_26 = attach_time_ms(["chroot", trixie.stdout.strip(), "python3"], "torch 2.6") \
        if trixie.returncode == 0 else None
    torch26 = floor_on_torch26(trixie.stdout.strip(), args.rounds, args.steps) if trixie.returncode == 0 else None

    lines = [
        f"Workload: tests/workloads/train_loop.py model, {args.steps} steps per sample, median of {args.rounds} "
        f"interleaved rounds, {per_step_ops:.0f} traced ops per step, torch 1.13.1 on /usr/bin/python3.",
        "",
        "| mode | step time (us) | over none (us/step) | per op (us) |",
        "|---|---:|---:|---:|",
    ]
    for mode, label in (("none", "no probes"), ("floor", "empty BPF programs, same sites (floor)"),
                        ("ops", "tprof attach --no-python --no-shapes (ops only)"),
                        ("shapes", "tprof attach --no-python (ops + shapes)"),
                        ("tprof", "tprof attach (ops + shapes + Python stacks + sampler)"),
                        ("noviews", "tprof attach --no-view-ops"),
                        ("torch", "torch profiler (legacy, names only)"),
                        ("torchfull", "torch profiler (record_shapes + with_stack)")):
        extra = median[mode] - none
        lines.append(f"| {label} | {median[mode]:.1f} | {extra:.1f} | {extra / per_step_ops:.3f} |")
    lines += [
        "",
        f"- op tracing: (ops - none) / (floor - none) = **{ops_cost / floor_cost:.2f}**",
        f"- with shapes: (shapes - none) / (floor - none) = **{shapes_cost / floor_cost:.2f}**; "
        f"shape capture over op tracing: (shapes - none) / (ops - none) = **{shapes_cost / ops_cost:.2f}**, "
        f"i.e. **{(shapes_cost - ops_cost) / per_step_ops:.3f} us** more per op",
        f"- with shapes and Python stacks: (tprof - none) / (floor - none) = **{tprof_cost / floor_cost:.2f}**; "
        f"stack capture over shapes: (tprof - none) / (shapes - none) = **{tprof_cost / shapes_cost:.2f}**, "
        f"i.e. **{(tprof_cost - shapes_cost) / per_step_ops:.3f} us** more per op",
        f"- --no-view-ops: (noviews - none) / (tprof - none) = **{noviews_cost / tprof_cost:.2f}**, with "
        f"{per_step_ops_without_views:.0f} ops recorded a step against {per_step_ops:.0f}",
        f"- tprof's own estimate of its share of the target's CPU (full tprof, median of {len(estimates)} attaches): "
        f"**{100 * statistics.median(estimates):.1f}%** (from {100 * min(estimates):.1f} to {100 * max(estimates):.1f}), "
        f"against the measured (tprof - none) / tprof = **{100 * tprof_cost / median['tprof']:.1f}%**",
        f"- tprof (ops only) overhead / torch profiler overhead (names only) = "
        f"**{ops_cost / (median['torch'] - none):.2f}**",
        f"- tprof (shapes + stacks) overhead / torch profiler overhead (record_shapes + with_stack) = "
        f"**{tprof_cost / (median['torchfull'] - none):.2f}**",
        f"- tprof's own trap calibration (a `push` entry and a `ret`), median of its {len(calibrations)} attaches: "
        f"**{statistics.median(calibrations):.3f} us** a range (from {min(calibrations):.3f} to "
        f"{max(calibrations):.3f}), against the floor's **{floor_cost / per_step_ops:.3f} us** an op",
        f"- attach, torch 1.13.1 ({attach_113[2]} op sites): links created in **{attach_113[0]:.1f} ms**; "
        f"tprof start to 'attached' **{attach_113[1]:.0f} ms**",
    ]
    if attach_26:
        lines.append(f"- attach, torch 2.6 in the trixie chroot ({attach_26[2]} op sites): links created in "
                     f"**{attach_26[0]:.1f} ms**; tprof start to 'attached' **{attach_26[1]:.0f} ms**")
    else:
        lines.append("- attach time, torch 2.6: NOT MEASURED (the trixie root could not be built)")
    if torch26:
        none26 = torch26["none"]
        lines.append(f"- torch 2.6 (trixie chroot, every function starts with endbr64), same steps: no probes "
                     f"{none26:.1f} us/step, floor +{torch26['floor'] - none26:.1f} us, ops only "
                     f"+{torch26['ops'] - none26:.1f} us; (ops - none) / (floor - none) = "
                     f"**{(torch26['ops'] - none26) / (torch26['floor'] - none26):.2f}**")
    else:
        lines.append("- torch 2.6 step times: NOT MEASURED (the trixie root could not be built)")
    print_report(lines, args.markdown)


if __name__ == "__main__":
    main()
