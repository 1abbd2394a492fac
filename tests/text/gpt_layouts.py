"""gpt_layouts.py --dtrain BIN --mpirun BIN [--tier test|long] [--layouts A,B] [--checks C,D]

A small GPT trained at every layout against one process, through the command line and the
files a user gets (issue 38's tests; docs/TENSOR_PARALLEL.md, docs/PIPELINE.md): 2 blocks
of 3 heads (tp 2 splits them 2 + 1), E 24, block_size 16, every dropout on (the
embedding's, the residual branches' p and the attention's attn_p), the tied head, on a
corpus of words written here, at the same global batch of 12 windows in every layout
(--batch is 12 / (dp x micro-batches)). The checks, each for the layouts that ask for it:

- sgd: 20 steps of SGD with momentum; every tensor of --save-weights within max|d| <= 1e-5
  of one process's. The same runs pass --check-replicas: the run itself compares every
  copy of each parameter bit for bit (data-parallel replicas, a tensor-parallel group's
  whole tensors, the tied table's copy on the head's stage) and says so in its log.
- adamw: 20 AdamW steps; the loss of every step (--metrics, --log-every 1) and the final
  validation loss within 1e-4 of one process's.
- clip: 20 SGD steps with optim.clip_norm small enough that every step clips (the
  pre-clipping grad_norm of every step, in the metrics, above it in one process and in the
  layout, and within 1e-4 relative of one process's); weights within 1e-5 of one process's,
  whose clipped weights differ from its unclipped ones by far more than that.
- recompute: --recompute block writes the same bytes as the layout's own run without it.
- export: `dtrain export SET DIR --format hf` of the layout's checkpoint gives the tensors
  of one process's export (names, shapes, values within 1e-5, the same config.json), and
  the very bytes of the layout's own --save-weights.
- plan: the sgd run's --trace against `dtrain plan --json` of the same layout, rank by
  rank: the bytes each group's collectives carry per step (steps 2 to 19: the set-up before
  step 1 and the evaluation, replica check and checkpoint after step 20 left out), group by
  group (dp, tp, pp, the embedding group): on each stage (world rank = tp_rank + tp
  (dp_rank + dp pp_rank)) the largest rank's equal to the plan's rows for the stage, which
  are its tp rank 0's (the larger part of unevenly split heads), and no rank's above them. The step's exchanges of a few scalars
  (losses, norms, verdicts: 32 bytes or less from each rank), which the plan says it leaves out, are not
  counted: an all-gather of 32 bytes from each member (the trace counts its whole result)
  or a collective of fewer bytes. Under sequence parallelism also the run's own report of
  the position-shared gradients' sums (metrics tp_grad_sums and tp_grad_sum_bytes, rank
  0's) against the plan's row for its stage.
Once, in the test tier: ckpt: a set written when a 10-step run at dp 2 with ZeRO-1 ends,
resumed at tp 2 x pp 2 (4 ranks), trains steps 11..20 and ends within 1e-5 of one process's
20 steps; and --check-replicas under localsgd is refused as a usage error.

A layout is one entry of LAYOUTS. Standard library only. Prints a line per check; exits 1
on any failure, naming the layout, the tensor or step, expected and actual values and the
command lines."""
import argparse
import collections
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

GLOBAL_BATCH = 12
STEPS = 20
WEIGHTS_TOL = 1e-5
LOSS_TOL = 1e-4
CLIP_NORM = 0.5  # below every step's norm (about 0.8 to 3.4 in one process)

# name, ranks, the layout's options, dp, micro-batches, the checks beside sgd and adamw
# (clip, recompute, export), and the tier: "test" (make test) or "long" (make test-long).
Layout = collections.namedtuple("Layout", "name ranks opts dp mb checks tier")


def L(name, ranks, opts, dp=1, mb=1, checks=(), tier="test"):
    return Layout(name, ranks, opts, dp, mb, frozenset(checks), tier)


