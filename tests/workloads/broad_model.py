#!/usr/bin/env python3
"""Deterministic CPU training loop over the argument kinds real models pass to aten ops.

Same protocol and options as train_loop.py (READY <pid>, --trigger, --steps, --reference-out,
--execution-trace-out, --kineto-trace-out, ...): a test attaches tprof while the loop is parked,
then releases exactly --steps steps, each one call of training_step(). Where train_loop.py is a
plain conv net, each step here runs a transformer block (scaled_dot_product_attention with an
explicit and a default scale, nn.MultiheadAttention, layer norm, a GELU MLP under CPU bfloat16
autocast), an embedding, an LSTM, a channels_last convolution, ops on complex, int8, half and
bool tensors, a 9-dim tensor, non-contiguous views, optional arguments passed as None, Tensor
lists (cat, stack, index with None), gradient clipping and a foreach AdamW with weight decay.
Runs on torch 2.6 (Python 3.13) and torch 2.14 (Python 3.14), and on torch 1.13 (Python 3.11)
with its missing features replaced as noted. Imports nothing from the repository: it is copied
into chroot roots and run standalone.
"""

import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

TORCH_VERSION = tuple(int(part) for part in torch.__version__.split(".")[:2])

BATCH = 4
SEQUENCE = 8
DIM = 32
HEADS = 4
HEAD_DIM = DIM // HEADS
VOCAB = 64
LSTM_HIDDEN = 16
IMAGE_CHANNELS = 4
IMAGE_SIZE = 8
CONV_CHANNELS = 8
CLASSES = 10
# A handful of fixed batches, cycled: data generation stays out of the measured steps.
BATCH_COUNT = 4
# More than 8 dims: the sizes and strides no longer fit torch's inline small-vector storage.
NINE_DIMS = [2, 1, 2, 1, 2, 1, 2, 1, 2]
# Rows of the batch in a fixed shuffled order: x[ROW_ORDER, :] and x[:, ...] index calls.
ROW_ORDER = [2, 0, 3, 1]


def attention(query, key, value, scale=None, is_causal=False):
    """F.scaled_dot_product_attention; torch 1.13 lacks it (2.0) and its scale argument (2.1),
    so there the same maths runs as matmul and softmax."""
    if TORCH_VERSION >= (2, 1):
        return F.scaled_dot_product_attention(query, key, value, is_causal=is_causal, scale=scale)
    scores = query @ key.transpose(-2, -1) * (scale if scale is not None else 1.0 / math.sqrt(query.size(-1)))
    if is_causal:
        length = query.size(-2)
        mask = torch.ones(length, length, dtype=torch.bool).tril()
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    return torch.softmax(scores, dim=-1) @ value


class TransformerBlock(nn.Module):
    """Pre-norm block: hand-written multi-head attention through scaled_dot_product_attention
    (explicit float scale, then causal with scale=None), nn.MultiheadAttention, and a GELU MLP
    under bfloat16 autocast."""

    def __init__(self):
        super().__init__()
        self.attention_norm = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.projection = nn.Linear(DIM, DIM)
        self.mha_norm = nn.LayerNorm(DIM)
        self.mha = nn.MultiheadAttention(DIM, HEADS, dropout=0.0, batch_first=True)
        self.mlp_norm = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 2 * DIM)
        self.fc2 = nn.Linear(2 * DIM, DIM)

    def forward(self, x):
        batch, length, _ = x.shape
        # chunk gives non-contiguous views; view + transpose keep them non-contiguous.
        query, key, value = self.qkv(self.attention_norm(x)).chunk(3, dim=-1)
        query, key, value = (t.view(batch, length, HEADS, HEAD_DIM).transpose(1, 2)
                             for t in (query, key, value))
        scaled = attention(query, key, value, scale=1.0 / math.sqrt(HEAD_DIM))
        causal = attention(query, key, value, scale=None, is_causal=True)
        heads = (scaled + causal).transpose(1, 2).reshape(batch, length, DIM)
        x = x + self.projection(heads)
        normed = self.mha_norm(x)
        x = x + self.mha(normed, normed, normed, need_weights=False)[0]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            mlp = self.fc2(F.gelu(self.fc1(self.mlp_norm(x))))
        return x + mlp.float()


class BroadModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, DIM)
        self.block = TransformerBlock()
        self.lstm = nn.LSTM(DIM, LSTM_HIDDEN, num_layers=1)
        self.conv = nn.Conv2d(IMAGE_CHANNELS, CONV_CHANNELS, kernel_size=3, padding=1)
        self.conv.to(memory_format=torch.channels_last)
        self.head = nn.Linear(DIM + LSTM_HIDDEN + CONV_CHANNELS, CLASSES)

    def forward(self, tokens, images):
        x = self.block(self.embedding(tokens))                      # (B, S, DIM)
        # Sequence-first LSTM fed a transposed (non-contiguous) view.
        sequence_out, (hidden, _) = self.lstm(x.transpose(0, 1))
        # Channels-last convolution: the input is converted, the module was converted above.
        features = F.relu(self.conv(images.contiguous(memory_format=torch.channels_last)))
        # permute gives a non-contiguous (B, H, W, C) view; strided slices of it feed mean.
        pooled_image = features.permute(0, 2, 3, 1)[:, ::2, ::2, :].mean(dim=(1, 2))
        # Max and mean over the sequence, stacked from a list.
        pooled_text = torch.stack([x.mean(dim=1), x.amax(dim=1)]).mean(dim=0)
        pooled_text = F.layer_norm(pooled_text, (DIM,), weight=None, bias=None)
        lstm_last = hidden[0] + sequence_out[-1] * 0.5
        joined = torch.cat([pooled_text, lstm_last, pooled_image], dim=1)
        return torch.clamp(self.head(joined), min=None, max=7)


