#!/usr/bin/env python3
"""How long `tprof attach PID...` takes to attach to N idle torch processes at once (the ranks
of a job on one node), as the median over rounds of the wall time from starting tprof to its
N-th 'attached' line. Every target is planned, loaded and attached before the window opens, so
this is how long a job waits for its trace to begin.

Usage (root): /usr/bin/python3 bench/attach_targets.py [--targets 1 2 4 8] [--rounds 3] [--tprof PATH]
"""
import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IDLE_TORCH = "import torch, sys; print('READY', flush=True); sys.stdin.read()"


def start_targets(count):
    targets = [subprocess.Popen(["/usr/bin/python3", "-c", IDLE_TORCH], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(count)]
    for target in targets:
        if target.stdout.readline().strip() != "READY":
            raise SystemExit("a target did not start")
    return targets


def time_to_attached_s(tprof, pids):
    with tempfile.TemporaryDirectory() as scratch:
        started = time.monotonic()
        process = subprocess.Popen([tprof, "attach", *map(str, pids), "--output-dir", scratch, "--no-et"],
                                   stderr=subprocess.PIPE, text=True)
        attached = 0
        for line in process.stderr:
            if "attached to" in line:
                attached += 1
                if attached == len(pids):
                    break
        elapsed = time.monotonic() - started
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        if process.wait(timeout=120) != 0 or attached != len(pids):
            raise SystemExit(f"tprof failed ({attached} of {len(pids)} attached):\n{rest}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tprof", default=os.path.join(REPO, "build", "tprof"))
    args = parser.parse_args()
    targets = start_targets(max(args.targets))
    try:
        print(f"tprof: {args.tprof}")
        print("| targets | to every 'attached' (s, median) | per target (s) |")
        print("|---:|---:|---:|")
        for count in args.targets:
            pids = [target.pid for target in targets[:count]]
            median = statistics.median(time_to_attached_s(args.tprof, pids) for _ in range(args.rounds))
            print(f"| {count} | {median:.2f} | {median / count:.2f} |", flush=True)
    finally:
        for target in targets:
            target.stdin.close()
            target.wait(timeout=30)


if __name__ == "__main__":
    main()
