#!/bin/sh
# plan_netns.sh BUILD_DIR — the cost model (dtrain plan) against measured steps, on two
# network-namespace hosts (tests/net/hosts.sh) at two link rates. For each model, a one-process
# run gives its computation per step (data + forward + backward + optimizer: no link is used);
# bench-comm across the hosts measures the all-reduce at every size with that much computation
# spun before each call (--gap: the link idles between steps as in training); dtrain plan
# predicts the data-parallel step's gradient all-reduce from it, each bucket at its size; and
# the model trains across the hosts with overlap off (so all of the all-reduce is waited for)
# to give the measured communication per step (the phase table's comm row: the all-reduce plus
# the step's small loss exchange). Needs root. Prints one line per case.
set -u
build=${1:?usage: bench/plan_netns.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_env.sh"
trap 'hosts_down' EXIT
# compute_ms CFG STEPS: one process's computation per step (the phase table's rows but comm).
compute_ms() {
    "$DTRAIN" train "$1" --threads 1 --no-progress --max-steps "$2" --epochs 1 \
        --set train.eval=off 2>&1 |
        awk '$1 ~ /^(data|forward|backward|optimizer)$/ { s += $2 } END { printf "%.1f", s }'
}
for RATE in 1gbit 200mbit; do
    hosts_up || exit 1
    for model in mlp:examples/mlp.ini:60 convnet:examples/convnet.ini:15; do
        name=${model%%:*} rest=${model#*:}
        cfg=$root/${rest%%:*} steps=${rest#*:}
        gap=$(compute_ms "$cfg" "$steps")
        across "$DTRAIN" bench-comm --ops allreduce --algos auto --min-bytes 1K --max-bytes 16M \
            --gap "$gap" --json "$tmp_hosts/link_$name.jsonl" >/dev/null 2>&1 ||
            { echo "bench-comm failed"; exit 1; }
        "$DTRAIN" plan "$cfg" --ranks 2 --from "$tmp_hosts/link_$name.jsonl" >"$tmp_hosts/plan.out"
        pred=$(sed -n 's/^  total .* \([0-9.]*\) ms$/\1/p' "$tmp_hosts/plan.out")
        link=$(sed -n 's/.*link \([0-9.]*\) GB\/s.*latency \([0-9.]*\) us.*/\1 GB\/s, \2 us/p' \
            "$tmp_hosts/plan.out")
        across "$DTRAIN" train "$cfg" --threads 1 --no-progress --max-steps "$steps" --epochs 1 \
            --set parallel.overlap=off --set train.eval=off >"$tmp_hosts/train.out" 2>&1 ||
            { echo "training failed"; cat "$tmp_hosts/train.out"; exit 1; }
        meas=$(sed -n 's/^  comm  *\([0-9.]*\) .*/\1/p' "$tmp_hosts/train.out")
        awk -v r="$RATE" -v n="$name" -v p="$pred" -v m="$meas" -v l="$link" -v g="$gap" 'BEGIN {
            printf "%-8s %-8s gap %6.1f ms  link %-22s predicted %9.3f ms  measured %9.3f ms  ratio %.2f\n",
                   r, n, g, l, p, m, m / p }'
    done
    # Tensor parallelism (tp 2, the MLP: one forward all-reduce of the logits per step): the
    # measured figure is the time in the tp group's collectives per step, from the trace. Its
    # collectives are small and come with the ranks in lock-step inside a step, so the link is
    # measured without --gap (after idle, the first small message here takes 1-3 ms: see
    # docs/BENCHMARKS.md).
    across "$DTRAIN" bench-comm --ops allreduce --algos auto --min-bytes 1K --max-bytes 64K \
        --json "$tmp_hosts/link_lockstep.jsonl" >/dev/null 2>&1 || { echo "bench-comm failed"; exit 1; }
    pred=$("$DTRAIN" plan "$root/examples/mlp.ini" --ranks 2 --tp 2 \
        --from "$tmp_hosts/link_lockstep.jsonl" | sed -n 's/^  total .* \([0-9.]*\) ms$/\1/p')
    across "$DTRAIN" train "$root/examples/mlp.ini" --tp 2 --threads 1 --no-progress \
        --max-steps 40 --epochs 1 --set train.eval=off --trace "$tmp_hosts/tp.json" \
        >"$tmp_hosts/tp.out" 2>&1 || { echo "tp training failed"; cat "$tmp_hosts/tp.out"; exit 1; }
    meas=$(/usr/bin/python3 - "$tmp_hosts/tp.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
tp = [e["dur"] for e in ev if e.get("cat") == "comm" and e["pid"] == 0
      and e["args"]["group"] == "tp" and e["args"]["step"] > 0]
steps = {e["args"]["step"] for e in ev if e.get("cat") == "step"}
print("%.3f" % (sum(tp) / 1e3 / len(steps)))
PY
)
    awk -v r="$RATE" -v p="$pred" -v m="$meas" 'BEGIN {
        printf "%-8s %-8s %-27s predicted %9.3f ms  measured %9.3f ms  ratio %.2f\n",
               r, "mlp tp2", "", p, m, m / p }'
    hosts_down
done
