#!/bin/sh
# ps.sh BUILD_DIR [ps.py options] — the parameter-server benchmark: dtrain's ps strategy
# (2 workers + 1 server, staleness 0, 2 and inf) beside its ddp on 2 ranks, each plain and
# with worker rank 1 slowed at every step by half of ddp's step time (--slow-rank), one
# thread per rank, on the MLP and the ConvNet: test accuracy, training time, samples/s, the
# staleness the workers saw, the S=2-over-S=0 target, and the machine's 2-process/1-process
# parallel ratio. Prints the table; JSON lines go to bench/out/. Run on a quiet machine;
# --quick only checks the scripts.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/ps.sh BUILD_DIR [--quick] [--models mlp,convnet] [...]  (ps.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
# Open MPI refuses to run as root without these (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec /usr/bin/python3 "$here/ps.py" --build "$build" "$@"
