#!/bin/sh
# ckpt.sh BUILD_DIR [--quick] [ckpt.py options] — checkpoints: the ConvNet's write and load
# time and bytes in dtrain beside torch.save / torch.load of the same state (Debian's PyTorch
# and the newest from bench/.venv, which bench/run.sh installs; both sides' loads each in a
# fresh process), and the cost of
# --checkpoint-every 100 on training. Prints the table; a JSON line goes to bench/out/. Run on
# a quiet machine; --quick only checks the scripts.
set -eu
if [ $# -lt 1 ]; then
    echo "usage: bench/ckpt.sh BUILD_DIR [--quick] [...]  (ckpt.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
export OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 "$here/ckpt.py" --build "$build" "$@"
