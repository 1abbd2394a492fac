#!/bin/sh
# ddp.sh BUILD_DIR [ddp.py options] — the data-parallel benchmark: dtrain under
# `mpirun -np N` (one thread per rank; N = 2 unless --ranks) against one process, beside
# PyTorch DDP (gloo, N processes pinned to the CPUs mpirun binds dtrain's ranks to;
# gradient_as_bucket_view, static_graph; fused Adam, else foreach, and the default) for
# Debian's 1.13 and the newest PyTorch (bench/.venv, which bench/run.sh installs), then one
# all-reduce of each model's gradient through gloo against MPI (dtrain bench-comm), with the
# machine's 2-process/1-process parallel ratio. Prints the tables; JSON lines go to
# bench/out/. docs/BENCHMARKS.md "Data parallelism" says how to read them. Run on a quiet
# machine.
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
