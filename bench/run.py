#!/usr/bin/python3
"""Training benchmark: dtrain against Debian's PyTorch 1.13 and the newest PyTorch from PyPI
on the MLP and the ConvNet at batch 64, 1 and 2 threads, in the same run.

Each PyTorch at its best (issue 39; docs/BENCHMARKS.md "The peers"): every Adam it has on the
CPU (fused, foreach, default: the single-tensor loop that torch.optim.Adam() gives there), the
model under torch.compile (mode default) and, for the ConvNet, channels_last, each a column;
a column that fails, or that this PyTorch lacks, is named with the reason. The headline
compares dtrain with each PyTorch's fastest column and names it ("eager, fused Adam"). At
more than 1 thread each PyTorch first tries its thread settings (OpenMP and the BLAS both at
N; the BLAS at 1; OpenMP at 1) in a short probe per model, and runs with the fastest, which
the tables name.

For every (model, threads) it reports the median over --reps runs of: steady-state samples/s
(bench_train.c and torch_train.py measure it identically), peak resident memory, time from
launch to the end of the first training step, and the GFLOP/s each reaches beside what
OpenBLAS sgemm reaches on the model's own products (sgemm_peak.c). Which BLAS each PyTorch
calls (torch.__config__.show() and the library it maps), and, at 1 thread, its torch.mm on
the model's own products beside OpenBLAS's sgemm (bench/torch_gemm.py): how much of the lead
is the kernel. Implementations are interleaved (the order rotates every repetition) so that
drifting machine load spreads over all of them, and the machine's 2-process/1-process
parallel ratio is measured before and after. Every measurement goes to
bench/out/train-<time>.jsonl as it arrives.

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

# The short run each thread setting gets before the repetitions: (steps, warm-up) per model.
PROBE_STEPS = {"mlp": (100, 20), "convnet": (15, 3)}


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
    ap.add_argument("--optims", default="fused,foreach,default",
                    help="PyTorch's Adam forms, one column each (the headline: the fastest)")
    ap.add_argument("--no-compile", action="store_true", help="no torch.compile column")
    ap.add_argument("--no-channels-last", action="store_true",
                    help="no channels_last column for the ConvNet")
    ap.add_argument("--probe-rounds", type=int, default=2,
                    help="runs of each thread setting in the probe before the repetitions")
    ap.add_argument("--sgemm-time", type=float, default=0.3,
                    help="seconds of timing per product in sgemm_peak and torch_gemm.py")
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="tiny step counts, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.mlp_steps, a.mlp_warmup = 1, 5, 2
        a.convnet_steps, a.convnet_warmup, a.sgemm_time, a.spin = 3, 1, 0.02, 0.2
        a.probe_rounds = 1
    elif a.reps < 3:
        ap.error("--reps must be at least 3 (medians); --quick checks the scripts")
    if a.probe_rounds < 1:
        ap.error("--probe-rounds must be at least 1")
    a.threads = [int(t) for t in a.threads.split(",")]
    a.models = a.models.split(",")
    for m in a.models:
        if m not in bl.MODELS:
            ap.error("unknown model %s (%s)" % (m, ", ".join(bl.MODELS)))
    a.optims = a.optims.split(",")
    for o in a.optims:
        if o not in bl.ADAM_NAMES:
            ap.error("--optims: unknown Adam %s (%s)" % (o, ", ".join(bl.ADAM_NAMES)))
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


def steps_of(a, model, probe=False):
    if probe and not a.quick:
        return PROBE_STEPS[model]
    return (a.mlp_steps, a.mlp_warmup) if model == "mlp" else (a.convnet_steps, a.convnet_warmup)


def train_cmd(v, model, threads, a, build, probe=False):
    """The command of one measurement; for PyTorch `threads` is its torch.set_num_threads
    (the thread setting's OpenMP count)."""
    steps, warmup = steps_of(a, model, probe)
    if v.peer.key == "dtrain":
        return [os.path.join(build, "bench_train"), bl.MODELS[model], "--batch", str(a.batch),
                "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup)]
    cmd = [v.peer.python, os.path.join(bl.HERE, "torch_train.py"), "--model", model,
           "--batch", str(a.batch), "--threads", str(threads), "--steps", str(steps),
           "--warmup", str(warmup), "--optim", v.optim]
    return (cmd + (["--compile"] if v.compiled else [])
            + (["--channels-last"] if v.layout == "channels_last" else []))


def applies(v, model):
    return v.layout != "channels_last" or model == "convnet"


def run_one(v, model, threads, a, build, setting, rec, extra, probe=False):
    """One run of column `v`: (record, None) or (None, the reason it failed). `setting`:
    (name, torch threads, environment) from benchlib.thread_settings."""
    name, torch_threads, env = setting
    try:
        r = bl.launch(train_cmd(v, model, torch_threads if v.peer.key != "dtrain" else threads,
                                a, build, probe), env, 900)
    except RuntimeError as e:
        why = bl.failure_reason(str(e))
        bl.log("FAILED %s: %s" % (v.label, why))
        rec.write(dict(extra, event="failed", variant=v.key, peer=v.peer.key, model=model,
                       threads=threads, thread_setting=name, probe=probe, error=why))
        return None, why
    r = dict(r, event="probe" if probe else "train", variant=v.key, peer=v.peer.key,
             model=model, threads=threads, thread_setting=name, **extra)
    rec.write(r)
    return r, None


def probe_threads(a, build, model, threads, peer, v, rec):
    """The fastest of benchlib.thread_settings(threads) for `peer` on `model`: each setting
    runs --probe-rounds short runs of column `v` (interleaved); the best median wins.
    Returns (setting, {name: median samples/s or None})."""
    options = bl.thread_settings(threads)
    if len(options) == 1:
        return options[0], {}
    got = {o[0]: [] for o in options}
    for rnd in range(a.probe_rounds):
        k = rnd % len(options)
        for opt in options[k:] + options[:k]:
            bl.log("probe %s, %d threads, %s: %s" % (model, threads, v.label, opt[0]))
            r, _ = run_one(v, model, threads, a, build, opt, rec, {"round": rnd}, probe=True)
            if r is not None:
                got[opt[0]].append(r["samples_per_s"])
    med = {name: bl.median(vals) for name, vals in got.items()}
    ran = [(m, name) for name, m in med.items() if m is not None]
    best = max(ran)[1] if ran else options[0][0]
    chosen = next(o for o in options if o[0] == best)
    rec.write({"event": "thread_setting", "peer": peer.key, "variant": v.key, "model": model,
               "threads": threads, "chosen": best, "probe_samples_per_s": med})
    return chosen, med


def gemm_attribution(a, build, model, peer, rec):
    """bench/torch_gemm.py at 1 thread: this PyTorch's torch.mm beside OpenBLAS's sgemm on
    the model's own products. Its "model" record, or None (logged) where it fails."""
    cmd = [peer.python, os.path.join(bl.HERE, "torch_gemm.py"), "--build", build,
           bl.MODELS[model], "--batch", str(a.batch), "--threads", "1", "--min-time",
           str(a.sgemm_time), "--json"]
    try:
        out, _ = bl.run_text(cmd, bl.thread_env(1), 900)
    except RuntimeError as e:
        bl.log("FAILED torch_gemm.py (%s): %s" % (peer.label, bl.failure_reason(str(e))))
        rec.write({"event": "failed", "what": "torch_gemm", "peer": peer.key, "model": model,
                   "error": bl.failure_reason(str(e))})
        return None
    model_line = None
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        obj = dict(json.loads(line), event="torch_gemm", peer=peer.key, model=model)
        rec.write(obj)
        if obj["gemm"] == "model":
            model_line = obj
    return model_line


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
    torch_ok = [p for p in peers[1:] if p.missing is None]
    caps, gone = {}, {}  # gone: {column label: why it is not in the table}
    dtrain = bl.Variant(peers[0], None)
    variants = [dtrain]
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    for p in torch_ok:
        caps[p.key] = bl.torch_caps(p)
        rec.write(dict(caps[p.key], event="peer", peer=p.key, label=p.label))
        bl.log("  %s: BLAS %s; fused Adam on the CPU: %s; torch.compile: %s" %
               (p.label, caps[p.key].get("blas", "?"), caps[p.key].get("fused_adam") or "yes",
                "yes" if caps[p.key].get("compile") else "no"))
        vs, notes = bl.torch_variants(p, caps[p.key], a.optims, not a.no_compile,
                                      () if a.no_channels_last else ("channels_last",))
        variants += vs
        gone.update(notes)

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
    gemm = {}  # (model, peer key) -> torch_gemm.py's model line, 1 thread
    for model in (a.models if 1 in a.threads else []):  # read beside the 1-thread cells
        for p in torch_ok:
            bl.log("torch_gemm.py %s, %s, 1 thread..." % (model, p.label))
            gemm[(model, p.key)] = gemm_attribution(a, build, model, p, rec)

    # Each PyTorch's thread setting per (model, threads): the fastest in a short probe with
    # its first eager column (fused Adam where it has one, else foreach).
    settings, probes = {}, {}
    for model in a.models:
        for threads in a.threads:
            for p in torch_ok:
                first = next(v for v in variants if v.peer is p and not v.compiled
                             and not v.layout)
                settings[(model, threads, p.key)], probes[(model, threads, p.key)] = \
                    probe_threads(a, build, model, threads, p, first, rec)
                if threads > 1:
                    bl.log("%s, %s, %d threads: %s" % (p.label, model, threads,
                                                       settings[(model, threads, p.key)][0]))

    results, failed = {}, {}  # (model, threads, variant key) -> runs / why it did not run
    for rep in range(a.reps):
        for model in a.models:
            for threads in a.threads:
                k = rep % len(variants)
                for v in variants[k:] + variants[:k]:
                    cell = (model, threads, v.key)
                    if not applies(v, model):
                        failed[cell] = "the ConvNet's only"
                        continue
                    if a.quick and v.compiled and (model, threads) != (a.models[0], a.threads[0]):
                        # --quick: compiling takes tens of seconds; checked in one cell
                        failed[cell] = "--quick runs it in the first cell only"
                        continue
                    if cell in failed:
                        continue  # it failed once: the same would fail again
                    setting = (("dtrain", threads, bl.thread_env(threads))
                               if v.peer.key == "dtrain" else settings[(model, threads,
                                                                        v.peer.key)])
                    bl.log("rep %d/%d  %-7s %d thread(s)  %s" % (rep + 1, a.reps, model,
                                                                  threads, v.label))
                    r, why = run_one(v, model, threads, a, build, setting, rec, {"rep": rep})
                    if r is None:
                        failed[cell] = why
                    else:
                        results.setdefault(cell, []).append(r)

    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    summary = summarize(a, peers, variants, results, failed, sgemm, gemm, settings, probes)
    for s in summary:
        rec.write(dict(s, event="summary"))
    print(report(a, info, peers, caps, variants, gone, summary, ratio_before, ratio_after,
                 rec.path, time.monotonic() - started))
    rec.close()
    return 0


def column(v, runs, a, flop):
    """A column's medians over its runs (and their min and max where it matters)."""
    sps = [r["samples_per_s"] for r in runs]
    c = {"label": v.label, "mode": v.mode(), "runs": len(runs),
         "samples_per_s": bl.median(sps), "samples_per_s_min": min(sps),
         "samples_per_s_max": max(sps),
         "peak_rss_mb": bl.median([r["peak_rss_mb"] for r in runs]),
         "first_step_s": bl.median([r["first_step_s"] for r in runs]),
         "setup_s": bl.median([r["setup_s"] for r in runs]),
         "load_s": bl.median([r["load_s"] for r in runs]),
         # start-up beyond data loading, per run, then the median. Both read in the
         # training process on its one clock (load_s inside [launch, setup_s]), so never
         # negative; another process's loading would be another clock's interval.
         "setup_beyond_load_s": bl.median([r["setup_s"] - r["load_s"] for r in runs]),
         "step_ms_median": bl.median([r["step_ms_median"] for r in runs]),
         "thread_setting": runs[0].get("thread_setting")}
    c["gflops"] = flop * c["samples_per_s"] / a.batch * 1e-9 if flop else None
    if v.peer.key == "dtrain":
        c["planned_mb"] = bl.median([r.get("planned_mb") for r in runs])
        c["blas"] = bl.dtrain_blas(runs)
    return c


def summarize(a, peers, variants, results, failed, sgemm, gemm, settings, probes):
    """One record per (model, threads): every column's medians ("cols", by variant key) and,
    under each peer's key, its fastest column ("best": which), the headline's figures."""
    out = []
    for model in a.models:
        for threads in a.threads:
            s = {"model": model, "threads": threads, "batch": a.batch, "reps": a.reps,
                 "cols": {}, "best": {}, "thread_setting": {}, "thread_probe": {}}
            sg = sgemm.get((model, threads))
            flop = sg["flop_per_step"] if sg else None
            if sg:
                s["sgemm_gflops"] = sg["gflops"]
                s["sgemm_bound_samples_per_s"] = sg["sgemm_bound_samples_per_s"]
                s["flop_per_step"] = flop
            for v in variants:
                runs = results.get((model, threads, v.key))
                if runs:
                    s["cols"][v.key] = column(v, runs, a, flop)
                elif applies(v, model):
                    s["cols"][v.key] = {"label": v.label, "mode": v.mode(),
                                        "missing": failed.get((model, threads, v.key),
                                                              "not run")}
            for p in peers:
                mine = {k: c for k, c in s["cols"].items()
                        if k.split("/")[0] == p.key and "missing" not in c}
                best = bl.fastest(mine, "samples_per_s")
                s[p.key] = s["cols"][best] if best else None
                s["best"][p.key] = best
                if (model, threads, p.key) in settings:
                    s["thread_setting"][p.key] = settings[(model, threads, p.key)][0]
                    s["thread_probe"][p.key] = probes[(model, threads, p.key)]
            if threads == 1:
                s["gemm"] = {p.key: gemm.get((model, p.key)) for p in peers
                             if gemm.get((model, p.key))}
            out.append(s)
    return out


def ratio(s, key_a, key_b, field, invert=False):
    va, vb = s.get(key_a), s.get(key_b)
    if va is None or vb is None or not va.get(field) or not vb.get(field):
        return "n/a"
    return "%.2f" % (vb[field] / va[field] if invert else va[field] / vb[field])


def cell(s, key, field, spec):
    v = s.get(key)
    return "n/a" if v is None else bl.fmt(v.get(field), spec)


def startup(s, key):
    v = s.get(key)
    if v is None:
        return "n/a"
    return "%s / %.3f / %.3f" % (bl.fmt(v["load_s"], ".3f"), v["setup_s"], v["first_step_s"])


def report(a, info, peers, caps, variants, gone, summary, ratio_before, ratio_after, path,
           took_s):
    tpeers = [p for p in peers[1:] if p.missing is None]
    name = {p.key: "torch " + bl.Variant(p, "x").short for p in tpeers}
    out = ["dtrain training benchmark: batch %d, median of %d run(s) per cell%s" %
           (a.batch, a.reps, " (--quick: NOT a measurement)" if a.quick else ""),
           "machine: %s, %s CPUs, kernel %s; commit %s" % (info["cpu"], info["cpus"],
                                                          info["kernel"], info["commit"]),
           "dtrain's BLAS: " + next((s["dtrain"]["blas"] for s in summary if s.get("dtrain")),
                                    "unknown") + bl.coretype_note()]
    for p in peers[1:]:
        if p.missing:
            out.append("%s: %s" % (p.label, p.missing))
            continue
        c = caps.get(p.key, {})
        out.append("%s: BLAS %s; fused Adam on the CPU: %s; torch.compile: %s" %
                   (p.label, c.get("blas", "? (%s)" % c.get("error")),
                    "none" if c.get("fused_adam") else "yes",
                    "yes" if c.get("compile") else "none"))
    out.append("")

    # Every column: samples/s, median of the runs.
    cols = [v for v in variants if any(v.key in s["cols"] and "missing" not in s["cols"][v.key]
                                       for s in summary)]
    for v in variants:
        if v not in cols and any(v.key in s["cols"] for s in summary):
            gone.setdefault(v.label, next(s["cols"][v.key]["missing"] for s in summary
                                          if v.key in s["cols"]))
    rows = []
    for s in summary:
        row = [s["model"], str(s["threads"])]
        for v in cols:
            c = s["cols"].get(v.key)
            row.append("-" if c is None else "n/a" if "missing" in c else
                       "%.0f%s" % (c["samples_per_s"], bl.runs_note(c["runs"], a.reps)))
        rows.append(row)
    out.append(bl.table("Throughput, samples/s, every column (median step; PyTorch at the "
                        "thread setting its probe chose; - : not for this model)",
                        ["model", "thr"] + [v.label.replace("torch " + v.version, v.short)
                                            for v in cols], rows))

    # The headline: dtrain against each PyTorch's fastest column, named.
    head, rows = ["model", "thr", "dtrain"], []
    for p in tpeers:
        head += [name[p.key] + " fastest", "which (threads)", "dtrain/" + name[p.key][6:]]
    for s in summary:
        d = s.get("dtrain")
        row = [s["model"], str(s["threads"]),
               "n/a" if d is None else "%.0f (%.0f-%.0f)" % (d["samples_per_s"],
                                                            d["samples_per_s_min"],
                                                            d["samples_per_s_max"])]
        for p in tpeers:
            c = s.get(p.key)
            if c is None:
                row += ["n/a", "-", "n/a"]
                continue
            row += ["%.0f (%.0f-%.0f)" % (c["samples_per_s"], c["samples_per_s_min"],
                                         c["samples_per_s_max"]),
                    "%s (%s)" % (c["mode"], c["thread_setting"]),
                    ratio(s, "dtrain", p.key, "samples_per_s")]
        rows.append(row)
    out.append(bl.table("Throughput, samples/s, median (min-max): dtrain against each "
                        "PyTorch's fastest column", head, rows))

    head = ["model", "thr", "dtrain"] + [name[p.key] for p in tpeers] + [
        name[p.key][6:] + "/dtrain" for p in tpeers] + ["dtrain planned"]
    rows = [[s["model"], str(s["threads"]), cell(s, "dtrain", "peak_rss_mb", ".0f")]
            + [cell(s, p.key, "peak_rss_mb", ".0f") for p in tpeers]
            + [ratio(s, "dtrain", p.key, "peak_rss_mb", True) for p in tpeers]
            + [cell(s, "dtrain", "planned_mb", ".0f")] for s in summary]
    out.append(bl.table("Peak resident memory, MB (each PyTorch's fastest column)", head, rows))
    rows = [[s["model"], str(s["threads"])] + [startup(s, k) for k in
                                               ["dtrain"] + [p.key for p in tpeers]]
            for s in summary]
    out.append(bl.table("Start-up, s: loading the data takes / training starts / first step "
                        "ends (the last two from launch; each PyTorch's fastest column)",
                        ["model", "thr", "dtrain"] + [name[p.key] for p in tpeers], rows))
    rows = []
    for s in summary:
        d = s.get("dtrain")
        pct = ("%.0f%%" % (100 * d["gflops"] / s["sgemm_gflops"])
               if d and d["gflops"] and s.get("sgemm_gflops") else "n/a")
        rows.append([s["model"], str(s["threads"]), cell(s, "dtrain", "gflops", ".1f")]
                    + [cell(s, p.key, "gflops", ".1f") for p in tpeers]
                    + [bl.fmt(s.get("sgemm_gflops"), ".1f"), pct,
                       bl.fmt(s.get("sgemm_bound_samples_per_s"), ".0f")])
    out.append(bl.table("GFLOP/s of the model's matrix products (FLOPs per step / step time) "
                        "beside OpenBLAS sgemm alone on the same products",
                        ["model", "thr", "dtrain"] + [name[p.key] for p in tpeers]
                        + ["sgemm", "dtrain/sgemm", "sgemm-only samples/s"], rows))
    out += gemm_table(summary, tpeers, name)

    notes = ["  %s: %s" % (k, why) for k, why in sorted(gone.items())]
    for s in summary:
        for k, c in s["cols"].items():
            if "missing" in c and c["label"] not in gone:
                notes.append("  %s, %d thread(s), %s: %s" % (s["model"], s["threads"],
                                                            c["label"], c["missing"]))
            elif "missing" not in c and c["runs"] < a.reps:
                notes.append("  %s, %d thread(s), %s: %d of %d runs (the others failed: "
                             "bench/out's JSON)" % (s["model"], s["threads"], c["label"],
                                                    c["runs"], a.reps))
    if notes:
        out += ["columns that did not run (n/a), or ran fewer times:"] + notes + [""]
    # torch.compile and channels_last against the same PyTorch's fastest plain eager column:
    # where they are slower, the reader should see it said, not just a smaller number.
    modes = []
    for s in summary:
        for p in tpeers:
            plain = {k: c for k, c in s["cols"].items() if k.split("/")[0] == p.key
                     and "+" not in k and "missing" not in c}
            base = bl.fastest(plain, "samples_per_s")
            for k, c in s["cols"].items():
                if k.split("/")[0] != p.key or "+" not in k or "missing" in c or not base:
                    continue
                r = c["samples_per_s"] / plain[base]["samples_per_s"]
                modes.append("  %s, %d thread(s), %s: %.2fx %s's %s (%s)" % (
                    s["model"], s["threads"], c["label"], r, name[p.key],
                    plain[base]["mode"], "faster" if r > 1 else "slower"))
    if modes:
        out += ["torch.compile and channels_last against the same PyTorch's fastest eager "
                "column:"] + modes + [""]
    probe_lines = []
    for s in summary:
        for p in tpeers:
            pr = s["thread_probe"].get(p.key)
            if pr:
                probe_lines.append("  %s, %d threads, %s: %s -> %s" % (
                    s["model"], s["threads"], name[p.key],
                    ", ".join("%s %s" % (k, bl.fmt(v, ".0f")) for k, v in pr.items()),
                    s["thread_setting"][p.key]))
    if probe_lines:
        out += ["thread settings (probe: samples/s of %d short run(s) each, the fastest used):"
                % a.probe_rounds] + probe_lines + [""]

    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: 2-thread figures are suspect and their targets not judged;"
                  " rerun on a quiet machine" % bl.PARALLEL_RATIO_MIN if flag else ""))
    out.append("")
    out.append("targets%s (against each PyTorch's fastest column, named):" %
               (" -- --quick: meaningless" if a.quick else ""))
    for s in summary:
        where = "%s, %d thread(s)" % (s["model"], s["threads"])
        d = s.get("dtrain")
        if d is None:
            out.append("  %s: dtrain did not run" % where)
            continue
        # A flagged run's 2-thread throughput does not count (memory and start-up do).
        judged = not (flag and s["threads"] > 1)

        def verdict(ok, speed=False):
            if speed and not judged:
                return "not judged (parallel ratio below %.1f)" % bl.PARALLEL_RATIO_MIN
            return "met" if ok else "NOT met"
        for p in tpeers:
            c = s.get(p.key)
            if c is None:
                continue
            r = d["samples_per_s"] / c["samples_per_s"]
            what = "%s %s, %s" % (name[p.key], c["mode"], c["thread_setting"])
            # MLP: 1.5x both; ConvNet: at least 1.13's, the newest's ratio reported only.
            need = (1.5 if s["model"] == "mlp" else
                    (1.0 if p.key == "torch_debian" else None))
            if need is None:
                out.append("  %s: throughput %.2fx %s (reported, no target)" % (where, r, what))
            else:
                out.append("  %s: throughput %.2fx %s (target %.1fx): %s" %
                           (where, r, what, need, verdict(r >= need, True)))
            m = c["peak_rss_mb"] / d["peak_rss_mb"]
            out.append("  %s: peak memory 1/%.1f of %s (target 1/5): %s" %
                       (where, m, what, verdict(m >= 5)))
        out.append("  %s: start-up beyond loading the data %.0f ms (target 50 ms): %s;"
                   " the first step then ends after %.0f ms (steady state %.1f ms)" %
                   (where, d["setup_beyond_load_s"] * 1e3,
                    verdict(d["setup_beyond_load_s"] <= 0.05),
                    (d["first_step_s"] - d["setup_s"]) * 1e3, d["step_ms_median"]))
        out.append("  %s: dtrain's planned memory %.0f MB of its %.0f MB peak (the rest: data "
                   "sets, code)" % (where, d["planned_mb"], d["peak_rss_mb"]))
    out.append("")
    out.append("took %.1f min" % (took_s / 60))
    out.append("JSON lines: %s" % os.path.relpath(path, bl.ROOT))
    return "\n".join(out)


