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
with its missing features replaced as noted. The protocol and its options are train_loop.py's
(imported: it lies beside this file in the repository, and the e2e tests copy it beside it into
the chroot roots).
"""

import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

import train_loop  # the protocol: parse_args, prepare, run_protocol

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
    half and bool tensors, a 9-dim tensor, None optional arguments, an optional string.
    Returns a float tensor."""
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
    # str? passed and passed as None: div.Tensor_mode's rounding_mode.
    quotient = torch.div(flat, 3.0 + flat.abs(), rounding_mode="floor") + torch.div(flat, 2.0, rounding_mode=None)
    total = total + quotient.sum()
    # Rows and columns indexed by a tensor: aten::index with [idx] and [None, idx].
    rows = torch.tensor(ROW_ORDER)
    total = total + logits.detach()[rows, :].sum() + logits.detach()[:, rows].sum()
    return total


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


def make_batches():
    return [(torch.randint(0, VOCAB, (BATCH, SEQUENCE)),
             torch.randn(BATCH, IMAGE_CHANNELS, IMAGE_SIZE, IMAGE_SIZE),
             torch.randint(0, CLASSES, (BATCH,))) for _ in range(BATCH_COUNT)]


def main():
    args = train_loop.parse_args(__doc__)
    train_loop.prepare(args)
    model = BroadModel()
    return train_loop.run_protocol(args, make_training_step(model, make_optimizer(model), make_batches()))


if __name__ == "__main__":
    sys.exit(main())
