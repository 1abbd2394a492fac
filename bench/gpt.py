#!/usr/bin/python3
"""The GPT benchmark (issue 37 "Measured", docs/BENCHMARKS.md "The GPT against PyTorch"): dtrain
(bench_train) against the newest PyTorch from PyPI (bench/.venv) and Debian's PyTorch 1.13 on
two GPT sizes at 1 and 2 threads, in the same run.

Sizes: small (examples/gpt.ini: 4 layers, 4 heads, E 128, block 64; batch 16) and nano
(bench/gpt_nano.ini, nanoGPT's character model: 6 layers, 6 heads, E 384, block 256; batch 8).
Both sides start from the same weights (bench_train --save-init) and run the config's AdamW
(the same decay groups, betas, clipping) at a constant optim.lr, timed the same way (the
interval between the ends of consecutive steps, drawing the windows included, median after
warm-up: bench_train.c, torch_gpt.py).

PyTorch at its best (issue 39): every AdamW its version has (fused, foreach, default) eagerly
and fused under torch.compile, as columns; the headline compares against the fastest eager
one and names it. At more than 1 thread each PyTorch first tries its thread settings (every
library at N; OpenMP at N and the BLAS at 1) once per size with its headline optimizer, and
the repetitions run with the faster, which the output names. dtrain runs as bench_train does
(train.threads = N, BLAS on one thread each).

Before timing, the like-for-like check: with dropout set to 0 and the same weights and
windows (dtrain train --windows-out), dtrain's first step's loss and each PyTorch's agree
within 1e-4 (printed, and the run stops if not).

For every cell: tokens/s medians with their spread (min-max over --reps >= 3 runs, the order
rotated every repetition), peak RSS, dtrain's planned memory beside its peak and the
design's minimum for the same batch and threads (bench_train's minimum_mb; docs/
ARCHITECTURE.md, "A GPT's memory"; target: planned within 10% of it), and the GEMM share: the GFLOP/s dtrain's step reaches on the model's products (bench/model_gemms.h) over
what OpenBLAS sgemm reaches on the same products alone (sgemm_peak). The machine's
2-process/1-process parallel ratio is measured before and after (bench/benchlib.py). JSON
lines go to bench/out/gpt-<time>.jsonl as they arrive.

Usage (bench/gpt.sh calls it): /usr/bin/python3 bench/gpt.py --build BUILD_DIR [--quick]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import benchlib as bl
from benchlib import Variant  # one column: a peer, its AdamW, eager or compiled
from run import machine_info

SIZES = {"small": ("examples/gpt.ini", 16), "nano": ("bench/gpt_nano.ini", 8)}
LOSS_TOL = 1e-4


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with bench_train, dtrain")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (>= 3)")
    ap.add_argument("--sizes", default="small,nano")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--small-steps", type=int, default=60)
    ap.add_argument("--small-warmup", type=int, default=10)
    ap.add_argument("--nano-steps", type=int, default=20)
    ap.add_argument("--nano-warmup", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    ap.add_argument("--peers", default="torch_debian,torch_pypi",
                    help="which PyTorch peers run (torch_debian, torch_pypi); the like-for-like "
                         "check runs every installed one")
    ap.add_argument("--optims", default="fused,foreach,default",
                    help="the PyTorch AdamW forms timed (the headline is the fastest)")
    ap.add_argument("--sgemm-time", type=float, default=0.3)
    ap.add_argument("--spin", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true",
                    help="a few steps, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.sgemm_time, a.spin = 1, 0.02, 0.2
        a.small_steps, a.small_warmup, a.nano_steps, a.nano_warmup = 3, 1, 2, 1
    elif a.reps < 3:
        ap.error("--reps must be at least 3 (medians and spread); --quick checks the scripts")
    a.threads = [int(t) for t in a.threads.split(",")]
    a.sizes = a.sizes.split(",")
    for s in a.sizes:
        if s not in SIZES:
            ap.error("unknown size %s (%s)" % (s, ", ".join(SIZES)))
    return a


def thread_envs(threads):
    """PyTorch's thread settings to try: {name: environment}."""
    every = bl.thread_env(threads)
    if threads == 1:
        return {"all 1": every}
    blas1 = dict(every, OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return {"all %d" % threads: every, "OpenMP %d, BLAS 1" % threads: blas1}


def steps_of(a, size):
    return ((a.small_steps, a.small_warmup) if size == "small" else (a.nano_steps, a.nano_warmup))


def cmd_of(v, size, threads, a, build, init):
    cfg, batch = SIZES[size]
    steps, warmup = steps_of(a, size)
    if v.peer.key == "dtrain":
        return [os.path.join(build, "bench_train"), cfg, "--batch", str(batch), "--threads",
                str(threads), "--steps", str(steps), "--warmup", str(warmup)]
    cmd = [v.peer.python, os.path.join(bl.HERE, "torch_gpt.py"), "--config", cfg, "--batch",
           str(batch), "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup),
           "--optim", v.optim, "--init", init]
    return cmd + (["--compile"] if v.compiled else [])


def dropout_free(cfg, out):
    """A copy of the config with every dropout 0 and no train.eval_every (the check's run
    evaluates nothing worth its time)."""
    with open(os.path.join(bl.ROOT, cfg)) as f:
        text = f.read()
    text = re.sub(r"\bdropout\s+[0-9.]+", "dropout 0.0", text)
    text = re.sub(r"\b(p|attn_p)=[0-9.]+", r"\1=0.0", text)
    text = re.sub(r"(?m)^eval_every\s*=.*$", "", text)
    with open(out, "w") as f:
        f.write(text)
    return out


def like_for_like(size, peers, build, init, work, rec):
    """The first step's loss on both sides, dropout 0, the same weights and windows."""
    cfg, batch = SIZES[size]
    cfg0 = dropout_free(cfg, os.path.join(work, "gpt-%s-nodropout.ini" % size))
    win, met = os.path.join(work, "gpt-%s-windows.txt" % size), os.path.join(work, "m.jsonl")
    bl.run_text([os.path.join(build, "dtrain"), "train", cfg0, "--max-steps", "1", "--batch",
                 str(batch), "--threads", "1", "--log-every", "1", "--set", "train.eval=off",
                 "--init-weights", init, "--windows-out", win, "--metrics", met,
                 "--no-progress"], bl.thread_env(1), 600)
    with open(met) as f:
        ours = [json.loads(ln) for ln in f if '"step"' in ln][0]["loss"]
    out = {"dtrain": ours}
    for p in peers:
        r = bl.launch([p.python, os.path.join(bl.HERE, "torch_gpt.py"), "--config", cfg0,
                       "--batch", str(batch), "--optim", "default", "--init", init, "--windows",
                       win, "--train-steps", "1"], bl.thread_env(1), 600)
        out[p.key] = r["first_loss"]
    worst = max(abs(v - ours) for v in out.values())
    rec.write({"event": "first_loss", "size": size, "losses": out, "max_abs_diff": worst,
               "tolerance": LOSS_TOL})
    line = "like-for-like %s (dropout 0, same weights and windows): first step's loss %s" % (
        size, ", ".join("%s %.7f" % (k, v) for k, v in out.items()))
    if worst > LOSS_TOL:
        sys.exit("gpt.py: %s\ndiffer by %.2e > %g: the models are not the same" %
                 (line, worst, LOSS_TOL))
    bl.log(line + ": max |diff| %.1e <= %g" % (worst, LOSS_TOL))
    return line + ": max |diff| %.1e (<= %g)" % (worst, LOSS_TOL)


def run_one(v, size, threads, a, build, init, env, rec, extra):
    try:
        r = bl.launch(cmd_of(v, size, threads, a, build, init), env, 900)
    except RuntimeError as e:
        reason = bl.failure_reason(str(e))
        bl.log("FAILED %s: %s" % (v.label, reason))
        rec.write(dict(extra, event="failed", variant=v.key, size=size, threads=threads,
                       error=reason))
        return None, reason
    r = dict(r, event="train", variant=v.key, size=size, **extra)
    rec.write(r)
    return r, None


def main():
    started = time.monotonic()
    a = args_parse()
    build = os.path.abspath(a.build)
    for exe in ("bench_train", "sgemm_peak", "dtrain"):
        if not os.access(os.path.join(build, exe), os.X_OK):
            sys.exit("gpt.py: %s missing: build first" % os.path.join(build, exe))
    sgemm_peak = os.path.join(build, "sgemm_peak")
    rec = bl.Recorder("gpt")
    work = os.path.join(bl.HERE, "out", "gpt-work")
    os.makedirs(work, exist_ok=True)
    info = dict(machine_info(), openblas_coretype=bl.init_blas(build))
    rec.write(info)
    peers = bl.torch_peers()
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    torch_ok = [p for p in peers if p.missing is None]
    dtrain = Variant(bl.Peer("dtrain", "dtrain"), None)
    variants = [dtrain]
    for p in torch_ok:
        if p.key not in a.peers.split(","):
            continue
        for o in a.optims.split(","):
            variants.append(Variant(p, o))
        if not a.no_compile:
            variants.append(Variant(p, "fused", True))

    inits, checks = {}, []
    for size in a.sizes:
        cfg = SIZES[size][0]
        inits[size] = os.path.join(work, "gpt-%s-init.safetensors" % size)
        bl.launch([os.path.join(build, "bench_train"), cfg, "--save-init", inits[size]],
                  bl.thread_env(1), 600)
        checks.append(like_for_like(size, torch_ok, build, inits[size], work, rec))

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    sgemm = {}
    for size in a.sizes:
        cfg, batch = SIZES[size]
        for threads in a.threads:
            bl.log("sgemm_peak %s, %d thread(s)..." % (size, threads))
            r = subprocess.run([sgemm_peak, cfg, "--batch", str(batch), "--threads",
                                str(threads), "--min-time", str(a.sgemm_time)], cwd=bl.ROOT,
                               env=bl.thread_env(threads), capture_output=True, text=True,
                               timeout=900)
            if r.returncode != 0:
                sys.exit("gpt.py: sgemm_peak %s failed:\n%s" % (cfg, r.stderr))
            for line in r.stdout.splitlines():
                obj = dict(json.loads(line), event="sgemm", size=size)
                rec.write(obj)
                if obj["gemm"] == "model":
                    sgemm[(size, threads)] = obj

    # PyTorch's thread setting per (peer, size, threads): the faster of thread_envs, tried
    # once each with the fused (else foreach) eager AdamW.
    envs, failed = {}, {}
    for size in a.sizes:
        for threads in a.threads:
            for p in torch_ok:
                options = thread_envs(threads)
                if len(options) == 1 or a.quick:
                    envs[(p.key, size, threads)] = next(iter(options.items()))
                    continue
                best = None
                for name, env in options.items():
                    for o in ("fused", "foreach"):
                        r, _ = run_one(Variant(p, o), size, threads, a, build, inits[size], env,
                                       rec, {"threads": threads, "probe": name})
                        if r is not None:
                            break
                    if r is not None and (best is None or r["tokens_per_s"] > best[2]):
                        best = (name, env, r["tokens_per_s"])
                envs[(p.key, size, threads)] = (best or next(iter(options.items())))[:2]
                bl.log("%s, %s, %d threads: thread setting %s" %
                       (p.label, size, threads, envs[(p.key, size, threads)][0]))

    results = {}
    for rep in range(a.reps):
        for size in a.sizes:
            for threads in a.threads:
                k = rep % len(variants)
                for v in variants[k:] + variants[:k]:
                    if a.quick and v.compiled and (size, threads) != (a.sizes[0], a.threads[0]):
                        # --quick: compile checked once, it takes minutes
                        failed[(v.key, size, threads)] = "--quick runs it in the first cell only"
                        continue
                    if (v.key, size, threads) in failed:
                        continue
                    env_name, env = (("dtrain", bl.thread_env(threads)) if v.peer.key == "dtrain"
                                     else envs[(v.peer.key, size, threads)])
                    bl.log("rep %d/%d  %s %d thread(s)  %s" % (rep + 1, a.reps, size, threads,
                                                               v.label))
                    r, why = run_one(v, size, threads, a, build, inits[size], env, rec,
                                     {"threads": threads, "rep": rep, "thread_setting": env_name})
                    if r is None:
                        failed[(v.key, size, threads)] = why
                    else:
                        results.setdefault((v.key, size, threads), []).append(r)

    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})
    summary = summarize(a, variants, results, failed, sgemm, envs)
    for s in summary:
        rec.write(dict(s, event="summary"))
    print(report(a, info, peers, variants, summary, checks, ratio_before, ratio_after,
                 rec.path, time.monotonic() - started))
    rec.close()
    return 0


