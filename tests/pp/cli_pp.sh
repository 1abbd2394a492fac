#!/bin/sh
# cli_pp.sh — pipeline parallelism from the command line: --explain-layout prints the
# ConvNet's stages and each stage's 1F1B order; the MLP trains on pp 2 and reports its
# stages and schedule; its weights are whole (they load in one process with the same test
# loss, and on pp 2 again); pp 2 with 4 micro-batches writes the same weights as one
# process with 4 micro-steps, byte for byte; so does the round-robin placement; a pipeline
# that does not fit the job and a split point out of range each end the job with a message,
# not a hang. The phase table's bubble leaves out evaluation's waits.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-pp-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"

# check NAME FILE REGEX: FILE must have a line matching REGEX.
check() {
    if grep -Eq "$3" "$2"; then
        echo "ok $1: $(grep -E "$3" "$2" | head -1)"
    else
        echo "FAIL $1: no line matches /$3/ in:"; sed 's/^/  /' "$2"; fail=1
    fi
}

# mpi NAME NP ARGS...: dtrain train under mpirun, which must exit 0.
mpi() {
    name=$1 np=$2
    shift 2
    "$MPIRUN" -np "$np" --oversubscribe "$DTRAIN" train "$@" --no-progress \
        >"$tmp/$name.out" 2>&1
    code=$?
    sed 's/^/  /' "$tmp/$name.out"
    [ $code -eq 0 ] || { echo "FAIL $name: exit status $code"; fail=1; }
}

# refused NAME REGEX ARGS...: dtrain train on 2 ranks must fail with a line matching REGEX.
refused() {
    name=$1 want=$2
    shift 2
    "$MPIRUN" -np 2 --oversubscribe "$DTRAIN" train "$MLP" --max-steps 2 "$@" \
        >"$tmp/$name.out" 2>&1
    code=$?
    if [ $code -ne 0 ] && grep -Eq "$want" "$tmp/$name.out"; then
        echo "ok $name (exit $code): $(grep -E "$want" "$tmp/$name.out" | head -1)"
    else
        echo "FAIL $name: exit $code, expected a failure matching /$want/:"
        sed 's/^/  /' "$tmp/$name.out"; fail=1
    fi
}

"$DTRAIN" train --pp 2 --micro-batches 4 --explain-layout >"$tmp/explain.out" 2>&1 ||
    { echo "FAIL explain: exit status $?"; fail=1; }
sed 's/^/  /' "$tmp/explain.out"
check explain-conv2 "$tmp/explain.out" '^0 +2 +conv2 conv2d'
check explain-fc1 "$tmp/explain.out" '^1 +7 +fc1 linear'
check explain-stage0 "$tmp/explain.out" 'stage 0: layers 0\.\.2, 90\.[0-9]% of the arithmetic'
check explain-bubble "$tmp/explain.out" '^1f1b schedule, 4 micro-batches per step: bubble .* = 0\.200'
check explain-order0 "$tmp/explain.out" '^  stage 0: 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3$'
check explain-order1 "$tmp/explain.out" '^  stage 1: 1F0 1B0 1F1 1B1 1F2 1B2 1F3 1B3$'

common="--max-steps 10 --batch 16 --threads 1"
mpi pp2 2 "$MLP" --pp 2 --micro-batches 4 $common --save-weights "$tmp/pp2.safetensors"
check pp2-layout "$tmp/pp2.out" '2 ranks \(dp 1 x tp 1 x pp 2\), .* 101770 parameters \(100480 on rank 0\)'
check pp2-stages "$tmp/pp2.out" 'pipeline of 2 stages .* layers 0\.\.1; 1f1b schedule, 4 micro-batches'
check pp2-report "$tmp/pp2.out" \
    'pipeline, rank 0: stages: 2; this rank.s stage: 0; time per step: [0-9.]+ ms; computing: [0-9]+%'
# The phase table's bubble is the steps' waiting only, not evaluation's (an evaluation after
# every step waits far longer than a step lasts): at most the pipeline's time per step.
mpi pp2eval 2 "$MLP" --pp 2 --micro-batches 4 $common --eval-every 1
bubble=$(sed -n 's/^  bubble *\([0-9.]*\) .*/\1/p' "$tmp/pp2eval.out")
step=$(sed -n 's/.*rank 0: stages: 2; .*time per step: \([0-9.]*\) ms.*/\1/p' "$tmp/pp2eval.out")
if [ -n "$bubble" ] && [ -n "$step" ] && awk -v b="$bubble" -v s="$step" 'BEGIN { exit !(b <= s) }'; then
    echo "ok bubble: $bubble ms per step waited, in steps of $step ms (evaluation left out)"
else
    echo "FAIL bubble: '$bubble' ms of bubble per step against steps of '$step' ms"; fail=1
fi
mpi one 1 "$MLP" --micro-batches 4 $common --save-weights "$tmp/one.safetensors"
if cmp -s "$tmp/pp2.safetensors" "$tmp/one.safetensors"; then
    echo "ok bitwise: pp 2 wrote the weights of one process with 4 micro-steps"
else
    echo "FAIL bitwise: pp 2's weights differ from one process's"; fail=1
fi

# The round-robin placement: every other layer on each stage, the same weights again.
mpi rr 2 "$MLP" --pp 2 --pp-split round_robin --micro-batches 4 $common \
    --save-weights "$tmp/rr.safetensors"
check rr-stages "$tmp/rr.out" 'round-robin: layer l on stage l mod pp\), rank 0.s stage runs every 2nd layer from 0 to'
if cmp -s "$tmp/rr.safetensors" "$tmp/one.safetensors"; then
    echo "ok bitwise: round-robin pp 2 wrote the weights of one process with 4 micro-steps"
else
    echo "FAIL bitwise: round-robin pp 2's weights differ from one process's"; fail=1
fi

# Whole weights: one process and pp 2 (GPipe) evaluate them alike.
loss() { sed -n 's/.*test loss \([0-9.]*\).*/\1/p' "$1" | tail -1; }
mpi load1 1 "$MLP" --epochs 0 --init-weights "$tmp/pp2.safetensors"
mpi load2 2 "$MLP" --pp 2 --pp-schedule gpipe --epochs 0 --init-weights "$tmp/pp2.safetensors"
a=$(loss "$tmp/pp2.out") b=$(loss "$tmp/load1.out") c=$(loss "$tmp/load2.out")
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then
    echo "ok weights: test loss $a at pp 2, $b in one process, $c loaded at pp 2"
else
    echo "FAIL weights: test loss '$a' at pp 2, '$b' in one process, '$c' loaded at pp 2"; fail=1
fi

refused too-many 'parallel.pp: 3 pipeline stages in a job of 2 ranks' --pp 3
refused split 'parallel.pp_split: stage 1 would begin at layer 9' --pp 2 --pp-split 9
refused both 'parallel.micro_batches \(4\) and parallel.accumulation \(2\)' --pp 2 \
    --micro-batches 4 --accumulation 2
exit $fail
