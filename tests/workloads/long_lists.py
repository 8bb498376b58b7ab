#!/usr/bin/env python3
"""Ops called with lists longer than tprof reads (LIST_ELEMENTS_MAX, 1024 elements): the target of
the long-list e2e test. A Tensor[] (cat) and an int[] (split_with_sizes) of --length elements.

Protocol as scalar_values.py's: prints READY <pid>, waits for a line on stdin, makes each call
once, prints DONE, and exits at the next line or EOF.
"""
import argparse
import os
import sys

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--length", type=int, default=1500, help="elements of each list")
    parser.add_argument("--trigger", choices=("stdin",), default="stdin", help="what releases the calls")
    args = parser.parse_args()
    pieces = [torch.full((2,), float(i)) for i in range(args.length)]
    whole = torch.ones(args.length)
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    torch.cat(pieces)
    torch.split_with_sizes(whole, [1] * args.length)
    print("DONE", flush=True)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
