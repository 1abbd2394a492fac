#!/usr/bin/python3
"""summarise.py — the headline figures of every benchmark, again, from its JSON lines.

The figures flow one way (docs/BENCHMARKS.md, "How the figures flow"): each benchmark writes
its measurements and the medians its script computed ("summary" records) to
bench/out/NAME-TIME.jsonl; its tables are copied into docs/BENCHMARKS.md; the summaries in
README.md and docs/BENCHMARKS.md quote the tables (scripts/check-quoted.py checks that). This
script prints, for each benchmark, the figures those summaries quote — the ratios with their
ranges, the medians, the efficiencies — from the newest output that is a measurement (not a
--quick run), naming the file each came from, so that after a rerun the new figures can be
read in one place and the tables and summaries rewritten from them. It works on whatever
outputs exist and says "no output" for the others.

The medians are the drivers' own (their summary records; tp.py's and pp.py's summarize()
over the runs when a run stopped before writing them); the cells are formatted as the
drivers' tables format them (run.ratio, gpt.spread, gpt_layouts.spread).

Usage: /usr/bin/python3 bench/summarise.py [--out DIR] [FILE.jsonl ...]
  FILE.jsonl  summarise these files (any benchmark's, --quick runs included) instead of the
              newest measurement of each benchmark under DIR (default bench/out)
Standard library only.
"""
import argparse
import json
import os
import re
import sys

import benchlib as bl
import gpt
import gpt_layouts
import pp
import run
import tp


def records(path):
    """The JSON objects of one file, one per line."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as e:
                    raise SystemExit("summarise.py: %s:%d: not JSON: %s" % (path, n, e))
    return out


def events(recs, name):
    return [r for r in recs if r.get("event") == name]


def span(values, spec=".2f", unit="×", pre=""):
    """"a-b×" over the values (one value: "a×"; pre "1/": "1/a-1/b"), or "-" with none."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return "-"
    lo, hi = pre + format(vals[0], spec), pre + format(vals[-1], spec)
    return (lo if lo == hi else "%s-%s" % (lo, hi)) + unit


def ratio_line(recs):
    """The machine's parallel ratio before / after, flagged as the drivers flag it; None
    where the driver does not measure it."""
    got = [(p.get("when"), p.get("ratio")) for p in events(recs, "parallel_ratio")
           if p.get("ratio") is not None]
    if not got:
        return None
    # "before" and "after", or a driver's own points (compress: before seed 1, after each):
    # the first and the last, flagged when any is low
    r = dict(got)
    vals = [r.get("before", got[0][1]), r.get("after", got[-1][1])]
    flag = min(v for _, v in got) < bl.PARALLEL_RATIO_MIN
    return "parallel ratio %s / %s%s" % (bl.fmt(vals[0], ".2f"), bl.fmt(vals[1], ".2f"),
                                         " (below %.1f: its 2-thread and 2-rank figures are "
                                         "flagged)" % bl.PARALLEL_RATIO_MIN if flag else "")


def peer_keys(s, field):
    """The peers of a summary record that hold `field`, dtrain first, in the file's order."""
    return [k for k, v in s.items() if isinstance(v, dict) and field in v]


# ---- one function per benchmark: its records -> lines -----------------------------------

def train(recs):
    """run.py: samples/s, dtrain over each PyTorch (run.ratio: the table's columns)."""
    sums = events(recs, "summary")
    peers = [k for k in peer_keys(sums[0], "samples_per_s") if k != "dtrain"]
    labels = {k: next(s[k]["label"] for s in sums if s.get(k)) for k in peers}
    head = ["model", "threads", "dtrain"] + [labels[k] for k in peers] + \
        ["dtrain/" + labels[k] for k in peers] + [labels[k] + "/dtrain RSS" for k in peers]
    rows, out = [], []
    for s in sums:
        rows.append([s["model"], str(s["threads"]), run.cell(s, "dtrain", "samples_per_s", ".0f")]
                    + [run.cell(s, k, "samples_per_s", ".0f") for k in peers]
                    + [run.ratio(s, "dtrain", k, "samples_per_s") for k in peers]
                    + [run.ratio(s, "dtrain", k, "peak_rss_mb", True) for k in peers])
    out.append(bl.table("samples/s (median of %d), dtrain's over each peer's, and peak RSS"
                        % sums[0]["reps"], head, rows))
    for model in dict.fromkeys(s["model"] for s in sums):
        mine = [s for s in sums if s["model"] == model and s.get("dtrain")]
        thr = [float(run.ratio(s, "dtrain", k, "samples_per_s")) for s in mine for k in peers
               if s.get(k)]
        mem = [float(run.ratio(s, "dtrain", k, "peak_rss_mb", True)) for s in mine
               for k in peers if s.get(k)]
        out.append("%s: dtrain %s the samples/s of every peer, in %s of its peak memory"
                   % (model, span(thr), span(mem, unit="", pre="1/")))
    return out


