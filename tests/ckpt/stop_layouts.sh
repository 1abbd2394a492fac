#!/bin/sh
# stop_layouts.sh — a run stopped on its signal (--stop-on) and resumed ends with the bytes of
# the run never stopped, across the layouts whose checkpoints hold more than the weights: the
# GPT at dp 2 x tp 2 (4 ranks), tp 2 with sequence parallelism, a pipeline of 2 stages with
# the tied table under 1F1B, ZeRO-1, gradient accumulation; the MLP under localsgd stopped
# inside a period (3 ranks), and with top-k's and PowerSGD's residuals. The signal goes to one
# rank at a step the test names; every rank must stop a step later. Long tier (about 2 min).
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-stopl-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
GPT="$SRC/examples/gpt.ini --max-steps 8 --batch 4 --eval-every 4"
MLP="$SRC/examples/mlp.ini --max-steps 12 --epochs 1 --batch 16"
common="--threads 1 --no-progress --log-every 0 --comm-timeout 30"

# check NAME NP RANK:STEP MODEL ARGS...: the uninterrupted run, the run stopped by the signal
# RANK raises after STEP (exit 4, its set of step STEP + 1), the resumed run; the first's and
# the last's weights must be the same bytes.
check() {
    name=$1 np=$2 sig=$3 model=$4
    shift 4
    want=$(printf 'step-%09d' $((${sig#*:} + 1)))
    # shellcheck disable=SC2086 # model and common are word lists
    "$MPIRUN" -np "$np" --oversubscribe "$DTRAIN" train $model $common "$@" \
        --save-weights "$tmp/$name.full.st" >"$tmp/$name.full.out" 2>&1 </dev/null ||
        { echo "FAIL $name: the uninterrupted run failed"; tail -5 "$tmp/$name.full.out"; fail=1; return; }
    # shellcheck disable=SC2086
    "$MPIRUN" -np "$np" --oversubscribe -x DTRAIN_TEST_SIGNAL="$sig" "$DTRAIN" train $model $common \
        "$@" --stop-on usr1 --checkpoint-dir "$tmp/$name.ck" >"$tmp/$name.stop.out" 2>&1 </dev/null
    code=$?
    if [ $code -ne 4 ] || [ ! -d "$tmp/$name.ck/$want" ]; then
        echo "FAIL $name: the stopped run exited $code, sets: $(ls "$tmp/$name.ck" 2>/dev/null | tr '\n' ' ')(want 4 and $want)"
        tail -5 "$tmp/$name.stop.out"; fail=1; return
    fi
    # shellcheck disable=SC2086
    "$MPIRUN" -np "$np" --oversubscribe "$DTRAIN" train $model $common "$@" --checkpoint-dir "$tmp/$name.ck" \
        --resume "$tmp/$name.ck" --save-weights "$tmp/$name.res.st" >"$tmp/$name.res.out" 2>&1 </dev/null ||
        { echo "FAIL $name: the resumed run failed"; tail -5 "$tmp/$name.res.out"; fail=1; return; }
    # A resume that started afresh would end with the same bytes: it must say where it began.
    if ! grep -q "^dtrain: resumed from the checkpoint of step $((${sig#*:} + 1)) " "$tmp/$name.res.out"; then
        echo "FAIL $name: the resumed run does not say it began at step $((${sig#*:} + 1))"
        grep '^dtrain' "$tmp/$name.res.out" | head -5; fail=1; return
    fi
    if cmp -s "$tmp/$name.full.st" "$tmp/$name.res.st"; then
        echo "ok $name: stopped at $want, resumed: the uninterrupted run's bytes"
    else
        echo "FAIL $name: $(cmp "$tmp/$name.full.st" "$tmp/$name.res.st" 2>&1 | head -1)"; fail=1
    fi
}

check gpt_dp2_tp2 4 3:3 "$GPT" --tp 2 --dp 2
check gpt_tp2_sp 2 1:2 "$GPT" --tp 2 --sequence-parallel
check gpt_pp2_1f1b 2 1:2 "$GPT" --pp 2 --micro-batches 3 --pp-schedule 1f1b
check gpt_zero 2 0:4 "$GPT" --zero 1
check gpt_accum 2 0:2 "$GPT" --accumulation 2
check mlp_localsgd 3 2:5 "$MLP" --strategy localsgd --sync-every 4
check mlp_topk 2 0:3 "$MLP" --compress topk:0.1
check mlp_powersgd 2 1:3 "$MLP" --compress powersgd:2

[ $fail -eq 0 ] && echo "stop_layouts: all passed"
exit $fail
