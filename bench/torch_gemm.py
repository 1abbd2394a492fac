#!/usr/bin/env python3
"""Each side's GEMM on a model's own products: OpenBLAS's sgemm as dtrain calls it
(bench/sgemm_peak.c) beside PyTorch's matrix product on the same shapes, layouts and
accumulation, in one run, so that a reader sees how much of a lead (or a deficit) is the
kernel. Issue 37 asks it of the GPT ("where PyTorch's GEMMs beat OpenBLAS's on these
shapes, evaluate oneDNN and libxsmm"); issue 39 of every comparison.

For each product of one training step (bench/model_gemms.h's list): sgemm_peak's median
microseconds per call, and PyTorch's (the median of 7 timed runs of at least --min-time/7
seconds each, after a warm-up, `torch.set_num_threads(N)`): C = op(A) op(B) into a
preallocated C (`torch.mm(..., out=C)`), or C += op(A) op(B) (`C.addmm_`) where dtrain
accumulates (sgemm_peak's "accumulate": the weight gradients), with a transposed operand
passed as the transpose view of a row-major tensor, as dtrain's layout has it. Then the
step's totals: the products' FLOPs over the sum of their times on each side. Prints a table;
`torch.__config__.show()`'s BLAS line says which library PyTorch calls. With --json, JSON
lines instead: one per product ("gemm", m, n, k, calls, "openblas_us", "torch_us") and a
last one ("gemm": "model": "flop_per_step", "openblas_s_per_step", "torch_s_per_step",
"openblas_gflops", "torch_gflops", "torch", "blas_info"), which bench/run.py's GEMM table
reads for any config: the GPT's, examples/mlp.ini, examples/convnet.ini.

Usage: python bench/torch_gemm.py --build BUILD CONFIG --batch N [--threads N] [--json]
(the Python whose PyTorch is measured: bench/.venv/bin/python, /usr/bin/python3)
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time


def threads_wanted(argv):
    """--threads N from the command line (1 if absent or malformed: argparse says why)."""
    for i, arg in enumerate(argv):
        val = arg.split("=", 1)[1] if arg.startswith("--threads=") else \
            (argv[i + 1] if arg == "--threads" and i + 1 < len(argv) else None)
        if val is not None:
            return val if val.isdigit() else "1"
    return "1"


# Every threading library at --threads before torch loads them: torch.set_num_threads does
# not reach the OpenBLAS that Debian's PyTorch calls, which would otherwise run one thread a
# core (measured: Debian's 1.13 at "1 thread" twice OpenBLAS's one-thread rate on 2 cores).
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = threads_wanted(sys.argv[1:])

import torch  # noqa: E402


def time_torch(g, threads, min_time):
    torch.set_num_threads(threads)
    m, n, k = g["m"], g["n"], g["k"]
    gen = torch.Generator().manual_seed(1)
    a = torch.rand((k, m) if g["trans_a"] else (m, k), generator=gen) - 0.5
    b = torch.rand((n, k) if g["trans_b"] else (k, n), generator=gen) - 0.5
    a = a.t() if g["trans_a"] else a
    b = b.t() if g["trans_b"] else b
    c = torch.zeros(m, n)
    acc = g["accumulate"] if "accumulate" in g else "weight gradient" in g["gemm"]

    def call():
        if acc:
            c.addmm_(a, b)
        else:
            torch.mm(a, b, out=c)

    t0 = time.perf_counter()
    calls = 0
    while time.perf_counter() - t0 < 0.02:
        call()
        calls += 1
    per_run = max(1, int(calls * (min_time / 7) / (time.perf_counter() - t0)))
    runs = []
    for _ in range(7):
        s = time.perf_counter()
        for _ in range(per_run):
            call()
        runs.append((time.perf_counter() - s) / per_run)
    return statistics.median(runs) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("config")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--json", action="store_true", help="JSON lines instead of the table")
    a = ap.parse_args()
    out = subprocess.run([a.build + "/sgemm_peak", a.config, "--batch", str(a.batch), "--threads",
                          str(a.threads), "--min-time", str(a.min_time)],
                         capture_output=True, text=True, check=True).stdout
    gemms = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    gemms = [g for g in gemms if g.get("gemm") != "model" and "m" in g]
    info = re.findall(r"BLAS_INFO=(\w+)", torch.__config__.show())
    blas = ["BLAS_INFO=" + b for b in sorted(set(info))] or ["BLAS ?"]
    if not a.json:
        print("PyTorch %s, %s; %d thread(s); %s batch %d" % (torch.__version__, "; ".join(blas),
                                                            a.threads, a.config, a.batch))
        print("%-38s %5s %5s %5s  %12s %12s  %6s" % ("product", "m", "n", "k", "OpenBLAS GF/s",
                                                   "PyTorch GF/s", "ratio"))
    flops = t_ob = t_pt = 0.0
    for g in gemms:
        us = time_torch(g, a.threads, a.min_time)
        f = 2.0 * g["m"] * g["n"] * g["k"]
        flops += f * g["calls"]
        t_ob += g["us_per_call"] * g["calls"]
        t_pt += us * g["calls"]
        if a.json:
            print(json.dumps({"gemm": g["gemm"], "m": g["m"], "n": g["n"], "k": g["k"],
                              "calls": g["calls"], "openblas_us": g["us_per_call"],
                              "torch_us": us}))
            continue
        print("%-38s %5d %5d %5d  %12.1f %12.1f  %6.2f" % (g["gemm"][:38], g["m"], g["n"], g["k"],
                                                         f / g["us_per_call"] / 1e3,
                                                         f / us / 1e3, us / g["us_per_call"]))
    if a.json:
        print(json.dumps({"gemm": "model", "config": a.config, "batch": a.batch,
                          "threads": a.threads, "torch": torch.__version__,
                          "blas_info": info[0] if info else "?", "flop_per_step": flops,
                          "openblas_s_per_step": t_ob * 1e-6, "torch_s_per_step": t_pt * 1e-6,
                          "openblas_gflops": flops / t_ob / 1e3,
                          "torch_gflops": flops / t_pt / 1e3}))
        return 0
    print("step's products: OpenBLAS %.1f GFLOP/s, PyTorch %.1f GFLOP/s (PyTorch's time / "
          "OpenBLAS's: %.2f)" % (flops / t_ob / 1e3, flops / t_pt / 1e3, t_pt / t_ob))
    return 0


if __name__ == "__main__":
    sys.exit(main())
