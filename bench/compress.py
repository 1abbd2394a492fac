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
evaluates on the test images after training. PyTorch runs eager with fused=True Adam (its
fastest CPU Adam) where its torch has it (2.4 and later), else its default Adam;
--torch-adam default,fused runs both as rows of their own. Its bytes per step are computed
from the hook's definition and the model's tensors (torch_compress.py's docstring gives each
formula: 4 x parameters, 2 x parameters, PowerSGD's P and Q plus the tensors its own
_should_compress leaves dense), not measured on the socket; PowerSGD's first 2 dense steps
(start_powerSGD_iter, the least PyTorch accepts) are in its total.

Equal steady-state bytes: dtrain's powersgd rows run with --compress-warmup 2, so both sides
send the same float32 gradient in their first 2 steps and the same factors after them (the
same bytes over the run); --warmup W gives W to every compressed mode instead.

Seeds: every (implementation, mode) runs once per seed 1..--seeds (default 3; dtrain --seed,
torch_compress.py --seed: initialisation, shuffle and dropout), the seeds in rounds, each
round every (implementation, mode) in an order that rotates from one round to the next.
Accuracy is shown as the median over the seeds with the min-max spread; times and bytes are
medians. The machine's 2-process/1-process parallel ratio is measured before the first round
and after every round; a round with a ratio below 1.8 (--ratio-min) before or after it is
flagged, and its runs are in the table but not in the targets (the report says how many were
flagged).

Columns: test accuracy (%), median (min-max); the median's difference from the same
implementation's "none" in accuracy points; MB one rank sends per step (steady state); the
bytes it sent over the whole run over its "none"'s (warm-up steps included); training
seconds; and accuracy points per MB sent = final accuracy (%) / MB one rank sent over the
whole run (dtrain: wire_bytes_per_step x steps, its warm-up steps at dense_bytes_per_step);
runs (flagged). Every run goes to bench/out/compress-<time>.jsonl.

With --ps, the same modes also run under dtrain's parameter server (`--strategy ps`: N
workers and 1 server, so N + 1 processes; its pushes compressed, each worker with its own
error feedback and, for PowerSGD, its own factors), as rows "dtrain ps" measured against ps's
own "none". No peer: PyTorch has no parameter server.

Targets (printed under the tables, met / NOT met), each judged by one rule, reached():
accuracy A reaches accuracy B with a slack of S points when A's median over the unflagged
seeds is at least the lowest of B's unflagged seeds less S (within B's spread, or higher).
  - topk:0.01 and powersgd:4 reach dtrain's none with a slack of 1.5 points after 2 epochs
    while sending at most 1/20 of its bytes over the run;
  - dtrain's fp16 and powersgd:4 reach the newest PyTorch's hook (fp16 against fp16,
    powersgd:4 against powersgd:4; slack 0) at no more bytes over the run.
