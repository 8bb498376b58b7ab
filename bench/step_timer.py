#!/usr/bin/env python3
"""Times training steps of the e2e workload on command, for bench/overhead.py.

Prints "READY <pid>", then reads commands from stdin, one per line:
  run N       run N steps, print "STEP_US <mean microseconds per step>"
  torch N     the same under torch's profiler (legacy, names only, as tprof records today)
  torchfull N the same with record_shapes=True and with_stack=True
  torchmem N  the same with profile_memory=True (names only)
  quit
With --allocations, a step is 100 allocations and frees of a 1 KiB tensor (torch.empty)
instead of a training step: what --memory's probes cost per event, with little else around.
With --compiled (torch 2.x), a step is one call of tests/workloads/compiled_function.py's
torch.compile'd function on 8 floats: two compiled regions, four ops (bench/compile_overhead.py);
with --aot-eager as well, compiled by backend "aot_eager", whose graphs call their ops through
torch.ops (the boxed dispatcher).
With --inductor (torch 2.x, inductor's toolchain), one call of tests/workloads/inductor_function.py's
function compiled by inductor on a 64x64 tensor: two compiled regions, three fused C++ kernels.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "workloads"))
import torch  # noqa: E402
import train_loop  # noqa: E402


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = train_loop.SmallConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn(train_loop.BATCH, train_loop.CHANNELS, train_loop.IMAGE_SIZE, train_loop.IMAGE_SIZE),
                torch.randint(0, train_loop.CLASSES, (train_loop.BATCH,))) for _ in range(train_loop.BATCH_COUNT)]
    step = train_loop.make_training_step(model, optimizer, batches)
    if "--compiled" in sys.argv[1:]:
        import compiled_function
        backend = "aot_eager" if "--aot-eager" in sys.argv[1:] else "eager"
        compiled = torch.compile(compiled_function.twice_sine_then_cosine, backend=backend)
        small = torch.randn(8)

        def step():
            compiled(small)
    elif "--inductor" in sys.argv[1:]:
        import inductor_function
        compiled = torch.compile(inductor_function.sine_product_then_cosine, backend="inductor")
        square = torch.randn(64, 64)

        def step():
            compiled(square)
    elif "--allocations" in sys.argv[1:]:
        def step():
            for _ in range(100):
                block = torch.empty(256)
                del block
    for _ in range(20):
        step()

    def timed(steps):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        return (time.perf_counter() - start) / steps * 1e6

    print(f"READY {os.getpid()}", flush=True)
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "quit":
            break
        steps = int(rest[0])
        if command == "run":
            mean = timed(steps)
        elif command in ("torch", "torchfull", "torchmem"):
            full = command == "torchfull"
            with torch.autograd.profiler.profile(use_kineto=False, record_shapes=full, with_stack=full,
                                                 profile_memory=command == "torchmem"):
                mean = timed(steps)
        else:
            raise SystemExit(f"unknown command {command!r}")
        print(f"STEP_US {mean:.3f}", flush=True)


if __name__ == "__main__":
    main()
