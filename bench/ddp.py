#!/usr/bin/python3
"""Data-parallel benchmark: dtrain under `mpirun -np N` against one process, and PyTorch
DistributedDataParallel (gloo, N processes) against one process, for Debian's 1.13 and the
newest PyTorch, on the MLP and the ConvNet; one thread per rank, --batch samples per rank.
Prints samples/s (global), the scaling efficiency thr(N) / (N thr(1)), each PyTorch's
fastest column against dtrain at every world size, what one all-reduce of each model's
gradient costs through gloo against MPI, and the machine's 2-process/1-process parallel
ratio before and after (a run below 1.8 is flagged).

Throughput, identical for every implementation and world size: global samples per step
divided by the median interval between the ends of consecutive steps after --warmup of
them. dtrain's side is bench_train (plain for one process, under `mpirun -np N
--oversubscribe` for N ranks, where it also reports the fraction of the all-reduce hidden
behind backward); PyTorch's is bench/torch_ddp.py (DDP for N processes, the plain loop for
one).

PyTorch at its best (issue 39; docs/BENCHMARKS.md "Data parallelism"): DDP with
gradient_as_bucket_view=True and static_graph=True; one column per Adam in --optims (fused,
else foreach where this PyTorch has no fused CPU Adam; and the default single-tensor loop);
each rank pinned to the CPUs mpirun binds dtrain's rank of the same number to (asked of
mpirun with the same flags before the runs: one core per rank while there are cores
enough, unbound when oversubscribed), the one-process runs unbound on both sides. Every cell
is the median of --reps >= 3 runs, the one-process references included; a cell with fewer
(a run failed) says so.

Implementations and world sizes are interleaved (the order rotates every repetition).
Every measurement goes to bench/out/ddp-<time>.jsonl.

Usage (bench/ddp.sh calls it): /usr/bin/python3 bench/ddp.py --build BUILD_DIR [--quick]
"""
import argparse
import json
import os
import sys
import time

import benchlib as bl

ALLREDUCE_ITERS, ALLREDUCE_WARMUP = 200, 10


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True,
                    help="build directory with bench_train, dtrain and sgemm_peak")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (median taken; >= 3)")
    ap.add_argument("--ranks", default="2",
                    help="world sizes beside one process, comma-separated (2,4,8,16)")
    ap.add_argument("--models", default="mlp,convnet")
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--mlp-steps", type=int, default=400)
    ap.add_argument("--mlp-warmup", type=int, default=50)
    ap.add_argument("--convnet-steps", type=int, default=60)
    ap.add_argument("--convnet-warmup", type=int, default=10)
    ap.add_argument("--optims", default="fused,default",
                    help="PyTorch's Adam forms, one column each (fused becomes foreach where "
                         "a PyTorch has no fused CPU Adam)")
    ap.add_argument("--allreduce-reps", type=int, default=None,
                    help="repetitions of the gloo-against-MPI all-reduce probe (--reps unless "
                         "given; 0 leaves it out: a machine lent for minutes)")
    ap.add_argument("--probe-only", action="store_true",
                    help="the gloo-against-MPI all-reduce probe alone, no training runs (a lent "
                         "machine's last minutes)")
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="tiny step counts, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    a.allreduce_iters, a.allreduce_warmup = ALLREDUCE_ITERS, ALLREDUCE_WARMUP
    if a.quick:
        a.reps, a.mlp_steps, a.mlp_warmup = 1, 5, 2
        a.convnet_steps, a.convnet_warmup, a.spin = 3, 1, 0.2
        a.allreduce_iters, a.allreduce_warmup = 5, 2
    elif a.reps < 3:
        ap.error("--reps must be at least 3 (medians); --quick checks the scripts")
    if a.allreduce_reps is None:
        a.allreduce_reps = a.reps
    if a.probe_only and a.allreduce_reps < 1:
        ap.error("--probe-only with --allreduce-reps 0 measures nothing")
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
    a.optims = a.optims.split(",")
    for o in a.optims:
        if o not in bl.ADAM_NAMES:
            ap.error("--optims: unknown Adam %s (%s)" % (o, ", ".join(bl.ADAM_NAMES)))
    return a


def steps_of(a, model):
    if model == "mlp":
        return a.mlp_steps, a.mlp_warmup
    return a.convnet_steps, a.convnet_warmup


MPIRUN = ("mpirun", "--oversubscribe")  # dtrain's launcher, asked for its bindings too


