#!/usr/bin/env python3
"""Ops called with Scalars whose values are known: the target of the values e2e test.

Protocol as train_loop.py's: prints READY <pid>, waits for a line on stdin, runs each call once,
writes the calls to --expected-out as JSON (op name and the Concrete Inputs torch's profiler
would show for its Scalar arguments, in schema order), prints DONE, and exits at the next line
or EOF.
"""
import argparse
import json
import os
import sys

import torch

a, b, c = torch.ones(3, 3), torch.ones(3, 3), torch.ones(3, 3)
CALLS = [
    # (op, its Scalar values as torch's profiler writes them, the call)
    ("aten::addmm", ["1", "1"], lambda: torch.addmm(c, a, b, beta=1, alpha=1)),
    ("aten::addmm", ["0.5", "2"], lambda: torch.addmm(c, a, b, beta=0.5, alpha=2)),
    ("aten::add_", ["1"], lambda: c.add_(a, alpha=1)),
    ("aten::add_", ["-3"], lambda: c.add_(a, alpha=-3)),
    ("aten::clamp_min", ["0"], lambda: torch.clamp_min(a, 0)),
    ("aten::fill_", ["1.5"], lambda: b.fill_(1.5)),
    ("aten::fill_", ["7"], lambda: b.fill_(7)),
    ("aten::add", ["2"], lambda: torch.add(a, b, alpha=2)),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--expected-out", metavar="FILE", required=True)
    parser.add_argument("--trigger", choices=("stdin",), default="stdin", help="what releases the calls")
    args = parser.parse_args()
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    for _, _, call in CALLS:
        call()
    with open(args.expected_out, "w") as out:
        json.dump([[op, values] for op, values, _ in CALLS], out)
    print("DONE", flush=True)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
