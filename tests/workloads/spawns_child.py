"""A parent that starts a child process after tprof attached, for `tprof attach --children`.

Prints READY <pid>, waits for a line on stdin, starts a child (this script with --child), prints
CHILD <child pid>; the child imports torch, waits until --go-file exists (the test creates it
once tprof has attached to the child), runs torch.mm --ops times in child_work(), and exits.
The parent then prints DONE and waits for stdin to close.
"""
import argparse
import os
import subprocess
import sys
import time

import torch


def child_work(ops):
    left = torch.ones(8, 8)
    for _ in range(ops):
        torch.mm(left, left)


def run_child(args):
    while not os.path.exists(args.go_file):
        time.sleep(0.01)
    child_work(args.ops)


def run_parent(args):
    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    child = subprocess.Popen([sys.executable, __file__, "--child", "--go-file", args.go_file, "--ops", str(args.ops)])
    print(f"CHILD {child.pid}", flush=True)
    child.wait()
    print("DONE", flush=True)
    sys.stdin.read()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--go-file", required=True)
    parser.add_argument("--ops", type=int, default=300)
    args = parser.parse_args()
    run_child(args) if args.child else run_parent(args)


if __name__ == "__main__":
    main()
