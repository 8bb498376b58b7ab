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

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_loop  # noqa: E402  (the protocol every workload follows)

REGION_PREFIX = "Torch-Compiled Region: "
CACHE_LOOKUP = "TorchDynamo Cache Lookup"


def twice_sine_then_cosine(x):
    y = torch.sin(x) + 1
    torch._dynamo.graph_break()  # breaks the graph
    return torch.cos(y) * 2


def make_step(backend, optimizer_step=False):
    compiled = torch.compile(twice_sine_then_cosine, backend=backend)
    small, larger, largest = torch.randn(8), torch.randn(16), torch.randn(32)
    needs_grad = torch.randn(8, requires_grad=True)
    optimizer = torch.optim.SGD([needs_grad], lr=0.01) if optimizer_step else None

    def step():
        compiled(small)  # compiles
        compiled(needs_grad).sum().backward()  # recompiles: requires_grad
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


def main():
    ours = argparse.ArgumentParser(add_help=False)
    ours.add_argument("--compile-reference-out", metavar="FILE")
    ours.add_argument("--backend", choices=("eager", "aot_eager"), default="eager")
    ours.add_argument("--optimizer-step", action="store_true")
    own, sys.argv[1:] = ours.parse_known_args()
    args = train_loop.parse_args(__doc__)
    train_loop.prepare(args)
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
