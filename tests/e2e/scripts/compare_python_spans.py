#!/usr/bin/env python3
"""Python span agreement: the python_function / nn.Module: spans enclosing each op, tprof against torch.

The same workload's measured steps are recorded once by torch (torch.profiler.profile with
with_stack=True, with_modules=True: tests/workloads/train_loop.py --kineto-trace-out FILE
--with-stack) and once by tprof (tprof attach). For every aten:: cpu_op event this script takes
its chain of enclosing python_function spans: those on the op's pid/tid with span ts <= op ts and
op end <= span end (to within --slack-us; times are read exactly, as decimals), outermost first (a span that starts earlier, or at the same time and ends
later, is outer), by name. It then pairs the ops of the two traces as compare_values.py does
(threads paired by how many op names they share, op name sequences aligned with
difflib.SequenceMatcher, a longest-common-subsequence match) and counts the matched ops whose
chains agree.

Normalization, before chains are compared:

  builtins   torch records C functions as spans ("<built-in method conv2d of type object at
             0x...>"); tprof follows Python frames only. Spans named "<built-in ..." are dropped
             from both sides unless --keep-builtins.
  paths      torch writes "path(line): name" with the path relative to the sys.path entry it is
             under ("torch/nn/modules/module.py", "train_loop.py"); tprof writes the absolute
             path. A prefix P is learnt whenever one side's path is P + the other side's path
             (P ending in "/"), and is stripped from every name of that side, longest first;
             --strip-prefix adds prefixes of its own. The prefixes used are reported.
  cut        the chain is cut at, and includes, its outermost span named "...: STEP" (STEP =
             --step-function, default training_step): what lies above it (<module>, main, the
             driver's loop, torch.profiler's own __enter__ frames, tprof's frames that began
             before attach) differs between a profiled and an attached run and is not compared.
             Matched ops with no such span on either side are counted apart as "outside the
             step" and not compared; an op inside the step on one side only is compared (and
             differs).

Line numbers are kept: both write the line of the def for frames that begin while recording
(torch writes the current line for frames already running when it starts, but those lie above
the cut). The report also gives the share with line numbers ignored, as a diagnostic.

Each differing op is given one class, the first that applies:

  enclosing range's stack  tprof's chain holds frames that are not in the op's own "Call stack"
                      (tprof's per-op stack arg) but are in the Call stack of a range enclosing
                      the op (a record_function / user_annotation such as Optimizer.step#SGD.step):
                      the stack where that range began (record_function.__enter__ >
                      _ops.__call__), stretched over the whole range;
  step boundary       inside the step function on one side only;
  merged calls        a differing tprof span holds ops whose torch counterparts lie outside any
                      torch span of its name at its place in the chain, and stands for two or
                      more torch spans (repeated calls joined into one span);
  stale span          such a span (holding ops torch puts outside it) standing for one torch span
                      at most: it outlives its call;
  order               the same frames in a different order;
  line number         frames differ only in their line numbers;
  path                frames differ only in their paths;
  missing nn.Module   torch has nn.Module: spans tprof lacks, and nothing else differs;
  missing frame       torch has python spans tprof lacks;
  extra frame         tprof has spans torch lacks;
  other               anything else (frames replaced by others).

For each differing op the report also tells whether tprof's own "Call stack" of the op (by path
and function, nn.Module's _wrapped_call_impl left out as torch records no span for it) agrees
with torch's chain: when it does, tprof saw the right stack and only its spans are wrong.

Exit status: 0 when chains equal/compared >= --min-share (0.99); 1 when below or when no op was
compared; 2 on bad input (one line on stderr). Standard library only.
"""

import argparse
import collections
import decimal
import difflib
import gzip
import json
import re
import sys

import compare_values  # beside this script: thread pairing and op alignment