def side_metrics(tokens, images, logits):
    """Ops over the dtypes and argument kinds the model itself does not pass: complex, int8,
    half and bool tensors, a 9-dim tensor, None optional arguments. Returns a float tensor."""
    flat = images.flatten(1)[:, :16]                                # (B, 16) view
    signal = torch.complex(flat, flat.flip(1))
    spectrum = (signal * signal.conj()).abs() + signal.abs()        # complex mul, abs
    small = tokens.to(torch.int8)
    shifted = small + small[:, ::2].repeat(1, 2)                    # int8 add, stepped slice
    half = flat.half()
    half_sum = half + half.t().contiguous().t()                     # half add
    positive = images > 0
    mask = torch.logical_and(positive, images < 1)                  # bool ops
    kept = torch.where(mask, images, torch.zeros_like(images))
    big = torch.zeros(2, 1, 2, 1, 2, 1, 2, 1, 2) + 1                # 9-dim tensor
    empty = torch.empty(NINE_DIMS).fill_(0.5)                       # 9-dim size list
    big_total = big.sum() + empty.sum(dim=[0, 2, 4]).sum()
    clamped_high = torch.clamp(logits.detach(), min=None, max=7)
    clamped_low = torch.clamp(logits.detach(), min=-1)
    total = spectrum.sum(dim=None) + shifted.float().sum() + half_sum.float().sum()
    total = total + kept.sum(dim=None) + mask.sum() + big_total
    total = total + (clamped_high - clamped_low).sum(dim=None) + spectrum.mean(dim=None)
    # Rows and columns indexed by a tensor: aten::index with [idx] and [None, idx].
    rows = torch.tensor(ROW_ORDER)
    total = total + logits.detach()[rows, :].sum() + logits.detach()[:, rows].sum()
    return total


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
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
    parser.add_argument("--with-stack", action="store_true",
                        help="with --kineto-trace-out, also pass with_stack=True and with_modules=True "
                             "to torch.profiler.profile (off by default: Debian's torch 2.6 segfaults "
                             "in its Python tracer; torch 2.14 supports it)")
    parser.add_argument("--annotate-steps", action="store_true",
                        help='wrap each measured step k in record_function("## LOOP k ##"), as '
                             "torch's test_execution_trace.py does")
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


def make_optimizer(model):
    """AdamW with weight decay over the foreach (multi-tensor) kernels."""
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=True)


def make_training_step(model, optimizer, batches):
    position = [0]
    parameters = [parameter for parameter in model.parameters()]

    def training_step():
        tokens, images, labels = batches[position[0] % len(batches)]
        position[0] += 1
        optimizer.zero_grad(set_to_none=True)
        logits = model(tokens, images)
        loss = F.cross_entropy(logits, labels)
        metric = side_metrics(tokens, images, logits)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        optimizer.step()
        # Reading the values back, as real loops do for logging, also exercises aten::item.
        return loss.item(), metric.item()

    return training_step


def profiled_events(run_steps):
    """Runs the steps under torch's own profiler and returns, for every aten:: event in start
    order, its name, its input shapes, where recorded its Python stack (innermost first,
    torch's "file(line): function" strings) and whether the autograd engine ran it; and the
    names of the autograd engine's own events. The legacy (non-Kineto) profiler is used because it
    exists on torch 1.13 and 2.x and needs no Kineto build. Python stacks are recorded on
    torch 1.x only: Debian's torch 2.6 (Python 3.13) segfaults in its Python tracer as soon as
    an nn.Module runs under with_stack=True, with or without Kineto."""
    record_python_stacks = TORCH_VERSION < (2, 0)
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
    profiled_events)."""
    from torch.profiler import ProfilerActivity, profile
    options = {"with_stack": True, "with_modules": True} if with_stack else {}
    if execution_trace_path:
        # Passed only when asked for: torch 1.13's profile() has no such argument.
        options["execution_trace_observer"] = (
            torch.profiler.ExecutionTraceObserver().register_callback(execution_trace_path))
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


def make_batches():
    return [(torch.randint(0, VOCAB, (BATCH, SEQUENCE)),
             torch.randn(BATCH, IMAGE_CHANNELS, IMAGE_SIZE, IMAGE_SIZE),
             torch.randint(0, CLASSES, (BATCH,))) for _ in range(BATCH_COUNT)]


def main():
    args = parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    if args.trigger == "fifo" and not os.path.exists(args.fifo):
        os.mkfifo(args.fifo)

    model = BroadModel()
    optimizer = make_optimizer(model)
    batches = make_batches()
    training_step = make_training_step(model, optimizer, batches)

    for _ in range(args.warmup):
        training_step()

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
    if args.kineto_trace_out:
        write_kineto_trace(run_measured_steps, args.kineto_trace_out, args.execution_trace_out,
                           with_stack=args.with_stack)
        return 0
    if args.execution_trace_out:
        write_execution_trace(run_measured_steps, args.execution_trace_out)
        return 0

    print(f"READY {os.getpid()}", flush=True)
    wait_for_trigger(args)
    run_measured_steps()
    print("DONE", flush=True)
    wait_for_trigger(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