def cell(vals, spec=".0f"):
    """"median (min-max), n runs" of a partial run's cell (gpt_layouts.spread's format)."""
    s = {"median": bl.median(vals), "min": min(vals), "max": max(vals)}
    return "%s, %d run%s" % (gpt_layouts.spread(s, spec), len(vals),
                             "" if len(vals) == 1 else "s")


def ddp_partial(recs):
    """ddp.py's runs where it stopped before its summaries (a time limit): each cell's median,
    range and number of runs from the train records, the efficiency from the medians."""
    got = {}
    for r in events(recs, "train"):
        model = r.get("model") or next((m for m, cfg in bl.MODELS.items()
                                        if cfg == r.get("config")), None)
        got.setdefault((model, r.get("variant") or r["peer"], r["world_size"]),
                       []).append(r["samples_per_s"])
    worlds = sorted({w for (_, _, w) in got})
    rows = []
    for model, who in dict.fromkeys((m, v) for (m, v, _) in got):
        one = got.get((model, who, 1))
        row = [model, who]
        for w in worlds:
            vals = got.get((model, who, w))
            row.append(cell(vals) if vals else "-")
            if w > 1:
                row.append("%.2f" % (bl.median(vals) / (w * bl.median(one)))
                           if vals and one else "-")
        rows.append(row)
    head = ["model", "implementation"]
    for w in worlds:
        head += ["%d %s" % (w, "process" if w == 1 else "ranks")] + (["eff %d" % w] if w > 1
                                                                     else [])
    return [bl.table("global samples/s, median (min-max) and runs per cell, from the train "
                     "records (the run stopped before its summaries); efficiency from the "
                     "medians", head, rows)] + ddp_probe(recs)


def ddp_probe(recs):
    """ddp.py's gloo-against-MPI probe from its allreduce records (none: no table): per model
    and world size, the median µs of MPI's own all-reduce, of dtrain's auto and of each
    PyTorch's gloo, with the runs, and gloo over MPI."""
    got = {}
    for r in events(recs, "allreduce"):
        who = r.get("algorithm") if "time_us" in r else r.get("peer")
        got.setdefault((r["model"], r["world_size"], who), []).append(
            r["time_us"] if "time_us" in r else r["allreduce_us"])
    if not got:
        return []
    glooers = list(dict.fromkeys(w for (_, _, w) in got if w not in ("bare-mpi", "auto")))
    rows = []
    for model, n in dict.fromkeys((m, n) for (m, n, _) in got):
        bare = got.get((model, n, "bare-mpi"))
        row = [model, str(n), cell(bare) if bare else "-",
               cell(got[(model, n, "auto")]) if got.get((model, n, "auto")) else "-"]
        for w in glooers:
            g = got.get((model, n, w))
            row += [cell(g) if g else "-",
                    "%.1f" % (bl.median(g) / bl.median(bare)) if g and bare else "-"]
        rows.append(row)
    head = ["model", "ranks", "MPI us", "dtrain auto us"]
    for w in glooers:
        head += ["gloo %s us" % w, "gloo/MPI"]
    return [bl.table("one all-reduce of the model's gradient, µs a call (median (min-max), "
                     "runs): MPI's own and dtrain's auto over shared memory against gloo over "
                     "TCP", head, rows)]


