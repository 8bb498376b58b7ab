"""A small CUDA training loop for tests/gpu/gpu_check.sh.

Warms up, prints READY <pid>, waits until --start-file exists, runs --steps steps, synchronizes
and prints DONE. --reference-out FILE instead records the same steps under torch.profiler (CPU
and CUDA activity) and writes its trace there. Either way the steps
run inside record_function("measured_steps"), so that a trace that holds more (tprof record's,
from the first op) can be compared on them alone.
"""
import argparse
import os
import sys
import time

import torch


def make_model():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 16 * 16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10),
    ).cuda()


def step(model, optimizer, inputs, targets):
    optimizer.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    optimizer.step()


def measured_steps(model, optimizer, inputs, targets, steps):
    with torch.profiler.record_function("measured_steps"):
        for _ in range(steps):
            step(model, optimizer, inputs, targets)
        torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--start-file", help="run the steps once this file exists")
    parser.add_argument("--reference-out", help="record the steps with torch.profiler; write its trace here")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")
    torch.manual_seed(0)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = torch.randn(32, 3, 32, 32, device="cuda")
    targets = torch.randint(0, 10, (32,), device="cuda")
    for _ in range(5):
        step(model, optimizer, inputs, targets)
    torch.cuda.synchronize()

    if args.reference_out:
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as profiler:
            measured_steps(model, optimizer, inputs, targets, args.steps)
        profiler.export_chrome_trace(args.reference_out)
        return

    print(f"READY {os.getpid()}", flush=True)
    while args.start_file and not os.path.exists(args.start_file):
        time.sleep(0.01)
    measured_steps(model, optimizer, inputs, targets, args.steps)
    print("DONE", flush=True)
    time.sleep(1.0)  # the library's watcher flushes CUPTI's buffers within 200 ms


if __name__ == "__main__":
    main()
