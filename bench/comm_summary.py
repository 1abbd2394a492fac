#!/usr/bin/python3
"""Summarises `dtrain bench-comm --json` files (one per world size) as the tables of
docs/BENCHMARKS.md: all-reduce bus bandwidth of every algorithm by size beside the memory
bound, the other collectives' ring against MPI, and the project's targets, each met or not.

Usage: bench/comm_summary.py RUN2.jsonl [RUN4.jsonl ...]   (bench/comm.sh makes them)
"""
import json
import sys

SIZES = [1 << 10, 1 << 16, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
ALGOS = ["bare-mpi", "mpi", "ring", "det", "auto"]


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    if not rows:
        sys.exit("comm_summary: %s: no rows" % path)
    return rows


def human(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)


def table(rows, op, field, fmt):
    by = {(r["size"], r["algorithm"]): r for r in rows if r["operation"] == op}
    algos = [a for a in ALGOS if any(k[1] == a for k in by)]
    out = ["| size | " + " | ".join(algos) + " |", "|---" * (len(algos) + 1) + "|"]
    for s in SIZES:
        if any((s, a) in by for a in algos):
            out.append("| %s | " % human(s) + " | ".join(
                fmt % by[(s, a)][field] if (s, a) in by else "-" for a in algos) + " |")
    return "\n".join(out), by


def verdict(ok):
    return "met" if ok else "NOT met"


def summary(path):
    rows = load(path)
    n = rows[0]["ranks"]
    wrong = sum(r["wrong"] for r in rows)
    ratios = sorted({r["parallel_ratio"] for r in rows})
    bound = max(r["mem_bound_GBps"] for r in rows)
    print("## %d ranks (%s)\n" % (n, path))
    print("parallel ratio %.2f-%.2f; memory bound %.2f GB/s per rank; %d wrong elements in %d "
          "rows\n" % (ratios[0], ratios[-1], bound, wrong, len(rows)))
    t, ar = table(rows, "allreduce", "busbw_GBps", "%.2f")
    print("all-reduce bus bandwidth, GB/s\n\n" + t + "\n")
    t, _ = table(rows, "allreduce", "time_us", "%.1f")
    print("all-reduce time, us\n\n" + t + "\n")
    for op in ("reduce_scatter", "allgather", "bcast", "reduce"):
        t, _ = table(rows, op, "busbw_GBps", "%.2f")
        print("%s bus bandwidth, GB/s\n\n%s\n" % (op, t))

    def bw(s, a):
        r = ar.get((s, a))
        return r["busbw_GBps"] if r else None

    checks = []
    big = [s for s in SIZES if s >= 4 << 20 and bw(s, "ring") and bw(s, "bare-mpi")]
    worst = min(big, key=lambda s: bw(s, "ring") / bw(s, "bare-mpi"), default=None)
    if worst:
        r = bw(worst, "ring") / bw(worst, "bare-mpi")
        checks.append("ring >= MPI_Allreduce from 4 MiB: worst %.2fx at %s: %s"
                      % (r, human(worst), verdict(r >= 1.0)))
    if n == 2 and bw(64 << 20, "ring"):
        r = bw(64 << 20, "ring") / bw(64 << 20, "bare-mpi")
        checks.append("ring >= 1.5x MPI_Allreduce at 64 MiB: %.2fx: %s" % (r, verdict(r >= 1.5)))
    det = [s for s in SIZES if s >= 4 << 20 and bw(s, "det") and bw(s, "ring")]
    if det:
        worst = min(det, key=lambda s: bw(s, "det") / bw(s, "ring"))
        r = bw(worst, "det") / bw(worst, "ring")
        checks.append("det within 20%% of ring from 4 MiB: worst %.2fx at %s: %s"
                      % (r, human(worst), verdict(r >= 0.8)))
    a, b = ar.get((1 << 10, "auto")), ar.get((1 << 10, "bare-mpi"))
    if a and b:
        r = a["time_us"] / b["time_us"]
        checks.append("auto (watchdog on) at 1 KiB within 1.5x of bare MPI_Allreduce: %.2f vs "
                      "%.2f us, %.2fx: %s" % (a["time_us"], b["time_us"], r, verdict(r <= 1.5)))
    print("targets:\n" + "\n".join("- " + c for c in checks) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for p in sys.argv[1:]:
        summary(p)
