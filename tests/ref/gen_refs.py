#!/usr/bin/python3
"""gen_refs.py — writes the PyTorch reference files that tests/ref/test_ref_*.c read.

Run by `make refs` with Debian's PyTorch 1.13 (/usr/bin/python3); the outputs are committed
so that `make test` needs no PyTorch. Every reference is computed in float64 at small shapes
(docs/NOTES.md: long float32 reductions differ between summation orders by more than the
tolerances), from inputs that are exactly representable in float32, so the C side loads the
very same numbers and the only difference left is its own float32 arithmetic.

Files (safetensors, written by hand below: 8-byte little-endian header length, a JSON
header, raw little-endian data):
  layers.safetensors    one case per layer configuration, each a torch.nn.Sequential:
                        <case>.x, <case>.<param> (state_dict names), <case>.y, <case>.dy
                        (the output gradient fed in), <case>.dx, <case>.<param>.grad
  loss.safetensors      <case>.out, <case>.labels or <case>.targets, <case>.loss_sum (sum of
                        per-sample losses), <case>.dout (d(loss_sum / divisor)/d out),
                        <case>.correct (classification)
  optim.safetensors     <case>.p0, <case>.grads (steps, n), <case>.lr (steps), <case>.params
                        (steps, n): parameters after each optimizer step
  schedule.safetensors  <case>.lr (steps): the learning rate of each optimizer step
The __metadata__ of each file describes every case ("kind=conv2d in=3,7,7 ..."); the C
tests hold the same descriptions and refuse a file whose cases drifted from them.

Usage: /usr/bin/python3 tests/ref/gen_refs.py [--dtrain PATH] [--out DIR]
(--dtrain is accepted for the Makefile's sake and not used yet.)
"""

import argparse
import json
import math
import os
import struct
import sys
import warnings
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
# SequentialLR starts the scheduler after the warm-up with step(0), which 1.13 announces as
# deprecated; the closed form it then uses is the one wanted here.
warnings.filterwarnings("ignore", message="The epoch parameter", category=UserWarning)

DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.int64: "I64"}


# ---- safetensors writer ---------------------------------------------------------------------

class StWriter:
    """Collects named tensors and writes one safetensors file deterministically."""

    def __init__(self):
        self.tensors = []  # (name, dtype name, shape, bytes)
        self.names = set()
        self.meta = {}

    def add(self, name, t):
        assert name not in self.names, name
        t = t.detach().contiguous().cpu()
        dtype = DTYPES[t.dtype]
        arr = t.numpy()
        data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        self.tensors.append((name, dtype, list(t.shape), data))
        self.names.add(name)

    def write(self, path):
        header = {}
        if self.meta:
            header["__metadata__"] = {k: self.meta[k] for k in sorted(self.meta)}
        offset = 0
        for name, dtype, shape, data in self.tensors:
            header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [offset, offset + len(data)]}
            offset += len(data)
        text = json.dumps(header, separators=(",", ":")).encode("utf-8")
        # Pad the header with spaces so the data starts 8-byte aligned (the format allows it).
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for _, _, _, data in self.tensors:
                f.write(data)
        os.replace(tmp, path)
        return offset + 8 + len(text)


def check_written(path, w):
    """Reads the file back and compares every tensor's dtype, shape and bytes with what was
    added: the hand-written format is the only thing between PyTorch and the C tests."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    if header.pop("__metadata__", {}) != w.meta or len(header) != len(w.tensors):
        sys.exit("gen_refs: %s: header does not match what was written" % path)
    for name, dtype, shape, data in w.tensors:
        h = header[name]
        a, b = h["data_offsets"]
        if h["dtype"] != dtype or h["shape"] != shape or blob[8 + n + a:8 + n + b] != data:
            sys.exit("gen_refs: %s: tensor %s does not read back" % (path, name))


# ---- deterministic data, exactly representable in float32 -----------------------------------

GEN = torch.Generator()


def reseed(case):
    """Each case draws from its own seed, so adding a case leaves the others' bytes alone."""
    GEN.manual_seed(20240601 + zlib.crc32(case.encode("utf-8")))