def dtrain_run(a, build, model, ranks):
    """One bench_train run (under mpirun when ranks > 1); returns its record."""
    steps, warmup = steps_of(a, model)
    cmd = [os.path.join(build, "bench_train"), bl.MODELS[model], "--batch", str(a.batch),
           "--threads", "1", "--steps", str(steps), "--warmup", str(warmup)]
    if ranks > 1:
        cmd = bl.mpirun_cmd(ranks, MPIRUN) + cmd
    r = bl.launch(cmd, bl.thread_env(1), 600)
    if r.get("world_size") != ranks:
        raise RuntimeError("%s: ran on %s rank(s), not %d" % (" ".join(cmd),
                                                              r.get("world_size"), ranks))
    return r


def cpus_arg(binds):
    return ";".join(",".join(map(str, b)) for b in binds)


def torch_run(a, v, model, ranks, binds):
    steps, warmup = steps_of(a, model)
    cmd = [v.peer.python, os.path.join(bl.HERE, "torch_ddp.py"), "--model", model,
           "--world-size", str(ranks), "--batch", str(a.batch), "--threads", "1",
           "--steps", str(steps), "--warmup", str(warmup), "--optim", v.optim]
    if ranks > 1:
        cmd += ["--cpus", cpus_arg(binds[ranks])]
    return bl.launch(cmd, bl.thread_env(1), 600)


def allreduce_mpi(a, build, nbytes, ranks, rec, extra):
    """`dtrain bench-comm` for one all-reduce of nbytes at `ranks` ranks: {"bare-mpi": us,
    "auto": us} (MPI's own blocking call over its shared memory; dtrain's choice, what its
    training calls)."""
    path = os.path.join(bl.HERE, "out", "ddp-allreduce-%d.jsonl" % os.getpid())
    cmd = bl.mpirun_cmd(ranks, MPIRUN) + [
        os.path.join(build, "dtrain"), "bench-comm", "--min-bytes", str(nbytes), "--max-bytes",
        str(nbytes), "--ops", "allreduce", "--algos", "bare-mpi,auto", "--iters",
        str(a.allreduce_iters), "--warmup", str(a.allreduce_warmup), "--json", path]
    bl.run_text(cmd, bl.thread_env(1), 300)
    out = {}
    with open(path) as f:
        for ln in f:
            r = json.loads(ln)
            rec.write(dict(r, event="allreduce", impl="dtrain bench-comm", **extra))
            if r.get("wrong"):
                raise RuntimeError("%s: %d wrong elements" % (" ".join(cmd), r["wrong"]))
            out[r["algorithm"]] = r["time_us"]
    os.unlink(path)
    return out


def allreduce_gloo(a, peer, model, ranks, binds, rec, extra):
    cmd = [peer.python, os.path.join(bl.HERE, "torch_ddp.py"), "--model", model, "--allreduce",
           "--world-size", str(ranks), "--steps", str(a.allreduce_iters), "--warmup",
           str(a.allreduce_warmup), "--cpus", cpus_arg(binds[ranks])]
    r = bl.launch(cmd, bl.thread_env(1), 300)
    rec.write(dict(r, event="allreduce", peer=peer.key, **extra))
    return r


def allreduce_probe(a, build, torch_ok, binds, params, rec):
    """What gloo over TCP costs against MPI's shared memory: one all-reduce of each model's
    gradient (its parameters, float32) at each world size, --reps times, interleaved."""
    got = {}  # (model, ranks, who) -> [us]
    for rep in range(a.allreduce_reps):
        for model in a.models:
            if model not in params:
                continue
            nbytes = 4 * params[model]
            for ranks in a.ranks:
                extra = {"model": model, "rep": rep, "world_size": ranks}
                who = ["mpi"] + [p.key for p in torch_ok]
                k = rep % len(who)
                for w in who[k:] + who[:k]:
                    bl.log("rep %d/%d  all-reduce %d bytes (%s), %d ranks: %s" %
                           (rep + 1, a.allreduce_reps, nbytes, model, ranks, w))
                    try:
                        if w == "mpi":
                            for alg, us in allreduce_mpi(a, build, nbytes, ranks, rec,
                                                         extra).items():
                                got.setdefault((model, ranks, alg), []).append(us)
                        else:
                            p = next(p for p in torch_ok if p.key == w)
                            r = allreduce_gloo(a, p, model, ranks, binds, rec, extra)
                            got.setdefault((model, ranks, w), []).append(r["allreduce_us"])
                    except RuntimeError as e:
                        bl.log("FAILED: %s" % bl.failure_reason(str(e)))
                        rec.write(dict(extra, event="failed", what="allreduce", who=w,
                                       error=bl.failure_reason(str(e))))
    return got


