#!/usr/bin/env python3
"""Targets that throw: the target-harm suite's processes (tests/e2e/test_target_harm_e2e.cpp).

Each scenario makes C++ exceptions cross torch's op or autograd frames the way production
code does, and counts what it saw, so that a test can tell that tracing changed nothing:

  caught-op-error    an op that throws inside at::_ops::topk::call, caught in Python
  nested-op-error    torch.cat fails beneath torch.hstack, so the exception crosses two ops
  boxed-op-error     torch.ops.aten.index_select.default throws: the exception crosses the boxed
                     dispatcher's invokeOperatorFromPython, which tprof probes for such calls; and
                     a JIT-only operator (torch.ops.prim.abs) passes there too
  backward-raises    a custom autograd.Function whose backward raises, caught around backward()
  python-raise       Python exceptions raised through C++ frames: a __torch_dispatch__ that
                     raises under at::_ops::mul::call, and a tensor hook that raises in backward
  dataloader-fork    a DataLoader with two forked workers feeds a model; an op error per batch
  threads            64 threads, each throwing and catching op errors
  compiled-op-error  (torch 2.x) a torch.compile'd graph whose index_select throws, unwinding
                     through the compiled region dynamo opens and tprof probes
  inductor-kernel-error (torch 2.x, inductor's toolchain) the same gather compiled by inductor:
                     its fused C++ kernel throws, through the probes tprof adds while it runs
  recompiled-op-error (torch 2.x) compiled-op-error, compiled anew at every step: the wait
                     counters torch starts around each compile, which tprof probes, run each step

Protocol as train_loop.py: READY <pid>, a line on stdin runs --steps steps (or, with
--until-stopped, steps until the next line), then COUNTS {json} and DONE; the next line or EOF
exits 0. --reference-out FILE runs the same steps under torch's own profiler instead and
writes {"ops": [aten:: names]} to FILE.
"""

import argparse
import json
import os
import sys
import threading

import torch
from torch.utils.data import DataLoader, Dataset

THREADS = 64


class Counts:
    def __init__(self):
        self.steps = 0
        self.caught = 0      # exceptions the scenario caught
        self.expected = 0    # exceptions it raised on purpose
        self.checksum = 0.0  # results of the ops that succeeded


def caught_op_error(counts):
    x = torch.zeros(2)
    counts.checksum += float((x + 1).sum())
    counts.expected += 1
    try:
        x.topk(3)  # k out of range: c10::Error inside at::_ops::topk::call
    except RuntimeError:
        counts.caught += 1


def nested_op_error(counts):
    left, right = torch.ones(2, 3), torch.ones(3, 3)
    counts.checksum += float(torch.hstack([left, left]).sum())
    counts.expected += 1
    try:
        torch.hstack([left, right])  # at::_ops::hstack::call -> at::_ops::cat::call throws
    except RuntimeError:
        counts.caught += 1


def boxed_op_error(counts):
    x, good, bad = torch.randn(4), torch.tensor([0, 3]), torch.tensor([0, 9])
    counts.checksum += float(torch.ops.aten.index_select.default(x, 0, good).sum())
    counts.checksum += torch.ops.prim.abs(-3)  # JIT-only: through the same function, no c10 name
    counts.expected += 1
    try:
        torch.ops.aten.index_select.default(x, 0, bad)  # index 9 of 4: c10::IndexError, boxed
    except (IndexError, RuntimeError):
        counts.caught += 1


class FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        raise ValueError("backward refuses")


def backward_raises(counts):
    weight = torch.ones(4, requires_grad=True)
    loss = FailingBackward.apply(weight * 3).sum()
    counts.expected += 1
    try:
        loss.backward()  # the error crosses PyNode::apply and Engine::evaluate_function
    except ValueError:
        counts.caught += 1
    good = (weight * weight).sum()
    good.backward()
    counts.checksum += float(weight.grad.sum())


class RefusingTensor(torch.Tensor):
    """Refuses aten.mul from inside the dispatcher: the Python error becomes a C++ exception
    (python_error) that unwinds at::_ops::mul::call."""

    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_subclass(cls, data)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.mul.Tensor:
            raise KeyError("mul refused")
        unwrapped = [arg.as_subclass(torch.Tensor) if isinstance(arg, RefusingTensor) else arg for arg in args]
        return func(*unwrapped, **(kwargs or {}))


def refusing_hook(grad):
    raise ArithmeticError("hook refuses")


def python_raise(counts):
    refusing = RefusingTensor(torch.ones(3))
    counts.expected += 1
    try:
        refusing * refusing
    except KeyError:
        counts.caught += 1
    weight = torch.ones(3, requires_grad=True)
    hooked = weight * 2
    hooked.register_hook(refusing_hook)
    counts.expected += 1
    try:
        hooked.sum().backward()
    except ArithmeticError:
        counts.caught += 1
    counts.checksum += float((weight + 1).sum())


class Squares(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, index):
        return torch.full((4,), float(index)), index % 2


def make_dataloader_fork():
    model = torch.nn.Linear(4, 2)
    # Workers fork from the attached process: probes must stay inert in them. Each step is one
    # whole epoch (two batches), so every step runs the same ops in this process.
    loader = DataLoader(Squares(), batch_size=8, num_workers=2, multiprocessing_context="fork",
                        persistent_workers=True)

    def step(counts):
        for features, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(features), labels)
            loss.backward()
            counts.checksum += float(labels.sum())
        caught_op_error(counts)

    return step