def f32(t):
    """Rounds to float32 and back: the C side loads exactly these values."""
    return t.to(torch.float32).to(torch.float64)


def uniform(shape, lo=-1.0, hi=1.0):
    return f32(torch.rand(shape, generator=GEN) * (hi - lo) + lo)


def away_from_zero(shape, margin=0.05):
    """Values with |x| >= margin: central differences and float32 never cross ReLU's kink."""
    sign = torch.where(torch.rand(shape, generator=GEN) < 0.5, -1.0, 1.0)
    return f32(sign * (margin + torch.rand(shape, generator=GEN)))


def distinct(shape):
    """A shuffled grid in [-1, 1): every value distinct, neighbours 2/n apart, so no pooling
    window holds a tie or a near-tie."""
    n = math.prod(shape)
    perm = torch.randperm(n, generator=GEN).to(torch.float64)
    return f32((perm - n / 2) * (2.0 / n)).reshape(shape)


# ---- layers ----------------------------------------------------------------------------------

def spec_str(kind, in_shape, batch, **kw):
    parts = ["kind=" + kind, "in=" + ",".join(str(d) for d in in_shape), "batch=%d" % batch]
    parts += ["%s=%s" % (k, v) for k, v in kw.items()]
    return " ".join(parts)


def make_layer(kind, in_shape, kw):
    if kind == "linear":
        return nn.Linear(in_shape[0], kw["out_features"], bias=bool(kw.get("bias", 1)))
    if kind == "conv2d":
        return nn.Conv2d(in_shape[0], kw["out_channels"], kw["kernel"], stride=kw["stride"],
                         padding=kw["padding"], bias=bool(kw.get("bias", 1)))
    if kind == "maxpool2d":
        # stride 0 is dtrain's "same as the kernel", PyTorch's default (None).
        return nn.MaxPool2d(kw["kernel"], stride=kw["stride"] or None)
    if kind == "relu":
        return nn.ReLU()
    if kind == "flatten":
        return nn.Flatten()
    if kind == "log_softmax":
        return nn.LogSoftmax(dim=1)
    raise ValueError(kind)


