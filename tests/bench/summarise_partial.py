#!/usr/bin/env python3
"""summarise_partial.py — bench/summarise.py reads a benchmark run that stopped before its
summaries (a lent machine's time limit cuts the run; docs/BENCHMARKS.md "The GPT at 4-16
ranks"): ddp's and gpt_layouts' cells come from the train records, each with its median,
range and number of runs, and --merge reads two such runs of one benchmark as one. Also
bench/tp_overlap_netns.sh's summaries (each column in its place) and the grid layouts
bench/gpt_layouts.py builds from a key (dp4, tp4sp, dp2tp2pp2). Synthetic JSON
lines, no benchmark is run; standard library only.

Usage: summarise_partial.py SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

SRC = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DT_SOURCE_DIR", ".")
BENCH = os.path.join(SRC, "bench")
failures = []


def check(what, cond, expected, actual):
    if not cond:
        failures.append("FAIL: %s: expected %s, got %s" % (what, expected, actual))


def write(path, recs):
    with open(path, "w") as f:
        for r in recs:
            f.write(json.dumps(r) + "\n")


def summarise(*args):
    r = subprocess.run([sys.executable, os.path.join(BENCH, "summarise.py")] + list(args),
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        failures.append("FAIL: summarise.py %s: exit %d\n%s" % (" ".join(args), r.returncode,
                                                                 r.stderr))
    return r.stdout


def row_of(out, first, second=None):
    """The table row whose first cells are `first` (and `second`), as its text."""
    for line in out.splitlines():
        cells = line.split()
        if cells[:1] == [first] and (second is None or second in line):
            return line
    return None


with tempfile.TemporaryDirectory(prefix="dtrain-summarise-") as d:
    # ddp: dtrain's records name the config (bench_train's line), PyTorch's the model.
    a = os.path.join(d, "ddp-20260101-000000.jsonl")
    b = os.path.join(d, "ddp-20260101-000100.jsonl")
    cfg = "examples/convnet.ini"
    write(a, [{"event": "parallel_ratio", "when": "before", "ratio": 1.9}] +
          [{"event": "train", "peer": "dtrain", "variant": "dtrain", "config": cfg,
            "world_size": 1, "samples_per_s": v} for v in (100.0, 120.0, 110.0)] +
          [{"event": "train", "peer": "dtrain", "variant": "dtrain", "config": cfg,
            "world_size": 4, "samples_per_s": v} for v in (400.0, 420.0)] +
          [{"event": "train", "peer": "torch_extra", "variant": "torch_extra/fused",
            "model": "convnet", "world_size": 1, "samples_per_s": 80.0}])
    write(b, [{"event": "train", "peer": "dtrain", "variant": "dtrain", "config": cfg,
               "world_size": 4, "samples_per_s": 430.0}])
    out = summarise(a)
    row = row_of(out, "convnet", "dtrain")
    check("ddp partial, dtrain's row", row is not None and "110 (100-120), 3 runs" in row
          and "410 (400-420), 2 runs" in row and "0.93" in row,
          "110 (100-120), 3 runs; 410 (400-420), 2 runs; efficiency 410 / (4 x 110) = 0.93",
          row or out)
    check("ddp partial, not refused", "no summary records" not in out, "the cells",
          out.strip()[-200:])
    row = row_of(out, "convnet", "torch_extra/fused")
    check("ddp partial, a cell with no runs", row is not None and "80 (80-80), 1 run" in row
          and " - " in row, "80 (80-80), 1 run and '-' at 4 ranks", row or out)
    out = summarise("--merge", a, b)
    row = row_of(out, "convnet", "dtrain")
    check("ddp --merge", row is not None and "420 (400-430), 3 runs" in row and "0.95" in row,
          "420 (400-430), 3 runs, efficiency 0.95", row or out)
    # One complete file (summaries) beside a cut one: every file's runs count, read from the
    # train records (the complete file's summaries know nothing of the other's runs).
    e = os.path.join(d, "ddp-20260101-000200.jsonl")
    write(e, [{"event": "train", "peer": "dtrain", "variant": "dtrain", "config": cfg,
               "world_size": 4, "samples_per_s": 440.0},
              {"event": "summary", "model": "convnet", "peer": "dtrain", "ranks": 4,
               "samples_per_s_1": 999.0, "samples_per_s_n": 440.0, "efficiency": 0.11,
               "reps": 1}])
    out = summarise("--merge", a, e)
    row = row_of(out, "convnet", "dtrain")
    check("ddp --merge of a complete and a cut run", row is not None and
          "420 (400-440), 3 runs" in row and "110 (100-120), 3 runs" in row,
          "420 (400-440), 3 runs at 4 ranks beside 110 (100-120), 3 runs", row or out)
    # ddp.py --probe-only: the probe's records alone give its table (MPI, auto, gloo).
    pr = os.path.join(d, "ddp-20260101-000300.jsonl")
    mpi = lambda alg, us: {"event": "allreduce", "algorithm": alg, "time_us": us,
                           "model": "mlp", "world_size": 4}
    write(pr, [mpi("bare-mpi", 60.0), mpi("bare-mpi", 80.0), mpi("auto", 90.0),
               {"event": "allreduce", "peer": "torch_extra", "allreduce_us": 1400.0,
                "model": "mlp", "world_size": 4}])
    row = row_of(summarise(pr), "mlp", "1400")
    check("ddp probe table", row is not None and "70 (60-80), 2 runs" in row and
          "90 (90-90), 1 run" in row and row.rstrip().endswith("20.0"),
          "MPI 70 (60-80), 2 runs; auto 90; gloo 1400: 20.0x", row)
    c = os.path.join(d, "gpt-layouts-20260101-000000.jsonl")
    write(c, [{"event": "merge-me-not"}])
    r = subprocess.run([sys.executable, os.path.join(BENCH, "summarise.py"), "--merge", a, c],
                       capture_output=True, text=True, timeout=60)
    check("--merge of two benchmarks refused", r.returncode != 0 and "--merge" in r.stderr,
          "a non-zero exit naming --merge", "exit %d: %s" % (r.returncode, r.stderr.strip()))

    # gpt_layouts: dtrain's step 100 ms, PyTorch's 125 ms: 0.80; a failed peer is named.
    def run(impl, layout, step, tokens, ranks=4):
        return {"event": "train", "size": "nano", "layout": layout, "impl": impl,
                "step_ms_median": step, "tokens_per_s": tokens, "ranks": [{}] * ranks}
    write(c, [{"event": "peer", "key": "torch_extra", "label": "PyTorch 2.11"}] +
          [run("dtrain", "dp4", s, t) for s, t in ((100.0, 1000.0), (90.0, 1100.0),
                                                    (110.0, 900.0))] +
          [run("torch_extra", "dp4", 125.0, 800.0)] * 3 +
          [run("dtrain", "pp4", 200.0, 500.0)] +
          [{"event": "failed", "size": "nano", "layout": "pp4", "impl": "torch_extra",
            "error": "PipeliningShapeError: stride mismatch"}] +
          # the traced run comes before the timed ones (so a cut run keeps it); --merge of two
          # runs repeats the peer record
          [{"event": "comm", "size": "nano", "layout": "dp4", "trace_steps": 3,
            "trace": {"0": {"dp": {"bytes": 43.38e6, "ms": 20.0}},
                      "1": {"dp": {"bytes": 43.38e6, "ms": 30.0}}},
            "plan_rows": [["dp", 43.38, None]], "plan_total_ms": 10.0,
            "after_last": {"0": {"dp": 12.0, "world": 3.0}, "1": {"dp": 15.0}},
            "plan_collective_ms": 10.0},
           {"event": "peer", "key": "torch_extra", "label": "PyTorch 2.11"}])
    out = summarise(c)
    head = next((ln for ln in out.splitlines() if ln.startswith("layout")), "")
    check("gpt_layouts partial, one column per peer", head.count("torch_extra") == 1,
          "one torch_extra column", head or out)
    rows = [ln for ln in out.splitlines() if ln.startswith("dp4 ")]
    check("gpt_layouts partial, the trace beside the plan",
          any("dp 43.38" in ln and "20.0 / 30.0" in ln and
              ln.split()[-3:] == ["15.0", "10.0", "1.50"] for ln in rows),
          "a dp4 row: dp 43.38 traced, 43.38 planned, 20.0 / 30.0 ms; collectives after the "
          "last arrival 15.0 ms (the largest rank, the world's left out) against 10.0: 1.50",
          "\n".join(rows))
    row = row_of(out, "dp4")
    check("gpt_layouts partial, dp4", row is not None and "1000 (900-1100), 3 runs" in row and
          "800 (800-800), 3 runs" in row and row.rstrip().endswith("0.80"),
          "1000 (900-1100), 3 runs beside 800 (800-800), 3 runs, step ratio 0.80", row or out)
    row = row_of(out, "pp4")
    check("gpt_layouts partial, a failed peer", row is not None and
          "FAILED: PipeliningShapeError" in row and row.rstrip().endswith("-"),
          "FAILED: PipeliningShapeError... and no ratio", row or out)

    # A complete gpt_layouts run: beside its tokens/s, the memory per rank from the train
    # records (one figure where the ranks agree, a range over more than 4 ranks) and the
    # traces, which the run printed and the JSON lines keep.
    g = os.path.join(d, "gpt-layouts-20260101-000100.jsonl")
    rank = lambda rss: {"param_bytes": 7.7e6, "optim_state_bytes": 15.3e6,
                        "activation_bytes": 73.9e6, "kept_bytes": 30.6e6, "seq_bytes": 16.81e6,
                        "planned_bytes": 104.5e6, "peak_rss_mb": rss}
    tp16 = {"event": "train", "size": "wide", "layout": "tp16", "impl": "dtrain",
            "step_ms_median": 330.0, "tokens_per_s": 3100.0,
            "ranks": [rank(152.0 + (i % 2) * 6) for i in range(16)]}
    spread = {"median": 3100.0, "min": 3100.0, "max": 3100.0, "n": 1}
    write(g, [{"event": "comm", "size": "wide", "layout": "tp16", "trace_steps": 2,
               "trace": {"0": {"tp": {"bytes": 33.55e6, "ms": 97.0}},
                         "1": {"tp": {"bytes": 33.55e6, "ms": 187.7}}},
               "plan_rows": [["tp", 33.55, None]], "plan_total_ms": 25.2},
              tp16,
              {"event": "summary", "size": "wide", "layout": "tp16", "reps": 1,
               "dtrain": {"tokens_per_s": spread}}])
    out = summarise(g)
    check("gpt_layouts: a record from before the after-last measure",
          any(ln.startswith("tp16") and ln.split()[-3:] == ["-", "-", "-"]
              for ln in out.splitlines()), "tp16's last three cells '-'", out)
    row = next((ln for ln in out.splitlines() if ln.startswith("tp16") and "dtrain" in ln
                and "104.5" in ln), None)
    check("gpt_layouts complete: the memory table", row is not None and " 7.7 " in row and
          row.rstrip().endswith("152-158"),
          "tp16 dtrain 7.7 ... 104.5 152-158 (one figure per field, RSS as a range)", row or out)
    check("gpt_layouts complete: the trace table",
          any(ln.startswith("tp16") and "97.0 / 187.7" in ln and "25.2" in ln
              for ln in out.splitlines()), "tp16 ... 97.0 / 187.7 ... 25.2", out)

    # tp_overlap_netns.sh's JSON lines: one summary per link rate, its table from summarise.
    o = os.path.join(d, "tp-overlap-netns-20260101-000000.jsonl")
    cell = lambda m: {"median": m, "min": m - 5, "max": m + 5, "n": 3, "backward_ms": m / 2}
    write(o, [{"event": "machine", "commit": "abc", "reps": 3},
              {"event": "summary", "rate": "10gbit", "on": cell(1020.0), "off": cell(1000.0),
               "on_over_off": 1.02}])
    row = row_of(summarise(o), "10gbit")
    check("tp_overlap_netns summary", row is not None and
          " 1020.0 (1015.0-1025.0)  1000.0 (995.0-1005.0) " in row and
          "510.0 / 500.0" in row and row.rstrip().endswith("1.020"),
          "10gbit, on 1020.0 (1015.0-1025.0) then off 1000.0 (995.0-1005.0), backward "
          "510.0 / 500.0, 1.020", row)

# The grid layouts of bench/gpt_layouts.py (its module imports only the standard library).
sys.path.insert(0, BENCH)
import gpt_layouts  # noqa: E402

for key, want in (("dp4", (4, "dp", 4, 1, 1)), ("tp4sp", (4, "tp_sp", 1, 4, 1)),
                  ("pp4_gpipe", (4, "pp_gpipe", 1, 1, 4)), ("pp3", (3, "pp_1f1b", 1, 1, 3)),
                  ("dp2tp2pp2", (8, None, 2, 2, 2)), ("dp4tp2pp2", (16, None, 4, 2, 2))):
    lay = gpt_layouts.grid_layout(key, 4)
    got = lay and (lay.ranks, lay.peer, lay.dp, lay.tp, lay.stages)
    check("grid_layout(%s)" % key, got == want, want, got)
lay = gpt_layouts.grid_layout("dp2tp2pp2", 4)
check("dp2tp2pp2's settings", lay.sets == ["parallel.dp=2", "parallel.tp=2", "parallel.pp=2",
                                           "parallel.micro_batches=4",
                                           "parallel.pp_schedule=1f1b"],
      "dp, tp, pp, M 4, 1F1B", lay.sets)
# trace_after_last: dp 2 x tp 2 (rank = tp_rank + 2 dp_rank): the tp groups are {0, 1} and
# {2, 3}, the dp groups {0, 2} and {1, 3}. Each collective counts from its last member's
# start to its first member's end; step 1's calls pair up but are not counted; sends and
# the world's exchanges as given.
import benchlib  # noqa: E402


def ev(rank, name, group, ts, dur, step, nbytes=64):
    return {"name": name, "cat": "comm", "ph": "X", "pid": rank, "tid": 1, "ts": ts,
            "dur": dur, "args": {"group": group, "bytes": nbytes, "step": step}}


trace = [{"name": "step %d" % st, "cat": "step", "ph": "X", "pid": r, "tid": 0, "ts": 0,
          "dur": 1, "args": {"step": st}} for r in range(4) for st in (1, 2)]
trace += [ev(r, "allreduce", "tp", 0, 5000, 1) for r in range(4)]  # step 1: not counted
trace += [ev(0, "allreduce", "tp", 100, 50, 2), ev(1, "allreduce", "tp", 120, 40, 2),
          ev(2, "allreduce", "tp", 100, 10, 2), ev(3, "allreduce", "tp", 105, 10, 2),
          ev(0, "allreduce", "dp", 200, 100, 2), ev(2, "allreduce", "dp", 250, 60, 2),
          ev(1, "allreduce", "dp", 200, 20, 2), ev(3, "allreduce", "dp", 210, 20, 2),
          ev(0, "send", "pp", 0, 9000, 2), ev(1, "recv", "pp", 0, 9000, 2)]
with tempfile.TemporaryDirectory(prefix="dtrain-trace-") as d:
    path = os.path.join(d, "trace.json")

    def after(events):
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "otherData": {"dropped_events": 0}}, f)
        got = benchlib.trace_after_last(path, dp=2, tp=2)
        return {r: {g: (None if v is None else round(v, 6)) for g, v in gs.items()}
                for r, gs in got.items()}
    want = {0: {"tp": 0.03, "dp": 0.05}, 1: {"tp": 0.03, "dp": 0.01},
            2: {"tp": 0.005, "dp": 0.05}, 3: {"tp": 0.005, "dp": 0.01}}
    got = after(trace)
    check("trace_after_last on dp 2 x tp 2", got == want, want, got)
    got = after(trace + [ev(3, "allreduce", "tp", 400, 10, 2)])
    check("trace_after_last: a member with a call the others lack",
          [got[r]["tp"] for r in (0, 1, 2, 3)] == [0.03, 0.03, None, None],
          "tp 0.03 on ranks 0, 1 and None on 2, 3 (their group's calls do not pair up)",
          [got[r]["tp"] for r in (0, 1, 2, 3)])

# BENCH_TORCH_PYTHON may name a program on PATH, as docs/BENCHMARKS.md's commands do
# (BENCH_TORCH_PYTHON=python3): the peer is called by its path. `sh` stands in for it (it
# imports no torch, so the peer is "not installed", but found).
os.environ["BENCH_TORCH_PYTHON"] = "sh"
extra = [p for p in benchlib.torch_peers() if p.key == "torch_extra"]
check("BENCH_TORCH_PYTHON=sh looked up on PATH",
      len(extra) == 1 and os.path.isabs(extra[0].python) and os.path.exists(extra[0].python),
      "one torch_extra peer called by an existing absolute path",
      extra and extra[0].python)

for key in ("tp1", "sp", "dp2sp", "tp2_gpipe", "pp2tp2", "dpx"):
    lay = gpt_layouts.grid_layout(key, 4)
    check("grid_layout(%s) refused" % key, lay is None, None, lay and lay.label)

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: partial ddp and gpt_layouts runs summarised with their run counts, --merge, "
      "a complete gpt_layouts run's memory and traces, the collectives after their last "
      "arrival, tp_overlap_netns's summaries, the grid layouts")
