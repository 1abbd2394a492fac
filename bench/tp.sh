#!/bin/sh
# tp.sh BUILD_DIR [--quick] [--with-dp] [tp.py options] — the tensor-parallel benchmark:
# the MLP 784-4096-4096-10 under dtrain's tensor parallelism (bench_tp, `mpirun -np 2`, one
# thread per rank) beside PyTorch's own (torch.distributed.tensor.parallel, gloo) on the same
# layout, at tp = 1 and tp = 2 (and dp 2 x tp 2 with --with-dp). Prints the table; JSON
# lines go to bench/out/. docs/BENCHMARKS.md says how to read it. Run on a quiet machine.
#
# The newest PyTorch lives in bench/.venv (ignored by git), installed from PyPI as
# bench/run.sh installs it (the CUDA wheel: the CPU wheel index is not reachable from these
# machines); BENCH_NO_INSTALL=1 skips the attempt and its rows say "not installed".
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/tp.sh BUILD_DIR [--quick] [--with-dp] [...]  (tp.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
venv=$here/.venv
# What the CUDA wheel and its dependencies take once installed, plus room to unpack.
need_kb=$((12 * 1024 * 1024))

if [ ! -x "$venv/bin/python" ] && [ "${BENCH_NO_INSTALL:-0}" != 1 ]; then
    avail_kb=$(df -Pk "$here" | awk 'NR == 2 { print $4 }')
    if [ "$avail_kb" -lt "$need_kb" ]; then
        echo "tp.sh: $((avail_kb / 1024)) MB free, the newest PyTorch needs about" \
             "$((need_kb / 1024)) MB: not installed" >&2
    else
        echo "tp.sh: installing the newest PyTorch from PyPI into bench/.venv (once)..." >&2
        if ! { python3 -m venv "$venv" &&
               "$venv/bin/pip" install --quiet --no-cache-dir torch numpy; }; then
            echo "tp.sh: installing PyTorch from PyPI failed: its rows say 'not installed'" >&2
            rm -rf "$venv"
        fi
    fi
fi

# Open MPI refuses to run as root without these (containers, CI); one BLAS thread per rank
# (tp.py sets the same for every process it starts).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 "$here/tp.py" --build "$build" "$@"
