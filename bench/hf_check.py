#!/usr/bin/env python3
"""A GPT exported by `dtrain export CKPT DIR --format hf`, loaded by Hugging Face's
GPT2LMHeadModel.from_pretrained(DIR) as it is, gives dtrain's numbers (issue 37, "Using the
model"). Bench-only, never in `make test`: it needs transformers.

Run it with a Python that has torch and transformers, e.g. bench/.venv (which
`python3 -m venv --system-site-packages bench/.venv && bench/.venv/bin/pip install transformers`
makes over Debian's PyTorch):

    bench/.venv/bin/python bench/hf_check.py --build build [--ckpt CKPT] [--prompt TEXT]

Without --ckpt it checks the tiny GPT of tests/infer/gpt_fixture.c (random weights). Steps:
  1. dtrain export CKPT DIR --format hf; from_pretrained(DIR) must load every tensor (no
     missing or unexpected key, lm_head tied to transformer.wte);
  2. dtrain generate CKPT --temperature 0 --logits FILE: the logits of every prompt position
     from dtrain's forward against GPT2LMHeadModel's, max|d| <= 1e-4 max(1, |logit|);
  3. greedy decoding on both sides from the same prompt: the same tokens up to the first
     step whose top-2 logit gap is below 1e-3 on either side (both gaps printed), and each
     step's logits from dtrain's key-value cache against GPT2LMHeadModel's forward of the
     same context (its last n_positions tokens);
  4. the mean cross-entropy (nats per byte) of the prompt's bytes after the first, from
     both sides' logits, within relative 1e-5 (a validation loss over this text);
  5. with --val (a checkpoint of a text run): the validation loss of `dtrain eval CKPT`
     against GPT2LMHeadModel's over the same validation windows (text.h: the last
     val_fraction of the corpus cut into windows of n_positions + 1 bytes at offsets 0,
     n_positions, ...; the mean cross-entropy over every predicted byte), within relative
     1e-5; the corpus is --text-files (default: the fortunes corpus's regular files, not
     .dat, in byte order of their paths), split at --val-fraction (default 0.1);
  6. the other way: a GPT2LMHeadModel of Hugging Face's own random initialisation, written
     by save_pretrained (safetensors), read by `dtrain generate DIR --config`: its prompt
     logits and greedy steps against the model's.
Prints each comparison and exits 1 when one fails.
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import torch
from safetensors.torch import load_file
from transformers import GPT2LMHeadModel
from transformers.utils import logging as hf_logging

LOGIT_TOL = 1e-4
LOSS_TOL = 1e-5
GAP = 1e-3


def run(cmd):
    print("$", " ".join(cmd))
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: exit status {r.returncode}: {r.stderr.decode(errors='replace')}")
    return r


def close(name, got, ref):
    """max|got - ref| <= LOGIT_TOL max(1, |ref|) element-wise; prints the worst ratio."""
    bound = LOGIT_TOL * torch.clamp(ref.abs(), min=1.0)
    err = (got - ref).abs()
    ratio = (err / bound).max().item()
    print(f"  {name}: max|d| {err.max().item():.3g}, max|logit| {ref.abs().max().item():.3g}, "
          f"worst |d| / (1e-4 max(1, |logit|)) {ratio:.3g} -> {'ok' if ratio <= 1 else 'FAIL'}")
    return ratio <= 1


def gap(row):
    top2 = torch.topk(row, 2).values
    return (top2[0] - top2[1]).item()


def from_hf(dtrain, tmp, prompt_text, tokens):
    """Step 5: save_pretrained's directory into dtrain generate."""
    from transformers import GPT2Config
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=256, n_positions=16, n_embd=48, n_layer=3, n_head=6,
                     initializer_range=0.3, tie_word_embeddings=True)
    model = GPT2LMHeadModel(cfg).eval()
    hf_dir = os.path.join(tmp, "from_hf")
    model.save_pretrained(hf_dir, safe_serialization=True)
    ini = os.path.join(tmp, "from_hf.ini")
    with open(ini, "w") as f:
        f.write("[model]\nlayers = transformer.wte: embedding 256 48, transformer.wpe: position, "
                "transformer.drop: dropout 0.1, transformer.h: 3 x block 6 p=0.1 attn_p=0.1, "
                "transformer.ln_f: layernorm, lm_head\n")
    out = os.path.join(tmp, "from_hf.safetensors")
    print("  GPT2LMHeadModel.save_pretrained (3 blocks, 6 heads, E 48) into dtrain generate:")
    run([dtrain, "generate", hf_dir, "--config", ini, "--prompt", prompt_text, "--tokens",
         str(tokens), "--temperature", "0", "--logits", out])
    got = load_file(out)
    prompt = got["prompt"].long()
    with torch.no_grad():
        ref = model(prompt[None, :]).logits[0].float()
    ok = close(f"prompt logits ({len(prompt)} positions)", got["prompt_logits"], ref)
    ctx, same, worst = prompt.tolist(), 0, 0.0
    for i in range(tokens):
        with torch.no_grad():
            row = model(torch.tensor([ctx[-16:]])).logits[0, -1].float()
        worst = max(worst, ((got["step_logits"][i] - row).abs()
                            / (LOGIT_TOL * torch.clamp(row.abs(), min=1.0))).max().item())
        tok = int(torch.argmax(row))
        if min(gap(row), gap(got["step_logits"][i])) < GAP:
            print(f"  step {i}: top-2 gap below {GAP}: tokens compared up to here")
            break
        if tok != int(got["tokens"][i]):
            print(f"FAIL: step {i}: dtrain chose {int(got['tokens'][i])}, GPT2LMHeadModel {tok}")
            ok = False
            break
        same += 1
        ctx.append(tok)
    print(f"  steps' logits: worst |d| / (1e-4 max(1, |logit|)) {worst:.3g}; greedy tokens: "
          f"{same} of {tokens} equal")
    print(f"  dtrain: {bytes(got['tokens'].tolist())!r}")
    return ok and worst <= 1


