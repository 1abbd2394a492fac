#!/usr/bin/env python3
"""The GPT of a dtrain text config (examples/gpt.ini, bench/gpt_nano.ini) in PyTorch: the peer
bench/gpt.py measures dtrain against (issue 37, docs/BENCHMARKS.md "The GPT against PyTorch").

The same model as dtrain's (docs/ARCHITECTURE.md "The transformer block"): GPT-2, pre-LayerNorm
blocks x + attn(ln_1(x)), x + mlp(ln_2(x)); the projections Hugging Face's Conv1D, x @ W + b
with W (in, out), c_attn fused and split into q, k, v; F.scaled_dot_product_attention with
is_causal=True (torch 2.0 and later; torch 1.13 has none and computes the causal softmax
explicitly, said in the output as "attention"); GELU's tanh form; LayerNorm eps 1e-5; the head
tied to the token embedding; dropout where the config puts it (embeddings, residual branches,
attention probabilities). Its tensors carry dtrain's names, so --init reads the safetensors
file `bench_train CONFIG --save-init FILE` writes and both sides start from the same weights.

The optimizer is the config's: AdamW (optim.lr, beta1, beta2, eps, weight_decay on the tensors
of two or more dimensions only, as optim.decay auto groups a model with an embedding) after
clip_grad_norm_(optim.clip_norm), in --optim's implementation: fused (torch.optim.AdamW
fused=True: the fastest on CPU where the version has it), foreach, or default (the version's
own choice: on CPU the loop over tensors).

Modes:
  timing (default)  measured as bench/bench_train.c measures dtrain: the interval between the
                    ends of consecutive steps (drawing the step's windows included), median over
                    --steps after --warmup, at a constant rate optim.lr without warm-up (as
                    bench_train); setup_s, first_step_s, peak_rss_mb (getrusage); one JSON line
                    with tokens_per_s = batch x block_size / median step. --compile runs the
                    model through torch.compile (its compilation falls in the first steps).
  --windows FILE    train on dtrain's windows (`dtrain train --windows-out FILE`): line s holds
                    step s's offsets; with the config's schedule (warm-up, cosine to
                    schedule.min_lr over --train-steps) as dtrain's src/optim/schedule.c, and
                    validation as include/dtrain/text.h defines it (the validation bytes cut
                    into windows of block_size + 1 at 0, block_size, ...; mean cross-entropy in
                    nats), after every --eval-every steps and the last. --metrics FILE gets a
                    "step" record per step (the loss before its update, as dtrain's) and "eval"
                    records that `dtrain plot` draws; the last line printed is a JSON summary.

Usage: torch_gpt.py --config INI [--batch B] [--threads N] [--optim fused|foreach|default]
                    [--compile] [--init FILE] [--steps N --warmup N]
                    [--windows FILE --train-steps N --eval-every K --metrics FILE]
"""
import os
import time


def launch_time():
    """CLOCK_MONOTONIC time of this process's launch (as bench_train.c's launch_time)."""
    env = os.environ.get("BENCH_T0", "")
    if env:
        return float(env)
    with open("/proc/self/stat") as f:
        stat = f.read()
    start = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime
    since_start = (time.clock_gettime(time.CLOCK_BOOTTIME)
                   - start / os.sysconf("SC_CLK_TCK"))
    return time.monotonic() - since_start


LAUNCH = launch_time()

import argparse  # noqa: E402
import glob  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import resource  # noqa: E402
import struct  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS = "/usr/share/games/fortunes"  # include/dtrain/text.h DT_TEXT_DEFAULT_DIR
EPS_LN = 1e-5
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


# ---- the config -------------------------------------------------------------------------

def read_ini(path):
    """{section: {key: value}} of a dtrain config; an indented line continues the value
    before it (model.layers); '#' and ';' start comments."""
    out, section, key = {}, None, None
    with open(path) as f:
        for line in f:
            text = line.split("#", 1)[0].split(";", 1)[0].rstrip()
            if not text.strip():
                continue
            if text[0] in " \t" and key is not None:
                out[section][key] += " " + text.strip()
            elif text.startswith("[") and text.endswith("]"):
                section, key = text[1:-1].strip(), None
                out.setdefault(section, {})
            elif "=" in text:
                k, v = text.split("=", 1)
                key = k.strip()
                out.setdefault(section, {})[key] = v.strip()
    return out


