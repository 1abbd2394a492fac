#!/bin/sh
# cli_tp.sh — tensor parallelism from the command line: --explain-layout prints the split
# of the MLP (column then row, half the parameters per rank at tp 2); the linear
# regression trains on dp 2 x tp 2 and reports its layout and tp collectives; weights
# saved at tp 2 load at tp 1 (and at tp 3) with the same test loss; a tp that does not
# fit the job ends it with a message, not a hang.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tp-XXXXXX") || exit 1
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

"$DTRAIN" train "$MLP" --tp 2 --explain-layout >"$tmp/explain.out" 2>&1 ||
    { echo "FAIL explain: exit status $?"; fail=1; }
sed 's/^/  /' "$tmp/explain.out"
check explain-column "$tmp/explain.out" '^1 +linear +\(128\) +column +0:64 +50240 +64:128 +50240'
check explain-row "$tmp/explain.out" '^4 +linear +\(10\) +row +0:64 +650 +64:128 +650'
check explain-bytes "$tmp/explain.out" 'parameter bytes per rank: 203560 \(0\.500\) 203560 \(0\.500\)'

# The seed's linear regression on dp 2 x tp 2 (its 64 weights split at threshold 0, given
# with --tp: examples/linreg.ini).
mpi linreg 4 "$SRC/examples/linreg.ini" --dp 2 --tp 2 --set parallel.tp_min_weights=0 --epochs 3
check linreg-layout "$tmp/linreg.out" '4 ranks \(dp 2 x tp 2\), .* 68 parameters \(34 on rank 0\)'
check linreg-tp "$tmp/linreg.out" 'tensor-parallel, rank 0: ranks: 2; collectives per step: [0-9.]+'
check linreg-epoch "$tmp/linreg.out" '^epoch 3: train loss'

# Weights written at tp 2 are whole: tp 1 and tp 3 load them and see the same test loss.
mpi save 2 "$MLP" --tp 2 --max-steps 10 --save-weights "$tmp/w.safetensors"
loss() { sed -n 's/.*test loss \([0-9.]*\).*/\1/p' "$1" | tail -1; }
mpi load1 1 "$MLP" --epochs 0 --init-weights "$tmp/w.safetensors"
mpi load3 3 "$MLP" --tp 3 --epochs 0 --init-weights "$tmp/w.safetensors"
a=$(loss "$tmp/save.out") b=$(loss "$tmp/load1.out") c=$(loss "$tmp/load3.out")
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ]; then
    echo "ok weights: test loss $a at tp 2, $b at tp 1, $c at tp 3"
else
    echo "FAIL weights: test loss '$a' at tp 2, '$b' at tp 1, '$c' at tp 3"; fail=1
fi

# A tp larger than the job.
"$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --tp 3 --max-steps 2 >"$tmp/bad.out" 2>&1
code=$?
if [ $code -ne 0 ] && grep -q 'parallel.tp: 3 tensor-parallel ranks in a job of 2' "$tmp/bad.out"; then
    echo "ok bad-tp (exit $code)"
else
    echo "FAIL bad-tp: exit $code, expected a failure naming parallel.tp:"
    sed 's/^/  /' "$tmp/bad.out"; fail=1
fi
exit $fail
