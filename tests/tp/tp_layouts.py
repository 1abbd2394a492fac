"""tp_layouts.py --dtrain BIN --mpirun BIN [--cases N] [--seed S] [--layouts L,...]

Randomized tensor-parallel layouts against one process, through the command line and the
files a user gets (docs/TENSOR_PARALLEL.md): seeded random small models, stacks of conv2d,
relu, maxpool2d, flatten and linear with widths that include primes and widths smaller
than tp, trained on Fashion-MNIST with SGD and momentum at tp 2, tp 3 and dp 2 x tp 2.

For each model and layout:
- step 0 (`--epochs 0`): the weights file and the checkpoint's part file are bitwise equal
  to one process's, tensor by tensor (initial values are keyed by the element's index in
  the whole tensor, so any misplaced part shows);
- after 3 steps (1 where the stack max-pools: a tie flips with summation order,
  docs/NOTES.md): every parameter within max|d| <= 1e-5 * max(1, max|x|), and every
  optimizer state tensor of the checkpoint within |d| / |x| <= 1e-4 (L2 norms).

Standard library only. Prints one line per comparison; exits 1 on any failure, with the
tensor, its largest difference and the command lines to reproduce it."""
import argparse
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

PRIMES = [2, 3, 5, 7, 11, 13, 17]
LAYOUTS = {
    "tp2": (2, ["--tp", "2"], 1),
    "tp3": (3, ["--tp", "3"], 1),
    "dp2tp2": (4, ["--dp", "2", "--tp", "2"], 2),
}
BATCH = 12  # global: every layout's dp divides it


def read_st(path):
    """{name: (shape, [floats])} of a safetensors file of F32 tensors."""
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + hlen])
    header.pop("__metadata__", None)
    data = blob[8 + hlen :]
    out = {}
    for name, e in header.items():
        if e["dtype"] != "F32":
            raise SystemExit(f"FAIL {path}: tensor {name} is {e['dtype']}, expected F32")
        b, end = e["data_offsets"]
        raw = data[b:end]
        out[name] = (tuple(e["shape"]), raw)
    return out


def floats(raw):
    return struct.unpack(f"<{len(raw) // 4}f", raw)


def random_model(rng):
    """(layer lines, pools, tp_min_weights) of a random stack for (1, 28, 28) inputs."""
    layers, pools, hw = [], False, 28
    for _ in range(rng.choice([0, 1, 1, 1, 2, 2])):
        k = rng.choice([3, 5])
        if hw - k + 1 < 2:
            break
        channels = rng.choice([1, 2] + PRIMES + [16])
        layers.append(f"conv2d {channels} {k}")
        hw = hw - k + 1
        if rng.random() < 0.6:
            layers.append("relu")
        if rng.random() < 0.4 and hw >= 4:
            layers.append("maxpool2d 2")
            pools, hw = True, hw // 2
    layers.append("flatten")
    for _ in range(rng.choice([0, 1, 1, 2])):
        layers.append(f"linear {rng.choice([1, 2, 3] + PRIMES + [31])}")
        if rng.random() < 0.5:
            layers.append("relu")
    layers.append("linear 10")
    # Mostly everything split; sometimes a threshold that leaves small layers whole.
    min_weights = rng.choice([0, 0, 0, 40, 400])
    return layers, pools, min_weights


def write_config(path, layers):
    with open(path, "w") as f:
        f.write(
            "[data]\nkind = idx\ndir = /usr/share/datasets/fashion-mnist\nnum_classes = 10\n"
            "mean = 0.5\nstd = 0.5\nshuffle = on\n"
            "[model]\nlayers = " + ", ".join(layers) + "\n"
            "[loss]\nkind = cross_entropy\n"
            "[optim]\nkind = sgd\nlr = 0.05\nmomentum = 0.9\n"
            "[train]\nepochs = 1\nseed = 3\nthreads = 1\neval = off\n"
        )


