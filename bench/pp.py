#!/usr/bin/python3
"""Pipeline-parallel benchmark: dtrain's pipeline (parallel.pp) beside PyTorch's
torch.distributed.pipelining, in one run, one thread per rank:

1. Bubble. The deep MLP (flatten, 16 x [linear 1024, relu], linear 10: Fashion-MNIST,
   cross-entropy on the scores, Adam 1e-3) cut into 2 stages at layer 17 (stage 0: the
   first 8 linear layers, stage 1: the other 8 and the head; dtrain's balanced split
   picks the same cut), micro-batches of 32 samples, M = 1, 2, 4, 8, GPipe and 1F1B.
   Per stage: compute, the mean time per step in its forwards, backwards and loss, and
   the idle share (the bubble), 1 - compute / pipeline step over the measured steps:
   dtrain's from dt_trainer_comm_stats (pp_compute_s over pp_step_s: the step's zeroed
   gradients, inputs, forwards, backwards, loss and messages, the optimizer left out),
   PyTorch's from bench/torch_pp.py (PipelineStage.forward_one_chunk / backward_one_chunk
   and the loss over zero_grad + batch + schedule.step()). Beside it the theory for
   balanced stages and free messages, (P - 1) / (M + P - 1), and beside dtrain's
   samples/s over PyTorch's, PyTorch's per-stage compute over dtrain's: where both idle
   the same share, as at M = 1, the two ratios are the same figure. The summary quotes
   the full range (min-max) of both ratios over every cell that has the two sides.
2. Memory. dtrain's activation and workspace bytes planned on each stage
   (dt_model_activation_bytes): GPipe keeps M micro-batches, 1F1B min(P - stage, M); the
   target is 1F1B <= P/M of GPipe's + 10% on every stage. PyTorch plans none.
3. Layouts. The ConvNet (the library's default model) at a global batch of 128: one process,
   dp 2, pp 2, and on 4 ranks dp 2 x pp 2, pp 4 and tp 2 x pp 2 (parallel.tp_min_weights=0),
   pipelines with 4 micro-batches of 128 / (dp x 4) samples, 1F1B; samples/s, and the bubble
   of each stage. On a machine with fewer than 4 cores the 4-rank rows are oversubscribed
   (the ranks time-share the cores: a stage's compute stretches, a message waits for its
   receiver to be scheduled) and labelled so.
4. The peer: the same deep MLP, the same cut, micro-batch and M, under
   torch.distributed.pipelining's ScheduleGPipe and Schedule1F1B (gloo, 2 processes), with
   the newest PyTorch (bench/.venv); Schedule1F1B refuses M < P. Debian's PyTorch 1.13 has
   no torch.distributed.pipelining: its row says so.

Samples/s is the global batch over the median interval between the ends of consecutive
steps after the warmup (rank 0's). Every cell is the median over --reps rounds; within a
round, for each (schedule, M), dtrain and PyTorch alternate (the order rotates every round).
The machine's 2-process/1-process parallel ratio is measured before and after. Every
measurement goes to bench/out/pp-<time>.jsonl. A dtrain failure stops the run (exit 1, its
stderr shown); a PyTorch failure is shown under the table and makes the exit status 1.

Usage (bench/pp.sh calls it): /usr/bin/python3 bench/pp.py --build BUILD_DIR [--quick]
"""
import argparse
import os
import subprocess
import sys
import time

import benchlib as bl
from tp import cpu_model

