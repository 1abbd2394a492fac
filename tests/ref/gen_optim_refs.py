#!/usr/bin/python3
"""gen_optim_refs.py — writes tests/ref/optim_groups.safetensors, the PyTorch references of
weight-decay groups (optim.decay = matrices) and global-norm clipping (optim.clip_norm)
that tests/ref/test_ref_optim_groups.c reads.

Run by `make refs` with Debian's PyTorch 1.13 (/usr/bin/python3), importing gen_refs.py's
safetensors writer, seeding and float32-exact inputs. Every reference is computed in
float64 from inputs exactly representable in float32.

The parameters are those of dtrain's model "embedding 8 4, layernorm, linear 6" on 3 token
ids, laid out as its flat buffer (TENSORS below, in order). Two param groups as nanoGPT
and Megatron-LM make them: the tensors of two or more dimensions with weight_decay, the
others (LayerNorm's gain and bias, the linear bias) with 0. Before each opt.step(),
torch.nn.utils.clip_grad_norm_(params, max_norm) when max_norm > 0.

Cases (<case>.<tensor>; the __metadata__ describes each, the C test holds the same text):
  p0 (n), grads (steps, n) before clipping, lr (steps), norms (steps): the total norm
  clip_grad_norm_ returned (0 when not clipping), params (steps, n) after each step.

Usage: /usr/bin/python3 tests/ref/gen_optim_refs.py [--out DIR]
"""


import torch

from gen_refs import StWriter, f32, reseed, uniform, write_one

TENSORS = [("0.weight", (8, 4)), ("1.weight", (4,)), ("1.bias", (4,)), ("2.weight", (6, 4)),
           ("2.bias", (6,))]
# Gradient scale per step: the norm of steps 2 and 4 is below max_norm 1, the others above
# it (clipped).
SCALES = [2.0, 0.05, 1.0, 0.02, 3.0, 0.5]


def layout():
    return " ".join("%s(%s)" % (n, ",".join(str(d) for d in s)) for n, s in TENSORS)


def case(w, name, kind, wd, max_norm, lrs, **kw):
    reseed(name)
    params = [torch.nn.Parameter(uniform(s)) for _, s in TENSORS]
    p0 = torch.cat([p.detach().reshape(-1) for p in params])
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": wd}, {"params": rest, "weight_decay": 0.0}]
    if kind == "sgd":
        opt = torch.optim.SGD(groups, lr=lrs[0], momentum=kw["momentum"])
    else:
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        opt = cls(groups, lr=lrs[0], betas=(0.9, 0.999), eps=1e-8)
    n = p0.numel()
    grads = torch.stack([f32(uniform((n,)) * s) for s in SCALES])
    out, norms = [], []
    for t in range(len(SCALES)):
        at = 0
        for p in params:
            p.grad = grads[t, at:at + p.numel()].reshape(p.shape).clone()
            at += p.numel()
        for g in opt.param_groups:
            g["lr"] = lrs[t]
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, max_norm))
                     if max_norm > 0 else 0.0)
        opt.step()
        out.append(torch.cat([p.detach().reshape(-1) for p in params]))
    w.add(name + ".p0", p0)
    w.add(name + ".grads", grads)
    w.add(name + ".lr", torch.tensor(lrs))
    w.add(name + ".norms", torch.tensor(norms))
    w.add(name + ".params", torch.stack(out))
    extra = " momentum=%g" % kw["momentum"] if kind == "sgd" else ""
    w.meta[name] = "kind=%s%s weight_decay=%g decay=matrices clip_norm=%g steps=%d | %s" % (
        kind, extra, wd, max_norm, len(SCALES), layout())


def gen():
    w = StWriter()
    lrs = [0.01, 0.01, 0.008, 0.006, 0.004, 0.002]
    case(w, "adamw_clip", "adamw", 0.1, 1.0, lrs)
    case(w, "adam_l2_clip", "adam", 0.05, 1.0, lrs)
    case(w, "sgd_clip", "sgd", 0.05, 1.0, [0.1] * 6, momentum=0.9)
    case(w, "adamw_noclip", "adamw", 0.1, 0.0, lrs)
    return w


def main():
    write_one(__doc__, "gen_optim_refs", "optim_groups.safetensors", gen)


if __name__ == "__main__":
    main()
