#!/usr/bin/env python3
"""The recompute benchmark's PyTorch side (bench/recompute.py): the deep MLP or the seeds'
ConvNet as one nn.Sequential whose layer list is dtrain's model.layers, trained with Adam
1e-3 (--adam: torch.optim.Adam as it comes, on CPU its single-tensor loop, or fused=True,
PyTorch's fastest CPU Adam, from 2.4) on Fashion-MNIST, with and without activation recompute
(torch.utils.checkpoint.checkpoint_sequential, non-reentrant, over --segments segments:
PyTorch runs the last segment without checkpointing, as its documentation says).

Measured as bench_tp.c measures dtrain:
  step time    the median interval between the ends of consecutive steps after --warmup;
  kept bytes   the bytes autograd holds from the forward for the backward, counted with
               torch.autograd.graph.saved_tensors_hooks around the loss's forward (each
               storage once, the input batch and the parameters left out): what recompute is meant to cut;
  peak RSS     the process's peak resident memory (getrusage), for what it is worth with a
               caching allocator.
Prints one JSON object.
"""
import argparse
import json
import os
import resource
import sys
import time

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import batch_of, deep_mlp, load  # noqa: E402


def convnet():
    """The seeds' ConvNet as the layer list of examples/convnet.ini."""
    return nn.Sequential(nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Conv2d(32, 64, 3, 1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128),
                         nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, 10), nn.LogSoftmax(dim=1))


def storage_of(t):
    """The tensor's storage (untyped_storage from PyTorch 2.0; 1.13 has storage())."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def kept_bytes(model, loss_fn, xb, yb, segments):
    """Bytes of the tensors autograd saves for backward during one forward (the input and
    the parameters left out), each storage counted once; the graph is then freed without a
    backward."""
    seen, total = set(), [0]
    skip = {storage_of(xb).data_ptr()} | {storage_of(p).data_ptr() for p in model.parameters()}

    def pack(t):
        s = storage_of(t)
        if s.data_ptr() not in seen and s.data_ptr() not in skip:
            seen.add(s.data_ptr())
            total[0] += s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = loss_fn(forward(model, xb, segments), yb)
    del loss
    return total[0]


def forward(model, xb, segments):
    if segments <= 1:
        return model(xb)
    try:
        return checkpoint_sequential(model, segments, xb, use_reentrant=False)
    except (TypeError, ValueError):  # PyTorch 1.13: reentrant only (needs an input requiring grad)
        return checkpoint_sequential(model, segments, xb.requires_grad_(True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["deep", "convnet"], required=True)
    ap.add_argument("--depth", type=int, default=16)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--segments", type=int, default=1, help="1: no recompute")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--adam", choices=["default", "fused"], default="default",
                    help="torch.optim.Adam as it comes, or with fused=True")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    x, y = load(a.data)
    if a.model == "deep":
        model, loss_fn = deep_mlp(a.depth, a.width), nn.CrossEntropyLoss()
    else:
        model, loss_fn = convnet(), nn.NLLLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3,
                           **({"fused": True} if a.adam == "fused" else {}))
    n = x.shape[0]
    perm = torch.randperm(n)
    xb, yb = batch_of(x, y, perm[:a.batch])
    kept = kept_bytes(model, loss_fn, xb, yb, a.segments)
    times, last = [], None
    for s in range(1 + a.warmup + a.steps):
        start = (s * a.batch) % (n - a.batch)
        xb, yb = batch_of(x, y, perm[start:start + a.batch])
        opt.zero_grad()
        loss = loss_fn(forward(model, xb, a.segments), yb)
        loss.backward()
        opt.step()
        now = time.monotonic()
        if last is not None:
            times.append(now - last)
        last = now
    steady = sorted(times[a.warmup:])
    median = steady[len(steady) // 2]
    print(json.dumps({
        "impl": "pytorch " + torch.__version__, "model": a.model, "batch": a.batch,
        "segments": a.segments, "threads": a.threads, "adam": a.adam, "steps": len(steady),
        "step_ms_median": median * 1e3, "samples_per_s": a.batch / median,
        "kept_bytes": kept,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
