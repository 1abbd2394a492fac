#!/usr/bin/python3
"""Local SGD benchmark: dtrain's `--strategy localsgd --sync-every H` (H = 1, 4, 16) against
its ddp, beside PyTorch's DistributedDataParallel and its post-local SGD
(PeriodicModelAverager, the same H), on the MLP (and the ConvNet with --models), N ranks of
one thread, 64 samples per rank, 2 epochs (the config's own optimizer and schedule), for
Debian's PyTorch 1.13 and the newest PyTorch. Prints, per model and implementation, the
final test accuracy, its difference from the same implementation's ddp, what one rank sends
per step and over the run, samples/s, the training time; then the machine's
2-process/1-process parallel ratio before and after.

dtrain: `mpirun -np N --oversubscribe BUILD/dtrain train CONFIG --epochs E --batch 64
--threads 1 --metrics FILE --no-progress [--strategy localsgd --sync-every H
[--localsgd-warmup W]]` (--max-steps with --quick), one BLAS thread per rank. From the
metrics file (bench/benchlib.py read_metrics): the last "epoch" record's test_accuracy (the
10,000 test images, scored on the replicas' mean), the epochs' epoch_s summed (training
only), the samples trained over that time (samples/s), and the "comm" record:
wire_bytes_per_step (ddp: the gradient's bytes; localsgd: the parameters' bytes / H,
rounded down) and syncs (localsgd's averages), so that the bytes over the run are ddp's
steps or localsgd's warm-up steps and averages at the parameters' bytes each.

PyTorch: bench/torch_localsgd.py, run by each peer's python: DDP on gloo (the ddp row) or
DDP with post_localSGD_hook and PeriodicModelAverager(period=H) (the localsgd rows), N
processes of one thread, the same models, batches, optimizer (Adam at the config's
optim.lr), schedule and epochs; rank 0 evaluates after a last average. Its averages fall
one step earlier in each period than dtrain's (its docstring says why); its bytes come from
the same definitions, not the socket.

Columns: test accuracy (%); its difference from the same implementation's ddp, in accuracy
points; MB one rank sends per step (steady state); MB it sent over the run; samples/s
(global, training only); training seconds. Every cell is the median over --reps runs; each
repetition runs every (implementation, strategy) in an order that rotates from one
repetition to the next. Every run goes to bench/out/localsgd-<time>.jsonl.

Usage (bench/localsgd.sh calls it): /usr/bin/python3 bench/localsgd.py --build BUILD_DIR
[--quick] [--models mlp,convnet] [--periods 1,4,16] [--warmup W] [--ranks N] [--epochs E]
[--reps R]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import benchlib as bl

BATCH = 64
QUICK_STEPS = {"mlp": 20, "convnet": 3}
TIMEOUT_S = 3600


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with dtrain and sgemm_peak")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (median taken)")
    ap.add_argument("--ranks", type=int, default=2, help="data-parallel ranks (>= 2)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run (default 2)")
    ap.add_argument("--models", default="mlp")
    ap.add_argument("--periods", default="1,4,16",
                    help="H of --sync-every, comma-separated (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="synchronous steps first (--localsgd-warmup W; default 0)")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop every run after N optimizer steps (0: the epochs; --quick sets "
                         "MLP %d, ConvNet %d)" % (QUICK_STEPS["mlp"], QUICK_STEPS["convnet"]))
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="a few steps, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.spin = 1, 0.2
    if a.reps < 1:
        ap.error("--reps: at least 1")
    if a.ranks < 2:
        ap.error("--ranks: 2 or more (local SGD averages over a data-parallel group)")
    if a.epochs < 1 or a.max_steps < 0 or a.warmup < 0:
        ap.error("--epochs: at least 1; --max-steps and --warmup: 0 or more")
    a.models = a.models.split(",")
    for m in a.models:
        if m not in bl.MODELS:
            ap.error("unknown model %s (%s)" % (m, ", ".join(bl.MODELS)))
    try:
        a.periods = [int(h) for h in a.periods.split(",")]
    except ValueError:
        ap.error("--periods: a comma-separated list of H >= 1, not %r" % a.periods)
    if any(h < 1 for h in a.periods):
        ap.error("--periods: every H >= 1")
    return a


def max_steps(a, model):
    return QUICK_STEPS[model] if a.quick and not a.max_steps else a.max_steps


def label(period):
    return "ddp" if period == 0 else "localsgd H=%d" % period


def dtrain_run(a, build, model, period):
    """One `dtrain train` under mpirun, ddp (period 0) or localsgd; its figures from
    --metrics."""
    tmp = tempfile.mkdtemp(prefix="dtrain-localsgd-")
    try:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = ["mpirun", "-np", str(a.ranks), "--oversubscribe", os.path.join(build, "dtrain"),
               "train", bl.MODELS[model], "--epochs", str(a.epochs), "--batch", str(BATCH),
               "--threads", "1", "--metrics", metrics, "--no-progress"]
        if period > 0:
            cmd += ["--strategy", "localsgd", "--sync-every", str(period)]
            if a.warmup:
                cmd += ["--localsgd-warmup", str(a.warmup)]
        if max_steps(a, model):
            cmd += ["--max-steps", str(max_steps(a, model))]
        _, wall = bl.run_text(cmd, bl.thread_env(1), TIMEOUT_S)
        m = bl.read_metrics(metrics)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    comm = m["comm"] or {}
    per, dense, steps = comm.get("wire_bytes_per_step"), comm.get("dense_bytes_per_step"), m["steps"]
    total = None
    if per is not None and steps:
        if period == 0:
            total = per * steps
        elif comm.get("syncs") is not None:
            # The parameters' bytes, per step and H: what one average sends (within H bytes).
            total = (min(a.warmup, steps) + comm["syncs"]) * per * period
    if comm and comm.get("strategy") not in (None, "ddp" if period == 0 else "localsgd"):
        bl.log("note: dtrain reports strategy %r" % comm.get("strategy"))
    return {"impl": "dtrain", "model": model, "world_size": a.ranks, "period": period,
            "warmup": a.warmup if period else 0, "test_accuracy": m["test_accuracy"],
            "train_s": m["train_s"], "samples": m["samples"],
            "samples_per_s": m["samples"] / m["train_s"] if m["train_s"] else None,
            "steps": steps, "averages": comm.get("syncs"), "wire_bytes_per_step": per,
            "dense_bytes_per_step": dense, "wire_bytes_total": total, "comm_record": m["comm"],
            "wall_s": wall, "command": " ".join(cmd)}


def torch_run(a, peer, model, period, optim):
    lr, schedule = optim
    cmd = [peer.python, os.path.join(bl.HERE, "torch_localsgd.py"), "--model", model,
           "--world-size", str(a.ranks), "--batch", str(BATCH), "--threads", "1",
           "--epochs", str(a.epochs), "--period", str(period), "--lr", lr,
           "--schedule", schedule]
    if period and a.warmup:
        cmd += ["--warmup", str(a.warmup)]
    if max_steps(a, model):
        cmd += ["--max-steps", str(max_steps(a, model))]
    return bl.launch(cmd, bl.thread_env(1), TIMEOUT_S)


def config_optim(model):
    """The config's optim.lr and schedule.kind, for PyTorch's side; anything not mirrored
    there stops the run (as bench/compress.py)."""
    path = bl.MODELS[model]
    lr = bl.ini_value(path, "optim", "lr", "0.001")
    kind = bl.ini_value(path, "schedule", "kind", "none")
    kind = {"none": "constant", "constant": "constant", "cosine": "cosine"}.get(kind)
    if kind is None or bl.ini_value(path, "optim", "kind", "adam") != "adam":
        sys.exit("localsgd.py: %s: only Adam with a constant or cosine schedule is mirrored "
                 "on PyTorch's side" % path)
    for key in ("warmup_steps", "min_lr", "total_steps"):
        if bl.ini_value(path, "schedule", key) not in (None, "0"):
            sys.exit("localsgd.py: %s: schedule.%s is not mirrored on PyTorch's side"
                     % (path, key))
    return lr, kind


def main():
    started = time.monotonic()
    a = args_parse()
    build, sgemm_peak = bl.build_tools(a.build, "localsgd.py")
    optim = {m: config_optim(m) for m in a.models}
    rec = bl.Recorder("localsgd")
    rec.write({"event": "machine", "openblas_coretype": bl.init_blas(build), "quick": a.quick,
               "ranks": a.ranks, "epochs": a.epochs, "periods": a.periods, "warmup": a.warmup})
    peers = [bl.Peer("dtrain", "dtrain")] + bl.torch_peers()
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    periods = [0] + a.periods
    runs = [(p, h) for p in peers if p.missing is None for h in periods]

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    results, errors = {}, {}
    for rep in range(a.reps):
        for model in a.models:
            k = rep % len(runs)
            for peer, h in runs[k:] + runs[:k]:
                bl.log("rep %d/%d  %-7s %-14s %s" % (rep + 1, a.reps, model, label(h),
                                                     peer.label))
                try:
                    r = (dtrain_run(a, build, model, h) if peer.key == "dtrain"
                         else torch_run(a, peer, model, h, optim[model]))
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[(model, peer.key, h)] = str(e)
                    rec.write({"event": "failed", "peer": peer.key, "model": model,
                               "period": h, "rep": rep, "error": str(e)})
                    continue
                r = dict(r, event="train", peer=peer.key, rep=rep)
                rec.write(r)
                results.setdefault((model, peer.key, h), []).append(r)
    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    steps_note = ("%d epochs" % a.epochs if not a.quick and not a.max_steps else
                  "at most %d epochs, --max-steps %s" % (
                      a.epochs, ", ".join("%s %d" % (m, max_steps(a, m)) for m in a.models)))
    out = ["dtrain local SGD benchmark: %d ranks x 1 thread, batch %d per rank, %s%s, median "
           "of %d run(s)%s" % (a.ranks, BATCH, steps_note,
                               ", %d synchronous steps first" % a.warmup if a.warmup else "",
                               a.reps, " (--quick: NOT a measurement)" if a.quick else ""),
           "PyTorch: DDP on gloo, and post-local SGD (post_localSGD_hook, "
           "PeriodicModelAverager); bytes from the definitions (bench/torch_localsgd.py)"
           + bl.coretype_note(), ""]
    head = ["implementation", "strategy", "test acc %", "vs ddp (pts)", "MB sent/step",
            "MB sent in all", "samples/s", "train s"]
    for model in a.models:
        rows = []
        for p in peers:
            if p.missing:
                rows.append([p.label, "(all)"] + [p.missing] * (len(head) - 2))
                continue
            base = bl.median([r.get("test_accuracy") for r in results.get((model, p.key, 0), [])])
            for h in periods:
                rs = results.get((model, p.key, h), [])
                if not rs:
                    why = "failed" if (model, p.key, h) in errors else "-"
                    rows.append([p.label, label(h)] + [why] * (len(head) - 2))
                    continue

                def med(k):
                    return bl.median([r.get(k) for r in rs])
                acc, per, total = med("test_accuracy"), med("wire_bytes_per_step"), \
                    med("wire_bytes_total")
                delta = 100 * (acc - base) if acc is not None and base is not None else None
                rec.write({"event": "summary", "model": model, "peer": p.key, "label": p.label,
                           "period": h, "test_accuracy": acc, "delta_points": delta,
                           "wire_bytes_per_step": per, "wire_bytes_total": total,
                           "samples_per_s": med("samples_per_s"), "train_s": med("train_s"),
                           "averages": med("averages"), "reps": len(rs)})
                rows.append([p.label, label(h),
                             bl.fmt(None if acc is None else 100 * acc, ".2f"),
                             bl.fmt(delta, "+.2f"),
                             bl.fmt(None if per is None else per / 1e6, ".4f"),
                             bl.fmt(None if total is None else total / 1e6, ".1f"),
                             bl.fmt(med("samples_per_s"), ".0f"), bl.fmt(med("train_s"), ".3g")])
        out.append(bl.table("%s: test accuracy after training, MB one rank sends, samples/s"
                            % model, head, rows))
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: throughput figures are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    for (model, key, h), e in sorted(errors.items()):
        out.append("failed: %s %s %s: %s" % (model, key, label(h), bl.failure_reason(e)))
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
