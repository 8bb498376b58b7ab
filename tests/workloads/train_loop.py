#!/usr/bin/env python3
"""Deterministic CPU training loop: the target process of tprof's end-to-end tests.

A test attaches tprof while the loop is parked, then releases exactly --steps steps, so the
op stream tprof records can be compared with torch's own profiler (--reference-out) running
the same steps. Runs on torch 1.13 (Python 3.11) and torch 2.6 (Python 3.13).
"""

import argparse
import contextlib
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

IMAGE_SIZE = 16
CHANNELS = 3
CLASSES = 10
BATCH = 8
# A handful of fixed batches, cycled: data generation stays out of the measured steps.
BATCH_COUNT = 4


class SmallConvNet(nn.Module):
    """Covers the op families the tests care about: conv, both norms, both activations,
    pooling, flatten and linear layers."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(CHANNELS, 8, kernel_size=3, padding=1)
        self.batch_norm = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.hidden = nn.Linear(8 * (IMAGE_SIZE // 2) ** 2, 32)
        self.layer_norm = nn.LayerNorm(32)
        self.head = nn.Linear(32, CLASSES)

    def forward(self, images):
        features = self.pool(F.relu(self.batch_norm(self.conv(images))))
        hidden = F.gelu(self.layer_norm(self.hidden(torch.flatten(features, 1))))
        return self.head(hidden)


def parse_args(description=__doc__):
    """The options every workload of the e2e tests takes (broad_model.py uses these too)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--steps", type=int, required=True, help="measured training steps")
    parser.add_argument("--warmup", type=int, default=3,
                        help="steps run before READY, so lazy initialisation is not measured")
    parser.add_argument("--trigger", choices=("fifo", "stdin", "none"), default="stdin",
                        help="what releases the measured steps and, after DONE, the exit")
    parser.add_argument("--fifo", help="FIFO path for --trigger fifo (created if missing)")
    parser.add_argument("--reference-out", metavar="FILE",
                        help="run the steps under torch's profiler, write the aten:: op names "
                             "to FILE as JSON and exit without waiting")
    parser.add_argument("--execution-trace-out", metavar="FILE",
                        help="run the steps under torch.profiler.ExecutionTraceObserver (torch 2.x), "
                             "write its Execution Trace to FILE and exit without waiting")
    parser.add_argument("--kineto-trace-out", metavar="FILE",
                        help="run the steps under torch.profiler.profile (CPU, record_shapes=True) and "
                             "export its Kineto Chrome trace to FILE, then exit without waiting; with "
                             "--execution-trace-out, the same run also records torch's Execution Trace "
                             "(the profiler's execution_trace_observer) to that FILE (torch 2.x)")
    parser.add_argument("--memory-reference-out", metavar="FILE",
                        help="run the steps under torch's profiler with profile_memory=True (legacy on "
                             "torch 1.x, Kineto on 2.x), write every [memory] event's bytes, their peak "
                             "and each op's CPU Mem and Self CPU Mem to FILE as JSON and exit without "
                             "waiting")
    parser.add_argument("--memory-timeline-reference-out", metavar="FILE",
                        help="run the steps under torch.profiler.profile (CPU, profile_memory, "
                             "record_shapes, with_stack: what export_memory_timeline needs) and write "
                             "its CPU memory timeline to FILE (.json: [times, sizes by category]), then "
                             "exit without waiting (torch 2.x; 2.6 segfaults with with_stack)")
    parser.add_argument("--with-stack", action="store_true",
                        help="with --kineto-trace-out, also pass with_stack=True and with_modules=True "
                             "to torch.profiler.profile (off by default: Debian's torch 2.6 segfaults "
                             "in its Python tracer; torch 2.14 supports it)")
    parser.add_argument("--annotate-steps", action="store_true",
                        help='wrap each measured step k in record_function("## LOOP k ##"), as '
                             "torch's test_execution_trace.py does")
    parser.add_argument("--model-sizes-out", metavar="FILE",
                        help="after the warmup, write the bytes of the model's parameters and of its "
                             "optimizer's state to FILE as JSON (for --memory-timeline's categories)")
    parser.add_argument("--leak", action="store_true",
                        help="plant a leak: every step keeps its first convolution's activation in a list "
                             "(the line marked 'planted leak'), for --memory's leak report")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op threads; the default 1 keeps every op on the main thread, "
                             "where torch's profiler sees it too")
    args = parser.parse_args()
    if args.trigger == "fifo" and not args.fifo:
        parser.error("--trigger fifo needs --fifo PATH")
    return args


