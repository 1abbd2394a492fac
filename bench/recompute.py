#!/usr/bin/python3
"""Activation recompute benchmark: dtrain's --recompute beside PyTorch's
torch.utils.checkpoint.checkpoint_sequential, in one run, one thread, one process.

Models, Adam 1e-3 on Fashion-MNIST, batch 64 (--batch):
  deep     flatten, 16 x [linear 1024, relu], linear 10 (34 layers; cross-entropy on scores)
  convnet  the seeds' ConvNet (12 layers; examples/convnet.ini's layer list)
each with recompute none and sqrt (dtrain: K = ceil(sqrt(layers)) layers per segment, so 6
segments of the deep model and 3 of the ConvNet; PyTorch: checkpoint_sequential over the
same number of segments, its last segment not checkpointed).

Figures, each the median over --reps rounds (the implementations alternate within a round):
  step ms     the median interval between the ends of consecutive steps (bench_tp.c,
              bench/torch_recompute.py);
  kept MB     what a forward leaves for its backward, the input batch and the parameters
              left out: dtrain's planned kept activations and saved masks and indices
              (dt_model_memory_info), PyTorch's tensors saved by autograd (counted with
              saved_tensors_hooks, each storage once);
  planned MB  dtrain's whole activation plan (dt_model_activation_bytes: kept, working,
              gradients and workspace); PyTorch's caching allocator plans nothing.
PyTorch runs eager, with torch.optim.Adam as it comes (on CPU its single-tensor loop) and,
where the installed torch has it (2.4 and later: not Debian's 1.13), with fused=True, its
fastest CPU Adam (--torch-adam picks the variants); each variant is a row of its own. Under
the table, dtrain's step time is set against the faster PyTorch variant of each model and
recompute setting, which the line names ("eager, fused Adam").
The targets (docs/BENCHMARKS.md): on the deep model, sqrt keeps >= 3x fewer bytes at <= 1.4x
the step time. Every measurement goes to bench/out/recompute-<time>.jsonl.

Usage (bench/recompute.sh calls it): /usr/bin/python3 bench/recompute.py --build BUILD_DIR
[--quick] [--torch-adam default,fused]
"""
import argparse
import math
import os
import sys

import benchlib as bl
from tp import cpu_model

DEEP_LAYERS = "flatten, " + ", ".join(["linear 1024, relu"] * 16) + ", linear 10"
MODELS = {
    "deep": {"settings": ["model.layers=" + DEEP_LAYERS, "loss.kind=cross_entropy",
                          "optim.kind=adam", "optim.lr=0.001"], "layers": 34},
    "convnet": {"settings": [], "layers": 12},  # the library's default model
}


def args_parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--torch-adam", default="default,fused",
                    help="PyTorch's Adam variants: default, fused or both (fused only where "
                         "the torch has it)")
    ap.add_argument("--quick", action="store_true", help="a few steps: checks the scripts")
    a = ap.parse_args()
    if a.quick:
        a.steps, a.warmup, a.reps = 3, 1, 1
    a.torch_adam = bl.adam_list(ap, a.torch_adam)
    return a


def segments(model):
    n = MODELS[model]["layers"]
    k = math.ceil(math.sqrt(n))
    return (n + k - 1) // k


def dtrain_run(a, model, recompute):
    cmd = [os.path.join(a.build, "bench_tp"), "--threads", "1", "--steps", str(a.steps),
           "--warmup", str(a.warmup)]
    for s in MODELS[model]["settings"] + ["train.batch=%d" % a.batch,
                                          "train.recompute=%s" % recompute]:
        cmd += ["--set", s]
    r = bl.launch(cmd, bl.thread_env(1), 1800)
    rank = r["ranks"][0]
    return {"step_ms": r["step_ms_median"], "kept_mb": rank["kept_bytes"] / 1e6,
            "planned_mb": rank["activation_bytes"] / 1e6, "raw": r}


def torch_run(a, var, model, recompute):
    nseg = segments(model) if recompute == "sqrt" else 1
    cmd = [var.python, os.path.join(bl.HERE, "torch_recompute.py"), "--model", model,
           "--batch", str(a.batch), "--segments", str(nseg), "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--adam", var.adam]
    r = bl.launch(cmd, bl.thread_env(1), 1800)
    return {"step_ms": r["step_ms_median"], "kept_mb": r["kept_bytes"] / 1e6,
            "planned_mb": None, "raw": r}


