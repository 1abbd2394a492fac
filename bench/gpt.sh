#!/bin/sh
# gpt.sh BUILD_DIR [gpt.py options] — the GPT benchmark (issue 37 "Measured"): dtrain against
# the newest PyTorch from PyPI and Debian's PyTorch 1.13 on examples/gpt.ini and
# bench/gpt_nano.ini at 1 and 2 threads; tables on stdout, JSON lines in bench/out/.
# gpt.sh BUILD_DIR converge [gpt_converge.py options] — the convergence comparison: the small
# model, batch 32, 2000 steps, dropout 0, the same weights and windows on both sides.
# `--quick` on either checks the scripts end to end in a few steps and measures nothing.
# docs/BENCHMARKS.md "The GPT against PyTorch" says how to read them. The newest PyTorch is
# installed into bench/.venv as bench/run.sh installs it (BENCH_NO_INSTALL=1 skips that).
# Run on a quiet machine: anything else on the cores skews every figure.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/gpt.sh BUILD_DIR [converge] [--quick] [...]  (gpt.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$here/.venv/bin/python" ] && [ "${BENCH_NO_INSTALL:-0}" != 1 ]; then
    # run.sh installs it (or says why not) before it starts run.py, which --help ends at once
    "$here/run.sh" "$build" --help >/dev/null || true
fi
if [ "${1:-}" = converge ]; then
    shift
    exec /usr/bin/python3 "$here/gpt_converge.py" --build "$build" "$@"
fi
exec /usr/bin/python3 "$here/gpt.py" --build "$build" "$@"
