#!/usr/bin/python3
"""Parameter-server benchmark: dtrain's ps strategy (W workers and 1 server, staleness 0, 2
and inf) beside its ddp on W ranks, each plain and with worker rank 1 slowed by a constant
delay at every step, on the MLP and the ConvNet, one thread per rank, 64 samples per worker
per step, 2 epochs. Prints test accuracy, training time, samples/s and its ratio to ddp, the
largest staleness a worker saw, and the target: with one slowed rank, ps at S=2 keeps at
least 1.3x the throughput of S=0. Beside it, the machine's 2-process/1-process parallel
ratio before and after (ps runs W + 1 processes: on a 2-core machine they share the cores).

Runs: `mpirun -np N --oversubscribe BUILD/dtrain train CONFIG --epochs E --batch 64
--threads 1 --metrics FILE --no-progress`, N = W for ddp; for ps N = W + 1 with `--strategy
ps --servers 1 --staleness S` (the last rank is the server, ranks 0..W-1 the workers);
slowed runs add `--slow-rank 1:MS` (rank 1 sleeps MS ms before each step; a worker in both
strategies). One BLAS thread per rank; --quick adds --max-steps.

The delay. MS = 50% of the plain ddp run's step time of the same model: the first
repetition runs the plain ddp run of each model first, and its metrics give, per epoch,
epoch_s over the epoch's steps (the mean step time; the metrics carry no per-step times);
MS is half the median of those over the epochs, kept for every later run of that model
(--slow-ms sets it instead).

Figures, from rank 0's --metrics file and the run's stdout (bench/benchlib.py read_metrics):
  test accuracy  the last epoch record's (the 10,000 test images);
  training s     the sum of the epochs' epoch_s on rank 0 (a worker), evaluation excluded;
  samples/s      the samples trained (each epoch's samples_per_s x epoch_s: epochs x 60,000
                 for whole epochs) over training s; "x ddp" divides it by ddp's samples/s
                 with the same rank slowed or not;
  run s          the whole mpirun, launch to exit (start-up and evaluation included);
  staleness max  the largest "staleness max: M" of the workers' lines `dtrain: ps worker,
                 rank R: staleness max: M; staleness bound: B; steps at staleness 0: N; ...`;
  applied        the server's `dtrain: ps server, rank R: gradients applied (...): G; ...`.
Every cell is the median over --reps runs; each repetition runs every configuration of a
model in an order that rotates from one repetition to the next. Every run goes to
bench/out/ps-<time>.jsonl.

What a constant per-step delay implies for stale-synchronous parallelism (SSP; Ho et al.,
"More effective distributed ML via a stale synchronous parallel parameter server", NIPS
2013), and what this benchmark therefore checks rather than assumes: a bound S lets the
fastest worker run at most S steps ahead of the slowest. A worker that is slower at *every*
step falls behind by a fixed time per step, so the others reach the bound after a few steps
and from then on wait for it at each step: at any finite S the average rate of all workers
is the slow worker's, and S only buys a one-time head start of S steps (S=2 against S=0 is
then about 1.0x, not 1.3x). SSP absorbs delays that come and go (jitter, a pause), not a
constant one. Only S=inf decouples the workers: rank 0 then runs at its own rate, but it has
its own share of every epoch to train, and the epoch's evaluation gathers the servers'
parameters from every rank, so the run as a whole still ends when the slow worker has done
its share. Rank 0's training s at S=inf therefore shows rank 0's own rate while run s shows
the whole job's; both are printed.

--jitter measures where SSP does help: the slowed runs add `--jitter MS` instead (every
worker sleeps an exponentially distributed time of mean MS before each step, drawn from the
seed, its rank and the step: which worker is slow changes from step to step). At S=0 every
step then waits for the slowest of the W draws (for W = 2 the mean of the larger of two
exponentials is 1.5 MS); with S=2 a worker slowed now catches up while another is slowed
later, so the rate tends to the mean delay.

Usage (bench/ps.sh calls it): /usr/bin/python3 bench/ps.py --build BUILD_DIR [--quick]
[--models mlp,convnet] [--workers W] [--epochs E] [--staleness 0,2,inf] [--reps R]
[--jitter]
"""
import argparse
import os
import re
import shutil
import sys
import tempfile
import time

