#!/usr/bin/env python3
"""Pure-Python workload with a known call tree: the target of tprof's Python stack tests.

No torch and nothing but the standard library, so it runs on every CPython the tests cover
(3.9 to 3.13). Every function the test looks for is a module-level function with a fixed
name, so its qualname equals its name on every version (3.9/3.10 have no co_qualname and
tprof names frames there by co_name). Each busy loop lasts several milliseconds so the 1 kHz
sampler catches the frames that surround it.

Protocol: prints `READY <pid> <major.minor.micro>`, waits for a line on stdin, runs the call
tree for --seconds, prints `TIDS <main> <thread_body_0> <thread_body_1>` (native thread ids)
and `DONE`, waits for a line or EOF on stdin and exits 0.
"""

import argparse
import os
import sys
import threading
import time

# Long enough that the 1 kHz sampler sees every function around a spin several times per
# round, short enough that one round of the main thread's tree takes well under a second.
SPIN_SECONDS = 0.005
RECURSION_DEPTH = 5
GENERATED_ITEMS = 3


def leaf_spin():
    deadline = time.perf_counter() + SPIN_SECONDS
    while time.perf_counter() < deadline:
        pass


def middle():
    leaf_spin()


def outer():
    middle()


def recurse(depth):
    if depth > 1:
        recurse(depth - 1)
    else:
        leaf_spin()


def produce():
    for item in range(GENERATED_ITEMS):
        # Busy work inside the generator body, so samples see produce() running on top of
        # consume() (a generator frame is only on the stack while it runs).
        deadline = time.perf_counter() + SPIN_SECONDS
        while time.perf_counter() < deadline:
            pass
        yield item


def consume():
    total = 0
    for item in produce():
        total += item
    return total


class Raised(Exception):
    pass


def raise_inside():
    deadline = time.perf_counter() + SPIN_SECONDS
    while time.perf_counter() < deadline:
        pass
    raise Raised()


def catcher():
    try:
        raise_inside()
    except Raised:
        pass


def run_main_tree():
    outer()
    recurse(RECURSION_DEPTH)
    consume()
    catcher()


# One distinct function per extra thread, so the test can check each shows up only on its
# own thread.
def thread_body_0(stop_at):
    while time.perf_counter() < stop_at:
        leaf_spin()


def thread_body_1(stop_at):
    while time.perf_counter() < stop_at:
        leaf_spin()


THREAD_BODIES = (thread_body_0, thread_body_1)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="how long the call tree runs after the trigger")
    return parser.parse_args()


def main():
    args = parse_args()
    version = ".".join(str(part) for part in sys.version_info[:3])
    print(f"READY {os.getpid()} {version}", flush=True)
    sys.stdin.readline()

    stop_at = time.perf_counter() + args.seconds
    threads = [threading.Thread(target=body, args=(stop_at,), name=body.__name__)
               for body in THREAD_BODIES]
    for thread in threads:
        thread.start()
    while time.perf_counter() < stop_at:
        run_main_tree()
    for thread in threads:
        thread.join()

    tids = [threading.get_native_id()] + [thread.native_id for thread in threads]
    print("TIDS " + " ".join(str(tid) for tid in tids), flush=True)
    print("DONE", flush=True)
    sys.stdin.readline()


if __name__ == "__main__":
    main()
