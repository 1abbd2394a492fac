#!/bin/sh
# walkthrough.sh BIN MPIRUN SRC MODE NP — examples/linreg_walkthrough.c at one layout:
#   - `mpirun -np NP BIN MODE` exits 0 and prints the lines of every layout (the same first
#     words, in the same order, as the one-process run), one rank line per rank saying
#     which rows of W and b it holds, and the bytes a step communicated
#     (docs/TENSOR_PARALLEL.md computes the same figures);
#   - its final training MSE is within 1% of the least-squares MSE (and not below it);
#   - its final parameters equal the one-process run's (started without mpirun) within
#     1e-5: every layout takes the same steps on the same samples.
# MODE refuse: `mpirun -np 2 BIN single` ends every rank with a non-zero status and a
# message, within the test's timeout (no rank left waiting).
set -u
bin=$1 mpirun=$2 src=$3 mode=$4 np=$5
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-walkthrough-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
config="$src/examples/linreg.ini"
fail=0

if [ "$mode" = refuse ]; then
    "$mpirun" -np 2 "$bin" single "$config" >"$tmp/out" 2>&1
    code=$?
    sed 's/^/  /' "$tmp/out"
    [ $code -ne 0 ] || { echo "FAIL refuse: exit status 0 with 2 ranks for single"; exit 1; }
    grep -q "single runs in one process, not 2" "$tmp/out" ||
        { echo "FAIL refuse: no message saying why"; exit 1; }
    echo "ok refuse (exit $code)"
    exit 0
fi

"$mpirun" -np "$np" "$bin" "$mode" "$config" --params >"$tmp/out" 2>"$tmp/err"
code=$?
grep -v '^theta' "$tmp/out" | sed 's/^/  /'
[ $code -eq 0 ] || { echo "FAIL $mode: exit status $code"; cat "$tmp/err"; exit 1; }
# The reference: one process, no MPI at all.
"$bin" single "$config" --params >"$tmp/ref" 2>"$tmp/ref.err" ||
    { echo "FAIL single without mpirun:"; cat "$tmp/ref.err"; exit 1; }

# Every rank once, in order, with its coordinates (rank = tp_rank + tp * dp_rank).
n=$(grep -cE '^rank [0-9]+ \(dp [0-9]+, tp [0-9]+\): W .*, b .*' "$tmp/out")
[ "$n" -eq "$np" ] || { echo "FAIL $mode: $n rank lines for $np ranks"; fail=1; }
# The lines each layout must print: the slices of W and b, the bytes per step.
case "$mode/$np" in
single/1) expect="rank 0 (dp 0, tp 0): W whole (4x16), b whole (4)
per step, rank 0 communicated nothing (1120 steps in one process)" ;;
dp/2) expect="rank 1 (dp 1, tp 0): W whole (4x16), b whole (4)
per step, rank 0 all-reduced 272 bytes of gradients over its dp group (1120 steps)" ;;
tp/2) expect="rank 0 (dp 0, tp 0): W rows 0:2 of 4 (2x16), b 0:2 of 4
rank 1 (dp 0, tp 1): W rows 2:4 of 4 (2x16), b 2:4 of 4
per step, rank 0 put 512 bytes into 1 tp collective(s) (1120 steps)" ;;
tp/3) expect="rank 0 (dp 0, tp 0): W rows 0:2 of 4 (2x16), b 0:2 of 4
rank 1 (dp 0, tp 1): W rows 2:3 of 4 (1x16), b 2:3 of 4
rank 2 (dp 0, tp 2): W rows 3:4 of 4 (1x16), b 3:4 of 4" ;;
dptp/4) expect="rank 2 (dp 1, tp 0): W rows 0:2 of 4 (2x16), b 0:2 of 4
rank 3 (dp 1, tp 1): W rows 2:4 of 4 (2x16), b 2:4 of 4
per step, rank 0 put 256 bytes into 1 tp collective(s) and all-reduced 136 bytes of gradients over its dp group (1120 steps)" ;;
*) expect="" ;;
esac
printf '%s\n' "$expect" | while IFS= read -r line; do
    [ -z "$line" ] || grep -qF "$line" "$tmp/out" ||
        { echo "FAIL $mode: no line with '$line'"; exit 1; }
done || fail=1

# The same kinds of lines as the one-process run: the first words, rank lines aside.
kinds() { grep -v '^rank ' "$1" | awk '{ print $1 }'; }
kinds "$tmp/out" >"$tmp/kinds"
kinds "$tmp/ref" >"$tmp/kinds.ref"
diff "$tmp/kinds.ref" "$tmp/kinds" >"$tmp/kinds.diff" ||
    { echo "FAIL $mode: the lines differ in kind from the one-process run's:"
      cat "$tmp/kinds.diff"; fail=1; }

# Within 1% of least squares, and not below it beyond rounding (no linear model is).
awk '/^final training MSE/ { f = $4 } /^least-squares MSE/ { l = $3 }
     END { if (f == "" || l == "") { print "FAIL: no MSE lines"; exit 1 }
           g = f / l - 1
           printf "training MSE %.8f, least squares %.8f: %+.4f%%\n", f, l, 100 * g
           if (g > 0.01 || g < -1e-6) { print "FAIL: not within 1% of least squares"; exit 1 } }' \
    "$tmp/out" || fail=1

# The parameters of the one-process run, within 1e-5.
grep '^theta' "$tmp/out" | tr ' ' '\n' | tail -n +2 >"$tmp/theta"
grep '^theta' "$tmp/ref" | tr ' ' '\n' | tail -n +2 >"$tmp/theta.ref"
paste "$tmp/theta.ref" "$tmp/theta" | awk '
    NF != 2 { bad = 1 }
    { d = $1 - $2; if (d < 0) d = -d; if (d > m) { m = d; at = NR - 1 } }
    END { if (NR != 68 || bad) { print "FAIL: expected 68 parameters from both runs"; exit 1 }
          printf "max |theta - theta(one process)| = %.3g (at %d)\n", m, at
          if (m > 1e-5) { print "FAIL: more than 1e-5 from the one-process run"; exit 1 } }' ||
    fail=1

[ $fail -eq 0 ] && echo "ok $mode on $np rank(s)"
exit $fail