Usage (bench/compress.sh calls it): /usr/bin/python3 bench/compress.py --build BUILD_DIR
[--quick] [--models mlp,convnet] [--modes none,fp16,...] [--ranks N] [--epochs E] [--seeds S]
[--ps] [--warmup W] [--torch-adam fused]
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
# torch_compress.py's start_powerSGD_iter: PyTorch's PowerSGD sends the float32 gradient
# for its first 2 steps, and dtrain's powersgd rows get as many (--compress-warmup).
POWERSGD_WARMUP = 2
# The targets (see the docstring).
ACC_POINTS_MAX = 1.5
BYTES_RATIO_MAX = 1.0 / 20
TIMEOUT_S = 3600
NO_HOOK = "no built-in hook"


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with dtrain and sgemm_peak")
    ap.add_argument("--seeds", "--reps", type=int, default=None, dest="seeds",
                    help="runs per (implementation, mode), seeds 1..S (default 3; --quick: 1)")
    ap.add_argument("--torch-adam", default="fused",
                    help="PyTorch's Adam: fused (where its torch has it), default, or "
                         "default,fused for both (default %(default)s)")
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
    ap.add_argument("--ratio-min", type=float, default=bl.PARALLEL_RATIO_MIN,
                    help="flag a seed round whose parallel ratio before or after it is below "
                         "this (default %(default)s; 0 flags none)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="dtrain: --compress-warmup W for every compressed mode (default: 0, "
                         "and %d for powersgd, as PyTorch's hook)" % POWERSGD_WARMUP)
    ap.add_argument("--ps", action="store_true",
                    help="also run every mode under --strategy ps (N workers + 1 server)")
    ap.add_argument("--sides", default=None,
                    help="which implementations run, comma-separated: dtrain (ddp), ps, torch "
                         "(default dtrain,torch, and ps with --ps); e.g. --ps --sides ps "
                         "reruns the ps rows alone (dtrain's ddp rows are deterministic)")
    ap.add_argument("--quick", action="store_true",
                    help="a few steps, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.seeds is None:
        a.seeds = 1 if a.quick else 3
    if a.quick:
        a.spin = 0.2
    if a.seeds < 1:
        ap.error("--seeds: at least 1")
    a.torch_adam = bl.adam_list(ap, a.torch_adam)
    a.sides = (a.sides.split(",") if a.sides is not None else
               ["dtrain", "torch"] + (["ps"] if a.ps else []))
    if not a.sides or any(x not in ("dtrain", "ps", "torch") for x in a.sides):
        ap.error("--sides: dtrain, ps and/or torch, not %r" % ",".join(a.sides))
    if "ps" in a.sides and not a.ps:
        ap.error("--sides ps needs --ps")
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


def warmup_of(a, mode):
    """dtrain's --compress-warmup for `mode`."""
    if mode == "none":
        return 0
    return a.warmup or (POWERSGD_WARMUP if mode.startswith("powersgd:") else 0)


def dtrain_run(a, build, model, mode, seed, ps=False):
    """One `dtrain train --compress MODE` under mpirun (ps: N workers and 1 server); its
    figures from --metrics."""
    tmp = tempfile.mkdtemp(prefix="dtrain-compress-")
    try:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = ["mpirun", "-np", str(a.ranks + (1 if ps else 0)), "--oversubscribe",
               os.path.join(build, "dtrain"),
               "train", bl.MODELS[model], "--epochs", str(a.epochs), "--batch", str(BATCH),
               "--threads", "1", "--compress", mode, "--metrics", metrics, "--no-progress",
               "--seed", str(seed)]
        if ps:
            cmd += ["--strategy", "ps"]
        if warmup_of(a, mode):
            cmd += ["--compress-warmup", str(warmup_of(a, mode))]
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
            "wire_bytes_total": total, "compress_warmup_steps": warm, "seed": seed,
            "comm_record": m["comm"], "compress_reported": comm.get("compress"),
            "wall_s": wall, "command": " ".join(cmd)}


def torch_run(a, var, model, mode, optim, seed):
    lr, schedule = optim
    cmd = [var.python, os.path.join(bl.HERE, "torch_compress.py"), "--model", model,
           "--world-size", str(a.ranks), "--batch", str(BATCH), "--threads", "1",
           "--epochs", str(a.epochs), "--hook", mode, "--lr", lr, "--schedule", schedule,
           "--seed", str(seed), "--adam", var.adam]
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


def reached(ours, ref, slack_points=0.0):
    """The one rule every accuracy target here is judged by: `ours` (accuracies of one
    implementation and mode over its seeds, 0-1) reaches `ref` when its median is at least
    the lowest of `ref` less `slack_points` accuracy points: within ref's spread, or higher.
    None where either side has no run."""
    ours = [v for v in ours if v is not None]
    ref = [v for v in ref if v is not None]
    if not ours or not ref:
        return None
    return bl.median(ours) >= min(ref) - slack_points / 100.0


def spread(accs):
    """'median (min-max)' of accuracies (0-1) as percentages."""
    accs = [v for v in accs if v is not None]
    if not accs:
        return "-"
    if len(accs) == 1:
        return "%.2f" % (100 * accs[0])
    return "%.2f (%.2f-%.2f)" % (100 * bl.median(accs), 100 * min(accs), 100 * max(accs))


class Cells:
    """One (model, implementation, mode): every seed's run (`runs`) and the unflagged ones
    (`good`, those the targets use), medians, and the cell texts. The table shows every run;
    the accuracy cell is the median over the seeds with their min-max spread."""

    def __init__(self, runs, none_runs):
        def med(rs, k):
            return bl.median([r.get(k) for r in rs])
        self.runs, self.none_runs = runs, none_runs
        self.good = [r for r in runs if not r["flagged"]]
        self.none_good = [r for r in none_runs if not r["flagged"]]
        self.accs = [r.get("test_accuracy") for r in runs]
        self.acc = med(runs, "test_accuracy")
        self.train_s = med(runs, "train_s")
        self.per = med(runs, "wire_bytes_per_step")
        self.total = med(runs, "wire_bytes_total")
        self.none_acc = med(none_runs, "test_accuracy")
        self.none_total = med(none_runs, "wire_bytes_total")
        self.delta = (100 * (self.acc - self.none_acc)
                      if self.acc is not None and self.none_acc is not None else None)
        # Over the whole run, so that warm-up steps (dtrain's --compress-warmup, PyTorch's
        # first PowerSGD steps) count.
        self.ratio = (self.total / self.none_total if self.total is not None and self.none_total
                      else None)
        self.acc_per_mb = (100 * self.acc / (self.total / 1e6)
                           if self.acc is not None and self.total else None)
        # The unflagged runs' figures, for the targets.
        self.good_accs = [r.get("test_accuracy") for r in self.good]
        self.good_total = med(self.good, "wire_bytes_total")
        none_good_total = med(self.none_good, "wire_bytes_total")
        self.good_ratio = (self.good_total / none_good_total
                           if self.good_total is not None and none_good_total else None)

    def row(self):
        flagged = len(self.runs) - len(self.good)
        return [spread(self.accs), bl.fmt(self.delta, "+.2f"),
                bl.fmt(None if self.per is None else self.per / 1e6, ".4f"),
                bl.fmt(self.ratio, ".4f"), bl.fmt(self.train_s, ".3g"),
                bl.fmt(self.acc_per_mb, ".4g"),
                "%d%s" % (len(self.runs), " (%d flagged)" % flagged if flagged else "")]


def mark(ok):
    return "met" if ok else "NOT met"


def compression_target(name, model, mode, c, none):
    """The line of one "within 1.5 points of none at <= 1/20 of its bytes" target, judged
    on the unflagged runs."""
    what = "  %s %s %s reaches none within %.1f points, <= 1/%d of its bytes" % (
        name, model, mode, ACC_POINTS_MAX, 1 / BYTES_RATIO_MAX)
    if c is None or none is None:
        return what + ": not measured"
    ok = reached(c.good_accs, none.good_accs, ACC_POINTS_MAX)
    if ok is None or c.good_ratio is None:
        return what + ": not judged (every run flagged or failed)"
    return what + (" (median %s against none's %s; 1/%.1f of the bytes; %d+%d unflagged "
                   "runs): %s" % (spread(c.good_accs), spread(none.good_accs), 1 / c.good_ratio,
                                  len(c.good), len(none.good),
                                  mark(ok and c.good_ratio <= BYTES_RATIO_MAX)))


def peer_target(model, mode, d, t, label):
    """The line of one "dtrain reaches PyTorch's hook at no more bytes" target, judged on the
    unflagged runs."""
    what = "  dtrain %s %s reaches %s's %s at no more bytes" % (model, mode, label, mode)
    if d is None or t is None:
        return what + ": not measured"
    ok = reached(d.good_accs, t.good_accs)
    if ok is None or d.good_total is None or t.good_total is None:
        return what + ": not judged (every run flagged or failed)"
    # The bytes are counted, not timed: equal sides agree to the byte.
    fewer = d.good_total <= t.good_total
    return what + " (median %s against %s; %.4g against %.4g MB over the run; %d+%d "\
        "unflagged runs): %s" % (spread(d.good_accs), spread(t.good_accs),
                                 d.good_total / 1e6, t.good_total / 1e6, len(d.good),
                                 len(t.good), mark(ok and fewer))


def main():
    started = time.monotonic()
    a = args_parse()
    build, sgemm_peak = bl.build_tools(a.build, "compress.py")
    optim = {m: config_optim(m) for m in a.models}
    rec = bl.Recorder("compress")
    rec.write({"event": "machine", "openblas_coretype": bl.init_blas(build),
               "quick": a.quick, "ranks": a.ranks, "epochs": a.epochs, "modes": a.modes,
               "seeds": a.seeds})
    peers = [bl.Peer("dtrain", "dtrain")] if "dtrain" in a.sides else []
    if "ps" in a.sides:
        peers.append(bl.Peer("dtrain_ps", "dtrain ps (%d workers + 1 server)" % a.ranks))
    torch_vars, notes = bl.adam_variants(bl.torch_peers(), a.torch_adam)
    if "torch" in a.sides:
        peers += torch_vars
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
    runs = [(p, mode) for p in peers if p.missing is None for mode in a.modes
            if p.key.startswith("dtrain") or torch_has(mode)]

    def parallel_ratio(when):
        bl.log("parallel ratio (%s)..." % when)
        ratio = bl.parallel_ratio(sgemm_peak, a.spin)
        rec.write({"event": "parallel_ratio", "when": when, "ratio": ratio})
        return ratio

    # A round is flagged when the ratio before it or after it is below the minimum.
    ratios = [parallel_ratio("before seed 1")]
    results, errors, done = {}, {}, []
    for rep in range(a.seeds):
        seed = rep + 1
        for model in a.models:
            k = rep % len(runs)
            for peer, mode in runs[k:] + runs[:k]:
                bl.log("seed %d/%d  %-7s %-10s %s" % (seed, a.seeds, model, mode, peer.label))
                try:
                    r = (dtrain_run(a, build, model, mode, seed, peer.key == "dtrain_ps")
                         if peer.key.startswith("dtrain")
                         else torch_run(a, peer, model, mode, optim[model], seed))
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[(model, peer.key, mode)] = str(e)
                    rec.write({"event": "failed", "peer": peer.key, "model": model,
                               "mode": mode, "rep": rep, "seed": seed, "error": str(e)})
                    continue
                r = dict(r, event="train", peer=peer.key, rep=rep, seed=seed)
                rec.write(r)  # as it arrives: an interrupted run keeps it
                done.append(r)
                results.setdefault((model, peer.key, mode), []).append(r)
        ratios.append(parallel_ratio("after seed %d" % seed))
        flagged = min(ratios[-2:]) < a.ratio_min
        rec.write({"event": "round", "seed": seed, "ratio_before": ratios[-2],
                   "ratio_after": ratios[-1], "flagged": flagged})
        for r in done:
            r["flagged"] = flagged
        done = []
    flagged_seeds = [rep + 1 for rep in range(a.seeds)
                     if min(ratios[rep:rep + 2]) < a.ratio_min]

    steps_note = ("%d epochs" % a.epochs if not a.quick and not a.max_steps else
                  "at most %d epochs, --max-steps %s" % (
                      a.epochs, ", ".join("%s %d" % (m, max_steps(a, m)) for m in a.models)))
    out = ["dtrain gradient-compression benchmark: %d ranks x 1 thread, batch %d per rank, %s, "
           "seeds 1-%d%s" % (a.ranks, BATCH, steps_note, a.seeds,
                             " (--quick: NOT a measurement)" if a.quick else ""),
           "PyTorch: DDP on gloo with its built-in hooks, eager; its bytes are computed from "
           "the hook's definition (bench/torch_compress.py)" + bl.coretype_note(),
           "dtrain's --compress-warmup: %s" % ", ".join(
               "%s %d" % (m, warmup_of(a, m)) for m in a.modes if m != "none"), ""]
    head = ["implementation", "mode", "test acc % median (min-max)", "vs none (pts)",
            "MB sent/step", "x none's bytes", "train s", "acc % per MB sent", "runs"]
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
                           "mode": mode, "test_accuracy": c.acc,
                           "test_accuracy_min": min(v for v in c.accs if v is not None)
                           if any(v is not None for v in c.accs) else None,
                           "test_accuracy_max": max(v for v in c.accs if v is not None)
                           if any(v is not None for v in c.accs) else None,
                           "delta_points": c.delta,
                           "wire_bytes_per_step": c.per, "bytes_ratio_to_none": c.ratio,
                           "wire_bytes_total": c.total, "train_s": c.train_s,
                           "accuracy_points_per_mb": c.acc_per_mb, "runs": len(rs),
                           "flagged": len(rs) - len(c.good)})
                rows.append([p.label, mode] + c.row())
        out.append(bl.table("%s: test accuracy after training, MB one rank sends per step, "
                            "accuracy %% per MB sent over the run" % model, head, rows))
        out += train_time_lines(model, a.modes, cells, torch_vars)

    out.append("Targets%s (reached: the median over the unflagged seeds at least the other's "
               "lowest unflagged seed, less the slack; flagged rounds left out):"
               % (" (--quick: NOT a measurement)" if a.quick else ""))
    newest = [p for p in torch_vars if p.missing is None]
    newest_peer = max((p.peer for p in newest), key=peer_version) if newest else None
    newest = [p for p in newest if p.peer is newest_peer]
    for model in a.models:
        for key, mode in ((k, m) for k in ("dtrain", "dtrain_ps")
                          for m in ("topk:0.01", "powersgd:4")):
            if mode not in a.modes or (key == "dtrain_ps" and not a.ps):
                continue
            out.append(compression_target("dtrain ps" if key == "dtrain_ps" else "dtrain",
                                          model, mode, cells.get((model, key, mode)),
                                          cells.get((model, key, "none"))))
        for mode in ("fp16", "powersgd:4"):
            if mode not in a.modes:
                continue
            if not newest:
                out.append("  dtrain %s %s against PyTorch's hook: not measured (no PyTorch "
                           "installed)" % (model, mode))
            for v in newest:
                out.append(peer_target(model, mode, cells.get((model, "dtrain", mode)),
                                       cells.get((model, v.key, mode)),
                                       "%s (eager, %s Adam)" % (v.peer.label, v.adam)))
    if not any(m in a.modes for m in ("topk:0.01", "powersgd:4", "fp16")):
        out.append("  none: --modes has none of topk:0.01, powersgd:4, fp16")
    out.append("flagged: %d of %d seed rounds (%s) had a machine parallel ratio below %.1f "
               "before or after them; their runs are in the tables, not in the targets"
               % (len(flagged_seeds), a.seeds, ", ".join("seed %d" % k for k in flagged_seeds)
                  or "none", a.ratio_min))
    out.append("machine parallel ratio (same loop, 2 processes / 1), before seed 1 and after "
               "each: %s" % ", ".join("%.2f" % r for r in ratios))
    for note in notes:
        out.append(note)
    for (model, key, mode), e in sorted(errors.items()):
        out.append("failed: %s %s %s: %s" % (model, key, mode, bl.failure_reason(e)))
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    print("\n".join(out))
    return 0


def train_time_lines(model, modes, cells, torch_vars):
    """dtrain's training seconds over the fastest PyTorch row's, per mode, naming that row."""
    parts = []
    for mode in modes:
        d = cells.get((model, "dtrain", mode))
        theirs = [(cells[(model, v.key, mode)].train_s, v) for v in torch_vars
                  if (model, v.key, mode) in cells and cells[(model, v.key, mode)].train_s]
        if d is None or d.train_s is None or not theirs:
            continue
        t, v = min(theirs, key=lambda x: x[0])
        parts.append("%s %.2fx (%s, eager, %s Adam: %.3g s)" % (mode, d.train_s / t,
                                                                 v.peer.label, v.adam, t))
    if not parts:
        return []
    return ["%s train s, dtrain over the fastest PyTorch: %s" % (model, "; ".join(parts)), ""]


if __name__ == "__main__":
    sys.exit(main())
