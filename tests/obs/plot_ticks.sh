#!/bin/sh
# plot_ticks.sh PYTHON — the ticks of `dtrain plot`'s charts read as a person reads them
# (tests/obs/svg_ticks.py checks each axis: round values, 1, 2 or 5 x 10^k apart; no label
# twice; 125k / 1.2M for large numbers; accuracy inside [0, 1]; counts on whole numbers;
# the data inside the axes). The files are written here in the format dtrain writes them
# (cmd_train.c's metrics lines, bench-comm's --json lines) with the figures that once drew
# "468 469 469 469 470" on a one-epoch step axis, "97805" five times on its throughput axis
# and an accuracy axis up to 1.34: one epoch of 469 steps, then three epochs.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
PYTHON=${1:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-ticks-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# One epoch, a loss logged every 50 steps (--log-every 50), then the epoch's line and the
# phase report's.
cat >"$tmp/one.jsonl" <<'JSON'
{"event":"step","epoch":1,"step":50,"samples":6400,"loss":1.2545454545454544,"lr":0.001}
{"event":"step","epoch":1,"step":100,"samples":12800,"loss":0.8624999999999998,"lr":0.001}
{"event":"step","epoch":1,"step":150,"samples":19200,"loss":0.6571428571428571,"lr":0.001}
{"event":"step","epoch":1,"step":200,"samples":25600,"loss":0.5307692307692307,"lr":0.001}
{"event":"step","epoch":1,"step":250,"samples":32000,"loss":0.44516129032258056,"lr":0.001}
{"event":"step","epoch":1,"step":300,"samples":38400,"loss":0.3833333333333333,"lr":0.001}
{"event":"step","epoch":1,"step":350,"samples":44800,"loss":0.3365853658536585,"lr":0.001}
{"event":"step","epoch":1,"step":400,"samples":51200,"loss":0.3,"lr":0.001}
{"event":"step","epoch":1,"step":450,"samples":57600,"loss":0.27058823529411763,"lr":0.001}
{"event":"epoch","epoch":1,"steps":469,"train_loss":0.52,"test_loss":0.46,"test_accuracy":0.8412,"samples_per_s":97805.3,"epoch_s":0.61}
{"event":"phases","steps":469,"straggler":0,"ranks":[{"rank":0,"data_ms":0.1,"forward_ms":0.3,"backward_ms":0.5,"comm_ms":0,"optim_ms":0.1,"bubble_ms":0,"comm_in_flight_ms":0}]}
JSON
# Three epochs: accuracy from 0.651, throughput about 208k samples/s.
cat >"$tmp/three.jsonl" <<'JSON'
{"event":"step","epoch":1,"step":200,"samples":25600,"loss":0.5307692307692307,"lr":0.001}
{"event":"step","epoch":1,"step":400,"samples":51200,"loss":0.3,"lr":0.001}
{"event":"epoch","epoch":1,"steps":469,"train_loss":0.5,"test_loss":0.45,"test_accuracy":0.651,"samples_per_s":208412.2,"epoch_s":0.3}
{"event":"step","epoch":2,"step":600,"samples":76800,"loss":0.2090909090909091,"lr":0.001}
{"event":"step","epoch":2,"step":800,"samples":102400,"loss":0.16046511627906976,"lr":0.001}
{"event":"epoch","epoch":2,"steps":938,"train_loss":0.4,"test_loss":0.35,"test_accuracy":0.7813,"samples_per_s":205113.9,"epoch_s":0.3}
{"event":"step","epoch":3,"step":1000,"samples":128000,"loss":0.12999999999999998,"lr":0.001}
{"event":"step","epoch":3,"step":1200,"samples":153600,"loss":0.10952380952380952,"lr":0.001}
{"event":"step","epoch":3,"step":1400,"samples":179200,"loss":0.09452054794520548,"lr":0.001}
{"event":"epoch","epoch":3,"steps":1407,"train_loss":0.3,"test_loss":0.25,"test_accuracy":0.8342,"samples_per_s":210877.4,"epoch_s":0.3}
JSON
# Millions of samples a second (an axis in M), and an accuracy that ends near 1.
sed -e 's/"samples_per_s":2\([0-9]*\)\./"samples_per_s":12\1./' \
    -e 's/"test_accuracy":0.8342/"test_accuracy":0.9921/' "$tmp/three.jsonl" >"$tmp/fast.jsonl"
# bench-comm --json: sizes from 8 bytes to 64 MB, logarithmic axes.
: >"$tmp/comm.jsonl"
for size in 8 64 512 4096 32768 262144 2097152 16777216 67108864; do
    for alg in ring tree; do
        bw=$(awk -v s="$size" -v a="$alg" 'BEGIN { b = s / 2e5; if (b > 12) b = 12;
            if (a == "tree") b *= 0.6; printf "%.6g", b }')
        printf '{"ranks": 4, "size": %s, "count": %s, "type": "float32", "operation": "allreduce", "algorithm": "%s", "time_us": 10.000, "algbw_GBps": %s, "busbw_GBps": %s, "wrong": 0, "iters": 10, "parallel_ratio": 1.900, "mem_bound_GBps": 20.0000, "gap_ms": 0.000}\n' \
            "$size" "$((size / 4))" "$alg" "$bw" "$bw" >>"$tmp/comm.jsonl"
    done
done

for k in one three fast comm; do
    if ! "$DTRAIN" plot "$tmp/$k.jsonl" -o "$tmp/$k.svg" >"$tmp/$k.out" 2>&1; then
        echo "FAIL plot $k: exit status $?"; sed 's/^/  /' "$tmp/$k.out"; fail=1
        continue
    fi
    data="$tmp/$k.jsonl"
    [ "$k" = comm ] && data=
    # shellcheck disable=SC2086
    "$PYTHON" "$HERE/svg_ticks.py" "$tmp/$k.svg" $data || fail=1
done
[ $fail -eq 0 ] && echo "ok: ticks"
exit $fail