def wait_for_trigger(args):
    """Blocks until one line (or EOF) arrives on the trigger channel."""
    if args.trigger == "stdin":
        sys.stdin.readline()
    elif args.trigger == "fifo":
        # Opening a FIFO for reading blocks until a writer opens it; each wait needs its own
        # writer, so the second wait (after DONE) is a separate release.
        with open(args.fifo, "r") as fifo:
            fifo.readline()


def make_training_step(model, optimizer, batches, leak=False):
    position = [0]
    kept = []

    def training_step():
        images, labels = batches[position[0] % len(batches)]
        position[0] += 1
        # Explicit: the default changed between torch 1.13 (False) and 2.x (True).
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        if leak:
            kept.append(model.conv(images))  # planted leak
        # Reading the loss back, as real loops do for logging, also exercises aten::item.
        return loss.item()

    return training_step


def profiled_events(run_steps):
    """Runs the steps under torch's own profiler and returns, for every aten:: event in start
    order, its name, its input shapes, where recorded its Python stack (innermost first,
    torch's "file(line): function" strings) and whether the autograd engine ran it; and the
    names of the autograd engine's own events. The legacy (non-Kineto) profiler is used because it
    exists on both torch 1.13 and 2.6 and needs no Kineto build. Python stacks are recorded on
    torch 1.x only: Debian's torch 2.6 (Python 3.13) segfaults in its Python tracer as soon as
    an nn.Module runs under with_stack=True, with or without Kineto."""
    record_python_stacks = int(torch.__version__.split(".")[0]) < 2
    with torch.autograd.profiler.profile(use_kineto=False, record_shapes=True,
                                         with_stack=record_python_stacks) as profiler:
        run_steps()
    events = sorted(profiler.function_events, key=lambda event: event.time_range.start)
    aten = [event for event in events if event.name.startswith("aten::")]
    stacks = [list(event.stack) for event in aten] if record_python_stacks else None
    return {"ops": [event.name for event in aten],
            "shapes": [event.input_shapes for event in aten],
            "stacks": stacks,
            "in_backward": [run_by_autograd_engine(event) for event in aten],
            "autograd": [event.name for event in autograd_events(events)],
            "annotations": {event.name: count_aten_beneath(event) for event in events
                            if event.name.startswith("## ")},
            "fwdbwd": forward_backward_pairs(events)}


def forward_backward_pairs(events):
    """[forward op, backward node] name pairs linked by sequence number, as Kineto links them:
    among the aten:: ops with the node's sequence number, the one that started last."""
    backward = autograd_events(events)
    backward_ids = {id(event) for event in backward}
    last_forward = {}
    for event in events:
        if event.name.startswith("aten::") and event.sequence_nr >= 0 and id(event) not in backward_ids:
            last_forward[event.sequence_nr] = event.name
    return [[last_forward[event.sequence_nr], event.name] for event in backward
            if not event.name.startswith(EVALUATE_FUNCTION) and event.sequence_nr in last_forward]


def count_aten_beneath(event):
    """How many aten:: events torch nests beneath `event`, at any depth."""
    return sum((child.name.startswith("aten::")) + count_aten_beneath(child) for child in event.cpu_children)


EVALUATE_FUNCTION = "autograd::engine::evaluate_function: "


def autograd_events(events):
    """The autograd engine's ranges: evaluate_function and the nodes it runs, known by name (the
    legacy profiler's cpu_parent links are unreliable at its microsecond resolution)."""
    node_names = {event.name[len(EVALUATE_FUNCTION):] for event in events
                  if event.name.startswith(EVALUATE_FUNCTION)}
    return [event for event in events
            if event.name.startswith(EVALUATE_FUNCTION) or event.name in node_names]


