#!/usr/bin/python3
"""Training benchmark: dtrain against Debian's PyTorch 1.13 and the newest PyTorch
from PyPI on the MLP and the ConvNet at batch 64, 1 and 2 threads, in the same run.

For every (model, threads) it reports the median over --reps runs of: steady-state samples/s
(bench_train.c and torch_train.py measure it identically), peak resident memory, time from
launch to the end of the first training step, and the GFLOP/s each reaches beside what
OpenBLAS sgemm reaches on the model's own products (sgemm_peak.c). Implementations are
interleaved (the order rotates every repetition) so that drifting machine load spreads over
all of them, and the machine's 2-process/1-process parallel ratio is measured before and
after. Every measurement goes to bench/out/train-<time>.jsonl as it arrives.

Usage (bench/run.sh calls it): /usr/bin/python3 bench/run.py --build BUILD_DIR [--quick]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import benchlib as bl


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with bench_train")
    ap.add_argument("--reps", type=int, default=5, help="repetitions (median taken; >= 3)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default="mlp,convnet")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--mlp-steps", type=int, default=400)
    ap.add_argument("--mlp-warmup", type=int, default=50)
    ap.add_argument("--convnet-steps", type=int, default=60)
    ap.add_argument("--convnet-warmup", type=int, default=10)
    ap.add_argument("--sgemm-time", type=float, default=0.3,
                    help="seconds of timing per product in sgemm_peak")
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="tiny step counts, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.mlp_steps, a.mlp_warmup = 1, 5, 2
        a.convnet_steps, a.convnet_warmup, a.sgemm_time, a.spin = 3, 1, 0.02, 0.2
    elif a.reps < 3:
        ap.error("--reps must be at least 3 (medians); --quick checks the scripts")
    a.threads = [int(t) for t in a.threads.split(",")]
    a.models = a.models.split(",")
    for m in a.models:
        if m not in bl.MODELS:
            ap.error("unknown model %s (%s)" % (m, ", ".join(bl.MODELS)))
    return a


def machine_info():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=bl.ROOT,
                            capture_output=True, text=True).stdout.strip()
    return {"event": "machine", "cpu": cpu, "cpus": os.cpu_count(),
            "kernel": platform.release(), "commit": commit}


def train_cmd(peer, model, threads, a, build):
    steps = a.mlp_steps if model == "mlp" else a.convnet_steps
    warmup = a.mlp_warmup if model == "mlp" else a.convnet_warmup
    if peer.key == "dtrain":
        return [os.path.join(build, "bench_train"), bl.MODELS[model], "--batch", str(a.batch),
                "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup)]
    return [peer.python, os.path.join(bl.HERE, "torch_train.py"), "--model", model,
            "--batch", str(a.batch), "--threads", str(threads), "--steps", str(steps),
            "--warmup", str(warmup)]


def main():
    started = time.monotonic()
    a = args_parse()
    build = os.path.abspath(a.build)
    bench_train = os.path.join(build, "bench_train")
    sgemm_peak = os.path.join(build, "sgemm_peak")
    for exe in (bench_train, sgemm_peak):
        if not os.access(exe, os.X_OK):
            sys.exit("run.py: %s missing: build first (make, or cmake --build %s)" % (exe, build))
    rec = bl.Recorder("train")
    info = dict(machine_info(), openblas_coretype=bl.init_blas(build))
    rec.write(info)
    peers = [bl.Peer("dtrain", "dtrain")] + bl.torch_peers()
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    runnable = [p for p in peers if p.missing is None]

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})

    sgemm = {}  # (model, threads) -> the model line of sgemm_peak
    for model in a.models:
        for threads in a.threads:
            bl.log("sgemm_peak %s, %d thread(s)..." % (model, threads))
            cmd = [sgemm_peak, bl.MODELS[model], "--batch", str(a.batch), "--threads",
                   str(threads), "--min-time", str(a.sgemm_time)]
            r = subprocess.run(cmd, cwd=bl.ROOT, env=bl.thread_env(threads),
                               capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                sys.exit("run.py: %s failed:\n%s" % (" ".join(cmd), r.stderr))
            for line in r.stdout.splitlines():
                obj = dict(json.loads(line), event="sgemm", model=model)
                rec.write(obj)
                if obj["gemm"] == "model":
                    sgemm[(model, threads)] = obj

    results = {}  # (model, threads, peer key) -> list of run records
    for rep in range(a.reps):
        for model in a.models:
            for threads in a.threads:
                order = runnable[rep % len(runnable):] + runnable[:rep % len(runnable)]
                for peer in order:
                    bl.log("rep %d/%d  %-7s %d thread(s)  %s" % (rep + 1, a.reps, model, threads,
                                                                  peer.label))
                    try:
                        r = bl.launch(train_cmd(peer, model, threads, a, build),
                                      bl.thread_env(threads), 600)
                    except RuntimeError as e:
                        bl.log("FAILED: %s" % e)
                        rec.write({"event": "failed", "peer": peer.key, "model": model,
                                   "threads": threads, "rep": rep, "error": str(e)})
                        continue
                    r = dict(r, event="train", peer=peer.key, model=model, rep=rep)
                    rec.write(r)
                    results.setdefault((model, threads, peer.key), []).append(r)

    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    summary = summarize(a, peers, results, sgemm)
    for s in summary:
        rec.write(dict(s, event="summary"))
    print(report(a, info, peers, summary, ratio_before, ratio_after, rec.path,
                 time.monotonic() - started))
    rec.close()
    return 0


def summarize(a, peers, results, sgemm):
    """One record per (model, threads): medians of each peer's figures."""
    out = []
    for model in a.models:
        for threads in a.threads:
            s = {"model": model, "threads": threads, "batch": a.batch, "reps": a.reps}
            sg = sgemm.get((model, threads))
            flop = sg["flop_per_step"] if sg else None
            if sg:
                s["sgemm_gflops"] = sg["gflops"]
                s["sgemm_bound_samples_per_s"] = sg["sgemm_bound_samples_per_s"]
                s["flop_per_step"] = flop
            for p in peers:
                runs = results.get((model, threads, p.key), [])
                if not runs:
                    s[p.key] = None
                    continue
                sps = bl.median([r["samples_per_s"] for r in runs])
                s[p.key] = {
                    "label": p.label, "runs": len(runs), "samples_per_s": sps,
                    "peak_rss_mb": bl.median([r["peak_rss_mb"] for r in runs]),
                    "first_step_s": bl.median([r["first_step_s"] for r in runs]),
                    "setup_s": bl.median([r["setup_s"] for r in runs]),
                    "load_s": bl.median([r["load_s"] for r in runs]),
                    # start-up beyond data loading, per run, then the median. Both read in
                    # the training process on its one clock (load_s inside [launch,
                    # setup_s]), so never negative; another process's loading would be
                    # another clock's interval, and work of its own.
                    "setup_beyond_load_s": bl.median([r["setup_s"] - r["load_s"] for r in runs]),
                    "step_ms_median": bl.median([r["step_ms_median"] for r in runs]),
                    "planned_mb": bl.median([r.get("planned_mb") for r in runs]),
                    "gflops": flop * sps / a.batch * 1e-9 if flop else None,
                    "blas": bl.dtrain_blas(runs),
                }
            out.append(s)
    return out


