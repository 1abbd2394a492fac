#!/bin/sh
# localsgd.sh BUILD_DIR [localsgd.py options] — the local SGD benchmark: dtrain's
# --strategy localsgd at --sync-every 1, 4 and 16 against its ddp under `mpirun -np 2` (one
# thread per rank), beside PyTorch DDP and its post-local SGD (PeriodicModelAverager, the
# same periods; gloo, two processes) for Debian's 1.13 and the newest PyTorch (bench/.venv,
# which bench/run.sh installs): test accuracy after 2 epochs of the MLP, bytes sent, samples/s,
# with the machine's 2-process/1-process parallel ratio. Prints the table; JSON lines go to
# bench/out/. Run on a quiet machine; --quick only checks the scripts.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/localsgd.sh BUILD_DIR [--quick] [--periods 1,4,16] [...]" \
         " (localsgd.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
# Open MPI refuses to run as root without these (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec /usr/bin/python3 "$here/localsgd.py" --build "$build" "$@"