LAYOUTS = [
    # tensor parallelism by heads: 3 heads over 2 ranks (2 + 1) and over 3 (one each)
    L("tp2", 2, ["--tp", "2"], checks=("clip", "recompute", "export")),
    L("tp3", 3, ["--tp", "3"]),
    # pipelines, with M not a multiple of P: the embedding on stage 0, the head and its
    # copy of the tied table on the last stage
    L("pp2_gpipe", 2, ["--pp", "2", "--pp-schedule", "gpipe"], mb=3),
    L("pp2_1f1b", 2, ["--pp", "2", "--pp-schedule", "1f1b"], mb=3,
      checks=("clip", "recompute", "export")),
    L("pp3", 3, ["--pp", "3", "--pp-schedule", "1f1b"], mb=4),
    # round robin: the head (layer 6) lands with the embedding (layer 0), no copy
    L("pp2_rr", 2, ["--pp", "2", "--pp-split", "round_robin"], mb=3),
    L("dp2tp2", 4, ["--dp", "2", "--tp", "2"], dp=2, checks=("clip",)),
    # sequence parallelism: each block's LayerNorms, dropouts and residual adds on half the
    # positions, their gradients summed over the pair once per step
    L("tp2sp", 2, ["--tp", "2", "--sequence-parallel"], checks=("clip", "recompute")),
    # both at once on 4 ranks: each stage's own tp collectives, the stages' messages a rank's
    # share of the positions, the head's copy of the table summed over its tp pair
    L("tp2pp2sp", 4, ["--tp", "2", "--pp", "2", "--sequence-parallel"], mb=2),
    # data parallelism over the two kinds of partial gradients: each replica's LayerNorm
    # and embedding gradients summed over its tp pair (dp 2 x tp 2 with sequence
    # parallelism), and the tied table's over its embedding group, beside ZeRO-1's slices
    # (dp 2 x pp 2): ddp's update sums both (as the one-process strategy's does)
    L("dp2tp2sp", 4, ["--dp", "2", "--tp", "2", "--sequence-parallel"], dp=2),
    L("dp2pp2_zero1", 4, ["--dp", "2", "--pp", "2", "--zero", "1"], dp=2, mb=3),
    # ZeRO-3: each rank holds a slice of every parameter, gradient and optimizer state; each
    # layer's range gathered before it runs, the tied head's table too, and its gradients
    # reduce-scattered after its backward (no copies: no --check-replicas)
    L("dp2_zero3", 2, ["--dp", "2", "--zero", "3"], dp=2, checks=("clip", "recompute", "export")),
    # ... over each tensor-parallel part: a rank's slices are of its part of every split
    # tensor (the heads 2 + 1) and of the replicated ones
    L("dp2tp2_zero3", 4, ["--dp", "2", "--tp", "2", "--zero", "3"], dp=2, checks=("clip",)),
    # ... with sequence parallelism: each layer's position-shared gradients summed over the
    # tp pair as its backward hands them over, every micro-batch, the head's table's too
    L("dp2tp2sp_zero3", 4, ["--dp", "2", "--tp", "2", "--sequence-parallel", "--zero", "3"],
      dp=2, mb=2, checks=("clip", "recompute")),
    # ... and over pipeline stages: each stage's layers sliced over its dp pair, the tied
    # table's gradient gathered from the slices and summed with its copy's between the stages
    L("dp2pp2_zero3", 4, ["--dp", "2", "--pp", "2", "--zero", "3"], dp=2, mb=3,
      checks=("clip", "export")),
    # ---- the long tier
    L("dp2tp2pp2", 8, ["--dp", "2", "--tp", "2", "--pp", "2"], dp=2, mb=2,
      checks=("clip", "recompute"), tier="long"),
    L("dp2tp2pp2_gpipe", 8, ["--dp", "2", "--tp", "2", "--pp", "2", "--pp-schedule", "gpipe"],
      dp=2, mb=3, tier="long"),
    L("tp3pp3", 9, ["--tp", "3", "--pp", "3"], mb=4, tier="long"),
    L("dp2tp2_zero1", 4, ["--dp", "2", "--tp", "2", "--zero", "1"], dp=2, checks=("clip",),
      tier="long"),
    # ZeRO-3 with accumulation over 3 slices of unequal layers, and with tp 3 (a head each)
    L("dp3_zero3", 3, ["--dp", "3", "--zero", "3"], dp=3, mb=2, checks=("clip", "recompute"),
      tier="long"),
    L("dp2tp3_zero3", 6, ["--dp", "2", "--tp", "3", "--zero", "3"], dp=2,
      checks=("recompute", "export"), tier="long"),
    L("dp2tp2pp2_zero3", 8, ["--dp", "2", "--tp", "2", "--pp", "2", "--zero", "3"], dp=2,
      mb=2, checks=("clip", "recompute"), tier="long"),
    L("dp2pp2_rr_zero3", 4, ["--dp", "2", "--pp", "2", "--pp-split", "round_robin", "--zero",
                             "3"], dp=2, mb=3, tier="long"),
    L("tp3pp2", 6, ["--tp", "3", "--pp", "2", "--pp-schedule", "gpipe"], mb=3, tier="long"),
    L("tp2pp3", 6, ["--tp", "2", "--pp", "3"], mb=4, checks=("recompute",), tier="long"),
    L("dp2pp3", 6, ["--dp", "2", "--pp", "3", "--pp-schedule", "gpipe"], dp=2, mb=2,
      tier="long"),
    L("dp3tp2", 6, ["--dp", "3", "--tp", "2"], dp=3, checks=("clip",), tier="long"),
    L("pp3_gpipe", 3, ["--pp", "3", "--pp-schedule", "gpipe"], mb=2, tier="long"),
    # explicit split: stage 1 from transformer.h.1 (layer 4)
    L("pp2_split4", 2, ["--pp", "2", "--pp-split", "4"], mb=3, tier="long"),
    # round robin over 4 stages: the head (layer 6) on stage 2, the embedding on stage 0
    L("pp4_rr", 4, ["--pp", "4", "--pp-split", "round_robin"], mb=3, checks=("clip",),
      tier="long"),
    L("tp3sp", 3, ["--tp", "3", "--sequence-parallel"], checks=("recompute",), tier="long"),
    L("dp2tp2pp2sp", 8, ["--dp", "2", "--tp", "2", "--pp", "2", "--sequence-parallel"], dp=2,
      mb=3, checks=("clip",), tier="long"),
    L("dp2pp2_rr", 4, ["--dp", "2", "--pp", "2", "--pp-split", "round_robin"], dp=2, mb=3,
      tier="long"),
]