def set_params(model):
    """Weights and biases drawn from U(-0.5, 0.5) in float32: PyTorch's own init would do,
    but its RNG is not dtrain's; the point here is the arithmetic, not the init."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(uniform(p.shape, -0.5, 0.5))


def run_case(w, name, model, x, meta):
    """Forward and backward of `model` on x with a random output gradient, in float64."""
    x = x.clone().requires_grad_(True)
    y = model(x)
    dy = uniform(y.shape)
    y.backward(dy)
    w.add(name + ".x", x)
    for pname, p in model.named_parameters():
        w.add("%s.%s" % (name, pname), p)
    w.add(name + ".y", y)
    w.add(name + ".dy", dy)
    w.add(name + ".dx", x.grad)
    for pname, p in model.named_parameters():
        w.add("%s.%s.grad" % (name, pname), p.grad)
    w.meta[name] = meta
    return x, y


def layer_case(w, name, kind, in_shape, batch, x=None, **kw):
    reseed(name)
    model = nn.Sequential(make_layer(kind, in_shape, kw))
    set_params(model)
    if x is None:
        if kind == "relu":
            x = away_from_zero((batch,) + in_shape)
        elif kind == "maxpool2d":
            x = distinct((batch,) + in_shape)
        elif kind == "log_softmax" and kw.get("wide"):
            x = uniform((batch,) + in_shape, -30.0, 30.0)
        else:
            x = uniform((batch,) + in_shape)
    kw.pop("wide", None)
    run_case(w, name, model, x, spec_str(kind, in_shape, batch, **kw))


def chain_margins_ok(model, x):
    """True when no ReLU input lies within 1e-3 of zero and no pooling window's two largest
    values lie within 1e-3 of each other: float32 then takes the same branches as float64."""
    conv, _, pool = model[0], model[1], model[2]
    z = conv(x)
    if (z.abs() < 1e-3).any():
        return False
    r = F.relu(z)
    k = pool.kernel_size
    win = F.unfold(r.reshape(-1, 1, r.shape[2], r.shape[3]), k, stride=pool.stride)
    top2 = win.topk(2, dim=1).values
    pos = top2[:, 0, :] > 0  # a window of zeros routes nothing: its ties do not matter
    return bool(((top2[:, 0, :] - top2[:, 1, :])[pos] >= 1e-3).all())


def gen_layers():
    w = StWriter()
    layer_case(w, "linear_a", "linear", (7,), 3, out_features=5, bias=1)
    layer_case(w, "linear_nobias", "linear", (13,), 2, out_features=4, bias=0)
    layer_case(w, "linear_1", "linear", (1,), 1, out_features=1, bias=1)
    layer_case(w, "conv_a", "conv2d", (2, 6, 5), 2, out_channels=3, kernel=3, stride=1,
               padding=0, bias=1)
    layer_case(w, "conv_s2p1", "conv2d", (3, 7, 7), 2, out_channels=4, kernel=3, stride=2,
               padding=1, bias=1)
    layer_case(w, "conv_odd", "conv2d", (1, 5, 6), 3, out_channels=2, kernel=2, stride=3,
               padding=2, bias=0)
    layer_case(w, "conv_k1", "conv2d", (4, 3, 3), 1, out_channels=2, kernel=1, stride=1,
               padding=0, bias=1)
    layer_case(w, "pool_a", "maxpool2d", (2, 6, 6), 2, kernel=2, stride=0)
    layer_case(w, "pool_k3s2", "maxpool2d", (3, 7, 5), 2, kernel=3, stride=2)
    layer_case(w, "pool_s1", "maxpool2d", (1, 5, 5), 1, kernel=2, stride=1)
    layer_case(w, "pool_odd", "maxpool2d", (2, 5, 7), 2, kernel=2, stride=0)
    # Ties: the first maximum in row-major window order takes the gradient.
    tie = f32(torch.tensor([[[[1.0, 1.0, 0.5, 2.0],
                              [1.0, 0.0, 2.0, 2.0],
                              [-1.0, -3.0, 0.0, 0.0],
                              [-2.0, -1.0, 0.0, 0.0]]]]))
    layer_case(w, "pool_tie", "maxpool2d", (1, 4, 4), 1, x=tie, kernel=2, stride=0)
    # NaN propagates and takes the gradient; of two NaNs in a window, the later one in
    # row-major order (PyTorch takes every NaN it meets).
    reseed("pool_nan.x")
    nan = distinct((1, 1, 4, 4))
    nan[0, 0, 1, 1] = float("nan")
    nan[0, 0, 0, 3] = float("nan")
    nan[0, 0, 1, 2] = float("nan")
    layer_case(w, "pool_nan", "maxpool2d", (1, 4, 4), 1, x=nan, kernel=2, stride=0)
    layer_case(w, "relu_vec", "relu", (10,), 3)
    layer_case(w, "relu_chw", "relu", (2, 3, 3), 2)
    # NaN propagates forward, and PyTorch's backward (zero where the input is <= 0) passes
    # the gradient through at NaN.
    reseed("relu_nan.x")
    rnan = away_from_zero((2, 5))
    rnan[0, 1] = float("nan")
    rnan[1, 3] = float("nan")
    layer_case(w, "relu_nan", "relu", (5,), 2, x=rnan)
    layer_case(w, "flatten", "flatten", (2, 3, 4), 2)
    layer_case(w, "logsm_a", "log_softmax", (7,), 4)
    layer_case(w, "logsm_wide", "log_softmax", (10,), 2, wide=1)

    # A small ConvNet through the whole model: Sequential indices name its tensors
    # (0.weight, 4.bias), as in dtrain's weight files.
    reseed("chain")
    for _ in range(100):
        model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(27, 5), nn.LogSoftmax(dim=1))
        set_params(model)
        x = uniform((3, 2, 6, 6))
        if chain_margins_ok(model, x):
            break
    else:
        sys.exit("gen_refs: no chain input with clear ReLU/pooling margins in 100 tries")
    run_case(w, "chain", model, x,
             "chain=conv2d(3,k3,s1,p1),relu,maxpool2d(2),flatten,linear(5),log_softmax "
             "in=2,6,6 batch=3")
    return w


# ---- losses ----------------------------------------------------------------------------------

def loss_case(w, name, kind, batch, width, divisor, scale=1.0):
    reseed(name)
    out = uniform((batch, width), -scale, scale)
    if kind == "nll":
        out = f32(F.log_softmax(out, dim=1))
    out.requires_grad_(True)
    if kind == "mse":
        targets = uniform((batch, width))
        per_sample = nn.MSELoss(reduction="none")(out, targets).mean(dim=1)
        loss_sum = per_sample.sum()
    else:
        labels = torch.randint(0, width, (batch,), generator=GEN)
        fn = nn.CrossEntropyLoss if kind == "cross_entropy" else nn.NLLLoss
        loss_sum = fn(reduction="sum")(out, labels)
    (loss_sum / divisor).backward()
    w.add(name + ".out", out)
    if kind == "mse":
        w.add(name + ".targets", targets)
    else:
        w.add(name + ".labels", labels)
        correct = (out.argmax(dim=1) == labels).sum().reshape(1)
        w.add(name + ".correct", correct)
    w.add(name + ".loss_sum", loss_sum.reshape(1))
    w.add(name + ".dout", out.grad)
    w.meta[name] = "kind=%s batch=%d width=%d divisor=%g" % (kind, batch, width, divisor)


def gen_loss():
    w = StWriter()
    # Divisors differ from the batch: data parallelism passes the global sample count.
    loss_case(w, "ce_a", "cross_entropy", 5, 7, 8.0)
    loss_case(w, "ce_1", "cross_entropy", 1, 3, 1.0)
    loss_case(w, "ce_big", "cross_entropy", 3, 4, 2.0, scale=40.0)
    loss_case(w, "nll_a", "nll", 4, 6, 3.0)
    loss_case(w, "mse_a", "mse", 3, 4, 5.0)
    loss_case(w, "mse_1", "mse", 2, 1, 7.0)
    return w


# ---- schedules (formulas of include/dtrain/optim.h) ------------------------------------------

def sched_lr(s, step):
    """dt_schedule_lr as optim.h specifies it. The cosine stays at min_lr after total_steps
    (min_lr is the "final learning rate")."""
    if step < s["warmup_steps"]:
        ws = s["warmup_start"]
        return s["lr"] * (ws + (1.0 - ws) * step / s["warmup_steps"])
    k = step - s["warmup_steps"]
    if s["kind"] == "step":
        return s["lr"] * s["gamma"] ** (k // s["step_size"])
    if s["kind"] == "cosine":
        f = min(k, s["total_steps"]) / s["total_steps"]
        return s["min_lr"] + (s["lr"] - s["min_lr"]) * (1.0 + math.cos(math.pi * f)) / 2.0
    return s["lr"]


def torch_sched_lrs(s, steps):
    """The same schedule from torch.optim.lr_scheduler where an equivalent exists (LinearLR
    needs a start factor > 0; CosineAnnealingLR keeps oscillating after T_max, so only the
    steps up to it compare); None otherwise."""
    if s["warmup_steps"] > 0 and s["warmup_start"] <= 0.0:
        return None
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=s["lr"])
    sl = torch.optim.lr_scheduler
    if s["kind"] == "step":
        main = sl.StepLR(opt, step_size=s["step_size"], gamma=s["gamma"])
    elif s["kind"] == "cosine":
        main = sl.CosineAnnealingLR(opt, T_max=s["total_steps"], eta_min=s["min_lr"])
        steps = min(steps, s["warmup_steps"] + s["total_steps"] + 1)
    else:
        main = sl.ConstantLR(opt, factor=1.0, total_iters=0)
    if s["warmup_steps"] > 0:
        warm = sl.LinearLR(opt, start_factor=s["warmup_start"], end_factor=1.0,
                           total_iters=s["warmup_steps"])
        sched = sl.SequentialLR(opt, [warm, main], milestones=[s["warmup_steps"]])
    else:
        sched = main
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


def sched_desc(s):
    return ("kind=%s lr=%g warmup_steps=%d warmup_start=%g step_size=%d gamma=%g "
            "total_steps=%d min_lr=%g" % (s["kind"], s["lr"], s["warmup_steps"],
                                          s["warmup_start"], s["step_size"], s["gamma"],
                                          s["total_steps"], s["min_lr"]))


def schedule(kind, lr, warmup_steps=0, warmup_start=0.0, step_size=1, gamma=0.1,
             total_steps=1, min_lr=0.0):
    return dict(kind=kind, lr=lr, warmup_steps=warmup_steps, warmup_start=warmup_start,
                step_size=step_size, gamma=gamma, total_steps=total_steps, min_lr=min_lr)


def checked_lrs(s, steps):
    lrs = [sched_lr(s, i) for i in range(steps)]
    ref = torch_sched_lrs(s, steps)
    if ref is not None:
        for i, (a, b) in enumerate(zip(lrs, ref)):
            if abs(a - b) > 1e-12 * max(abs(b), 1e-300):
                sys.exit("gen_refs: schedule %s step %d: formula %.17g, torch %.17g"
                         % (sched_desc(s), i, a, b))
    return lrs


SCHEDULES = [
    ("const", schedule("constant", 0.1), 5),
    ("step", schedule("step", 0.5, step_size=3, gamma=0.5), 10),
    ("step_warm", schedule("step", 0.2, warmup_steps=4, warmup_start=0.25, step_size=2,
                           gamma=0.3), 12),
    ("step_warm0", schedule("step", 0.2, warmup_steps=3, warmup_start=0.0, step_size=2,
                            gamma=0.5), 9),
    ("cos", schedule("cosine", 0.1, total_steps=8, min_lr=0.001), 9),
    ("cos_warm", schedule("cosine", 1e-3, warmup_steps=5, warmup_start=0.1, total_steps=10,
                          min_lr=1e-5), 16),
    # Past total_steps the cosine rests at min_lr (the script's reading of optim.h).
    ("cos_past", schedule("cosine", 0.05, warmup_steps=2, warmup_start=0.0, total_steps=4,
                          min_lr=0.0), 10),
]


def gen_schedule():
    w = StWriter()
    for name, s, steps in SCHEDULES:
        w.add(name + ".lr", torch.tensor(checked_lrs(s, steps)))
        w.meta[name] = sched_desc(s) + " steps=%d" % steps
    return w


# ---- optimizers ------------------------------------------------------------------------------

def optim_desc(kind, c):
    """The optimizer's full settings; test_ref_optim.c formats its config the same way."""
    if kind == "sgd":
        return "kind=sgd momentum=%g dampening=%g nesterov=%d weight_decay=%g" % (
            c["momentum"], c["dampening"], c["nesterov"], c["weight_decay"])
    return "kind=%s beta1=%g beta2=%g eps=%g weight_decay=%g" % (
        kind, c["beta1"], c["beta2"], c["eps"], c["weight_decay"])