def ddp(recs):
    """ddp.py: global samples/s, scaling efficiency and the share of communication hidden per
    implementation and Adam (its table); dtrain over each PyTorch's fastest column at each
    world size, 1 process included (its second table)."""
    sums = events(recs, "summary")
    if not sums:
        return ddp_partial(recs)
    ranks = sorted({s["ranks"] for s in sums})
    rows = {}
    for s in sums:
        key = (s["model"], s.get("variant", s["peer"]))
        row = rows.setdefault(key, [s["model"], s["label"], bl.fmt(s["samples_per_s_1"], ".0f")])
        row += [bl.fmt(s["samples_per_s_n"], ".0f"), bl.fmt(s["efficiency"], ".3f"),
                "-" if s.get("comm_hidden") is None else "%.0f%%" % (100 * s["comm_hidden"])]
    head = ["model", "implementation", "1 process"]
    for n in ranks:
        head += ["%d ranks" % n, "eff %d" % n, "hidden %d" % n]
    out = [bl.table("global samples/s (median of %d), efficiency thr(N) / (N thr(1)), "
                    "communication hidden" % sums[0]["reps"], head, list(rows.values()))]
    for model in dict.fromkeys(s["model"] for s in sums):
        mine = [s for s in sums if s["model"] == model]
        for n in [1] + ranks:
            field = "samples_per_s_1" if n == 1 else "samples_per_s_n"
            at = [s for s in mine if n == 1 or s["ranks"] == n]
            d = next((s for s in at if s["peer"] == "dtrain"), None)
            for peer in dict.fromkeys(s["peer"] for s in at if s["peer"] != "dtrain"):
                cand = [s for s in at if s["peer"] == peer and s.get(field)]
                if not d or not d.get(field) or not cand:
                    continue
                best = max(cand, key=lambda s: s[field])
                out.append("%s, %d %s: dtrain %.2f× its fastest PyTorch column, %s (%s: "
                           "%.0f samples/s)" % (
                    model, n, "process" if n == 1 else "ranks", d[field] / best[field],
                    best["label"], best.get("mode"), best[field]))
    return out + ddp_probe(recs)


def tp_bench(recs):
    """tp.py: step time per layout, dtrain's over each PyTorch's (the table's dtrain/PyTorch
    columns), parameter bytes per rank against tp=1."""
    sums = {(s["impl_key"], s["layout"]): s for s in events(recs, "summary")}
    note = ""
    if not sums:  # stopped before its summaries: tp.py's own medians over the runs
        runs = {}
        for r in events(recs, "train"):
            runs.setdefault((r["impl_key"], r["layout"]), []).append(r)
        sums = {k: tp.summarize(v) for k, v in runs.items()}
        note = " (no summary records: tp.py's summarize over the runs recorded)"
    rows, out = [], []
    impls = list(dict.fromkeys(k[0] for k in sums))
    for (impl, lay), s in sums.items():
        base = sums.get((impl, "tp1"), {}).get("param_bytes")
        d = sums.get(("dtrain", lay))
        rows.append([impl, lay, "%.1f" % s["step_ms"], "%.0f" % s["samples_per_s"],
                     "%.3f" % (s["param_bytes"] / base) if base else "-",
                     "%.2f" % (d["step_ms"] / s["step_ms"]) if d and impl != "dtrain" else "-"])
    out.append(bl.table("step ms and samples/s (medians)%s, parameter bytes per rank over "
                        "tp=1's, dtrain's step time over this row's" % note,
                        ["implementation", "layout", "step ms", "samples/s", "param vs tp=1",
                         "dtrain/this"], rows))
    d1, d2 = sums.get(("dtrain", "tp1")), sums.get(("dtrain", "tp2"))
    if d1 and d2:
        out.append("dtrain tp=2: %.3f of tp=1's parameter bytes per rank, %.1f ms a step "
                   "against %.1f ms at tp=1" % (d2["param_bytes"] / d1["param_bytes"],
                                                d2["step_ms"], d1["step_ms"]))
    for impl in impls:
        t2 = sums.get((impl, "tp2"))
        if impl != "dtrain" and d2 and t2:
            out.append("tp=2: dtrain's step %.2f× %s's (%.1f ms against %.1f ms)" %
                       (d2["step_ms"] / t2["step_ms"], impl, d2["step_ms"], t2["step_ms"]))
    return out