CHECKS = ("sgd", "adamw", "clip", "recompute", "export", "ckpt", "plan")
SCALAR_BYTES = 32  # a rank's part of the scalar exchanges the plan leaves out (it says so)


def write_inputs(tmp):
    """The corpus and the two configs (SGD with momentum, AdamW)."""
    r = random.Random(7)
    words = "the cat sat on a mat dog ran far and then slept home".split()
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write(" ".join(r.choice(words) for _ in range(2500)) + "\n")
    common = (
        "[data]\nkind = text\ntext_files = " + corpus + "\n"
        "[model]\nblock_size = 16\n"
        "layers = transformer.wte: embedding 256 24, transformer.wpe: position, dropout 0.1,\n"
        "    transformer.h: 2 x block 3 p=0.1 attn_p=0.1, transformer.ln_f: layernorm, lm_head\n"
        "[loss]\nkind = cross_entropy\n"
        "[schedule]\nkind = constant\n"
        f"[train]\nmax_steps = {STEPS}\nseed = 3\nthreads = 1\n"
    )
    cfgs = {}
    for kind, optim in (("sgd", "kind = sgd\nlr = 0.05\nmomentum = 0.9\n"),
                        ("adamw", "kind = adamw\nlr = 0.01\n")):
        cfgs[kind] = os.path.join(tmp, kind + ".ini")
        with open(cfgs[kind], "w") as f:
            f.write(common + "[optim]\n" + optim)
    return cfgs


def read_st(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + hlen])
    header.pop("__metadata__", None)
    data = blob[8 + hlen :]
    return {n: (e["dtype"], tuple(e["shape"]), data[e["data_offsets"][0] : e["data_offsets"][1]])
            for n, e in header.items()}


def floats(raw):
    return struct.unpack(f"<{len(raw) // 4}f", raw)


def opt_value(lay, name, default):
    """The value of option `name` in the layout's options, or default."""
    return lay.opts[lay.opts.index(name) + 1] if name in lay.opts else default


