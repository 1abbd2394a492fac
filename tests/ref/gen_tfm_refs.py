#!/usr/bin/python3
"""gen_tfm_refs.py — writes tests/ref/tfm.safetensors, the PyTorch references of the
transformer's kernels (src/tensor/tfm_kernels.h) that tests/ref/test_ref_tfm.c reads.

Run by `make refs` with Debian's PyTorch 1.13 (/usr/bin/python3) like gen_refs.py, whose
safetensors writer, seeding and float32-exact inputs it imports: every reference is computed
in float64 from inputs exactly representable in float32, so the C side loads the very same
numbers and only its own float32 arithmetic differs. Constants the kernels take as float
(LayerNorm's eps, attention's scale 1/sqrt(D)) are rounded to float32 here too.

Cases (<case>.<tensor>; the __metadata__ describes each, the C test holds the same text):
  ln_*    torch.nn.LayerNorm(n, eps): x (rows, n), weight, bias, y, mean, rstd (rows;
          rstd = 1/sqrt(biased var + eps)), dy, dx, weight.grad, bias.grad
  gelu_*  F.gelu(x, approximate='tanh'): x, y, dy, dx
  emb_*   y = wte[tok] + wpe[pos0 + t]: tok (T) int64, wte (V, E), wpe (P, E), y (T, E), dy,
          wte.grad, wpe.grad
  attn_*  causal self-attention of one sequence from the fused projection qkv (T, 3E)
          (q, k, v = columns [0, E), [E, 2E), [2E, 3E), head h = columns h*D.. of each), by
          the explicit formula (1.13 has no scaled_dot_product_attention): softmax of
          scale * q k^T with j > i masked, times v; y (T, E), lse (H, T) the log-sum-exp
          of each row's scores, dy, dqkv (T, 3E)

Usage: /usr/bin/python3 tests/ref/gen_tfm_refs.py [--out DIR]
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from gen_refs import StWriter, f32, reseed, uniform, write_one

EPS = float(torch.tensor(1e-5, dtype=torch.float32))


# ---- LayerNorm -------------------------------------------------------------------------------

def ln_case(w, name, rows, n, offset=0.0):
    reseed(name)
    ln = nn.LayerNorm(n, eps=EPS)
    with torch.no_grad():
        ln.weight.copy_(uniform((n,), 0.5, 1.5))
        ln.bias.copy_(uniform((n,), -0.5, 0.5))
    x = f32(uniform((rows, n)) + offset).requires_grad_(True)
    y = ln(x)
    dy = uniform(y.shape)
    y.backward(dy)
    xd = x.detach()
    mean = xd.mean(dim=1)
    rstd = 1.0 / torch.sqrt(xd.var(dim=1, unbiased=False) + EPS)
    for suffix, t in (("x", x), ("weight", ln.weight), ("bias", ln.bias), ("y", y),
                      ("mean", mean), ("rstd", rstd), ("dy", dy), ("dx", x.grad),
                      ("weight.grad", ln.weight.grad), ("bias.grad", ln.bias.grad)):
        w.add("%s.%s" % (name, suffix), t)
    w.meta[name] = "kind=layernorm rows=%d n=%d eps=%g" % (rows, n, 1e-5)


# ---- GELU ------------------------------------------------------------------------------------

def gelu_case(w, name, n):
    reseed(name)
    x = uniform((n,), -5.0, 5.0).requires_grad_(True)
    y = F.gelu(x, approximate="tanh")
    dy = uniform(y.shape)
    y.backward(dy)
    for suffix, t in (("x", x), ("y", y), ("dy", dy), ("dx", x.grad)):
        w.add("%s.%s" % (name, suffix), t)
    w.meta[name] = "kind=gelu_tanh n=%d" % n


# ---- embedding -------------------------------------------------------------------------------

def emb_case(w, name, tokens, V, P, E, pos0):
    reseed(name)
    T = len(tokens)
    tok = torch.tensor(tokens, dtype=torch.int64)
    wte = uniform((V, E)).requires_grad_(True)
    wpe = uniform((P, E)).requires_grad_(True)
    y = F.embedding(tok, wte) + F.embedding(torch.arange(pos0, pos0 + T), wpe)
    dy = uniform(y.shape)
    y.backward(dy)
    for suffix, t in (("tok", tok), ("wte", wte), ("wpe", wpe), ("y", y), ("dy", dy),
                      ("wte.grad", wte.grad), ("wpe.grad", wpe.grad)):
        w.add("%s.%s" % (name, suffix), t)
    w.meta[name] = "kind=embedding T=%d V=%d P=%d E=%d pos0=%d" % (T, V, P, E, pos0)


# ---- causal self-attention -------------------------------------------------------------------

def attention(qkv, H, scale):
    """GPT-2's attention core on one sequence: (T, 3E) -> y (T, E), lse (H, T)."""
    T, E3 = qkv.shape
    E = E3 // 3
    D = E // H
    q, k, v = (t.reshape(T, H, D).transpose(0, 1) for t in qkv.split(E, dim=1))
    s = (q @ k.transpose(-2, -1)) * scale
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    s = s.masked_fill(~causal, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    y = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(T, E)
    return y, lse


def attn_case(w, name, T, H, D):
    reseed(name)
    scale = float(torch.tensor(1.0 / math.sqrt(D), dtype=torch.float32))
    qkv = uniform((T, 3 * H * D), -2.0, 2.0).requires_grad_(True)
    y, lse = attention(qkv, H, scale)
    dy = uniform(y.shape)
    y.backward(dy)
    for suffix, t in (("qkv", qkv), ("y", y), ("lse", lse), ("dy", dy), ("dqkv", qkv.grad)):
        w.add("%s.%s" % (name, suffix), t)
    w.meta[name] = "kind=attention T=%d H=%d D=%d" % (T, H, D)


def gen_tfm():
    w = StWriter()
    ln_case(w, "ln_a", 3, 24)
    ln_case(w, "ln_b", 6, 37)
    ln_case(w, "ln_one", 1, 5)
    # A large common offset: a one-pass float variance loses it.
    ln_case(w, "ln_offset", 4, 40, offset=20.0)
    gelu_case(w, "gelu_a", 37)
    gelu_case(w, "gelu_b", 300)
    emb_case(w, "emb_one", [4], 13, 10, 20, 0)
    emb_case(w, "emb_rep", [3, 7, 0, 3, 12, 7, 3], 13, 10, 20, 0)
    emb_case(w, "emb_pos0", [1, 1, 5, 9, 2], 13, 10, 20, 4)
    # T = 1; 1 to 4 heads; D not a power of two (20, 12, 6); T past one tile of 64 (67,
    # and 130: two boundaries, a last block of 2 rows).
    attn_case(w, "attn_t1", 1, 1, 8)
    attn_case(w, "attn_t5", 5, 2, 20)
    attn_case(w, "attn_t37", 37, 3, 12)
    attn_case(w, "attn_t67", 67, 4, 6)
    attn_case(w, "attn_t130", 130, 1, 4)
    return w


def main():
    write_one(__doc__, "gen_tfm_refs", "tfm.safetensors", gen_tfm)


if __name__ == "__main__":
    main()
