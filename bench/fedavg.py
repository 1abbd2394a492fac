#!/usr/bin/python3
"""Federated-averaging benchmark: dtrain's fedavg strategy beside Flower (flwr from PyPI, its
Message-API FedAvg in its Simulation Runtime, the same model in the newest PyTorch), on the
MLP and Fashion-MNIST, 100 clients, 10 per round, E = 1 and 5 local epochs, IID and
Dirichlet(0.5) partitions: test accuracy after every round and wall time per round, with the
same partitions and the same sampled clients on both sides. Prints a table of accuracy per
round for each (E, partition), a summary, the targets and the machine's 2-process/1-process
parallel ratio; writes the accuracy curves as an SVG and every run as JSON lines.

dtrain: `[mpirun -np N --oversubscribe] BUILD/dtrain train examples/mlp.ini --strategy fedavg
--clients C --clients-per-round K --rounds R --local-epochs E --partition P --set
optim.kind=sgd --lr 0.05 --set schedule.kind=constant --batch 32 --seed S --threads 1 --data
DIR --metrics FILE --no-progress` (mpirun only for --ranks > 1; one BLAS thread per rank).
From its metrics (JSON lines): each "epoch" record's "round", "test_accuracy" (the 10,000
test images, after the round), "epoch_s" (the round's seconds: sampling, the clients' local
training, aggregation; evaluation excluded) and "clients" (the round's sampled client ids);
the "partition" record's "histogram" (clients x classes sample counts).

The client optimizer, the same on both sides: plain SGD (FedAvg's local solver in McMahan et
al. 2017: no momentum, no weight decay, no optimizer state kept between rounds) at a constant
--lr (default 0.05), batches of --batch (32; a client's last batch of an epoch is partial),
E epochs of the client's partition per round, the global model evaluated after every round.
examples/mlp.ini's Adam and cosine schedule are overridden (--set optim.kind=sgd,
schedule.kind=constant), its model, loss (cross-entropy) and pixel scaling kept.

Flower: bench/flower_fedavg.py, run by bench/.venv/bin/python (its docstring says what it
runs). The same partitions, sample for sample: this driver computes every sample's client
with dtrain's own dt_fed_assign (BUILD/libdtrain.so through ctypes, on the training labels,
with dtrain's partition, client count and seed), checks that its class histogram is the
one dtrain's run reported, and hands Flower the list. The same sampling: it is given the
clients dtrain sampled in every round, and its strategy sends each round to exactly those.
The same initial weights: `dtrain train examples/mlp.ini --epochs 0 --seed S --save-weights
INIT` writes them once; dtrain's runs start from them (--init-weights) and Flower loads them
into its PyTorch MLP. Its round time is taken on the server from configure_train to the end
of aggregate_train (evaluation excluded, as dtrain's epoch_s); its ClientApps run --ranks at
a time (Ray actors of one CPU, one torch thread), as dtrain runs --ranks processes of one
thread. The order of the local batches and the dropout masks differ between the two: the
curves are two runs of the same algorithm from the same weights on the same clients' samples,
not the same bits.

Figures. Accuracy per round: each implementation's median over --reps runs (dtrain's runs
are identical, given the seed; one run per configuration is enough for the curves). Wall
time per round: the median over every round of every repetition (the first round's warm-up,
on either side, hardly moves it). "mean |diff|" is the mean over the last min(10, R) rounds
of |dtrain - Flower| in accuracy points: one round's difference carries the noise of one
client sample, the last ten average it over rounds where both curves have flattened. Each
repetition rotates the order of the two implementations (in the first, dtrain runs first:
Flower needs its partition and sampling).

Targets (under the tables, met / NOT met, per (E, partition)): accuracy per round within 1
point of Flower's (mean |diff| over the last 10 rounds <= 1); wall time per round <= 1/5 of
Flower's (the medians). Every run goes to bench/out/fedavg-<time>.jsonl, the curves to
bench/out/fedavg-<time>.svg.

Usage (bench/fedavg.sh calls it): /usr/bin/python3 bench/fedavg.py --build BUILD_DIR
[--quick] [--rounds R] [--clients C] [--clients-per-round K] [--local-epochs 1,5]
[--partitions iid,dirichlet:0.5] [--ranks N] [--lr X] [--reps N] [--no-flower]
"""
import argparse
import array
import ctypes
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from xml.sax.saxutils import escape