def optim_case(w, name, kind, sched, steps=6, n=12, **kw):
    c = dict(momentum=0.0, dampening=0.0, nesterov=0, weight_decay=0.0, beta1=0.9,
             beta2=0.999, eps=1e-8)
    assert set(kw) <= set(c), kw
    reseed(name)
    c.update(kw)
    # Half the parameters O(1), so that weight decay shows; half within 1e-3 of zero, so
    # that float32's spacing there (1e-10) is far below the update and the C test can
    # check each step's update to 2e-6 relative (a bias correction computed in float is
    # off by 6e-6).
    p = torch.nn.Parameter(torch.cat([uniform((n // 2,)), uniform((n - n // 2,), -1e-3, 1e-3)]))
    p0 = p.detach().clone()
    if kind == "sgd":
        opt = torch.optim.SGD([p], lr=sched["lr"], momentum=c["momentum"],
                              dampening=c["dampening"], weight_decay=c["weight_decay"],
                              nesterov=bool(c["nesterov"]))
    else:
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        opt = cls([p], lr=sched["lr"], betas=(c["beta1"], c["beta2"]), eps=c["eps"],
                  weight_decay=c["weight_decay"])
    lrs = checked_lrs(sched, steps)
    grads = uniform((steps, n))
    # A few tiny gradients, so that Adam's eps (added after the bias correction) matters.
    grads[:, :2] = f32(grads[:, :2] * 1e-7)
    params = []
    for t in range(steps):
        for group in opt.param_groups:
            group["lr"] = lrs[t]
        p.grad = grads[t].clone()
        opt.step()
        params.append(p.detach().clone())
    w.add(name + ".p0", p0)
    w.add(name + ".grads", grads)
    w.add(name + ".lr", torch.tensor(lrs))
    w.add(name + ".params", torch.stack(params))
    w.meta[name] = "%s steps=%d n=%d | %s" % (optim_desc(kind, c), steps, n, sched_desc(sched))


def gen_optim():
    w = StWriter()
    optim_case(w, "sgd_plain", "sgd", schedule("step", 0.1, warmup_steps=2, warmup_start=0.5,
                                               step_size=2, gamma=0.5))
    optim_case(w, "sgd_momentum", "sgd",
               schedule("cosine", 0.1, warmup_steps=2, warmup_start=0.0, total_steps=4,
                        min_lr=0.01),
               momentum=0.9, dampening=0.1, weight_decay=0.01)
    optim_case(w, "sgd_nesterov", "sgd", schedule("step", 0.05, step_size=3, gamma=0.5),
               momentum=0.8, nesterov=1, weight_decay=0.005)
    optim_case(w, "adam", "adam",
               schedule("cosine", 0.01, warmup_steps=2, warmup_start=0.1, total_steps=4,
                        min_lr=0.001),
               weight_decay=0.0)
    optim_case(w, "adam_l2", "adam", schedule("step", 0.02, step_size=2, gamma=0.5),
               beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1)
    optim_case(w, "adamw", "adamw",
               schedule("cosine", 0.01, warmup_steps=1, warmup_start=0.2, total_steps=5,
                        min_lr=0.0),
               weight_decay=0.05)
    return w


# ---- main ------------------------------------------------------------------------------------

def write_one(doc, tag, filename, gen):
    """The main of a generator that writes one reference file: --out DIR (default: tests/ref),
    a warning off PyTorch 1.13, the file written deterministically and read back."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output directory (default: this script's directory)")
    args = ap.parse_args()
    if not torch.__version__.startswith("1.13"):
        print("%s: warning: references are specified against PyTorch 1.13, running %s"
              % (tag, torch.__version__), file=sys.stderr)
    path = os.path.join(args.out, filename)
    w = gen()
    nbytes = w.write(path)
    check_written(path, w)
    print("%s: wrote %s (%d bytes)" % (tag, path, nbytes))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtrain", help="path of the dtrain binary (accepted, not used yet)")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)),
                    help="output directory (default: this script's directory)")
    args = ap.parse_args()
    if not torch.__version__.startswith("1.13"):
        print("gen_refs: warning: references are specified against PyTorch 1.13, running %s"
              % torch.__version__, file=sys.stderr)
    total = 0
    for fname, fn in (("layers.safetensors", gen_layers), ("loss.safetensors", gen_loss),
                      ("schedule.safetensors", gen_schedule),
                      ("optim.safetensors", gen_optim)):
        path = os.path.join(args.out, fname)
        w = fn()
        nbytes = w.write(path)
        check_written(path, w)
        total += nbytes
        print("gen_refs: wrote %s (%d bytes)" % (path, nbytes))
    print("gen_refs: %d bytes in all" % total)


if __name__ == "__main__":
    main()
