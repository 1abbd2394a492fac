#!/bin/sh
# pp.sh BUILD_DIR [--quick] [pp.py options] — the pipeline-parallel benchmark: the bubble of
# dtrain's GPipe and 1F1B schedules on a deep MLP cut into 2 balanced stages (M = 1, 2, 4, 8)
# beside theory and beside torch.distributed.pipelining on the same cut, the activation bytes
# each schedule plans per stage, and the ConvNet's samples/s over single, dp, pp and mixed
# layouts (bench_tp under `mpirun --oversubscribe`, one thread per rank). Prints the table;
# JSON lines go to bench/out/. Run on a quiet machine; --quick only checks the scripts.
#
# The newest PyTorch is bench/.venv's (bench/run.sh or bench/tp.sh installs it); without it
# its rows say "not installed".
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/pp.sh BUILD_DIR [--quick] [...]  (pp.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
# Open MPI refuses to run as root without these (containers, CI); one BLAS thread per rank
# (pp.py sets the same for every process it starts).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 "$here/pp.py" --build "$build" "$@"