import benchlib as bl

CONFIG = "examples/mlp.ini"
DATA = "/usr/share/datasets/fashion-mnist"
TIMEOUT_S = 3 * 3600
# The targets (see the docstring).
ACC_POINTS_MAX = 1.0
LAST_ROUNDS = 10
TIME_RATIO_MAX = 1.0 / 5


def args_parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="build directory with dtrain and sgemm_peak")
    ap.add_argument("--rounds", type=int, default=0, help="rounds per run (default 50; --quick 3)")
    ap.add_argument("--clients", type=int, default=100)
    ap.add_argument("--clients-per-round", type=int, default=10)
    ap.add_argument("--local-epochs", default="1,5", help="E values, comma-separated")
    ap.add_argument("--partitions", default="iid,dirichlet:0.5",
                    help="dtrain --partition values, comma-separated (default %(default)s)")
    ap.add_argument("--ranks", type=int, default=1,
                    help="dtrain ranks (one thread each); Flower runs as many ClientApps at once")
    ap.add_argument("--lr", type=float, default=0.05, help="the clients' SGD learning rate")
    ap.add_argument("--batch", type=int, default=32, help="the clients' local batch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DATA, help="Fashion-MNIST's IDX files")
    ap.add_argument("--reps", type=int, default=1,
                    help="repetitions (the medians of time per round are taken over all)")
    ap.add_argument("--no-flower", action="store_true", help="dtrain only")
    ap.add_argument("--spin", type=float, default=2.0,
                    help="seconds of each parallel-ratio measurement")
    ap.add_argument("--quick", action="store_true",
                    help="3 rounds, one repetition: checks the scripts, measures nothing")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.spin = 1, 0.2
        a.rounds = a.rounds or 3
    a.rounds = a.rounds or 50
    if a.reps < 1 or a.rounds < 1 or a.ranks < 1 or a.batch < 1 or a.lr <= 0:
        ap.error("--reps, --rounds, --ranks, --batch: at least 1; --lr: positive")
    if not 1 <= a.clients_per_round <= a.clients:
        ap.error("--clients-per-round: between 1 and --clients")
    try:
        a.local_epochs = [int(e) for e in a.local_epochs.split(",")]
    except ValueError:
        ap.error("--local-epochs: integers, comma-separated")
    if min(a.local_epochs) < 1:
        ap.error("--local-epochs: at least 1")
    a.partitions = a.partitions.split(",")
    return a


def config_name(cfg):
    return "E=%d, %s" % cfg


def initial_weights(a, build, path):
    """dtrain's initial MLP for the seed, written to `path` (no training step)."""
    cmd = [os.path.join(build, "dtrain"), "train", CONFIG, "--epochs", "0", "--seed",
           str(a.seed), "--threads", "1", "--data", a.data, "--set", "train.eval=off",
           "--save-weights", path, "--no-progress"]
    bl.run_text(cmd, bl.thread_env(1), TIMEOUT_S)
    return path


def client_of(a, build, partition):
    """Every training sample's client as dtrain assigns it: dt_fed_assign from
    BUILD/libdtrain.so on the training labels (IDX file order, as dtrain loads them)."""
    with gzip.open(os.path.join(a.data, "train-labels-idx1-ubyte.gz")) as f:
        labels = array.array("i", list(f.read()[8:]))  # uint8 labels, widened
    lib = ctypes.CDLL(os.path.join(build, "libdtrain.so"))
    part = ctypes.create_string_buffer(256)  # dt_fed_partition, opaque here
    if lib.dt_fed_partition_parse(partition.encode(), part) != 0:
        raise RuntimeError("dt_fed_partition_parse(%r) failed" % partition)
    n = len(labels)
    out = (ctypes.c_int64 * n)()
    counts = (ctypes.c_int64 * a.clients)()
    moved = ctypes.c_int64(0)
    lab = (ctypes.c_int32 * n).from_buffer(labels)
    st = lib.dt_fed_assign(part, lab, ctypes.c_int64(n), ctypes.c_int64(10), ctypes.c_int(a.clients),
                           ctypes.c_uint64(a.seed), out, counts, ctypes.byref(moved))
    if st != 0:
        raise RuntimeError("dt_fed_assign(%s) failed with status %d" % (partition, st))
    return list(out), list(labels)


def check_same_partition(assigned, labels, hist, partition):
    """The histogram of `assigned` must be dtrain's run's, client by client."""
    mine = [[0] * len(hist[0]) for _ in hist]
    for c, y in zip(assigned, labels):
        mine[c][y] += 1
    if mine != hist:
        raise RuntimeError("%s: dt_fed_assign's partition is not the one dtrain's run reported"
                           % partition)


def dtrain_run(a, build, cfg):
    """One `dtrain train --strategy fedavg`; its rounds and partition from --metrics."""
    epochs, partition = cfg
    tmp = tempfile.mkdtemp(prefix="dtrain-fedavg-")
    try:
        metrics = os.path.join(tmp, "metrics.jsonl")
        cmd = [os.path.join(build, "dtrain"), "train", CONFIG, "--strategy", "fedavg",
               "--clients", str(a.clients), "--clients-per-round", str(a.clients_per_round),
               "--rounds", str(a.rounds), "--local-epochs", str(epochs),
               "--partition", partition, "--set", "optim.kind=sgd", "--lr", repr(a.lr),
               "--set", "schedule.kind=constant", "--batch", str(a.batch),
               "--seed", str(a.seed), "--threads", "1", "--data", a.data,
               "--init-weights", a.init_weights, "--metrics", metrics, "--no-progress"]
        if a.ranks > 1:
            cmd = ["mpirun", "-np", str(a.ranks), "--oversubscribe"] + cmd
        _, wall = bl.run_text(cmd, bl.thread_env(1), TIMEOUT_S)
        m = bl.read_metrics(metrics)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    parts = [r for r in m["records"] if r.get("event") == "partition"]
    rounds = sorted((r for r in m["records"] if r.get("event") == "epoch"),
                    key=lambda r: r.get("round", r.get("epoch", 0)))
    if not parts or "histogram" not in parts[-1]:
        raise RuntimeError("%s: metrics have no partition record with a histogram"
                           % " ".join(cmd))
    hist = parts[-1]["histogram"]
    got = [r.get("round") for r in rounds]
    if got != list(range(1, a.rounds + 1)):
        raise RuntimeError("%s: metrics rounds %s, expected 1..%d" % (" ".join(cmd), got,
                                                                        a.rounds))
    for r in rounds:
        cl = r.get("clients")
        if (not isinstance(cl, list) or len(cl) != a.clients_per_round
                or any(not 0 <= c < a.clients for c in cl)):
            raise RuntimeError("%s: round %d's clients %r: expected %d ids in 0..%d"
                               % (" ".join(cmd), r["round"], cl, a.clients_per_round,
                                  a.clients - 1))
    if len(hist) != a.clients:
        raise RuntimeError("%s: partition histogram has %d clients, expected %d"
                           % (" ".join(cmd), len(hist), a.clients))
    return {"impl": "dtrain", "histogram": hist,
            "clients": [r["clients"] for r in rounds],
            "test_accuracy": [r.get("test_accuracy") for r in rounds],
            "round_s": [r.get("epoch_s") for r in rounds],
            "wall_s": wall, "command": " ".join(cmd)}


def flower_run(a, peer, cfg, spec):
    """One bench/flower_fedavg.py run on dtrain's partition and sampling (`spec`)."""
    tmp = tempfile.mkdtemp(prefix="flower-fedavg-")
    try:
        spec_path = os.path.join(tmp, "spec.json")
        out_path = os.path.join(tmp, "result.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        cmd = [peer.python, os.path.join(bl.HERE, "flower_fedavg.py"), "--spec", spec_path,
               "--out", out_path, "--parallel", str(a.ranks), "--data", a.data]
        env = bl.thread_env(1)
        try:
            _, wall = bl.run_text(cmd, env, TIMEOUT_S)
        except RuntimeError as e:
            failed = e
        else:
            failed = None
        # Its own account of a failure (one line) where it wrote one, else the exit and the
        # end of its stderr.
        r = {}
        if os.path.exists(out_path):
            with open(out_path) as f:
                r = json.load(f)
        if r.get("error"):
            raise RuntimeError("flower_fedavg.py: %s" % r["error"])
        if failed is not None:
            raise failed
        if not r:
            raise RuntimeError("%s: wrote no result" % " ".join(cmd))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rounds = r.pop("rounds")
    return dict(r, impl="flower", clients=[x["clients"] for x in rounds],
                test_accuracy=[x["test_accuracy"] for x in rounds],
                round_s=[x["round_s"] for x in rounds],
                eval_s=[x["eval_s"] for x in rounds], wall_s=wall, command=" ".join(cmd))


def spec_of(a, build, cfg, d):
    assigned, labels = client_of(a, build, cfg[1])
    check_same_partition(assigned, labels, d["histogram"], cfg[1])
    return {"histogram": d["histogram"], "client_of": assigned, "rounds": d["clients"],
            "local_epochs": cfg[0], "lr": a.lr, "batch": a.batch, "seed": a.seed,
            "data": a.data, "partition": cfg[1], "init_weights": a.init_weights}


class Summary:
    """One (E, partition): the per-round medians of both and the figures derived from them."""

    def __init__(self, a, d_runs, f_runs):
        def per_round(runs):
            if not runs:
                return [None] * a.rounds
            return [bl.median([r["test_accuracy"][t] for r in runs]) for t in range(a.rounds)]

        self.d_acc, self.f_acc = per_round(d_runs), per_round(f_runs)
        self.diff = [None if d is None or f is None else 100 * (d - f)
                     for d, f in zip(self.d_acc, self.f_acc)]
        both = [x for x in self.diff if x is not None]
        self.mean_diff = sum(both) / len(both) if both else None
        self.last_n = min(LAST_ROUNDS, a.rounds)
        tail = [x for x in self.diff[-self.last_n:] if x is not None]
        self.mean_abs_tail = (sum(abs(x) for x in tail) / len(tail)
                              if len(tail) == self.last_n else None)
        self.d_s = bl.median([s for r in d_runs for s in r["round_s"]])
        self.f_s = bl.median([s for r in f_runs for s in r["round_s"]])
        self.ratio = self.d_s / self.f_s if self.d_s is not None and self.f_s else None
        self.d_final, self.f_final = self.d_acc[-1], self.f_acc[-1]


def pct(v):
    return bl.fmt(None if v is None else 100 * v, ".2f")


def mark(ok):
    return "met" if ok else "NOT met"


# --- the SVG: one panel per (E, partition), test accuracy against rounds, both curves ---

COLOURS = {"dtrain": "#1f77b4", "flower": "#d62728"}


def nice_step(span, ticks=5):
    raw = span / ticks
    for m in (1, 2, 2.5, 5, 10, 20, 25, 50, 100):
        if m >= raw:
            return m
    return raw


def svg_panel(x0, y0, w, h, title, subtitle, curves, rounds):
    """SVG elements of one panel at (x0, y0): axes, ticks, grid and one polyline per curve
    (curves: [(key, label, [accuracy or None per round])], accuracy as a fraction)."""
    ml, mr, mt, mb = 48, 12, 38, 34
    pw, ph = w - ml - mr, h - mt - mb
    vals = [100 * v for _, _, ys in curves for v in ys if v is not None]
    lo, hi = (min(vals), max(vals)) if vals else (0.0, 100.0)
    step = nice_step(max(hi - lo, 1.0))
    lo, hi = step * int(lo // step), step * (int(hi // step) + 1)
    hi = min(hi, 100.0) if hi > lo + step else hi
    xmax = max(rounds, 2)

    def px(r):
        return x0 + ml + pw * (r - 1) / (xmax - 1)

    def py(v):
        return y0 + mt + ph * (1 - (v - lo) / (hi - lo))

    out = ['<text x="%.1f" y="%.1f" class="t">%s</text>' % (x0 + ml, y0 + 16, escape(title)),
           '<text x="%.1f" y="%.1f" class="s">%s</text>' % (x0 + ml, y0 + 30,
                                                            escape(subtitle))]
    v = lo
    while v <= hi + 1e-9:
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="g"/>'
                   % (x0 + ml, py(v), x0 + ml + pw, py(v)))
        out.append('<text x="%.1f" y="%.1f" class="yl">%g</text>' % (x0 + ml - 4, py(v) + 4, v))
        v += step
    xs = nice_step(xmax - 1, 5)
    xs = max(1, int(round(xs)))
    r = 1
    while r <= xmax:
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="a"/>'
                   % (px(r), y0 + mt + ph, px(r), y0 + mt + ph + 4))
        out.append('<text x="%.1f" y="%.1f" class="xl">%d</text>' % (px(r), y0 + mt + ph + 16, r))
        r = xs if r == 1 and xs > 1 else r + xs
    out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="f"/>'
               % (x0 + ml, y0 + mt, pw, ph))
    out.append('<text x="%.1f" y="%.1f" class="xl">round</text>'
               % (x0 + ml + pw / 2, y0 + h - 4))
    out.append('<text transform="translate(%.1f %.1f) rotate(-90)" class="xl">test accuracy %%'
               '</text>' % (x0 + 12, y0 + mt + ph / 2))
    for key, label, ys in curves:
        pts = ["%.1f,%.1f" % (px(t + 1), py(100 * y)) for t, y in enumerate(ys) if y is not None]
        if len(pts) == 1:
            x, y = pts[0].split(",")
            out.append('<circle cx="%s" cy="%s" r="2.5" fill="%s"/>' % (x, y, COLOURS[key]))
        elif pts:
            out.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"/>'
                       % (" ".join(pts), COLOURS[key]))
    return out


