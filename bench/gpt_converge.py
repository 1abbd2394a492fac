#!/usr/bin/python3
"""The GPT's convergence against PyTorch (issue 37 "Measured", docs/BENCHMARKS.md "The GPT
against PyTorch"): the small model (examples/gpt.ini) at batch 32 for 2000 steps with dropout 0,
from the same initial weights (bench_train --save-init) on the same training windows (`dtrain
train --windows-out`, read by bench/torch_gpt.py --windows), with the config's schedule
(warm-up, cosine to schedule.min_lr over the run) on both sides. Compares the final validation
loss (include/dtrain/text.h's definition on both sides; target: within 0.02 nats of
PyTorch's) and draws both learning curves with `dtrain plot`.

Usage (bench/gpt.sh BUILD converge calls it):
    /usr/bin/python3 bench/gpt_converge.py --build BUILD_DIR [--steps 2000] [--quick]
"""
import argparse
import json
import os
import sys
import time

import benchlib as bl
from gpt import dropout_free

TARGET = 0.02


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--config", default="examples/gpt.ini")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="20 steps: checks the scripts only")
    a = ap.parse_args()
    if a.quick:
        a.steps, a.eval_every = 20, 10
    build = os.path.abspath(a.build)
    # The newest PyTorch (PyPI), else Debian's 1.13 (whose AdamW has no fused=: foreach).
    peers = {p.key: p for p in bl.torch_peers() if p.missing is None}
    torch = peers.get("torch_pypi") or peers.get("torch_debian")
    if torch is None:
        sys.exit("gpt_converge.py: no PyTorch installed (bench/gpt.sh installs bench/.venv)")
    started = time.monotonic()
    rec = bl.Recorder("gpt-converge")
    work = os.path.join(bl.HERE, "out", "gpt-converge-%s" % time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(work)
    cfg = dropout_free(a.config, os.path.join(work, "gpt-nodropout.ini"))
    init, win = os.path.join(work, "init.safetensors"), os.path.join(work, "windows.txt")
    ours, theirs = os.path.join(work, "dtrain.jsonl"), os.path.join(work, "torch.jsonl")
    env = bl.thread_env(a.threads)
    bl.launch([os.path.join(build, "bench_train"), cfg, "--save-init", init], env, 600)
    bl.log("dtrain: %d steps of batch %d..." % (a.steps, a.batch))
    _, dtrain_s = bl.run_text(
        [os.path.join(build, "dtrain"), "train", cfg, "--batch", str(a.batch), "--max-steps",
         str(a.steps), "--eval-every", str(a.eval_every), "--threads", str(a.threads),
         "--log-every", "1", "--init-weights", init, "--windows-out", win, "--metrics", ours,
         "--no-progress"], env, 7200)
    bl.log("%s: the same %d steps on dtrain's windows..." % (torch.label, a.steps))
    r = bl.launch([torch.python, os.path.join(bl.HERE, "torch_gpt.py"), "--config", cfg,
                   "--batch", str(a.batch), "--threads", str(a.threads), "--optim",
                   "fused" if torch.key == "torch_pypi" else "foreach",
                   "--init", init, "--windows", win, "--train-steps", str(a.steps),
                   "--eval-every", str(a.eval_every), "--metrics", theirs], env, 7200)
    with open(ours) as f:
        evals = [json.loads(ln) for ln in f if '"eval"' in ln]
    mine = evals[-1]["test_loss"]
    with open(theirs) as f:
        tevals = [json.loads(ln) for ln in f if '"eval"' in ln]
    diff = mine - r["final_val_loss"]
    curves = []
    for name, path in (("dtrain", ours), ("torch", theirs)):
        svg = os.path.join(work, "%s-curve.svg" % name)
        bl.run_text([os.path.join(build, "dtrain"), "plot", path, "-o", svg], env, 600)
        curves.append(os.path.relpath(svg, bl.ROOT))
    summary = {"event": "summary", "config": a.config, "batch": a.batch, "steps": a.steps,
               "dtrain_val_loss": mine, "torch_val_loss": r["final_val_loss"],
               "torch": torch.label, "diff": diff, "target": TARGET,
               "dtrain_curve": [(e["step"], e["test_loss"]) for e in evals],
               "torch_curve": [(e["step"], e["test_loss"]) for e in tevals],
               "dtrain_train_s": dtrain_s, "curves": curves}
    rec.write(summary)
    rec.close()
    out = ["GPT convergence: %s, batch %d, %d steps, dropout 0, the same initial weights and "
           "windows%s" % (a.config, a.batch, a.steps, " (--quick: NOT a measurement)"
                          if a.quick else ""),
           bl.table("Validation loss, nats/byte (include/dtrain/text.h's windows)",
                    ["step", "dtrain", torch.label],
                    [[str(e["step"]), "%.4f" % e["test_loss"],
                      "%.4f" % t["test_loss"] if t["step"] == e["step"] else "?"]
                     for e, t in zip(evals, tevals)]),
           "final: dtrain %.4f, %s %.4f: difference %+.4f nats (target within %.2f): %s" %
           (mine, torch.label, r["final_val_loss"], diff, TARGET,
            "met" if abs(diff) <= TARGET else "NOT met"),
           "learning curves (dtrain plot): " + ", ".join(curves),
           "took %.1f min; JSON lines: %s" % ((time.monotonic() - started) / 60,
                                              os.path.relpath(rec.path, bl.ROOT))]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
