#!/usr/bin/python3
"""Data-parallel benchmark: dtrain under `mpirun -np 2` against one process, and
PyTorch DistributedDataParallel (gloo, 2 processes) against one process, for Debian's 1.13
and the newest PyTorch, on the MLP and the ConvNet; one thread per rank, --batch samples per
rank. Prints samples/s (global), the scaling efficiency thr(2) / (2 thr(1)), and the
machine's 2-process/1-process parallel ratio before and after (a run below 1.8 is flagged).

Throughput, identical for every implementation and world size: global samples per step
divided by the median interval between the ends of consecutive steps after --warmup of
them. dtrain's side is bench_train (plain for one process, under `mpirun -np 2` for two
ranks, where it also reports the fraction of the all-reduce hidden behind backward);
PyTorch's is bench/torch_ddp.py (DDP for two processes, the plain loop for one).
Implementations and world sizes are interleaved (the order rotates every repetition);
medians over --reps. Every measurement goes to bench/out/ddp-<time>.jsonl.

Usage (bench/ddp.sh calls it): /usr/bin/python3 bench/ddp.py --build BUILD_DIR [--quick]
"""
import argparse
import os
import sys
import time

import benchlib as bl


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True,
                    help="build directory with bench_train and sgemm_peak")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (median taken; >= 3)")
    ap.add_argument("--ranks", default="2",
                    help="world sizes beside one process, comma-separated (2,4,8,16)")
    ap.add_argument("--models", default="mlp,convnet")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--mlp-steps", type=int, default=400)
    ap.add_argument("--mlp-warmup", type=int, default=50)
    ap.add_argument("--convnet-steps", type=int, default=60)
    ap.add_argument("--convnet-warmup", type=int, default=10)
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="tiny step counts, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.mlp_steps, a.mlp_warmup = 1, 5, 2
        a.convnet_steps, a.convnet_warmup, a.spin = 3, 1, 0.2
    elif a.reps < 3:
        ap.error("--reps must be at least 3 (medians); --quick checks the scripts")
    a.models = a.models.split(",")
    try:
        a.ranks = [int(r) for r in a.ranks.split(",")]
    except ValueError:
        ap.error("--ranks: a comma-separated list of world sizes, not %r" % a.ranks)
    if any(r < 2 for r in a.ranks):
        ap.error("--ranks: world sizes of 2 or more (one process is always run)")
    for m in a.models:
        if m not in bl.MODELS:
            ap.error("unknown model %s (%s)" % (m, ", ".join(bl.MODELS)))
    return a


def steps_of(a, model):
    if model == "mlp":
        return a.mlp_steps, a.mlp_warmup
    return a.convnet_steps, a.convnet_warmup


def dtrain_run(a, build, model, ranks):
    """One bench_train run (under mpirun when ranks > 1); returns its record."""
    steps, warmup = steps_of(a, model)
    cmd = [os.path.join(build, "bench_train"), bl.MODELS[model], "--batch", str(a.batch),
           "--threads", "1", "--steps", str(steps), "--warmup", str(warmup)]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    r = bl.launch(cmd, bl.thread_env(1), 600)
    if r.get("world_size") != ranks:
        raise RuntimeError("%s: ran on %s rank(s), not %d" % (" ".join(cmd),
                                                              r.get("world_size"), ranks))
    return r


def torch_run(a, peer, model, ranks):
    steps, warmup = steps_of(a, model)
    cmd = [peer.python, os.path.join(bl.HERE, "torch_ddp.py"), "--model", model,
           "--world-size", str(ranks), "--batch", str(a.batch), "--threads", "1",
           "--steps", str(steps), "--warmup", str(warmup)]
    return bl.launch(cmd, bl.thread_env(1), 600)


def reason(error):
    """The line of a failure's output that says why: the program's own message rather than
    mpirun's abort banner."""
    lines = [ln for ln in error.splitlines()[1:] if ln.strip()]
    for ln in lines:
        if ln.startswith(("dtrain", "Traceback", "RuntimeError", "torch")) or "Error" in ln:
            return ln
    return lines[-1] if lines else error.splitlines()[0]


def main():
    started = time.monotonic()
    a = args_parse()
    build = os.path.abspath(a.build)
    sgemm_peak = os.path.join(build, "sgemm_peak")
    for exe in (os.path.join(build, "bench_train"), sgemm_peak):
        if not os.access(exe, os.X_OK):
            sys.exit("ddp.py: %s missing: build first" % exe)
    rec = bl.Recorder("ddp")
    rec.write({"event": "machine", "openblas_coretype": bl.init_blas(build)})
    peers = [bl.Peer("dtrain", "dtrain")] + bl.torch_peers()
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    runs = [(p, w) for p in peers if p.missing is None for w in [1] + a.ranks]

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    results, errors = {}, {}
    for rep in range(a.reps):
        for model in a.models:
            k = rep % len(runs)
            for peer, ranks in runs[k:] + runs[:k]:
                bl.log("rep %d/%d  %-7s %d rank(s)  %s" % (rep + 1, a.reps, model, ranks,
                                                           peer.label))
                try:
                    r = (dtrain_run(a, build, model, ranks) if peer.key == "dtrain"
                         else torch_run(a, peer, model, ranks))
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[(model, peer.key, ranks)] = str(e)
                    rec.write({"event": "failed", "peer": peer.key, "model": model,
                               "world_size": ranks, "rep": rep, "error": str(e)})
                    continue
                r = dict(r, event="train", peer=peer.key, rep=rep)
                rec.write(r)
                results.setdefault((model, peer.key, ranks), []).append(r)
    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    rows = []
    for model in a.models:
        for p in peers:
            one = bl.median([r["samples_per_s"] for r in results.get((model, p.key, 1), [])])

            def shown(v, ranks):
                if p.missing:
                    return p.missing
                if v is None:
                    return "failed" if (model, p.key, ranks) in errors else "-"
                return "%.0f" % v
            row = [model, p.label, shown(one, 1)]
            for n in a.ranks:
                runs = results.get((model, p.key, n), [])
                many = bl.median([r["samples_per_s"] for r in runs])
                hidden = bl.median([r.get("comm_hidden") for r in runs])
                eff = many / (n * one) if one and many else None
                rec.write({"event": "summary", "model": model, "peer": p.key, "label": p.label,
                           "samples_per_s_1": one, "samples_per_s_n": many, "ranks": n,
                           "efficiency": eff, "comm_hidden": hidden, "reps": a.reps})
                row += [shown(many, n), bl.fmt(eff, ".3f"),
                        "%.0f%%" % (100 * hidden) if hidden is not None else "-"]
            rows.append(row)
    sizes = ",".join(str(n) for n in a.ranks)
    out = ["dtrain data-parallel benchmark: %s ranks x 1 thread, batch %d per rank, median of "
           "%d run(s)%s" % (sizes, a.batch, a.reps,
                            " (--quick: NOT a measurement)" if a.quick else ""),
           "dtrain's BLAS: " + bl.dtrain_blas(r for k, rs in results.items()
                                               if k[1] == "dtrain" for r in rs)
           + bl.coretype_note(), ""]
    head = ["model", "implementation", "1 process"]
    for n in a.ranks:
        head += ["%d ranks" % n, "eff %d" % n, "hidden %d" % n]
    out.append(bl.table("Throughput, global samples/s; scaling efficiency thr(N) / (N thr(1)); "
                        "share of the all-reduce hidden behind backward", head, rows))
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: scaling figures are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    for (model, key, ranks), e in sorted(errors.items()):
        out.append("failed: %s %s %d rank(s): %s" % (model, key, ranks, reason(e)))
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
