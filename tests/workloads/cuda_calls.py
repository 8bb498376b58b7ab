"""A torch process that calls the CUDA runtime without CUPTI: inside record_function("launch_site")
it calls libcudart's cudaLaunchKernel and cudaDeviceSynchronize through ctypes (real calls; without
a driver they return an error). For the e2e test of tprof's CUDA API uprobes.

Prints READY <pid>, waits for a line on stdin, runs --calls iterations, prints DONE and the
return codes, then waits for stdin to close.
"""
import argparse
import ctypes
import os
import sys

import torch


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cudart", required=True)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--trigger", choices=["stdin"], default="stdin")
    args = parser.parse_args()

    cudart = ctypes.CDLL(args.cudart)
    cudart.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    kernel = ctypes.cast(cudart.cudaDeviceSynchronize, ctypes.c_void_p)  # any address: no driver runs it

    x = torch.ones(8)
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    results = set()
    for _ in range(args.calls):
        with torch.autograd.profiler.record_function("launch_site"):
            x = x + 1
            results.add(cudart.cudaLaunchKernel(kernel, Dim3(4, 1, 1), Dim3(256, 1, 1), None, 0, None))
            results.add(cudart.cudaDeviceSynchronize())
    print(f"DONE calls={args.calls} results={sorted(results)}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
