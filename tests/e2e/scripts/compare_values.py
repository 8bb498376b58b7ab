#!/usr/bin/env python3
"""Value agreement: the non-tensor input values tprof recorded against torch.profiler's own.

The same workload's steps are recorded once by torch (torch.profiler.profile with
record_shapes=True and an ExecutionTraceObserver: tests/workloads/train_loop.py
--kineto-trace-out FILE --execution-trace-out FILE) and once by tprof (tprof attach, which
writes the Chrome trace and execution_trace/<stem>.et.json). This script compares, op by op,
every input value torch wrote that is not a tensor:

  chrome: "Concrete Inputs" entries where torch's string is not empty;
  et:     inputs.values entries whose inputs.types is not a tensor or a list of tensors
          (Int, Double, Bool, Device, None, String, GenericList[Int,...], GenericList[Bool,...], ...).

Ops are paired per thread: each source's aten:: ops (Chrome trace: cpu_op events in start
order; ET: nodes in rf_id order) form a name sequence per thread, threads are paired by how
many ops their sequences share, and tprof's sequence is aligned to torch's with
difflib.SequenceMatcher on the names (the two recordings may start and stop at slightly
different points). Only matched ops are compared.

A value is "present" in tprof when tprof wrote something other than its placeholder ("" in
Concrete Inputs, "<Unknown>" / type "Unknown" in the ET), "agrees" when it equals torch's
(numbers numerically, doubles within a tiny tolerance; types too: 1 is not 1. and not True),
and "contradicts" when it is present and differs.

Each matched Chrome op's "Input Dims" (a tensor's sizes, a Tensor[]'s elements' sizes) is
compared whole with torch's too.

Exit status: 0 when nothing contradicts, present/compared >= --min-present-share (0.95) in
both sources and Input Dims agree on >= --min-dims-share (0.99) of the matched Chrome ops; 1
otherwise (also when a source compared nothing); 2 on bad input (one line on stderr). Standard
library only.
"""

import argparse
import ast
import collections
import difflib
import gzip
import json
import math
import sys

CHROME = "chrome"
ET = "et"
SOURCES = (CHROME, ET)
ET_UNKNOWN_VALUE = "<Unknown>"
ET_UNKNOWN_TYPE = "Unknown"
REL_TOLERANCE = 1e-9
ABS_TOLERANCE = 0.0  # 0.0 == 0.0 is still equal; 1e-5 vs 1.00000001e-5 is not
CONTRADICTIONS_SHOWN = 20
MISSING_SHOWN = 25
CONTRADICTIONS_KEPT = 1000  # in the JSON summary


class BadInput(Exception):
    pass


# ---------------------------------------------------------------- loading

def load_json(path, what):
    try:
        with open(path, "rb") as raw:
            data = raw.read()
    except OSError as error:
        raise BadInput(f"{what} {path}: {error.strerror or error}")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise BadInput(f"{what} {path}: bad gzip data ({error})")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise BadInput(f"{what} {path}: not JSON ({error})")


class Op:
    """One aten:: op: its name, thread and its inputs as (value, type) pairs; in a Chrome trace
    also its Input Dims."""
    __slots__ = ("name", "thread", "order", "values", "types", "schema", "dims")

    def __init__(self, name, thread, order, values, types, schema="", dims=None):
        self.name = name
        self.thread = thread
        self.order = order
        self.values = values
        self.types = types
        self.schema = schema
        self.dims = dims


