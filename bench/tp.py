#!/usr/bin/python3
"""Tensor-parallel benchmark: the wide MLP (784 -> 4096 -> 4096 -> 10, batch 64, Adam 1e-3,
Fashion-MNIST) trained by dtrain and by PyTorch's own tensor parallelism on the same layout,
in the same run: tp = 1 (one process), tp = 2 (two ranks, one thread each) and, with
--with-dp, dp 2 x tp 2 (four ranks; on a machine with fewer than 4 cores oversubscribed and
labelled so).

The layout is dtrain's planner's (`dtrain train ... --tp 2 --explain-layout`): linear
784 -> 4096 column-parallel, 4096 -> 4096 row-parallel (one all-reduce of its partial outputs
per step, in forward), 4096 -> 10 whole. PyTorch's side (bench/torch_tp.py) is the same with
torch.distributed.tensor.parallel: ColwiseParallel then RowwiseParallel, fc3 replicated, gloo.
The newest PyTorch runs twice per layout: with torch.optim.Adam as it comes (on CPU its
single-tensor loop: torch's foreach form is the default on GPUs only; about half of its step
at this size) and with fused=True (one pass over the parameters), so that the comparison does not rest on PyTorch's
slower default. Debian's 1.13 runs tp = 1 only: it has no torch.distributed.tensor.

For every (implementation, layout), the median over --reps runs of:
  step time       median interval between the ends of consecutive steps after the warmup
                  (rank 0's; the ranks move in lockstep, the all-reduce joins them);
  samples/s       global batch / step time;
  tp ms/step      each rank's time in the tp collectives per step, the fastest and slowest
                  rank (a collective's time includes waiting for the other rank, so the
                  fastest rank's figure is nearest the transfer itself). dtrain: its own
                  counters over the measured steps; PyTorch: a separate profiled window;
  param bytes     per rank (the largest), and over the same implementation's tp = 1;
  act bytes       dtrain only: activations and workspaces the model planned on the rank.
The dtrain rows carry dtrain's step time over the newest PyTorch's at the same layout, with
its default Adam and with the fused one. A decomposition line per PyTorch variant (the one
fastest at tp = 2 first, which the claim leads with) splits the tp = 2 ratio into the
one-process gap (the ratio at tp = 1) and the ratio of the two (tp = 2's over tp = 1's). Below the table: the loss of the last measured step
of each run (the same samples in the same order at every tp: tp = 1 and tp = 2 must agree to
rounding), the targets, and the parallel ratio.
Implementations alternate within each round (the order rotates every round) so that a
drifting machine load spreads over all of them; the machine's 2-process/1-process parallel
ratio is measured before and after. Every measurement goes to bench/out/tp-<time>.jsonl.

Usage (bench/tp.sh calls it): /usr/bin/python3 bench/tp.py --build BUILD_DIR [--quick]
"""
import argparse
import os
import subprocess
import sys
import time

import benchlib as bl

CONFIG = "examples/mlp.ini"
# The model in place of the config's own (its data, loss and Adam kept; its dropout
# goes, as the model line replaces the whole list), at the peer's learning rate (the
# config's is 2e-3; bench_tp makes the schedule constant).
SETTINGS = ["model.layers=flatten, linear 4096, relu, linear 4096, relu, linear 10",
            "optim.lr=0.001"]
DP_CORES = 4  # dp 2 x tp 2 is four ranks of one thread


class Impl:
    """One row group of the table: a peer (benchlib.Peer) and, for PyTorch, its Adam."""

    def __init__(self, peer, adam=None):
        self.peer, self.adam = peer, adam
        self.key = peer.key + ("_" + adam if adam and adam != "default" else "")
        self.label = peer.label + (", fused Adam" if adam == "fused" else "")


