#!/bin/sh
# gpt_layouts.sh BUILD_DIR [gpt_layouts.py options] — the GPT across layouts (issue 38
# "Measured"): nanoGPT's size and a wide one (E 1024) in one process (1 and 2 threads), dp 2,
# tp 2 with and without --sequence-parallel and with its overlap off, pp 2 under GPipe and
# 1F1B, and recompute per block, beside PyTorch's own on the same layouts (DDP, DTensor
# tensor and sequence parallelism, torch.distributed.pipelining, torch.utils.checkpoint;
# the newest PyTorch, bench/.venv), one thread per rank on 2 cores; tokens/s, memory per
# rank, communication per step against `dtrain plan`'s; `--layouts` also takes any
# dp x tp x pp grid (dp4, tp6, pp4_gpipe, dp2tp2pp2) for a many-core machine, `--batch` the
# global batch. Tables on stdout, JSON lines in
# bench/out/. `--quick` checks the scripts end to end on tiny models (under 2 minutes) and
# measures nothing. docs/BENCHMARKS.md "The GPT across layouts" says how to read it. The
# newest PyTorch is installed into bench/.venv as bench/run.sh installs it
# (BENCH_NO_INSTALL=1 skips that; the PyTorch cells then say "not installed").
# Run on a quiet machine: anything else on the cores skews every figure.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/gpt_layouts.sh BUILD_DIR [--quick] [...]  (gpt_layouts.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$here/.venv/bin/python" ] && [ "${BENCH_NO_INSTALL:-0}" != 1 ]; then
    # run.sh installs it (or says why not) before it starts run.py, which --help ends at once
    "$here/run.sh" "$build" --help >/dev/null || true
fi
# Open MPI refuses to run as root without these (containers, CI); one BLAS thread per rank
# (gpt_layouts.py sets the same for every process it starts).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
exec /usr/bin/python3 "$here/gpt_layouts.py" --build "$build" "$@"