def chrome_ops(path, what):
    """{thread: [Op]} of the trace's aten:: cpu_op events, in start order (an enclosing op
    before the ops it holds when they start at the same time)."""
    data = load_json(path, what)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise BadInput(f"{what} {path}: no traceEvents list (not a Chrome trace)")
    threads = collections.defaultdict(list)
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("cat") != "cpu_op" or event.get("ph", "X") != "X":
            continue
        name = event.get("name", "")
        if not isinstance(name, str) or not name.startswith("aten::"):
            continue
        args = event.get("args") or {}
        concrete = args.get("Concrete Inputs") or []
        types = args.get("Input type") or []
        if not isinstance(concrete, list) or not isinstance(types, list):
            raise BadInput(f"{what} {path}: event {index} ({name}) has malformed Concrete Inputs/Input type")
        try:
            start = float(event.get("ts", 0))
            duration = float(event.get("dur", 0))
        except (TypeError, ValueError):
            raise BadInput(f"{what} {path}: event {index} ({name}) has a non-numeric ts/dur")
        thread = f"{event.get('pid')}/{event.get('tid')}"
        threads[thread].append(((start, -duration, index),
                                Op(name, thread, index, concrete, types, dims=args.get("Input Dims"))))
    return {thread: [op for _, op in sorted(ops, key=lambda pair: pair[0])] for thread, ops in threads.items()}


def et_ops(path, what):
    """{thread: [Op]} of the ET's aten:: nodes by their "tid" attr, in rf_id order (id when
    there is no rf_id)."""
    data = load_json(path, what)
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        raise BadInput(f"{what} {path}: no nodes list (not an Execution Trace)")
    threads = collections.defaultdict(list)
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            continue
        name = node.get("name", "")
        if not isinstance(name, str) or not name.startswith("aten::"):
            continue
        attrs = {}
        for attr in node.get("attrs") or []:
            if isinstance(attr, dict) and "name" in attr:
                attrs[attr["name"]] = attr.get("value")
        inputs = node.get("inputs") or {}
        values = inputs.get("values") or []
        types = inputs.get("types") or []
        if not isinstance(values, list) or not isinstance(types, list):
            raise BadInput(f"{what} {path}: node {node.get('id')} ({name}) has malformed inputs")
        order = attrs.get("rf_id")
        if not isinstance(order, int) or isinstance(order, bool):
            order = node.get("id")
        if not isinstance(order, int) or isinstance(order, bool):
            raise BadInput(f"{what} {path}: node {index} ({name}) has neither an rf_id nor an id")
        thread = f"tid {attrs.get('tid')}"
        threads[thread].append(((order, index), Op(name, thread, order, values, types,
                                                   str(attrs.get("op_schema") or attrs.get("tprof_op_schema") or ""))))
    return {thread: [op for _, op in sorted(ops, key=lambda pair: pair[0])] for thread, ops in threads.items()}


# ---------------------------------------------------------------- alignment

def matched_pairs(reference, traced):
    """[(i, j)] of reference[i] matched with traced[j], by names."""
    matcher = difflib.SequenceMatcher(None, [op.name for op in reference], [op.name for op in traced],
                                      autojunk=False)
    pairs = []
    for block in matcher.get_matching_blocks():
        pairs.extend((block.a + k, block.b + k) for k in range(block.size))
    return pairs


def pair_threads(reference_threads, traced_threads):
    """Pairs each thread with the other side's thread it shares most ops with, most shared first:
    ([(reference thread, traced thread, [(i, j)])], report of the pairing). compare_python_spans.py
    pairs its threads the same way."""
    candidates = []
    for reference_thread, reference in reference_threads.items():
        for traced_thread, traced in traced_threads.items():
            pairs = matched_pairs(reference, traced)
            if pairs:
                candidates.append((len(pairs), reference_thread, traced_thread, pairs))
    candidates.sort(key=lambda candidate: -candidate[0])
    used_reference, used_traced = set(), set()
    paired, thread_pairs = [], []
    for count, reference_thread, traced_thread, pairs in candidates:
        if reference_thread in used_reference or traced_thread in used_traced:
            continue
        used_reference.add(reference_thread)
        used_traced.add(traced_thread)
        paired.append((reference_thread, traced_thread, pairs))
        thread_pairs.append({"torch_thread": reference_thread, "tprof_thread": traced_thread,
                             "torch_ops": len(reference_threads[reference_thread]),
                             "tprof_ops": len(traced_threads[traced_thread]), "matched_ops": count})
    report = {
        "torch_ops": sum(len(ops) for ops in reference_threads.values()),
        "tprof_ops": sum(len(ops) for ops in traced_threads.values()),
        "matched_ops": sum(len(pairs) for _, _, pairs in paired),
        "thread_pairs": thread_pairs,
        "unpaired_torch_threads": sorted(set(reference_threads) - used_reference),
        "unpaired_tprof_threads": sorted(set(traced_threads) - used_traced),
    }
    return paired, report


