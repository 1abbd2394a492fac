#!/bin/sh
# ddp.sh BUILD_DIR [ddp.py options] — the data-parallel benchmark: dtrain under
# `mpirun -np 2` (one thread per rank) against one process, beside PyTorch DDP (gloo, two
# processes) for Debian's 1.13 and the newest PyTorch (bench/.venv, which bench/run.sh
# installs), with the machine's 2-process/1-process parallel ratio. Prints the table; JSON
# lines go to bench/out/. Run on a quiet machine.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/ddp.sh BUILD_DIR [--quick] [--reps N] [...]  (ddp.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
# Open MPI refuses to run as root without these (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec /usr/bin/python3 "$here/ddp.py" --build "$build" "$@"