def make_compiled_gather(backend, recompile=False):
    """A torch.compile'd gather (torch 2.x) whose index is a value no guard or fake tensor sees, so
    the compiled code runs and its index check throws on the bad index. With `recompile`, dynamo
    forgets it before each step and compiles it again."""
    def gather(x, index):
        return torch.index_select(torch.sin(x) + 1, 0, index) * 2
    compiled = torch.compile(gather, backend=backend)
    x, good, bad = torch.randn(4), torch.tensor([0, 3]), torch.tensor([0, 9])

    def step(counts):
        if recompile:
            torch._dynamo.reset()
        counts.checksum += float(compiled(x, good).sum())
        counts.expected += 1
        try:
            compiled(x, bad)  # index 9 of 4
        except (IndexError, RuntimeError):
            counts.caught += 1

    return step


def make_compiled_op_error():
    """Backend "eager": c10::IndexError is thrown inside at::_ops::index_select::call and unwinds
    through the graph, its "Torch-Compiled Region" RecordFunction and dynamo's frame evaluator."""
    return make_compiled_gather("eager")


def make_recompiled_op_error():
    """compiled-op-error with a compile per step: torch starts its compile wait counters
    ("pytorch.wait_counter.dynamo_compile"...) from Python, through c10::monitor::WaitCounterHandle's
    constructor, start() and stop(), which tprof probes (the constructor at its entry and `ret`)."""
    return make_compiled_gather("eager", recompile=True)


def make_inductor_kernel_error():
    """Backend "inductor" (its C++ toolchain needed): the index check is inside the fused C++
    kernel (cpp_fused_add_index_select_mul_sin_0), whose TORCH_CHECK throws c10::Error through the
    kernel tprof probes while the target runs, and through the Python binding that turns it into
    a RuntimeError."""
    return make_compiled_gather("inductor")


def threads(counts):
    """64 threads, each throwing and catching; the per-thread counts are summed."""
    per_thread = [Counts() for _ in range(THREADS)]
    workers = [threading.Thread(target=caught_op_error, args=(mine,)) for mine in per_thread]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    for mine in per_thread:
        counts.caught += mine.caught
        counts.expected += mine.expected
        counts.checksum += mine.checksum


SCENARIOS = {
    "caught-op-error": lambda: caught_op_error,
    "nested-op-error": lambda: nested_op_error,
    "boxed-op-error": lambda: boxed_op_error,
    "backward-raises": lambda: backward_raises,
    "python-raise": lambda: python_raise,
    "dataloader-fork": make_dataloader_fork,
    "threads": lambda: threads,
    "compiled-op-error": make_compiled_op_error,
    "inductor-kernel-error": make_inductor_kernel_error,
    "recompiled-op-error": make_recompiled_op_error,
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    parser.add_argument("--steps", type=int, default=10, help="steps per run (ignored with --until-stopped)")
    parser.add_argument("--warmup", type=int, default=2, help="steps run before READY")
    parser.add_argument("--until-stopped", action="store_true",
                        help="after the first line on stdin, run steps until the next one")
    parser.add_argument("--reference-out", metavar="FILE",
                        help="run the steps under torch's profiler and write the aten:: op names to FILE")
    return parser.parse_args()


def reference_ops(run_steps):
    """torch's own profiler over the same steps: every aten:: op in start order. On torch 1.13
    the legacy profiler only sees the thread that enabled it, so a multi-threaded scenario's
    reference is one thread's work, which each of its threads repeats."""
    with torch.autograd.profiler.profile(use_kineto=False) as profiler:
        run_steps()
    events = sorted(profiler.function_events, key=lambda event: event.time_range.start)
    return [event.name for event in events if event.name.startswith("aten::")]


def counts_of(counts):
    return {"steps": counts.steps, "caught": counts.caught, "expected": counts.expected,
            "checksum": round(counts.checksum, 6)}


def run_until_line(step, counts):
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    while not stop.is_set():
        step(counts)
        counts.steps += 1


def main():
    args = parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    step = SCENARIOS[args.scenario]()
    warmup = Counts()
    for _ in range(args.warmup):
        step(warmup)

    def run_steps(step, counts):
        for _ in range(args.steps):
            step(counts)
            counts.steps += 1
        return counts

    if args.reference_out:
        # The counts of the same steps run untraced, then torch's profile of them.
        untraced = run_steps(step, Counts())
        profiled_step = caught_op_error if args.scenario == "threads" else step
        reference = {"ops": reference_ops(lambda: run_steps(profiled_step, Counts())),
                     "threads": THREADS if args.scenario == "threads" else 1,
                     "counts": counts_of(untraced), "torch": torch.__version__}
        with open(args.reference_out, "w") as out:
            json.dump(reference, out)
        return 0

    print(f"READY {os.getpid()}", flush=True)
    sys.stdin.readline()
    counts = Counts()
    if args.until_stopped:
        run_until_line(step, counts)
    else:
        run_steps(step, counts)
    print("COUNTS " + json.dumps(counts_of(counts)), flush=True)
    print("DONE", flush=True)
    sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