def main():
    started = time.monotonic()
    a = args_parse()
    build = os.path.abspath(a.build)
    sgemm_peak = os.path.join(build, "sgemm_peak")
    for exe in (os.path.join(build, "bench_train"), os.path.join(build, "dtrain"), sgemm_peak):
        if not os.access(exe, os.X_OK):
            sys.exit("ddp.py: %s missing: build first" % exe)
    rec = bl.Recorder("ddp")
    rec.write({"event": "machine", "openblas_coretype": bl.init_blas(build)})
    peers = [bl.Peer("dtrain", "dtrain")] + bl.torch_peers()
    torch_ok = [p for p in peers[1:] if p.missing is None]
    variants, gone, caps = [bl.Variant(peers[0], None)], {}, {}
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    for p in torch_ok:
        caps[p.key] = bl.torch_caps(p)
        rec.write(dict(caps[p.key], event="peer", peer=p.key, label=p.label))
        vs, notes = bl.torch_variants(p, caps[p.key], a.optims, compiled=False)
        variants += vs
        gone.update(notes)
    # The cores mpirun binds dtrain's ranks to, for PyTorch's ranks too.
    binds = {}
    for n in a.ranks:
        binds[n] = bl.mpirun_bindings(n, MPIRUN)
        rec.write({"event": "binding", "world_size": n, "cpus": binds[n],
                   "text": bl.bindings_text(binds[n])})
    params = {}
    if torch_ok:
        for model in a.models:
            r = bl.launch([torch_ok[0].python, os.path.join(bl.HERE, "torch_ddp.py"), "--model",
                           model, "--param-count"], bl.thread_env(1), 300)
            params[model] = r["params"]
    runs = [(v, w) for v in variants for w in [1] + a.ranks]

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    results, errors = {}, {}
    for rep in range(0 if a.probe_only else a.reps):
        for model in a.models:
            k = rep % len(runs)
            for v, ranks in runs[k:] + runs[:k]:
                bl.log("rep %d/%d  %-7s %d rank(s)  %s" % (rep + 1, a.reps, model, ranks,
                                                           v.label))
                try:
                    r = (dtrain_run(a, build, model, ranks) if v.peer.key == "dtrain"
                         else torch_run(a, v, model, ranks, binds))
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[(model, v.key, ranks)] = str(e)
                    rec.write({"event": "failed", "peer": v.peer.key, "variant": v.key,
                               "model": model, "world_size": ranks, "rep": rep,
                               "error": str(e)})
                    continue
                r = dict(r, event="train", peer=v.peer.key, variant=v.key, rep=rep)
                rec.write(r)
                results.setdefault((model, v.key, ranks), []).append(r)
    allreduce = allreduce_probe(a, build, torch_ok, binds, params, rec)
    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})
    print(report(a, peers, caps, variants, gone, results, errors, binds, params, allreduce,
                 ratio_before, ratio_after, rec, time.monotonic() - started))
    rec.close()
    return 0


