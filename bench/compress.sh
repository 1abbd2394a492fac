#!/bin/sh
# compress.sh BUILD_DIR [compress.py options] — the gradient-compression benchmark: dtrain's
# ddp with --compress none, fp16, bf16, topk:0.01 and powersgd:4 under `mpirun -np 2` (one
# thread per rank) beside PyTorch DDP with its fp16, bf16 and PowerSGD hooks (gloo, two
# processes) for Debian's 1.13 and the newest PyTorch (bench/.venv, which bench/run.sh
# installs): test accuracy after 2 epochs over seeds 1-3 a side (median, min-max), bytes sent
# per step and over the run (dtrain's PowerSGD with PyTorch's 2 float32 warm-up steps), with
# the machine's 2-process/1-process parallel ratio around every seed round (flagged rounds
# stay out of the targets). Prints the tables and targets; JSON lines go to bench/out/. Run
# on a quiet machine; --quick only checks the scripts.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/compress.sh BUILD_DIR [--quick] [--models mlp,convnet] [...]" \
         " (compress.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
# Open MPI refuses to run as root without these (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec /usr/bin/python3 "$here/compress.py" --build "$build" "$@"
