#!/usr/bin/env python3
"""Four Python threads calling torch ops at once: the target of tprof's per-thread stack test.

Thread i runs worker_<i>(), a function of its own (so the thread an op ran on can be told
from its Python stack), which calls torch.mm and torch.relu --iterations times on small
tensors.

Protocol: prints `READY <pid>`, waits for a line on stdin, runs the threads to completion,
prints `TIDS <tid of worker_0> ... <tid of worker_3>` (native thread ids) and `DONE`, waits
for a line or EOF on stdin and exits 0.
"""

import argparse
import os
import sys
import threading

import torch

SIZE = 16

# Every op on the thread that called it: an intra-op pool thread would run ops with no
# Python stack at all.
torch.set_num_threads(1)


def multiply_and_activate(start, iterations):
    left = torch.ones(SIZE, SIZE)
    right = torch.ones(SIZE, SIZE)
    # Every thread waits here, so all four run their ops at the same time.
    start.wait()
    for _ in range(iterations):
        torch.relu(torch.mm(left, right))


def worker_0(start, iterations):
    multiply_and_activate(start, iterations)


def worker_1(start, iterations):
    multiply_and_activate(start, iterations)


def worker_2(start, iterations):
    multiply_and_activate(start, iterations)


def worker_3(start, iterations):
    multiply_and_activate(start, iterations)


WORKERS = (worker_0, worker_1, worker_2, worker_3)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=200,
                        help="torch.mm + torch.relu calls per worker thread")
    return parser.parse_args()


def main():
    args = parse_args()
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()

    start = threading.Barrier(len(WORKERS))
    threads = [threading.Thread(target=worker, args=(start, args.iterations),
                                name=worker.__name__)
               for worker in WORKERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    print("TIDS " + " ".join(str(thread.native_id) for thread in threads), flush=True)
    print("DONE", flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
