#!/bin/sh
# harness_fails_fast.sh BINARY — the MPI test harness (tests/support/dt_test_mpi.h) ends a job
# in which one rank goes wrong within 10 s, non-zero, saying why: a failed assertion on rank 1
# while rank 0 waits in a collective (DT_TEST_PLANT=fail), and rank 1 leaving a case while
# rank 0 waits (DT_TEST_PLANT=leave, caught by the meeting after the case, its deadline
# lowered to 3 s). The same program without a plant passes. `timeout` bounds every run, so
# this script cannot hang either.
set -u
bin=$1
mpirun=${MPIRUN:-mpirun}
status=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

# run PLANT: runs the program on 2 ranks; sets rc and secs.
run() {
    t0=$(date +%s.%N)
    DT_TEST_PLANT=$1 DT_TEST_MPI_SKEW_S=3 timeout 20 "$mpirun" --oversubscribe -np 2 "$bin" \
        >"$out" 2>&1
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

bad() {
    echo "FAIL: $*"
    echo "--- its output:"
    cat "$out"
    echo "---"
    status=1
}

run ""
[ "$rc" -eq 0 ] || bad "without a plant: expected exit 0, got $rc"

for plant in fail leave; do
    run "$plant"
    if [ "$rc" -eq 0 ]; then
        bad "DT_TEST_PLANT=$plant: expected a non-zero exit, got 0"
    elif [ "$rc" -eq 124 ]; then
        bad "DT_TEST_PLANT=$plant: still running after 20 s (the harness let the job hang)"
    elif awk -v s="$secs" 'BEGIN { exit !(s > 10) }'; then
        bad "DT_TEST_PLANT=$plant: ended after $secs s, expected within 10 s"
    fi
    case $plant in
    fail) want="case test_planted failed; ending the job" ;;
    leave) want="rank 1: at the end of case test_planted, rank(s) 0 never came within 3 s" ;;
    esac
    grep -qF "$want" "$out" || bad "DT_TEST_PLANT=$plant: the output lacks \"$want\""
    echo "DT_TEST_PLANT=$plant: exit $rc after $secs s"
done
exit $status