def align(reference_threads, traced_threads):
    """Pairs threads (most shared ops first) and returns ([(reference op, traced op)], report)."""
    paired, report = pair_threads(reference_threads, traced_threads)
    matched = [(reference_threads[reference_thread][i], traced_threads[traced_thread][j])
               for reference_thread, traced_thread, pairs in paired for i, j in pairs]
    return matched, report


# ---------------------------------------------------------------- values

def parse_concrete(text):
    """A Concrete Inputs string as a Python value: "1" -> 1, "1." -> 1.0, "True" -> True,
    "[1, 1]" -> [1, 1]; anything else stays the string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def kind_of(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        kinds = sorted({kind_of(element) for element in value})
        return "list[" + ",".join(kinds) + "]"
    return type(value).__name__


def same_value(expected, actual):
    """Equal values of the same kind; doubles within REL/ABS_TOLERANCE."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, int) and isinstance(actual, int):
        return expected == actual
    if isinstance(expected, float) and isinstance(actual, float):
        if math.isnan(expected) or math.isnan(actual):
            return math.isnan(expected) and math.isnan(actual)
        return math.isclose(expected, actual, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(expected) == len(actual) and all(same_value(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, (int, float)) or isinstance(actual, (int, float)):
        return False  # a number against anything that is not a number of its kind
    return type(expected) is type(actual) and expected == actual


def et_number(value, type_name):
    """The ET writes non-finite doubles as quoted strings ("inf", "nan")."""
    if type_name == "Double" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if type_name == "Double" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def is_tensor_like(type_name):
    return (type_name.startswith("Tensor") or
            (type_name.startswith("GenericList[") and "Tensor" in type_name))


def et_type_key(type_name):
    """GenericList[Int,Int,Int] -> GenericList[Int]: one row per element type."""
    if type_name.startswith("GenericList[") and type_name.endswith("]"):
        elements = [element for element in type_name[len("GenericList["):-1].split(",") if element]
        return "GenericList[" + ",".join(sorted(set(elements))) + "]"
    return type_name


def schema_argument_names(schema):
    """Argument names of a schema string, in order ("*" skipped); [] when it does not parse."""
    open_at = schema.find("(")
    if open_at < 0:
        return []
    depth, close_at = 0, -1
    for position in range(open_at, len(schema)):
        if schema[position] in "([":
            depth += 1
        elif schema[position] in ")]":
            depth -= 1
            if depth == 0:
                close_at = position
                break
    if close_at < 0:
        return []
    arguments, depth, current = [], 0, ""
    for character in schema[open_at + 1:close_at] + ",":
        if character in "([":
            depth += 1
        elif character in ")]":
            depth -= 1
        if character == "," and depth == 0:
            current = current.strip()
            if current and current != "*":
                declaration = current.split("=", 1)[0].strip()
                arguments.append(declaration.rsplit(" ", 1)[-1] if " " in declaration else "")
            current = ""
        else:
            current += character
    return arguments


class Tally:
    def __init__(self):
        self.counts = collections.defaultdict(lambda: collections.Counter())
        self.missing = collections.Counter()
        self.contradictions = []
        self.contradiction_counts = collections.Counter()

    def add(self, type_key, present, agrees, where, describe_contradiction):
        """Counts one value; `where` is (op, argument, type), `describe_contradiction()` the
        contradiction's record, built only when there is one."""
        row = self.counts[type_key]
        row["compared"] += 1
        row["present"] += present
        row["agree"] += present and agrees
        row["contradict"] += present and not agrees
        if not present:
            self.missing[where] += 1
        elif not agrees:
            self.contradiction_counts[where] += 1
            self.contradictions.append(describe_contradiction())

    def totals(self):
        total = collections.Counter()
        for row in self.counts.values():
            total.update(row)
        return total


def argument_label(names, index):
    return f"{index}:{names[index]}" if index < len(names) and names[index] else str(index)


def compare_chrome(matched, argument_names):
    tally = Tally()
    for reference, traced in matched:
        for index, expected_text in enumerate(reference.values):
            if not isinstance(expected_text, str) or expected_text == "":
                continue
            expected = parse_concrete(expected_text)
            torch_type = reference.types[index] if index < len(reference.types) else ""
            type_key = f"{torch_type or '-'}/{kind_of(expected)}"
            actual_text = traced.values[index] if index < len(traced.values) else ""
            present = isinstance(actual_text, str) and actual_text != ""
            agrees = present and (actual_text == expected_text or same_value(expected, parse_concrete(actual_text)))
            names = argument_names.get((reference.name, len(reference.values)), [])
            tally.add(type_key, present, agrees, (reference.name, argument_label(names, index), type_key),
                      lambda: {
                          "op": reference.name, "argument": argument_label(names, index), "type": type_key,
                          "torch": expected_text, "tprof": actual_text, "torch_thread": reference.thread,
                          "tprof_thread": traced.thread, "torch_position": reference.order,
                          "tprof_position": traced.order})
    return tally


def dims_agreement(matched):
    """(ops whose Input Dims equal torch's, ops compared): tensors, and a Tensor[]'s elements."""
    return sum(1 for reference, traced in matched if reference.dims == traced.dims), len(matched)


def compare_et(matched):
    tally = Tally()
    for reference, traced in matched:
        names = schema_argument_names(reference.schema)
        for index, torch_type in enumerate(reference.types):
            if not isinstance(torch_type, str) or is_tensor_like(torch_type) or index >= len(reference.values):
                continue
            expected = et_number(reference.values[index], torch_type)
            type_key = et_type_key(torch_type)
            if index < len(traced.types) and index < len(traced.values):
                actual_type, actual = traced.types[index], traced.values[index]
            else:
                actual_type, actual = ET_UNKNOWN_TYPE, ET_UNKNOWN_VALUE
            present = actual_type != ET_UNKNOWN_TYPE and actual != ET_UNKNOWN_VALUE
            agrees = present and actual_type == torch_type and same_value(expected, et_number(actual, actual_type))
            tally.add(type_key, present, agrees, (reference.name, argument_label(names, index), torch_type),
                      lambda: {
                          "op": reference.name, "argument": argument_label(names, index), "type": torch_type,
                          "torch": json.dumps(reference.values[index]), "tprof": json.dumps(actual),
                          "tprof_type": actual_type, "torch_thread": reference.thread,
                          "tprof_thread": traced.thread, "torch_rf_id": reference.order,
                          "tprof_rf_id": traced.order})
    return tally


def chrome_argument_names(torch_et_threads):
    """(op name, input count) -> argument names, from torch's ET schemas, where one schema fits."""
    schemas = collections.defaultdict(set)
    for ops in torch_et_threads.values():
        for op in ops:
            if op.schema:
                schemas[(op.name, len(op.types))].add(op.schema)
    return {key: schema_argument_names(next(iter(found))) for key, found in schemas.items() if len(found) == 1}


# ---------------------------------------------------------------- report

def share(part, whole):
    return part / whole if whole else 0.0


def print_report(results, minimum_share, out):
    for source in SOURCES:
        result = results[source]
        alignment = result["alignment"]
        out.write(f"\n== {source}: torch {alignment['torch_ops']} aten ops, tprof {alignment['tprof_ops']}, "
                  f"matched {alignment['matched_ops']} "
                  f"({share(alignment['matched_ops'], alignment['torch_ops']):.1%} of torch's)")
        for pair in alignment["thread_pairs"]:
            out.write(f"; thread {pair['torch_thread']} <-> {pair['tprof_thread']}: {pair['matched_ops']}")
        if alignment["unpaired_torch_threads"]:
            out.write(f"; unpaired torch threads {alignment['unpaired_torch_threads']}")
        if alignment["unpaired_tprof_threads"]:
            out.write(f"; unpaired tprof threads {alignment['unpaired_tprof_threads']}")
        out.write("\n")
        width = max([len("type")] + [len(row["type"]) for row in result["by_type"]])
        header = f"  {'type':<{width}}  {'compared':>8}  {'present':>8}  {'agree':>8}  {'contradict':>10}  {'present%':>8}\n"
        out.write(header)
        for row in result["by_type"] + [dict(result["total"], type="TOTAL")]:
            out.write(f"  {row['type']:<{width}}  {row['compared']:>8}  {row['present']:>8}  {row['agree']:>8}  "
                      f"{row['contradict']:>10}  {share(row['present'], row['compared']):>8.1%}\n")
    for source in SOURCES:
        result = results[source]
        contradictions = result["contradictions"]
        out.write(f"\n{source}: {result['total']['contradict']} contradictions")
        if result["contradiction_groups"]:
            out.write(" (op, argument, torch type: count)\n")
            for group in result["contradiction_groups"]:
                out.write(f"  {group['op']} arg {group['argument']} {group['type']}: {group['count']}\n")
            out.write(f"  first {min(CONTRADICTIONS_SHOWN, len(contradictions))}:\n")
            for item in contradictions[:CONTRADICTIONS_SHOWN]:
                tprof_type = f" ({item['tprof_type']})" if "tprof_type" in item else ""
                out.write(f"    {item['op']} arg {item['argument']} {item['type']}: "
                          f"torch {item['torch']} tprof {item['tprof']}{tprof_type}\n")
        else:
            out.write("\n")
    for source in SOURCES:
        missing = results[source]["missing"]
        out.write(f"\n{source}: {results[source]['total']['compared'] - results[source]['total']['present']} "
                  f"values missing in tprof, {len(missing)} (op, argument, torch type) combinations")
        out.write(", most common:\n" if missing else "\n")
        for item in missing[:MISSING_SHOWN]:
            out.write(f"  {item['count']:>5}  {item['op']} arg {item['argument']} {item['type']}\n")
        if len(missing) > MISSING_SHOWN:
            out.write(f"  ... and {len(missing) - MISSING_SHOWN} more (see --summary-out)\n")
    out.write("\n")
    for source in SOURCES:
        total = results[source]["total"]
        out.write(f"{source}: present {total['present']}/{total['compared']} "
                  f"({share(total['present'], total['compared']):.1%}, minimum {minimum_share:.0%}), "
                  f"{total['contradict']} contradicting\n")


def summarize(tally, alignment):
    by_type = [dict(type=type_key, **{field: row[field] for field in ("compared", "present", "agree", "contradict")})
               for type_key, row in sorted(tally.counts.items())]
    totals = tally.totals()
    total = {field: totals[field] for field in ("compared", "present", "agree", "contradict")}
    missing = [{"op": op, "argument": argument, "type": type_name, "count": count}
               for (op, argument, type_name), count in
               sorted(tally.missing.items(), key=lambda item: (-item[1], item[0]))]
    groups = [{"op": op, "argument": argument, "type": type_name, "count": count}
              for (op, argument, type_name), count in
              sorted(tally.contradiction_counts.items(), key=lambda item: (-item[1], item[0]))]
    return {"alignment": alignment, "by_type": by_type, "total": total,
            "present_share": share(total["present"], total["compared"]),
            "missing": missing, "contradiction_groups": groups,
            "contradictions": tally.contradictions[:CONTRADICTIONS_KEPT]}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--torch-trace", required=True, metavar="FILE",
                        help="torch.profiler's Chrome trace (export_chrome_trace), plain or .gz")
    parser.add_argument("--torch-et", required=True, metavar="FILE",
                        help="torch's Execution Trace of the same run, plain or .gz")
    parser.add_argument("--tprof-trace", required=True, metavar="FILE", help="tprof's Chrome trace, plain or .gz")
    parser.add_argument("--tprof-et", required=True, metavar="FILE", help="tprof's Execution Trace, plain or .gz")
    parser.add_argument("--summary-out", metavar="FILE", help="write the figures as JSON to FILE")
    parser.add_argument("--min-present-share", type=float, default=0.95, metavar="SHARE",
                        help="fail when present/compared is below SHARE in either source (default 0.95)")
    parser.add_argument("--min-dims-share", type=float, default=0.99, metavar="SHARE",
                        help="fail when the matched Chrome ops whose Input Dims equal torch's are below "
                             "SHARE (default 0.99)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        torch_chrome = chrome_ops(args.torch_trace, "--torch-trace")
        torch_et = et_ops(args.torch_et, "--torch-et")
        tprof_chrome = chrome_ops(args.tprof_trace, "--tprof-trace")
        tprof_et = et_ops(args.tprof_et, "--tprof-et")
    except BadInput as error:
        sys.stderr.write(f"compare_values: error: {error}\n")
        return 2

    chrome_matched, chrome_alignment = align(torch_chrome, tprof_chrome)
    et_matched, et_alignment = align(torch_et, tprof_et)
    results = {
        CHROME: summarize(compare_chrome(chrome_matched, chrome_argument_names(torch_et)), chrome_alignment),
        ET: summarize(compare_et(et_matched), et_alignment),
    }
    print_report(results, args.min_present_share, sys.stdout)
    dims_equal, dims_compared = dims_agreement(chrome_matched)
    print(f"chrome: Input Dims equal on {dims_equal}/{dims_compared} matched ops "
          f"({share(dims_equal, dims_compared):.1%}, minimum {args.min_dims_share:.0%})")

    failures = []
    if share(dims_equal, dims_compared) < args.min_dims_share:
        failures.append(f"chrome: Input Dims equal on {share(dims_equal, dims_compared):.1%} < "
                        f"{args.min_dims_share:.0%}")
    for source in SOURCES:
        total = results[source]["total"]
        if total["compared"] == 0:
            failures.append(f"{source}: no value compared")
        elif results[source]["present_share"] < args.min_present_share:
            failures.append(f"{source}: present {results[source]['present_share']:.1%} < "
                            f"{args.min_present_share:.0%}")
        if total["contradict"]:
            failures.append(f"{source}: {total['contradict']} contradicting values")
    summary = {"inputs": {"torch_trace": args.torch_trace, "torch_et": args.torch_et,
                          "tprof_trace": args.tprof_trace, "tprof_et": args.tprof_et},
               "min_present_share": args.min_present_share,
               "input_dims": {"equal": dims_equal, "compared": dims_compared, "min_share": args.min_dims_share},
               "tolerance": {"relative": REL_TOLERANCE, "absolute": ABS_TOLERANCE},
               "sources": results, "failures": failures, "passed": not failures}
    if args.summary_out:
        try:
            with open(args.summary_out, "w") as out:
                json.dump(summary, out, indent=1)
                out.write("\n")
        except OSError as error:
            sys.stderr.write(f"compare_values: error: --summary-out {args.summary_out}: "
                             f"{error.strerror or error}\n")
            return 2
    print("FAIL: " + "; ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
