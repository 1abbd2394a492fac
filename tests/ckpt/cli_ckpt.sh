#!/bin/sh
# cli_ckpt.sh — checkpoints from the command line (docs/checkpoint-format.md):
#   - a run killed after its checkpoint of step 8 and resumed ends with the same weights as
#     an uninterrupted run, byte for byte: one process, 2 ranks with ZeRO-1, 3 with ZeRO-3;
#   - ZeRO-3's set resumes in one process, ZeRO-1's under ZeRO-3 at 2 and 3 ranks, with the
#     uninterrupted run's next loss; --init-weights fills ZeRO-3's slices;
#   - a checkpoint written at dp 2 with ZeRO-1 resumes at dp 1, at tp 2 and at pp 2 with the
#     uninterrupted run's next loss (within 1e-5);
#   - --resume skips a corrupt and an incomplete newest set with a warning naming it, and an
#     empty directory starts from the beginning saying so (tests/cli/misconf.sh has the rest);
#   - a file-size limit fails the next checkpoint with a message and a non-zero exit, the
#     previous one stays valid; --checkpoint-on-error continue trains on;
#   - inspect verifies, export writes the same bytes twice, and the bytes --save-weights wrote
#     for the same step; it loads with --init-weights, eval gives the run's test loss, and
#     eval of a weights file says that a checkpoint is a directory.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-ckpt-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"
common="--max-steps 12 --epochs 1 --batch 32 --threads 1 --no-progress --log-every 1"

ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; fail=1; }
show() { sed 's/^/  /' "$1"; }

# run NAME EXPECT NP ARGS...: dtrain train (NP 0: without mpirun); EXPECT is ok (exit 0) or
# fail (any other exit).
run() {
    name=$1 expect=$2 np=$3
    shift 3
    if [ "$np" = 0 ]; then
        "$DTRAIN" train "$MLP" $common "$@" >"$tmp/$name.out" 2>&1
    else
        "$MPIRUN" -np "$np" --oversubscribe "$DTRAIN" train "$MLP" $common "$@" \
            >"$tmp/$name.out" 2>&1
    fi
    code=$?
    if { [ "$expect" = ok ] && [ $code -ne 0 ]; } || { [ "$expect" = fail ] && [ $code -eq 0 ]; }
    then
        bad "$name: exit status $code, expected $expect"; show "$tmp/$name.out"
    fi
}

has() { # has NAME FILE REGEX
    if grep -Eq "$3" "$2"; then ok "$1: $(grep -E "$3" "$2" | head -1)"
    else bad "$1: no line matches /$3/"; show "$2"; fi
}

same_file() { # same_file NAME A B
    if cmp -s "$2" "$3"; then ok "$1: identical bytes"; else bad "$1: $(cmp "$2" "$3" 2>&1 | head -1)"; fi
}

# The loss printed for step N of a run's log.
loss_at() { sed -n "s/^epoch 1 step $2\/[0-9]* loss \([0-9.]*\).*/\1/p" "$1" | head -1; }

close() { # close NAME A B: |A - B| <= 1e-5
    if [ -n "$2" ] && [ -n "$3" ] && awk -v a="$2" -v b="$3" 'BEGIN { d = a - b; exit !(d <= 1e-5 && d >= -1e-5) }'
    then ok "$1: $2 vs $3"; else bad "$1: '$2' vs '$3' (need within 1e-5)"; fi
}

# ---- bit-exact resume, one process and 2 ranks with ZeRO-1 ------------------------------
run full1 ok 0 --save-weights "$tmp/full1.st"
DTRAIN_TEST_KILL=0:9 run killed1 fail 0 --checkpoint-dir "$tmp/c1" --checkpoint-every 4
has killed1-at-9 "$tmp/killed1.out" 'killing this rank after step 9'
run resumed1 ok 0 --checkpoint-dir "$tmp/c1" --checkpoint-every 4 --resume "$tmp/c1" \
    --save-weights "$tmp/resumed1.st"
has resumed1-from-8 "$tmp/resumed1.out" 'resumed from the checkpoint of step 8'
same_file resume-1-rank "$tmp/full1.st" "$tmp/resumed1.st"

run full2 ok 2 --zero 1 --save-weights "$tmp/full2.st"
DTRAIN_TEST_KILL=1:9 run killed2 fail 2 --zero 1 --checkpoint-dir "$tmp/c2" --checkpoint-every 4
run resumed2 ok 2 --zero 1 --checkpoint-dir "$tmp/c2" --checkpoint-every 4 --resume "$tmp/c2" \
    --save-weights "$tmp/resumed2.st"
