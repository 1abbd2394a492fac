#!/bin/sh
# run.sh BUILD_DIR [run.py options] — the training benchmark (`make bench`):
# dtrain against Debian's PyTorch 1.13 and the newest PyTorch from PyPI, in one run, each
# PyTorch in several columns (every Adam it has on the CPU, torch.compile, channels_last for
# the ConvNet; the headline against its fastest) at the thread setting a short probe finds
# fastest, and each PyTorch's torch.mm beside OpenBLAS's sgemm on the models' products.
# Prints the tables; JSON lines go to bench/out/. docs/BENCHMARKS.md says how to read them.
#
# The newest PyTorch is installed once into bench/.venv (ignored by git). PyPI's default
# torch wheel for Linux is the CUDA build (several GB with its nvidia-* dependencies; the CPU
# wheel index is not reachable from these machines): it is installed when the disk has room,
# otherwise, or offline, its column says "not installed". BENCH_NO_INSTALL=1 skips the
# attempt. Run on a quiet machine: anything else on the cores skews every figure.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/run.sh BUILD_DIR [--quick] [--reps N] [...]  (run.py --help)" >&2
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
        echo "run.sh: $((avail_kb / 1024)) MB free, the newest PyTorch needs about" \
             "$((need_kb / 1024)) MB: not installed" >&2
    else
        echo "run.sh: installing the newest PyTorch from PyPI into bench/.venv (once)..." >&2
        if ! { python3 -m venv "$venv" &&
               "$venv/bin/pip" install --quiet --no-cache-dir torch numpy; }; then
            echo "run.sh: installing PyTorch from PyPI failed: its column says" \
                 "'not installed'" >&2
            rm -rf "$venv"
        fi
    fi
fi

exec /usr/bin/python3 "$here/run.py" --build "$build" "$@"