def main():
    a = args_parse()
    bl.init_blas(a.build)
    peers, notes = bl.adam_variants(bl.torch_peers(), a.torch_adam)
    rec = bl.Recorder("recompute")
    cells = {}  # (impl, model, recompute) -> list of results
    failures = []
    for rep in range(a.reps):
        for model in MODELS:
            for recompute in ("none", "sqrt"):
                impls = [("dtrain", None)] + [(p.key, p) for p in peers if not p.missing]
                impls = impls[rep % len(impls):] + impls[:rep % len(impls)]
                for key, peer in impls:
                    bl.log("round %d: %s %s recompute %s" % (rep + 1, key, model, recompute))
                    try:
                        r = (dtrain_run(a, model, recompute) if peer is None
                             else torch_run(a, peer, model, recompute))
                    except RuntimeError as e:
                        if peer is None:
                            print(str(e), file=sys.stderr)
                            return 1
                        failures.append(str(e))
                        continue
                    rec.write(dict(r["raw"], impl_key=key, model=model, recompute=recompute))
                    cells.setdefault((key, model, recompute), []).append(r)
    rec.close()
    labels = [("dtrain", "dtrain")] + [(p.key, p.label + (" (%s)" % p.missing
                                                           if p.missing else "")) for p in peers]
    rows, figs = [], {}
    for model in MODELS:
        for key, label in labels:
            fig = {}
            for recompute in ("none", "sqrt"):
                runs = cells.get((key, model, recompute), [])
                fig[recompute] = {f: bl.median([r[f] for r in runs])
                                  for f in ("step_ms", "kept_mb", "planned_mb")}
            figs[(key, model)] = fig
            n, s = fig["none"], fig["sqrt"]
            kept_ratio = (n["kept_mb"] / s["kept_mb"]
                          if n["kept_mb"] and s["kept_mb"] else None)
            time_ratio = (s["step_ms"] / n["step_ms"]
                          if n["step_ms"] and s["step_ms"] else None)
            rows.append([model, label, bl.fmt(n["step_ms"], ".1f"), bl.fmt(s["step_ms"], ".1f"),
                         bl.fmt(time_ratio, ".2f"), bl.fmt(n["kept_mb"], ".2f"),
                         bl.fmt(s["kept_mb"], ".2f"), bl.fmt(kept_ratio, ".1f"),
                         bl.fmt(n["planned_mb"], ".1f"), bl.fmt(s["planned_mb"], ".1f")])
    print("recompute sqrt against none, batch %d, 1 thread, medians of %d rounds (%s)" %
          (a.batch, a.reps, cpu_model()))
    print(bl.table("", ["model", "impl", "none ms", "sqrt ms", "time x", "none kept MB",
                        "sqrt kept MB", "kept /", "none planned MB", "sqrt planned MB"], rows))
    for line in headline(figs, peers):
        print(line)
    for note in notes:
        print(note)
    print("segments: deep %d, convnet %d; JSON lines: %s" % (segments("deep"),
                                                             segments("convnet"), rec.path))
    for f in failures:
        print("PyTorch failed: " + f[-600:])
    return 1 if failures else 0


def headline(figs, peers):
    """dtrain's step time over the fastest PyTorch row's, per model and recompute setting,
    naming that row (its version and Adam, eager)."""
    out = []
    for model in MODELS:
        for recompute in ("none", "sqrt"):
            d = figs[("dtrain", model)][recompute]["step_ms"]
            theirs = [(figs[(p.key, model)][recompute]["step_ms"], p) for p in peers
                      if figs.get((p.key, model)) and
                      figs[(p.key, model)][recompute]["step_ms"] is not None]
            if d is None or not theirs:
                out.append("dtrain %s recompute %s against PyTorch: not measured"
                           % (model, recompute))
                continue
            t, p = min(theirs, key=lambda x: x[0])
            out.append("dtrain %s recompute %s: %.1f ms, %.2fx the step time of the fastest "
                       "PyTorch, %s (eager, %s Adam): %.1f ms"
                       % (model, recompute, d, d / t, p.peer.label, p.adam, t))
    return out


if __name__ == "__main__":
    sys.exit(main())
