#!/usr/bin/env python3
"""A training loop that runs until killed, for bench/overhead_budget.py. First it prints
"REFERENCE <json>": the names of the ranges torch's own profiler (legacy, use_kineto=False)
records in one step, with their counts; then "READY <pid>"; then every 0.25 s
"<CLOCK_MONOTONIC s> <steps done>", so that the steps' rate can be compared over stretches
with tprof attached and detached in the same process.

  small   - a tiny MLP on 8x32 inputs: about 170 ops a step, each a few us (probes dominate)
  compute - a conv net on 32x3x64x64 images: a few dozen ops a step, each milliseconds

Usage: budget_target.py small|compute
"""
import collections
import json
import os
import sys
import time

import torch


def small_loop():
    model = torch.nn.Sequential(*[layer for _ in range(4) for layer in (torch.nn.Linear(32, 32), torch.nn.ReLU())],
                                torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs, targets = torch.randn(8, 32), torch.randint(0, 4, (8,))
    return model, optimizer, inputs, targets


def compute_loop():
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                torch.nn.Flatten(), torch.nn.Linear(64 * 16 * 16, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs, targets = torch.randn(32, 3, 64, 64), torch.randint(0, 10, (32,))
    return model, optimizer, inputs, targets


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model, optimizer, inputs, targets = {"small": small_loop, "compute": compute_loop}[sys.argv[1]]()
    loss_function = torch.nn.CrossEntropyLoss()

    def train_step():
        optimizer.zero_grad()
        loss = loss_function(model(inputs), targets)
        loss.backward()
        optimizer.step()

    for _ in range(20):
        train_step()
    with torch.autograd.profiler.profile(use_kineto=False) as profile:
        train_step()
    names = collections.Counter(event.name for event in profile.function_events)
    print(f"REFERENCE {json.dumps(names)}", flush=True)
    print(f"READY {os.getpid()}", flush=True)
    steps = 0
    next_report = time.monotonic()
    while True:
        train_step()
        steps += 1
        now = time.monotonic()
        if now >= next_report:
            print(f"{now:.6f} {steps}", flush=True)
            next_report = now + 0.25


if __name__ == "__main__":
    main()