def gemm_table(summary, tpeers, name):
    """How much of the 1-thread lead is the kernel: per model and PyTorch, OpenBLAS's sgemm
    and this PyTorch's torch.mm on the model's own products (torch_gemm.py, the same run),
    the products' time per step at each speed, the step times, and the ratio left were
    PyTorch's products as fast as OpenBLAS's (its step less its products' time at torch.mm's
    speed plus their time at sgemm's)."""
    rows = []
    for s in summary:
        if s["threads"] != 1:
            continue
        d = s.get("dtrain")
        for p in tpeers:
            g = s.get("gemm", {}).get(p.key)
            c = s.get(p.key)
            if g is None:
                rows.append([s["model"], name[p.key]] + ["n/a"] * 8)
                continue
            ob_ms, pt_ms = g["openblas_s_per_step"] * 1e3, g["torch_s_per_step"] * 1e3
            row = [s["model"], name[p.key], "%.1f" % g["openblas_gflops"],
                   "%.1f" % g["torch_gflops"], "%.3f" % ob_ms, "%.3f" % pt_ms]
            if d and c:
                row += ["%.3f" % d["step_ms_median"], "%.3f" % c["step_ms_median"],
                        "%.2f" % (c["step_ms_median"] / d["step_ms_median"]),
                        "%.2f" % ((c["step_ms_median"] - pt_ms + ob_ms) / d["step_ms_median"])]
            else:
                row += ["n/a"] * 4
            rows.append(row)
    if not rows:
        return []
    return [bl.table(
        "The kernel's share, 1 thread: GFLOP/s and ms per step of the model's products in "
        "OpenBLAS sgemm (as dtrain calls it) and in this PyTorch's torch.mm/addmm_ (its BLAS: "
        "above); step times (PyTorch: its fastest column); the lead, and what is left of it "
        "were PyTorch's products as fast as OpenBLAS's",
        ["model", "peer", "sgemm GF/s", "torch.mm GF/s", "sgemm ms", "torch.mm ms",
         "dtrain step ms", "torch step ms", "lead", "lead at sgemm speed"], rows)]


if __name__ == "__main__":
    sys.exit(main())
