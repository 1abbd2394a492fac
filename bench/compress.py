#!/usr/bin/python3
"""Gradient-compression benchmark: dtrain's ddp with --compress (none, fp16, bf16,
topk:0.01, powersgd:4) beside PyTorch DistributedDataParallel with its built-in
communication hooks (none, fp16, bf16, powersgd:4; PyTorch has no top-k hook), on the MLP
and the ConvNet, N ranks of one thread, 64 samples per rank, 2 epochs (the configs' own
optimizer and schedule), for Debian's PyTorch 1.13 and the newest PyTorch. Prints, per model
and implementation, the final test accuracy, what one rank sends per step, the training
time, and accuracy per MB sent; then the targets, and the machine's 2-process/1-process
parallel ratio before and after.

dtrain: `mpirun -np N --oversubscribe BUILD/dtrain train CONFIG --epochs E --batch 64
--threads 1 --compress MODE --metrics FILE --no-progress` (--max-steps with --quick), one
BLAS thread per rank. From the metrics file (JSON lines, bench/benchlib.py read_metrics):
the last "epoch" record's test_accuracy (the 10,000 test images), the sum of the epochs'
epoch_s (training only, evaluation excluded), the last epoch record's steps, and the "comm"
record written at the end of the run: wire_bytes_per_step (what one rank sends per
optimizer step, compressed) and dense_bytes_per_step (the uncompressed gradient). A build
without the "comm" record shows "-" for bytes; one that rejects --compress shows "failed"
and the reason under the table.

PyTorch: bench/torch_compress.py, run by each peer's python: DDP on gloo, N processes of one
thread, the same models, batches, optimizer (Adam at the config's optim.lr), schedule (the
config's schedule.kind: cosine from lr to 0 over the run, as dtrain's) and epochs; rank 0
evaluates on the test images after training. Its bytes per step are computed from the
hook's definition and the model's tensors (torch_compress.py's docstring gives each formula:
4 x parameters, 2 x parameters, PowerSGD's P and Q plus the tensors its own _should_compress
leaves dense), not measured on the socket; PowerSGD's first 2 dense steps are in its total.

Columns: test accuracy (%); its difference from the same implementation's "none" in
accuracy points; MB one rank sends per step (steady state); the bytes it sent over the whole
run over its "none"'s (warm-up steps included); training seconds; and accuracy points per MB
sent = final accuracy (%) / MB one rank sent over the whole run (dtrain: wire_bytes_per_step
x steps, its warm-up steps at dense_bytes_per_step). Every cell is the median over --reps runs;
each repetition runs every (implementation, mode) in an order that rotates from one
repetition to the next. Every run goes to bench/out/compress-<time>.jsonl.

With --ps, the same modes also run under dtrain's parameter server (`--strategy ps`: N
workers and 1 server, so N + 1 processes; its pushes compressed, each worker with its own
error feedback and, for PowerSGD, its own factors), as rows "dtrain ps" measured against ps's
own "none". No peer: PyTorch has no parameter server.

With --warmup W, dtrain's compressed runs exchange float32 gradients for their first W
steps (--compress-warmup W); their bytes over the run count those steps at the float32 size,
and the "x none's bytes" column is then the whole run's ratio.

Targets (printed under the tables, met / NOT met): topk:0.01 and powersgd:4 within 1.5
accuracy points of dtrain's none after 2 epochs while sending at most 1/20 of its bytes;
dtrain's accuracy per MB at least PyTorch's hook's (fp16 against fp16, powersgd:4 against
powersgd:4), with the newest PyTorch installed.

Usage (bench/compress.sh calls it): /usr/bin/python3 bench/compress.py --build BUILD_DIR
[--quick] [--models mlp,convnet] [--modes none,fp16,...] [--ranks N] [--epochs E] [--reps R]
[--ps] [--warmup W]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import benchlib as bl

MODES = ["none", "fp16", "bf16", "topk:0.01", "powersgd:4"]
BATCH = 64
QUICK_STEPS = {"mlp": 20, "convnet": 3}
# The targets (see the docstring).
ACC_POINTS_MAX = 1.5
BYTES_RATIO_MAX = 1.0 / 20
TIMEOUT_S = 3600
NO_HOOK = "no built-in hook"


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with dtrain and sgemm_peak")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (median taken)")
    ap.add_argument("--ranks", type=int, default=2, help="data-parallel ranks (>= 2)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run (default 2)")
    ap.add_argument("--models", default="mlp,convnet")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="--compress modes, comma-separated (default %(default)s)")
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop every run after N optimizer steps (0: the epochs; --quick sets "
                         "MLP %d, ConvNet %d)" % (QUICK_STEPS["mlp"], QUICK_STEPS["convnet"]))
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--warmup", type=int, default=0,
                    help="dtrain: --compress-warmup W for the compressed modes (default 0)")
    ap.add_argument("--ps", action="store_true",
                    help="also run every mode under --strategy ps (N workers + 1 server)")
    ap.add_argument("--quick", action="store_true",
                    help="a few steps, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.spin = 1, 0.2
    if a.reps < 1:
        ap.error("--reps: at least 1")
    if a.ranks < 2:
        ap.error("--ranks: 2 or more (compression needs a data-parallel group)")
    if a.epochs < 1 or a.max_steps < 0:
        ap.error("--epochs: at least 1; --max-steps: 0 or more")
    a.models = a.models.split(",")
    a.modes = a.modes.split(",")
    for m in a.models:
        if m not in bl.MODELS:
            ap.error("unknown model %s (%s)" % (m, ", ".join(bl.MODELS)))
    if "none" not in a.modes:
        a.modes.insert(0, "none")  # every comparison is against it
    return a


def max_steps(a, model):
    return QUICK_STEPS[model] if a.quick and not a.max_steps else a.max_steps


def torch_has(mode):
    return mode in ("none", "fp16", "bf16") or mode.startswith("powersgd:")


def dtrain_run(a, build, model, mode, ps=False):
    """One `dtrain train --compress MODE` under mpirun (ps: N workers and 1 server); its
    figures from --metrics."""
    tmp = tempfile.mkdtemp(prefix="dtrain-compress-")
    try:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = ["mpirun", "-np", str(a.ranks + (1 if ps else 0)), "--oversubscribe",
               os.path.join(build, "dtrain"),
               "train", bl.MODELS[model], "--epochs", str(a.epochs), "--batch", str(BATCH),
               "--threads", "1", "--compress", mode, "--metrics", metrics, "--no-progress"]
        if ps:
            cmd += ["--strategy", "ps"]
        if a.warmup and mode != "none":
            cmd += ["--compress-warmup", str(a.warmup)]
        if max_steps(a, model):
            cmd += ["--max-steps", str(max_steps(a, model))]
        _, wall = bl.run_text(cmd, bl.thread_env(1), TIMEOUT_S)
        m = bl.read_metrics(metrics)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    comm = m["comm"] or {}
    per = comm.get("wire_bytes_per_step")
    dense, steps = comm.get("dense_bytes_per_step"), m["steps"]
    warm = min(comm.get("compress_warmup_steps") or 0, steps or 0)
    total = (warm * dense + (steps - warm) * per
             if per is not None and dense is not None and steps else None)
    if comm and comm.get("compress") not in (None, mode):
        bl.log("note: dtrain reports compress %r for --compress %s" % (comm.get("compress"), mode))
    return {"impl": "dtrain ps" if ps else "dtrain", "model": model, "world_size": a.ranks, "mode": mode,
            "test_accuracy": m["test_accuracy"], "train_s": m["train_s"], "steps": m["steps"],
            "wire_bytes_per_step": per, "dense_bytes_per_step": comm.get("dense_bytes_per_step"),
            "wire_bytes_total": total, "compress_warmup_steps": warm,
            "comm_record": m["comm"], "compress_reported": comm.get("compress"),
            "wall_s": wall, "command": " ".join(cmd)}


def torch_run(a, peer, model, mode, optim):
    lr, schedule = optim
    cmd = [peer.python, os.path.join(bl.HERE, "torch_compress.py"), "--model", model,
           "--world-size", str(a.ranks), "--batch", str(BATCH), "--threads", "1",
           "--epochs", str(a.epochs), "--hook", mode, "--lr", lr, "--schedule", schedule]
    if max_steps(a, model):
        cmd += ["--max-steps", str(max_steps(a, model))]
    r = bl.launch(cmd, bl.thread_env(1), TIMEOUT_S)
    return dict(r, mode=mode)


def config_optim(model):
    """The config's optim.lr and schedule.kind, passed to PyTorch's side ("constant" for no
    schedule); anything else is not mirrored and stops the run."""
    path = bl.MODELS[model]
    lr = bl.ini_value(path, "optim", "lr", "0.001")
    kind = bl.ini_value(path, "schedule", "kind", "none")
    kind = {"none": "constant", "constant": "constant", "cosine": "cosine"}.get(kind)
    if kind is None or bl.ini_value(path, "optim", "kind", "adam") != "adam":
        sys.exit("compress.py: %s: only Adam with a constant or cosine schedule is mirrored "
                 "on PyTorch's side" % path)
    for key in ("warmup_steps", "min_lr", "total_steps"):
        if bl.ini_value(path, "schedule", key) not in (None, "0"):
            sys.exit("compress.py: %s: schedule.%s is not mirrored on PyTorch's side"
                     % (path, key))
    return lr, kind


def peer_version(peer):
    """(major, minor, patch) of a torch peer from its label ("PyTorch 2.5.1+cpu (PyPI)")."""
    parts = []
    for p in peer.label.split()[1].split("+")[0].split(".")[:3]:
        digits = "".join(c for c in p if c.isdigit()) if p[:1].isdigit() else ""
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


class Cells:
    """Medians of one (model, implementation, mode) and the cell texts."""

    def __init__(self, runs, none_runs):
        def med(rs, k):
            return bl.median([r.get(k) for r in rs])
        self.acc = med(runs, "test_accuracy")
        self.train_s = med(runs, "train_s")
        self.per = med(runs, "wire_bytes_per_step")
        self.total = med(runs, "wire_bytes_total")
        self.none_acc = med(none_runs, "test_accuracy")
        self.none_per = med(none_runs, "wire_bytes_per_step")
        self.none_total = med(none_runs, "wire_bytes_total")
        self.delta = (100 * (self.acc - self.none_acc)
                      if self.acc is not None and self.none_acc is not None else None)
        # Over the whole run, so that warm-up steps (dtrain's --warmup, PyTorch's first
        # PowerSGD steps) count; without them, the per-step ratio.
        self.ratio = (self.total / self.none_total if self.total is not None and self.none_total
                      else None)
        self.acc_per_mb = (100 * self.acc / (self.total / 1e6)
                           if self.acc is not None and self.total else None)

    def row(self):
        return [bl.fmt(None if self.acc is None else 100 * self.acc, ".2f"),
                bl.fmt(self.delta, "+.2f"), bl.fmt(None if self.per is None else self.per / 1e6,
                                                   ".4f"),
                bl.fmt(self.ratio, ".4f"), bl.fmt(self.train_s, ".3g"),
                bl.fmt(self.acc_per_mb, ".4g")]


def mark(ok):
    return "met" if ok else "NOT met"


def main():
    started = time.monotonic()
    a = args_parse()
    build, sgemm_peak = bl.build_tools(a.build, "compress.py")
    optim = {m: config_optim(m) for m in a.models}
    rec = bl.Recorder("compress")
    rec.write({"event": "machine", "openblas_coretype": bl.init_blas(build),
               "quick": a.quick, "ranks": a.ranks, "epochs": a.epochs, "modes": a.modes})
    peers = [bl.Peer("dtrain", "dtrain")]
    if a.ps:
        peers.append(bl.Peer("dtrain_ps", "dtrain ps (%d workers + 1 server)" % a.ranks))
    peers += bl.torch_peers()
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    runs = [(p, mode) for p in peers if p.missing is None for mode in a.modes
            if p.key.startswith("dtrain") or torch_has(mode)]

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    results, errors = {}, {}
    for rep in range(a.reps):
        for model in a.models:
            k = rep % len(runs)
            for peer, mode in runs[k:] + runs[:k]:
                bl.log("rep %d/%d  %-7s %-10s %s" % (rep + 1, a.reps, model, mode, peer.label))
                try:
                    r = (dtrain_run(a, build, model, mode, peer.key == "dtrain_ps")
                         if peer.key.startswith("dtrain")
                         else torch_run(a, peer, model, mode, optim[model]))
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[(model, peer.key, mode)] = str(e)
                    rec.write({"event": "failed", "peer": peer.key, "model": model,
                               "mode": mode, "rep": rep, "error": str(e)})
                    continue
                r = dict(r, event="train", peer=peer.key, rep=rep)
                rec.write(r)
                results.setdefault((model, peer.key, mode), []).append(r)
    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    steps_note = ("%d epochs" % a.epochs if not a.quick and not a.max_steps else
                  "at most %d epochs, --max-steps %s" % (
                      a.epochs, ", ".join("%s %d" % (m, max_steps(a, m)) for m in a.models)))
    out = ["dtrain gradient-compression benchmark: %d ranks x 1 thread, batch %d per rank, %s, "
           "median of %d run(s)%s" % (a.ranks, BATCH, steps_note, a.reps,
                                      " (--quick: NOT a measurement)" if a.quick else ""),
           "PyTorch: DDP on gloo with its built-in hooks; its bytes are computed from the "
           "hook's definition (bench/torch_compress.py)" + bl.coretype_note(), ""]
    head = ["implementation", "mode", "test acc %", "vs none (pts)", "MB sent/step",
            "x none's bytes", "train s", "acc % per MB sent"]
    cells = {}
    for model in a.models:
        rows = []
        for p in peers:
            if p.missing:
                rows.append([p.label, "(all)"] + [p.missing] * (len(head) - 2))
                continue
            for mode in a.modes:
                if not p.key.startswith("dtrain") and not torch_has(mode):
                    rows.append([p.label, mode] + [NO_HOOK] * (len(head) - 2))
                    continue
                rs = results.get((model, p.key, mode), [])
                if not rs:
                    why = "failed" if (model, p.key, mode) in errors else "-"
                    rows.append([p.label, mode] + [why] * (len(head) - 2))
                    continue
                c = Cells(rs, results.get((model, p.key, "none"), []))
                cells[(model, p.key, mode)] = c
                rec.write({"event": "summary", "model": model, "peer": p.key, "label": p.label,
                           "mode": mode, "test_accuracy": c.acc, "delta_points": c.delta,
                           "wire_bytes_per_step": c.per, "bytes_ratio_to_none": c.ratio,
                           "wire_bytes_total": c.total, "train_s": c.train_s,
                           "accuracy_points_per_mb": c.acc_per_mb, "reps": len(rs)})
                rows.append([p.label, mode] + c.row())
        out.append(bl.table("%s: test accuracy after training, MB one rank sends per step, "
                            "accuracy %% per MB sent over the run" % model, head, rows))

    out.append("Targets%s:" % (" (--quick: NOT a measurement)" if a.quick else ""))
    newest = [p for p in peers if not p.key.startswith("dtrain") and p.missing is None]
    newest = max(newest, key=peer_version) if newest else None
    for model in a.models:
        for key, mode in ((k, m) for k in ("dtrain", "dtrain_ps")
                          for m in ("topk:0.01", "powersgd:4")):
            c = cells.get((model, key, mode))
            name = "dtrain ps" if key == "dtrain_ps" else "dtrain"
            if mode not in a.modes or (key == "dtrain_ps" and not a.ps):
                continue
            if c is None or c.delta is None or c.ratio is None:
                out.append("  %s %s %s within %.1f points of none, <= 1/%d of its bytes: "
                           "not measured" % (name, model, mode, ACC_POINTS_MAX,
                                             1 / BYTES_RATIO_MAX))
                continue
            ok = -c.delta <= ACC_POINTS_MAX and c.ratio <= BYTES_RATIO_MAX
            out.append("  %s %s %s within %.1f points of none (%+.2f), <= 1/%d of its bytes "
                       "(1/%.1f): %s" % (name, model, mode, ACC_POINTS_MAX, c.delta,
                                         1 / BYTES_RATIO_MAX, 1 / c.ratio, mark(ok)))
        for mode in ("fp16", "powersgd:4"):
            if mode not in a.modes:
                continue
            d = cells.get((model, "dtrain", mode))
            t = cells.get((model, newest.key, mode)) if newest else None
            what = "  dtrain %s %s accuracy per MB >= %s's" % (
                model, mode, newest.label if newest else "PyTorch")
            if newest is None:
                out.append(what + ": not measured (no PyTorch installed)")
            elif d is None or t is None or d.acc_per_mb is None or t.acc_per_mb is None:
                out.append(what + ": not measured")
            else:
                out.append(what + " (%.4g against %.4g): %s" % (
                    d.acc_per_mb, t.acc_per_mb, mark(d.acc_per_mb >= t.acc_per_mb)))
    if not any(m in a.modes for m in ("topk:0.01", "powersgd:4", "fp16")):
        out.append("  none: --modes has none of topk:0.01, powersgd:4, fp16")
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: times are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    for (model, key, mode), e in sorted(errors.items()):
        out.append("failed: %s %s %s: %s" % (model, key, mode, bl.failure_reason(e)))
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
