#!/usr/bin/env python3
"""--max-overhead in continuous mode (issue 24): `tprof attach --max-overhead P% --schedule ...
--max-files N`, until stopped, on a loop of bench/budget_target.py, for --minutes.

The target runs detached for --detached seconds, then with tprof attached (no --duration:
stopped by SIGINT after --minutes), then detached again. Every --every seconds it samples:
  rss      - tprof's resident memory (VmRSS), KiB
  disk     - bytes of every file under the output directory (.partial files included)
  traces   - the cycles' traces on disk (*.pt.trace.json), and their Execution Traces
  rate     - the target's steps per second over the last interval, and whether it still runs
At the end it reports the slowdown (the detached rate, mean of before and after, over the
attached rate, less 1), tprof's estimate and cycle count from its console, the bounds of the
samples above, and the recall of every ProfilerStep in the traces left on disk against torch's
own profiler's step (as bench/overhead_budget.py).

Usage (root): /usr/bin/python3 bench/continuous_budget.py [--loop small] [--budget 2]
              [--schedule wait=50,warmup=1,active=3] [--max-files 5] [--minutes 30]
              [--detached 60] [--every 10] [--json FILE]
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead_budget import TPROF, Target, exact_steps, recall  # noqa: E402


def rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return None


def disk_use(directory):
    total, traces, execution_traces = 0, 0, 0
    for root, _, files in os.walk(directory):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except FileNotFoundError:
                continue  # removed by rotation meanwhile
            traces += name.endswith(".pt.trace.json")
            execution_traces += name.endswith(".et.json")
    return total, traces, execution_traces


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loop", default="small")
    parser.add_argument("--budget", type=float, default=2)
    parser.add_argument("--schedule", default="wait=50,warmup=1,active=3")
    parser.add_argument("--max-files", type=int, default=5)
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--detached", type=float, default=60)
    parser.add_argument("--every", type=float, default=10)
    parser.add_argument("--json")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: tprof attaches uprobes")

    directory = tempfile.mkdtemp(prefix="tprof-continuous-")
    target = Target(args.loop)
    samples = []
    try:
        time.sleep(3)
        before = time.monotonic()
        time.sleep(args.detached)
        attach_start = time.monotonic()
        console_file = tempfile.TemporaryFile(mode="w+")  # a pipe unread for 30 min could fill
        tprof = subprocess.Popen([TPROF, "attach", str(target.pid), f"--max-overhead={args.budget}%",
                                  "--schedule", args.schedule, "--max-files", str(args.max_files),
                                  "--output-dir", directory],
                                 stderr=console_file, stdout=console_file, text=True)
        end = attach_start + 60 * args.minutes
        last_at, last_steps = None, None
        while time.monotonic() < end:
            time.sleep(args.every)
            at = time.monotonic()
            steps = target.samples[-1][1] if target.samples else 0
            disk, traces, execution_traces = disk_use(directory)
            sample = {"t_s": round(at - attach_start, 1), "rss_kib": rss_kib(tprof.pid), "disk_bytes": disk,
                      "traces": traces, "execution_traces": execution_traces,
                      "steps_per_s": round((steps - last_steps) / (at - last_at), 1) if last_at else None,
                      "target_running": target.process.poll() is None, "tprof_running": tprof.poll() is None}
            print(json.dumps(sample), flush=True)
            samples.append(sample)
            last_at, last_steps = at, steps
        tprof.send_signal(signal.SIGINT)
        tprof.wait(timeout=120)
        console_file.seek(0)
        console = console_file.read()
        attach_end = time.monotonic()
        time.sleep(args.detached)
        after = time.monotonic()
        attached_rate = target.rate(attach_start + 5, attach_end - 1)
        detached_rate = (target.rate(before, attach_start) + target.rate(attach_end + 1, after)) / 2
        target_ran_on = target.process.poll() is None
    finally:
        target.stop()

    cycles = re.search(r"(\d[\d,]*) older ones removed", console)
    estimate = re.search(r"estimated slowdown ([\d.]+)%", console)
    windows = re.search(r"(\d[\d,]*) windows?(?: \([^)]*\))?, (\d[\d,]*) exact ProfilerSteps of (\d[\d,]*) steps",
                        console)
    recalls, steps_on_disk = [], 0
    for name in sorted(os.listdir(directory)):
        if name.endswith(".pt.trace.json"):
            with open(os.path.join(directory, name)) as file:
                for _, counts in exact_steps(json.load(file)):
                    steps_on_disk += 1
                    recalls.append(recall(counts, target.reference))
    half = len(samples) // 2
    result = {
        "loop": args.loop, "budget": args.budget, "schedule": args.schedule, "max_files": args.max_files,
        "minutes": args.minutes, "tprof_exit": tprof.returncode, "target_ran_on": target_ran_on,
        "slowdown": detached_rate / attached_rate - 1, "detached_steps_per_s": detached_rate,
        "estimate": float(estimate.group(1)) / 100 if estimate else None,
        "windows": windows.group(1) if windows else None, "exact_steps": windows.group(2) if windows else None,
        "steps_seen": windows.group(3) if windows else None,
        "cycles_removed": cycles.group(1) if cycles else "0",
        "traces_left": disk_use(directory)[1], "steps_in_traces_left": steps_on_disk,
        "least_recall": min(recalls) if recalls else None,
        "rss_kib_first_half_max": max((s["rss_kib"] or 0) for s in samples[:half]) if half else None,
        "rss_kib_second_half_max": max((s["rss_kib"] or 0) for s in samples[half:]) if samples else None,
        "disk_bytes_max": max(s["disk_bytes"] for s in samples) if samples else None,
        "traces_max": max(s["traces"] for s in samples) if samples else None,
        "execution_traces_max": max(s["execution_traces"] for s in samples) if samples else None,
        "least_steps_per_s": min((s["steps_per_s"] for s in samples if s["steps_per_s"]), default=None),
        "console_tail": console.strip().splitlines()[-3:],
    }
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"result": result, "samples": samples}, file, indent=1)


if __name__ == "__main__":
    main()