def pp_bench(recs):
    """pp.py: the deep MLP's samples/s per schedule and M, dtrain's over each peer's, the
    mean bubble of the stages; the ConvNet's layouts against one process."""
    sums = {tuple(s["cell"]): s for s in events(recs, "summary")}
    note = ""
    if not sums:
        runs = {}
        for r in events(recs, "train"):
            runs.setdefault(tuple(r["cell"]), []).append(r)
        sums = {k: pp.summarize(v) for k, v in runs.items()}
        note = " (no summary records: pp.py's summarize over the runs recorded)"
    labels = {p["impl"]: p["label"] for p in events(recs, "peer")}
    rows, ratios, out = [], [], []

    def bubble(s):
        b = [st[2] for st in s["stages"]]
        return sum(b) / len(b) if b and None not in b else None
    for k, s in sums.items():
        if k[0] == "convnet" or k[3] == "dtrain":
            continue
        d = sums.get(k[:3] + ("dtrain",))
        r = d["samples_per_s"] / s["samples_per_s"] if d else None
        ratios.append(r)
        rows.append([k[0], k[1], str(k[2]), labels.get(k[3], k[3]),
                     bl.fmt(d and d["samples_per_s"], ".0f"), "%.0f" % s["samples_per_s"],
                     bl.fmt(r, ".2f"), bl.fmt(d and bubble(d), ".3f"), bl.fmt(bubble(s), ".3f")])
    if rows:
        out.append(bl.table("deep MLP%s: samples/s (medians), dtrain's over the peer's, mean "
                            "bubble of the stages" % note,
                            ["placement", "schedule", "M", "peer", "dtrain", "peer samples/s",
                             "dtrain/peer", "bubble dtrain", "bubble peer"], rows))
        out.append("deep MLP: dtrain %s the peer's samples/s over the %d cells"
                   % (span(ratios), len(ratios)))
    single = sums.get(("convnet", "single"))
    conv = [[k[1], "%.0f" % s["samples_per_s"],
             "%.2f" % (s["samples_per_s"] / single["samples_per_s"]) if single else "-"]
            for k, s in sums.items() if k[0] == "convnet"]
    if conv:
        out.append(bl.table("ConvNet: samples/s (medians) and against one process",
                            ["layout", "samples/s", "vs 1 process"], conv))
    return out


def compress(recs):
    """compress.py: accuracy, its change against no compression, bytes per step, time."""
    out = []
    sums = events(recs, "summary")
    for model in dict.fromkeys(s["model"] for s in sums):
        rows = [[s["label"], s["mode"], bl.fmt(s["test_accuracy"] and 100 * s["test_accuracy"],
                                               ".2f"),
                 bl.fmt(s["delta_points"], "+.2f"),
                 bl.fmt(s["wire_bytes_per_step"] and s["wire_bytes_per_step"] / 1e6, ".4f"),
                 bl.fmt(s["bytes_ratio_to_none"] and 1 / s["bytes_ratio_to_none"], ".1f"),
                 bl.fmt(s["train_s"], ".3g"), str(s.get("runs", s.get("reps"))),
                 str(s.get("flagged", "-"))]
                for s in sums if s["model"] == model]
        for r, s in zip(rows, [s for s in sums if s["model"] == model]):
            if s.get("test_accuracy_min") is not None:  # median (min-max) over the seeds
                r[2] += " (%.2f-%.2f)" % (100 * s["test_accuracy_min"],
                                          100 * s["test_accuracy_max"])
        out.append(bl.table("%s: test accuracy %% (median (min-max) over the seeds), points "
                            "against no compression, MB one rank sends per step, none's bytes "
                            "over these (the run's), train s" % model,
                            ["implementation", "mode", "acc %", "delta", "MB/step",
                             "1/x bytes", "train s", "runs", "flagged"], rows))
    return out


def ckpt(recs):
    """ckpt.py: write and load times beside torch.save and torch.load (bench/out/ckpt.jsonl
    holds one line per run; the last that is not a --quick run is summarised)."""
    last = [r for r in recs if not ckpt_quick([r])][-1]
    rows = last["rows"]
    d = next((r for r in rows if r["peer"] == "dtrain"), None)
    out = [bl.table("checkpoint of the ConvNet with Adam's state: medians of 7",
                    ["implementation", "write ms", "load ms", "bytes", "dtrain write/this",
                     "dtrain load/this"],
                    [[r["peer"]] + (["missing: " + r["missing"], "", "", "", ""]
                                    if "missing" in r else
                                    ["%.1f" % (1e3 * r["save_s"]), "%.1f" % (1e3 * r["load_s"]),
                                     "%d" % r["bytes"],
                                     "%.2f" % (d["save_s"] / r["save_s"]) if d else "-",
                                     "%.2f" % (d["load_s"] / r["load_s"]) if d else "-"])
                     for r in rows])]
    out.append("--checkpoint-every %d over %d steps: %.3f s of %.2f s of steps (%.2f%%)" %
               (last["every"], last["steps"], last["ckpt_s"], last["with_s"],
                100 * last["ckpt_s"] / last["with_s"]))
    return out