def cell(s, key, field, spec):
    v = s.get(key)
    return "n/a" if v is None else bl.fmt(v[field], spec)


def ratio(s, key_a, key_b, field, invert=False):
    va, vb = s.get(key_a), s.get(key_b)
    if va is None or vb is None or not va[field] or not vb[field]:
        return "n/a"
    return "%.2f" % (vb[field] / va[field] if invert else va[field] / vb[field])


def startup(s, key):
    v = s.get(key)
    if v is None:
        return "n/a"
    return "%s / %.3f / %.3f" % (bl.fmt(v["load_s"], ".3f"), v["setup_s"], v["first_step_s"])


def report(a, info, peers, summary, ratio_before, ratio_after, path, took_s):
    lbl = {p.key: (p.label if p.missing is None else "%s: %s" % (p.label, p.missing))
           for p in peers}
    tp, tn = "torch_debian", "torch_pypi"
    out = ["dtrain training benchmark: batch %d, median of %d run(s) per cell%s" %
           (a.batch, a.reps, " (--quick: NOT a measurement)" if a.quick else ""),
           "machine: %s, %s CPUs, kernel %s; commit %s" % (info["cpu"], info["cpus"],
                                                          info["kernel"], info["commit"]),
           "peers: " + "; ".join(lbl[p.key] for p in peers),
           "dtrain's BLAS: " + next((s["dtrain"]["blas"] for s in summary if s.get("dtrain")),
                                    "unknown") + bl.coretype_note(), ""]
    rows = [[s["model"], str(s["threads"]), cell(s, "dtrain", "samples_per_s", ".0f"),
             cell(s, tp, "samples_per_s", ".0f"), cell(s, tn, "samples_per_s", ".0f"),
             ratio(s, "dtrain", tp, "samples_per_s"), ratio(s, "dtrain", tn, "samples_per_s")]
            for s in summary]
    out.append(bl.table("Throughput, samples/s (steady state: median step time)",
                        ["model", "threads", "dtrain", "torch 1.13", "torch newest",
                         "dtrain/1.13", "dtrain/newest"], rows))
    rows = [[s["model"], str(s["threads"]), cell(s, "dtrain", "peak_rss_mb", ".0f"),
             cell(s, tp, "peak_rss_mb", ".0f"), cell(s, tn, "peak_rss_mb", ".0f"),
             ratio(s, "dtrain", tp, "peak_rss_mb", True),
             ratio(s, "dtrain", tn, "peak_rss_mb", True)] for s in summary]
    out.append(bl.table("Peak resident memory, MB",
                        ["model", "threads", "dtrain", "torch 1.13", "torch newest",
                         "1.13/dtrain", "newest/dtrain"], rows))
    rows = [[s["model"], str(s["threads"])] + [startup(s, k) for k in ("dtrain", tp, tn)]
            for s in summary]
    out.append(bl.table("Start-up, s: loading the data takes / training starts / first step "
                        "ends (the last two from launch)", ["model", "threads", "dtrain", "torch 1.13",
                                          "torch newest"], rows))
    rows = []
    for s in summary:
        d = s.get("dtrain")
        pct = ("%.0f%%" % (100 * d["gflops"] / s["sgemm_gflops"])
               if d and d["gflops"] and s.get("sgemm_gflops") else "n/a")
        rows.append([s["model"], str(s["threads"]), cell(s, "dtrain", "gflops", ".1f"),
                     cell(s, tp, "gflops", ".1f"), cell(s, tn, "gflops", ".1f"),
                     bl.fmt(s.get("sgemm_gflops"), ".1f"), pct,
                     bl.fmt(s.get("sgemm_bound_samples_per_s"), ".0f")])
    out.append(bl.table("GFLOP/s of the model's matrix products (FLOPs per step / step time) "
                        "beside OpenBLAS sgemm alone on the same products",
                        ["model", "threads", "dtrain", "torch 1.13", "torch newest",
                         "sgemm", "dtrain/sgemm", "sgemm-only samples/s"], rows))
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: 2-thread figures are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    out.append("")
    out.append("targets%s:" % (" -- --quick: meaningless" if a.quick else ""))
    for s in summary:
        name = "%s, %d thread(s)" % (s["model"], s["threads"])
        d = s.get("dtrain")
        if d is None:
            out.append("  %s: dtrain did not run" % name)
            continue
        for key in (tp, tn):
            p = s.get(key)
            if p is None:
                continue
            r = d["samples_per_s"] / p["samples_per_s"]
            # MLP: 1.5x both; ConvNet: at least 1.13's, the newest's ratio reported only.
            need = 1.5 if s["model"] == "mlp" else (1.0 if key == tp else None)
            if need is None:
                out.append("  %s: throughput %.2fx %s (reported, no target)" %
                           (name, r, p["label"]))
            else:
                out.append("  %s: throughput %.2fx %s (target %.1fx): %s" %
                           (name, r, p["label"], need, "met" if r >= need else "NOT met"))
            m = p["peak_rss_mb"] / d["peak_rss_mb"]
            out.append("  %s: peak memory 1/%.1f of %s (target 1/5): %s" %
                       (name, m, p["label"], "met" if m >= 5 else "NOT met"))
        out.append("  %s: start-up beyond loading the data %.0f ms (target 50 ms): %s;"
                   " the first step then ends after %.0f ms (steady state %.1f ms)" %
                   (name, d["setup_beyond_load_s"] * 1e3,
                    "met" if d["setup_beyond_load_s"] <= 0.05 else "NOT met",
                    (d["first_step_s"] - d["setup_s"]) * 1e3, d["step_ms_median"]))
        out.append("  %s: dtrain's planned memory %.0f MB of its %.0f MB peak (the rest: data "
                   "sets, code)" % (name, d["planned_mb"], d["peak_rss_mb"]))
    out.append("")
    out.append("took %.1f min" % (took_s / 60))
    out.append("JSON lines: %s" % os.path.relpath(path, bl.ROOT))
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
