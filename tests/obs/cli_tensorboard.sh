#!/bin/sh
# cli_tensorboard.sh — `dtrain train --tensorboard DIR` writes one event file whose every
# record is well framed (TFRecord's masked CRC-32C) and unpacks with protobuf-c's own reader
# (tb_read): the file version first, then the scalars with the run's values (the loss of each
# step, the epoch's test accuracy as printed, the phase times, and the run's named figures as
# the metrics file's "comm" record holds them).
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
TB_READ=${1:?the tb_read program}
PY=${2:?python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tb-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
"$DTRAIN" train "$SRC/examples/mlp.ini" --epochs 1 --max-steps 30 --batch 256 --threads 1 \
    --log-every 1 --no-progress --tensorboard "$tmp/tb" --metrics "$tmp/m.jsonl" \
    >"$tmp/train.out" 2>&1 ||
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
# Every figure of the comm record, as "comm/<name>" at the last step with the record's value
# (float32 in the file); nothing else under comm/.
"$PY" - "$tmp/m.jsonl" "$tmp/read.out" <<'EOF' || fail=1
import json, sys
comm = [r for r in map(json.loads, open(sys.argv[1])) if r.get("event") == "comm"][0]
figs = {k: v for k, v in comm.items()
        if k not in ("event", "strategy", "compress", "compress_warmup_steps")}
tb = {}
for line in open(sys.argv[2]):
    tag, *rest = line.split()
    if tag.startswith("comm/"):
        tb[tag[5:]] = (int(rest[0]), float(rest[1]))
bad = [k for k in sorted(set(figs) | set(tb))
       if k not in figs or k not in tb or tb[k][0] != 30
       or abs(tb[k][1] - figs[k]) > 1e-6 * max(1.0, abs(figs[k]))]
if not figs or bad:
    sys.exit("FAIL comm: scalars %s, comm record %s; differ: %s" % (tb, figs, bad or "none"))
print("ok comm: %d figures at step 30 (%s)" % (len(tb), ", ".join(sorted(tb))))
EOF
exit $fail
