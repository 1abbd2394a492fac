#!/bin/sh
# cli_warmup.sh — where --compress-warmup N ends, under ddp and under ps (docs/COMPRESSION.md):
# the steps 0 .. N-1 exchange float32 and step N is the first compressed one. So with
# top-k:
#   - warm-up 5 over 5 steps writes the uncompressed run's weights byte for byte;
#   - warm-up 5 over 6 steps differs from the uncompressed 6 steps (step 5 compressed);
#   - warm-up 0 over 1 step differs from the uncompressed step (step 0 compressed).
# A warm-up one step too long (step N dense) passes the first check only.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-warmup-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"
. "$SRC/tests/support/expect.sh"

# expect_differ NAME A B: files A and B differ (both written).
expect_differ() {
    if [ ! -s "$2" ] || [ ! -s "$3" ]; then
        echo "FAIL $1: $2 or $3 was not written"; fail=1
    elif cmp -s "$2" "$3"; then
        echo "FAIL $1: $(basename "$2") and $(basename "$3") are identical: the step was not compressed"
        fail=1
    else
        echo "ok $1: $(basename "$2") and $(basename "$3") differ"
    fi
}

# ddp on 2 ranks; ps on 3 (2 workers, 1 server).
for s in ddp ps; do
    if [ $s = ddp ]; then NP=2; else NP=3; fi
    RUN="--strategy $s --no-progress --comm-timeout 30"
    for n in 1 5 6; do
        expect_ok "${s}_none$n" "$MPIRUN" -np $NP "$DTRAIN" train "$MLP" $RUN --max-steps $n \
            --save-weights "$tmp/${s}_none$n.st"
    done
    for wn in 5:5 5:6 0:1; do
        w=${wn%%:*} n=${wn##*:}
        expect_ok "${s}_warm${w}_$n" "$MPIRUN" -np $NP "$DTRAIN" train "$MLP" $RUN --max-steps $n \
            --compress topk:0.01 --compress-warmup $w --save-weights "$tmp/${s}_warm${w}_$n.st"
    done
    expect_same "${s}_warmup_5_of_5_uncompressed" "$tmp/${s}_none5.st" "$tmp/${s}_warm5_5.st"
    expect_differ "${s}_step_5_compressed_after_warmup_5" "$tmp/${s}_none6.st" "$tmp/${s}_warm5_6.st"
    expect_differ "${s}_step_0_compressed_without_warmup" "$tmp/${s}_none1.st" "$tmp/${s}_warm0_1.st"
done

[ $fail -eq 0 ] && echo "cli_warmup: all checks passed"
exit $fail
