#!/bin/sh
# cli_tensorboard.sh — `dtrain train --tensorboard DIR` writes one event file whose every
# record is well framed (TFRecord's masked CRC-32C) and unpacks with protobuf-c's own reader
# (tb_read): the file version first, then the scalars with the run's values (the loss of each
# step, the epoch's test accuracy as printed, the phase times).
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
TB_READ=${1:?the tb_read program}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tb-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
"$DTRAIN" train "$SRC/examples/mlp.ini" --epochs 1 --max-steps 30 --batch 256 --threads 1 \
    --log-every 1 --no-progress --tensorboard "$tmp/tb" >"$tmp/train.out" 2>&1 ||
    { echo "FAIL train: exit $?"; sed 's/^/  /' "$tmp/train.out"; exit 1; }
files=$(ls "$tmp/tb" | grep -c '^events\.out\.tfevents\.')
[ "$files" = 1 ] && echo "ok one event file" || { echo "FAIL: $files event files"; fail=1; }
"$TB_READ" "$tmp"/tb/events.out.tfevents.* >"$tmp/read.out" 2>&1 ||
    { echo "FAIL tb_read: exit $?"; sed 's/^/  /' "$tmp/read.out"; fail=1; }
check() { # check NAME REGEX COUNT
    n=$(grep -Ec "$2" "$tmp/read.out")
    [ "$n" = "$3" ] && echo "ok $1: $n records like $(grep -E "$2" "$tmp/read.out" | head -1)" ||
        { echo "FAIL $1: $n records match /$2/, expected $3"; fail=1; }
}
check version '^version brain\.Event:2$' 1
check step-loss '^train/loss [0-9]+ [0-9.]+$' 30
check learning-rate '^train/learning_rate [0-9]+ ' 30
check test-accuracy '^test/accuracy 30 0\.[0-9]+$' 1
check phases '^phases/(data|forward|backward|comm|optimizer|bubble)_ms 30 ' 6
# The values are the run's: step 7's loss as the log printed it.
want=$(sed -n 's/^epoch 1 step 7\/[0-9]* loss \([0-9.]*\).*/\1/p' "$tmp/train.out")
got=$(awk '$1 == "train/loss" && $2 == 7 { print $3 }' "$tmp/read.out")
# The file holds float32: within 1e-5 of the 6 printed digits.
[ -n "$want" ] && [ -n "$got" ] &&
    awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d < 1e-5 && d > -1e-5) }' &&
    echo "ok values: step 7's loss $got in the file, $want printed" ||
    { echo "FAIL values: step 7's loss '$got' in the file, '$want' printed"; fail=1; }
exit $fail
