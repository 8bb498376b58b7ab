"""A function compiled by inductor for the CPU, for the e2e tests of tprof's inductor kernels
(tests/e2e/test_compile_e2e.cpp), on torch 2.x with inductor's toolchain
(scripts/make-inductor-root.sh).

Each step calls the compiled function on a 64x64 and on a 32x64 tensor. The function breaks
its graph once (at the line marked "breaks the graph"), and the second shape recompiles both
frames (dynamic shapes), so the warm-up compiles four graphs, each with its fused C++ kernels
(cpp_fused_*) in libraries of inductor's cache. The measured steps only call them.

train_loop.py's protocol and options, and --kernel-reference-out FILE: the measured steps
under torch's own profiler (CPU) with TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1, which makes
every kernel open a RecordFunction named graph_<id>_<kernel>; writes {"kernels": {kernel:
calls}, "torch": version} to FILE, with the graph_<id>_ prefix taken off, and torch's Chrome
trace of the same steps to FILE.trace.json. That setting changes the kernels' code, so it runs
with a cache directory of its own.
"""
import argparse
import collections
import json
import os
import re
import sys

ours = argparse.ArgumentParser(add_help=False)
ours.add_argument("--kernel-reference-out", metavar="FILE")
OWN, sys.argv[1:] = ours.parse_known_args()
if OWN.kernel_reference_out:
    # Read by inductor's config at import.
    os.environ["TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"] = "1"
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.path.dirname(OWN.kernel_reference_out),
                                                         "inductor-cache-profiled")

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_loop  # noqa: E402  (the protocol every workload follows)

PROFILED_KERNEL = re.compile(r"^graph_\d+_(cpp_fused_\w+)$")


def sine_product_then_cosine(x):
    y = torch.sin(x) * 2 + 1
    z = torch.relu(y @ y.t()).sum(dim=1)
    torch._dynamo.graph_break()  # breaks the graph
    return torch.cos(z).mean() + torch.exp(-z).sum()


def make_step():
    compiled = torch.compile(sine_product_then_cosine, backend="inductor")
    square, wide = torch.randn(64, 64), torch.randn(32, 64)

    def step():
        compiled(square)
        compiled(wide)  # recompiles: shape
    return step


def kernel_reference(run_steps, trace_path):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        run_steps()
    profiler.export_chrome_trace(trace_path)
    kernels = collections.Counter()
    for event in profiler.events():
        match = PROFILED_KERNEL.match(event.name)
        if match:
            kernels[match.group(1)] += 1
    return {"kernels": dict(kernels), "torch": torch.__version__}


def main():
    args = train_loop.parse_args(__doc__)
    train_loop.prepare(args)
    step = make_step()
    if not OWN.kernel_reference_out:
        return train_loop.run_protocol(args, step)
    for _ in range(args.warmup):
        step()
    reference = kernel_reference(lambda: [step() for _ in range(args.steps)], OWN.kernel_reference_out + ".trace.json")
    with open(OWN.kernel_reference_out, "w") as out:
        json.dump(reference, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