def report(a, peers, caps, variants, gone, results, errors, binds, params, allreduce,
           ratio_before, ratio_after, rec, took_s):
    def med(model, key, n):
        rs = results.get((model, key, n), [])
        return bl.median([r["samples_per_s"] for r in rs]), len(rs)

    def shown(model, v, n):
        val, count = med(model, v.key, n)
        if val is None:
            return "failed" if (model, v.key, n) in errors else "-"
        return "%.0f%s" % (val, bl.runs_note(count, a.reps))

    rows, fastest = [], {}  # fastest: (model, peer key, n) -> variant
    for model in a.models:
        for v in variants:
            one, _ = med(model, v.key, 1)
            row = [model, "dtrain" if v.peer.key == "dtrain" else
                   "torch %s DDP, %s Adam" % (v.short, v.optim), shown(model, v, 1)]
            for n in a.ranks:
                rs = results.get((model, v.key, n), [])
                many, _ = med(model, v.key, n)
                hidden = bl.median([r.get("comm_hidden") for r in rs])
                eff = many / (n * one) if one and many else None
                rec.write({"event": "summary", "model": model, "peer": v.peer.key,
                           "variant": v.key, "label": v.label, "mode": v.mode(),
                           "samples_per_s_1": one, "samples_per_s_n": many, "ranks": n,
                           "runs_1": len(results.get((model, v.key, 1), [])),
                           "runs_n": len(rs), "efficiency": eff, "comm_hidden": hidden,
                           "reps": a.reps})
                row += [shown(model, v, n), bl.fmt(eff, ".3f"),
                        "%.0f%%" % (100 * hidden) if hidden is not None else "-"]
            rows.append(row)
            for n in [1] + a.ranks:
                val, _ = med(model, v.key, n)
                cur = fastest.get((model, v.peer.key, n))
                if val is not None and (cur is None or val > med(model, cur.key, n)[0]):
                    fastest[(model, v.peer.key, n)] = v
    sizes = ",".join(str(n) for n in a.ranks)
    out = ["dtrain data-parallel benchmark: %s ranks x 1 thread, batch %d per rank, median of "
           "%d run(s) per cell%s" % (sizes, a.batch, a.reps,
                                     " (--quick: NOT a measurement)" if a.quick else ""),
           "dtrain's BLAS: " + bl.dtrain_blas(r for k, rs in results.items()
                                               if k[1] == "dtrain" for r in rs)
           + bl.coretype_note()]
    for p in peers[1:]:
        c = caps.get(p.key, {})
        out.append("%s: %s" % (p.label, p.missing or "BLAS %s; DDP over gloo (TCP, 127.0.0.1),"
                               " gradient_as_bucket_view=True, static_graph=True" %
                               c.get("blas", "?")))
    out.append("pinning: dtrain's ranks as `%s -np N` binds them, PyTorch's pinned to the same "
               "CPUs (os.sched_setaffinity per rank): %s; one process unbound on both sides" %
               (" ".join(MPIRUN), "; ".join("%d ranks: %s" % (n, bl.bindings_text(binds[n]))
                                            for n in a.ranks)))
    out.append("")
    head = ["model", "implementation", "1 process"]
    for n in a.ranks:
        head += ["%d ranks" % n, "eff %d" % n, "hidden %d" % n]
    tables = []  # --probe-only trained nothing: the throughput tables would be all "-"
    tables.append(bl.table("Throughput, global samples/s; scaling efficiency thr(N) / (N "
                           "thr(1)); share of the all-reduce hidden behind backward", head, rows))

    head, rows = ["model", "ranks", "dtrain"], []
    tpeers = [p for p in peers[1:] if p.missing is None]
    for p in tpeers:
        short = bl.Variant(p, "x").short
        head += ["torch %s fastest" % short, "which", "dtrain/" + short]
    for model in a.models:
        for n in [1] + a.ranks:
            d, _ = med(model, "dtrain", n)
            row = [model, str(n), bl.fmt(d, ".0f")]
            for p in tpeers:
                v = fastest.get((model, p.key, n))
                t = med(model, v.key, n)[0] if v else None
                row += [bl.fmt(t, ".0f"), "%s Adam" % v.optim if v else "-",
                        "%.2f" % (d / t) if d and t else "n/a"]
            rows.append(row)
    tables.append(bl.table("dtrain against each PyTorch's fastest column at every world size "
                           "(1: the one-process lead; N: what is left of it with the "
                           "all-reduce)", head, rows))
    if not a.probe_only:
        out += tables
    out += allreduce_table(a, tpeers, params, allreduce, results, fastest)

    notes = ["  %s: %s" % (k, why) for k, why in sorted(gone.items())]
    for (model, key, ranks), e in sorted(errors.items()):
        notes.append("  %s %s %d rank(s): %s" % (model, key, ranks, bl.failure_reason(e)))
    if notes:
        out += ["columns left out, runs that failed:"] + notes + [""]
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: scaling figures are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    out.append("")
    out.append("took %.1f min" % (took_s / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    return "\n".join(out)


def allreduce_table(a, tpeers, params, got, results, fastest):
    """One all-reduce of each model's gradient: MPI (bare, and dtrain's auto) against gloo,
    and gloo's extra time per step as a share of that PyTorch's N-rank step."""
    if not got:
        return []
    rows = []
    for model in a.models:
        if model not in params:
            continue
        for n in a.ranks:
            bare = bl.median(got.get((model, n, "bare-mpi"), []))
            auto = bl.median(got.get((model, n, "auto"), []))
            row = [model, "%.2f" % (4 * params[model] / 1e6), str(n), bl.fmt(bare, ".0f"),
                   bl.fmt(auto, ".0f")]
            for p in tpeers:
                g = bl.median(got.get((model, n, p.key), []))
                v = fastest.get((model, p.key, n))
                sps = bl.median([r["samples_per_s"] for r in results.get((model, v.key, n), [])]
                                ) if v else None
                step_us = n * a.batch / sps * 1e6 if sps else None
                row += [bl.fmt(g, ".0f"), "%.1f" % (g / bare) if g and bare else "n/a",
                        "%.0f%%" % (100 * (g - bare) / step_us) if g and bare and step_us
                        else "n/a"]
            rows.append(row)
    head = ["model", "MB", "ranks", "MPI us", "dtrain auto us"]
    for p in tpeers:
        head += ["gloo %s us" % bl.Variant(p, "x").short, "gloo/MPI", "(gloo-MPI)/step"]
    return [bl.table(
        "One all-reduce of the model's gradient (float32 sum; mean per call over %d calls after "
        "%d, the slowest rank; median of %d runs): MPI's shared memory (bench-comm bare-mpi; "
        "auto: what dtrain's training calls) against gloo over TCP, pinned as above; the "
        "difference as a share of that PyTorch's step at N ranks (its fastest column)" %
        (a.allreduce_iters, a.allreduce_warmup, a.allreduce_reps), head, rows)]


if __name__ == "__main__":
    sys.exit(main())