def corpus(files):
    """text.h's corpus: every path named or matched, sorted by byte order, concatenated."""
    if not files:
        d = "/usr/share/games/fortunes"
        paths = [os.path.join(d, n) for n in os.listdir(d)
                 if not n.endswith(".dat") and not os.path.islink(os.path.join(d, n))
                 and os.path.isfile(os.path.join(d, n))]
    else:
        paths = []
        for item in files.split(","):
            item = item.strip()
            paths += sorted(glob.glob(item)) if any(c in item for c in "*?[") else [item]
    paths.sort(key=lambda p: p.encode())
    return b"".join(open(p, "rb").read() for p in paths)


def val_loss(dtrain, ckpt, model, n_positions, files, fraction):
    """Step 5: dtrain eval's validation loss against GPT2LMHeadModel's."""
    data = corpus(files)
    n_train = math.floor((1.0 - fraction) * len(data))
    val = torch.tensor(list(data[n_train:]), dtype=torch.long)
    T = n_positions
    windows = (len(val) - 1) // T
    total, count = 0.0, 0
    with torch.no_grad():
        for i0 in range(0, windows, 64):
            idx = torch.stack([val[i * T:(i + 1) * T] for i in range(i0, min(windows, i0 + 64))])
            tgt = torch.stack([val[i * T + 1:(i + 1) * T + 1]
                               for i in range(i0, min(windows, i0 + 64))])
            logits = model(idx).logits.double()
            total += torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                       tgt.reshape(-1), reduction="sum").item()
            count += tgt.numel()
    hf = total / count
    out = run([dtrain, "eval", ckpt]).stdout.decode()
    m = re.search(r"test loss ([0-9.]+)", out)
    if m is None:
        print(f"FAIL: no test loss in dtrain eval's output: {out!r}")
        return False
    dt = float(m.group(1))
    rel = abs(dt - hf) / hf
    print(f"  validation loss over {windows} windows of {T}: dtrain eval {dt:.6f}, "
          f"GPT2LMHeadModel {hf:.6f} nats/byte, relative difference {rel:.3g} -> "
          f"{'ok' if rel <= LOSS_TOL else 'FAIL'} (dtrain eval prints 6 decimals)")
    return rel <= LOSS_TOL


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with dtrain (and gpt_fixture)")
    ap.add_argument("--ckpt", help="a GPT checkpoint (default: gpt_fixture's)")
    ap.add_argument("--prompt", default="The quick brown fox jumps", help="text to continue")
    ap.add_argument("--tokens", type=int, default=24, help="greedy steps")
    ap.add_argument("--val", action="store_true",
                    help="--ckpt is a text run's: compare its validation loss (step 5)")
    ap.add_argument("--text-files", default="", help="the run's data.text_files ('': fortunes)")
    ap.add_argument("--val-fraction", type=float, default=0.1, help="the run's data.val_fraction")
    a = ap.parse_args()
    dtrain = os.path.join(a.build, "dtrain")
    tmp = tempfile.mkdtemp(prefix="dtrain-hf-")
    ckpt = a.ckpt
    if ckpt is None:
        run([os.path.join(a.build, "tests", "gpt_fixture"), tmp])
        ckpt = os.path.join(tmp, "ckpt")
    hf_dir = os.path.join(tmp, "hf")
    run([dtrain, "export", ckpt, hf_dir, "--format", "hf"])
    cfg = json.load(open(os.path.join(hf_dir, "config.json")))
    print(f"  config.json: n_layer {cfg['n_layer']}, n_head {cfg['n_head']}, n_embd "
          f"{cfg['n_embd']}, n_positions {cfg['n_positions']}")

    # 1. from_pretrained as it is; a missing or unexpected tensor is a failure, not a warning.
    hf_logging.set_verbosity_error()
    model, info = GPT2LMHeadModel.from_pretrained(hf_dir, output_loading_info=True)
    model.eval()
    bad = {k: v for k, v in info.items() if v}
    print(f"  from_pretrained: loading info {info}")
    ok = not bad
    if bad:
        print(f"FAIL: from_pretrained reported {bad}")
    tied = model.lm_head.weight.data_ptr() == model.transformer.wte.weight.data_ptr()
    print(f"  lm_head tied to transformer.wte: {tied}")
    ok &= tied

    # 2. The prompt's logits.
    logits_file = os.path.join(tmp, "logits.safetensors")
    run([dtrain, "generate", ckpt, "--prompt", a.prompt, "--tokens", str(a.tokens),
         "--temperature", "0", "--logits", logits_file])
    got = load_file(logits_file)
    prompt = got["prompt"].long()
    with torch.no_grad():
        ref = model(prompt[None, :]).logits[0].float()
    ok &= close(f"prompt logits ({len(prompt)} positions)", got["prompt_logits"], ref)

    # 3. Greedy decoding on both sides.
    T = cfg["n_positions"]
    ctx = prompt.tolist()
    hf_tokens, hf_gaps, dt_gaps, step_ok = [], [], [], True
    for i in range(a.tokens):
        with torch.no_grad():
            row = model(torch.tensor([ctx[-T:]])).logits[0, -1].float()
        step_ok &= close(f"step {i} logits (dtrain's cache vs GPT2LMHeadModel)",
                         got["step_logits"][i], row) if i < 3 or i == a.tokens - 1 else \
            bool(((got["step_logits"][i] - row).abs()
                  <= LOGIT_TOL * torch.clamp(row.abs(), min=1.0)).all())
        hf_gaps.append(gap(row))
        dt_gaps.append(gap(got["step_logits"][i]))
        tok = int(torch.argmax(row))
        hf_tokens.append(tok)
        ctx.append(tok)
    print(f"  every step's logits within the bound: {step_ok}")
    ok &= step_ok
    dt_tokens = got["tokens"].tolist()
    agree = 0
    for i in range(a.tokens):
        if min(hf_gaps[i], dt_gaps[i]) < GAP:
            print(f"  step {i}: top-2 gap {hf_gaps[i]:.3g} (GPT2LMHeadModel), {dt_gaps[i]:.3g} "
                  f"(dtrain) below {GAP}: tokens compared up to here")
            break
        if hf_tokens[i] != dt_tokens[i]:
            print(f"FAIL: step {i}: dtrain chose {dt_tokens[i]}, GPT2LMHeadModel {hf_tokens[i]}")
            ok = False
            break
        agree += 1
    print(f"  greedy tokens: {agree} of {a.tokens} equal (smallest top-2 gap: GPT2LMHeadModel "
          f"{min(hf_gaps):.3g}, dtrain {min(dt_gaps):.3g})")
    print(f"  dtrain:          {bytes(dt_tokens)!r}")
    print(f"  GPT2LMHeadModel: {bytes(hf_tokens)!r}")

    # 4. Cross-entropy of the prompt's bytes after the first.
    tgt = prompt[1:]
    ce = torch.nn.functional.cross_entropy
    l_dt = ce(got["prompt_logits"][:-1].double(), tgt).item()
    l_hf = ce(ref[:-1].double(), tgt).item()
    rel = abs(l_dt - l_hf) / abs(l_hf)
    print(f"  cross-entropy of the prompt: dtrain {l_dt:.9g}, GPT2LMHeadModel {l_hf:.9g} nats/byte,"
          f" relative difference {rel:.3g} -> {'ok' if rel <= LOSS_TOL else 'FAIL'}")
    ok &= rel <= LOSS_TOL
    if a.val:
        ok &= val_loss(dtrain, ckpt, model, T, a.text_files, a.val_fraction)
    ok &= from_hf(dtrain, tmp, a.prompt, a.tokens)
    print("hf_check: all checks passed" if ok else "hf_check: FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
