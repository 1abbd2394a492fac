#!/bin/sh
# bench_comm.sh MPIRUN DRIVER NP — bench-comm at small sizes: exit 0, a table with every
# column, the parallel ratio, the memory bound, and JSON lines with zero wrong elements for every row.
mpirun=$1
driver=$2
np=$3
json=$(mktemp)
out=$(mktemp)
"$mpirun" -np "$np" --oversubscribe "$driver" --min-bytes 1K --max-bytes 128K --warmup 1 \
    --iters 3 --json "$json" >"$out" 2>&1
rc=$?
cat "$out"
fail() { echo "FAIL: $1"; rm -f "$json" "$out"; exit 1; }
[ "$rc" -eq 0 ] || fail "bench-comm exited with status $rc"
grep -q "size(B)  *count  *type  *operation  *algorithm  *time(us)  *algbw(GB/s)  *busbw(GB/s)  *wrong" "$out" ||
    fail "no table header"
grep -q "machine parallel ratio" "$out" || fail "no parallel ratio"
# The memory bound: a positive GB/s figure at 2 ranks or more, in the table and every JSON row.
if [ "$np" -gt 1 ]; then
    grep -q "^# memory bound: .*bus bandwidth <= [0-9]*[.][0-9]* GB/s per rank" "$out" ||
        fail "no memory bound line"
    grep -q '"mem_bound_GBps": 0.0000' "$json" && fail "a JSON row without the memory bound"
fi
rows=$(grep -c '"wrong": 0,' "$json")
all=$(wc -l <"$json")
# 8 sizes; rows: allreduce 5 algorithms, reduce_scatter 5, allgather 4, bcast 3, reduce 4
[ "$all" -eq 168 ] || fail "$all JSON rows, expected 168"
[ "$rows" -eq "$all" ] || fail "rows with wrong elements"
"$driver" --ops allreduce,nccl >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown operation is not a usage error"
# A named operation no named algorithm runs, or a named algorithm that runs none of the
# operations, is a usage error naming it (the first printed an empty table).
"$driver" --ops bcast --algos ring >"$out" 2>&1
[ $? -eq 2 ] && grep -q "no algorithm of --algos runs bcast" "$out" ||
    fail "--ops bcast --algos ring is not a usage error naming bcast"
"$driver" --ops bcast --algos mpi,ring >"$out" 2>&1
[ $? -eq 2 ] && grep -q "algos ring runs none of --ops's operations" "$out" ||
    fail "--ops bcast --algos mpi,ring is not a usage error naming ring"
"$driver" --help | grep -q -- "--max-bytes N" || fail "--help lacks --max-bytes"
# --gap: 20 ms spun before each timed call, not counted in the call's time.
"$mpirun" -np "$np" --oversubscribe "$driver" --ops allreduce --algos auto --min-bytes 1K \
    --max-bytes 1K --warmup 1 --iters 3 --gap 20 --json "$json" >"$out" 2>&1 || fail "--gap run failed"
grep -q "20.0 ms of computation spun before each timed call" "$out" || fail "no --gap in the header"
grep -q '"gap_ms": 20.000' "$json" || fail "no gap_ms in the JSON"
awk '{ for (i = 1; i <= NF; i++) if ($i == "\"time_us\":") t = $(i + 1) + 0 }
     END { exit !(t < 20000) }' "$json" || fail "the --gap is counted in the call's time"
"$driver" --gap -1 >/dev/null 2>&1
[ $? -eq 2 ] || fail "a negative --gap is not a usage error"
# Numbers are read whole (src/cli/cli_number.c): an overflowing count, a count with a
# fraction, an infinite timeout are usage errors, not LONG_MAX, 1 or a wait for ever.
for bad in "--iters 99999999999999999999" "--warmup 2.5" "--timeout inf" "--gap nan"; do
    # shellcheck disable=SC2086 # the option and its value are two words
    "$driver" $bad >"$out" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "$bad: exit $rc, not 2 (usage)"
    grep -q "not a valid value" "$out" || fail "$bad: no message naming the value: $(cat "$out")"
done
rm -f "$json" "$out"
echo "bench-comm ok: $all rows, 0 wrong"
