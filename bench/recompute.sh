#!/bin/sh
# recompute.sh BUILD_DIR [--quick] [recompute.py options] — activation recompute: dtrain's
# --recompute sqrt against none on the deep MLP and the ConvNet (step time, the activation
# bytes a forward keeps for its backward, the whole plan), beside PyTorch's
# checkpoint_sequential (Debian's 1.13 and the newest from bench/.venv, the newest with its
# default and its fused Adam) in the same run.
# Prints the table; JSON lines go to bench/out/. Run on a quiet machine; --quick only checks
# the scripts.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/recompute.sh BUILD_DIR [--quick] [...]  (recompute.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 "$here/recompute.py" --build "$build" "$@"
