#!/bin/sh
# tp_overlap_netns.sh BUILD_DIR [RATES] [REPS] — what the overlap of tensor parallelism's
# backward sums buys over a link that moves bytes without the ranks' CPUs doing the copy: the
# GPT nano (bench/gpt_nano.ini, batch 8, evaluation off) at tp 2 on two network-namespace
# hosts (tests/net/hosts.sh) joined by a link shaped to each rate (default "10gbit 3gbit
# 1gbit"), one rank and one BLAS thread per host, `parallel.overlap` on and off alternating,
# REPS runs each (default 3). On shared memory (bench/gpt_layouts.sh's "tp 2, overlap off"
# row) Open MPI's copy needs both ranks' CPUs, which the products they would hide behind keep
# busy; over TCP the kernel sends, but on these 2 cores its TCP stack runs on the same CPUs
# as the ranks, so this is not a NIC either: the figures say what this machine can show.
# Per run: the time per step from its "epoch" metrics record (training only) and the phase
# table's backward (where the tp sums are waited for). Each run is a JSON line of
# bench/out/tp-overlap-netns-TIME.jsonl as it ends, each rate's medians a summary line after
# its runs; the table at the end is bench/summarise.py's of that file. Needs root, ip, tc and
# unshare. LAYOUT (default "--tp 2") gives another layout whose overlap parallel.overlap
# sets: LAYOUT="--dp 2 --zero 3" measures ZeRO-3's prefetch of each layer's parameters.
set -u
build=${1:?usage: bench/tp_overlap_netns.sh BUILD_DIR [RATES] [REPS]}
rates=${2:-10gbit 3gbit 1gbit}
reps=${3:-3}
steps=${STEPS:-8}
layout=${LAYOUT:---tp 2}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_env.sh"
trap 'hosts_down; rm -rf "$work"' EXIT
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tpnet-XXXXXX") || exit 1
# gpt_nano.ini evaluates every 250 steps: a run of a few steps turns evaluation off, and
# dtrain refuses a config whose eval_every would then mean nothing, so the key goes.
sed -e 's/^eval_every = .*/eval = off/' "$here/gpt_nano.ini" >"$work/nano.ini"
mkdir -p "$here/out"
out=$here/out/tp-overlap-netns-$(date -u +%Y%m%d-%H%M%S).jsonl
/usr/bin/python3 - "$out" "$(nproc)" "$("$DTRAIN" --version)" "$steps" "$reps" "$root" \
    "$layout" <<'PY'
import json, subprocess, sys
out, cpus, version, steps, reps, root, layout = sys.argv[1:]
git = lambda *a: subprocess.run(["git", *a], cwd=root, capture_output=True, text=True).stdout
commit = git("rev-parse", "--short", "HEAD").strip() + ("+" if git("status", "--porcelain",
                                                                    "--untracked-files=no")
                                                         else "")
cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
            if ln.startswith("model name")), "?")
with open(out, "w") as f:
    f.write(json.dumps({"event": "machine", "cpu": cpu, "cpus": int(cpus), "commit": commit,
                        "dtrain": version, "model": "nano %s, batch 8" % layout.lstrip("-"),
                        "layout": layout, "steps": int(steps),
                        "reps": int(reps)}) + "\n")
PY
echo "tp_overlap_netns: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $("$DTRAIN" --version)," \
    "nano $layout, batch 8, $steps steps, $reps runs per cell; JSON lines: $out"
for RATE in $rates; do
    hosts_up "$RATE" || exit 1
    rep=1
    while [ "$rep" -le "$reps" ]; do
        for ov in on off; do
            m=$work/metrics.jsonl
            rm -f "$m"
            # shellcheck disable=SC2086 # the layout's options, one word each
            across "$DTRAIN" train "$work/nano.ini" $layout --threads 1 --no-progress \
                --max-steps "$steps" --batch 8 --set "parallel.overlap=$ov" --metrics "$m" \
                >"$work/train.out" 2>&1 ||
                { echo "training failed"; cat "$work/train.out"; exit 1; }
            bw=$(sed -n 's/^  backward  *\([0-9.]*\) .*/\1/p' "$work/train.out")
            /usr/bin/python3 - "$m" "$RATE" "$ov" "$bw" "$rep" "$out" <<'PY'
import json, sys
path, rate, ov, bw, rep, out = sys.argv[1:]
epoch = [json.loads(ln) for ln in open(path) if '"epoch"' in ln][-1]
ms = 1e3 * epoch["epoch_s"] / epoch["steps"]
print("%-7s overlap %-3s %8.1f ms per step   backward %8.1f ms" % (rate, ov, ms, float(bw)))
with open(out, "a") as f:
    f.write(json.dumps({"event": "run", "rate": rate, "overlap": ov, "rep": int(rep),
                        "ms_per_step": ms, "backward_ms": float(bw)}) + "\n")
PY
        done
        rep=$((rep + 1))
    done
    hosts_down
    /usr/bin/python3 - "$RATE" "$out" <<'PY'
import json, statistics, sys
rate, out = sys.argv[1:]
runs = [r for r in map(json.loads, open(out)) if r["event"] == "run" and r["rate"] == rate]
cell = {}
for ov in ("on", "off"):
    v = [r for r in runs if r["overlap"] == ov]
    ms = [r["ms_per_step"] for r in v]
    cell[ov] = {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "n": len(ms),
                "backward_ms": statistics.median(r["backward_ms"] for r in v)}
with open(out, "a") as f:
    f.write(json.dumps({"event": "summary", "rate": rate, "on": cell["on"], "off": cell["off"],
                        "on_over_off": cell["on"]["median"] / cell["off"]["median"]}) + "\n")
PY
done
echo
/usr/bin/python3 "$here/summarise.py" "$out"
