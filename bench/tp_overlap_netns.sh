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
# table's backward (where the tp sums are waited for). Prints one line per run and a median
# (min-max) line per (rate, overlap). Needs root, ip, tc and unshare.
set -u
build=${1:?usage: bench/tp_overlap_netns.sh BUILD_DIR [RATES] [REPS]}
rates=${2:-10gbit 3gbit 1gbit}
reps=${3:-3}
steps=${STEPS:-8}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_env.sh"
trap 'hosts_down; rm -rf "$work"' EXIT
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tpnet-XXXXXX") || exit 1
# gpt_nano.ini evaluates every 250 steps: a run of a few steps turns evaluation off, and
# dtrain refuses a config whose eval_every would then mean nothing, so the key goes.
sed -e 's/^eval_every = .*/eval = off/' "$here/gpt_nano.ini" >"$work/nano.ini"
echo "tp_overlap_netns: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $("$DTRAIN" --version)," \
    "nano tp 2, batch 8, $steps steps, $reps runs per cell"
: >"$work/runs"
for RATE in $rates; do
    hosts_up "$RATE" || exit 1
    rep=1
    while [ "$rep" -le "$reps" ]; do
        for ov in on off; do
            m=$work/metrics.jsonl
            rm -f "$m"
            across "$DTRAIN" train "$work/nano.ini" --tp 2 --threads 1 --no-progress \
                --max-steps "$steps" --batch 8 --set "parallel.overlap=$ov" --metrics "$m" \
                >"$work/train.out" 2>&1 ||
                { echo "training failed"; cat "$work/train.out"; exit 1; }
            bw=$(sed -n 's/^  backward  *\([0-9.]*\) .*/\1/p' "$work/train.out")
            /usr/bin/python3 - "$m" "$RATE" "$ov" "$bw" "$work/runs" <<'PY'
import json, sys
path, rate, ov, bw, runs = sys.argv[1:]
epoch = [json.loads(ln) for ln in open(path) if '"epoch"' in ln][-1]
ms = 1e3 * epoch["epoch_s"] / epoch["steps"]
print("%-7s overlap %-3s %8.1f ms per step   backward %8.1f ms" % (rate, ov, ms, float(bw)))
with open(runs, "a") as f:
    f.write("%s %s %.3f %s\n" % (rate, ov, ms, bw))
PY
        done
        rep=$((rep + 1))
    done
    hosts_down
done
/usr/bin/python3 - "$work/runs" <<'PY'
import statistics, sys
cells = {}
for ln in open(sys.argv[1]):
    rate, ov, ms, bw = ln.split()
    cells.setdefault(rate, {}).setdefault(ov, []).append((float(ms), float(bw)))
print("\nrate     overlap  ms per step, median (min-max)  backward ms, median  on / off step")
for rate, c in cells.items():
    med = {ov: statistics.median(s for s, _ in v) for ov, v in c.items()}
    for ov in ("on", "off"):
        v = c[ov]
        print("%-8s %-7s  %8.1f (%.1f-%.1f)%s  %8.1f%s" % (
            rate, ov, med[ov], min(s for s, _ in v), max(s for s, _ in v), " " * 12,
            statistics.median(b for _, b in v),
            "       %.3f" % (med["on"] / med["off"]) if ov == "on" else ""))
PY