class Runner:
    def __init__(self, args, tmp):
        self.args, self.tmp, self.failed = args, tmp, 0

    def train(self, tag, np, extra, cfg, steps, dp):
        out = os.path.join(self.tmp, tag)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        cmd = [self.args.dtrain, "train", cfg, "--no-progress", "--batch", str(BATCH // dp)]
        cmd += ["--epochs", "0"] if steps == 0 else ["--max-steps", str(steps)]
        cmd += ["--save-weights", os.path.join(out, "w.safetensors")]
        cmd += ["--checkpoint-dir", os.path.join(out, "ckpt")] + extra
        if np > 1:
            cmd = [self.args.mpirun, "-np", str(np), "--oversubscribe"] + cmd
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            print(f"FAIL {tag}: exit status {p.returncode}: {' '.join(cmd)}")
            print("  " + (p.stdout + p.stderr).strip().replace("\n", "\n  ")[-3000:])
            self.failed = 1
            return None
        sets = sorted(os.listdir(os.path.join(out, "ckpt")))
        part = os.path.join(out, "ckpt", sets[-1], "part-00000.safetensors")
        return {"cmd": " ".join(cmd), "w": read_st(os.path.join(out, "w.safetensors")),
                "ckpt": read_st(part)}

    def bad(self, what, ref, got):
        print(f"FAIL {what}\n  one process: {ref['cmd']}\n  layout:      {got['cmd']}")
        self.failed = 1

    def same_names(self, what, a, b):
        if sorted(a) != sorted(b):
            print(f"FAIL {what}: tensors {sorted(a)} vs {sorted(b)}")
            self.failed = 1
            return False
        return True

    def compare_bits(self, what, ref, got):
        before = self.failed
        self.failed = 0
        for kind in ("w", "ckpt"):
            a, b = ref[kind], got[kind]
            if not self.same_names(f"{what} {kind}", a, b):
                return
            for name in sorted(a):
                if a[name] != b[name]:
                    x, y = floats(a[name][1]), floats(b[name][1])
                    i = next((i for i in range(min(len(x), len(y))) if x[i] != y[i]), -1)
                    self.bad(f"{what} {kind} {name}: shapes {a[name][0]} vs {b[name][0]}, first "
                             f"difference at [{i}]: {x[i] if i >= 0 else '-'} vs "
                             f"{y[i] if i >= 0 else '-'}", ref, got)
        if not self.failed:
            print(f"ok {what}: weights and checkpoint bitwise equal to one process")
        self.failed |= before

    def compare_close(self, what, ref, got):
        before = self.failed
        self.failed = 0
        worst_p, worst_s = 0.0, 0.0
        a, b = ref["ckpt"], got["ckpt"]
        if not self.same_names(f"{what} ckpt", a, b):
            return
        for name in sorted(a):
            x, y = floats(a[name][1]), floats(b[name][1])
            if len(x) != len(y):
                self.bad(f"{what} {name}: {len(x)} vs {len(y)} elements", ref, got)
                continue
            if name.startswith("optim."):
                norm = math.sqrt(sum(v * v for v in x))
                diff = math.sqrt(sum((u - v) ** 2 for u, v in zip(x, y)))
                rel = diff / norm if norm > 0 else diff
                worst_s = max(worst_s, rel)
                if not rel <= 1e-4:
                    self.bad(f"{what} {name}: |d|/|x| = {rel:.3g} > 1e-4", ref, got)
            else:
                big = max(1.0, max(abs(v) for v in x))
                d = max(abs(u - v) for u, v in zip(x, y))
                worst_p = max(worst_p, d / big)
                if not d <= 1e-5 * big or any(math.isnan(v) for v in y):
                    self.bad(f"{what} {name}: max|d| = {d:.3g} > {1e-5 * big:.3g}", ref, got)
                # The weights file holds the same parameters as the checkpoint.
                if got["w"].get(name) != b[name]:
                    self.bad(f"{what} {name}: the weights file differs from the checkpoint",
                             ref, got)
        if not self.failed:
            print(f"ok {what}: parameters within {worst_p:.2g} x max(1, max|x|), optimizer "
                  f"state within {worst_s:.2g} relative")
        self.failed |= before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtrain", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--cases", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layouts", default="tp2,tp3,dp2tp2")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dtrain-tp-layouts-")
    run = Runner(args, tmp)
    try:
        for case in range(args.cases):
            rng = random.Random(args.seed * 1000 + case)
            layers, pools, min_weights = random_model(rng)
            steps = 1 if pools else 3
            cfg = os.path.join(tmp, f"case{case}.ini")
            write_config(cfg, layers)
            print(f"case {case}: {', '.join(layers)}; tp_min_weights {min_weights}; "
                  f"{steps} step(s)")
            ref0 = run.train(f"c{case}-one-0", 1, [], cfg, 0, 1)
            refn = run.train(f"c{case}-one-{steps}", 1, [], cfg, steps, 1)
            for name in args.layouts.split(","):
                np, extra, dp = LAYOUTS[name]
                # The threshold applies under --tp alone (one process would refuse it).
                extra = extra + ["--set", f"parallel.tp_min_weights={min_weights}"]
                got0 = run.train(f"c{case}-{name}-0", np, extra, cfg, 0, dp)
                if ref0 and got0:
                    run.compare_bits(f"case {case} {name} step 0", ref0, got0)
                gotn = run.train(f"c{case}-{name}-{steps}", np, extra, cfg, steps, dp)
                if refn and gotn:
                    run.compare_close(f"case {case} {name} step {steps}", refn, gotn)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("FAILED" if run.failed else "all layouts equal one process")
    return run.failed


if __name__ == "__main__":
    sys.exit(main())
