#!/usr/bin/python3
"""A/B benchmark: two builds of dtrain measured in alternation on the same machine, for
refactors that must not move a figure ("same speed within noise").

Each round runs, for build A then build B (the order alternates each round), bench_train on
the MLP and the ConvNet at 1 and 2 threads in one process, and under `mpirun -np 2` (one
thread per rank, data-parallel). Prints per case the median samples/s of each build over the
rounds, the B/A ratio of the medians, and the spread of each build (min-max over median),
so that a change is judged against the run-to-run noise measured in the same run; plus the
machine's 2-process/1-process ratio (docs/NOTES.md).

Usage: /usr/bin/python3 bench/ab.py BUILD_A BUILD_B [--rounds N] [--json FILE]
"""
import argparse
import json
import os
import sys

import benchlib as bl

CASES = [  # (model, threads, ranks, steps, warmup)
    ("mlp", 1, 1, 400, 50),
    ("mlp", 2, 1, 400, 50),
    ("convnet", 1, 1, 40, 8),
    ("convnet", 2, 1, 40, 8),
    ("mlp", 1, 2, 400, 50),
    ("convnet", 1, 2, 40, 8),
]


def run(build, model, threads, ranks, steps, warmup):
    cmd = [os.path.join(build, "bench_train"), bl.MODELS[model], "--batch", "64",
           "--threads", str(threads), "--steps", str(steps), "--warmup", str(warmup)]
    if ranks > 1:
        cmd = ["mpirun", "-np", str(ranks), "--oversubscribe"] + cmd
    return bl.launch(cmd, bl.thread_env(threads), 600)["samples_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", help="build directory A (before)")
    ap.add_argument("b", help="build directory B (after)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", help="write every measurement here as JSON lines")
    a = ap.parse_args()
    builds = [os.path.abspath(a.a), os.path.abspath(a.b)]
    bl.init_blas(builds[1])
    ratio = bl.parallel_ratio(os.path.join(builds[1], "sgemm_peak"))
    got = {(c, k): [] for c in range(len(CASES)) for k in range(2)}
    out = open(a.json, "w") if a.json else None
    for r in range(a.rounds):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        for c, case in enumerate(CASES):
            for k in order:
                v = run(builds[k], *case)
                got[(c, k)].append(v)
                if out:
                    out.write(json.dumps({"round": r, "build": "AB"[k], "model": case[0],
                                          "threads": case[1], "ranks": case[2],
                                          "samples_per_s": v}) + "\n")
        bl.log("round %d of %d done" % (r + 1, a.rounds))
    rows = []
    for c, (model, threads, ranks, _, _) in enumerate(CASES):
        ma, mb = bl.median(got[(c, 0)]), bl.median(got[(c, 1)])
        spread = ["%.0f%%" % (100 * (max(got[(c, k)]) - min(got[(c, k)])) / bl.median(got[(c, k)]))
                  for k in range(2)]
        rows.append([model, str(threads), str(ranks), "%.0f" % ma, "%.0f" % mb, "%.3f" % (mb / ma),
                     spread[0], spread[1]])
    print("machine: 2-process/1-process ratio %.2f; %d rounds, A then B alternating" %
          (ratio, a.rounds))
    print(bl.table("samples/s, median over rounds (A: %s, B: %s)" % (a.a, a.b),
                   ["model", "threads", "ranks", "A", "B", "B/A", "A spread", "B spread"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
