#!/usr/bin/python3
"""The GPT across layouts (issue 38 "Measured", docs/BENCHMARKS.md "The GPT across layouts"):
where each layout pays, dtrain beside PyTorch on the same layout, in one run, on 2 cores.

Sizes: **nano** (bench/gpt_nano.ini: 6 layers, 6 heads, E 384, block 256; global batch 8)
and **wide**, where a layer's weights dominate (E 1024, 16 heads, 2 layers, block 64; global
batch 16: about 25.5M parameters, 12.6M in each block; sized for a step of about a second at
2 ranks). Both with every dropout 0 (the configs' own dropout would make the two sides'
losses differ; dropout's cost is left out on both), the config's AdamW (fused in PyTorch) with
clipping at a constant optim.lr.

Layouts, each at the same global batch, on 2 ranks of one thread each (or one process):
  1p1t, 1p2t   one process, 1 and 2 threads (PyTorch's faster thread setting at 2, probed);
  dp2          2 data-parallel ranks, half the batch each (PyTorch: DDP);
  tp2, tp2sp   tensor parallelism by heads, without and with --sequence-parallel (PyTorch:
               DTensor ColwiseParallel / RowwiseParallel, and SequenceParallel);
  tp2_blocking tp 2 with parallel.overlap=off: the backward's tp sums blocking, to show what
               their overlap buys (PyTorch: its tp row, whose collectives do not overlap);
  pp2_gpipe,   a pipeline of 2 stages cut where dtrain's balanced split cuts, --micro-batches
  pp2_1f1b     M (default 4) of batch / M (PyTorch: torch.distributed.pipelining's
               ScheduleGPipe, Schedule1F1B; the tied head synced by hand, see
               bench/torch_gpt_layouts.py);
  recompute    one process, 1 thread, --recompute block (PyTorch: torch.utils.checkpoint per
               block);
  dp2_zero3    2 data-parallel ranks with --zero 3: every parameter, gradient and optimizer
               state sharded, each layer gathered as it runs (PyTorch: FSDP2's fully_shard,
               each block a unit, at its defaults).

--layouts also takes any dp x tp x pp grid, one thread per rank, for more ranks than 2 (a
many-core machine): dp4, tp8, tp4sp, pp4 (1F1B) or pp4_gpipe, dp2tp2pp2; PyTorch's
counterpart runs where the grid has one axis (DDP, DTensor tp where tp divides the heads,
pipelining cut where dtrain's balanced split cuts), its hybrids have none here. --batch sets
the global batch (it must divide by dp, and then by M under a pipeline).

Per cell (bench_tp for dtrain, bench/torch_gpt_layouts.py for PyTorch): tokens/s from the
median step (the interval between the ends of consecutive steps, windows drawn inside,
median after warm-up, rank 0's), median and min-max over --reps >= 3 repetitions, the order
of the runs rotated every repetition; per rank the parameter and optimizer-state bytes held,
dtrain's planned activations and workspaces (of them kept for backward, and the blocks'
per-position ones: what sequence parallelism divides), its whole plan, and peak RSS; under a
pipeline each stage's compute and idle share. Communication: for dp, tp and pp layouts one
extra `dtrain train --trace` run (parallel.overlap=off: every collective waited for) gives
the bytes and milliseconds each rank put into its groups' collectives per step, and the
collectives' time after their last member arrived, beside `dtrain plan`'s prediction for
the layout from a link measured here (`dtrain bench-comm` at 2 ranks); that run also prints
dtrain's per-rank memory lines, checked against bench_tp's. The traced runs come before the timed ones: they are
short, and a run stopped by a time limit keeps them (bench/summarise.py prints the cells,
memory and communication of such a run from its JSON lines). `--trace-only` runs only them:
the bytes per step do not depend on the machine, so a 2-core machine checks them against the
plan at 16 ranks.

Like for like: both sides start from the same weights (`bench_train --save-init`) and train
on the same windows (`dtrain train --windows-out`); every PyTorch run's loss at every step
is compared with dtrain's (one process, same steps) and the largest difference printed
(first step within 1e-4, or the row says the computation differs); dtrain's bench_tp runs'
last loss likewise.

Targets printed against the figures: every layout's step time at most PyTorch's on the same
layout; tp 2 divides parameters and optimizer state per rank by >= 1.9; sequence parallelism
divides the blocks' per-position activations by tp; recompute per block cuts activation
memory by at least half at <= 1.4x the step time. The machine's 2-process/1-process parallel
ratio is measured before and after. JSON lines go to bench/out/gpt-layouts-<time>.jsonl.

Usage (bench/gpt_layouts.sh calls it): /usr/bin/python3 bench/gpt_layouts.py --build BUILD
[--quick]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

import benchlib as bl
from gpt import dropout_free, thread_envs
from run import machine_info

MPIRUN = ("mpirun", "--oversubscribe")
LOSS_TOL = 1e-4  # the first step's loss, both sides (dropout 0, same weights and windows)
CURVE_TOL = 1e-3  # every later step's: AdamW's updates differ in rounding on each side


class Size:
    def __init__(self, key, label, embd, heads, layers, block, batch, steps, warmup):
        self.key, self.label = key, label
        self.embd, self.heads, self.layers, self.block = embd, heads, layers, block
        self.batch, self.steps, self.warmup = batch, steps, warmup


SIZES = {
    "nano": Size("nano", "nano (bench/gpt_nano.ini: 6 layers, 6 heads, E 384, block 256)",
                 None, None, None, None, 8, 5, 1),
    "wide": Size("wide", "wide (E 1024, 16 heads, 2 layers, block 64)", 1024, 16, 2, 64, 16,
                 5, 1),
}
# --quick: tiny stand-ins for both (the scripts' paths, not a measurement).
QUICK = {
    "nano": Size("nano", "nano-quick (E 48, 6 heads, 2 layers, block 32)", 48, 6, 2, 32, 8,
                 3, 1),
    "wide": Size("wide", "wide-quick (E 64, 4 heads, 2 layers, block 16)", 64, 4, 2, 16, 8,
                 3, 1),
}


class Layout:
    """One row: dtrain's settings (bench_tp --set and dtrain train options) and its PyTorch
    counterpart (a torch_gpt_layouts.py --layout, or None); dp, tp and pp its grid."""

    def __init__(self, key, label, ranks, threads, sets, opts, peer, pp=False, dp=1, tp=1,
                 stages=1):
        self.key, self.label, self.ranks, self.threads = key, label, ranks, threads
        self.sets, self.opts, self.peer, self.pp = sets, opts, peer, pp
        self.dp, self.tp, self.stages = dp, tp, stages


def layouts(m):
    pp = ["parallel.pp=2", "parallel.micro_batches=%d" % m]
    ppo = ["--pp", "2", "--micro-batches", str(m)]
    return [
        Layout("1p1t", "1 process, 1 thread", 1, 1, [], [], "single"),
        Layout("1p2t", "1 process, 2 threads", 1, 2, [], [], "single"),
        Layout("dp2", "dp 2", 2, 1, ["parallel.dp=2"], ["--dp", "2"], "dp", dp=2),
        Layout("tp2", "tp 2", 2, 1, ["parallel.tp=2"], ["--tp", "2"], "tp", tp=2),
        Layout("tp2sp", "tp 2 --sequence-parallel", 2, 1,
               ["parallel.tp=2", "parallel.sequence_parallel=on"],
               ["--tp", "2", "--sequence-parallel"], "tp_sp", tp=2),
        Layout("tp2_blocking", "tp 2, parallel.overlap=off", 2, 1,
               ["parallel.tp=2", "parallel.overlap=off"],
               ["--tp", "2", "--set", "parallel.overlap=off"], "tp", tp=2),
        Layout("pp2_gpipe", "pp 2 GPipe, M %d" % m, 2, 1, pp + ["parallel.pp_schedule=gpipe"],
               ppo + ["--pp-schedule", "gpipe"], "pp_gpipe", pp=True, stages=2),
        Layout("pp2_1f1b", "pp 2 1F1B, M %d" % m, 2, 1, pp + ["parallel.pp_schedule=1f1b"],
               ppo + ["--pp-schedule", "1f1b"], "pp_1f1b", pp=True, stages=2),
        Layout("recompute", "1 process, --recompute block", 1, 1, ["train.recompute=block"],
               ["--recompute", "block"], "recompute"),
        Layout("dp2_zero3", "dp 2 --zero 3", 2, 1, ["parallel.dp=2", "parallel.zero=3"],
               ["--dp", "2", "--zero", "3"], "fsdp", dp=2),
    ]


GRID = re.compile(r"^(?:dp(\d+))?(?:tp(\d+))?(?:pp(\d+))?(sp)?(?:_(gpipe|1f1b))?$")


def grid_layout(key, m):
    """A layout of any dp x tp x pp grid, one thread per rank, from a key such as dp4,
    tp8sp, pp4_gpipe or dp2tp2pp2 (a pipeline's schedule 1F1B unless _gpipe; sp: sequence
    parallelism, with tp); None if the key is not one. PyTorch's counterpart exists where
    the grid has one axis (DDP, DTensor tp, pipelining); its hybrids have none here."""
    g = GRID.match(key)
    if not g or not any(g.group(i) for i in (1, 2, 3)):
        return None
    dp, tp, pp = (int(g.group(i) or 1) for i in (1, 2, 3))
    sp, sched = bool(g.group(4)), g.group(5) or "1f1b"
    if min(dp, tp, pp) < 1 or dp * tp * pp < 2 or (sp and tp < 2) or (g.group(5) and pp < 2):
        return None  # one process is 1p1t's row
    sets, opts, words = [], [], []
    for axis, n in (("dp", dp), ("tp", tp), ("pp", pp)):
        if n > 1:
            sets.append("parallel.%s=%d" % (axis, n))
            opts += ["--" + axis, str(n)]
            words.append("%s %d" % (axis, n))
    if sp:
        sets.append("parallel.sequence_parallel=on")
        opts.append("--sequence-parallel")
        words.append("--sequence-parallel")
    if pp > 1:
        sets += ["parallel.micro_batches=%d" % m, "parallel.pp_schedule=" + sched]
        opts += ["--micro-batches", str(m), "--pp-schedule", sched]
        words.append("%s, M %d" % ("GPipe" if sched == "gpipe" else "1F1B", m))
    axes = sum(n > 1 for n in (dp, tp, pp))
    peer = None
    if axes == 1:
        peer = "dp" if dp > 1 else ("tp_sp" if sp else "tp") if tp > 1 else "pp_" + sched
    return Layout(key, " x ".join(w for w in words if not w.startswith(("--", "GPipe", "1F1B")))
                  + "".join(" " + w for w in words if w.startswith(("--", "GPipe", "1F1B"))),
                  dp * tp * pp, 1, sets, opts, peer, pp=pp > 1, dp=dp, tp=tp, stages=pp)


def pick_layouts(keys, m):
    """The layouts named (the fixed rows' keys, or grid_layout's), in the order given."""
    fixed = {lay.key: lay for lay in layouts(m)}
    return [fixed.get(k) or grid_layout(k, m) for k in keys]


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory (bench_tp, bench_train, "
                    "dtrain, sgemm_peak)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions (>= 3)")
    ap.add_argument("--sizes", default=None,
                    help="nano,wide (--quick: nano's stand-in alone unless given)")
    ap.add_argument("--layouts", default=None, help="a subset of the layouts' keys")
    ap.add_argument("--micro-batches", type=int, default=4, help="pipelines' M")
    ap.add_argument("--batch", type=int, default=None,
                    help="every size's global batch (nano 8, wide 16): more ranks need more")
    ap.add_argument("--nano-steps", type=int, default=None, help="measured steps (5)")
    ap.add_argument("--wide-steps", type=int, default=None, help="measured steps (5)")
    ap.add_argument("--warmup", type=int, default=None, help="steps before them (1)")
    ap.add_argument("--trace-steps", type=int, default=3,
                    help="steps after the first in each communication run")
    ap.add_argument("--peers", default="torch_pypi",
                    help="the PyTorch peers: torch_pypi (the newest, bench/.venv) and/or "
                         "torch_debian (1.13: one process, dp and recompute only); '' for none")
    ap.add_argument("--spin", type=float, default=2.0)
    ap.add_argument("--link-gap", type=float, default=0.0, metavar="MS",
                    help="the link the plan reads: bench-comm with MS ms of computation before "
                         "each call (--gap), as in a training step (default 0: back to back)")
    ap.add_argument("--trace-only", action="store_true",
                    help="the traced runs beside the plan only, no timed runs and no peers: the "
                         "bytes per step do not depend on the machine, so an oversubscribed one "
                         "checks them at any world size (its milliseconds mean nothing)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny models, a few steps, one repetition: checks the scripts, "
                         "measures nothing")
    a = ap.parse_args()
    sizes = QUICK if a.quick else SIZES
    if a.quick:
        a.reps, a.spin, a.trace_steps = 1, 0.2, 2
    elif a.reps < 3 and not a.trace_only:
        ap.error("--reps must be at least 3 (medians and spread); --quick checks the scripts")
    if a.sizes is None:
        a.sizes = "nano" if a.quick else "nano,wide"
    a.sizes = [s.strip() for s in a.sizes.split(",")]
    for s in a.sizes:
        if s not in sizes:
            ap.error("unknown size %s (%s)" % (s, ", ".join(sizes)))
    a.size = {k: sizes[k] for k in a.sizes}
    for k, sz in a.size.items():
        steps = getattr(a, "%s_steps" % k)
        if steps is not None:
            sz.steps = steps
        if a.warmup is not None:
            sz.warmup = a.warmup
    if a.batch is not None:
        for sz in a.size.values():
            sz.batch = a.batch
    keys = [lay.key for lay in layouts(a.micro_batches)]
    a.layouts = keys if a.layouts is None else [k.strip() for k in a.layouts.split(",")]
    for k, lay in zip(a.layouts, pick_layouts(a.layouts, a.micro_batches)):
        if lay is None:
            ap.error("unknown layout %s (%s, or a grid such as dp4, tp4sp, pp4_gpipe, "
                     "dp2tp2pp2)" % (k, ", ".join(keys)))
        for sz in a.size.values():
            if sz.batch % lay.dp or (lay.pp and sz.batch // lay.dp % a.micro_batches):
                ap.error("%s: global batch %d must divide by dp %d%s (--batch)" % (
                    k, sz.batch, lay.dp, " and then by --micro-batches %d" % a.micro_batches
                    if lay.pp else ""))
    return a


# ---- set-up: configs, weights, windows, the pipeline's cut, the link ----------------------

def make_config(sz, work):
    """The size's config with every dropout 0 (gpt.py's dropout_free of bench/gpt_nano.ini;
    wide and --quick change its width, heads, layers and block_size)."""
    path = os.path.join(work, "gpt-%s.ini" % sz.key)
    dropout_free("bench/gpt_nano.ini", path)
    with open(path) as f:
        text = f.read()
    # No [schedule]: every run here takes optim.lr from the first step, as PyTorch's does
    # (bench_tp and `dtrain train` get schedule.kind constant; a warm-up would stay).
    text = re.sub(r"(?ms)^\[schedule\].*?(?=^\[)", "", text)
    if sz.embd is not None:
        text = re.sub(r"(?m)^block_size\s*=.*$", "block_size = %d" % sz.block, text)
        text = re.sub(r"embedding 256 \d+", "embedding 256 %d" % sz.embd, text)
        text = re.sub(r"\d+ x block \d+", "%d x block %d" % (sz.layers, sz.heads), text)
    with open(path, "w") as f:
        f.write(text)
    return path


def mpirun(ranks):
    """dtrain's launcher for `ranks` ranks, with Open MPI's default binding (a core per rank
    up to 2 ranks, the socket above; none when oversubscribed): PyTorch's ranks get the same
    CPUs (benchlib.mpirun_bindings)."""
    return bl.mpirun_cmd(ranks, MPIRUN)


def dtrain_train(build, cfg, ranks, opts, timeout=900):
    """`dtrain train` for a few steps with evaluation off and a constant rate (as bench_tp);
    stdout."""
    cmd = [os.path.join(build, "dtrain"), "train", cfg, "--threads", "1", "--no-progress",
           "--set", "train.eval=off", "--set", "schedule.kind=constant"] + opts
    if ranks > 1:
        cmd = mpirun(ranks) + cmd
    return bl.run_text(cmd, bl.thread_env(1), timeout)[0]


def reference(build, sz, cfg, init, work):
    """One process's losses at every step of the runs' length, on the windows it writes
    (--windows-out: what every PyTorch run trains on)."""
    total = 1 + sz.warmup + sz.steps
    win = os.path.join(work, "gpt-%s-windows.txt" % sz.key)
    met = os.path.join(work, "gpt-%s-ref.jsonl" % sz.key)
    dtrain_train(build, cfg, 1, ["--max-steps", str(total), "--batch", str(sz.batch),
                                 "--init-weights", init, "--windows-out", win, "--metrics", met,
                                 "--log-every", "1"])
    with open(met) as f:
        losses = [json.loads(ln)["loss"] for ln in f if '"step"' in ln]
    return win, losses[:total]


def split_blocks(build, cfg, stages):
    """Blocks on each stage but the last of dtrain's balanced split into `stages`
    (--explain-layout's table), for PyTorch's pipeline to cut where dtrain does."""
    out = bl.run_text([os.path.join(build, "dtrain"), "train", cfg, "--pp", str(stages),
                       "--explain-layout"], bl.thread_env(1), 300)[0]
    ks = [sum(1 for ln in out.splitlines()
              if re.match(r"^%d\s+\d+\s+(\S+ bloc|block)" % st, ln))
          for st in range(stages - 1)]
    if min(ks) < 1:
        raise RuntimeError("dtrain --explain-layout: a stage of %d without blocks:\n%s" %
                           (stages, out))
    return ks


def measure_link(build, work, gap_ms=0.0):
    """bench-comm's all-reduce at 2 ranks (the link `dtrain plan --from` reads), with gap_ms
    of computation spun before each call (--gap) where given."""
    path = os.path.join(work, "link.jsonl")
    if os.path.exists(path):
        os.remove(path)
    gap = ["--gap", "%g" % gap_ms] if gap_ms > 0 else []
    bl.run_text(["mpirun", "-np", "2", "--oversubscribe", os.path.join(build, "dtrain"),
                 "bench-comm", "--ops", "allreduce", "--algos", "auto", "--min-bytes", "1K",
                 "--max-bytes", "64M", "--json", path] + gap, bl.thread_env(1), 600)
    return path


def layout_peers(wanted):
    """The PyTorch peers named in --peers (benchlib.torch_peers' keys), each with `cannot`:
    {torch_gpt_layouts.py layout: why this version cannot run it} (a module it lacks), and
    `short`: "PyTorch 2.15" or "PyTorch 1.13"."""
    out = []
    for p in bl.torch_peers():
        if p.key not in wanted:
            continue
        version = p.label.split(" (")[0].replace("PyTorch ", "").split("+")[0]
        p.short = "PyTorch " + ".".join(version.split(".")[:2])
        p.cannot = {}
        for probe, lays, what in (("import torch.distributed.tensor.parallel", ("tp", "tp_sp"),
                                   "no DTensor tensor parallelism"),
                                  ("import torch.distributed.pipelining", ("pp_gpipe", "pp_1f1b"),
                                   "no torch.distributed.pipelining"),
                                  ("from torch.distributed.fsdp import fully_shard", ("fsdp",),
                                   "no FSDP2 (fully_shard)")):
            if p.missing is not None:
                break
            r = subprocess.run([p.python, "-c", probe], capture_output=True, text=True,
                               timeout=300)
            if r.returncode != 0:
                for lay in lays:
                    p.cannot[lay] = "%s in %s" % (what, p.short.split()[1])
        out.append(p)
    return out


# ---- one measurement ------------------------------------------------------------------------

def rank_batch(sz, lay, a):
    """Windows per call on a rank: the global batch over dp, and over the micro-batches."""
    return sz.batch // lay.dp // (a.micro_batches if lay.pp else 1)


def dtrain_cmd(build, sz, lay, cfg, a):
    cmd = [os.path.join(build, "bench_tp"), cfg]
    batch = rank_batch(sz, lay, a)
    for s in lay.sets + ["train.batch=%d" % batch]:
        cmd += ["--set", s]
    cmd += ["--threads", str(lay.threads), "--steps", str(sz.steps), "--warmup", str(sz.warmup)]
    return mpirun(lay.ranks) + cmd if lay.ranks > 1 else cmd


def peer_cmd(python, sz, lay, cfg, init, win, a, splits, binds):
    """PyTorch's run of the layout: its ranks on the CPUs mpirun gives dtrain's (binds), a
    pipeline cut where dtrain's is (splits: {stages: blocks per stage but the last})."""
    cmd = [python, os.path.join(bl.HERE, "torch_gpt_layouts.py"), "--config", cfg, "--layout",
           lay.peer, "--batch", str(sz.batch), "--micro-batches", str(a.micro_batches),
           "--threads", str(lay.threads), "--steps", str(sz.steps), "--warmup", str(sz.warmup),
           "--init", init, "--windows", win]
    if lay.ranks > 1:
        cmd += ["--world", str(lay.ranks),
                "--cpus", ";".join(",".join(map(str, b)) for b in binds[lay.ranks])]
    if lay.pp:
        cmd += ["--splits", ",".join(map(str, splits[lay.stages]))]
    return cmd


def uneven_heads(lay, sz):
    """Why PyTorch's DTensor cannot take the layout's tp (it shards evenly, so a rank would
    hold parts of heads where tp does not divide the heads; dtrain splits them unevenly), or
    None."""
    if lay.peer in ("tp", "tp_sp") and sz.heads % lay.tp:
        return "%d heads over tp %d: DTensor shards evenly" % (sz.heads, lay.tp)
    return None


def run_one(kind, cmd, env, rec, extra):
    try:
        r = bl.launch(cmd, env, 1800)
    except RuntimeError as e:
        why = bl.failure_reason(str(e))
        bl.log("FAILED %s %s: %s" % (kind, extra.get("layout"), why))
        rec.write(dict(extra, event="failed", impl=kind, error=why, detail=str(e)[-3000:]))
        return None, why
    r = dict(r, event="train", impl=kind, **extra)
    if kind == "dtrain":
        # bench_tp's global batch must be the size's (dp x batch, or micro-batches x batch)
        if r.get("global_batch") != extra["global_batch"]:
            why = "bench_tp ran a global batch of %s, not %s" % (r.get("global_batch"),
                                                                  extra["global_batch"])
            rec.write(dict(extra, event="failed", impl=kind, error=why))
            return None, why
        r["tokens_per_s"] = extra["global_batch"] * extra["block_size"] / (
            r["step_ms_median"] * 1e-3)
    rec.write(r)
    return r, None


def comm_run(build, sz, lay, cfg, work, link, a, rec):
    """The trace's communication per step and the per-rank memory lines of one `dtrain
    train` run of the layout, beside `dtrain plan`'s prediction."""
    trace = os.path.join(work, "trace-%s-%s.json" % (sz.key, lay.key))
    batch = rank_batch(sz, lay, a)
    # Every collective blocking (parallel.overlap=off; the bytes are the same), so that the
    # time after its last member arrives is the transfer's, not computation it overlaps.
    # (ZeRO's collectives are blocking already, and it refuses the setting.)
    blocking = [] if "parallel.overlap=off" in lay.opts or "--zero" in lay.opts else \
        ["--set", "parallel.overlap=off"]
    out = dtrain_train(build, cfg, lay.ranks, lay.opts + blocking + [
        "--batch", str(batch), "--max-steps", str(1 + a.trace_steps), "--trace", trace])
    mem = [ln for ln in out.splitlines() if ln.startswith("dtrain: memory planned on rank ")]
    comm = bl.trace_comm(trace)
    after = bl.trace_after_last(trace, lay.dp, lay.tp, lay.stages)
    # The plan takes the layout, not the schedule nor the overlap (it predicts operand bytes
    # and the link's time for them).
    plan_opts, skip = [], 0
    for o in lay.opts:
        if skip or o in ("--set", "--pp-schedule"):
            skip = 0 if skip else 1
            continue
        plan_opts.append(o)
    rows_json = os.path.join(work, "plan-%s-%s.jsonl" % (sz.key, lay.key))
    plan = bl.run_text([os.path.join(build, "dtrain"), "plan", cfg, "--ranks", str(lay.ranks),
                        "--batch", str(batch), "--from", link, "--json", rows_json] + plan_opts,
                       bl.thread_env(1), 300)[0]
    # Per group, the largest stage's bytes (stages are predicted apart, as the trace's
    # largest rank is read), in MB; the total ms is the busiest stage's.
    # The collectives' planned ms: the busiest stage's, the pipeline's sends (group pp) left
    # out, as trace_after_last leaves them out.
    per_group, total, coll_ms = {}, None, {}
    with open(rows_json) as f:
        for line in f:
            r = json.loads(line)
            if "total_ms" in r:
                total = r["total_ms"]
                continue
            k = (r["stage"], r["group"])
            per_group[k] = per_group.get(k, 0.0) + r["bytes"] / 1e6
            if r["group"] != "pp":
                coll_ms[r["stage"]] = coll_ms.get(r["stage"], 0.0) + r["ms"]
    rows = []
    for g in sorted({g for (_, g) in per_group}):
        rows.append((g, max(v for (st, gg), v in per_group.items() if gg == g), None))
    r = {"event": "comm", "size": sz.key, "layout": lay.key, "memory_lines": mem,
         "trace": {str(k): v for k, v in comm.items()}, "plan_rows": rows,
         "plan_total_ms": total, "plan_text": plan, "trace_steps": a.trace_steps,
         "after_last": {str(k): v for k, v in after.items()},
         "plan_collective_ms": max(coll_ms.values()) if coll_ms else 0.0}
    rec.write(r)
    return r


# ---- the run --------------------------------------------------------------------------------

def main():
    started = time.monotonic()
    a = args_parse()
    build, sgemm_peak = bl.build_tools(a.build, "gpt_layouts.py")
    for exe in ("bench_tp", "bench_train"):
        if not os.access(os.path.join(build, exe), os.X_OK):
            sys.exit("gpt_layouts.py: %s missing: build first" % os.path.join(build, exe))
    rec = bl.Recorder("gpt-layouts")
    work = os.path.join(bl.HERE, "out", "gpt-layouts-work")
    os.makedirs(work, exist_ok=True)
    info = dict(machine_info(), openblas_coretype=bl.init_blas(build))
    rec.write(info)
    peers = layout_peers([p for p in a.peers.split(",") if p and not a.trace_only])
    for p in peers:
        bl.log("peer: %s%s%s" % (p.label, " (%s)" % p.missing if p.missing else "",
                                 "".join("; %s: %s" % kv for kv in sorted(p.cannot.items()))))
        rec.write({"event": "peer", "key": p.key, "label": p.label, "missing": p.missing,
                   "cannot": p.cannot})
    peers = [p for p in peers if p.missing is None]
    lays = pick_layouts(a.layouts, a.micro_batches)
    # The CPUs mpirun binds dtrain's ranks to at each world size, PyTorch's pinned alike.
    binds = {}
    for n in sorted({lay.ranks for lay in lays if lay.ranks > 1}):
        binds[n] = bl.mpirun_bindings(n, MPIRUN)
        rec.write({"event": "binding", "world_size": n, "cpus": binds[n],
                   "text": bl.bindings_text(binds[n])})

    # Set-up per size: config, weights, dtrain's reference losses and windows, the cut.
    setup = {}
    for key, sz in a.size.items():
        bl.log("set-up %s..." % sz.label)
        cfg = make_config(sz, work)
        sz.block = int(bl.ini_value(cfg, "model", "block_size"))
        init = os.path.join(work, "gpt-%s-init.safetensors" % key)
        bl.launch([os.path.join(build, "bench_train"), cfg, "--save-init", init],
                  bl.thread_env(1), 600)
        win, ref = reference(build, sz, cfg, init, work)
        k = {st: split_blocks(build, cfg, st) for st in sorted({lay.stages for lay in lays
                                                                if lay.pp})}
        with open(cfg) as f:
            sz.heads = int(re.search(r"\d+ x block (\d+)", f.read()).group(1))
        setup[key] = (cfg, init, win, ref, k)
        rec.write({"event": "setup", "size": key, "config": os.path.relpath(cfg, bl.ROOT),
                   "global_batch": sz.batch, "steps": sz.steps, "warmup": sz.warmup,
                   "reference_losses": ref, "splits": {str(st): v for st, v in k.items()}})

    # Each PyTorch's thread setting at 2 threads in one process: the faster of thread_envs(2),
    # one run each.
    envs = {}
    for key, sz in a.size.items():
        for p in peers:
            options = thread_envs(2)
            envs[(p.key, key)] = next(iter(options.items()))
            if not any(lay.key == "1p2t" for lay in lays):
                continue
            cfg, init, win, _, k = setup[key]
            best = None
            for name, env in options.items():
                lay = Layout("1p2t", "", 1, 2, [], [], "single")
                r, _ = run_one(p.key, peer_cmd(p.python, sz, lay, cfg, init, win, a, k, binds),
                               env,
                               rec, {"size": key, "layout": "1p2t", "probe": name})
                if r is not None and (best is None or r["tokens_per_s"] > best[2]):
                    best = (name, env, r["tokens_per_s"])
            if best:
                envs[(p.key, key)] = best[:2]
            bl.log("%s, %s, 1 process at 2 threads: thread setting %s" %
                   (p.label, key, envs[(p.key, key)][0]))

    # Communication: one traced run per multi-rank layout, beside the plan. First, as the
    # runs are short and a run stopped by a time limit keeps them (bench/summarise.py reads
    # them from the JSON lines).
    results, failed = {}, {}
    comms = {}
    bl.log("link (bench-comm, 2 ranks)...")
    try:
        link = measure_link(build, work, a.link_gap)
    except RuntimeError as e:
        link = None
        rec.write({"event": "failed", "impl": "bench-comm", "error": bl.failure_reason(str(e))})
    for key, sz in a.size.items():
        for lay in lays:
            if lay.ranks == 1 or link is None:
                continue
            bl.log("trace %s %s..." % (key, lay.label))
            try:
                comms[(key, lay.key)] = comm_run(build, sz, lay, setup[key][0], work, link, a,
                                                 rec)
            except RuntimeError as e:
                why = bl.failure_reason(str(e))
                failed[("trace", key, lay.key)] = why
                rec.write({"event": "failed", "impl": "trace", "size": key, "layout": lay.key,
                           "error": why})

    if a.trace_only:
        out = []
        for key, sz in a.size.items():
            rows = [comm_row(lay.label, comms[(key, lay.key)]) if (key, lay.key) in comms else
                    comm_failed_row(lay.label, failed.get(("trace", key, lay.key), "no link"))
                    for lay in lays if lay.ranks > 1]
            out += ["== %s, global batch %d (--trace-only: the bytes are the measurement; the "
                    "milliseconds are this machine's, %d CPUs)" % (sz.label, sz.batch,
                                                                    os.cpu_count()),
                    comm_table(rows, a.trace_steps)]
        out += ["took %.1f min" % ((time.monotonic() - started) / 60),
                "JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT)]
        rec.close()
        print("\n".join(out))
        return 0 if not failed else 1

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})

    for rep in range(a.reps):
        for key, sz in a.size.items():
            cfg, init, win, _, k = setup[key]
            runs = []
            for lay in lays:
                runs.append((None, lay))
                # tp2_blocking's peer is the tp row's PyTorch run: measured once, there.
                for p in peers:
                    if lay.peer and lay.key != "tp2_blocking" and lay.peer not in p.cannot \
                            and not uneven_heads(lay, sz):
                        runs.append((p, lay))
            shift = (rep * len(runs)) // a.reps
            for p, lay in runs[shift:] + runs[:shift]:
                kind = p.key if p else "dtrain"
                if (kind, key, lay.key) in failed:
                    continue
                bl.log("rep %d/%d  %s  %-28s %s" % (rep + 1, a.reps, key, lay.label,
                                                    p.label if p else "dtrain"))
                extra = {"size": key, "layout": lay.key, "rep": rep,
                         "global_batch": sz.batch, "block_size": sz.block}
                if p is None:
                    env = bl.thread_env(lay.threads)
                    r, why = run_one(kind, dtrain_cmd(build, sz, lay, cfg, a), env, rec, extra)
                else:
                    env_name, env = (envs[(p.key, key)] if lay.threads == 2 else
                                     ("all 1", bl.thread_env(1)))
                    extra["thread_setting"] = env_name
                    r, why = run_one(kind, peer_cmd(p.python, sz, lay, cfg, init, win, a, k,
                                                    binds),
                                     env, rec, extra)
                if r is None:
                    failed[(kind, key, lay.key)] = why
                else:
                    results.setdefault((kind, key, lay.key), []).append(r)

    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    out, summary = report(a, info, peers, lays, setup, results, failed, comms,
                          (ratio_before, ratio_after), binds)
    for s in summary:
        rec.write(dict(s, event="summary", reps=a.reps))
    out += ["", "took %.1f min" % ((time.monotonic() - started) / 60),
            "JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT)]
    rec.close()
    print("\n".join(out))
    return 0


# ---- the report -----------------------------------------------------------------------------

def stats(runs, field):
    vals = [r[field] for r in runs]
    return {"median": bl.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def spread(s, spec=".0f"):
    return "%s (%s-%s)" % (format(s["median"], spec), format(s["min"], spec),
                           format(s["max"], spec))


def short(why, n=60):
    """A failure's reason in a table cell (the whole of it is listed under the tables)."""
    return why if len(why) <= n else why[:n - 3] + "..."


def per_rank(runs, field, scale=1.0, spec=".1f"):
    """"r0 / r1" of a field of the ranks (the first run's: deterministic accounting), or the
    median over runs for a measured one (peak RSS); one figure where every rank gives the
    same, "min-max" over more than 4 ranks."""
    ranks = runs[0]["ranks"]
    vals = [bl.median([r["ranks"][i].get(field) for r in runs]) for i in range(len(ranks))]
    if any(v is None for v in vals):
        return "-"
    text = [format(v / scale, spec) for v in vals]
    if len(set(text)) == 1:  # every rank the same: one figure
        return text[0]
    if len(text) > 4:  # many ranks: their range
        return "%s-%s" % (format(min(vals) / scale, spec), format(max(vals) / scale, spec))
    return " / ".join(text)


def peer_runs(results, p, key, lay):
    """A peer's runs of a row (tp2_blocking's are its tp row's)."""
    return results.get((p.key, key, "tp2" if lay.key == "tp2_blocking" else lay.key))


def after_last_ms(c):
    """The largest rank's collectives after their last member's arrival, ms per step (the
    world's scalar exchanges left out, as the plan leaves them out), or None: a record from
    before the measure, or a group whose calls did not pair up."""
    per = c.get("after_last")
    if not per:
        return None
    sums = []
    for groups in per.values():
        vals = [v for g, v in groups.items() if g != "world"]
        if any(v is None for v in vals):
            return None
        sums.append(sum(vals))
    return max(sums)


def comm_row(label, c):
    """A layout's row of the communication table from its "comm" record (comm_run): the
    traced MB per group on the largest rank, the plan's MB, the traced ms on the fastest and
    slowest rank beside the plan's ms for everything; then the collectives alone: their ms
    after the last member arrived (the largest rank) beside the plan's."""
    groups = sorted({g for r in c["trace"].values() for g in r if g != "world"})
    per = {g: [c["trace"][rk].get(g, {}) for rk in sorted(c["trace"])] for g in groups}
    tms = [sum(r.get(g, {}).get("ms", 0) for g in groups) for r in c["trace"].values()]
    pbytes = sum(row[1] for row in c["plan_rows"])
    after, pcoll = after_last_ms(c), c.get("plan_collective_ms")
    return [label, ", ".join("%s %.2f" % (g, max(x.get("bytes", 0) for x in v) / 1e6)
                             for g, v in per.items()),
            "%.2f" % pbytes, "%.1f / %.1f" % (min(tms), max(tms)),
            bl.fmt(c["plan_total_ms"], ".1f"), bl.fmt(after, ".1f"), bl.fmt(pcoll, ".1f"),
            "%.2f" % (after / pcoll) if after is not None and pcoll else "-"]


def comm_failed_row(label, why):
    """A layout's row of the communication table when its traced run failed."""
    return [label, "FAILED: " + short(why), "", "", "", "", "", ""]


def comm_table(rows, trace_steps, blocking=True):
    """The communication table; `blocking`: the traced runs waited for every collective
    (comm_run since the after-last-arrival measure; older records did not)."""
    return bl.table("Communication per step: the trace's (dtrain train --trace, %d steps after "
                    "the first%s) beside dtrain plan's, MB and ms; a traced ms holds the wait "
                    "for the group's slowest member, the collectives' 'after last arrival' does "
                    "not (the pipeline's sends are in neither)"
                    % (trace_steps, ", parallel.overlap=off" if blocking else ""),
                    ["layout", "traced MB by group (largest rank)", "planned MB",
                     "traced ms (fastest / slowest rank)", "planned ms",
                     "collectives after last arrival ms", "planned collectives ms",
                     "after/planned"], rows)


def dtrain_memory_row(label, runs):
    """dtrain's row of the memory table: its planned accounting per rank and peak RSS."""
    return [label, "dtrain", per_rank(runs, "param_bytes", 1e6),
            per_rank(runs, "optim_state_bytes", 1e6), per_rank(runs, "activation_bytes", 1e6),
            per_rank(runs, "kept_bytes", 1e6), per_rank(runs, "seq_bytes", 1e6, ".2f"),
            per_rank(runs, "planned_bytes", 1e6), per_rank(runs, "peak_rss_mb", 1.0, ".0f")]


def peer_memory_row(label, who, runs):
    """A peer's row of the memory table: the tensors it holds and its peak RSS."""
    return [label, "%s (%s)" % (who, runs[0].get("optimizer")),
            per_rank(runs, "param_bytes", 1e6), per_rank(runs, "optim_state_bytes", 1e6),
            "-", "-", "-", "-", per_rank(runs, "peak_rss_mb", 1.0, ".0f")]


MEMORY_TITLE = ("Memory per rank, MB (rank 0 / rank 1 / ...): dtrain's planned accounting "
                "(dt_model_memory_info, dt_trainer_planned_bytes), PyTorch's tensors held, "
                "both sides' peak RSS")
MEMORY_HEAD = ["layout", "who", "params", "optim state", "act+ws", "kept", "per-position",
               "planned", "peak RSS"]


def report(a, info, peers, lays, setup, results, failed, comms, ratios, binds):
    """The tables, checks and targets as lines, and the per-cell summaries (medians) for the
    JSON lines."""
    flag = min(ratios) < bl.PARALLEL_RATIO_MIN
    names = [p.key for p in peers]
    out = ["dtrain GPT across layouts: tokens/s, median (min-max) of %d run(s) per cell%s" %
           (a.reps, " (--quick: NOT a measurement)" if a.quick else ""),
           "machine: %s, %s CPUs, kernel %s; commit %s%s" % (
               info["cpu"], info["cpus"], info["kernel"], info["commit"], bl.coretype_note()),
           "peers: " + ("; ".join("%s, eager%s" % (
               p.label, "".join(", %s: %s" % kv for kv in sorted(p.cannot.items())))
               for p in peers) or "none (--peers)") + "; AdamW fused=True where the version "
           "has it, else foreach=True",
           "every dropout 0 (both sides); AdamW with clipping at a constant rate; one thread per "
           "rank, PyTorch's ranks on the CPUs mpirun binds dtrain's to (%s); pipelines: M %d "
           "micro-batches" % ("; ".join("%d ranks: %s" % (n, bl.bindings_text(b))
                                        for n, b in sorted(binds.items())) or "no ranks",
                              a.micro_batches)]
    if "torch_debian" not in names:
        out.append("Debian's PyTorch 1.13 (/usr/bin/python3): not run (--peers torch_pypi,"
                   "torch_debian adds its one-process, dp and recompute rows; it has no DTensor "
                   "tensor parallelism and no torch.distributed.pipelining)")
    out.append("")
    summary = []
    for key, sz in a.size.items():
        cfg, init, win, ref, k = setup[key]
        out.append("== %s: global batch %d windows of %d bytes, the median of %d steps after "
                   "%d + 1" % (sz.label, sz.batch, sz.block, sz.steps, sz.warmup))
        for st, ks in sorted(k.items()):
            out.append("pipeline of %d stages cut (dtrain's balanced split, PyTorch the same): "
                       "%s of the blocks on the stages before the last" %
                       (st, ", ".join(map(str, ks))))
        rows, mem_rows, pipe_rows, checks = [], [], [], []
        total = 1 + sz.warmup + sz.steps
        for lay in lays:
            d = results.get(("dtrain", key, lay.key))
            row = [lay.label, "%d x %d" % (lay.ranks, lay.threads),
                   spread(stats(d, "tokens_per_s")) if d else
                   "FAILED: " + short(failed.get(("dtrain", key, lay.key), "not run"))]
            s = {"size": key, "layout": lay.key, "dtrain": None}
            fastest = None  # (median step ms, peer)
            notes, peer_mem = [], []
            for p in peers:
                t = peer_runs(results, p, key, lay)
                pk = (p.key, key, "tp2" if lay.key == "tp2_blocking" else lay.key)
                if not lay.peer:
                    row.append("no counterpart")
                elif uneven_heads(lay, sz):
                    row.append("n/a: " + uneven_heads(lay, sz))
                elif lay.peer in p.cannot:
                    row.append("n/a: " + p.cannot[lay.peer])
                elif t:
                    row.append(spread(stats(t, "tokens_per_s")))
                    step = bl.median([r["step_ms_median"] for r in t])
                    if fastest is None or step < fastest[0]:
                        fastest = (step, p)
                    if lay.threads == 2:
                        notes.append("%s threads: %s" % (p.short, t[0].get("thread_setting")))
                else:
                    row.append("FAILED: " + short(failed.get(pk, "not run")))
                if not t or lay.key == "tp2_blocking":
                    continue
                s[p.key] = {"tokens_per_s": {f: v for f, v in stats(t, "tokens_per_s").items()
                                             if f != "n"},
                            "step_ms": bl.median([r["step_ms_median"] for r in t]),
                            "ranks": t[0]["ranks"], "optimizer": t[0].get("optimizer")}
                peer_mem.append(peer_memory_row(lay.label, p.short, t))
                losses = t[0]["losses"]
                n = min(len(losses), len(ref))
                first = abs(losses[0] - ref[0])
                worst = max(abs(losses[i] - ref[i]) for i in range(n))
                ok = first <= LOSS_TOL and worst <= CURVE_TOL
                checks.append("  %s %s: first loss %.6f against dtrain's %.6f (|diff| %.1e), "
                              "largest |diff| over %d steps %.1e%s" % (
                                  p.short, lay.label, losses[0], ref[0], first, n, worst,
                                  "" if ok else "  <-- NOT the same computation"))
            if d and fastest:
                ratio = bl.median([r["step_ms_median"] for r in d]) / fastest[0]
                row.append("%.2f (%s)" % (ratio, fastest[1].short))
                s["vs_fastest_peer"] = {"peer": fastest[1].key, "step_ratio": ratio}
            else:
                row.append("-")
            if lay.key == "tp2_blocking" and peers:
                notes.append("PyTorch: its tp 2 row")
            row.append("; ".join(notes))
            rows.append(row)
            if d:
                s["dtrain"] = {"tokens_per_s": {f: v for f, v in stats(d, "tokens_per_s").items()
                                                if f != "n"},
                               "step_ms": bl.median([r["step_ms_median"] for r in d]),
                               "ranks": d[0]["ranks"],
                               "peak_rss_mb": [bl.median([r["ranks"][i]["peak_rss_mb"]
                                                          for r in d])
                                               for i in range(len(d[0]["ranks"]))]}
                mem_rows.append(dtrain_memory_row(lay.label, d))
            mem_rows += peer_mem
            if d:
                # bench_tp trains the same windows from the same seeded weights: its last
                # loss is one process's at the same step.
                last = d[0].get("last_loss")
                if last is not None and len(ref) >= total:
                    diff = abs(last - ref[total - 1])
                    checks.append("  dtrain %s: loss at step %d %.6f, one process's %.6f "
                                  "(|diff| %.1e)%s" % (lay.label, total, last, ref[total - 1],
                                                       diff, "" if diff <= CURVE_TOL else
                                                       "  <-- differs"))
            if lay.pp:
                for who, runs in [("dtrain", d)] + [(p.short, peer_runs(results, p, key, lay))
                                                    for p in peers]:
                    if not runs:
                        continue
                    rk = runs[0]["ranks"]
                    comp = [bl.median([r["ranks"][i].get("pp_compute_ms_per_step") or 0
                                       for r in runs]) for i in range(len(rk))]
                    step = [bl.median([r["ranks"][i].get("pp_step_ms_per_step") or 0
                                       for r in runs]) for i in range(len(rk))]
                    pipe_rows.append([lay.label, who, " / ".join("%.0f" % c for c in comp),
                                      " / ".join("%.0f" % p for p in step),
                                      " / ".join("%.2f" % (1 - c / p) if p else "-"
                                                 for c, p in zip(comp, step))])
            summary.append(s)
        out.append(bl.table("Throughput, tokens/s (global batch x block / median step)",
                            ["layout", "ranks x thr", "dtrain"] + [p.short for p in peers] +
                            ["dtrain / fastest PyTorch, step", "note"], rows))
        out.append(bl.table(MEMORY_TITLE, MEMORY_HEAD, mem_rows))
        if pipe_rows:
            out.append(bl.table("Pipelines: each stage's compute and pipeline step, ms per step "
                                "(stage 0 / stage 1 / ...), and its idle share",
                                ["layout", "who", "compute", "pipeline step", "idle"],
                                pipe_rows))
        crow = []
        for lay in lays:
            c = comms.get((key, lay.key))
            if c is None:
                if lay.ranks > 1:
                    crow.append(comm_failed_row(lay.label,
                                                failed.get(("trace", key, lay.key), "not run")))
                continue
            crow.append(comm_row(lay.label, c))
        if crow:
            out.append(comm_table(crow, a.trace_steps))
        mem_ok = []
        for lay in lays:
            c = comms.get((key, lay.key))
            d = results.get(("dtrain", key, lay.key))
            if c and d:
                got = [re.search(r": ([0-9.]+) MB: parameters", ln) for ln in c["memory_lines"]]
                want = ["%.2f" % (rk["planned_bytes"] / 1e6) for rk in d[0]["ranks"]]
                mem_ok.append("%s %s" % (lay.key, "agree" if [g.group(1) if g else None
                                                              for g in got] == want
                                         else "DIFFER: %s against %s" % (
                                             [g.group(1) if g else None for g in got], want)))
        if mem_ok:
            out.append("dtrain train's per-rank memory lines against bench_tp's planned bytes: "
                       + "; ".join(mem_ok))
        out.append("like for like (same weights, windows, dropout 0):")
        out += checks
        out += targets_of(a, key, lays, peers, results, flag)
        out.append("")
    notes = []
    for (kind, key, lay), why in sorted(failed.items()):
        notes.append("  %s %s %s: %s" % (kind, key, lay, why))
    if notes:
        out += ["failed (their cells say so):"] + notes + [""]
    out.append("PyTorch's pipelines: its stages do not share the tied table; the peer keeps a "
               "copy on the head's stage and sums the two gradients between the stages every "
               "step (by hand, as dtrain's embedding group), counting the tensor once in the "
               "clipping norm.")
    out.append("machine parallel ratio (2 processes / 1): before %.2f, after %.2f%s" % (
        ratios[0], ratios[1], "  <-- below %.1f: 2-rank and 2-thread cells are flagged and do "
        "not count" % bl.PARALLEL_RATIO_MIN if flag else ""))
    return out, summary


def targets_of(a, key, lays, peers, results, flag):
    """The targets' verdicts for one size, from the medians; with the machine flagged (its
    parallel ratio below 1.8) a timing verdict of 2 ranks or 2 threads does not count."""
    def d(k):
        return results.get(("dtrain", key, k))

    def med(runs, f):
        return bl.median([r[f] for r in runs])
    out = ["targets%s:" % (" -- --quick: meaningless" if a.quick else "")]
    for lay in lays:
        t = [(med(r, "step_ms_median"), p) for p in peers
             for r in [peer_runs(results, p, key, lay)] if r]
        if lay.peer and d(lay.key) and t:
            step, p = min(t, key=lambda x: x[0])
            r = med(d(lay.key), "step_ms_median") / step
            out.append("  %s: step time %.2fx %s's, its fastest here (target <= 1): %s%s" % (
                lay.label, r, p.short, "met" if r <= 1.0 else "NOT met",
                " (flagged machine: does not count)" if flag and lay.ranks * lay.threads > 1
                else ""))
    one, tp2 = d("1p1t"), d("tp2")
    if one and tp2:
        for f, name in (("param_bytes", "parameters"), ("optim_state_bytes", "optimizer state")):
            whole = one[0]["ranks"][0][f]
            most = max(rk[f] for rk in tp2[0]["ranks"])
            out.append("  tp 2: %s per rank 1/%.3f of one process's (target >= 1.9): %s" %
                       (name, whole / most, "met" if whole / most >= 1.9 else "NOT met"))
    sp = d("tp2sp")
    if tp2 and sp:
        a0 = max(rk["seq_bytes"] for rk in tp2[0]["ranks"])
        a1 = max(rk["seq_bytes"] for rk in sp[0]["ranks"])
        out.append("  sequence parallelism: the blocks' per-position activations per rank "
                   "1/%.2f of tp 2's (target 1/2, tp): %s%s" % (
                       a0 / a1, "met" if a0 / a1 >= 1.99 else "NOT met",
                       "" if a0 / a1 >= 1.99 else " (the first block's input arrives whole "
                       "from the embeddings and stays whole)"))
    rc = d("recompute")
    if one and rc:
        act = one[0]["ranks"][0]["activation_bytes"] / rc[0]["ranks"][0]["activation_bytes"]
        kept = one[0]["ranks"][0]["kept_bytes"] / rc[0]["ranks"][0]["kept_bytes"]
        slow = med(rc, "step_ms_median") / med(one, "step_ms_median")
        out.append("  recompute block: activations kept from forward to backward 1/%.2f of one "
                   "process's (target >= 2): %s; all activations and workspaces 1/%.2f: %s; "
                   "step time %.2fx (target <= 1.4): %s" % (
                       kept, "met" if kept >= 2 else "NOT met", act,
                       "met" if act >= 2 else "NOT met", slow,
                       "met" if slow <= 1.4 else "NOT met"))
    return out


if __name__ == "__main__":
    sys.exit(main())
