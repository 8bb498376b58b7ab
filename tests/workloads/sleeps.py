#!/usr/bin/env python3
"""A process that waits before and after its work: the target of the off-CPU python_function test.

Protocol as train_loop.py's: prints READY <pid>, waits for a line on stdin, then sleeps
--sleep seconds in sleepy(), runs a few matmuls in work(), sleeps again in sleepy(), prints
DONE and waits for the next line (or EOF) before it exits.
"""
import argparse
import os
import sys
import time

import torch


def sleepy(seconds):
    time.sleep(seconds)


def work():
    a = torch.ones(64, 64)
    for _ in range(20):
        a = torch.mm(a, a) / 64


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sleep", type=float, default=0.5, help="seconds slept before and after the work")
    parser.add_argument("--trigger", choices=("stdin",), default="stdin", help="what releases the work")
    args = parser.parse_args()
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    sleepy(args.sleep)
    work()
    sleepy(args.sleep)
    print("DONE", flush=True)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
