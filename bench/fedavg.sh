#!/bin/sh
# fedavg.sh BUILD_DIR [fedavg.py options] — the federated-averaging benchmark: dtrain's fedavg
# strategy beside Flower (flwr[simulation] from PyPI, its FedAvg in its Simulation Runtime,
# the same MLP in the newest PyTorch) on Fashion-MNIST, 100 clients, 10 per round, E = 1 and
# 5, IID and Dirichlet(0.5), the same partitions and sampled clients on both sides: test
# accuracy per round and wall time per round, the targets, and the machine's
# 2-process/1-process parallel ratio. Prints the tables; JSON lines and the curves (SVG) go
# to bench/out/. Run on a quiet machine; --quick only checks the scripts.
#
# Flower runs from bench/.venv (ignored by git), the newest PyTorch's venv that bench/run.sh
# creates: missing, or without torch, it is created here the same way (the CUDA wheel:
# several GB; the disk needs about 12 GB free), and flwr[simulation] (Flower and Ray) is
# added to it when it lacks them. Offline, short of disk, or where pip fails, the Flower
# column says "not installed" and dtrain is measured alone. BENCH_NO_INSTALL=1 skips every
# install attempt.
set -eu

if [ $# -lt 1 ]; then
    echo "usage: bench/fedavg.sh BUILD_DIR [--quick] [--rounds R] [--local-epochs 1,5] [...]" \
         " (fedavg.py --help)" >&2
    exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
venv=$here/.venv
# What the CUDA wheel and its dependencies take once installed, plus room to unpack.
need_kb=$((12 * 1024 * 1024))
# Flower's Message API (flwr.serverapp.strategy), which bench/flower_fedavg.py uses.
flwr_req='flwr[simulation]>=1.21'

has() {  # has MODULE...: the venv's python imports them all
    [ -x "$venv/bin/python" ] || return 1
    for m in "$@"; do
        "$venv/bin/python" -c "import $m" >/dev/null 2>&1 || return 1
    done
}

if [ "${BENCH_NO_INSTALL:-0}" != 1 ]; then
    if ! has torch; then
        avail_kb=$(df -Pk "$here" | awk 'NR == 2 { print $4 }')
        if [ "$avail_kb" -lt "$need_kb" ]; then
            echo "fedavg.sh: $((avail_kb / 1024)) MB free, the newest PyTorch needs about" \
                 "$((need_kb / 1024)) MB: Flower not installed" >&2
        else
            echo "fedavg.sh: installing the newest PyTorch from PyPI into bench/.venv" \
                 "(once)..." >&2
            created=0
            [ -x "$venv/bin/python" ] || created=1
            if ! { python3 -m venv "$venv" &&
                   "$venv/bin/pip" install --quiet --no-cache-dir torch numpy; }; then
                echo "fedavg.sh: installing PyTorch from PyPI failed: the Flower column" \
                     "says 'not installed'" >&2
                if [ "$created" = 1 ]; then rm -rf "$venv"; fi
            fi
        fi
    fi
    if has torch && ! has flwr.serverapp.strategy flwr.simulation ray; then
        echo "fedavg.sh: installing $flwr_req from PyPI into bench/.venv (once)..." >&2
        if ! "$venv/bin/pip" install --quiet --no-cache-dir "$flwr_req"; then
            echo "fedavg.sh: installing Flower failed: its column says 'not installed'" >&2
        fi
    fi
fi

# Open MPI refuses to run as root without these (containers, CI).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec /usr/bin/python3 "$here/fedavg.py" --build "$build" "$@"