same_file resume-2-ranks-zero1 "$tmp/full2.st" "$tmp/resumed2.st"

# ---- another layout: dp 2 + ZeRO-1's step 8 resumed at dp 1, tp 2, pp 2 ------------------
run dp1 ok 0 --global-batch 64 --max-steps 9 --resume "$tmp/c2/step-000000008"
run tp2 ok 2 --global-batch 64 --max-steps 9 --tp 2 --resume "$tmp/c2/step-000000008"
run pp2 ok 2 --global-batch 64 --max-steps 9 --pp 2 --resume "$tmp/c2/step-000000008"
# The loss of step 9 is the parameters' after step 8 (the shorter --max-steps changes only the
# learning rate of step 9's update, which comes after its loss).
want=$(loss_at "$tmp/full2.out" 9)
for l in dp1 tp2 pp2; do close "next-loss-$l" "$(loss_at "$tmp/$l.out" 9)" "$want"; done

# ---- ZeRO-3: each rank holds a slice of everything ------------------------------------------
# Killed after step 9 on rank 2 of 3 and resumed: the same bytes as the uninterrupted run.
run full3 ok 3 --zero 3 --save-weights "$tmp/full3.st"
DTRAIN_TEST_KILL=2:9 run killed3 fail 3 --zero 3 --checkpoint-dir "$tmp/c4" --checkpoint-every 4
run resumed3 ok 3 --zero 3 --checkpoint-dir "$tmp/c4" --checkpoint-every 4 --resume "$tmp/c4" \
    --save-weights "$tmp/resumed3.st"
has resumed3-from-8 "$tmp/resumed3.out" 'resumed from the checkpoint of step 8'
same_file resume-3-ranks-zero3 "$tmp/full3.st" "$tmp/resumed3.st"
# Its set resumed in one process; ZeRO-1's set (dp 2) resumed under ZeRO-3 at dp 2 and 3: the
# uninterrupted run's next loss.
run z3-dp1 ok 0 --global-batch 96 --max-steps 9 --resume "$tmp/c4/step-000000008"
close next-loss-zero3-dp1 "$(loss_at "$tmp/z3-dp1.out" 9)" "$(loss_at "$tmp/full3.out" 9)"
run zero1-to-3 ok 2 --zero 3 --global-batch 64 --max-steps 9 --resume "$tmp/c2/step-000000008"
close next-loss-zero1-to-zero3 "$(loss_at "$tmp/zero1-to-3.out" 9)" "$(loss_at "$tmp/full2.out" 9)"
run zero1-to-3-np3 ok 3 --zero 3 --global-batch 64 --max-steps 9 \
    --resume "$tmp/c2/step-000000008"
close next-loss-zero1-to-zero3-np3 "$(loss_at "$tmp/zero1-to-3-np3.out" 9)" \
    "$(loss_at "$tmp/full2.out" 9)"
"$DTRAIN" inspect "$tmp/c4" >"$tmp/inspect3.out" 2>&1 || bad "inspect zero3: exit $?"
has inspect-zero3 "$tmp/inspect3.out" 'written under dp 3 x tp 1 x pp 1 with ZeRO-3'
# ... and at dp 2 x tp 2, where each slice is of the rank's tensor-parallel parts.
run zero1-to-3-tp2 ok 4 --zero 3 --tp 2 --global-batch 64 --max-steps 9 \
    --resume "$tmp/c2/step-000000008"
close next-loss-zero1-to-zero3-tp2 "$(loss_at "$tmp/zero1-to-3-tp2.out" 9)" \
    "$(loss_at "$tmp/full2.out" 9)"
# Weights loaded into the slices (--init-weights) and gathered back (--save-weights), also
# of tensor-parallel parts.
run init-zero3 ok 3 --zero 3 --epochs 0 --max-steps 0 --init-weights "$tmp/full3.st" \
    --save-weights "$tmp/init3.st"
same_file init-weights-zero3 "$tmp/full3.st" "$tmp/init3.st"
run init-zero3-tp2 ok 4 --zero 3 --tp 2 --epochs 0 --max-steps 0 --init-weights "$tmp/full3.st" \
    --save-weights "$tmp/init3tp.st"
same_file init-weights-zero3-tp2 "$tmp/full3.st" "$tmp/init3tp.st"

