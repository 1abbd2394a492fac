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
# Local SGD: the parameters' all-reduce (the MLP's 407,080 bytes) every 4 steps: a quarter
# of ddp's bytes and time per step (0.10177 MB), and each step's exchange of 4 doubles.
expect_ok localsgd "$DTRAIN" plan "$MLP" --ranks 2 $LINK --strategy localsgd --sync-every 4
expect_row localsgd 'localsgd: all-reduce of the parameters, 1/4 per step +0\.102 MB'
expect_row localsgd "localsgd: each step's loss and non-finite finding +0\.000 MB"
# Strategies the plan does not model are refused, saying what it leaves out.
expect_fail fedavg 'dtrain plan: --strategy fedavg: its rounds all-gather' \
    "$DTRAIN" plan "$MLP" --ranks 2 $LINK --strategy fedavg
# A layout that does not fit --ranks says which way it misses.
expect_fail layout_exceeds 'dtrain plan: tp 1 x pp 4 = 4 ranks exceed --ranks 2$' \
    "$DTRAIN" plan "$MLP" --ranks 2 $LINK --pp 4
expect_fail layout_short 'dtrain plan: dp 2 x tp 1 x pp 1 = 2 does not fill --ranks 3$' \
    "$DTRAIN" plan "$MLP" --ranks 3 $LINK --dp 2
expect_fail ranks_zero "dtrain plan: --ranks: '0' is not a number of ranks from 1 to 16777216" \
    "$DTRAIN" plan "$MLP" --ranks 0 $LINK
# Numbers are read whole: a trailing letter, infinity or NaN is refused, not read in part.
expect_fail ranks_suffix "dtrain plan: --ranks: '4x' is not a number of ranks" \
    "$DTRAIN" plan "$MLP" --ranks 4x $LINK
expect_fail bandwidth_inf "dtrain plan: --bandwidth: 'inf' is not a bandwidth in GB/s > 0" \
    "$DTRAIN" plan "$MLP" --ranks 2 --bandwidth inf --latency 5
expect_fail bandwidth_suffix "dtrain plan: --bandwidth: '10x' is not a bandwidth in GB/s > 0" \
    "$DTRAIN" plan "$MLP" --ranks 2 --bandwidth 10x --latency 5
expect_fail latency_nan "dtrain plan: --latency: 'nan' is not a latency in microseconds >= 0" \
    "$DTRAIN" plan "$MLP" --ranks 2 --bandwidth 10 --latency nan

# A measured link (--from): bench-comm rows of the auto all-reduce on 2 ranks, 100 us at 1 KiB
# and 1,100 us at 1 MiB. alpha = 100 / 2(n-1) = 50 us; each message's time is the curve's,
# linear between the sizes: the MLP's 407,080 bytes take 100 + 1000 (407,080 - 1,024) /
# 1,047,552 = 487.62 us on 2 ranks; on 4, the part beyond the latency (387.62 us) grows by
# (3/4) / (1/2) and the latency to 6 alpha: 581.43 + 300 = 881.43 us.
row() { printf '{"ranks": 2, "size": %s, "operation": "allreduce", "algorithm": "%s", "time_us": %s, "busbw_GBps": 1, "gap_ms": %s}\n' "$@"; }
{ row 1024 auto 100 5; row 1048576 auto 1100 5; row 1024 ring 999 5; } >"$tmp/link.jsonl"
expect_ok from2 "$DTRAIN" plan "$MLP" --ranks 2 --from "$tmp/link.jsonl"
expect_row from2 'dp all-reduce of the gradients \(1 bucket\) +0\.407 MB +0\.488 ms'
expect_row from2 'latency 50\.0 us'
expect_row from2 '2 sizes measured on 2 ranks, --gap 5\.0 ms'
expect_ok from4 "$DTRAIN" plan "$MLP" --ranks 4 --from "$tmp/link.jsonl"
expect_row from4 'dp all-reduce of the gradients \(1 bucket\) +0\.407 MB +0\.881 ms'
# ddp's buckets: with a first bucket of 0.001 MiB, fc2's 5,160 bytes close it and fc1's
# 401,920 are the second: 0.61062 + 2 x 6 x 10 us = 0.731 ms; from the curve on 2 ranks
# 103.95 + 482.70 us = 0.587 ms (each bucket at its size).
expect_ok buckets "$DTRAIN" plan "$MLP" --ranks 4 $LINK --set parallel.first_bucket_mb=0.001
expect_row buckets 'dp all-reduce of the gradients \(2 buckets\) +0\.407 MB +0\.731 ms'
expect_ok buckets_from "$DTRAIN" plan "$MLP" --ranks 2 --from "$tmp/link.jsonl" \
    --set parallel.first_bucket_mb=0.001
expect_row buckets_from 'dp all-reduce of the gradients \(2 buckets\) +0\.407 MB +0\.587 ms'
# ZeRO-1: a reduce-scatter of the gradients and an all-gather of the parameters, each the
# buffer's 407,080 bytes and (n-1)/n S/B + (n-1) a = 0.30531 + 0.03 = 0.335 ms on 4 ranks:
# together the all-reduce's 0.671 ms.
expect_ok zero "$DTRAIN" plan "$MLP" --ranks 4 $LINK --zero 1
expect_row zero 'dp reduce-scatter of the gradients \(ZeRO-1\) +0\.407 MB +0\.335 ms'
expect_row zero 'dp all-gather of the parameters \(ZeRO-1\) +0\.407 MB +0\.335 ms'
expect_row zero 'total +0\.671 ms'
# --json: the same rows as JSON objects; a file it cannot write is refused before any row.
expect_ok json "$DTRAIN" plan "$MLP" --ranks 4 $LINK --json "$tmp/rows.jsonl"
if grep -q '^{"stage": -1, "group": "dp", "what": "dp all-reduce of the gradients (1 bucket)", "bytes": 407080, "ms": 0.6706' "$tmp/rows.jsonl" &&
    grep -q '^{"total_ms": 0.6706' "$tmp/rows.jsonl"; then
    echo "ok json: $(head -1 "$tmp/rows.jsonl")"
else
    echo "FAIL json: rows.jsonl holds:"; sed 's/^/  /' "$tmp/rows.jsonl"; fail=1
fi
expect_fail json_unwritable "dtrain plan: --json $tmp/no/such/dir/rows.jsonl: cannot be opened for writing: No such file" \
    "$DTRAIN" plan "$MLP" --ranks 4 $LINK --json "$tmp/no/such/dir/rows.jsonl"
row 2048 auto 150 0 >>"$tmp/link.jsonl"
expect_fail from_mixed 'link.jsonl line 4: all-reduce rows of another rank count or --gap' \
    "$DTRAIN" plan "$MLP" --ranks 2 --from "$tmp/link.jsonl"

[ $fail -eq 0 ] && echo "plan: all checks passed"
exit $fail