def stats(runs, field):
    vals = [r[field] for r in runs]
    return {"median": bl.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def summarize(a, variants, results, failed, sgemm, envs):
    out = []
    for size in a.sizes:
        cfg, batch = SIZES[size]
        for threads in a.threads:
            s = {"size": size, "config": cfg, "batch": batch, "threads": threads,
                 "reps": a.reps, "cols": {}}
            sg = sgemm.get((size, threads))
            if sg:
                s["sgemm_gflops"] = sg["gflops"]
            for v in variants:
                runs = results.get((v.key, size, threads))
                if not runs:
                    s["cols"][v.key] = {"label": v.label,
                                        "missing": failed.get((v.key, size, threads), "not run")}
                    continue
                c = {"label": v.label, "tokens_per_s": stats(runs, "tokens_per_s"),
                     "peak_rss_mb": bl.median([r["peak_rss_mb"] for r in runs]),
                     "thread_setting": runs[0].get("thread_setting"),
                     "attention": runs[0].get("attention")}
                if v.peer.key == "dtrain":
                    c["planned_mb"] = bl.median([r["planned_mb"] for r in runs])
                    c["minimum_mb"] = bl.median([r["minimum_mb"] for r in runs])
                    c["gflops"] = bl.median([r["gflops"] for r in runs])
                    if sg:
                        c["gemm_share"] = c["gflops"] / sg["gflops"]
                s["cols"][v.key] = c
            # Each PyTorch's fastest eager column: the headline's peer.
            for p in {v.peer.key for v in variants if v.peer.key != "dtrain"}:
                eager = [(c["tokens_per_s"]["median"], k) for k, c in s["cols"].items()
                         if k.startswith(p + "/") and "+compile" not in k and "missing" not in c]
                if eager:
                    s.setdefault("best_eager", {})[p] = max(eager)[1]
            out.append(s)
    return out


def spread(c):
    if "missing" in c:
        return "n/a"
    t = c["tokens_per_s"]
    return "%.0f (%.0f-%.0f)" % (t["median"], t["min"], t["max"])


def report(a, info, peers, variants, summary, checks, r0, r1, path, took_s):
    out = ["dtrain GPT benchmark: tokens/s, median (min-max) of %d run(s) per cell%s" %
           (a.reps, " (--quick: NOT a measurement)" if a.quick else ""),
           "machine: %s, %s CPUs, kernel %s; commit %s" % (info["cpu"], info["cpus"],
                                                          info["kernel"], info["commit"]),
           "peers: " + "; ".join(p.label + (": " + p.missing if p.missing else "")
                                 for p in peers) + bl.coretype_note()]
    out += checks + [""]
    # Columns that ran nowhere (1.13 has neither fused AdamW nor torch.compile) go to the notes.
    ran = [v for v in variants if any("missing" not in s["cols"][v.key] for s in summary)]
    gone = {v.label: next(s["cols"][v.key]["missing"] for s in summary) for v in variants
            if v not in ran}
    variants = ran
    rows, head = [], ["size", "thr"] + [v.label for v in variants]
    for s in summary:
        rows.append([s["size"], str(s["threads"])] + [spread(s["cols"][v.key]) for v in variants])
    out.append(bl.table("Throughput, tokens/s (median step; batch: small 16, nano 8)", head, rows))
    rows = []
    for s in summary:
        row = [s["size"], str(s["threads"])]
        for v in variants:
            c = s["cols"][v.key]
            row.append("n/a" if "missing" in c else "%.0f" % c["peak_rss_mb"])
        d = s["cols"]["dtrain"]
        row += (["-", "-", "-"] if "missing" in d else
                ["%.0f" % d["planned_mb"], "%.0f" % d["minimum_mb"],
                 "%.3f" % (d["planned_mb"] / d["minimum_mb"])])
        rows.append(row)
    out.append(bl.table("Peak resident memory, MiB (dtrain planned: parameters, gradients, "
                        "AdamW state, activations, workspaces; the design's minimum of the same)",
                        head + ["dtrain planned", "design minimum", "planned/minimum"], rows))
    rows = []
    for s in summary:
        d = s["cols"]["dtrain"]
        ok = "missing" not in d
        rows.append([s["size"], str(s["threads"]), "%.1f" % d["gflops"] if ok else "n/a",
                     bl.fmt(s.get("sgemm_gflops"), ".1f"),
                     "%.2f" % d["gemm_share"] if ok and "gemm_share" in d else "n/a"])
    out.append(bl.table("GEMM share: dtrain's step GFLOP/s on the model's products over OpenBLAS "
                        "sgemm alone on the same products (target >= 0.8)",
                        ["size", "thr", "dtrain", "sgemm alone", "share"], rows))
    notes = ["  %s: %s" % (k, why) for k, why in gone.items()]
    for s in summary:
        for k, c in s["cols"].items():
            if "missing" in c and c["label"] not in gone:
                notes.append("  %s, %d thread(s), %s: %s" % (s["size"], s["threads"], c["label"],
                                                            c["missing"]))
    if notes:
        out += ["columns that did not run (n/a):"] + sorted(set(notes)) + [""]
    flag = min(r0, r1) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (2 processes / 1): before %.2f, after %.2f%s" %
               (r0, r1, "  <-- below %.1f: 2-thread cells are flagged and do not count" %
                bl.PARALLEL_RATIO_MIN if flag else ""))
    out.append("")
    out.append("targets%s:" % (" -- --quick: meaningless" if a.quick else ""))
    for s in summary:
        name = "%s, %d thread(s)" % (s["size"], s["threads"])
        d = s["cols"]["dtrain"]
        if "missing" in d:
            out.append("  %s: dtrain did not run" % name)
            continue
        dt = d["tokens_per_s"]["median"]
        for p, k in sorted(s.get("best_eager", {}).items()):
            c = s["cols"][k]
            r = dt / c["tokens_per_s"]["median"]
            out.append("  %s: tokens/s %.2fx %s, eager (its fastest; threads %s) (target 1.0x): %s"
                       % (name, r, c["label"], c["thread_setting"],
                          "met" if r >= 1.0 else "NOT met"))
            m = c["peak_rss_mb"] / d["peak_rss_mb"]
            need = 5.0 if s["size"] == "small" else 1.0
            out.append("  %s: peak memory 1/%.2f of %s (target %s): %s" %
                       (name, m, c["label"], "1/5" if need == 5 else "below it",
                        "met" if m >= need and (need == 5 or m > 1) else "NOT met"))
        for k, c in s["cols"].items():
            if "+compile" in k and "missing" not in c:
                out.append("  %s: tokens/s %.2fx %s" % (name, dt / c["tokens_per_s"]["median"],
                                                        c["label"]))
        if "gemm_share" in d:
            out.append("  %s: GEMM share %.2f (target 0.8): %s" %
                       (name, d["gemm_share"], "met" if d["gemm_share"] >= 0.8 else "NOT met"))
        out.append("  %s: dtrain planned %.0f MiB of its %.0f MiB peak" %
                   (name, d["planned_mb"], d["peak_rss_mb"]))
        r = d["planned_mb"] / d["minimum_mb"]
        out.append("  %s: planned memory %.3fx the design's minimum %.0f MiB (target <= 1.10): %s"
                   % (name, r, d["minimum_mb"], "met" if r <= 1.10 else "NOT met"))
    out.append("")
    out.append("took %.1f min" % (took_s / 60))
    out.append("JSON lines: %s" % os.path.relpath(path, bl.ROOT))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
