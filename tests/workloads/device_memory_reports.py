#!/usr/bin/env python3
"""The CUDA caching allocator's side of --memory, at its boundary, on a machine without a GPU.

The caching allocator tells c10::reportMemoryUsageToProfiler(ptr, alloc_size, total_allocated,
total_reserved, device) of every block it hands out and takes back. This script makes the same
calls, through ctypes into the libc10 torch loaded, with the values a GPU run would pass: a block
of 2 MiB and one of 1 MiB allocated on cuda:0 inside record_function("## device ##"), the first
freed there, a CPU report (left out by tprof: the CPU's blocks come from the CPU allocator), and
the second freed outside. With no profiler listening, torch's function returns at once.

Protocol as train_loop.py: READY <pid>, a line on stdin runs the calls (--steps times), DONE,
and the next line or EOF exits 0.
"""

import argparse
import ctypes
import os
import sys

import torch

MIB = 1 << 20
CPU, CUDA = 0, 1
# (address, alloc_size, total_allocated, total_reserved, device type, device index, inside the range)
REPORTS = [
    (0x7F0000100000, 2 * MIB, 2 * MIB, 20 * MIB, CUDA, 0, True),
    (0x7F0000300000, 1 * MIB, 3 * MIB, 20 * MIB, CUDA, 0, True),
    (0x7F0000100000, -2 * MIB, 1 * MIB, 20 * MIB, CUDA, 0, True),
    (0x7F0000500000, 4096, 0, 0, CPU, -1, False),
    (0x7F0000300000, -1 * MIB, 0, 20 * MIB, CUDA, 0, False),
]
# torch 1.13 declares the totals int64_t, torch 2.x size_t.
NAMES = ["_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE",
         "_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE"]


def report_function():
    with open("/proc/self/maps") as maps:
        path = next(line.split()[-1] for line in maps if "/libc10.so" in line)
    library = ctypes.CDLL(path)
    for name in NAMES:
        if hasattr(library, name):
            function = getattr(library, name)
            # c10::Device {int8 type; int8 index} is passed in one integer register.
            function.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint16]
            function.restype = None
            return function
    raise SystemExit(f"{path} exports no c10::reportMemoryUsageToProfiler")


def run(report):
    with torch.autograd.profiler.record_function("## device ##"):
        for address, size, allocated, reserved, device_type, index, inside in REPORTS:
            if inside:
                report(address, size, allocated, reserved, device_type | ((index & 0xFF) << 8))
    for address, size, allocated, reserved, device_type, index, inside in REPORTS:
        if not inside:
            report(address, size, allocated, reserved, device_type | ((index & 0xFF) << 8))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1)
    args, _ = parser.parse_known_args()
    report = report_function()
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    for _ in range(args.steps):
        run(report)
    print("DONE", flush=True)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
