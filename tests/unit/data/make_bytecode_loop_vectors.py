#!/usr/bin/env python3
"""Prints a bytecode-loop test vector for tests/unit/test_bytecode_loops.cpp: the bytecode of a
few functions as the interpreter running this compiled it and, on 3.11+, specialized it after
warming up (co_code_adaptive), with the backward jumps dis finds in each; on 3.12+ also that
adaptive code as a profiler's sys.monitoring events (no line events) instrument it, whose jumps
are those of the code as compiled (the 3.12/3.13 vectors predate it). One JSON object
{"version", "functions": [{"name", "code", "adaptive", "jumps", "adaptive_jumps",
"instrumented"}]}, bytecode as hex (null where the interpreter has none), jumps as [from, to] in
the units frames record (bytes on 3.9, code units on 3.10+).

The vectors in data/bytecode_loops/ came from:
  ~/.pyenv/versions/3.X.Y/bin/python make_bytecode_loop_vectors.py > pyenv-3.X.Y.json
  /usr/bin/python3 ... > debian-bookworm-3.11.2.json
  chroot /var/cache/tprof/trixie-torch python3 ... > debian-trixie-3.13.5.json
  chroot /var/cache/tprof/sid-torch python3 ... > debian-sid-3.14.10.json
"""
import dis
import json
import sys


def no_loop(x):
    y = x + 1
    return y * 2


def for_loop(items):
    total = 0
    for item in items:
        total += item
    return total


def nested_loops(n):
    t = 0
    for i in range(n):
        while t < i:
            t += 1
        if t > 5:
            continue
    return t


def loop_then_call(n):
    for i in range(n):
        no_loop(i)
    return no_loop(n)


def wide(n):  # a long body, so that jumps need EXTENDED_ARG
    total = 0
    for i in range(n):
        total += i; total += i; total += i; total += i; total += i; total += i; total += i; total += i
        total += i; total += i; total += i; total += i; total += i; total += i; total += i; total += i
        total += i; total += i; total += i; total += i; total += i; total += i; total += i; total += i
        total += i; total += i; total += i; total += i; total += i; total += i; total += i; total += i
        total += i; total += i; total += i; total += i; total += i; total += i; total += i; total += i
        total += i; total += i; total += i; total += i; total += i; total += i; total += i; total += i
        total += i; total += i; total += i; total += i; total += i; total += i; total += i; total += i
    return total


UNITS = 1 if sys.version_info[:2] == (3, 9) else 2  # bytes per frame unit


def backward_jumps(function, adaptive):
    keywords = {"adaptive": True} if adaptive else {}
    jumps = []
    for instruction in dis.get_instructions(function, **keywords):
        if isinstance(instruction.argval, int) and "JUMP" in instruction.opname and instruction.argval <= instruction.offset:
            jumps.append([instruction.offset // UNITS, instruction.argval // UNITS])
    return jumps


def instrumented(function):
    """The adaptive code while a profiler's events are on: INSTRUMENTED_* opcodes in place of some."""
    monitoring, events = sys.monitoring, sys.monitoring.events
    monitoring.use_tool_id(monitoring.PROFILER_ID, "bytecode loop vectors")
    branches = events.BRANCH_LEFT | events.BRANCH_RIGHT if sys.version_info >= (3, 14) else events.BRANCH
    monitoring.set_local_events(monitoring.PROFILER_ID, function.__code__,
                                events.PY_START | events.PY_RETURN | events.CALL | events.JUMP | branches)
    function(list(range(3))) if function is for_loop else function(3)  # instrumented as it resumes
    code = function.__code__._co_code_adaptive.hex()
    monitoring.set_local_events(monitoring.PROFILER_ID, function.__code__, 0)
    monitoring.free_tool_id(monitoring.PROFILER_ID)
    return code


def main():
    functions = []
    for function in (no_loop, for_loop, nested_loops, loop_then_call, wide):
        adaptive = None
        if sys.version_info >= (3, 11):
            for _ in range(64):  # warm up, so that the interpreter specializes the code
                function(list(range(3))) if function is for_loop else function(3)
            adaptive = function.__code__._co_code_adaptive.hex()
        functions.append({"name": function.__name__, "code": function.__code__.co_code.hex(), "adaptive": adaptive,
                          "jumps": backward_jumps(function, False),
                          "adaptive_jumps": backward_jumps(function, True) if adaptive else None})
        # Last: dis cannot read instrumented code, and that is left in place until the next call.
        functions[-1]["instrumented"] = instrumented(function) if sys.version_info >= (3, 12) else None
    print(json.dumps({"version": list(sys.version_info[:3]), "functions": functions}))


if __name__ == "__main__":
    main()