def profiled_memory(run_steps):
    """torch's own profile_memory=True over the steps: every memory event's bytes (negative for
    a free) in time order, the peak of their running total, and per op name its CPU Mem and Self
    CPU Mem summed over its calls, and how many calls (key_averages). On torch 1.x the legacy
    profiler, whose raw records hold every memory event (its parsed events keep only those
    outside every range); on 2.x Kineto, whose exported trace holds them as [memory] instants."""
    if int(torch.__version__.split(".")[0]) < 2:
        import torch.autograd.profiler_legacy as legacy
        captured = []
        disable = legacy._disable_profiler_legacy

        def keep_records():
            records = disable()
            captured.append(records)
            return records

        legacy._disable_profiler_legacy = keep_records
        try:
            with legacy.profile(profile_memory=True) as profiler:
                run_steps()
        finally:
            legacy._disable_profiler_legacy = disable
        records = [record for thread in captured[0] for record in thread if record.kind() == "memory_alloc"]
        records.sort(key=lambda record: record.start_us())
        events = [record.cpu_memory_usage() for record in records]
        averages = profiler.function_events.key_averages()
        exact_averages = None
    else:
        import tempfile
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
            run_steps()
        with tempfile.NamedTemporaryFile(suffix=".json") as trace:
            profiler.export_chrome_trace(trace.name)
            exported = json.load(open(trace.name))
        memory = sorted((event for event in exported["traceEvents"] if event.get("name") == "[memory]"
                         and event["args"].get("Device Type", 0) == 0), key=lambda event: event["ts"])
        events = [event["args"]["Bytes"] for event in memory]
        averages = profiler.key_averages()
        exact_averages = averages_in_exact_nanoseconds(profiler.profiler)
    total = peak = 0
    for change in events:
        total += change
        peak = max(peak, total)
    reference = {"memory_events": events, "peak": peak, "ops": per_op_memory(averages)}
    if exact_averages is not None:
        reference["ops_exact_ns"] = per_op_memory(exact_averages)
    return reference


def per_op_memory(averages):
    return {event.key: [event.cpu_memory_usage, event.self_cpu_memory_usage, event.count] for event in averages}


class _ShiftedClock:
    """A Kineto event or result whose nanosecond times count from `base`: small enough that a float
    holds them exactly."""

    def __init__(self, wrapped, base):
        self._wrapped, self._base = wrapped, base

    def __getattr__(self, name):
        return getattr(self._wrapped, name)

    def start_ns(self):
        return self._wrapped.start_ns() - self._base

    def end_ns(self):
        return self._wrapped.end_ns() - self._base

    def trace_start_ns(self):
        return self._wrapped.trace_start_ns() - self._base

    def events(self):
        return [_ShiftedClock(event, self._base) for event in self._wrapped.events()]


def averages_in_exact_nanoseconds(autograd_profiler):
    """torch's own per-op memory attribution (its _parse_kineto_results, EventList and
    key_averages) over the same Kineto result, with every time counted from the trace's start.
    Where torch passes an op's bounds to MemRecordsAcc.in_interval as float microseconds (torch
    2.6: `start_ns() / 1000`, then `* 1000`), a float holds Unix nanoseconds only to ~250 ns, so
    memory events that close to an op's edge fall in or out of it from run to run; torch 2.14
    passes integer nanoseconds. None where torch already does (nothing to correct)."""
    import inspect
    from torch.autograd.profiler_util import EventList, MemRecordsAcc
    if "start_us" not in inspect.signature(MemRecordsAcc.in_interval).parameters:
        return None
    result = autograd_profiler.kineto_results
    shifted = _ShiftedClock(result, result.trace_start_ns())
    events = EventList(autograd_profiler._parse_kineto_results(shifted), use_device=autograd_profiler.use_device,
                       profile_memory=True, with_flops=autograd_profiler.with_flops)
    events._build_tree()
    return events.key_averages()


def write_execution_trace(run_steps, path):
    """torch's own Execution Trace of the steps: the reference for tprof's ET."""
    observer = torch.profiler.ExecutionTraceObserver().register_callback(path)
    observer.start()
    run_steps()
    observer.stop()
    observer.unregister_callback()