BUILTIN_PREFIX = "<built-in "
MODULE_PREFIX = "nn.Module: "
NAME_PATTERN = re.compile(r"^(?P<path>.*)\((?P<line>\d+)\): (?P<function>.*)$")
CLASSES = ("enclosing range's stack", "step boundary", "merged calls", "stale span", "order",
           "line number", "path", "missing nn.Module", "missing frame", "extra frame", "other")
# Frames of a "Call stack" that torch's Python tracer records no span for (nn.Module.__call__,
# which tprof's spans leave out too), as (path suffix, function); left out when an op's Call
# stack is compared with torch's chain.
FRAMES_WITHOUT_SPANS = (("torch/nn/modules/module.py", "_wrapped_call_impl"),)
PAIRS_KEPT = 200  # differing chain pairs in the JSON summary
OUTSIDE_FRAMES_SHOWN = 4  # innermost frames shown of a chain that has no step-function span


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
        # Decimal: microseconds with ns digits at ~5e12 us are at the edge of a double's
        # precision, and tprof ends a span exactly where an op ends; ts + dur must not round.
        return json.loads(data, parse_float=decimal.Decimal)
    except (ValueError, UnicodeDecodeError) as error:
        raise BadInput(f"{what} {path}: not JSON ({error})")


class Event:
    """One complete ("X") event: an aten:: op or a python_function span."""
    __slots__ = ("name", "thread", "start", "end", "index", "ident", "parent", "depth", "stack")

    def __init__(self, name, thread, start, end, index, ident=None, parent=None, stack=None):
        self.name = name
        self.thread = thread
        self.start = start
        self.end = end
        self.index = index
        self.ident = ident
        self.parent = parent
        self.depth = 0
        self.stack = stack  # tprof's "Call stack" arg: frame names, outermost first


def call_stack(args):
    """The frames of a "Call stack" arg (innermost first, ";"-separated), outermost first."""
    text = args.get("Call stack")
    if not isinstance(text, str) or not text:
        return None
    return [frame for frame in reversed(text.split(";")) if frame]