import benchlib as bl

BATCH = 64
QUICK_STEPS = {"mlp": 20, "convnet": 3}
SLOW_FRACTION = 0.5
SLOW_RANK = 1
TARGET_SPEEDUP = 1.3  # ps S=2 over ps S=0, rank 1 slowed
TIMEOUT_S = 3600
WORKER_LINE = re.compile(r"dtrain: ps worker, rank (\d+): staleness max: (\d+); "
                         r"staleness bound: (\w+);((?: steps at staleness [^;]*;)*)")
SERVER_LINE = re.compile(r"dtrain: ps server, rank (\d+): gradients applied \([^)]*\): (\d+)")


def by_staleness(text):
    """" steps at staleness 0: 6; steps at staleness >= 16: 2;" as "0:6 >=16:2"."""
    return " ".join("%s:%s" % (age.replace(" ", ""), n) for age, n in
                    re.findall(r"steps at staleness ([>= 0-9]+): (\d+);", text))


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with dtrain and sgemm_peak")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (median taken)")
    ap.add_argument("--workers", type=int, default=2,
                    help="data-parallel ranks of ddp, workers of ps (>= 2: rank 1 is slowed)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs per run (default 2)")
    ap.add_argument("--models", default="mlp,convnet")
    ap.add_argument("--staleness", default="0,2,inf",
                    help="ps staleness bounds, comma-separated (default %(default)s)")
    # "%%%%": one "%" after this format and argparse's own formatting of the help.
    ap.add_argument("--jitter", action="store_true",
                    help="slow every worker by a random delay of mean MS per step (--jitter) "
                         "instead of rank 1 by a constant MS")
    ap.add_argument("--slow-ms", type=float, default=None,
                    help="rank 1's delay per step in ms (default: %d%%%% of the plain ddp run's "
                         "step time)" % (100 * SLOW_FRACTION))
    ap.add_argument("--max-steps", type=int, default=0,
                    help="stop every run after N steps (0: the epochs; --quick sets MLP %d, "
                         "ConvNet %d)" % (QUICK_STEPS["mlp"], QUICK_STEPS["convnet"]))
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="a few steps, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.spin = 1, 0.2
    if a.reps < 1:
        ap.error("--reps: at least 1")
    if a.workers < 2:
        ap.error("--workers: 2 or more (worker rank 1 is the slowed one)")
    if a.epochs < 1 or a.max_steps < 0:
        ap.error("--epochs: at least 1; --max-steps: 0 or more")
    if a.slow_ms is not None and a.slow_ms <= 0:
        ap.error("--slow-ms: a positive number of milliseconds")
    a.models = a.models.split(",")
    for m in a.models:
        if m not in bl.MODELS:
            ap.error("unknown model %s (%s)" % (m, ", ".join(bl.MODELS)))
    a.staleness = a.staleness.split(",")
    for s in a.staleness:
        if s != "inf" and not s.isdigit():
            ap.error("--staleness: non-negative integers or inf, not %r" % s)
    return a


def max_steps(a, model):
    return QUICK_STEPS[model] if a.quick and not a.max_steps else a.max_steps


def slowed_text(a):
    return ("every worker slowed by a random delay of mean" if a.jitter
            else "rank %d slowed by" % SLOW_RANK)


def run_name(staleness):
    return "ddp" if staleness is None else "ps S=%s" % staleness


