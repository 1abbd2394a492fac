#!/bin/sh
# launch_kill.sh — dtrain launch against real failures: kill -9 of a random rank at a random
# step (three trials drawn from a fixed seed), each restarted from the newest checkpoint and
# ending with the weights of an uninterrupted run, byte for byte; and a rank that fails
# every start, dropped with --min-ranks 1: the job finishes on one rank with the global
# batch kept and the uninterrupted run's final test loss (within 1e-5).
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-launch-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"
args="$MLP --max-steps 12 --epochs 1 --batch 32 --threads 1 --no-progress --checkpoint-every 3"
launcher="${MPIRUN:-mpirun} --oversubscribe"

ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; fail=1; }
show() { sed 's/^/  /' "$1"; }

# The uninterrupted run: 2 ranks, its weights and final test loss.
"$DTRAIN" launch -n 2 --mpirun "$launcher" -- $args --checkpoint-dir "$tmp/ref" \
    --save-weights "$tmp/ref.st" --metrics "$tmp/ref.json" >"$tmp/ref.out" 2>&1 ||
    { bad "uninterrupted run: exit $?"; show "$tmp/ref.out"; }

# Three kills: rank and step drawn from a fixed seed (7: both ranks are killed).
awk 'BEGIN { srand(7); for (i = 0; i < 3; i++) print int(rand() * 2), 2 + int(rand() * 10) }' \
    >"$tmp/draws"
trial=0
while read -r rank step; do
    trial=$((trial + 1))
    d="$tmp/t$trial"
    DTRAIN_TEST_KILL="$rank:$step:$tmp/marker$trial" "$DTRAIN" launch -n 2 --mpirun "$launcher" \
        -- $args --checkpoint-dir "$d" --save-weights "$d.st" </dev/null >"$d.out" 2>&1
    code=$?
    if [ $code -ne 0 ] || ! grep -q 'restarts: 1$' "$d.out"; then
        bad "trial $trial (rank $rank killed at step $step): exit $code"; show "$d.out"
    elif cmp -s "$tmp/ref.st" "$d.st"; then
        ok "trial $trial: rank $rank killed at step $step, restarted: $(grep 'steps recomputed' "$d.out")," \
            "weights identical to the uninterrupted run's"
    else
        bad "trial $trial (rank $rank killed at step $step): weights differ"; show "$d.out"
    fi
done <"$tmp/draws"

# Rank 1 fails every start at step 7: after one restart that fails the same way the job goes
# on with one rank (checkpoint of step 6, --global-batch 64).
DTRAIN_TEST_KILL=1:7 "$DTRAIN" launch -n 2 --min-ranks 1 --mpirun "$launcher" -- $args \
    --checkpoint-dir "$tmp/shrink" --metrics "$tmp/shrink.json" >"$tmp/shrink.out" 2>&1
code=$?
if [ $code -eq 0 ] && grep -q 'ranks at the end: 1 (of 2)' "$tmp/shrink.out"; then
    ok "shrink: $(grep 'dropping to' "$tmp/shrink.out")"
else
    bad "shrink: exit $code"; show "$tmp/shrink.out"
fi
want=$(sed -n 's/.*"test_loss":\([0-9.e-]*\).*/\1/p' "$tmp/ref.json" | tail -1)
got=$(sed -n 's/.*"test_loss":\([0-9.e-]*\).*/\1/p' "$tmp/shrink.json" | tail -1)
if [ -n "$want" ] && [ -n "$got" ] &&
    awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d <= 1e-5 && d >= -1e-5) }'; then
    ok "shrink: final test loss $got on 1 rank, $want uninterrupted on 2"
else
    bad "shrink: final test loss '$got', uninterrupted '$want' (need within 1e-5)"
fi
exit $fail
