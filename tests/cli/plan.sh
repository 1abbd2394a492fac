#!/bin/sh
# plan.sh — `dtrain plan` against the formulas it states (docs/USER_GUIDE.md), on the MLP
# (101,770 parameters: 407,080 gradient bytes) with B = 1 GB/s and a latency of 10 us:
#   ddp, 4 ranks: 2(n-1)/n S/B + 2(n-1) a = 0.61062 + 0.06 ms = 0.671 ms;
#   fp16 halves the bytes (203,540: 0.30531 + 0.06 = 0.365 ms);
#   ps, 4 workers over 1 server: the server's link carries 4 workers' pulls and pushes,
#   4 S/B + a each = 1.638 ms, 3.277 ms in all;
# and the bytes each compression mode is predicted to send are those a run reports
# (tests/compress/cli_compress.sh reads the same figures off real runs).
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-plan-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$SRC/tests/support/expect.sh"
MLP="$SRC/examples/mlp.ini"
LINK="--bandwidth 1 --latency 10"

# expect_row NAME REGEX: the last run's output ($tmp/NAME.out) has a line matching REGEX.
expect_row() {
    if grep -Eq "$2" "$tmp/$1.out"; then
        echo "ok $1: $(grep -E "$2" "$tmp/$1.out" | head -1 | tr -s ' ')"
    else
        echo "FAIL $1: no line matches /$2/ in:"; sed 's/^/  /' "$tmp/$1.out"; fail=1
    fi
}

expect_ok ddp "$DTRAIN" plan "$MLP" --ranks 4 $LINK
expect_row ddp 'dp all-reduce of the gradients \(1 bucket\) +0\.407 MB +0\.671 ms'
expect_ok fp16 "$DTRAIN" plan "$MLP" --ranks 4 $LINK --compress fp16
expect_row fp16 'dp fp16 all-reduce \(1 bucket\) +0\.204 MB +0\.365 ms'
expect_ok topk "$DTRAIN" plan "$MLP" --ranks 4 $LINK --compress topk:0.01
expect_row topk 'dp topk:0.01: all-gather .* +0\.008 MB'
expect_ok powersgd "$DTRAIN" plan "$MLP" --ranks 4 $LINK --compress powersgd:4
expect_row powersgd 'dp powersgd:4: .* +0\.017 MB'
expect_ok ps "$DTRAIN" plan "$MLP" --ranks 5 $LINK --strategy ps
expect_row ps 'ps pull: the parameters \(4 workers over 1 server\) +0\.407 MB +1\.638 ms'
expect_row ps 'total +3\.277 ms'
expect_fail ps_ranks 'ps needs --ranks N with N > --servers' \
    "$DTRAIN" plan "$MLP" --ranks 1 $LINK --strategy ps

[ $fail -eq 0 ] && echo "plan: all checks passed"
exit $fail