def dtrain_run(a, build, model, staleness, slow_ms):
    """One `dtrain train` (ddp when staleness is None, else ps with one server) under
    mpirun; its figures from --metrics and the ps lines of its stdout."""
    ranks = a.workers if staleness is None else a.workers + 1
    tmp = tempfile.mkdtemp(prefix="dtrain-ps-")
    try:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", os.path.join(build, "dtrain"),
               "train", bl.MODELS[model], "--epochs", str(a.epochs), "--batch", str(BATCH),
               "--threads", "1"]
        if staleness is not None:
            cmd += ["--strategy", "ps", "--servers", "1", "--staleness", staleness]
        if slow_ms is not None and a.jitter:
            cmd += ["--jitter", "%.4g" % slow_ms]
        elif slow_ms is not None:
            cmd += ["--slow-rank", "%d:%.4g" % (SLOW_RANK, slow_ms)]
        cmd += ["--metrics", metrics, "--no-progress"]
        if max_steps(a, model):
            cmd += ["--max-steps", str(max_steps(a, model))]
        stdout, wall = bl.run_text(cmd, bl.thread_env(1), TIMEOUT_S)
        m = bl.read_metrics(metrics)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    workers = [{"rank": int(w.group(1)), "staleness_max": int(w.group(2)),
                "bound": w.group(3), "steps_by_staleness": by_staleness(w.group(4))}
               for w in WORKER_LINE.finditer(stdout)]
    servers = [{"rank": int(s.group(1)), "applied": int(s.group(2))}
               for s in SERVER_LINE.finditer(stdout)]
    if staleness is not None and not workers:
        raise RuntimeError("%s: exit 0\nno `dtrain: ps worker, rank` line in its output"
                           % " ".join(cmd))
    return {"model": model, "run": run_name(staleness), "staleness": staleness,
            "slow_ms": slow_ms, "ranks": ranks, "workers": a.workers,
            "test_accuracy": m["test_accuracy"], "train_s": m["train_s"],
            "samples": m["samples"],
            "samples_per_s": m["samples"] / m["train_s"] if m["train_s"] > 0 else None,
            "steps": m["steps"], "step_ms": [1e3 * s for s in m["step_s"]],
            "wall_s": wall,
            "staleness_max": max(w["staleness_max"] for w in workers) if workers else None,
            "ps_workers": workers, "ps_servers": servers,
            "applied": sum(s["applied"] for s in servers) if servers else None,
            "ps_lines": [ln for ln in stdout.splitlines() if ln.startswith("dtrain: ps ")],
            "command": " ".join(cmd)}


