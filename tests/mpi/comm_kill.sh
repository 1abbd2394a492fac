#!/bin/sh
# comm_kill.sh MPIRUN PROGRAM NP — a rank killed by a signal must end the whole job with a
# non-zero exit within 10 seconds (what mpirun does; dtrain's part is never to hang in a
# way that outlives it). Prints the exit status and the elapsed time.
mpirun=$1
program=$2
np=$3
log=$(mktemp)
start=$(date +%s%N)
"$mpirun" -np "$np" --oversubscribe "$program" >"$log" 2>&1
rc=$?
end=$(date +%s%N)
ms=$(( (end - start) / 1000000 ))
cat "$log"
echo "mpirun exited with status $rc after $ms ms"
if ! grep -q "raising SIGKILL" "$log"; then
    rm -f "$log"
    echo "FAIL: the program never reached the kill (see the output above)"
    exit 1
fi
rm -f "$log"
if [ "$rc" -eq 0 ]; then
    echo "FAIL: the job ended with status 0 although a rank was killed"
    exit 1
fi
if [ "$ms" -ge 10000 ]; then
    echo "FAIL: the job took $ms ms to end (limit 10000)"
    exit 1
fi
echo "killed rank ended the job: status $rc in $ms ms"
