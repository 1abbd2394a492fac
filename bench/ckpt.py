"""Checkpoint benchmark (bench/ckpt.sh): the ConvNet's checkpoint in dtrain — the time to
write a set (gather, write, fsync, manifest), its bytes, and the time to find, verify and
load it on resume — beside torch.save / torch.load of the same state (model and Adam) in
Debian's PyTorch and the newest from bench/.venv, in the same run; and the cost of
--checkpoint-every 100 on training, as the checkpoints' share of the steps' time and as the
wall-time difference of the same steps with and without. Standard library only.

Both sides' loads are timed the same way, each in a fresh process, as a user resuming meets
it: dtrain's by `dtrain train --resume` (its "loaded in" figure: find the newest set, verify
every CRC-32, load parameters and state), PyTorch's by `torch_ckpt.py --load-only`
(torch.load and both load_state_dict calls, model and Adam built first), --reps processes
each (median). The files were written by the same run just before, so both read from the
page cache. Writes are timed in one process on both sides (dtrain: --reps checkpoints of one
run, one after each step; PyTorch: --reps torch.save + fsync in a loop). The summary prints
dtrain's time over each PyTorch's, medians, and the full range over the single loads and
writes: dtrain's fastest over their slowest to dtrain's slowest over their fastest."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import benchlib

CONVNET = os.path.join(benchlib.ROOT, "examples", "convnet.ini")


def dtrain(build, args, env):
    cmd = [os.path.join(build, "dtrain"), "train", CONVNET, "--threads", "1", "--no-progress"]
    r = subprocess.run(cmd + args, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        sys.exit("dtrain failed: %s\n%s" % (" ".join(cmd + args), r.stdout + r.stderr))
    return r.stdout + r.stderr


def torch_json(cmd, env):
    """The JSON line a torch_ckpt.py run prints, or RuntimeError with the end of its stderr."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-200:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def ratio_lines(rows):
    """dtrain's write and load times over each PyTorch's: medians, and the full range over
    the single measurements (dtrain's fastest over their slowest to its slowest over their
    fastest)."""
    d = rows[0]
    out = []
    for what, med, each in (("write", "save_s", "saves"), ("load", "load_s", "loads")):
        parts = []
        for r in rows[1:]:
            if "missing" in r:
                continue
            theirs = r.get(each) or [r[med]]
            parts.append("%s %.2fx (range %.2f-%.2fx)" % (
                r["peer"], d[med] / r[med], min(d[each]) / max(theirs),
                max(d[each]) / min(theirs)))
        if parts:
            out.append("dtrain %s / PyTorch's, medians: %s" % (what, "; ".join(parts)))
    return out


def writes(out):
    """(bytes, seconds) of every checkpoint the run reported."""
    return [(float(mb) * 1e6, float(s)) for mb, s in
            re.findall(r"checkpoint of step \d+ written to \S+ \(([0-9.]+) MB, ([0-9.]+) s\)", out)]


def epoch_seconds(out):
    return sum(float(s) for s in re.findall(r"samples/s\s+\(([0-9.]+) s\)", out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--steps", type=int, default=500, help="steps of the overhead runs")
    ap.add_argument("--reps", type=int, default=7,
                    help="writes, and loads in fresh processes, per side (median; --quick: 3)")
    ap.add_argument("--quick", action="store_true", help="check the scripts only")
    a = ap.parse_args()
    steps = 20 if a.quick else a.steps
    reps = 3 if a.quick else a.reps
    if reps < 1:
        ap.error("--reps: at least 1")
    every = 5 if a.quick else 100
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    tmp = tempfile.mkdtemp(prefix="dtrain-bench-ckpt-")
    rows = []
    try:
        # Write: a checkpoint after each of `reps` steps; load: `reps` resumes of the newest,
        # each a fresh process.
        out = dtrain(a.build, ["--max-steps", str(reps), "--checkpoint-dir", tmp + "/w",
                               "--checkpoint-every", "1", "--keep-checkpoints", str(reps)], env)
        w = writes(out)
        loads = []
        for _ in range(reps):
            o = dtrain(a.build, ["--max-steps", str(reps), "--epochs", "1", "--resume",
                                 tmp + "/w"], env)
            loads.append(float(re.search(r"loaded in ([0-9.]+) s", o).group(1)))
        rows.append({"peer": "dtrain", "save_s": statistics.median(s for _, s in w),
                     "load_s": statistics.median(loads), "bytes": w[-1][0],
                     "saves": [s for _, s in w], "loads": loads})
        for peer in benchlib.torch_peers():
            if peer.missing:
                rows.append({"peer": peer.label, "missing": peer.missing})
                continue
            script = os.path.join(benchlib.HERE, "torch_ckpt.py")
            try:
                d = torch_json([peer.python, script, "--dir", tmp, "--reps", str(reps)], env)
                fresh = [torch_json([peer.python, script, "--dir", tmp, "--load-only"],
                                    env)["load_s"] for _ in range(reps)]
            except RuntimeError as e:
                rows.append({"peer": peer.label, "missing": "failed: %s" % e})
                continue
            rows.append({"peer": peer.label, "save_s": d["save_s"],
                         "load_s": statistics.median(fresh), "bytes": d["bytes"],
                         "saves": d.get("saves"), "loads": fresh,
                         "load_warm_s": d["load_warm_s"]})
        # Overhead: the same steps with and without --checkpoint-every.
        base = dtrain(a.build, ["--max-steps", str(steps), "--epochs", "1"], env)
        withc = dtrain(a.build, ["--max-steps", str(steps), "--epochs", "1", "--checkpoint-dir",
                                 tmp + "/o", "--checkpoint-every", str(every)], env)
        ck = sum(s for _, s in writes(withc))
        t_base, t_with = epoch_seconds(base), epoch_seconds(withc)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("checkpoint of the ConvNet (1,199,882 parameters, Adam): median of %d; each load "
          "in a fresh process (dtrain --resume, torch_ckpt.py --load-only), the writes in "
          "one" % reps)
    print("%-28s %10s %10s %12s" % ("", "write ms", "load ms", "bytes"))
    for r in rows:
        if "missing" in r:
            print("%-28s %s" % (r["peer"], r["missing"]))
        else:
            print("%-28s %10.1f %10.1f %12d" % (r["peer"], r["save_s"] * 1e3, r["load_s"] * 1e3,
                                                 r["bytes"]))
    for line in ratio_lines(rows):
        print(line)
    warm = ["%s %.1f ms" % (r["peer"], r["load_warm_s"] * 1e3) for r in rows
            if "load_warm_s" in r]
    if warm:
        print("PyTorch's load repeated in one warm process (for reference, not compared): "
              + "; ".join(warm))
    print("--checkpoint-every %d over %d steps: %d checkpoints took %.3f s of %.2f s of steps "
          "(%.2f%%); wall %.2f s with, %.2f s without (%+.1f%%, noise included)"
          % (every, steps, steps // every, ck, t_with, 100 * ck / t_with, t_with, t_base,
             100 * (t_with - t_base) / t_base))
    os.makedirs(os.path.join(benchlib.HERE, "out"), exist_ok=True)
    with open(os.path.join(benchlib.HERE, "out", "ckpt.jsonl"), "a") as f:
        f.write(json.dumps({"rows": rows, "every": every, "steps": steps, "ckpt_s": ck,
                            "with_s": t_with, "without_s": t_base}) + "\n")


if __name__ == "__main__":
    main()