class Spec:
    """What the GPT config says: sizes, dropout, optimizer, schedule, data."""

    def __init__(self, path):
        ini = read_ini(path)
        get = lambda s, k, d=None: ini.get(s, {}).get(k, d)  # noqa: E731
        if get("data", "kind") != "text":
            raise SystemExit("torch_gpt.py: %s: data.kind is not text" % path)
        self.block = int(get("model", "block_size"))
        layers = [x.strip() for x in get("model", "layers", "").split(",") if x.strip()]
        self.layers = self.heads = self.embd = None
        self.p_embd = self.p_resid = self.p_attn = 0.0
        for item in layers:
            words = item.split(":", 1)[-1].split()
            if words[0] == "embedding":
                self.vocab, self.embd = int(words[1]), int(words[2])
            elif words[0] == "dropout":
                self.p_embd = float(words[1])
            elif len(words) >= 4 and words[1] == "x" and words[2] == "block":
                self.layers, self.heads = int(words[0]), int(words[3])
                for w in words[4:]:
                    k, v = w.split("=")
                    if k == "p":
                        self.p_resid = float(v)
                    elif k == "attn_p":
                        self.p_attn = float(v)
            elif words[0] in ("block",):
                raise SystemExit("torch_gpt.py: %s: write the blocks as 'N x block H'" % path)
        if None in (self.layers, self.heads, self.embd):
            raise SystemExit("torch_gpt.py: %s: model.layers is not a GPT (embedding, position, "
                             "N x block H, layernorm, lm_head)" % path)
        if get("optim", "kind") != "adamw":
            raise SystemExit("torch_gpt.py: %s: optim.kind must be adamw" % path)
        self.lr = float(get("optim", "lr", "0.001"))
        self.beta1 = float(get("optim", "beta1", "0.9"))
        self.beta2 = float(get("optim", "beta2", "0.999"))
        self.eps = float(get("optim", "eps", "1e-8"))
        self.wd = float(get("optim", "weight_decay", "0"))
        self.clip = float(get("optim", "clip_norm", "0"))
        self.sched = get("schedule", "kind", "constant")
        self.warmup = int(get("schedule", "warmup_steps", "0"))
        self.warmup_start = float(get("schedule", "warmup_start", "0"))
        self.min_lr = float(get("schedule", "min_lr", "0"))
        self.seed = int(get("train", "seed", "1"))
        self.text_files = get("data", "text_files", "") or ""
        self.val_fraction = float(get("data", "val_fraction", "0.1"))


def lr_at(spec, step, total):
    """dtrain's learning rate before optimizer step `step` (0-based; src/optim/schedule.c,
    a cosine over the steps after the warm-up, as the trainer's run_schedule sets it)."""
    if step < spec.warmup:
        return spec.lr * (spec.warmup_start + (1 - spec.warmup_start) * step / spec.warmup)
    if spec.sched == "cosine":
        n = max(total - spec.warmup, 1)
        k = step - spec.warmup
        f = 1.0 if k >= n else k / n
        return spec.min_lr + (spec.lr - spec.min_lr) * 0.5 * (1 + math.cos(math.pi * f))
    if spec.sched != "constant":
        raise SystemExit("torch_gpt.py: schedule.kind %s: only constant and cosine" % spec.sched)
    return spec.lr


# ---- the data (include/dtrain/text.h) -----------------------------------------------------

def corpus_files(spec):
    """The files dt_text_load reads, sorted by bytes: the default corpus's regular files
    (not *.dat, not symbolic links), or data.text_files' paths and globs."""
    if not spec.text_files.strip():
        names = [os.path.join(DEFAULT_CORPUS, n) for n in os.listdir(DEFAULT_CORPUS)]
        files = [p for p in names if not p.endswith(".dat") and not os.path.islink(p)
                 and os.path.isfile(p)]
    else:
        files = []
        for item in spec.text_files.split(","):
            item = item.strip()
            files += sorted(glob.glob(item)) if any(c in item for c in "*?[") else [item]
    return sorted(files, key=lambda p: p.encode())


