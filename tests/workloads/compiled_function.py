"""A torch.compile'd function (backend "eager") with a graph break and two recompiles, for the
e2e tests of tprof's compiled regions (tests/e2e/test_compile_e2e.cpp), on torch 2.x.

Each step calls the compiled function four times: on 8 floats, on 8 that require grad (then
backward), on 16 and on 32. The first step compiles frame 0 (`twice_sine_then_cosine`) and
frame 1 (the resume function after its graph break) three times each: 0/0 and 1/0 at the
line marked "compiles", 0/1 and 1/1 (a guard on requires_grad) at "recompiles: requires_grad",
0/2 and 1/2 (dynamic shapes) at "recompiles: shape"; the call on 32 floats reuses 0/2 and 1/2.
Frame 1 is the function dynamo resumes after the graph break, at the line marked "breaks the
graph".
The warm-up steps compile; the measured steps only call.

--backend aot_eager compiles through AOTAutograd instead: its graphs, forward and backward, call
every op as torch.ops.aten.<op>.<overload>, through the boxed dispatcher.

--dynamo-profiler-out FILE runs the measured steps, tprof attached as usual, under dynamo's own
profiler (torch._dynamo.profiler: its Profiler, and its fx_insert_profiling backend, which wraps
every graph call in a TORCHDYNAMO range), and writes what it reports to FILE (dynamo_profiler_report).
In this mode the shapes are static (dynamic=False), so each step calls every graph the warm-up
compiled: 4 per frame. The profiler counts the graphs its backend compiled, tprof the graphs
called while it records. There is no backward either, because the profiler counts each autograd
node's range as one op where tprof counts the ATen ops inside it; the step's eager op is the
`.sum()` of the call on the input that requires grad.

--optimizer-step ends each step with an SGD step on the input that requires grad, so that
Optimizer.step marks the steps (tprof's --max-overhead windows need it).

train_loop.py's protocol and options, and --compile-reference-out FILE: the measured steps
under torch's own profiler (CPU), writing {"regions": {"Torch-Compiled Region: F/N": calls,
"TorchDynamo Cache Lookup": calls}, "captured_ops": n, "total_ops": n, "torch": version} to FILE,
where the ops are the outermost ATen ops (no op encloses them) and the captured ones those
inside a compiled region, by torch's own event tree; and torch's Chrome trace of the same
steps to FILE.trace.json.
"""
import argparse
import collections
import json
import os
import sys
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_loop  # noqa: E402  (the protocol every workload follows)

REGION_PREFIX = "Torch-Compiled Region: "
CACHE_LOOKUP = "TorchDynamo Cache Lookup"
# The ranges torch 2.x's dynamo opens around a graph call (2.14 adds "Pregraph bytecode"); dynamo's
# profiler predates them.
DYNAMO_RANGES = (REGION_PREFIX, CACHE_LOOKUP, "Pregraph bytecode")


def twice_sine_then_cosine(x):
    y = torch.sin(x) + 1
    torch._dynamo.graph_break()  # breaks the graph
    return torch.cos(y) * 2


def make_step(backend, optimizer_step=False, backward=True, dynamic=None):
    compiled = torch.compile(twice_sine_then_cosine, backend=backend, dynamic=dynamic)
    small, larger, largest = torch.randn(8), torch.randn(16), torch.randn(32)
    needs_grad = torch.randn(8, requires_grad=True)
    optimizer = torch.optim.SGD([needs_grad], lr=0.01) if optimizer_step else None

    def step():
        compiled(small)  # compiles
        total = compiled(needs_grad).sum()  # recompiles: requires_grad
        if backward:
            total.backward()
        compiled(larger)  # recompiles: shape
        compiled(largest)
        if optimizer:
            optimizer.step()
            optimizer.zero_grad()
    return step


def is_op(event):
    return "::" in event.name and not event.name.startswith(("autograd::", "profiler::"))


def ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def compile_reference(run_steps, trace_path):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        run_steps()
    profiler.export_chrome_trace(trace_path)
    events = profiler.events()
    regions = collections.Counter(event.name for event in events
                                  if event.name.startswith(REGION_PREFIX) or event.name == CACHE_LOOKUP)
    outermost = [event for event in events if is_op(event) and not any(is_op(a) for a in ancestors(event))]
    captured = [event for event in outermost
                if any(a.name.startswith(REGION_PREFIX) for a in ancestors(event))]
    return {"regions": dict(regions), "captured_ops": len(captured), "total_ops": len(outermost),
            "torch": torch.__version__}


def dynamo_profiler_report(profiler):
    """What dynamo's Profiler reports: the line it prints, its figures, and the ops as its loop
    counts them on torch 2.x.

    Its loop counts an event as an op when the event starts after the previous op ended: the
    outermost events. Torch 2.x opens its own ranges (DYNAMO_RANGES) around each graph call,
    starting before the profiler's TORCHDYNAMO range, so that every op of a graph counts as nested
    in them: on 2.x it prints 0 captured ops. Its ops are counted again on the events without
    those ranges. Its total also drops one op per TORCHDYNAMO range (the torch.zeros(1) that
    record_function ran when it was written) and one for the profiler's setup: torch 2.x records
    neither, so the 2.x total adds them back.
    """
    from torch._dynamo.profiler import Profiler
    graphs_compiled = Profiler.unique_graphs  # results() resets it
    printed = profiler.results()
    own_events = [event for event in profiler.prof.events() if not event.name.startswith(DYNAMO_RANGES)]
    Profiler.unique_graphs = graphs_compiled
    profile, profiler.prof = profiler.prof, types.SimpleNamespace(events=lambda: own_events)
    on_2x = profiler.results()
    profiler.prof = profile
    return {"printed": str(printed), "graphs": printed.unique_graphs, "graph_calls": printed.captured.graphs,
            "captured_ops": on_2x.captured.operators,
            "total_ops": on_2x.total.operators + on_2x.captured.graphs + 1,
            "captured_time_share": on_2x.percent().microseconds, "torch": torch.__version__}


def run_under_dynamo_profiler(args, report_path):
    from torch._dynamo.profiler import Profiler, fx_insert_profiling
    step = make_step(fx_insert_profiling, backward=False, dynamic=False)
    profiler = Profiler()
    status = train_loop.run_protocol(args, step, around_measured_steps=lambda: profiler.prof)
    with open(report_path, "w") as out:
        json.dump(dynamo_profiler_report(profiler), out)
    return status


def main():
    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--compile-reference-out", metavar="FILE")
    ours.add_argument("--backend", choices=("eager", "aot_eager"), default="eager")
    ours.add_argument("--optimizer-step", action="store_true")
    ours.add_argument("--dynamo-profiler-out", metavar="FILE")
    own, sys.argv[1:] = ours.parse_known_args()
    args = train_loop.parse_args(__doc__)
    train_loop.prepare(args)
    if own.dynamo_profiler_out:
        return run_under_dynamo_profiler(args, own.dynamo_profiler_out)
    step = make_step(own.backend, own.optimizer_step)
    if not own.compile_reference_out:
        return train_loop.run_protocol(args, step)
    for _ in range(args.warmup):
        step()
    reference = compile_reference(lambda: [step() for _ in range(args.steps)],
                                  own.compile_reference_out + ".trace.json")
    with open(own.compile_reference_out, "w") as out:
        json.dump(reference, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