def integer_or_none(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def load_trace(path, what):
    """Trace of the file's aten:: cpu_op events ({thread: [op]}, in start order: an enclosing op
    before the ops it holds), its python_function spans ({thread: [span]}) and its other
    cpu_op / user_annotation ranges that carry a "Call stack" ({thread: [range]})."""
    data = load_json(path, what)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise BadInput(f"{what} {path}: no traceEvents list (not a Chrome trace)")
    ops, spans, ranges = (collections.defaultdict(list) for _ in range(3))
    for index, event in enumerate(events):
        if not isinstance(event, dict) or event.get("ph", "X") != "X":
            continue
        category, name = event.get("cat"), event.get("name", "")
        if category not in ("cpu_op", "python_function", "user_annotation") or not isinstance(name, str):
            continue
        try:
            start = decimal.Decimal(event.get("ts", 0))
            end = start + decimal.Decimal(event.get("dur", 0))
        except (TypeError, ValueError, ArithmeticError):
            raise BadInput(f"{what} {path}: event {index} ({name}) has a non-numeric ts/dur")
        thread = f"{event.get('pid')}/{event.get('tid')}"
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if category == "python_function":
            spans[thread].append(Event(name, thread, start, end, index, integer_or_none(args.get("Python id")),
                                       integer_or_none(args.get("Python parent id"))))
        elif category == "cpu_op" and name.startswith("aten::"):
            ops[thread].append(Event(name, thread, start, end, index, stack=call_stack(args)))
        elif call_stack(args):
            ranges[thread].append(Event(name, thread, start, end, index, stack=call_stack(args)))
    for thread_spans in spans.values():
        set_depths(thread_spans)
    return Trace({thread: sorted(thread_ops, key=lambda op: (op.start, -op.end, op.index))
                  for thread, thread_ops in ops.items()}, dict(spans), dict(ranges))


class Trace:
    __slots__ = ("ops", "spans", "ranges")

    def __init__(self, ops, spans, ranges):
        self.ops = ops
        self.spans = spans
        self.ranges = ranges


def set_depths(spans):
    """Depth along "Python parent id" links where the trace has them (tprof does; torch 2.14
    does not): it orders spans that start and end at the same time (tprof bounds spans by
    the ops and samples it saw, so a caller and its callee can share both)."""
    by_id = {span.ident: span for span in spans if span.ident is not None}
    for span in spans:
        depth, parent, seen = 0, span.parent, set()
        while parent is not None and parent in by_id and parent not in seen:
            seen.add(parent)
            depth += 1
            parent = by_id[parent].parent
        span.depth = depth


def outer_first(span):
    return (span.start, -span.end, span.depth, span.index)


def encloses(outer, inner, slack):
    return outer.start <= inner.start + slack and inner.end <= outer.end + slack


def enclosing_chains(ops, spans, slack):
    """[[span]] for ops (sorted by start): the spans enclosing each op, outermost first."""
    spans = sorted(spans, key=outer_first)
    chains, active, next_span = [], [], 0
    for op in ops:
        while next_span < len(spans) and spans[next_span].start <= op.start + slack:
            active.append(spans[next_span])
            next_span += 1
        active = [span for span in active if span.end + slack >= op.start]
        chains.append([span for span in active if encloses(span, op, slack)])
    return chains


# ---------------------------------------------------------------- names

def split_name(name):
    """(path, line, function) of a "path(line): function" name, or None."""
    match = NAME_PATTERN.match(name)
    return (match.group("path"), match.group("line"), match.group("function")) if match else None


def span_paths(spans_by_thread):
    paths = set()
    for spans in spans_by_thread.values():
        for span in spans:
            parts = split_name(span.name)
            if parts:
                paths.add(parts[0])
    return paths


def learn_prefixes(own_paths, other_paths):
    """Prefixes P such that P + an other-side path is one of own_paths, with how many of
    own_paths each explains."""
    others = set(other_paths)
    found = collections.Counter()
    for path in own_paths:
        for at in range(len(path)):
            if path[at] == "/" and path[at + 1:] in others:
                found[path[:at + 1]] += 1
                break  # the shortest prefix: the longest other-side path it ends with
    return found


class Names:
    """Normalizes one side's span names: builtins dropped, path prefixes stripped."""

    def __init__(self, prefixes, keep_builtins):
        self.prefixes = sorted(prefixes, key=len, reverse=True)
        self.keep_builtins = keep_builtins
        self.stripped = collections.Counter()
        self.cache = {}

    def strip(self, name):
        """The name with its path's prefix stripped."""
        parts = split_name(name)
        if parts:
            for prefix in self.prefixes:
                if parts[0].startswith(prefix) and len(parts[0]) > len(prefix):
                    return f"{parts[0][len(prefix):]}({parts[1]}): {parts[2]}", prefix
        return name, None

    def normalize(self, name):
        """The normalized span name, or None when the span is left out."""
        if name in self.cache:
            return self.cache[name]
        if not self.keep_builtins and name.startswith(BUILTIN_PREFIX):
            result = None
        else:
            result, prefix = self.strip(name)
            if prefix:
                self.stripped[prefix] += 1
        self.cache[name] = result
        return result

    def chain(self, spans):
        """[(normalized name, span)] of a raw chain, left-out spans dropped."""
        out = []
        for span in spans:
            name = self.normalize(span.name)
            if name is not None:
                out.append((name, span))
        return out


def cut_at_step(chain, step_function):
    """The chain from its outermost "...: STEP" span down, or None when it has none."""
    suffix = ": " + step_function
    for position, (name, _) in enumerate(chain):
        if name.endswith(suffix):
            return chain[position:]
    return None


def without_line(name):
    parts = split_name(name)
    return f"{parts[0]}: {parts[2]}" if parts else name


# ---------------------------------------------------------------- alignment

def align(reference_threads, traced_threads):
    """Pairs threads as compare_values.py does; returns ([(thread pair, [(i, j)])], report)."""
    paired, report = compare_values.pair_threads(reference_threads, traced_threads)
    return [((reference_thread, traced_thread), pairs) for reference_thread, traced_thread, pairs in paired], report


# ---------------------------------------------------------------- comparison

def frame_key(name):
    """(path, function) of a "path(line): function" name; None for other names (nn.Module:)."""
    parts = split_name(name)
    return (parts[0], parts[2]) if parts else None


def stack_keys(frames, names, step_function):
    """(path, function) of a "Call stack"'s frames (outermost first, prefixes stripped), cut at
    the outermost step-function frame; None without one."""
    keys = [frame_key(names.strip(frame)[0]) for frame in frames]
    keys = [key for key in keys if key and not any(key[0].endswith(path) and key[1] == function
                                                   for path, function in FRAMES_WITHOUT_SPANS)]
    for position, key in enumerate(keys):
        if key[1] == step_function:
            return keys[position:]
    return None


def chain_keys(chain):
    """(path, function) of a cut chain's python frames (nn.Module: spans left out)."""
    return [key for key in (frame_key(name) for name, _ in chain) if key]


def occurrences(chain):
    """[(name, k)]: the k-th span of that name in the chain, counted from the outermost."""
    seen = collections.Counter()
    keys = []
    for name, _ in chain:
        keys.append((name, seen[name]))
        seen[name] += 1
    return keys


class Pair:
    """A matched op: torch's and tprof's events and their cut chains ([(name, span)] or None)."""
    __slots__ = ("torch_op", "tprof_op", "torch_chain", "tprof_chain", "torch_full_chain", "tprof_full_chain")

    def __init__(self, torch_op, tprof_op, torch_full_chain, tprof_full_chain, step_function):
        self.torch_op = torch_op
        self.tprof_op = tprof_op
        self.torch_full_chain = torch_full_chain  # not cut at the step function
        self.tprof_full_chain = tprof_full_chain
        self.torch_chain = cut_at_step(torch_full_chain, step_function)
        self.tprof_chain = cut_at_step(tprof_full_chain, step_function)


def names_of(chain):
    return tuple(name for name, _ in chain) if chain is not None else None


class SpanEvidence:
    """For each tprof span (by id): which torch spans of its name, at its place in the chain,
    hold the torch counterparts of the ops it holds ("covers"), and how many of those
    counterparts no such torch span holds ("stray")."""

    def __init__(self, pairs):
        self.covers = collections.defaultdict(set)
        self.stray = collections.Counter()
        self.split = collections.defaultdict(set)
        self.spans = {}
        for pair in pairs:
            if pair.torch_chain is None or pair.tprof_chain is None:
                continue
            torch_at = {key: span for key, (_, span) in zip(occurrences(pair.torch_chain), pair.torch_chain)}
            for key, (_, tprof_span) in zip(occurrences(pair.tprof_chain), pair.tprof_chain):
                self.spans[id(tprof_span)] = tprof_span
                torch_span = torch_at.get(key)
                if torch_span is None:
                    self.stray[id(tprof_span)] += 1
                else:
                    self.covers[id(tprof_span)].add(id(torch_span))
                    self.split[id(torch_span)].add(id(tprof_span))

    def merged(self, span):
        return len(self.covers.get(id(span), ())) > 1

    def strays(self, span):
        return self.stray.get(id(span), 0)


def enclosing_ranges(op, ranges, slack):
    return [other for other in ranges if other is not op and encloses(other, op, slack)]


def from_enclosing_range(pair, tprof_ranges, tprof_names, slack):
    """Whether tprof's chain holds python frames that are not in the op's own Call stack but
    are in the Call stack of a range (record_function, user_annotation) enclosing the op: the
    stack seen where that range began, stretched over the whole range."""
    if not pair.tprof_op.stack:
        return False
    own = {frame_key(tprof_names.strip(frame)[0]) for frame in pair.tprof_op.stack}
    chain = pair.tprof_chain if pair.tprof_chain is not None else pair.tprof_full_chain
    foreign = {key for key in chain_keys(chain) if key not in own}
    if not foreign:
        return False
    for enclosing in enclosing_ranges(pair.tprof_op, tprof_ranges, slack):
        if foreign <= {frame_key(tprof_names.strip(frame)[0]) for frame in enclosing.stack}:
            return True
    return False


def classify(pair, evidence, tprof_ranges, tprof_names, slack):
    """The class of a pair whose cut chains differ (see the module docstring)."""
    if from_enclosing_range(pair, tprof_ranges, tprof_names, slack):
        return "enclosing range's stack"
    torch_chain, tprof_chain = pair.torch_chain, pair.tprof_chain
    if torch_chain is None or tprof_chain is None:
        return "step boundary"
    torch_names, tprof_names_list = names_of(torch_chain), names_of(tprof_chain)
    matcher = difflib.SequenceMatcher(None, torch_names, tprof_names_list, autojunk=False)
    torch_only, tprof_only, tprof_positions, replaced = [], [], [], False
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            continue
        torch_only.extend(torch_names[a0:a1])
        tprof_only.extend(tprof_names_list[b0:b1])
        tprof_positions.extend(range(b0, b1))
        replaced = replaced or tag == "replace"

    differing_spans = [tprof_chain[position][1] for position in tprof_positions]
    stale = [span for span in differing_spans if evidence.strays(span)]
    if any(evidence.merged(span) for span in stale):
        return "merged calls"
    if stale and not torch_only:
        return "stale span"
    if sorted(torch_names) == sorted(tprof_names_list):
        return "order"
    if replaced and len(torch_only) == len(tprof_only):
        if all(without_line(a) == without_line(b) for a, b in zip(torch_only, tprof_only)):
            return "line number"
        if all(split_name(a) and split_name(b) and split_name(a)[1:] == split_name(b)[1:]
               for a, b in zip(torch_only, tprof_only)):
            return "path"
    if torch_only and not tprof_only:
        if all(name.startswith(MODULE_PREFIX) for name in torch_only):
            return "missing nn.Module"
        return "missing frame"
    if tprof_only and not torch_only:
        return "extra frame"
    if stale:
        return "stale span"
    return "other"


def compare(torch_trace, tprof_trace, step_function, keep_builtins, extra_prefixes, slack):
    torch_paths, tprof_paths = span_paths(torch_trace.spans), span_paths(tprof_trace.spans)
    torch_names = Names(list(learn_prefixes(torch_paths, tprof_paths)) + extra_prefixes, keep_builtins)
    tprof_names = Names(list(learn_prefixes(tprof_paths, torch_paths)) + extra_prefixes, keep_builtins)

    matched, alignment = align(torch_trace.ops, tprof_trace.ops)
    torch_full = {thread: [torch_names.chain(chain)
                           for chain in enclosing_chains(ops, torch_trace.spans.get(thread, []), slack)]
                  for thread, ops in torch_trace.ops.items()}
    tprof_full = {thread: [tprof_names.chain(chain)
                           for chain in enclosing_chains(ops, tprof_trace.spans.get(thread, []), slack)]
                  for thread, ops in tprof_trace.ops.items()}

    pairs, pair_threads = [], []
    outside = collections.Counter()
    for (torch_thread, tprof_thread), index_pairs in matched:
        for i, j in index_pairs:
            pair = Pair(torch_trace.ops[torch_thread][i], tprof_trace.ops[tprof_thread][j],
                        torch_full[torch_thread][i], tprof_full[tprof_thread][j], step_function)
            if pair.torch_chain is None and pair.tprof_chain is None:
                outside["both"] += 1
                continue
            outside["torch only"] += pair.torch_chain is None
            outside["tprof only"] += pair.tprof_chain is None
            pairs.append(pair)
            pair_threads.append(tprof_thread)

    evidence = SpanEvidence(pairs)
    merged_names = collections.Counter()
    merged_count = 0
    for span_id, covered in evidence.covers.items():
        if len(covered) > 1:
            merged_count += 1
            merged_names[tprof_names.normalize(evidence.spans[span_id].name)] += len(covered)

    equal = equal_without_lines = own_stack_agrees = 0
    classes = collections.Counter()
    differing = collections.Counter()
    pair_info = {}
    for pair, tprof_thread in zip(pairs, pair_threads):
        torch_key, tprof_key = names_of(pair.torch_chain), names_of(pair.tprof_chain)
        if torch_key == tprof_key:
            equal += 1
            equal_without_lines += 1
            continue
        if torch_key is not None and tprof_key is not None and \
                [without_line(name) for name in torch_key] == [without_line(name) for name in tprof_key]:
            equal_without_lines += 1
        kind = classify(pair, evidence, tprof_trace.ranges.get(tprof_thread, []), tprof_names, slack)
        agrees = (pair.torch_chain is not None and pair.tprof_op.stack is not None and
                  stack_keys(pair.tprof_op.stack, tprof_names, step_function) == chain_keys(pair.torch_chain))
        own_stack_agrees += agrees
        classes[kind] += 1
        differing[(torch_key, tprof_key)] += 1
        pair_info.setdefault((torch_key, tprof_key), (kind, pair.torch_op.name, agrees,
                                                      list(names_of(pair.torch_full_chain)),
                                                      list(names_of(pair.tprof_full_chain))))
    compared = len(pairs)
    differing_pairs = [{"count": count, "class": pair_info[key][0], "first_op": pair_info[key][1],
                        "tprof_call_stack_agrees": pair_info[key][2],
                        "torch_full": pair_info[key][3] if key[0] is None else None,
                        "tprof_full": pair_info[key][4] if key[1] is None else None,
                        "torch": list(key[0]) if key[0] is not None else None,
                        "tprof": list(key[1]) if key[1] is not None else None}
                       for key, count in sorted(differing.items(), key=lambda item: -item[1])]
    return {
        "alignment": alignment,
        "step_function": step_function,
        "compared": compared,
        "equal": equal,
        "share": equal / compared if compared else 0.0,
        "equal_ignoring_lines": equal_without_lines,
        "share_ignoring_lines": equal_without_lines / compared if compared else 0.0,
        "differing_with_agreeing_call_stack": own_stack_agrees,
        "outside_step": {"matched_both_outside": outside["both"],
                         "matched_torch_only_outside": outside["torch only"],
                         "matched_tprof_only_outside": outside["tprof only"],
                         "torch_ops_outside": sum(cut_at_step(chain, step_function) is None
                                                  for chains in torch_full.values() for chain in chains),
                         "tprof_ops_outside": sum(cut_at_step(chain, step_function) is None
                                                  for chains in tprof_full.values() for chain in chains)},
        "step_spans": {"torch": count_named(torch_trace.spans, torch_names, step_function),
                       "tprof": count_named(tprof_trace.spans, tprof_names, step_function)},
        "spans": {"torch": sum(len(spans) for spans in torch_trace.spans.values()),
                  "tprof": sum(len(spans) for spans in tprof_trace.spans.values())},
        "prefixes": {"torch": dict(torch_names.stripped), "tprof": dict(tprof_names.stripped)},
        "builtins_dropped": {"torch": count_builtins(torch_trace.spans, keep_builtins),
                             "tprof": count_builtins(tprof_trace.spans, keep_builtins)},
        "merged_tprof_spans": {"spans": merged_count, "torch_spans_covered": sum(merged_names.values()),
                               "by_name": dict(merged_names.most_common())},
        "split_torch_spans": sum(1 for spans in evidence.split.values() if len(spans) > 1),
        "classes": {kind: classes[kind] for kind in CLASSES if classes[kind]},
        "differing_pairs": differing_pairs[:PAIRS_KEPT],
        "differing_pair_count": len(differing_pairs),
    }


def count_builtins(spans_by_thread, keep_builtins):
    if keep_builtins:
        return 0
    return sum(1 for spans in spans_by_thread.values() for span in spans if span.name.startswith(BUILTIN_PREFIX))


def count_named(spans_by_thread, names, step_function):
    suffix = ": " + step_function
    return sum(1 for spans in spans_by_thread.values() for span in spans
               if (names.normalize(span.name) or "").endswith(suffix))


# ---------------------------------------------------------------- report

def share(part, whole):
    return part / whole if whole else 0.0


def chain_text(chain, common, full=None):
    if chain is None:
        shown = full[-OUTSIDE_FRAMES_SHOWN:] if full else []
        lead = "... > " if full and len(full) > len(shown) else ""
        return f"(outside the step function: {lead}{' > '.join(shown)})" if shown else \
            "(outside the step function: no span)"
    shown = chain[common:]
    lead = f"[{common} common] > " if common else ""
    return lead + (" > ".join(shown) if shown else "(nothing more)")


def print_report(result, top, minimum_share, out):
    alignment = result["alignment"]
    out.write(f"== python spans: torch {alignment['torch_ops']} aten ops, tprof {alignment['tprof_ops']}, "
              f"matched {alignment['matched_ops']} ({share(alignment['matched_ops'], alignment['torch_ops']):.1%} "
              f"of torch's)")
    for pair in alignment["thread_pairs"]:
        out.write(f"; thread {pair['torch_thread']} <-> {pair['tprof_thread']}: {pair['matched_ops']}")
    if alignment["unpaired_torch_threads"]:
        out.write(f"; unpaired torch threads {alignment['unpaired_torch_threads']}")
    if alignment["unpaired_tprof_threads"]:
        out.write(f"; unpaired tprof threads {alignment['unpaired_tprof_threads']}")
    out.write("\n")
    outside = result["outside_step"]
    out.write(f"  python_function spans: torch {result['spans']['torch']}, tprof {result['spans']['tprof']}; "
              f"'{result['step_function']}' spans: torch {result['step_spans']['torch']}, "
              f"tprof {result['step_spans']['tprof']}\n")
    out.write(f"  ops outside any {result['step_function']} span: torch {outside['torch_ops_outside']}, "
              f"tprof {outside['tprof_ops_outside']}; matched ops outside on both sides (not compared) "
              f"{outside['matched_both_outside']}, on torch's only {outside['matched_torch_only_outside']}, "
              f"on tprof's only {outside['matched_tprof_only_outside']}\n")
    for side in ("torch", "tprof"):
        prefixes = result["prefixes"][side]
        if prefixes:
            listed = ", ".join(f"'{prefix}' ({count} names)" for prefix, count in
                               sorted(prefixes.items(), key=lambda item: -item[1]))
            out.write(f"  path prefixes stripped from {side}'s names: {listed}\n")
    dropped = result["builtins_dropped"]
    out.write(f"  built-in (C function) spans left out of the chains: torch {dropped['torch']}, "
              f"tprof {dropped['tprof']}\n")
    merged = result["merged_tprof_spans"]
    out.write(f"  tprof spans standing for several torch spans (merged calls): {merged['spans']}, "
              f"covering {merged['torch_spans_covered']} torch spans")
    if merged["by_name"]:
        out.write(" (" + ", ".join(f"{name}: {count}" for name, count in list(merged["by_name"].items())[:5]) + ")")
    out.write(f"; torch spans split over several tprof spans: {result['split_torch_spans']}\n\n")

    rows = [("compared", result["compared"]), ("chains equal", result["equal"])]
    rows += [(f"  differ: {kind}", count) for kind, count in result["classes"].items()]
    rows += [("equal ignoring lines", result["equal_ignoring_lines"]),
             ("differing, own Call stack agrees", result["differing_with_agreeing_call_stack"])]
    width = max(len(label) for label, _ in rows)
    out.write(f"  {'ops':<{width}}  {'count':>7}  {'share':>7}\n")
    for label, count in rows:
        out.write(f"  {label:<{width}}  {count:>7}  {share(count, result['compared']):>7.1%}\n")

    pairs = result["differing_pairs"]
    out.write(f"\n{result['differing_pair_count']} differing chain pairs")
    out.write(f", top {min(top, len(pairs))} (ops, class, first op; frames below the common ones):\n"
              if pairs else "\n")
    for item in pairs[:top]:
        torch_chain, tprof_chain = item["torch"], item["tprof"]
        common = 0
        if torch_chain is not None and tprof_chain is not None:
            while common < min(len(torch_chain), len(tprof_chain)) and torch_chain[common] == tprof_chain[common]:
                common += 1
        agrees = "; tprof's Call stack of the op agrees" if item["tprof_call_stack_agrees"] else ""
        out.write(f"  {item['count']:>5}  {item['class']}  {item['first_op']}{agrees}\n")
        out.write(f"         torch: {chain_text(torch_chain, common, item['torch_full'])}\n")
        out.write(f"         tprof: {chain_text(tprof_chain, common, item['tprof_full'])}\n")
    out.write(f"\nchains equal {result['equal']}/{result['compared']} ({result['share']:.1%}, "
              f"minimum {minimum_share:.0%}); ignoring line numbers {result['share_ignoring_lines']:.1%}\n")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--torch-trace", required=True, metavar="FILE",
                        help="torch.profiler's Chrome trace (with_stack=True, with_modules=True), plain or .gz")
    parser.add_argument("--tprof-trace", required=True, metavar="FILE", help="tprof's Chrome trace, plain or .gz")
    parser.add_argument("--step-function", default="training_step", metavar="NAME",
                        help="chains are cut at their outermost span named '...: NAME' (default training_step)")
    parser.add_argument("--min-share", type=float, default=0.99, metavar="SHARE",
                        help="fail when chains equal/compared is below SHARE (default 0.99)")
    parser.add_argument("--strip-prefix", action="append", default=[], metavar="PREFIX",
                        help="also strip PREFIX from the paths of both sides' names (repeatable)")
    parser.add_argument("--keep-builtins", action="store_true",
                        help="keep torch's '<built-in ...>' (C function) spans in the chains")
    parser.add_argument("--slack-us", type=float, default=0.001, metavar="US",
                        help="a span encloses an op that starts or ends up to US microseconds outside it "
                             "(default 0.001: tprof writes an op's end with sub-ns digits, a span's at the ns)")
    parser.add_argument("--top", type=int, default=10, metavar="N", help="differing chain pairs shown (default 10)")
    parser.add_argument("--summary-out", metavar="FILE", help="write the figures as JSON to FILE")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        torch_trace = load_trace(args.torch_trace, "--torch-trace")
        tprof_trace = load_trace(args.tprof_trace, "--tprof-trace")
    except BadInput as error:
        sys.stderr.write(f"compare_python_spans: error: {error}\n")
        return 2
    result = compare(torch_trace, tprof_trace, args.step_function, args.keep_builtins, args.strip_prefix,
                     decimal.Decimal(str(args.slack_us)))
    print_report(result, args.top, args.min_share, sys.stdout)

    failures = []
    if result["compared"] == 0:
        failures.append(f"no op compared (no matched op inside a '{args.step_function}' span)")
    elif result["share"] < args.min_share:
        failures.append(f"chains equal {result['share']:.1%} < {args.min_share:.0%}")
    summary = {"inputs": {"torch_trace": args.torch_trace, "tprof_trace": args.tprof_trace},
               "min_share": args.min_share, "slack_us": args.slack_us, "result": result, "failures": failures, "passed": not failures}
    if args.summary_out:
        try:
            with open(args.summary_out, "w") as out:
                json.dump(summary, out, indent=1)
                out.write("\n")
        except OSError as error:
            sys.stderr.write(f"compare_python_spans: error: --summary-out {args.summary_out}: "
                             f"{error.strerror or error}\n")
            return 2
    print("FAIL: " + "; ".join(failures) if failures else "PASS")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