class Layout:
    def __init__(self, key, tp, dp, label):
        self.key, self.tp, self.dp, self.label = key, tp, dp, label

    @property
    def ranks(self):
        return self.tp * self.dp


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with bench_tp, sgemm_peak")
    ap.add_argument("--reps", type=int, default=3, help="rounds (median taken; >= 3)")
    ap.add_argument("--steps", type=int, default=100, help="measured steps per run")
    ap.add_argument("--warmup", type=int, default=10, help="steps before them")
    ap.add_argument("--profile-steps", type=int, default=20,
                    help="PyTorch: steps of the profiled window that times its collectives")
    ap.add_argument("--torch-adam", default="default,fused",
                    help="the newest PyTorch's Adam variants to run: default, fused, or both")
    ap.add_argument("--with-dp", action="store_true",
                    help="also dp 2 x tp 2 (4 ranks: oversubscribed on fewer than 4 cores)")
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="few steps, one round: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.steps, a.warmup, a.profile_steps, a.spin = 1, 8, 2, 3, 0.2
    elif a.reps < 3:
        ap.error("--reps must be at least 3 (medians); --quick checks the scripts")
    a.torch_adam = a.torch_adam.split(",")
    if not a.torch_adam or any(v not in ("default", "fused") for v in a.torch_adam):
        ap.error("--torch-adam takes default, fused or default,fused")
    return a


def layouts(with_dp):
    out = [Layout("tp1", 1, 1, "tp=1 (1 process)"), Layout("tp2", 2, 1, "tp=2 (2 ranks)")]
    if with_dp:
        cores = os.cpu_count() or 1
        label = ("dp2 x tp2 (oversubscribed, 4 ranks on %d cores)" % cores
                 if cores < DP_CORES else "dp2 x tp2 (4 ranks)")
        out.append(Layout("dp2tp2", 2, 2, label))
    return out


def cpu_model():
    """lscpu's model name (the hypervisor may hide more), or /proc/cpuinfo's."""
    try:
        r = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=30)
        for line in r.stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.TimeoutExpired):
        pass
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def dtrain_run(a, build, lay):
    cmd = [os.path.join(build, "bench_tp"), CONFIG]
    for setting in SETTINGS + ["parallel.tp=%d" % lay.tp]:
        cmd += ["--set", setting]
    cmd += ["--threads", "1", "--steps", str(a.steps), "--warmup", str(a.warmup)]
    if lay.ranks > 1:
        cmd = ["mpirun", "-np", str(lay.ranks), "--oversubscribe"] + cmd
    r = bl.launch(cmd, bl.thread_env(1), 900)
    if (r.get("world_size"), r.get("tp")) != (lay.ranks, lay.tp):
        raise RuntimeError("%s: ran as %s rank(s), tp %s" % (" ".join(cmd), r.get("world_size"),
                                                             r.get("tp")))
    return r


def torch_run(a, impl, lay):
    cmd = [impl.peer.python, os.path.join(bl.HERE, "torch_tp.py"), "--tp", str(lay.tp),
           "--dp", str(lay.dp), "--adam", impl.adam, "--threads", "1", "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--profile-steps", str(a.profile_steps)]
    return bl.launch(cmd, bl.thread_env(1), 900)


def reason(error):
    """The line of a failure's output that says why (the program's, not mpirun's banner)."""
    lines = [ln for ln in error.splitlines()[1:] if ln.strip()]
    for ln in reversed(lines):
        if ln.startswith(("bench_tp", "dtrain", "RuntimeError", "torch")) or "Error" in ln:
            return ln.strip()
    return lines[-1] if lines else error.splitlines()[0]


def summarize(runs):
    """Medians over the rounds of one (implementation, layout)."""
    def over_ranks(key, pick):
        return bl.median([pick(rk[key] for rk in r["ranks"] if rk.get(key) is not None)
                          if any(rk.get(key) is not None for rk in r["ranks"]) else None
                          for r in runs])
    return {
        "step_ms": bl.median([r["step_ms_median"] for r in runs]),
        "samples_per_s": bl.median([r["samples_per_s"] for r in runs]),
        "tp_ms_min": over_ranks("tp_ms_per_step", min),
        "tp_ms_max": over_ranks("tp_ms_per_step", max),
        "param_bytes": over_ranks("param_bytes", max),
        "act_bytes": over_ranks("activation_bytes", max),
        "runs": len(runs),
    }


