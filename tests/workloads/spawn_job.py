"""A torch.multiprocessing.spawn job, for `tprof record --follow`.

The parent imports torch and spawns --workers processes (the 'spawn' start method: each is a
fresh interpreter that imports torch again). Worker r calls torch.mm exactly r + 1 times, first
thing, and prints WORKER <r> <pid>. The parent runs no op and exits 0 once all have ended.
"""
import argparse
import os

import torch
import torch.multiprocessing as mp


def work(rank):
    left = torch.ones(2, 2)
    for _ in range(rank + 1):
        torch.mm(left, left)
    print(f"WORKER {rank} {os.getpid()}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=3)
    mp.spawn(work, nprocs=parser.parse_args().workers)