def load_text(spec):
    """(training bytes, validation bytes) as uint8 tensors: the first floor((1 - v) n)
    train."""
    data = b"".join(open(p, "rb").read() for p in corpus_files(spec))
    n_train = math.floor((1 - spec.val_fraction) * len(data))
    arr = torch.from_numpy(np.frombuffer(data, dtype=np.uint8).copy())
    return arr[:n_train], arr[n_train:]


def windows_at(data, offsets, block):
    """Inputs and targets (len(offsets), block) as int64: bytes [o, o + block) and one on."""
    idx = offsets.view(-1, 1) + torch.arange(block + 1).view(1, -1)
    w = data[idx].long()
    return w[:, :-1], w[:, 1:]


# ---- the model ----------------------------------------------------------------------------

class Conv1D(nn.Module):
    """Hugging Face GPT-2's projection: x @ W + b, W (in, out)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_in, n_out).normal_(0, 0.02))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.h, self.e, self.p = s.heads, s.embd, s.p_attn
        self.c_attn = Conv1D(s.embd, 3 * s.embd)
        self.c_proj = Conv1D(s.embd, s.embd)
        self.resid_dropout = nn.Dropout(s.p_resid)
        self.register_buffer("mask", torch.tril(torch.ones(s.block, s.block, dtype=torch.bool)),
                             persistent=False)

    def forward(self, x):
        B, T, E = x.shape
        q, k, v = self.c_attn(x).split(E, dim=2)
        q, k, v = (t.view(B, T, self.h, E // self.h).transpose(1, 2) for t in (q, k, v))
        p = self.p if self.training else 0.0
        if HAVE_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        else:  # torch 1.13: the causal softmax written out
            a = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(E // self.h))
            a = F.dropout(F.softmax(a.masked_fill(~self.mask[:T, :T], float("-inf")), dim=-1),
                          p, self.training)
            y = a @ v
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(B, T, E)))


class MLP(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.c_fc = Conv1D(s.embd, 4 * s.embd)
        self.c_proj = Conv1D(4 * s.embd, s.embd)
        self.dropout = nn.Dropout(s.p_resid)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.ln_1 = nn.LayerNorm(s.embd, eps=EPS_LN)
        self.attn = Attention(s)
        self.ln_2 = nn.LayerNorm(s.embd, eps=EPS_LN)
        self.mlp = MLP(s)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.wte = nn.Embedding(s.vocab, s.embd)
        self.wpe = nn.Embedding(s.block, s.embd)
        self.drop = nn.Dropout(s.p_embd)
        self.h = nn.ModuleList([Block(s) for _ in range(s.layers)])
        self.ln_f = nn.LayerNorm(s.embd, eps=EPS_LN)


class GPT(nn.Module):
    """GPT2LMHeadModel's computation; parameters named as its state_dict names them (the
    tied lm_head holds no tensor of its own)."""

    def __init__(self, s):
        super().__init__()
        self.transformer = Transformer(s)

    def logits(self, idx):
        t = self.transformer
        x = t.drop(t.wte(idx) + t.wpe(torch.arange(idx.shape[1])))
        for b in t.h:
            x = b(x)
        return F.linear(t.ln_f(x), t.wte.weight)

    def forward(self, idx, targets):
        logits = self.logits(idx)
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))


def read_safetensors(path):
    """{name: float32 tensor} of a safetensors file (the format written out: an 8-byte
    little-endian header length, a JSON header, the data), without the safetensors package."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, d in header.items():
        if name == "__metadata__":
            continue
        if d["dtype"] != "F32":
            raise SystemExit("torch_gpt.py: %s: %s is %s, not F32" % (path, name, d["dtype"]))
        a, b = d["data_offsets"]
        arr = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(d["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def load_init(model, path):
    """Every parameter from dtrain's file, by name and shape; refuses a missing or extra one."""
    tensors = read_safetensors(path)
    tensors.pop("lm_head.weight", None)  # tied: equal to wte's if present
    params = dict(model.named_parameters())
    missing = sorted(set(params) - set(tensors))
    extra = sorted(set(tensors) - set(params))
    if missing or extra:
        raise SystemExit("torch_gpt.py: %s: missing %s, unexpected %s" % (path, missing, extra))
    with torch.no_grad():
        for name, p in params.items():
            if tuple(tensors[name].shape) != tuple(p.shape):
                raise SystemExit("torch_gpt.py: %s: %s is %s, the model's %s" %
                                 (path, name, tuple(tensors[name].shape), tuple(p.shape)))
            p.copy_(tensors[name])


def make_optimizer(model, spec, kind):
    """AdamW with decay on the tensors of two or more dimensions (optim.decay auto).
    Returns (optimizer, label); raises SystemExit where this torch lacks `kind`."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": spec.wd}, {"params": rest, "weight_decay": 0.0}]
    args = dict(lr=spec.lr, betas=(spec.beta1, spec.beta2), eps=spec.eps)
    accepts = inspect.signature(torch.optim.AdamW).parameters
    if kind in ("fused", "foreach"):
        if kind not in accepts:
            raise SystemExit("torch_gpt.py: torch %s's AdamW has no %s=" % (torch.__version__,
                                                                             kind))
        args[kind] = True
    opt = torch.optim.AdamW(groups, **args)
    return opt, "AdamW " + kind


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def step(model, opt, spec, x, y):
    opt.zero_grad(set_to_none=True)
    loss = model(x, y)
    loss.backward()
    if spec.clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.clip)
    opt.step()
    return loss


@torch.no_grad()
def validate(model, val, block, batch):
    """include/dtrain/text.h's validation loss: windows at 0, block, 2 block, ... that fit,
    the mean cross-entropy over every predicted byte, and next-byte accuracy."""
    model.eval()
    count = (len(val) - 1) // block
    offsets = torch.arange(count) * block
    total, correct = 0.0, 0
    for i in range(0, count, batch):
        x, y = windows_at(val, offsets[i:i + batch], block)
        logits = model.logits(x)
        total += F.cross_entropy(logits.view(-1, logits.shape[-1]), y.reshape(-1),
                                 reduction="sum").item()
        correct += (logits.argmax(-1) == y).sum().item()
    model.train()
    return total / (count * block), correct / (count * block)


def read_windows(path, batch):
    """dtrain's --windows-out file: (steps, batch) int64 offsets, row s = step s."""
    rows = np.loadtxt(path, dtype=np.int64, comments="#", ndmin=2)
    if rows.shape[1] != batch + 1:
        raise SystemExit("torch_gpt.py: %s: %d windows per step, --batch is %d" %
                         (path, rows.shape[1] - 1, batch))
    if not (rows[:, 0] == np.arange(rows[0, 0], rows[0, 0] + len(rows))).all() or rows[0, 0]:
        raise SystemExit("torch_gpt.py: %s: the steps are not 0, 1, 2, ..." % path)
    return torch.from_numpy(rows[:, 1:])


def train_on_windows(a, spec, model, opt, train, val, setup_s):
    offsets = read_windows(a.windows, a.batch)
    total = a.train_steps or len(offsets)
    if total > len(offsets):
        raise SystemExit("torch_gpt.py: %s holds %d steps, %d asked" % (a.windows, len(offsets),
                                                                        total))
    metrics = open(a.metrics, "w") if a.metrics else None
    first_loss, since, losses, t0 = None, [], [], time.monotonic()
    val_loss = acc = None
    for s in range(total):
        lr = lr_at(spec, s, total)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = windows_at(train, offsets[s], spec.block)
        loss = step(model, opt, spec, x, y).item()
        first_loss = loss if first_loss is None else first_loss
        since.append(loss)
        losses.append(loss)
        if metrics:
            metrics.write(json.dumps({"event": "step", "step": s + 1, "loss": loss, "lr": lr})
                          + "\n")
        if (a.eval_every and (s + 1) % a.eval_every == 0) or s + 1 == total:
            dt = time.monotonic() - t0
            val_loss, acc = validate(model, val, spec.block, 64)
            rec = {"event": "eval", "step": s + 1, "train_loss": sum(since) / len(since),
                   "test_loss": val_loss, "bits_per_byte": val_loss / math.log(2),
                   "test_accuracy": acc, "tokens_per_s": len(since) * a.batch * spec.block / dt}
            if metrics:
                metrics.write(json.dumps(rec) + "\n")
                metrics.flush()
            print("step %d: train %.4f, validation %.4f nats/byte" %
                  (s + 1, rec["train_loss"], val_loss), file=sys.stderr, flush=True)
            since, t0 = [], time.monotonic()
    if metrics:
        metrics.close()
    print(json.dumps({"impl": "pytorch " + torch.__version__, "mode": "windows",
                      "config": a.config, "batch": a.batch, "steps": total,
                      "losses_head": losses[:3], "first_loss": first_loss,
                      "final_val_loss": val_loss, "final_val_accuracy": acc,
                      "attention": "sdpa" if HAVE_SDPA else "explicit", "setup_s": setup_s}))


def timed(a, spec, model, opt, train, setup_s):
    """bench_train.c's timed region: ends of consecutive steps, windows drawn inside."""
    fwd = torch.compile(model) if a.compile else model
    times, first_step_s, last = [], None, None
    g = torch.Generator().manual_seed(spec.seed)
    for _ in range(1 + a.warmup + a.steps):
        offsets = torch.randint(len(train) - spec.block, (a.batch,), generator=g)
        x, y = windows_at(train, offsets, spec.block)
        step(fwd, opt, spec, x, y)
        now = time.monotonic()
        if last is None:
            first_step_s = now - LAUNCH
        else:
            times.append(now - last)
        last = now
    steady = sorted(times[a.warmup:])
    median = steady[len(steady) // 2]
    print(json.dumps({
        "impl": "pytorch " + torch.__version__, "config": a.config, "batch": a.batch,
        "threads": a.threads, "torch_threads": torch.get_num_threads(),
        "optimizer": a.optim, "compile": bool(a.compile),
        "attention": "sdpa" if HAVE_SDPA else "explicit", "steps": len(steady),
        "block_size": spec.block, "samples_per_s": a.batch / median,
        "tokens_per_s": a.batch * spec.block / median, "step_ms_median": median * 1e3,
        "step_ms_min": steady[0] * 1e3, "setup_s": setup_s, "first_step_s": first_step_s,
        "load_s": a.load_s, "peak_rss_mb": peak_rss_mb(),
        "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                               "OPENBLAS_NUM_THREADS") if k in os.environ},
    }))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="a dtrain text config of a GPT")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--optim", choices=["fused", "foreach", "default"], default="fused")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--init", help="initial weights (bench_train CONFIG --save-init FILE)")
    ap.add_argument("--windows", help="train on dtrain's windows (dtrain train --windows-out)")
    ap.add_argument("--train-steps", type=int, default=0, help="with --windows (0: all)")
    ap.add_argument("--eval-every", type=int, default=0, help="with --windows")
    ap.add_argument("--metrics", help="with --windows: step and eval records (dtrain plot)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.compile and not hasattr(torch, "compile"):
        raise SystemExit("torch_gpt.py: torch %s has no torch.compile" % torch.__version__)
    spec = Spec(os.path.join(ROOT, a.config) if not os.path.isabs(a.config) else a.config)
    torch.manual_seed(spec.seed)
    t = time.monotonic()
    train, val = load_text(spec)
    a.load_s = time.monotonic() - t
    model = GPT(spec)
    if a.init:
        load_init(model, a.init)
    model.train()
    opt, _ = make_optimizer(model, spec, a.optim)
    setup_s = time.monotonic() - LAUNCH
    if a.windows:
        train_on_windows(a, spec, model, opt, train, val, setup_s)
    else:
        timed(a, spec, model, opt, train, setup_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
