#!/bin/sh
# check-accuracy.sh DTRAIN [--models "mlp convnet"] [--seeds "1 2 3"]
#
# The accuracy targets, on Fashion-MNIST with the example configs' defaults
# (their epochs, batch, optimizer and schedule; only train.seed changes):
#   examples/mlp.ini      test accuracy >= 0.85 within 2 epochs
#   examples/convnet.ini  test accuracy >= 0.90 within 2 epochs
# each on seeds 1, 2 and 3. "Within 2 epochs": the best test accuracy after epoch 1 or 2;
# a config that trains more than 2 epochs fails the check. Prints a table; exits 1 if any
# run misses its target or fails. `make check-accuracy` runs it (slow: each ConvNet seed
# takes minutes, about 145 s for its 2 epochs on 2 threads of a quiet 2-core machine; an
# MLP seed about 2 seconds).
set -u

usage() {
    echo "usage: check-accuracy.sh DTRAIN [--models \"mlp convnet\"] [--seeds \"1 2 3\"]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
DTRAIN=$1
shift
models="mlp convnet"
seeds="1 2 3"
while [ $# -gt 0 ]; do
    case $1 in
    --models) [ $# -ge 2 ] || usage; models=$2; shift 2 ;;
    --seeds) [ $# -ge 2 ] || usage; seeds=$2; shift 2 ;;
    *) usage ;;
    esac
done
if [ ! -x "$DTRAIN" ]; then
    echo "check-accuracy: $DTRAIN is not an executable (build first: make)" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-accuracy-XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

target() {
    case $1 in
    mlp) echo 0.85 ;;
    convnet) echo 0.90 ;;
    *) echo "check-accuracy: unknown model '$1' (mlp or convnet)" >&2; exit 2 ;;
    esac
}
for m in $models; do target "$m" >/dev/null || exit 2; done

rows="$tmp/rows"
: >"$rows"
failed=0
for m in $models; do
    want=$(target "$m")
    for s in $seeds; do
        log="$tmp/$m-$s.log"
        metrics="$tmp/$m-$s.jsonl"
        echo "check-accuracy: $m seed $s ..." >&2
        start=$(date +%s)
        "$DTRAIN" train "$root/examples/$m.ini" --seed "$s" --no-progress \
            --metrics "$metrics" >"$log" 2>&1
        code=$?
        secs=$(($(date +%s) - start))
        # One "test_accuracy":X per epoch record, in order.
        accs=$(grep '"event":"epoch"' "$metrics" 2>/dev/null |
            sed -n 's/.*"test_accuracy":\([0-9.eE+-]*\).*/\1/p' | tr '\n' ' ')
        result=$(echo "$accs" | awk -v want="$want" -v code="$code" '
            {
                n = NF; best = -1
                for (i = 1; i <= NF; i++) if ($i + 0 > best) best = $i + 0
            }
            END {
                if (code != 0) { print "-", "FAILED (dtrain exit " code ")"; exit }
                if (n == 0) { print "-", "FAILED (no epoch with a test accuracy)"; exit }
                if (n > 2) { printf "%.4f %s\n", best, "FAILED (" n " epochs, not within 2)"; exit }
                printf "%.4f %s\n", best, (best >= want ? "ok" : "FAILED (below target)")
            }')
        best=${result%% *}
        verdict=${result#* }
        e1=$(echo "$accs" | awk '{ if (NF >= 1) printf "%.4f", $1; else printf "-" }')
        e2=$(echo "$accs" | awk '{ if (NF >= 2) printf "%.4f", $2; else printf "-" }')
        printf '%-8s %4s  %7s  %7s  %7s  %6s  %5ss  %s\n' "$m" "$s" "$e1" "$e2" "$best" \
            "$want" "$secs" "$verdict" >>"$rows"
        if [ "$verdict" != "ok" ]; then
            failed=1
            echo "check-accuracy: $m seed $s: $verdict; dtrain's output:" >&2
            sed 's/^/  /' "$log" >&2
        fi
    done
done

printf '%-8s %4s  %7s  %7s  %7s  %6s  %6s  %s\n' model seed "epoch 1" "epoch 2" best target time result
cat "$rows"
if [ $failed -ne 0 ]; then
    echo "check-accuracy: FAILED"
    exit 1
fi
echo "check-accuracy: all runs reached their targets"