def write_svg(path, title, panels, labels, rounds):
    """panels: [(title, subtitle, {"dtrain": [...], "flower": [...]})] laid out two a row."""
    w, h = 460, 300
    cols = min(2, len(panels)) or 1
    rows = (len(panels) + cols - 1) // cols
    width, height = cols * w, rows * h + 54
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif">' % (width, height, width, height),
           '<style>.t{font-size:14px;font-weight:bold}.s{font-size:11px;fill:#444}'
           '.yl{font-size:10px;text-anchor:end}.xl{font-size:10px;text-anchor:middle}'
           '.g{stroke:#ddd;stroke-width:1}.a{stroke:#000}.f{fill:none;stroke:#000}'
           '.l{font-size:12px}</style>',
           '<rect width="100%" height="100%" fill="#fff"/>',
           '<text x="12" y="20" class="t">%s</text>' % escape(title)]
    lx = 12
    for key in ("dtrain", "flower"):
        out.append('<line x1="%d" y1="38" x2="%d" y2="38" stroke="%s" stroke-width="3"/>'
                   % (lx, lx + 24, COLOURS[key]))
        out.append('<text x="%d" y="42" class="l">%s</text>' % (lx + 30, escape(labels[key])))
        lx += 40 + 7 * len(labels[key])
    for i, (pt, sub, curves) in enumerate(panels):
        x0, y0 = (i % cols) * w, 54 + (i // cols) * h
        out += svg_panel(x0, y0, w, h, pt, sub,
                         [(k, labels[k], curves[k]) for k in ("dtrain", "flower")
                          if curves.get(k)], rounds)
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    started = time.monotonic()
    a = args_parse()
    build, sgemm_peak = bl.build_tools(a.build, "fedavg.py")
    configs = [(e, p) for e in a.local_epochs for p in a.partitions]
    rec = bl.Recorder("fedavg")
    flower = (bl.Peer("flower", "Flower", missing="not run (--no-flower)") if a.no_flower
              else bl.flower_peer())
    rec.write({"event": "machine", "openblas_coretype": bl.init_blas(build), "quick": a.quick,
               "ranks": a.ranks, "rounds": a.rounds, "clients": a.clients,
               "clients_per_round": a.clients_per_round, "local_epochs": a.local_epochs,
               "partitions": a.partitions, "lr": a.lr, "batch": a.batch, "seed": a.seed,
               "reps": a.reps, "flower": flower.label, "flower_missing": flower.missing})
    bl.log("peer: dtrain")
    bl.log("peer: %s%s" % (flower.label, " (%s)" % flower.missing if flower.missing else ""))

    weights_dir = tempfile.mkdtemp(prefix="dtrain-fedavg-init-")
    a.init_weights = initial_weights(a, build, os.path.join(weights_dir, "init.safetensors"))
    bl.log("parallel ratio (before)...")
    ratio_before = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "before", "ratio": ratio_before})
    runs = {(impl, cfg): [] for impl in ("dtrain", "flower") for cfg in configs}
    specs, errors, flower_info = {}, {}, {}
    for rep in range(a.reps):
        for cfg in configs:
            order = ["dtrain", "flower"] if rep % 2 == 0 or cfg not in specs else \
                    ["flower", "dtrain"]
            for impl in order:
                if impl == "flower" and flower.missing:
                    continue
                if impl == "flower" and cfg not in specs:
                    errors[(impl, cfg)] = "no dtrain run to take the partition and sampling from"
                    continue
                bl.log("rep %d/%d  %-20s %s" % (rep + 1, a.reps, config_name(cfg),
                                                "dtrain" if impl == "dtrain" else flower.label))
                try:
                    r = (dtrain_run(a, build, cfg) if impl == "dtrain"
                         else flower_run(a, flower, cfg, specs[cfg]))
                except RuntimeError as e:
                    bl.log("FAILED: %s" % e)
                    errors[(impl, cfg)] = str(e)
                    rec.write({"event": "failed", "impl": impl, "local_epochs": cfg[0],
                               "partition": cfg[1], "rep": rep, "error": str(e)})
                    continue
                if impl == "dtrain":
                    spec = spec_of(a, build, cfg, r)
                    if cfg in specs and specs[cfg]["rounds"] != spec["rounds"]:
                        bl.log("note: dtrain sampled other clients in repetition %d" % (rep + 1))
                    specs.setdefault(cfg, spec)
                else:
                    flower_info = {k: r.get(k) for k in ("flwr_version", "torch_version",
                                                         "ray_version", "api")}
                rec.write(dict(r, event="run", local_epochs=cfg[0], partition=cfg[1], rep=rep))
                runs[(impl, cfg)].append(r)
    bl.log("parallel ratio (after)...")
    ratio_after = bl.parallel_ratio(sgemm_peak, a.spin)
    rec.write({"event": "parallel_ratio", "when": "after", "ratio": ratio_after})

    quick = " (--quick: NOT a measurement)" if a.quick else ""
    f_label = flower.label
    out = ["dtrain federated-averaging benchmark%s: %s, %d clients, %d per round, %d rounds, "
           "plain SGD lr %g, local batch %d, %d rank(s) x 1 thread; median of %d run(s)"
           % (quick, CONFIG, a.clients, a.clients_per_round, a.rounds, a.lr, a.batch,
              a.ranks, a.reps),
           "peer: %s%s" % (f_label, " -- %s" % flower.missing if flower.missing else
                           ", %s" % flower_info["api"] if flower_info.get("api") else ""),
           "Flower's clients: dtrain's partition sample for sample (dt_fed_assign), dtrain's "
           "sampled clients in every round, dtrain's initial weights" + bl.coretype_note(),
           ""]
    summaries = {}
    for cfg in configs:
        s = Summary(a, runs[("dtrain", cfg)], runs[("flower", cfg)])
        summaries[cfg] = s
        miss = flower.missing or ("failed" if ("flower", cfg) in errors else "-")
        dmiss = "failed" if ("dtrain", cfg) in errors else "-"
        rows = []
        for t in range(a.rounds):
            rows.append([str(t + 1), pct(s.d_acc[t]) if s.d_acc[t] is not None else dmiss,
                         pct(s.f_acc[t]) if s.f_acc[t] is not None else miss,
                         bl.fmt(s.diff[t], "+.2f")])
        out.append(bl.table("%s: test accuracy (%%) after each round" % config_name(cfg),
                            ["round", "dtrain", "Flower", "diff (pts)"], rows))
        rec.write({"event": "summary", "local_epochs": cfg[0], "partition": cfg[1],
                   "dtrain_accuracy": s.d_acc, "flower_accuracy": s.f_acc,
                   "diff_points": s.diff, "mean_diff_points": s.mean_diff,
                   "mean_abs_diff_last_points": s.mean_abs_tail, "last_rounds": s.last_n,
                   "dtrain_round_s": s.d_s, "flower_round_s": s.f_s, "time_ratio": s.ratio,
                   "dtrain_runs": len(runs[("dtrain", cfg)]),
                   "flower_runs": len(runs[("flower", cfg)])})
    head = ["E", "partition", "dtrain final %", "Flower final %", "mean diff (pts)",
            "mean |diff| last %d" % min(LAST_ROUNDS, a.rounds), "dtrain s/round",
            "Flower s/round", "dtrain/Flower"]
    rows = []
    for cfg in configs:
        s = summaries[cfg]
        rows.append([str(cfg[0]), cfg[1], pct(s.d_final), pct(s.f_final),
                     bl.fmt(s.mean_diff, "+.2f"), bl.fmt(s.mean_abs_tail, ".2f"),
                     bl.fmt(s.d_s, ".3g"), bl.fmt(s.f_s, ".3g"), bl.fmt(s.ratio, ".3f")])
    out.append(bl.table("Summary: final test accuracy, accuracy difference (dtrain - Flower), "
                        "median wall time per round (training: sampling, local epochs, "
                        "aggregation; evaluation excluded)", head, rows))

    out.append("Targets%s:" % quick)
    for cfg in configs:
        s = summaries[cfg]
        what = ("  %s: accuracy per round within %g point of Flower's (mean |diff| over the "
                "last %d rounds" % (config_name(cfg), ACC_POINTS_MAX, s.last_n))
        if s.mean_abs_tail is None:
            out.append(what + "): not measured")
        else:
            out.append(what + ": %.2f): %s" % (s.mean_abs_tail,
                                               mark(s.mean_abs_tail <= ACC_POINTS_MAX)))
        what = "  %s: wall time per round <= 1/%d of Flower's" % (config_name(cfg),
                                                                    round(1 / TIME_RATIO_MAX))
        if s.ratio is None:
            out.append(what + ": not measured")
        else:
            out.append(what + " (median %.3g s against %.3g s: 1/%.1f): %s"
                       % (s.d_s, s.f_s, 1 / s.ratio if s.ratio else float("inf"),
                          mark(s.ratio <= TIME_RATIO_MAX)))
        rec.write({"event": "target", "local_epochs": cfg[0], "partition": cfg[1],
                   "accuracy_met": (None if s.mean_abs_tail is None
                                    else s.mean_abs_tail <= ACC_POINTS_MAX),
                   "time_met": None if s.ratio is None else s.ratio <= TIME_RATIO_MAX})
    flag = min(ratio_before, ratio_after) < bl.PARALLEL_RATIO_MIN
    out.append("machine parallel ratio (same loop, 2 processes / 1): before %.2f, after %.2f%s"
               % (ratio_before, ratio_after,
                  "  <-- below %.1f: times are suspect; rerun on a quiet machine"
                  % bl.PARALLEL_RATIO_MIN if flag else ""))
    for (impl, cfg), e in sorted(errors.items()):
        out.append("failed: %s %s: %s" % (impl, config_name(cfg), bl.failure_reason(e)
                                          if "\n" in e else e))

    svg = rec.path[:-len(".jsonl")] + ".svg"
    labels = {"dtrain": "dtrain", "flower": f_label}
    panels = []
    for cfg in configs:
        s = summaries[cfg]
        sub = "median s/round: dtrain %s, Flower %s" % (bl.fmt(s.d_s, ".3g"),
                                                         bl.fmt(s.f_s, ".3g"))
        panels.append((config_name(cfg), sub, {"dtrain": s.d_acc, "flower": s.f_acc}))
    write_svg(svg, "FedAvg, MLP on Fashion-MNIST: %d clients, %d per round%s"
              % (a.clients, a.clients_per_round, quick), panels, labels, a.rounds)
    out.append("")
    out.append("took %.1f min" % ((time.monotonic() - started) / 60))
    out.append("curves (SVG): %s" % os.path.relpath(svg, bl.ROOT))
    out.append("JSON lines: %s" % os.path.relpath(rec.path, bl.ROOT))
    rec.close()
    shutil.rmtree(weights_dir, ignore_errors=True)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