def decomposition(sums, variants):
    """dtrain's tp=2 step time over each PyTorch variant's, split into the one-process gap
    (the same ratio at tp=1) and what tensor parallelism adds (tp=2's ratio over tp=1's,
    which is PyTorch's tp=1 -> tp=2 speed-up over dtrain's, inverted); the variant fastest
    at tp=2 first: the claim leads with it."""
    d1, d2 = sums.get(("dtrain", "tp1")), sums.get(("dtrain", "tp2"))
    have = [(sums[(i.key, "tp2")]["step_ms"], i) for i in variants
            if d1 and d2 and (i.key, "tp1") in sums and (i.key, "tp2") in sums]
    out = []
    for n, (_, i) in enumerate(sorted(have, key=lambda x: x[0])):
        t1, t2 = sums[(i.key, "tp1")], sums[(i.key, "tp2")]
        r1, r2 = d1["step_ms"] / t1["step_ms"], d2["step_ms"] / t2["step_ms"]
        first = ", its fastest at tp=2" if n == 0 and len(have) > 1 else ""
        out.append("decomposition against %s (eager, %s Adam%s): dtrain/PyTorch step time at "
                   "tp=1 %.2f (the one-process gap), at tp=2 %.2f; tp=2's over tp=1's %.2f "
                   "(dtrain's tp=1 -> tp=2 speed-up %.2fx, PyTorch's %.2fx): %.2f = %.2f x %.2f"
                   % (i.peer.label, i.adam, first,
                      r1, r2, r2 / r1, d1["step_ms"] / d2["step_ms"],
                      t1["step_ms"] / t2["step_ms"], r2, r1, r2 / r1))
    if not have:
        out.append("decomposition: needs dtrain and PyTorch at tp=1 and tp=2")
    return out


