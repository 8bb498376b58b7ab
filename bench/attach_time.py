#!/usr/bin/env python3
"""How long `tprof attach PID` takes to attach to a running torch training loop, cold (an empty
plan cache: libtorch_cpu is planned and its plan kept) and warm (the plan read back from the
cache), as the median over rounds of the wall time from starting tprof to its 'attached' line,
and of the split that line gives (plan, load, link). Cold and warm rounds alternate, so that a
change in the machine's load falls on both. With --before, a third round in each runs another
tprof build (an older one, whose line may not split the time: its wall time only).

Usage (root): /usr/bin/python3 bench/attach_time.py [--rounds 10] [--tprof PATH] [--before PATH] [--python PATH]
"""
import argparse
import os
import re
import signal
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ATTACHED = re.compile(r"in ([\d.]+) ms \(plan ([\d.]+) ms( from cache| shared)?, load ([\d.]+) ms, link ([\d.]+) ms\)")
FIELDS = ("wall", "total", "plan", "load", "link")


def start_loop(python):
    # One intra-op thread, as bench/step_timer.py runs it: the loop keeps one CPU busy and leaves
    # the others to tprof, so that rounds compare.
    loop = subprocess.Popen([python, os.path.join(REPO, "tests/workloads/train_loop.py"), "--steps", "1000000000",
                             "--trigger", "none"], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    if not loop.stdout.readline().startswith("READY"):
        raise SystemExit("the training loop did not start")
    return loop


def attach_once(tprof, pid, cache, scratch):
    """The wall time (ms) from starting tprof to its 'attached' line, the line's own figures
    where it gives them, and whether it says the plan came from the cache."""
    environment = dict(os.environ, TPROF_PLAN_CACHE_DIR=cache)
    started = time.monotonic()
    process = subprocess.Popen([tprof, "attach", str(pid), "-o", os.path.join(scratch, "attach.pt.trace.json"),
                                "--no-et", "--force"], stderr=subprocess.PIPE, text=True, env=environment)
    line = ""
    for line in process.stderr:
        if "attached to" in line:
            break
    wall_ms = (time.monotonic() - started) * 1e3
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    if process.wait(timeout=120) != 0 or "attached to" not in line:
        raise SystemExit(f"tprof failed:\n{line}{rest}")
    found = ATTACHED.search(line)
    if not found:
        return dict(wall=wall_ms), False
    total, plan, source, load, link = found.groups()
    figures = dict(wall=wall_ms, total=float(total), plan=float(plan), load=float(load), link=float(link))
    return figures, source == " from cache"


def load_average():
    with open("/proc/loadavg") as averages:
        return " ".join(averages.read().split()[:3])


def report(mode, rounds):
    fields = [field for field in FIELDS if field in rounds[0]]
    medians = {field: statistics.median(figures[field] for figures in rounds) for field in fields}
    print(f"{mode}: " + ", ".join(f"{field} {medians[field]:.1f} ms" for field in fields) +
          f" (median of {len(rounds)}; wall and total from tprof's start)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--tprof", default=os.path.join(REPO, "build/tprof"))
    parser.add_argument("--before", help="another tprof build to time in the same rounds (wall time only)")
    parser.add_argument("--python", default="/usr/bin/python3", help="a python3 with torch (1.13: Debian's)")
    arguments = parser.parse_args()
    loop = start_loop(arguments.python)
    cold, warm, before = [], [], []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            print(f"load average before: {load_average()}")
            warm_cache = os.path.join(scratch, "warm")
            attach_once(arguments.tprof, loop.pid, warm_cache, scratch)  # fills it
            for round_index in range(arguments.rounds):
                figures, from_cache = attach_once(arguments.tprof, loop.pid, os.path.join(scratch, f"cold{round_index}"),
                                                  scratch)
                assert not from_cache
                cold.append(figures)
                figures, from_cache = attach_once(arguments.tprof, loop.pid, warm_cache, scratch)
                assert from_cache
                warm.append(figures)
                if arguments.before:
                    before.append(attach_once(arguments.before, loop.pid, os.path.join(scratch, "before"), scratch)[0])
            print(f"load average after: {load_average()}")
    finally:
        loop.kill()
        loop.wait()
    report("cold", cold)
    report("warm", warm)
    if before:
        report("before", [dict(wall=figures["wall"]) for figures in before])


if __name__ == "__main__":
    main()