def read_metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Driver:
    def __init__(self, args, tmp, cfgs):
        self.args, self.tmp, self.cfgs, self.failed = args, tmp, cfgs, 0

    def fail(self, msg, *cmds):
        print("FAIL " + msg)
        for c in cmds:
            if c:
                print("  command: " + c)
        self.failed = 1

    def train(self, tag, kind, layout, extra=(), batch=None):
        """Runs one training; returns {"cmd", "dir", "out"} or None (a failure said)."""
        d = os.path.join(self.tmp, tag)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        np, opts, dp, mb = (1, [], 1, 1) if layout is None else (
            layout.ranks, layout.opts, layout.dp, layout.mb)
        b = batch if batch is not None else GLOBAL_BATCH // (dp * mb)
        cmd = [self.args.dtrain, "train", self.cfgs[kind], "--no-progress", "--batch", str(b)]
        if mb > 1:
            cmd += ["--micro-batches", str(mb)]
        cmd += opts + ["--save-weights", os.path.join(d, "w.st"), "--metrics",
                       os.path.join(d, "m.jsonl"), "--log-every", "1"] + list(extra)
        if np > 1:
            cmd = [self.args.mpirun, "-np", str(np), "--oversubscribe"] + cmd
        line = " ".join(cmd)
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        except subprocess.TimeoutExpired:
            self.fail(f"{tag}: no exit within 180 s", line)
            return None
        out = p.stdout + p.stderr
        with open(os.path.join(d, "out.txt"), "w") as f:
            f.write(out)
        if p.returncode != 0:
            # The ranks' own errors ("dtrain: rank R: ...", a failed assertion), else the
            # output's end.
            lines = out.strip().splitlines()
            why = [ln for ln in lines if ln.startswith(("dtrain: rank ", "dtrain: assertion"))]
            why = why or lines[-12:]
            self.fail(f"{tag}: exit status {p.returncode}:\n  " + "\n  ".join(why), line)
            return None
        return {"cmd": line, "dir": d, "out": out}

    def weights_close(self, what, ref, got, ref_file="w.st", got_file="w.st", tol=WEIGHTS_TOL):
        """Every tensor of got's file within tol of ref's; returns the largest |d| or None."""
        a = read_st(os.path.join(ref["dir"], ref_file))
        b = read_st(os.path.join(got["dir"], got_file))
        if sorted(a) != sorted(b):
            self.fail(f"{what}: tensors {sorted(b)}, expected one process's {sorted(a)}",
                      ref["cmd"], got["cmd"])
            return None
        worst, bad = 0.0, []
        for name in sorted(a):
            (ta, sa, ra), (tb, sb, rb) = a[name], b[name]
            if (ta, sa) != (tb, sb):
                bad.append(f"{name}: {tb} {list(sb)}, expected {ta} {list(sa)}")
                continue
            x, y = floats(ra), floats(rb)
            i, d = max(((i, abs(u - v)) for i, (u, v) in enumerate(zip(x, y))),
                       key=lambda t: t[1] if not math.isnan(t[1]) else math.inf)
            if not d <= tol:
                bad.append(f"{name}: max|d| = {d:.3g} > {tol:g} at [{i}]: one process "
                           f"{x[i]!r}, layout {y[i]!r}")
            worst = max(worst, d)
        if bad:
            more = f" (and {len(bad) - 1} more tensors: " + \
                ", ".join(b.split(":")[0] for b in bad[1:]) + ")" if len(bad) > 1 else ""
            self.fail(f"{what} {bad[0]}{more}", ref["cmd"], got["cmd"])
        return None if bad else worst

    def steps(self, run):
        recs = [r for r in read_metrics(os.path.join(run["dir"], "m.jsonl"))
                if r.get("event") == "step"]
        if [r["step"] for r in recs] != list(range(1, STEPS + 1)):
            self.fail(f"{run['dir']}: step records {[r['step'] for r in recs]}, expected 1.."
                      f"{STEPS}", run["cmd"])
            return None
        return recs

    # ---- the checks ----

    def check_sgd(self, lay, ref):
        copies = opt_value(lay, "--zero", "0") != "3"  # ZeRO-3 holds each parameter once
        got = self.train(f"sgd-{lay.name}", "sgd", lay,
                         (["--check-replicas"] if copies else []) +
                         ["--checkpoint-dir", os.path.join(self.tmp, f"ck-{lay.name}"),
                          "--trace", self.trace_path(lay)])
        if got is None or ref is None:
            return got
        worst = self.weights_close(f"sgd {lay.name}: weights after {STEPS} steps", ref, got)
        if worst is not None:
            print(f"ok sgd {lay.name}: every tensor within max|d| {worst:.2g} <= {WEIGHTS_TOL:g} "
                  f"of one process after {STEPS} steps")
        if copies:
            self.check_replicas(lay, got)
        return got

    def trace_path(self, lay):
        return os.path.join(self.tmp, f"trace-{lay.name}.json")

    def check_plan(self, lay, got):
        """Each rank's traced bytes per step, group by group, against the plan's rows for its
        stage (dtrain plan --json)."""
        if got is None:
            return
        dp, tp, pp = (int(opt_value(lay, o, "1")) for o in ("--dp", "--tp", "--pp"))
        rows = os.path.join(self.tmp, f"plan-{lay.name}.jsonl")
        skip = {"--pp-schedule"}  # how the stages run, not what they send
        opts = [o for i, o in enumerate(lay.opts)
                if o not in skip and (i == 0 or lay.opts[i - 1] not in skip)]
        cmd = [self.args.dtrain, "plan", self.cfgs["sgd"], "--ranks", str(lay.ranks), "--batch",
               str(GLOBAL_BATCH // (lay.dp * lay.mb)), "--bandwidth", "1", "--latency", "10",
               "--json", rows] + (["--micro-batches", str(lay.mb)] if lay.mb > 1 else []) + opts
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            self.fail(f"plan {lay.name}: exit status {p.returncode}: {p.stdout}{p.stderr}",
                      " ".join(cmd))
            return
        want = collections.defaultdict(float)  # (stage, group) -> bytes per step
        for r in read_metrics(rows):
            if "group" in r:
                want[(r["stage"], r["group"])] += r["bytes"]
        with open(self.trace_path(lay)) as f:
            events = json.load(f)["traceEvents"]
        first, last = 2, STEPS - 1
        size = {"dp": dp, "tp": tp, "pp": pp}
        got_b = collections.defaultdict(float)  # (rank, group) -> bytes over the steps
        for e in events:
            a = e.get("args", {})
            if e.get("cat") != "comm" or not first <= a.get("step", 0) <= last:
                continue
            # A scalar exchange: an all-gather of SCALAR_BYTES from each member (its bytes
            # the whole result), or a collective of fewer.
            if a["bytes"] < SCALAR_BYTES or (e["name"] == "allgather" and
                                             a["bytes"] == SCALAR_BYTES * size.get(a["group"], 2)):
                continue
            got_b[(e["pid"], a["group"])] += a["bytes"]
        # The plan is a stage's tp rank 0's, the largest part where heads split unevenly: it
        # is the largest rank's figure, and no rank's exceeds it.
        bad, groups = [], set()
        for stage in sorted({r // (tp * dp) for r in range(lay.ranks)}):
            ranks = [r for r in range(lay.ranks) if r // (tp * dp) == stage]
            key = stage if pp > 1 else -1
            names = {g for (s, g) in want if s == key} | \
                {g for (r, g) in got_b if r in ranks}
            for g in sorted(names):
                expect = want.get((key, g), 0.0)
                traced = {r: got_b.get((r, g), 0.0) / (last - first + 1) for r in ranks}
                top = max(traced, key=traced.get)
                groups.add(g)
                if abs(traced[top] - expect) > 0.5 or any(v > expect + 0.5
                                                           for v in traced.values()):
                    bad.append(f"stage {stage} group {g!r}: traced bytes per step by rank "
                               + ", ".join(f"{r}: {v:.1f}" for r, v in traced.items())
                               + f"; planned {expect:.0f} (the largest rank's)")
        if bad:
            self.fail(f"plan {lay.name}: " + "; ".join(bad[:6]) +
                      (f" (and {len(bad) - 6} more)" if len(bad) > 6 else ""),
                      " ".join(cmd), got["cmd"])
            return
        print(f"ok plan {lay.name}: every rank's bytes per step equal the plan's in "
              f"{', '.join(sorted(groups)) or 'no group'}")
        if "--sequence-parallel" in lay.opts:
            self.check_position_sums(lay, got, rows, cmd)

    def check_position_sums(self, lay, got, rows, plan_cmd):
        """Under sequence parallelism, the run's report of the sums of the gradients its ranks
        computed on their positions only (the final metrics record, rank 0's: stage 0) equals
        the plan's row for that stage: their count and their bytes per step."""
        key = 0 if int(opt_value(lay, "--pp", "1")) > 1 else -1
        row = [r for r in read_metrics(rows)
               if r.get("stage") == key and "position-shared" in r.get("what", "")]
        figs = [r for r in read_metrics(os.path.join(got["dir"], "m.jsonl"))
                if "tp_grad_sums" in r]
        if len(row) != 1 or not figs:
            self.fail(f"position sums {lay.name}: {len(row)} plan rows of position-shared "
                      f"sums, {len(figs)} metrics records of them", plan_cmd, got["cmd"])
            return
        want = (int(row[0]["what"].split()[3]), row[0]["bytes"])
        have = (figs[-1]["tp_grad_sums"], figs[-1]["tp_grad_sum_bytes"])
        if have != want:
            self.fail(f"position sums {lay.name}: the run reports {have[0]} sums of "
                      f"{have[1]} bytes per step, the plan {want[0]} of {want[1]}", plan_cmd,
                      got["cmd"])
            return
        print(f"ok position sums {lay.name}: {have[0]} a step, {have[1]} bytes, as planned")

    def check_replicas(self, lay, got):
        """The run's --check-replicas line names every kind of copy the layout keeps."""
        lines = [ln for ln in got["out"].splitlines() if ln.startswith("dtrain: replicas")]
        dp, tp, pp = (int(opt_value(lay, o, "1")) for o in ("--dp", "--tp", "--pp"))
        # The head is layer 6 of 7: on the last stage of a contiguous or explicit split, on
        # stage 6 mod pp under round robin; a stage other than the embedding's (0) holds a
        # copy of the tied table.
        head = 6 % pp if opt_value(lay, "--pp-split", "") == "round_robin" else pp - 1
        want = ([f"on its {dp} data-parallel replicas"] if dp > 1 else []) + \
               ([f"on each of the {tp} tensor-parallel ranks"] if tp > 1 else []) + \
               ([f"the tied table on stages 0 and {head}"] if head > 0 else [])
        if not want:
            want = ["no parameter has a second copy"]
        elif lines:
            want.append("every copy bitwise equal")
        if len(lines) != 1 or not all(w in lines[0] for w in want):
            self.fail(f"replicas {lay.name}: expected one line 'dtrain: replicas' saying {want}, "
                      f"got {lines}", got["cmd"])
            return
        print(f"ok replicas {lay.name}: {lines[0][len('dtrain: replicas: '):]}")

    def check_refused(self):
        """--check-replicas under a strategy whose copies differ by design: a usage error
        naming the option and the strategy, before any training."""
        # A regression (localsgd refuses text before it judges the option).
        cfg = os.path.join(self.tmp, "linreg.ini")
        with open(cfg, "w") as f:
            f.write("[data]\nkind = synthetic\n[model]\nlayers = linear 4\n[loss]\nkind = mse\n")
        cmd = [self.args.dtrain, "train", cfg, "--no-progress", "--strategy", "localsgd",
               "--check-replicas"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        want = "--check-replicas has no effect under --strategy localsgd"
        if p.returncode != 2 or want not in p.stderr:
            self.fail(f"refusal: exit status {p.returncode} (expected 2), stderr {p.stderr!r} "
                      f"(expected {want!r})", " ".join(cmd))
            return
        print(f"ok refusal: {p.stderr.strip()}")

    def check_adamw(self, lay, ref):
        got = self.train(f"adamw-{lay.name}", "adamw", lay)
        if got is None or ref is None:
            return
        a, b = self.steps(ref), self.steps(got)
        if a is None or b is None:
            return
        worst = 0.0
        for x, y in zip(a, b):
            d = abs(x["loss"] - y["loss"])
            worst = max(worst, d)
            if not d <= LOSS_TOL:
                self.fail(f"adamw {lay.name} step {x['step']}: loss {y['loss']!r}, one process "
                          f"{x['loss']!r}: |d| = {d:.3g} > {LOSS_TOL:g}", ref["cmd"], got["cmd"])
                return
        ev = [[r.get("test_loss") for r in read_metrics(os.path.join(r_["dir"], "m.jsonl"))
               if r.get("event") == "epoch"] for r_ in (ref, got)]
        if len(ev[0]) != 1 or len(ev[1]) != 1 or not abs(ev[0][0] - ev[1][0]) <= LOSS_TOL:
            self.fail(f"adamw {lay.name}: validation loss {ev[1]}, one process {ev[0]} (within "
                      f"{LOSS_TOL:g})", ref["cmd"], got["cmd"])
            return
        print(f"ok adamw {lay.name}: the loss of each of {STEPS} steps within {worst:.2g} <= "
              f"{LOSS_TOL:g} of one process; validation loss {ev[1][0]:.6f} vs {ev[0][0]:.6f}")

    def clip_norms(self, what, run):
        recs = self.steps(run)
        if recs is None:
            return None
        norms = [r.get("grad_norm") for r in recs]
        if not all(isinstance(n, (int, float)) and n > CLIP_NORM for n in norms):
            self.fail(f"{what}: clipping not active on every step: grad_norm {norms}, "
                      f"clip_norm {CLIP_NORM}", run["cmd"])
            return None
        return norms

    def check_clip(self, lay, ref, ref_sgd):
        clip = ["--set", f"optim.clip_norm={CLIP_NORM}"]
        got = self.train(f"clip-{lay.name}", "sgd", lay, clip)
        if got is None or ref is None:
            return
        a, b = self.clip_norms("clip one process", ref), self.clip_norms(f"clip {lay.name}", got)
        if a is None or b is None:
            return
        for s, (x, y) in enumerate(zip(a, b), 1):
            if not abs(x - y) <= LOSS_TOL * x:
                self.fail(f"clip {lay.name} step {s}: grad_norm {y!r}, one process {x!r} (within "
                          f"{LOSS_TOL:g} relative)", ref["cmd"], got["cmd"])
                return
        worst = self.weights_close(f"clip {lay.name}: weights after {STEPS} steps", ref, got)
        if worst is None:
            return
        # Clipping moves the weights far beyond the tolerance: a wrong factor would show.
        moved = ref_sgd and self.weights_close("clip moves", ref_sgd, ref, tol=math.inf)
        if not (moved and moved > 100 * WEIGHTS_TOL):
            self.fail(f"clip: one process's clipped weights differ from its unclipped ones by "
                      f"{moved}, expected > {100 * WEIGHTS_TOL:g}", ref["cmd"])
            return
        print(f"ok clip {lay.name}: every step clipped (grad_norm {min(b):.3g}..{max(b):.3g} > "
              f"{CLIP_NORM}, as one process's within 1e-4); weights within {worst:.2g} of one "
              f"process (clipping itself moves them by {moved:.2g})")

    def check_recompute(self, lay, got):
        rec = self.train(f"recompute-{lay.name}", "sgd", lay, ["--recompute", "block"])
        if rec is None or got is None:
            return
        with open(os.path.join(got["dir"], "w.st"), "rb") as f1, \
                open(os.path.join(rec["dir"], "w.st"), "rb") as f2:
            same = f1.read() == f2.read()
        if not same:
            worst = self.weights_close(f"recompute {lay.name}", got, rec, tol=math.inf)
            self.fail(f"recompute {lay.name}: --recompute block's weights are not the bytes of "
                      f"the run without it (max|d| {worst})", got["cmd"], rec["cmd"])
            return
        print(f"ok recompute {lay.name}: --recompute block writes the same bytes")

    def export(self, name, run):
        """The hf export of run's last set: {"cmd", "dir"} or None."""
        ck = os.path.join(self.tmp, f"ck-{name}")
        sets = sorted(os.listdir(ck)) if os.path.isdir(ck) else []
        if not sets or sets[-1] != f"step-{STEPS:09d}":
            self.fail(f"export {name}: {ck} holds {sets}, expected step-{STEPS:09d} last")
            return None
        out = os.path.join(self.tmp, f"hf-{name}")
        cmd = [self.args.dtrain, "export", os.path.join(ck, sets[-1]), out, "--format", "hf"]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            self.fail(f"export {name}: exit status {p.returncode}: {p.stdout}{p.stderr}",
                      " ".join(cmd))
            return None
        return {"cmd": " ".join(cmd), "dir": out}

    def check_export(self, lay, ref_export, got):
        mine = self.export(lay.name, got)
        if mine is None or ref_export is None:
            return
        worst = self.weights_close(f"export {lay.name}: model.safetensors", ref_export, mine,
                                   "model.safetensors", "model.safetensors")
        if worst is None:
            return
        with open(os.path.join(ref_export["dir"], "config.json")) as f1, \
                open(os.path.join(mine["dir"], "config.json")) as f2:
            c1, c2 = f1.read(), f2.read()
        if c1 != c2:
            self.fail(f"export {lay.name}: config.json {c2}, one process's {c1}", mine["cmd"])
            return
        a = read_st(os.path.join(mine["dir"], "model.safetensors"))
        b = read_st(os.path.join(got["dir"], "w.st"))
        if a != b:
            diff = sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))
            self.fail(f"export {lay.name}: model.safetensors differs from the run's own "
                      f"--save-weights in {diff}", mine["cmd"], got["cmd"])
            return
        print(f"ok export {lay.name}: model.safetensors within {worst:.2g} of one process's "
              f"export, the same config.json, the bytes of the run's --save-weights")

    def check_ckpt(self, ref):
        """dp 2 + ZeRO-1 for 10 steps; its final set resumed at tp 2 x pp 2 to step 20."""
        half = STEPS // 2
        ck = os.path.join(self.tmp, "ck-zero")
        zero = L("dp2zero1", 2, ["--dp", "2", "--zero", "1"], dp=2)
        first = self.train("ckpt-zero", "sgd", zero, ["--max-steps", str(half),
                                                      "--checkpoint-dir", ck])
        if first is None:
            return
        setdir = os.path.join(ck, f"step-{half:09d}")
        try:
            with open(os.path.join(setdir, "manifest.json")) as f:
                layout = json.loads(f.read())["manifest"]["layout"]
        except (OSError, ValueError, KeyError) as e:
            self.fail(f"ckpt: {setdir}: no manifest's layout: {e}", first["cmd"])
            return
        if layout != {"dp": 2, "tp": 1, "pp": 1, "zero": 1}:
            self.fail(f"ckpt: the set's layout {layout}, expected dp 2 with ZeRO-1", first["cmd"])
            return
        tp2pp2 = L("tp2pp2", 4, ["--tp", "2", "--pp", "2"], mb=2)
        got = self.train("ckpt-resumed", "sgd", tp2pp2, ["--resume", setdir])
        if got is None or ref is None:
            return
        # The set's run ended its one "epoch" of 10 steps: the resumed run trains 11..20.
        trained = [r["step"] for r in read_metrics(os.path.join(got["dir"], "m.jsonl"))
                   if r.get("event") == "step"]
        if trained != list(range(half + 1, STEPS + 1)):
            self.fail(f"ckpt: the run resumed from the set of step {half} trained steps "
                      f"{trained}, expected {half + 1}..{STEPS}", got["cmd"])
            return
        worst = self.weights_close(f"ckpt: dp 2 + ZeRO-1's set of step {half} resumed at tp 2 x "
                                   f"pp 2, weights after step {STEPS}", ref, got)
        if worst is not None:
            print(f"ok ckpt: the set a 10-step run at dp 2 with ZeRO-1 ended with, resumed at "
                  f"tp 2 x pp 2, ends within {worst:.2g} of one process's {STEPS} steps")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtrain", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--tier", choices=("test", "long"), default="test")
    ap.add_argument("--layouts", default="", help="names of LAYOUTS (default: the tier's)")
    ap.add_argument("--checks", default=",".join(CHECKS), help="of " + ",".join(CHECKS))
    args = ap.parse_args()
    names = [n for n in args.layouts.split(",") if n]
    unknown = [n for n in names if n not in {l.name for l in LAYOUTS}]
    checks = set(args.checks.split(","))
    if unknown or not checks <= set(CHECKS):
        sys.exit(f"gpt_layouts.py: unknown layouts {unknown} or checks {checks - set(CHECKS)}")
    layouts = [l for l in LAYOUTS if (l.name in names if names else l.tier == args.tier)]
    tmp = tempfile.mkdtemp(prefix="dtrain-gpt-layouts-")
    try:
        cfgs = write_inputs(tmp)
        d = Driver(args, tmp, cfgs)
        needs_clip = "clip" in checks and any("clip" in l.checks for l in layouts)
        ref = {"sgd": d.train("sgd-one", "sgd", None, ["--checkpoint-dir",
                                                     os.path.join(tmp, "ck-one")])}
        if "adamw" in checks:
            ref["adamw"] = d.train("adamw-one", "adamw", None)
        if needs_clip:
            ref["clip"] = d.train("clip-one", "sgd", None,
                                  ["--set", f"optim.clip_norm={CLIP_NORM}"])
        ref_export = None
        if "export" in checks and any("export" in l.checks for l in layouts) and ref["sgd"]:
            ref_export = d.export("one", ref["sgd"])
        for lay in layouts:
            got = d.check_sgd(lay, ref["sgd"]) if checks & {"sgd", "recompute", "export",
                                                             "plan"} else None
            if "adamw" in checks:
                d.check_adamw(lay, ref["adamw"])
            if "clip" in checks and "clip" in lay.checks:
                d.check_clip(lay, ref["clip"], ref["sgd"])
            if "recompute" in checks and "recompute" in lay.checks:
                d.check_recompute(lay, got)
            if "export" in checks and "export" in lay.checks and got:
                d.check_export(lay, ref_export, got)
            if "plan" in checks and got:
                d.check_plan(lay, got)
        if "sgd" in checks and args.tier == "test":
            d.check_refused()
        if "ckpt" in checks and args.tier == "test":
            d.check_ckpt(ref["sgd"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("FAILED" if d.failed else "every layout equals one process")
    return d.failed


if __name__ == "__main__":
    sys.exit(main())