def main():
    started = time.monotonic()
    a = args_parse()
    build = os.path.abspath(a.build)
    sgemm_peak = os.path.join(build, "sgemm_peak")
    for exe in (os.path.join(build, "bench_tp"), sgemm_peak):
        if not os.access(exe, os.X_OK):
            sys.exit("tp.py: %s missing: build first (cmake --build %s)" % (exe, a.build))
    rec = bl.Recorder("tp")
    cpu = cpu_model()
    rec.write({"event": "machine", "cpu": cpu, "cpus": os.cpu_count(),
               "openblas_coretype": bl.init_blas(build)})
    peers = [bl.Peer("dtrain", "dtrain")] + bl.torch_peers()
    newest = next(p for p in peers if p.key == "torch_pypi")
    impls = [Impl(peers[0]), Impl(peers[1], "default")] + [Impl(newest, v)
                                                            for v in a.torch_adam]
    lays = layouts(a.with_dp)
    for p in peers:
        bl.log("peer: %s%s" % (p.label, " (%s)" % p.missing if p.missing else ""))

    def unsupported(impl, lay):
        # Debian's 1.13 has no torch.distributed.tensor at all: its only row is tp = 1.
        if impl.peer.key == "torch_debian" and lay.tp > 1:
            return "no TP API in 1.13"
        return impl.peer.missing

    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    results, errors = {}, {}
    for rep in range(a.reps):
        for lay in lays:
            order = [i for i in impls if unsupported(i, lay) is None]
            k = rep % len(order)
            for impl in order[k:] + order[:k]:
                bl.log("round %d/%d  %-26s %s" % (rep + 1, a.reps, lay.label, impl.label))
                try:
                    r = (dtrain_run(a, build, lay) if impl.key == "dtrain"
                         else torch_run(a, impl, lay))
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[(impl.key, lay.key)] = str(e)
                    rec.write({"event": "failed", "impl": impl.key, "layout": lay.key,
                               "rep": rep, "error": str(e)})
                    continue
                r = dict(r, event="train", impl_key=impl.key, layout=lay.key, rep=rep)
                rec.write(r)
                results.setdefault((impl.key, lay.key), []).append(r)
    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    sums = {k: summarize(v) for k, v in results.items()}

    def versus(s, key, lay):
        theirs = sums.get((key, lay.key))
        return "%.2f" % (s["step_ms"] / theirs["step_ms"]) if theirs else "-"
    rows = []
    for lay in lays:
        for i in impls:
            s = sums.get((i.key, lay.key))
            if s is None:
                why = unsupported(i, lay) or ("failed" if (i.key, lay.key) in errors else "-")
                rows.append([i.label, lay.label, why] + [""] * 8)
                continue
            base = sums.get((i.key, "tp1"), {}).get("param_bytes")
            if lay.tp == 1:
                tp_ms = "-"
            elif s["tp_ms_min"] is None:
                tp_ms = "not measured"
            else:
                tp_ms = "%.2f / %.2f" % (s["tp_ms_min"], s["tp_ms_max"])
            vs_default = vs_fused = "-"
            if i.key == "dtrain":
                vs_default = versus(s, newest.key, lay)
                vs_fused = versus(s, newest.key + "_fused", lay)
            rec.write(dict(s, event="summary", impl_key=i.key, layout=lay.key, reps=a.reps))
            rows.append([i.label, lay.label, "%.1f" % s["step_ms"], "%.0f" % s["samples_per_s"],
                         tp_ms, "%.0f" % s["param_bytes"],
                         "%.3f" % (s["param_bytes"] / base) if base else "-",
                         "%.0f" % s["act_bytes"] if s["act_bytes"] is not None else "n/a",
                         vs_default, vs_fused, str(s["runs"])])

    out = ["dtrain tensor-parallel benchmark: MLP 784-4096-4096-10, batch 64 per replica, "
           "Adam 1e-3, 1 thread per rank, median of %d round(s) of %d steps after %d%s"
           % (a.reps, a.steps, a.warmup, " (--quick: NOT a measurement)" if a.quick else ""),
           "CPU: %s, %d cores; dtrain's BLAS: %s%s" % (
               cpu, os.cpu_count() or 0,
               bl.dtrain_blas(r for k, rs in results.items() if k[0] == "dtrain" for r in rs),
               bl.coretype_note()),
           "PyTorch: " + ", ".join(p.label + (" (%s)" % p.missing if p.missing else "")
                                   for p in peers if p.key != "dtrain"),
           ""]
    out.append(bl.table(
        "Step time (rank 0, median), tp collectives per step (fastest / slowest rank), "
        "bytes per rank",
        ["implementation", "layout", "step ms", "samples/s", "tp coll ms/step",
         "param B/rank", "vs tp=1", "act B/rank", "dtrain/PyTorch", "/PyTorch fused",
         "runs"], rows))
    out.append("tp coll ms/step: dtrain counts its own collectives over the measured steps; "
               "PyTorch's are from a separate torch.profiler window of %d steps "
               "(_c10d_functional all_reduce + wait_tensor). dtrain/PyTorch, /PyTorch fused: "
               "dtrain's step time over %s's with its default Adam and with fused=True, at "
               "the same layout (below 1: dtrain faster)." % (a.profile_steps, newest.label))
    if a.with_dp:
        out.append("dp2 x tp2, PyTorch: gradients of the 2 replicas averaged by one all-reduce "
                   "per tensor after backward (DDP fails on DTensor parameters); dtrain's DDP "
                   "strategy starts its bucketed all-reduce during backward (parallel.overlap).")
    d1, d2 = sums.get(("dtrain", "tp1")), sums.get(("dtrain", "tp2"))
    if d1 and d2:
        ratio = d2["param_bytes"] / d1["param_bytes"]
        out.append("target: dtrain tp=2 parameter bytes per rank %.3f of tp=1 (<= 0.55): %s"
                   % (ratio, "met" if ratio <= 0.55 else "NOT met"))
    for i in impls[2:]:
        t2 = sums.get((i.key, "tp2"))
        if d2 and t2:
            out.append("target: dtrain tp=2 step time %.1f ms, %s %.1f ms: %s"
                       % (d2["step_ms"], i.label, t2["step_ms"],
                          "met" if d2["step_ms"] <= t2["step_ms"] else "NOT met"))
    out += decomposition(sums, impls[2:])
    # The same samples in the same order at tp = 1 and tp = 2: the loss of the last step
    # must agree to float rounding, or the layout computes something else.
    losses = []
    for i in impls:
        per = ["%s %s" % (lay.key, bl.fmt(results[(i.key, lay.key)][0].get("last_loss"), ".5f"))
               for lay in lays if (i.key, lay.key) in results]
        if per:
            losses.append("%s: %s" % (i.label, ", ".join(per)))
    out.append("loss of the last measured step (first round; tp1 and tp2 should agree): "
               + "; ".join(losses))
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: 2-rank figures are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    for (key, lay), e in sorted(errors.items()):
        out.append("failed: %s %s: %s" % (key, lay, reason(e)))
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
