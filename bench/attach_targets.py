#!/usr/bin/env python3
"""How long `tprof attach PID...` takes to attach to N idle torch processes at once (the ranks
of a job on one node), as the median over rounds of the wall time from starting tprof to its
N-th 'attached' line. Every target is planned, loaded and attached before the window opens, so
this is how long a job waits for its trace to begin. Also the kernel memory tprof's BPF objects
hold once all are attached: the sum of `memlock` over its BPF map and program descriptors
(their /proc fdinfo), with the count of maps, ring buffers and programs.

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


RINGBUF_MAP_TYPE = "27"  # BPF_MAP_TYPE_RINGBUF


def bpf_held_by(pid):
    """(memlock bytes, maps, ring buffers, programs) over the BPF descriptors of process `pid`."""
    memlock = maps = ring_buffers = programs = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                fields = dict(line.split(":\t", 1) for line in info.read().splitlines() if ":\t" in line)
        except OSError:
            continue
        if link not in ("anon_inode:bpf-map", "anon_inode:bpf-prog"):
            continue
        memlock += int(fields.get("memlock", "0"))
        if link == "anon_inode:bpf-prog":
            programs += 1
            continue
        maps += 1
        ring_buffers += fields.get("map_type", "").strip() == RINGBUF_MAP_TYPE
    return memlock, maps, ring_buffers, programs


def time_to_attached_s(tprof, pids):
    """Seconds to the last 'attached' line, and what bpf_held_by finds in tprof then."""
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
        held = bpf_held_by(process.pid)
        process.send_signal(signal.SIGINT)
        rest = process.stderr.read()
        if process.wait(timeout=120) != 0 or attached != len(pids):
            raise SystemExit(f"tprof failed ({attached} of {len(pids)} attached):\n{rest}")
    return elapsed, held


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tprof", default=os.path.join(REPO, "build", "tprof"))
    args = parser.parse_args()
    targets = start_targets(max(args.targets))
    try:
        print(f"tprof: {args.tprof}")
        print("| targets | to every 'attached' (s, median) | per target (s) | BPF memlock (MiB) | maps | ring buffers | programs |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for count in args.targets:
            pids = [target.pid for target in targets[:count]]
            rounds = [time_to_attached_s(args.tprof, pids) for _ in range(args.rounds)]
            median = statistics.median(elapsed for elapsed, _ in rounds)
            memlock, maps, ring_buffers, programs = rounds[-1][1]
            print(f"| {count} | {median:.2f} | {median / count:.2f} | {memlock / 2**20:.1f} | {maps} | {ring_buffers} "
                  f"| {programs} |", flush=True)
    finally:
        for target in targets:
            target.stdin.close()
            target.wait(timeout=30)


if __name__ == "__main__":
    main()
