#!/bin/sh
# comm.sh BUILD_DIR [bench-comm options] — the communication benchmark:
# `dtrain bench-comm` at 2 and 4 ranks (COMM_RANKS="2 4 8 16" for other world sizes; every
# collective and algorithm, 1 KiB to 64 MiB), then bench/comm_summary.py's tables and target checks. JSON lines and the full tables go
# to bench/out/. Run on a quiet machine: about 2 minutes.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: bench/comm.sh BUILD_DIR [bench-comm options]" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
out=$here/out
mkdir -p "$out"
stamp=$(date +%Y%m%d-%H%M%S)
# Open MPI refuses root without these; set here, never by the user.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
files=""
for np in ${COMM_RANKS:-2 4}; do
    json=$out/comm-$stamp-np$np.jsonl
    echo "comm.sh: $np ranks..." >&2
    mpirun -np "$np" --oversubscribe "$build/dtrain" bench-comm --json "$json" "$@" \
        >"$out/comm-$stamp-np$np.txt"
    files="$files $json"
done
echo "commit $(git -C "$here/.." rev-parse --short HEAD); $(grep -m1 'model name' /proc/cpuinfo |
    sed 's/.*: //')"
# shellcheck disable=SC2086 # one argument per file
/usr/bin/python3 "$here/comm_summary.py" $files