def main():
    started = time.monotonic()
    a = args_parse()
    build, sgemm_peak = bl.build_tools(a.build, "ps.py")
    rec = bl.Recorder("ps")
    rec.write({"event": "machine", "openblas_coretype": bl.init_blas(build), "quick": a.quick,
               "workers": a.workers, "epochs": a.epochs, "staleness": a.staleness})
    configs = [(s, slowed) for slowed in (False, True) for s in [None] + a.staleness]
    slow_ms = {m: a.slow_ms for m in a.models}
    calibration = {}

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    results, errors = {}, {}
    for rep in range(a.reps):
        for model in a.models:
            k = rep % len(configs)
            order = configs[k:] + configs[:k]
            if slow_ms[model] is None:  # the plain ddp run first: it gives the delay
                order.remove((None, False))
                order.insert(0, (None, False))
            for staleness, slowed in order:
                key = (model, run_name(staleness), slowed)
                bl.log("rep %d/%d  %-7s %-9s %s" % (rep + 1, a.reps, model, run_name(staleness),
                                                     "rank %d slowed" % SLOW_RANK if slowed
                                                     else "plain"))
                try:
                    if slowed and slow_ms[model] is None:
                        raise RuntimeError("%s: not run\nno delay: the plain ddp run that "
                                           "calibrates it failed" % " ".join(map(str, key)))
                    r = dtrain_run(a, build, model, staleness,
                                   slow_ms[model] if slowed else None)
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[key] = str(e)
                    rec.write({"event": "failed", "model": model, "run": key[1],
                               "slowed": slowed, "rep": rep, "error": str(e)})
                    continue
                r = dict(r, event="train", slowed=slowed, rep=rep)
                rec.write(r)
                results.setdefault(key, []).append(r)
                if staleness is None and not slowed and slow_ms[model] is None and r["step_ms"]:
                    step = bl.median(r["step_ms"])
                    slow_ms[model] = SLOW_FRACTION * step
                    calibration[model] = step
                    rec.write({"event": "calibration", "model": model, "ddp_step_ms": step,
                               "slow_ms": slow_ms[model]})
    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    def med(key, field):
        return bl.median([r.get(field) for r in results.get(key, [])])

    rows = []
    for model in a.models:
        for staleness, slowed in sorted(configs, key=lambda c: c[1]):
            key = (model, run_name(staleness), slowed)
            slow_txt = "%.3g ms" % slow_ms[model] if slowed and slow_ms[model] else (
                "yes" if slowed else "no")
            if key not in results:
                rows.append([model, key[1], slow_txt] +
                            ["failed" if key in errors else "-"] * 7)
                continue
            thr = med(key, "samples_per_s")
            ddp = med((model, "ddp", slowed), "samples_per_s")
            acc = med(key, "test_accuracy")
            cells = {"test_accuracy": acc, "train_s": med(key, "train_s"),
                     "samples_per_s": thr, "ratio_to_ddp": thr / ddp if thr and ddp else None,
                     "wall_s": med(key, "wall_s"), "staleness_max": med(key, "staleness_max"),
                     "applied": med(key, "applied")}
            rec.write(dict(cells, event="summary", model=model, run=key[1], slowed=slowed,
                           slow_ms=slow_ms[model] if slowed else None,
                           reps=len(results[key])))
            rows.append([model, key[1], slow_txt,
                         bl.fmt(None if acc is None else 100 * acc, ".2f"),
                         bl.fmt(cells["train_s"], ".3g"), bl.fmt(thr, ".0f"),
                         bl.fmt(cells["ratio_to_ddp"], ".2f"), bl.fmt(cells["wall_s"], ".3g"),
                         bl.fmt(cells["staleness_max"], ".0f"),
                         bl.fmt(cells["applied"], ".0f")])
    steps_note = ("%d epochs" % a.epochs if not a.quick and not a.max_steps else
                  "at most %d epochs, --max-steps %s" % (
                      a.epochs, ", ".join("%s %d" % (m, max_steps(a, m)) for m in a.models)))
    out = ["dtrain parameter-server benchmark: %d workers (ps: + 1 server rank) x 1 thread, "
           "batch %d per worker, %s, median of %d run(s)%s" % (
               a.workers, BATCH, steps_note, a.reps,
               " (--quick: NOT a measurement)" if a.quick else "")]
    for model in a.models:
        if model in calibration:
            out.append("%s: %s %.3g ms per step = %d%% of the plain ddp run's "
                       "step time, %.3g ms (its first repetition)" % (
                           model, slowed_text(a), slow_ms[model], 100 * SLOW_FRACTION,
                           calibration[model]))
        elif slow_ms[model]:
            out.append("%s: %s %.3g ms per step (--slow-ms)" % (
                model, slowed_text(a), slow_ms[model]))
    out.append("")
    head = ["model", "run", "jitter" if a.jitter else "rank 1 slowed", "test acc %", "train s (rank 0)", "samples/s",
            "x ddp", "run s", "staleness max", "applied"]
    out.append(bl.table("Test accuracy; training time and samples/s from rank 0's epochs; x ddp "
                        "against ddp slowed alike; run s: the whole mpirun; the largest "
                        "staleness a worker saw; gradients the server applied", head, rows))
    out.append("Target%s:" % (" (--quick: NOT a measurement)" if a.quick else ""))
    for model in a.models:
        s2, s0 = (model, "ps S=2", True), (model, "ps S=0", True)
        what = ("  %s: with %s, ps at S=2 keeps >= %.1fx the throughput of S=0"
                % (model, "every worker jittered" if a.jitter else "rank %d slowed" % SLOW_RANK,
                   TARGET_SPEEDUP))
        t2, t0 = med(s2, "samples_per_s"), med(s0, "samples_per_s")
        if not t2 or not t0:
            out.append(what + ": not measured")
            continue
        w2, w0 = med(s2, "wall_s"), med(s0, "wall_s")
        out.append(what + " (%.2fx; by run s %.2fx): %s" % (
            t2 / t0, w0 / w2 if w0 and w2 else float("nan"),
            "met" if t2 / t0 >= TARGET_SPEEDUP else "NOT met"))
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: times are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    for (model, run, slowed), e in sorted(errors.items()):
        out.append("failed: %s %s%s: %s" % (model, run, " (rank %d slowed)" % SLOW_RANK
                                            if slowed else "", bl.failure_reason(e)))
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