def gpt_bench(recs):
    """gpt.py: tokens/s per size and threads (gpt.spread: median (min-max)), dtrain's over
    each PyTorch's fastest eager column, peak memory, planned memory over the minimum."""
    out, rows = [], []
    for s in events(recs, "summary"):
        d = s["cols"].get("dtrain", {"missing": "not run"})
        row = [s["size"], str(s["threads"]), gpt.spread(d)]
        for p, k in sorted(s.get("best_eager", {}).items()):
            c = s["cols"][k]
            ok = "missing" not in d
            row += [c["label"], gpt.spread(c),
                    "%.2f×" % (d["tokens_per_s"]["median"] / c["tokens_per_s"]["median"])
                    if ok else "-",
                    "1/%.1f" % (c["peak_rss_mb"] / d["peak_rss_mb"]) if ok else "-"]
        row.append("%.3f" % (d["planned_mb"] / d["minimum_mb"]) if d.get("minimum_mb") else "-")
        rows.append(row)
    width = max(len(r) for r in rows)
    rows = [r[:-1] + [""] * (width - len(r)) + r[-1:] for r in rows]
    head = ["size", "thr", "dtrain tokens/s"]
    head += ["fastest eager", "its tokens/s", "dtrain/it", "dtrain's RSS"] * ((width - 4) // 4)
    out.append(bl.table("tokens/s, median (min-max) of %d; dtrain's over each PyTorch's "
                        "fastest eager column; planned memory over the design's minimum" %
                        events(recs, "summary")[0]["reps"], head + ["planned/min"], rows))
    for s in events(recs, "summary"):
        d = s["cols"].get("dtrain", {})
        for k, c in s["cols"].items():
            if "+compile" in k and "missing" not in c and "tokens_per_s" in d:
                out.append("%s, %d thread(s): dtrain %.2f× %s" % (
                    s["size"], s["threads"],
                    d["tokens_per_s"]["median"] / c["tokens_per_s"]["median"], c["label"]))
    return out


def gpt_layouts_partial(recs):
    """gpt_layouts.py's runs where it stopped before its summaries (a time limit): tokens/s
    per layout from the train records, with the number of runs, and dtrain's median step over
    the fastest PyTorch's."""
    got = {}
    for r in events(recs, "train"):
        got.setdefault((r["size"], r["layout"], r["impl"]), []).append(r)
    peers = list(dict.fromkeys(p["key"] for p in events(recs, "peer")))
    failed = {(r.get("size"), r.get("layout"), r.get("impl")): r.get("error", "")
              for r in events(recs, "failed")}
    out = []
    # a --trace-only run has comm records and no train records
    for size in dict.fromkeys([k[0] for k in got] + [c["size"] for c in events(recs, "comm")]):
        rows = []
        for lay in dict.fromkeys(k[1] for k in got if k[0] == size):
            d = got.get((size, lay, "dtrain"))
            row = [lay, str(len(d[0]["ranks"])) if d else "-",
                   cell([r["tokens_per_s"] for r in d]) if d else "-"]
            steps = []
            for p in peers:
                t = got.get((size, lay, p))
                if t:
                    row.append(cell([r["tokens_per_s"] for r in t]))
                    steps.append(bl.median([r["step_ms_median"] for r in t]))
                else:
                    why = failed.get((size, lay, p))
                    row.append("FAILED: " + why[:50] if why else "no counterpart")
            row.append("%.2f" % (bl.median([r["step_ms_median"] for r in d]) / min(steps))
                       if d and steps else "-")
            rows.append(row)
        if rows:
            out.append(bl.table("%s: tokens/s, median (min-max) and runs per cell, from the "
                                "train records (the run stopped before its summaries); "
                                "dtrain's step over the fastest PyTorch's" % size,
                                ["layout", "ranks", "dtrain"] + peers + ["dtrain/PyTorch step"],
                                rows))
        out += gpt_layouts_memory(recs, size, peers) + gpt_layouts_comm(recs, size)
    return out


def gpt_layouts_memory(recs, size, peers):
    """A size's memory table from the train records (none: no table): per layout dtrain's
    planned accounting and each side's peak RSS."""
    got = {}
    for r in events(recs, "train"):
        if r["size"] == size:
            got.setdefault((r["layout"], r["impl"]), []).append(r)
    mem = []
    for lay in dict.fromkeys(k[0] for k in got):
        if got.get((lay, "dtrain")):
            mem.append(gpt_layouts.dtrain_memory_row(lay, got[(lay, "dtrain")]))
        mem += [gpt_layouts.peer_memory_row(lay, p, got[(lay, p)]) for p in peers
                if got.get((lay, p))]
    if not mem:
        return []
    return [bl.table("%s: %s" % (size, gpt_layouts.MEMORY_TITLE), gpt_layouts.MEMORY_HEAD,
                     mem)]


def gpt_layouts_comm(recs, size):
    """A size's communication table from the traced runs' comm records (none: no table)."""
    comm = [gpt_layouts.comm_row(c["layout"], c) for c in events(recs, "comm")
            if c["size"] == size]
    comm += [gpt_layouts.comm_failed_row(r["layout"], r.get("error", ""))
             for r in events(recs, "failed")
             if r.get("impl") == "trace" and r.get("size") == size]
    if not comm:
        return []
    steps = min(c.get("trace_steps", 3) for c in events(recs, "comm"))
    blocking = all("after_last" in c for c in events(recs, "comm"))
    return [gpt_layouts.comm_table(comm, steps, blocking)]


def gpt_layouts_bench(recs):
    """gpt_layouts.py: tokens/s per size and layout (gpt_layouts.spread), dtrain's step over
    the fastest PyTorch's on the same layout."""
    out = []
    sums = events(recs, "summary")
    if not sums:
        return gpt_layouts_partial(recs)
    peers = list(dict.fromkeys(p["key"] for p in events(recs, "peer")))
    for size in dict.fromkeys(s["size"] for s in sums):
        rows, ratios = [], []
        for s in sums:
            if s["size"] != size:
                continue
            v = s.get("vs_fastest_peer")
            ratios.append(v and v["step_ratio"])
            rows.append([s["layout"], gpt_layouts.spread(s["dtrain"]["tokens_per_s"])
                         if s.get("dtrain") else "failed"]
                        + [gpt_layouts.spread(s[p]["tokens_per_s"]) if s.get(p) else "-"
                           for p in peers]
                        + [bl.fmt(v and v["step_ratio"], ".2f")])
        out.append(bl.table("%s: tokens/s, median (min-max); dtrain's step over the fastest "
                            "PyTorch's" % size, ["layout", "dtrain"] + peers +
                            ["dtrain/PyTorch step"], rows))
        out.append("%s: dtrain's step %s the fastest PyTorch's over the layouts" %
                   (size, span(ratios)))
        # the memory per rank from the train records, as a cut run's, and the traces
        out += gpt_layouts_memory(recs, size, peers) + gpt_layouts_comm(recs, size)
    return out


def tp_overlap(recs):
    """tp_overlap_netns.sh: per link rate, the GPT's ms per step at its layout (tp 2 unless
    LAYOUT said another) with the overlap on and off (median (min-max) of the runs), the
    backward's median, on over off."""
    rows = []
    for s in events(recs, "summary"):
        on, off = s["on"], s["off"]
        rows.append([s["rate"], gpt_layouts.spread(on, ".1f"), gpt_layouts.spread(off, ".1f"),
                     "%.1f / %.1f" % (on["backward_ms"], off["backward_ms"]),
                     "%.3f" % s["on_over_off"]])
    runs = {s["on"]["n"] for s in events(recs, "summary")}
    model = next((m.get("model") for m in events(recs, "machine")), None) or "nano tp 2, batch 8"
    return [bl.table("the GPT %s over a shaped link, ms per step, median (min-max) of %s "
                     "run(s)" % (model, "/".join(map(str, sorted(runs)))),
                     ["link", "overlap on", "overlap off", "backward on / off, ms",
                      "on / off step"], rows)]


def gpt_converge(recs):
    """gpt_converge.py: the validation loss on both sides every evaluation, the final gap."""
    s = events(recs, "summary")[-1]
    rows = [[str(a[0]), "%.4f" % a[1], "%.4f" % b[1] if b[0] == a[0] else "?"]
            for a, b in zip(s["dtrain_curve"], s["torch_curve"])]
    return [bl.table("validation loss, nats/byte: %s, batch %d, %d steps" %
                     (s["config"], s["batch"], s["steps"]), ["step", "dtrain", s["torch"]],
                     rows),
            "final: dtrain %.4f, %s %.4f: difference %+.4f nats (target within %.2f)" %
            (s["dtrain_val_loss"], s["torch"], s["torch_val_loss"], s["diff"], s["target"])]


def localsgd(recs):
    """localsgd.py: accuracy, bytes and samples/s per strategy; dtrain's samples/s over
    each PyTorch's at the same strategy."""
    sums = events(recs, "summary")
    rows = [[s["label"], "ddp" if s["period"] == 0 else "localsgd H=%d" % s["period"],
             bl.fmt(s["test_accuracy"] and 100 * s["test_accuracy"], ".2f"),
             bl.fmt(s["delta_points"], "+.2f"),
             bl.fmt(s["wire_bytes_per_step"] and s["wire_bytes_per_step"] / 1e6, ".4f"),
             bl.fmt(s["samples_per_s"], ".0f")] for s in sums]
    out = [bl.table("test accuracy %% and samples/s (medians of %d)" % sums[0]["reps"],
                    ["implementation", "strategy", "acc %", "vs ddp (pts)", "MB sent/step",
                     "samples/s"], rows)]
    by = {(s["model"], s["peer"], s["period"]): s for s in sums}
    for (model, peer, h), s in by.items():
        d = by.get((model, "dtrain", h))
        if peer != "dtrain" and d and d["samples_per_s"] and s["samples_per_s"]:
            out.append("%s %s: dtrain %.2f× %s's samples/s" % (
                model, "ddp" if h == 0 else "H=%d" % h, d["samples_per_s"] / s["samples_per_s"],
                s["label"]))
    for (model, peer, h), s in by.items():
        base = by.get((model, peer, 0))
        if h and base and base["samples_per_s"] and s["samples_per_s"]:
            out.append("%s %s H=%d: %.2f× its ddp's samples/s" % (
                model, s["label"], h, s["samples_per_s"] / base["samples_per_s"]))
    return out


# ---- which files --------------------------------------------------------------------------

def needs_reps(least):
    """A driver that refuses fewer than `least` repetitions unless --quick: a summary with
    fewer is a --quick run."""
    return lambda recs: any(s.get("reps", least) < least for s in events(recs, "summary"))


def ckpt_quick(recs):
    """ckpt.py's --quick checkpoints every 5 steps, a measurement every 100: a file all of
    whose runs are quick."""
    return all(r.get("every", 100) < 100 for r in recs)


def flagged_quick(recs):
    return any(m.get("quick") for m in events(recs, "machine"))


# (file name, what the docs call it, its function, whether a file is a --quick run). The
# order is docs/BENCHMARKS.md's.
BENCHES = [
    ("train", "Training in one process (bench/run.sh)", train, needs_reps(3)),
    ("ddp", "Data parallelism (bench/ddp.sh)", ddp, needs_reps(3)),
    ("tp", "Tensor parallelism (bench/tp.sh)", tp_bench, needs_reps(3)),
    ("pp", "Pipeline parallelism (bench/pp.sh)", pp_bench, needs_reps(3)),
    ("ckpt", "Checkpoints (bench/ckpt.sh)", ckpt, lambda recs: ckpt_quick(recs)),
    ("compress", "Gradient compression (bench/compress.sh)", compress, flagged_quick),
    ("localsgd", "Local SGD (bench/localsgd.sh)", localsgd, flagged_quick),
    ("gpt", "The GPT against PyTorch (bench/gpt.sh)", gpt_bench, needs_reps(3)),
    ("gpt-converge", "The GPT's convergence (bench/gpt.sh build converge)", gpt_converge,
     lambda recs: any(s.get("steps", 2000) < 100 for s in events(recs, "summary"))),
    ("gpt-layouts", "The GPT across layouts (bench/gpt_layouts.sh)", gpt_layouts_bench,
     needs_reps(3)),
    ("tp-overlap-netns", "The tp overlap over a shaped link (bench/tp_overlap_netns.sh)",
     tp_overlap, lambda recs: any(m.get("reps", 3) < 3 for m in events(recs, "machine"))),
]


def bench_of(path):
    """The benchmark a file of bench/out/ belongs to: NAME-YYYYmmdd-HHMMSS.jsonl, or
    ckpt.jsonl (ckpt.py appends to one file)."""
    base = os.path.basename(path)
    for b in BENCHES:
        if re.fullmatch(re.escape(b[0]) + r"(-\d{8}-\d{6})?\.jsonl", base):
            return b
    return None


def summarise(bench, path, recs, quick):
    name, title, fn, _ = bench
    machine = (events(recs, "machine") or [{}])[0]
    head = "== %s: %s" % (title, " + ".join(os.path.relpath(p, bl.ROOT) for p in path.split(" + ")))
    facts = [f for f in ("commit %s" % machine["commit"] if machine.get("commit") else None,
                         ratio_line(recs)) if f]
    lines = [head + (" (%s)" % "; ".join(facts) if facts else "")]
    if quick:
        lines.append("a --quick run: it checks the scripts, its figures are not a measurement")
    if name != "ckpt" and not events(recs, "summary") and \
            name not in ("tp", "pp", "ddp", "gpt-layouts"):
        return lines + ["no summary records: the run stopped before its end"]
    try:
        lines += fn(recs)
    except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as e:
        lines.append("cannot read its records (%s: %s): a driver's JSON changed without "
                     "bench/summarise.py" % (type(e).__name__, e))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(bl.HERE, "out"),
                    help="the benchmarks' output directory (default bench/out)")
    ap.add_argument("--merge", action="store_true",
                    help="read the files named (one benchmark's) as one run: the cells of "
                         "runs that each stopped early, on one machine")
    ap.add_argument("files", nargs="*", help="summarise these files instead")
    a = ap.parse_args()
    blocks = []
    if a.files:
        loaded = []
        for path in a.files:
            bench = bench_of(path)
            if not os.path.isfile(path):
                sys.exit("summarise.py: %s: no such file" % path)
            if bench is None:
                sys.exit("summarise.py: %s: not a benchmark's output (NAME-TIME.jsonl of %s)"
                         % (path, ", ".join(b[0] for b in BENCHES)))
            loaded.append((bench, path, records(path)))
        if a.merge:
            if len({b[0] for b, _, _ in loaded}) > 1:
                sys.exit("summarise.py: --merge: files of one benchmark, not %s" %
                         ", ".join(sorted({b[0] for b, _, _ in loaded})))
            merged = [r for _, _, recs in loaded for r in recs]
            # A file cut before its summaries holds runs that the others' summaries do not
            # count: read every file's runs from their records then, as one cut run.
            if any(not events(recs, "summary") for _, _, recs in loaded):
                merged = [r for r in merged if r.get("event") != "summary"]
            loaded = [(loaded[0][0], " + ".join(p for _, p, _ in loaded), merged)]
        for bench, path, recs in loaded:
            blocks.append(summarise(bench, path, recs, bool(recs) and bench[3](recs)))
    else:
        names = sorted(os.listdir(a.out)) if os.path.isdir(a.out) else []
        for bench in BENCHES:
            mine = [n for n in names if bench_of(n) is bench]
            skipped, done = [], False
            for n in reversed(mine):  # the newest first: the names sort by time
                recs = records(os.path.join(a.out, n))
                if not recs or bench[3](recs):
                    skipped.append(n)
                    continue
                blocks.append(summarise(bench, os.path.join(a.out, n), recs, False))
                done = True
                break
            if not done:
                blocks.append(["== %s: no output in %s%s" % (
                    bench[1], os.path.relpath(a.out, bl.ROOT),
                    " but --quick runs (%s)" % ", ".join(skipped) if skipped else "")])
            elif skipped:
                blocks[-1].append("newer --quick runs skipped: %s" % ", ".join(skipped))
    print("\n\n".join("\n".join(b) for b in blocks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
