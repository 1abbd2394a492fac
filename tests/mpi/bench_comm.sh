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
"$driver" --help | grep -q -- "--max-bytes N" || fail "--help lacks --max-bytes"
rm -f "$json" "$out"
echo "bench-comm ok: $all rows, 0 wrong"