# ---- broken newest sets are skipped; an empty directory starts afresh -----------------------
cp -r "$tmp/c2" "$tmp/c3"
part="$tmp/c3/step-000000012/part-00000.safetensors"
printf 'X' | dd of="$part" bs=1 seek=600000 conv=notrunc 2>/dev/null
run skip-corrupt ok 0 --global-batch 64 --resume "$tmp/c3"
has skip-corrupt-warns "$tmp/skip-corrupt.out" 'skipping .*step-000000012: .*corrupt'
has skip-corrupt-resumes "$tmp/skip-corrupt.out" 'resumed from the checkpoint of step 8'
rm "$tmp/c3/step-000000008/manifest.json"
run skip-incomplete ok 0 --global-batch 64 --resume "$tmp/c3"
has skip-incomplete-warns "$tmp/skip-incomplete.out" 'skipping .*step-000000008: .*incomplete'
has skip-incomplete-resumes "$tmp/skip-incomplete.out" 'resumed from the checkpoint of step 4'
mkdir "$tmp/empty"
run fresh ok 0 --resume "$tmp/empty"
has fresh-says "$tmp/fresh.out" 'resume: .*/empty is empty: training starts from the beginning'

# ---- a full disk (a file-size limit) --------------------------------------------------------
( ulimit -f 600 && "$DTRAIN" train "$MLP" $common --checkpoint-dir "$tmp/c1" \
    --checkpoint-every 4 --resume "$tmp/c1/step-000000008" >"$tmp/full.out" 2>&1 )
code=$?
[ $code -ne 0 ] && ok "full-disk: exit $code" || bad "full-disk: exit 0"
has full-disk-message "$tmp/full.out" 'checkpoint.*(File too large|cannot write).*previous checkpoint is intact'
"$DTRAIN" inspect "$tmp/c1/step-000000008" >"$tmp/inspect8.out" 2>&1 &&
    ok "full-disk: step 8 still verifies" || { bad "full-disk: step 8 broken"; show "$tmp/inspect8.out"; }
( ulimit -f 600 && "$DTRAIN" train "$MLP" $common --checkpoint-dir "$tmp/c1" \
    --checkpoint-every 4 --checkpoint-on-error continue \
    --resume "$tmp/c1/step-000000008" >"$tmp/cont.out" 2>&1 ) &&
    ok "on-error continue: exit 0" || { bad "on-error continue: exit $?"; show "$tmp/cont.out"; }
has on-error-continue-warns "$tmp/cont.out" 'warning: checkpoint of step 12 failed'

# ---- inspect, export, eval ------------------------------------------------------------------
"$DTRAIN" inspect "$tmp/c2" >"$tmp/inspect.out" 2>&1 || bad "inspect: exit $?"
has inspect-layout "$tmp/inspect.out" 'written under dp 2 x tp 1 x pp 1 with ZeRO-1'
has inspect-state "$tmp/inspect.out" '^optim\.exp_avg_sq\.1\.weight +F32 +\(128, 784\)'
"$DTRAIN" export "$tmp/c2" "$tmp/e1.st" >/dev/null 2>&1 || bad "export: exit $?"
"$DTRAIN" export "$tmp/c2/step-000000012" "$tmp/e2.st" >/dev/null 2>&1 || bad "export 2: exit $?"
same_file export-deterministic "$tmp/e1.st" "$tmp/e2.st"
# An export and --save-weights of the same parameters are one kind of file: the same bytes
# (one metadata builder, src/ckpt/st_meta.c). resumed2 saved step 12's weights; c2 holds step 12.
same_file export-equals-save-weights "$tmp/resumed2.st" "$tmp/e1.st"
"$DTRAIN" eval "$tmp/c2" >"$tmp/eval.out" 2>&1 || bad "eval: exit $?"
# A weights file where a checkpoint is expected is named as a file, not "cannot list".
if "$DTRAIN" eval "$tmp/e1.st" >"$tmp/eval-file.out" 2>&1; then bad "eval of a file: exit 0"
else has eval-of-a-file "$tmp/eval-file.out" "checkpoint: .*/e1\.st is a file: a checkpoint is a directory"; fi
run init-export ok 0 --epochs 0 --max-steps 0 --init-weights "$tmp/e1.st" \
    --metrics "$tmp/init-export.json"
close eval-equals-weights \
    "$(sed -n 's/.*test loss \([0-9.]*\).*/\1/p' "$tmp/eval.out")" \
    "$(sed -n 's/.*"test_loss":\([0-9.]*\).*/\1/p' "$tmp/init-export.json")"

exit $fail
