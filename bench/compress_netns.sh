#!/bin/sh
# compress_netns.sh BUILD_DIR [RATES] — when gradient compression pays: ddp's step time with
# each --compress mode on two network-namespace hosts (tests/net/hosts.sh) joined by a link
# shaped to each rate (default "10gbit 1gbit 200mbit"), one rank and one BLAS thread per host.
# Per model and mode: `dtrain train CONFIG --max-steps N --compress MODE --set train.eval=off`
# across the hosts, and the time per step from its "epoch" metrics record (epoch_s / steps:
# training only); beside it the bytes one rank sends per step (its "comm" record). The
# namespaces share this machine's cores, so computation runs at the 2-process speed on both
# sides. Needs root, ip, tc and unshare. Prints one line per (rate, model, mode).
set -u
build=${1:?usage: bench/compress_netns.sh BUILD_DIR [RATES]}
rates=${2:-10gbit 1gbit 200mbit}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns_env.sh"
trap 'hosts_down' EXIT
echo "compress_netns: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $("$DTRAIN" --version)"
for RATE in $rates; do
    hosts_up || exit 1
    for model in mlp:examples/mlp.ini:200 convnet:examples/convnet.ini:20; do
        name=${model%%:*} rest=${model#*:}
        cfg=$root/${rest%%:*} steps=${rest#*:}
        for mode in none fp16 topk:0.01 powersgd:4; do
            m=$tmp_hosts/metrics.jsonl
            rm -f "$m"
            across "$DTRAIN" train "$cfg" --threads 1 --no-progress --max-steps "$steps" \
                --epochs 1 --set train.eval=off --compress "$mode" --metrics "$m" \
                >"$tmp_hosts/train.out" 2>&1 ||
                { echo "training failed"; cat "$tmp_hosts/train.out"; exit 1; }
            /usr/bin/python3 - "$m" "$RATE" "$name" "$mode" <<'PY'
import json, sys
path, rate, name, mode = sys.argv[1:]
epoch = comm = None
for line in open(path):
    r = json.loads(line)
    if r.get("event") == "epoch":
        epoch = r
    elif r.get("event") == "comm":
        comm = r
ms = 1e3 * epoch["epoch_s"] / epoch["steps"]
print("%-8s %-8s %-11s %8.2f ms per step   %8.4f MB sent per step per rank"
      % (rate, name, mode, ms, comm["wire_bytes_per_step"] / 1e6))
PY
        done
    done
    hosts_down
done
