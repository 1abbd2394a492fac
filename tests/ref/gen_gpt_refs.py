#!/usr/bin/python3
"""gen_gpt_refs.py — writes tests/ref/gpt.safetensors, the PyTorch references of a whole
GPT-2 (src/nn/block.c, lm_head.c and the embedding, position and layernorm layers) that
tests/ref/test_ref_gpt.c reads.

Run by `make refs` with Debian's PyTorch 1.13 (/usr/bin/python3), which has neither
Hugging Face's transformers nor scaled_dot_product_attention: the model is GPT-2 written out
here as GPT2LMHeadModel computes it (pre-LayerNorm blocks, Conv1D projections x @ W + b with
W (in, out), the fused c_attn split into q, k, v, causal softmax scaled by 1/sqrt(head_dim),
GELU's tanh form, a final LayerNorm, the head tied to wte), in float64 from parameters and
inputs exactly representable in float32 (gen_refs.py's helpers), dropout off.

Case "gpt" (<tensor>; the __metadata__ describes it, the C test holds the same text): the
parameters under Hugging Face's names (transformer.wte.weight, transformer.h.0.ln_1.weight,
...; no lm_head.weight), idx (B, T) and targets (B, T) int64, logits (B, T, V), loss (the mean
cross-entropy over the B T tokens) and every parameter's gradient as "<name>.grad" (wte's is
the sum of the embedding's and the head's).

Case "adamw" (adamw.<tensor>): 20 steps of torch.optim.AdamW (lr 3e-3, betas (0.9, 0.99), eps
1e-8, weight decay 0.1 on the tensors of two or more dimensions only, nanoGPT's groups) with
clip_grad_norm_(1.0) before each, from the same parameters, on batches idx (20, B, T) and
targets (20, B, T): the loss of every step before its update (20) and the parameters after the
last ("adamw.<name>").

Usage: /usr/bin/python3 tests/ref/gen_gpt_refs.py [--out DIR]
"""

import math

import torch
import torch.nn.functional as F

from gen_refs import StWriter, reseed, uniform, write_one

EPS = float(torch.tensor(1e-5, dtype=torch.float32))
V, T, E, H, LAYERS, B = 256, 9, 30, 3, 2, 3  # head_dim 10: not a power of two


def params():
    """Random parameters (wider than GPT-2's initial ones, so every path carries signal)."""
    p = {}
    p["transformer.wte.weight"] = uniform((V, E), -0.5, 0.5)
    p["transformer.wpe.weight"] = uniform((T, E), -0.5, 0.5)
    for i in range(LAYERS):
        h = "transformer.h.%d." % i
        for ln in ("ln_1", "ln_2"):
            p[h + ln + ".weight"] = uniform((E,), 0.7, 1.3)
            p[h + ln + ".bias"] = uniform((E,), -0.2, 0.2)
        for name, i_, o in (("attn.c_attn", E, 3 * E), ("attn.c_proj", E, E),
                            ("mlp.c_fc", E, 4 * E), ("mlp.c_proj", 4 * E, E)):
            p[h + name + ".weight"] = uniform((i_, o), -1.0 / math.sqrt(i_), 1.0 / math.sqrt(i_))
            p[h + name + ".bias"] = uniform((o,), -0.1, 0.1)
    p["transformer.ln_f.weight"] = uniform((E,), 0.7, 1.3)
    p["transformer.ln_f.bias"] = uniform((E,), -0.2, 0.2)
    return p


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(p, idx):
    x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    D = E // H
    for i in range(LAYERS):
        h = "transformer.h.%d." % i
        a = F.layer_norm(x, (E,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], EPS)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = qkv.split(E, dim=2)
        q, k, v = (t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) * float(torch.tensor(1.0 / math.sqrt(D), dtype=torch.float32))
        s = s.masked_fill(~mask, float("-inf"))
        y = (F.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, E)
        x = x + y @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = F.layer_norm(x, (E,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], EPS)
        m = gelu_new(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (E,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], EPS)
    return x @ p["transformer.wte.weight"].t()


def gen_gpt():
    w = StWriter()
    reseed("gpt")
    p = params()
    for t in p.values():
        t.requires_grad_(True)
    idx = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(37))
    targets = torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(38))
    logits = forward(p, idx)
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))
    loss.backward()
    for name, t in p.items():
        w.add(name, t)
    w.add("idx", idx)
    w.add("targets", targets)
    w.add("logits", logits)
    w.add("loss", loss.reshape(1))
    for name, t in p.items():
        w.add(name + ".grad", t.grad)
    w.meta["gpt"] = "V=%d T=%d E=%d H=%d layers=%d B=%d eps=%g dropout=0" % (V, T, E, H, LAYERS,
                                                                           B, 1e-5)
    adamw_case(w)
    return w


STEPS = 20


def adamw_case(w):
    reseed("gpt")
    p = params()  # the same starting point as case "gpt"
    for t in p.values():
        t.requires_grad_(True)
    g = torch.Generator().manual_seed(39)
    idx = torch.randint(0, V, (STEPS, B, T), generator=g)
    targets = torch.randint(0, V, (STEPS, B, T), generator=g)
    decay = [t for t in p.values() if t.dim() >= 2]
    rest = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.99), eps=1e-8)
    losses = []
    for s in range(STEPS):
        opt.zero_grad()
        logits = forward(p, idx[s])
        loss = F.cross_entropy(logits.view(-1, V), targets[s].view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0)
        opt.step()
        losses.append(loss.item())
    w.add("adamw.idx", idx)
    w.add("adamw.targets", targets)
    w.add("adamw.loss", torch.tensor(losses))
    for name, t in p.items():
        w.add("adamw." + name, t)
    w.meta["adamw"] = ("steps=%d lr=0.003 betas=(0.9,0.99) eps=1e-08 weight_decay=0.1 on ndim>=2 "
                       "clip_norm=1" % STEPS)


def main():
    write_one(__doc__, "gen_gpt_refs", "gpt.safetensors", gen_gpt)


if __name__ == "__main__":
    main()
