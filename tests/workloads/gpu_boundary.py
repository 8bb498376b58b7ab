"""Host for the GPU boundary e2e test: a torch process that loads libtprof_cupti.so as CUDA would
(then InitializeInjection) and makes kernel launches and copies from inside an ATen op, as a CUDA
op's kernel would: a tensor subclass's aten.mul, inside record_function("launch_site"), calls
tests/cupti/cupti_feeder.cpp, which makes a real cudaLaunchKernel call into libcudart (it fails
without a driver) and hands CUPTI activity buffers to the library's buffer-completed callback.
The feeder also answers the library's device queries as a driver with one H100 would.

Prints READY <pid>, waits for a line on stdin, runs --launches iterations, prints DONE and the
cudaLaunchKernel results, then waits for stdin to close. --report FILE gets how often the library
tried to enable CUPTI before tprof attached and while it was attached (without a GPU CUPTI then
refuses, which the library only counts).
"""
import argparse
import ctypes
import os
import sys
import time

import torch


class Counters(ctypes.Structure):
    """struct tprof_cupti_counters (cupti/tprof_cupti.h), field for field: the library writes the
    whole struct, and one shorter here overruns the Python heap (the interpreter then crashed in
    its GC at exit)."""
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "watcher_wakeups", "activations", "buffers", "records", "batches", "skipped_records",
        "dropped_by_cupti", "handovers", "untimed_records")] + [
        ("cupti_loaded", ctypes.c_int32), ("last_error", ctypes.c_int32)]


class LaunchingTensor(torch.Tensor):
    """Its aten.mul launches a kernel and a copy from inside at::_ops::mul::call."""

    launch = None  # set to (correlation) -> cudaLaunchKernel's result
    results = set()

    @staticmethod
    def __new__(cls, elem):
        wrapper = torch.Tensor._make_wrapper_subclass(cls, elem.size(), strides=elem.stride(), dtype=elem.dtype,
                                                      device=elem.device)
        wrapper.elem = elem
        return wrapper

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.mul.Tensor:
            cls.results.add(cls.launch())
        unwrapped = [arg.elem if isinstance(arg, LaunchingTensor) else arg for arg in args]
        return func(*unwrapped, **(kwargs or {}))


def activations(injection):
    counters = Counters()
    injection.tprof_cupti_read_counters(ctypes.byref(counters))
    return counters.activations


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", required=True)
    parser.add_argument("--feeder", required=True)
    parser.add_argument("--cudart", required=True)
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--report", help="file to write the library's activation counts to")
    parser.add_argument("--trigger", choices=["stdin"], default="stdin")
    args = parser.parse_args()

    injection = ctypes.CDLL(args.library)
    if injection.InitializeInjection() != 1:
        sys.exit("InitializeInjection failed")
    # Global, so that the library finds the feeder's stand-in driver when tprof attaches.
    feeder = ctypes.CDLL(args.feeder, mode=ctypes.RTLD_GLOBAL)
    if feeder.tprof_feeder_setup(args.library.encode(), args.cudart.encode()) != 0:
        sys.exit("feeder setup failed")

    correlations = iter(range(1000, 1000 + 3 * args.launches, 3))
    LaunchingTensor.launch = lambda: feeder.tprof_feeder_launch(ctypes.c_uint32(next(correlations)))
    launching = LaunchingTensor(torch.ones(8))
    time.sleep(0.5)  # the library's watcher looks twice: nothing is attached yet
    before = activations(injection)
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    # CUPTI records nothing before the library has seen tprof and enabled it (sending the GPUs'
    # properties first); the feeder's records stand for what would come after that.
    deadline = time.monotonic() + 10
    while activations(injection) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(args.launches):
        with torch.autograd.profiler.record_function("launch_site"):
            launching * launching
    time.sleep(0.5)  # the watcher has seen tprof's probe by now, and tried to enable CUPTI
    attached = activations(injection)
    if args.report:
        with open(args.report, "w") as report:
            report.write(f"before={before} attached={attached}\n")
    print(f"DONE launches={args.launches} cudaLaunchKernel={sorted(LaunchingTensor.results)}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
