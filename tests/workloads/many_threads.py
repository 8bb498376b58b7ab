#!/usr/bin/env python3
"""Hundreds of Python threads calling torch ops at once, like an inference server's pool: the
target of tprof's many-thread stack test.

Thread i runs worker_<i>(), a function of its own (so the thread an op ran on can be told
from its Python stack), which calls torch.mm and torch.relu --iterations times on 8x8
tensors.

Protocol: prints `READY <pid>`, waits for a line on stdin, starts --threads threads (a barrier
lets them all begin at once), joins them, prints `TIDS <tid of worker_0> ...` (native thread
ids) and `DONE`, waits for a line or EOF on stdin and exits 0.
"""

import argparse
import os
import sys
import threading

import torch

SIZE = 8

# Every op on the thread that called it: an intra-op pool thread would run ops with no
# Python stack at all.
torch.set_num_threads(1)


def multiply_and_activate(start, iterations):
    left = torch.ones(SIZE, SIZE)
    right = torch.ones(SIZE, SIZE)
    start.wait()
    for _ in range(iterations):
        torch.relu(torch.mm(left, right))


def make_worker(index):
    """worker_<index>: its own code object, named so in every stack."""
    namespace = {"multiply_and_activate": multiply_and_activate}
    exec(f"def worker_{index}(start, iterations):\n"
         f"    multiply_and_activate(start, iterations)\n", namespace)
    return namespace[f"worker_{index}"]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=500, help="worker threads")
    parser.add_argument("--iterations", type=int, default=200,
                        help="torch.mm + torch.relu calls per worker thread")
    return parser.parse_args()


def main():
    args = parse_args()
    workers = [make_worker(index) for index in range(args.threads)]
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()

    start = threading.Barrier(len(workers))
    threads = [threading.Thread(target=worker, args=(start, args.iterations), name=worker.__name__)
               for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    print("TIDS " + " ".join(str(thread.native_id) for thread in threads), flush=True)
    print("DONE", flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