DEPTH, WIDTH, MICRO_BATCH, DEEP_STAGES = 16, 1024, 32, 2
# Stage 1 begins at the 9th linear layer: index 0 is flatten, linear k is at 2k - 1.
SPLIT = 2 * (DEPTH // 2) + 1
DEEP_SETTINGS = [
    "model.layers=flatten, " + ", ".join(["linear %d, relu" % WIDTH] * DEPTH) + ", linear 10",
    "loss.kind=cross_entropy", "optim.kind=adam", "optim.lr=0.001",
    "parallel.pp=%d" % DEEP_STAGES, "parallel.pp_split=%d" % SPLIT,
    "train.batch=%d" % MICRO_BATCH]
SCHEDULES = ["gpipe", "1f1b"]
MICRO_BATCHES = [1, 2, 4, 8]
# The round-robin placement (layer l on stage l mod 2): every layer boundary a message.
RR_SETTINGS = [x if not x.startswith("parallel.pp_split=") else "parallel.pp_split=round_robin"
               for x in DEEP_SETTINGS]
RR_MICRO = [4]
CONVNET_GLOBAL = 128
CONVNET_MICRO = 4


class Layout:
    """One ConvNet row: the grid, and the per-replica micro-batch that keeps the global
    batch at CONVNET_GLOBAL."""

    def __init__(self, key, label, dp=1, tp=1, pp=1, rr=False):
        self.key, self.dp, self.tp, self.pp, self.rr = key, dp, tp, pp, rr
        self.ranks = dp * tp * pp
        self.micro = CONVNET_MICRO if pp > 1 else 1
        self.batch = CONVNET_GLOBAL // (dp * self.micro)
        # "*": oversubscribed, more ranks than cores (the note under the table says so).
        self.oversubscribed = self.ranks > (os.cpu_count() or 1)
        self.label = label + (" *" if self.oversubscribed else "")

    def settings(self):
        out = ["parallel.dp=%d" % self.dp, "parallel.tp=%d" % self.tp,
               "parallel.pp=%d" % self.pp, "train.batch=%d" % self.batch]
        if self.pp > 1:
            out += ["parallel.micro_batches=%d" % self.micro, "parallel.pp_schedule=1f1b"]
        if self.tp > 1:
            out.append("parallel.tp_min_weights=0")
        if self.rr:
            out.append("parallel.pp_split=round_robin")
        return out


LAYOUTS = [Layout("single", "1 process"), Layout("dp2", "dp2", dp=2),
           Layout("pp2", "pp2", pp=2), Layout("pp2rr", "pp2 round-robin", pp=2, rr=True),
           Layout("dp2pp2", "dp2 x pp2", dp=2, pp=2),
           Layout("pp4", "pp4", pp=4), Layout("tp2pp2", "tp2 x pp2", tp=2, pp=2)]


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with bench_tp, sgemm_peak")
    ap.add_argument("--reps", type=int, default=3, help="rounds (median taken; >= 3)")
    ap.add_argument("--steps", type=int, default=40, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=5, help="steps before them")
    ap.add_argument("--torch-adam", choices=["default", "fused"], default="fused",
                    help="PyTorch's Adam: as it comes (on CPU its single-tensor loop) or "
                         "fused=True (default)")
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="few steps, one round: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.steps, a.warmup, a.spin = 1, 3, 1, 0.2
    elif a.reps < 3:
        ap.error("--reps must be at least 3 (medians); --quick checks the scripts")
    return a


def pipelining_peers():
    """The newest PyTorch and Debian's, each runnable or with the reason it is not: not
    installed, or installed without torch.distributed.pipelining."""
    peers = []
    for key, python, where, name in (("torch_pypi", bl.VENV_PYTHON, "PyPI", "newest"),
                                     ("torch_debian", bl.DEBIAN_PYTHON, "Debian", "1.13")):
        version, missing = None, "not installed"
        if os.path.exists(python):
            try:
                r = subprocess.run([python, "-c", "import torch; print(torch.__version__, "
                                    "flush=True); import torch.distributed.pipelining"],
                                   capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                r = None
            version = r.stdout.strip() if r else None
            if version and r.returncode == 0:
                missing = None
            elif version:
                missing = "not available in %s" % ".".join(version.split(".")[:2])
        peers.append(bl.Peer(key, "PyTorch %s (%s)" % (version or name, where), python,
                             missing))
    return peers


def check_grid(cmd, r, world, dp, tp, pp):
    got = (r.get("world_size"), r.get("dp"), r.get("tp"), r.get("pp"))
    if got != (world, dp, tp, pp):
        raise RuntimeError("%s: ran as world %s, dp %s, tp %s, pp %s" % ((" ".join(cmd),) + got))


def dtrain_run(a, build, settings, ranks, grid):
    """One bench_tp run; ranks > 1 under mpirun. grid: the expected (dp, tp, pp)."""
    cmd = [os.path.join(build, "bench_tp")]
    for setting in settings:
        cmd += ["--set", setting]
    cmd += ["--threads", "1", "--steps", str(a.steps), "--warmup", str(a.warmup)]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    r = bl.launch(cmd, bl.thread_env(1), 900)
    check_grid(cmd, r, ranks, *grid)
    return r


def torch_run(a, peer, sched, m, placement="split"):
    cmd = [peer.python, os.path.join(bl.HERE, "torch_pp.py"), "--schedule", sched,
           "--micro-batches", str(m), "--batch", str(MICRO_BATCH), "--depth", str(DEPTH),
           "--width", str(WIDTH), "--split", str(SPLIT), "--placement", placement,
           "--threads", "1",
           "--steps", str(a.steps), "--warmup", str(a.warmup), "--adam", a.torch_adam]
    return bl.launch(cmd, bl.thread_env(1), 900)


def stages_of(run):
    """Per pipeline stage, in order: (first layer, last layer + 1, idle share, activation
    bytes, waited: the share of the step spent waiting for messages (None for PyTorch),
    compute ms: the mean time per step one of the stage's ranks spent in its forwards,
    backwards and loss). A stage held by several ranks (dp, tp) takes their summed times
    for the shares, the mean of its ranks' compute and the largest rank's bytes."""
    by = {}
    for rk in run["ranks"]:
        by.setdefault(rk["pp_rank"], []).append(rk)
    out = []
    for s in sorted(by):
        rks = by[s]
        step = sum(rk["pp_step_ms_per_step"] for rk in rks)
        compute = sum(rk["pp_compute_ms_per_step"] for rk in rks)
        act = (max(rk["activation_bytes"] for rk in rks)
               if all("activation_bytes" in rk for rk in rks) else None)
        wait = (sum(rk["pp_wait_ms_per_step"] for rk in rks)
                if all("pp_wait_ms_per_step" in rk for rk in rks) else None)
        out.append((rks[0]["stage_first"], rks[0]["stage_last"],
                    1.0 - compute / step if step > 0 else None, act,
                    wait / step if step > 0 and wait is not None else None,
                    compute / len(rks)))
    return out


def summarize(runs):
    """Medians over the rounds of one cell; the stages' layers and bytes are the same in
    every round. compute_ms: the mean over the stages of their compute per step (the
    per-stage compute the samples/s ratio is read against)."""
    per_round = [stages_of(r) for r in runs]
    stages = [(first, last, bl.median([rnd[s][2] for rnd in per_round]), act,
               bl.median([rnd[s][4] for rnd in per_round]),
               bl.median([rnd[s][5] for rnd in per_round]))
              for s, (first, last, _, act, _, _) in enumerate(per_round[0])]
    return {"samples_per_s": bl.median([r["samples_per_s"] for r in runs]),
            "step_ms": bl.median([r["step_ms_median"] for r in runs]),
            "compute_ms": sum(st[5] for st in stages) / len(stages),
            "stages": stages, "last_loss": runs[0].get("last_loss"), "runs": len(runs)}


def theory(p, m):
    return (p - 1) / (m + p - 1)


def joined(values, spec):
    return " / ".join(bl.fmt(v, spec) for v in values)


def row(model, layout, sched, m, b, impl, s, p, act_vs="-", vs_peer="-", compute_vs="-",
        vs_single="-", contiguous=True):
    """A table row from a summary (s) of a run with p stages (round robin: no theory)."""
    idles = [st[2] for st in s["stages"]] if p > 1 else []
    acts = [st[3] for st in s["stages"]]
    layers = " | ".join("%d-%d" % (st[0], st[1] - 1) for st in s["stages"])
    mean = sum(idles) / len(idles) if idles and None not in idles else None
    waits = [st[4] for st in s["stages"]] if p > 1 else []
    waited = sum(waits) / len(waits) if waits and None not in waits else None
    return [model, layout, sched, "%d x %d" % (m, b), impl, "%.0f" % s["samples_per_s"],
            joined([st[5] for st in s["stages"]], ".1f") if p > 1 else "-",
            "%.3f" % theory(p, m) if p > 1 and contiguous else "-",
            joined(idles, ".3f") or "-",
            bl.fmt(mean, ".3f"), bl.fmt(waited, ".3f"),
            joined(acts, ".0f") if None not in acts else "n/a",
            act_vs, layers, vs_peer, compute_vs, vs_single, str(s["runs"])]


HEADER = ["model", "layout", "schedule", "M x b", "implementation", "samples/s",
          "compute ms by stage", "idle theory", "idle by stage", "mean", "waited",
          "act B by stage", "1F1B/GPipe act", "stage layers", "dtrain/PyTorch",
          "PyTorch/dtrain compute", "vs 1 process", "runs"]


def empty_row(model, layout, sched, mb, impl, why):
    """A row without figures: `why` in the samples/s column; mb: its "M x b"."""
    return [model, layout, sched, mb, impl, why] + [""] * (len(HEADER) - 6)


def unsupported(sched, m):
    """Why PyTorch cannot run this cell, or None."""
    # Schedule1F1B raises ValueError for fewer micro-batches than stages.
    return "Schedule1F1B needs M >= P" if sched == "1f1b" and m < DEEP_STAGES else None


def measure(a, build, rec, runnable):
    """Every round: the deep MLP's cells (dtrain and the runnable peers alternating, the
    order rotating every round), then the ConvNet's layouts. Returns the runs by cell and
    the peers' failures; a dtrain failure ends the program."""
    results, errors = {}, {}

    def record(key, r, rep):
        r = dict(r, event="train", cell=list(key), rep=rep)
        rec.write(r)
        results.setdefault(key, []).append(r)

    def dtrain_or_die(key, settings, ranks, grid, rep):
        try:
            record(key, dtrain_run(a, build, settings, ranks, grid), rep)
        except RuntimeError as e:
            rec.write({"event": "failed", "cell": list(key), "rep": rep, "error": str(e)})
            rec.close()
            sys.stderr.write("pp.py: dtrain failed, stopping: %s\n" % e)
            sys.exit(1)

    def deep_cells(rep, cell, settings, micro_batches, placement):
        """The deep MLP under one placement: dtrain and the runnable peers per (schedule,
        M), alternating in an order that rotates every round."""
        for sched in SCHEDULES:
            for m in micro_batches:
                impls = ["dtrain"] + (runnable if unsupported(sched, m) is None else [])
                k = rep % len(impls)
                for impl in impls[k:] + impls[:k]:
                    bl.log("round %d/%d  %s %-5s M=%d  %s" % (
                        rep + 1, a.reps, cell, sched, m,
                        impl if impl == "dtrain" else impl.label))
                    if impl == "dtrain":
                        dtrain_or_die((cell, sched, m, "dtrain"),
                                      settings + ["parallel.pp_schedule=" + sched,
                                                  "parallel.micro_batches=%d" % m],
                                      DEEP_STAGES, (1, 1, DEEP_STAGES), rep)
                        continue
                    key = (cell, sched, m, impl.key)
                    try:
                        record(key, torch_run(a, impl, sched, m, placement), rep)
                    except RuntimeError as e:
                        bl.log("FAILED: %s" % e)
                        errors[key] = str(e)
                        rec.write({"event": "failed", "cell": list(key), "rep": rep,
                                   "error": str(e)})

    for rep in range(a.reps):
        deep_cells(rep, "deep", DEEP_SETTINGS, MICRO_BATCHES, "split")
        deep_cells(rep, "deep-rr", RR_SETTINGS, RR_MICRO, "round_robin")
        for lay in LAYOUTS:
            bl.log("round %d/%d  ConvNet %s" % (rep + 1, a.reps, lay.label))
            dtrain_or_die(("convnet", lay.key), lay.settings(), lay.ranks,
                          (lay.dp, lay.tp, lay.pp), rep)
    return results, errors


def versus(d, theirs):
    """dtrain's samples/s over the peer's and the peer's per-stage compute over dtrain's
    (the two agree where both pipelines idle the same share of their steps), as cell
    texts, and the figures themselves (None where the peer has no cell)."""
    if not theirs:
        return "-", "-", None
    fig = (d["samples_per_s"] / theirs["samples_per_s"], theirs["compute_ms"] / d["compute_ms"])
    return "%.2f" % fig[0], "%.2f" % fig[1], fig


def deep_rows(sums, peers, errors):
    """The deep MLP's rows, per (schedule, M) dtrain then the runnable peers; the memory
    target's verdicts (1F1B over GPipe per stage, at each M); and every cell's (label,
    dtrain/PyTorch samples/s, PyTorch/dtrain per-stage compute) against the newest peer."""
    rows, targets, cells = [], [], []
    newest = peers[0]
    for sched in SCHEDULES:
        for m in MICRO_BATCHES:
            d = sums[("deep", sched, m, "dtrain")]
            theirs = sums.get(("deep", sched, m, newest.key))
            act_vs = "-"
            if sched == "1f1b":
                gp = sums[("deep", "gpipe", m, "dtrain")]
                ratios = [st[3] / g[3] for st, g in zip(d["stages"], gp["stages"])]
                bound = 1.1 * DEEP_STAGES / m
                act_vs = joined(ratios, ".3f")
                targets.append("M=%d %s (<= %.3f) %s" % (
                    m, act_vs, bound, "met" if max(ratios) <= bound else "NOT met"))
            vs_peer, compute_vs, fig = versus(d, theirs)
            if fig:
                cells.append(("%s M=%d" % (sched, m), m) + fig)
            rows.append(row("deep MLP", "pp2", sched, m, MICRO_BATCH, "dtrain", d, DEEP_STAGES,
                            act_vs=act_vs, vs_peer=vs_peer, compute_vs=compute_vs))
            for p in peers:
                s = sums.get(("deep", sched, m, p.key))
                if s is not None:
                    rows.append(row("deep MLP", "pp2", sched, m, MICRO_BATCH, p.label, s,
                                    DEEP_STAGES))
                elif p.missing is None:
                    failed = ("deep", sched, m, p.key) in errors
                    rows.append(empty_row("deep MLP", "pp2", sched,
                                          "%d x %d" % (m, MICRO_BATCH), p.label,
                                          "failed" if failed else unsupported(sched, m)))
    for sched in SCHEDULES:
        for m in RR_MICRO:
            d = sums[("deep-rr", sched, m, "dtrain")]
            theirs = sums.get(("deep-rr", sched, m, newest.key))
            vs_peer, compute_vs, fig = versus(d, theirs)
            if fig:
                cells.append(("round-robin %s M=%d" % (sched, m), m) + fig)
            rows.append(row("deep MLP", "pp2 round-robin", sched, m, MICRO_BATCH, "dtrain", d,
                            DEEP_STAGES, vs_peer=vs_peer, compute_vs=compute_vs,
                            contiguous=False))
            for p in peers:
                s = sums.get(("deep-rr", sched, m, p.key))
                if s is not None:
                    rows.append(row("deep MLP", "pp2 round-robin", sched, m, MICRO_BATCH,
                                    p.label, s, DEEP_STAGES, contiguous=False))
                elif p.missing is None:
                    rows.append(empty_row("deep MLP", "pp2 round-robin", sched,
                                          "%d x %d" % (m, MICRO_BATCH), p.label, "failed"))
    # A peer that cannot run at all says why once, not in every cell.
    rows += [empty_row("deep MLP", "pp2", "any", "any", p.label, p.missing)
             for p in peers if p.missing]
    return rows, targets, cells


def ratio_summary(cells, peer, adam):
    """The lines that quote the ratio cells: the full range over every cell (never a chosen
    part of them), the cells at each end, and the one-micro-batch cells, where a stage
    computes while the other waits and the step is the stages' compute in turn."""
    if not cells:
        return ["dtrain/PyTorch: no cell with both implementations"]

    def span(i):
        lo = min(cells, key=lambda c: c[i])
        hi = max(cells, key=lambda c: c[i])
        return "%.2f-%.2fx (lowest %s, highest %s)" % (lo[i], hi[i], lo[0], hi[0])
    out = ["dtrain/PyTorch samples/s over all %d cells with both (against %s, eager, %s "
           "Adam): %s" % (len(cells), peer.label, adam, span(2)),
           "PyTorch/dtrain per-stage compute ms over the same cells: %s" % span(3)]
    ones = [c for c in cells if c[1] == 1]
    if ones:
        out.append("at M=1: " + "; ".join("%s samples/s %.2fx, per-stage compute %.2fx"
                                          % (c[0], c[2], c[3]) for c in ones))
    return out


def convnet_rows(sums):
    single = sums[("convnet", "single")]
    return [row("ConvNet", lay.label, "1f1b" if lay.pp > 1 else "-", lay.micro, lay.batch,
                "dtrain", s, lay.pp,
                vs_single="%.2f" % (s["samples_per_s"] / single["samples_per_s"]),
                contiguous=not lay.rr)
            for lay in LAYOUTS for s in [sums[("convnet", lay.key)]]]


def report(a, cpu, peers, results, sums, errors, ratios):
    """The printed report: settings, the table, the notes, the targets and checks."""
    rows, mem_targets, cells = deep_rows(sums, peers, errors)
    rows += convnet_rows(sums)
    out = ["dtrain pipeline-parallel benchmark: 1 thread per rank, median of %d round(s) of "
           "%d steps after %d%s" % (a.reps, a.steps, a.warmup,
                                    " (--quick: NOT a measurement)" if a.quick else ""),
           "CPU: %s, %d cores; dtrain's BLAS: %s%s" % (
               cpu, os.cpu_count() or 0,
               bl.dtrain_blas(r for rs in results.values() for r in rs),
               bl.coretype_note()),
           "PyTorch (torch.distributed.pipelining, gloo, 2 processes, Adam %s): %s" % (
               "fused=True" if a.torch_adam == "fused" else "as it comes (single-tensor loop)",
               ", ".join(p.label + (" (%s)" % p.missing if p.missing else "") for p in peers)),
           "deep MLP: the library's default config with (bench_tp --set, as dtrain train --set):"]
    out += ["    %s" % s for s in DEEP_SETTINGS]
    out.append("  plus parallel.pp_schedule and parallel.micro_batches per row; PyTorch: "
               "bench/torch_pp.py --split %d, the same layers" % SPLIT)
    out.append("ConvNet: the library's default model, global batch %d per step in every "
               "layout (M x b: micro-batches x samples per replica)" % CONVNET_GLOBAL)
    out.append("")
    out.append(bl.table(
        "Samples/s (rank 0, median step); per stage: compute ms per step and idle share = "
        "1 - compute / pipeline step (the bubble); activation bytes", HEADER, rows))
    out.append("compute ms by stage: stage 0 / stage 1 / ...: the mean time per step a stage "
               "spends in its forwards, backwards and loss (dtrain: dt_trainer_comm_stats' "
               "pp_compute_s; PyTorch: PipelineStage.forward_one_chunk + backward_one_chunk "
               "+ the loss, timed in bench/torch_pp.py). idle by stage: 1 - compute / pipeline "
               "step, the pipeline step being the step without the optimizer (dtrain's "
               "includes zeroing its gradients and loading its inputs; PyTorch's is zero_grad "
               "+ batch + schedule.step()); mean: over the stages; theory: (P-1)/(M+P-1), for "
               "stages of equal compute and free messages (the ConvNet's stages are not equal: "
               "its lighter stages wait more). A stage held by several ranks (dp, tp) sums "
               "their times for the shares and takes their mean compute.")
    out.append("waited: dtrain's mean share of the pipeline step spent waiting for a message "
               "(the schedule's idle time; the rest of the idle share is the step's gradient "
               "zeroing, input loading and message posting).")
    out.append("dtrain/PyTorch: samples/s over %s's at the same schedule and M (above 1: "
               "dtrain faster); PyTorch/dtrain compute: its mean per-stage compute over "
               "dtrain's. Where both sides idle the same share, the two ratios are equal: the "
               "lead is then per-stage compute (the layers' arithmetic and the framework "
               "around it), not the schedule." % peers[0].label)
    out.append("round-robin: layer l on stage l mod 2 (RR_SETTINGS: parallel.pp_split="
               "round_robin), every layer boundary a message; PyTorch runs each layer as a "
               "stage of its own on rank l mod 2 (ScheduleLoopedBFS for gpipe, "
               "ScheduleInterleaved1F1B for 1f1b); no closed-form theory.")
    out.append("stage layers: each stage's first-last layer of the model's layer list "
               "(index 0 is the first layer; round-robin: every other one in between). "
               "vs 1 process: over the ConvNet's one-process row.")
    if any(lay.oversubscribed for lay in LAYOUTS):
        out.append("*: OVERSUBSCRIBED, %d ranks on %d cores: the ranks time-share the cores "
                   "(a stage's compute stretches, a message waits for its receiver to be "
                   "scheduled), so these rows' samples/s and idle shares measure the "
                   "oversubscription, not the layout."
                   % (max(lay.ranks for lay in LAYOUTS), os.cpu_count() or 1))
    out += ratio_summary(cells, peers[0], "fused" if a.torch_adam == "fused" else "default")
    out.append("target: 1F1B activation bytes <= P/M of GPipe's + 10%% on every stage "
               "(stage 0 / stage 1): %s" % "; ".join(mem_targets))
    # GPipe and 1F1B run the same micro-batches through the same layers: only the order
    # of forwards and backwards differs, so the loss must be the same.
    out.append("loss of the last step, dtrain GPipe / 1F1B (first round; must agree): " +
               ", ".join("M=%d %s / %s" % (
                   m, bl.fmt(sums[("deep", "gpipe", m, "dtrain")]["last_loss"], ".6f"),
                   bl.fmt(sums[("deep", "1f1b", m, "dtrain")]["last_loss"], ".6f"))
                         for m in MICRO_BATCHES))
    flag = min(ratios) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratios[0], ratios[1],
                  "  <-- below %.1f: 2-rank figures are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    for key, e in sorted(errors.items()):
        out.append("failed: %s:\n%s" % (" ".join(map(str, key)), e))
    return out


def main():
    started = time.monotonic()
    a = args_parse()
    build = os.path.abspath(a.build)
    sgemm_peak = os.path.join(build, "sgemm_peak")
    for exe in (os.path.join(build, "bench_tp"), sgemm_peak):
        if not os.access(exe, os.X_OK):
            sys.exit("pp.py: %s missing: build first (cmake --build %s)" % (exe, a.build))
    rec = bl.Recorder("pp")
    cpu = cpu_model()
    rec.write({"event": "machine", "cpu": cpu, "cpus": os.cpu_count(),
               "openblas_coretype": bl.init_blas(build)})
    peers = pipelining_peers()
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))
        rec.write({"event": "peer", "impl": p.key, "label": p.label, "missing": p.missing})

    def parallel_ratio(when):
        bl.log("parallel ratio (%s)..." % when)
        ratio = bl.parallel_ratio(sgemm_peak, a.spin)
        rec.write({"event": "parallel_ratio", "when": when, "ratio": ratio})
        return ratio

    before = parallel_ratio("before")
    results, errors = measure(a, build, rec, [p for p in peers if p.missing is None])
    ratios = (before, parallel_ratio("after"))
    sums = {k: summarize(v) for k, v in results.items()}
    for k, s in sums.items():
        rec.write(dict(s, event="summary", cell=list(k), reps=a.reps))
    out = report(a, cpu, peers, results, sums, errors, ratios)
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    print("\n".join(out))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