def write_kineto_trace(run_steps, path, execution_trace_path=None, with_stack=False):
    """torch.profiler's own Kineto trace of the steps, and with execution_trace_path its
    Execution Trace of the same run: the reference for tprof's input values. with_stack (and
    with_modules) only on request: Debian's torch 2.6 segfaults in its Python tracer (see
    profiled_events). torch 1.13's profile() takes no execution_trace_observer: it is passed
    only when asked for."""
    from torch.profiler import ProfilerActivity, profile
    options = {"with_stack": True, "with_modules": True} if with_stack else {}
    if execution_trace_path:
        options["execution_trace_observer"] = \
            torch.profiler.ExecutionTraceObserver().register_callback(execution_trace_path)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, **options) as profiler:
        run_steps()
    profiler.export_chrome_trace(path)


def run_by_autograd_engine(event):
    """Whether the autograd engine ran this op (it lies inside an evaluate_function range).
    torch gives such backward ops the Python stack of the forward call, not the one that was
    live (loss.backward()), so stack comparisons leave them out."""
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("autograd::engine::evaluate_function"):
            return True
        parent = parent.cpu_parent
    return False


def prepare(args):
    """Seeds torch and sets its threads, before the workload builds its model and data."""
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    if args.trigger == "fifo" and not os.path.exists(args.fifo):
        os.mkfifo(args.fifo)


def tensor_bytes(tensors):
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)


def write_model_sizes(path, model, optimizer):
    """The bytes of the model's parameters and of the optimizer's state tensors (momentum
    buffers), as the script itself counts them."""
    state = [value for per_parameter in optimizer.state.values() for value in per_parameter.values()
             if torch.is_tensor(value)]
    with open(path, "w") as out:
        json.dump({"parameters": tensor_bytes(model.parameters()), "optimizer_state": tensor_bytes(state)}, out)


def run_protocol(args, training_step, model=None, optimizer=None, around_measured_steps=contextlib.nullcontext):
    """The protocol every workload follows: --warmup steps, then either torch's own profiler over
    --steps steps (--reference-out, --kineto-trace-out, --execution-trace-out) or READY <pid>,
    the trigger, the steps (inside the context that around_measured_steps() makes), DONE and the
    trigger again."""
    for _ in range(args.warmup):
        training_step()
    if getattr(args, "model_sizes_out", None):
        write_model_sizes(args.model_sizes_out, model, optimizer)

    def run_measured_steps():
        for step in range(args.steps):
            if args.annotate_steps:
                with torch.autograd.profiler.record_function(f"## LOOP {step} ##"):
                    training_step()
            else:
                training_step()

    if args.reference_out:
        reference = profiled_events(run_measured_steps)
        reference["torch"] = torch.__version__
        with open(args.reference_out, "w") as out:
            json.dump(reference, out)
        return 0
    if args.memory_reference_out:
        reference = profiled_memory(run_measured_steps)
        reference["torch"] = torch.__version__
        with open(args.memory_reference_out, "w") as out:
            json.dump(reference, out)
        return 0
    if getattr(args, "memory_timeline_reference_out", None):
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                     with_stack=True) as profiler:
            run_measured_steps()
        profiler.export_memory_timeline(args.memory_timeline_reference_out, device="cpu")
        return 0
    if args.kineto_trace_out:
        write_kineto_trace(run_measured_steps, args.kineto_trace_out, args.execution_trace_out,
                           args.with_stack)
        return 0
    if args.execution_trace_out:
        write_execution_trace(run_measured_steps, args.execution_trace_out)
        return 0

    print(f"READY {os.getpid()}", flush=True)
    wait_for_trigger(args)
    with around_measured_steps():
        run_measured_steps()
    print("DONE", flush=True)
    wait_for_trigger(args)
    return 0


def main():
    args = parse_args()
    prepare(args)
    model = SmallConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn(BATCH, CHANNELS, IMAGE_SIZE, IMAGE_SIZE),
                torch.randint(0, CLASSES, (BATCH,))) for _ in range(BATCH_COUNT)]
    return run_protocol(args, make_training_step(model, optimizer, batches, args.leak), model, optimizer)


if __name__ == "__main__":
    sys.exit(main())
