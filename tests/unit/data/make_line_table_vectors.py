#!/usr/bin/env python3
"""Writes the line-table test vectors that tests/unit/test_line_table.cpp checks.

For every interpreter below this compiles one sample module, then dumps each of its code objects:
co_firstlineno, the raw line table (co_lnotab on 3.9, co_linetable on 3.10+) and, for every code
unit of the bytecode, the line the interpreter itself gives it. The module is also run, and every
call it makes to probe() records the caller's f_lasti and f_lineno, which is what a stack walker
sees in a frame that is blocked in a call.

Expected lines come from the interpreter's own reading of the table, two ways that must agree:
  - the Python-level view: dis.findlinestarts (3.9), co_lines() (3.10), co_positions() (3.11+);
  - PyCode_Addr2Line through ctypes, which is exactly what frame.f_lineno uses.

Usage: make_line_table_vectors.py [INTERPRETER ...]   (default: the interpreters listed below)
Writes tests/unit/data/line_tables/<source>-<version>[-no-debug-ranges].json.
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUTPUT_DIRECTORY = os.path.join(HERE, "line_tables")

DEFAULT_INTERPRETERS = [
    ("pyenv", "/root/.pyenv/versions/3.9.18/bin/python3"),
    ("pyenv", "/root/.pyenv/versions/3.10.13/bin/python3"),
    ("pyenv", "/root/.pyenv/versions/3.11.7/bin/python3"),
    ("pyenv", "/root/.pyenv/versions/3.12.1/bin/python3"),
    ("pyenv", "/root/.pyenv/versions/3.13.0/bin/python3"),
    ("debian", "/usr/bin/python3.11"),
]

SAMPLE_FILENAME = "line_table_samples.py"

# Shapes that stress the tables: calls spread over several lines (the CALL's line goes back up),
# loops (backward jumps), exception handlers (3.11+ gives cleanup code no line), nested scopes.
SAMPLE_SOURCE = '''\
import sys

CALL_SITES = []


def probe(*args):
    caller = sys._getframe(1)
    CALL_SITES.append((caller.f_code, caller.f_lasti, caller.f_lineno))
    return len(args)


def straight_line(a, b):
    total = a + b
    total *= 2
    return total


def multi_line_call():
    result = probe(
        1,
        2,
    )
    return result + probe(3,
                          4)


def method_chain(items):
    return (
        items
        .copy()
        .pop()
    )


def loop_with_branches(n):
    total = 0
    for i in range(n):
        if i % 2:
            total += probe(i)
        else:
            continue
    while total > 1:
        total -= probe(total)
    return total


class Closing:
    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        probe()
        return False


def exceptions():
    try:
        probe()
        raise ValueError("x")
    except ValueError as error:
        probe(
            error,
        )
    finally:
        probe()
    with Closing() as closing:
        probe(closing)


def nested():
    def inner(x):
        return lambda y: x + y + probe()
    return [inner(i)(i) for i in range(3)]


class Outer:
    class Inner:
        def method(self):
            return probe(self)


def decorate(function):
    return function


@decorate
def decorated(
    a,
    b=probe(),
):
    return a + b


def generator(n):
    for i in range(n):
        yield probe(i)


async def coroutine():
    return probe()


def drive(awaitable):
    try:
        awaitable.send(None)
    except StopIteration as stop:
        return stop.value
'''

# 3.10+ syntax, appended only where it compiles.
MATCH_SOURCE = '''

def matcher(value):
    match value:
        case [first, *rest]:
            return probe(first)
        case {"key": key}:
            return probe(key)
        case _:
            return probe()
'''


def long_function_source():
    """A function whose tables need their escape hatches.

    300 one-line statements push byte offsets far past 255; a 200-element list on one line is an
    address jump > 255 with no line change; a parenthesised expression over 200 comment lines is a
    line jump > 127 forward, then back again for the store; a loop around all of it makes jump
    arguments need EXTENDED_ARG.
    """
    lines = ["", "", "def long_function(x):", "    for _ in range(2):"]
    for index in range(300):
        lines.append(f"        x = x + {index}")
        if index % 100 == 50:
            lines.append("        probe(x,")
            lines.append("              x)")
    lines.append("        y = [" + ", ".join("x" for _ in range(200)) + "]")
    lines.append("        z = (x")
    lines.extend("             # filler" for _ in range(200))
    lines.append("             + probe(y))")
    lines.append("        x = z")
    lines.append("    return probe(x,")
    lines.append("                 y)")
    return "\n".join(lines) + "\n"


DRIVER_SOURCE = '''

straight_line(1, 2)
multi_line_call()
method_chain([1, 2])
loop_with_branches(6)
exceptions()
nested()
Outer.Inner().method()
decorated(1)
list(generator(2))
drive(coroutine())
long_function(0)
if "matcher" in globals():
    matcher([1, 2])
    matcher({"key": 3})
    matcher(4)
'''


def sample_source():
    source = SAMPLE_SOURCE
    if sys.version_info >= (3, 10):
        source += MATCH_SOURCE
    source += long_function_source()
    return source + DRIVER_SOURCE


def code_objects(code, parent_path=""):
    """Every code object reachable from `code`, with a readable qualified name."""
    qualname = getattr(code, "co_qualname", None)
    if qualname is None:
        qualname = code.co_name if not parent_path else f"{parent_path}.{code.co_name}"
    yield qualname, code
    for constant in code.co_consts:
        if isinstance(constant, type(code)):
            yield from code_objects(constant, qualname if code.co_name != "<module>" else "")


def raw_line_table(code):
    # 3.10 still has co_lnotab, but derives it from co_linetable; the profiler reads co_linetable.
    if sys.version_info >= (3, 10):
        return code.co_linetable
    return code.co_lnotab


def addr2line_from_c():
    import ctypes

    function = ctypes.pythonapi.PyCode_Addr2Line
    function.argtypes = [ctypes.py_object, ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def python_level_lines(code):
    """Line of each code unit (2 bytes) as the interpreter's Python API reports it; -1 = none."""
    unit_count = len(code.co_code) // 2
    if sys.version_info >= (3, 11):
        lines = [line if line is not None else -1 for line, _, _, _ in code.co_positions()]
        assert len(lines) == unit_count, (len(lines), unit_count)
        return lines
    lines = [None] * unit_count
    if sys.version_info >= (3, 10):
        for start, end, line in code.co_lines():
            for unit in range(start // 2, end // 2):
                lines[unit] = line if line is not None else -1
    else:
        import dis

        starts = dict(dis.findlinestarts(code))
        current = code.co_firstlineno
        for unit in range(unit_count):
            current = starts.get(unit * 2, current)
            lines[unit] = current
    assert None not in lines, "co_lines() left a code unit uncovered"
    return lines


def instruction_from_f_lasti(f_lasti):
    """The unit a stack walker reads from the frame struct (see line_table.h).

    3.9 stores a byte offset and f_lasti is it. 3.10 stores a code-unit index and 3.11+ a pointer
    into the bytecode; f_lasti reports both as bytes (index * 2).
    """
    if sys.version_info >= (3, 10):
        return f_lasti // 2
    return f_lasti


def emit():
    source = sample_source()
    module_code = compile(source, SAMPLE_FILENAME, "exec")
    namespace = {"__name__": "line_table_samples"}
    exec(module_code, namespace)

    addr2line = addr2line_from_c()
    functions = []
    index_of_code = {}
    for qualname, code in code_objects(module_code):
        lines = python_level_lines(code)
        lines_from_c = [addr2line(code, unit * 2) for unit in range(len(lines))]
        if lines != lines_from_c:
            mismatches = [(unit, a, b) for unit, (a, b) in enumerate(zip(lines, lines_from_c))
                          if a != b]
            raise SystemExit(f"{qualname}: Python API and PyCode_Addr2Line disagree at "
                             f"(code unit, python, c): {mismatches[:10]}")
        index_of_code[id(code)] = len(functions)
        functions.append({
            "qualname": qualname,
            "first_line": code.co_firstlineno,
            "table_hex": raw_line_table(code).hex(),
            "line_of_code_unit": lines,
        })

    call_sites = []
    for code, f_lasti, f_lineno in namespace["CALL_SITES"]:
        call_sites.append({
            "function": index_of_code[id(code)],
            "instruction": instruction_from_f_lasti(f_lasti),
            "line": f_lineno,
        })

    json.dump({
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "functions": functions,
        "call_sites": call_sites,
    }, sys.stdout, separators=(",", ":"))


def run_interpreter(interpreter, extra_options):
    output = subprocess.run([interpreter, *extra_options, os.path.abspath(__file__), "--emit"],
                            check=True, stdout=subprocess.PIPE).stdout
    return json.loads(output)


def write_vectors(source_label, interpreter):
    version = subprocess.run(
        [interpreter, "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
        check=True, stdout=subprocess.PIPE, text=True).stdout.split()
    variants = [("", [])]
    if (int(version[0]), int(version[1])) >= (3, 11):
        # Without column data the compiler writes the "no column" entry kind (code 13).
        variants.append(("-no-debug-ranges", ["-X", "no_debug_ranges"]))
    for suffix, options in variants:
        vectors = run_interpreter(interpreter, options)
        vectors["debug_ranges"] = not options
        path = os.path.join(OUTPUT_DIRECTORY, f"{source_label}-{vectors['python']}{suffix}.json")
        with open(path, "w") as output:
            json.dump(vectors, output, separators=(",", ":"))
            output.write("\n")
        unit_count = sum(len(f["line_of_code_unit"]) for f in vectors["functions"])
        print(f"{path}: {len(vectors['functions'])} code objects, {unit_count} code units, "
              f"{len(vectors['call_sites'])} call sites", file=sys.stderr)


def main(arguments):
    if arguments == ["--emit"]:
        emit()
        return
    os.makedirs(OUTPUT_DIRECTORY, exist_ok=True)
    interpreters = [("custom", path) for path in arguments] or DEFAULT_INTERPRETERS
    for source_label, interpreter in interpreters:
        if not os.path.exists(interpreter):
            print(f"skipping {interpreter}: not installed", file=sys.stderr)
            continue
        write_vectors(source_label, interpreter)


if __name__ == "__main__":
    main(sys.argv[1:])
