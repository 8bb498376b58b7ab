"""torch.compile (inductor) on CUDA for tests/gpu/compiled_kernels_check.sh: a function with a
graph break (two graphs, a Triton kernel each) and a compiled MLP trained for --steps steps
(forward and backward graphs), all inside record_function("measured_steps") after a warm-up
that compiles everything. --reference-out FILE records the steps with torch.profiler (CPU and
CUDA) and writes its trace there instead."""
import argparse
import sys

import torch


def sine_then_cosine(x, y):
    a = torch.sin(x) + 1
    torch._dynamo.graph_break()
    return torch.cos(a) * y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--reference-out", help="record the steps with torch.profiler; write its trace here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.manual_seed(0)
    function = torch.compile(sine_then_cosine)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).cuda()
    compiled_model = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    inputs = torch.randn(32, 64, device="cuda")

    def step():
        function(x, y)
        optimizer.zero_grad()
        compiled_model(inputs).sum().backward()
        optimizer.step()

    def measured_steps():
        with torch.profiler.record_function("measured_steps"):
            for _ in range(args.steps):
                step()
            torch.cuda.synchronize()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    if args.reference_out:
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as profiler:
            measured_steps()
        profiler.export_chrome_trace(args.reference_out)
        return
    measured_steps()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
