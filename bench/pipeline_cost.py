#!/usr/bin/env python3
"""tprof's own CPU per recorded range at the demo's rate (issue 24, item 5), for each output.

The demo's training loop (tests/workloads/train_loop.py --annotate-steps, as scripts/demo.sh
starts it) runs on; for each output, tprof attaches twice, for --short and --long seconds, and
its CPU time (user and system, from the children's rusage) and the ranges and events its
console counts are read. The difference between the two attaches is what recording costs per
range once attached: planning (warm: an attach before them fills the plan cache), linking, the
trap calibration and the final write cancel out.
  us/range        - tprof's CPU per range recorded (both decoding and writing)
  events/s/core   - the events tprof decodes per second of its own CPU
  bytes/range     - the files written (trace + ET), over the ranges of the long attach

Usage (root): /usr/bin/python3 bench/pipeline_cost.py [--short 5] [--long 15] [--markdown FILE]
"""
import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overhead_budget import REPO, TPROF, print_table  # noqa: E402

LOOP = os.path.join(REPO, "tests", "workloads", "train_loop.py")

OUTPUTS = [
    ("gzip, trace + ET (the demo's)", ".pt.trace.json.gz", []),
    ("plain, trace + ET", ".pt.trace.json", []),
    ("plain, trace only", ".pt.trace.json", ["--no-et"]),
    ("plain, trace only, no shapes", ".pt.trace.json", ["--no-et", "--no-shapes"]),
    ("plain, trace only, no shapes, no Python", ".pt.trace.json", ["--no-et", "--no-shapes", "--no-python"]),
]


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime, usage.ru_stime


def attach(pid, seconds, path, options):
    user0, system0 = children_cpu_s()
    result = subprocess.run([TPROF, "attach", str(pid), "-d", str(seconds), "-o", path] + options,
                            capture_output=True, text=True)
    user1, system1 = children_cpu_s()
    if result.returncode != 0:
        raise SystemExit(f"tprof failed: {result.stderr.strip()}")
    counts = re.search(r"([\d,]+) ranges .* from ([\d,]+) events; ([\d,]+) events dropped", result.stderr)
    if not counts:
        raise SystemExit(f"no counts in tprof's console:\n{result.stderr}")
    ranges, events, dropped = (int(group.replace(",", "")) for group in counts.groups())
    written = os.path.getsize(path)
    execution_trace = os.path.join(os.path.dirname(path), "execution_trace",
                                   os.path.basename(path).replace(".pt.trace.json", ".et.json"))
    if os.path.exists(execution_trace):
        written += os.path.getsize(execution_trace)
    return {"user_s": user1 - user0, "system_s": system1 - system0, "ranges": ranges, "events": events,
            "dropped": dropped, "bytes": written}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", type=float, default=5)
    parser.add_argument("--long", type=float, default=15)
    parser.add_argument("--markdown")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root: tprof attaches uprobes")
    loop = subprocess.Popen(["/usr/bin/python3", LOOP, "--steps", "1000000", "--trigger", "none", "--annotate-steps"],
                            stdout=subprocess.PIPE, text=True)
    for line in loop.stdout:
        if line.startswith("READY"):
            break
    # User and system apart are printed per row above only: their differences are noise-dominated.
    lines = ["| output | us of tprof CPU a range | events/s per core of tprof | bytes a range "
             "| ranges/s recorded | dropped |",
             "|---|---:|---:|---:|---:|---:|"]
    try:
        with tempfile.TemporaryDirectory() as directory:
            for index, (name, suffix, options) in enumerate(OUTPUTS):
                # Plans the library for these options into the plan cache, so that neither
                # measured attach plans it cold.
                attach(loop.pid, 1, os.path.join(directory, f"warm{index}{suffix}"), options)
                short = attach(loop.pid, args.short, os.path.join(directory, f"short{index}{suffix}"), options)
                time.sleep(1)
                long = attach(loop.pid, args.long, os.path.join(directory, f"long{index}{suffix}"), options)
                ranges = long["ranges"] - short["ranges"]
                user = long["user_s"] - short["user_s"]
                system = long["system_s"] - short["system_s"]
                cpu = user + system
                row = {"output": name, "short": short, "long": long,
                       "us_per_range": 1e6 * cpu / ranges, "user_us_per_range": 1e6 * user / ranges,
                       "events_per_core_s": (long["events"] - short["events"]) / cpu,
                       "bytes_per_range": long["bytes"] / long["ranges"],
                       "ranges_per_s": long["ranges"] / args.long}
                print(row, flush=True)
                lines.append(f"| {name} | {row['us_per_range']:.2f} "
                             f"| {row['events_per_core_s'] / 1e6:.2f} M | {row['bytes_per_range']:.0f} "
                             f"| {row['ranges_per_s'] / 1e3:.0f} k | {long['dropped']} |")
    finally:
        loop.kill()
        loop.wait()
    print_table(lines, args.markdown)


if __name__ == "__main__":
    main()
