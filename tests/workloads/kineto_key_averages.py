"""torch.profiler's own view of a few training steps, for `tprof report`'s e2e test: records
--steps steps of train_loop.py's model with torch.profiler (CPU, record_shapes), exports the
Chrome trace to --trace, and writes key_averages() to --averages as JSON: one object per row
with name, count, self_cpu_time_total and cpu_time_total (us), flops (with_flops=True), and
input_shapes when --group-by-shape. With --legacy, torch 1.13's legacy profiler
(use_kineto=False) instead, whose export_chrome_trace writes a bare array of events."""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_loop  # noqa: E402  (the same model and step as the other e2e tests)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--trace", required=True)
    parser.add_argument("--averages", required=True)
    parser.add_argument("--group-by-shape", action="store_true")
    parser.add_argument("--legacy", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = train_loop.SmallConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn(train_loop.BATCH, train_loop.CHANNELS, train_loop.IMAGE_SIZE, train_loop.IMAGE_SIZE),
                torch.randint(0, train_loop.CLASSES, (train_loop.BATCH,))) for _ in range(train_loop.BATCH_COUNT)]
    step = train_loop.make_training_step(model, optimizer, batches)
    step()  # lazy initialisation outside the profile
    if args.legacy:
        profile = torch.autograd.profiler.profile(use_kineto=False, record_shapes=True)
    else:
        profile = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                         with_flops=True)
    with profile as profiler:
        for _ in range(args.steps):
            step()
    profiler.export_chrome_trace(args.trace)
    rows = []
    for row in profiler.key_averages(group_by_input_shape=args.group_by_shape):
        rows.append({"name": row.key, "count": row.count, "self_cpu_time_total": row.self_cpu_time_total,
                     "cpu_time_total": row.cpu_time_total, "flops": row.flops,
                     "input_shapes": str(row.input_shapes) if args.group_by_shape else ""})
    with open(args.averages, "w") as out:
        json.dump(rows, out)


if __name__ == "__main__":
    main()
