#!/bin/sh
# many_core.sh BUILD_DIR OUT_DIR BUDGET_S [STEP ...] — the 4-16 rank measurements for a
# many-core machine held for a few minutes (a lent node, a short allocation): the steps in
# the order given, each stopped by `timeout` when the budget runs short, and what each wrote
# copied into OUT_DIR as soon as it ends, so that a run cut by its limit keeps every step
# that finished and the JSON lines of the one it was in (bench/summarise.py reads those,
# --merge joins two such runs). Run it in the tree bench/portable.sh unpacks (BUILD_DIR
# `build`), after setup.sh; the peer is the machine's PyTorch, named by BENCH_TORCH_PYTHON
# (a path, or a name on PATH). docs/BENCHMARKS.md "On a machine without the packages".
#
# Steps (default: all, in this order; each line is the command it runs):
#   gpt-1p       nano in one process, 1 thread, beside the peer (3 runs)
#   gpt-wide-tp  the wide model at tp 4, 8 and 16 beside the peer's DTensor (3 runs), with
#                its traces
#   gpt-trace    nano's traced runs at 4-16 ranks, bytes and ms beside the plan
#   gemm         each side's GEMM on nano's and wide's products, one thread
#   ddp-probe    one all-reduce of each model's gradient, MPI against gloo, 4-16 ranks
#   compress     the MLP's compressed all-reduces at 4 ranks beside PyTorch's hooks, 3 seeds
#   ddp          both models at 1, 4, 8 and 16 ranks beside DDP (fused and default Adam)
# Prints each step's exit status and time; OUT_DIR/times.log has them too.
set -u

if [ $# -lt 3 ]; then
    echo "usage: bench/many_core.sh BUILD_DIR OUT_DIR BUDGET_S [STEP ...]" >&2
    exit 2
fi
build=$1
out=$2
budget=$3
shift 3
case $budget in
'' | *[!0-9]*)
    echo "many_core.sh: BUDGET_S must be whole seconds, not '$budget'" >&2
    exit 2
    ;;
esac
steps=${*:-gpt-1p gpt-wide-tp gpt-trace gemm ddp-probe compress ddp}
for s in $steps; do
    case $s in
    gpt-1p | gpt-wide-tp | gpt-trace | gemm | ddp-probe | compress | ddp) ;;
    *)
        echo "many_core.sh: no step '$s' (gpt-1p gpt-wide-tp gpt-trace gemm ddp-probe compress ddp)" >&2
        exit 2
        ;;
    esac
done
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.." || exit 1
mkdir -p "$out" bench/out
out=$(cd "$out" && pwd)
export BENCH_NO_INSTALL=${BENCH_NO_INSTALL:-1}
# A peer named by a bare name is looked up by the scripts as well; the log says which.
peer=${BENCH_TORCH_PYTHON:-}
started=$(date +%s)
touch "$out/.started" # what the benchmarks write after it is this run's

left() { echo $((budget - ($(date +%s) - started))); }

note() {
    echo "$*" | tee -a "$out/times.log"
}

# Copies what the benchmarks wrote in this run (their JSON lines; the GPT's configs and
# traces) into OUT_DIR.
keep() {
    find bench/out -maxdepth 1 -name '*.jsonl' -newer "$out/.started" -exec cp {} "$out/" \;
    mkdir -p "$out/gpt-layouts-work"
    find bench/out/gpt-layouts-work -maxdepth 1 \( -name '*.ini' -o -name 'trace-*.json' \) \
        -newer "$out/.started" -exec cp {} "$out/gpt-layouts-work/" \; 2>/dev/null
    return 0
}

# step NAME CAP_S COMMAND...: runs it for at most CAP_S seconds or what the budget has left
# (less a few seconds to copy); skipped when under 20 s are left.
step() {
    name=$1 cap=$2
    shift 2
    l=$(($(left) - 10))
    if [ "$l" -lt 20 ]; then
        note "$name: skipped, $(left) s of the budget left"
        return 0
    fi
    [ "$cap" -gt "$l" ] && cap=$l
    t0=$(date +%s)
    timeout -k 5 "$cap" "$@" >"$out/$name.log" 2>&1
    rc=$?
    keep
    note "$name: exit $rc ($([ $rc = 124 ] && echo "stopped at its ${cap} s limit, " || true)$(($(date +%s) - t0)) s; $(left) s left)"
}

note "many_core.sh: $(nproc) CPUs, budget $budget s, peer ${peer:-none}, steps: $steps"
lscpu >"$out/lscpu.txt" 2>&1
gpt="$here/gpt_layouts.sh $build"
for s in $steps; do
    case $s in
    gpt-1p)
        step gpt-1p 150 $gpt --sizes nano --batch 16 --layouts 1p1t --peers torch_extra \
            --reps 3 --nano-steps 3 --warmup 1
        ;;
    gpt-wide-tp)
        step gpt-wide-tp 240 $gpt --sizes wide --batch 16 --layouts tp4,tp8,tp16 \
            --peers torch_extra --reps 3 --wide-steps 3 --warmup 1 --trace-steps 2
        ;;
    gpt-trace)
        step gpt-trace 120 $gpt --trace-only --sizes nano --batch 16 --micro-batches 4 \
            --trace-steps 2 --layouts dp4,dp8,tp6,pp4,dp2tp2,tp2pp2,dp2tp2pp2,dp4tp2pp2
        ;;
    gemm)
        for size in nano wide; do
            cfg=bench/out/gpt-layouts-work/gpt-$size.ini
            [ "$size" = nano ] && [ ! -f "$cfg" ] && cfg=bench/gpt_nano.ini
            if [ -f "$cfg" ] && [ -n "$peer" ]; then
                step gemm-$size 60 "$peer" bench/torch_gemm.py --build "$build" "$cfg" \
                    --batch 16 --threads 1
            else
                note "gemm-$size: skipped (needs BENCH_TORCH_PYTHON, and a gpt step first for wide)"
            fi
        done
        ;;
    ddp-probe)
        step ddp-probe 150 "$here/ddp.sh" "$build" --probe-only --models mlp,convnet \
            --ranks 4,8,16 --reps 3
        ;;
    compress)
        step compress 300 "$here/compress.sh" "$build" --models mlp --ranks 4 --seeds 3
        ;;
    ddp)
        step ddp 420 "$here/ddp.sh" "$build" --ranks 4,8,16 --reps 3 --optims fused,default \
            --allreduce-reps 0 --mlp-steps 150 --mlp-warmup 25 --convnet-steps 25 \
            --convnet-warmup 5
        ;;
    esac
done
tar -czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" 2>/dev/null &&
    note "many_core.sh: everything in $out.tgz ($(($(date +%s) - started)) s)"
