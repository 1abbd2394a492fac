#!/bin/sh
# cli_rank_memory.sh — `dtrain train`'s per-rank memory lines ("dtrain: memory planned on rank
# R ...", src/cli/train_memory.c) on a tiny GPT (2 blocks of 4 heads, E 24, block 16, AdamW):
# one line for one process, holding the whole model; at tp 2 a line for each rank, each
# holding the replicated tensors whole and half of every split one (the blocks' c_attn,
# attention c_proj, c_fc and MLP c_proj: 12 E^2 + 7 E per block, counted here from the
# shapes, not read from dtrain), with AdamW's state (two floats per parameter) following the
# split; the parts add up to the line's total, what backward keeps lies between the blocks'
# per-position part and the activations; under --sequence-parallel the blocks'
# per-position activations are below tp 2's without it; under --zero 3 each of 2 ranks holds
# a slice of the whole and two windows of one block.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-rankmem-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail=0

awk 'BEGIN { srand(7); split("the cat sat on a mat dog ran far and then slept home", w, " ");
             for (i = 0; i < 3000; i++) printf "%s ", w[int(rand() * 13) + 1]; print "" }' \
    >"$tmp/corpus.txt"
E=24 L=2 T=16 V=256
cat >"$tmp/gpt.ini" <<INI
[data]
kind = text
text_files = $tmp/corpus.txt
[model]
block_size = $T
layers = embedding $V $E, position, dropout 0.0, $L x block 4 p=0.0 attn_p=0.0, layernorm,
    lm_head
[loss]
kind = cross_entropy
[optim]
kind = adamw
[train]
batch = 4
max_steps = 1
eval = off
INI
# The whole model: embeddings, L blocks of 12 E^2 + 13 E, the final LayerNorm (the head is
# tied); of each block, 12 E^2 + 7 E split over the tensor-parallel ranks.
whole=$((V * E + T * E + L * (12 * E * E + 13 * E) + 2 * E))
split=$((L * (12 * E * E + 7 * E)))

run() { # NAME RANKS [options]: the run's memory lines into $tmp/NAME.mem
    name=$1 np=$2
    shift 2
    if [ "$np" = 1 ]; then
        "$DTRAIN" train "$tmp/gpt.ini" --threads 1 --no-progress "$@" >"$tmp/$name.out" 2>&1
    else
        "$MPIRUN" --oversubscribe -np "$np" "$DTRAIN" train "$tmp/gpt.ini" --threads 1 \
            --no-progress "$@" >"$tmp/$name.out" 2>&1
    fi
    code=$?
    # one process: "memory planned: ..."; ranks: "memory planned on rank N (...): ..."
    grep -E '^dtrain: memory planned( on rank |: )' "$tmp/$name.out" >"$tmp/$name.mem"
    if [ $code -ne 0 ]; then
        echo "FAIL $name: exit status $code:"; sed 's/^/  /' "$tmp/$name.out"; fail=1
    fi
}

# check NAME RANKS EXPECTED_PARAMS: one line per rank, in rank order, each with EXPECTED_PARAMS
# parameters of the model's $whole, AdamW state of 8 bytes per parameter, parts that add up
# to the total (each printed to 0.01 MB).
check() {
    name=$1 np=$2 want=$3
    awk -v np="$np" -v want="$want" -v whole="$whole" -v name="$name" '
        # the first number after "KEY " (the line names each part once)
        function mb(key,   s) {
            if (!match($0, key " [0-9.]+")) return -1
            s = substr($0, RSTART + length(key) + 1, RLENGTH - length(key) - 1); return s + 0
        }
        {
            n++
            r = $0; sub(/^dtrain: memory planned on rank /, "", r); r += 0
            if (r != n - 1) { printf "FAIL %s: line %d is rank %d\n", name, n, r; bad = 1 }
            total = $0; sub(/^[^:]*: [^:]*: /, "", total); total += 0
            c[1] = c[2] = -1
            if (match($0, /\([0-9]+ of the model.s [0-9]+\)/)) {
                split(substr($0, RSTART + 1, RLENGTH - 2), c, " "); c[2] = c[5]
            }
            if (c[1] != want || c[2] != whole) {
                printf "FAIL %s: rank %d holds %s of %s parameters, expected %d of %d\n",
                       name, r, c[1], c[2], want, whole; bad = 1
            }
            state = mb("adamw state"); params = mb("parameters"); grads = mb("gradients")
            act = mb("activations and workspaces")
            if (state < 8 * want / 1e6 - 0.006 || state > 8 * want / 1e6 + 0.006) {
                printf "FAIL %s: rank %d: AdamW state %.2f MB, expected %.4f (8 bytes x %d)\n",
                       name, r, state, 8 * want / 1e6, want; bad = 1
            }
            # what backward keeps is part of the activations, and holds the part of the
            # blocks kept per position
            kept = mb("kept for backward"); per = mb("per-position")
            if (kept < per || kept > act + 0.005) {
                printf "FAIL %s: rank %d: kept for backward %.2f MB, expected between the " \
                       "blocks\047 per-position %.2f and the activations %.2f\n", name, r, kept,
                       per, act; bad = 1
            }
            sum = params + grads + state + act
            if (sum < total - 0.025 || sum > total + 0.025) {
                printf "FAIL %s: rank %d: parts %.2f + %.2f + %.2f + %.2f MB against the " \
                       "total %.2f\n", name, r, params, grads, state, act, total; bad = 1
            }
        }
        END {
            if (n != np) { printf "FAIL %s: %d memory lines, expected %d (one per rank)\n",
                                  name, n, np; bad = 1 }
            if (!bad) printf "ok %s: %d line(s), %d of %d parameters per rank\n", name, n,
                             want, whole
            exit bad
        }' "$tmp/$name.mem" || { sed 's/^/  /' "$tmp/$name.mem"; fail=1; }
}

run one 1
check one 1 "$whole"
# What one process keeps for backward, by the design (docs/ARCHITECTURE.md, "A GPT's
# memory"), per sample in floats: the ids, the embeddings' sum, the final LayerNorm's mean,
# 1/std and output, the logits (3T + 2TE + TV), and per block its output, q k v, the
# attention's output, its log-sum-exp per head and position, x1, c_fc's output and both
# LayerNorms' statistics (10TE + HT + 4T); then each block's dropout keys (24 bytes a sample;
# no masks: every p is 0).
H=4 B=4
kept=$((4 * B * (3 * T + 2 * T * E + T * V + L * (10 * T * E + H * T + 4 * T)) + 24 * L * B))
got=$(sed -n '1s/.*kept for backward \([0-9.]*\) MB.*/\1/p' "$tmp/one.mem")
if [ -n "$got" ] && awk -v g="$got" -v w="$kept" 'BEGIN { exit !(g > w / 1e6 - 0.006 &&
                                                                  g < w / 1e6 + 0.006) }'; then
    echo "ok kept for backward: $got MB, the design's $kept bytes"
else
    echo "FAIL kept for backward: '$got' MB, expected the design's $kept bytes"; fail=1
fi
run tp2 2 --tp 2
check tp2 2 $((whole - split / 2))
run tp2sp 2 --tp 2 --sequence-parallel
check tp2sp 2 $((whole - split / 2))

# The blocks' per-position activations: smaller under sequence parallelism (each rank keeps
# its share of the positions; dt_model_memory.seq_bytes, tests/text/test_gpt_memory.c counts
# them exactly).
pos() { sed -n '1s/.*per-position \([0-9.]*\) MB.*/\1/p' "$tmp/$1.mem"; }
a=$(pos tp2) b=$(pos tp2sp)
if [ -n "$a" ] && [ -n "$b" ] && awk -v a="$a" -v b="$b" 'BEGIN { exit !(b < a) }'; then
    echo "ok per-position: tp 2 $a MB, with sequence parallelism $b MB"
else
    echo "FAIL per-position: tp 2 '$a' MB, with sequence parallelism '$b' MB: expected less"
    fail=1
fi
block=$((12 * E * E + 13 * E))
zero3() { # NAME WINDOWS (2: "two windows", 1: "a window") [options]
    name=$1 nwin=$2
    shift 2
    run "$name" 2 --zero 3 "$@"
    awk -v whole="$whole" -v block="$block" -v nwin="$nwin" -v name="$name" '
    function mb(key,   s) {
        if (!match($0, key " [0-9.]+")) return -1
        s = substr($0, RSTART + length(key) + 1, RLENGTH - length(key) - 1); return s + 0
    }
    {
        n++
        slice = win = of = -1
        said = nwin == 2 ? "two windows" : "a window"
        if (match($0, "\\(a slice of [0-9]+ of the model.s [0-9]+, and " said " of [0-9]+\\)")) {
            k = split(substr($0, RSTART + 1, RLENGTH - 2), w, " ")
            slice = w[4] + 0; of = w[8] + 0; win = w[k] + 0
        }
        want = int(whole / 2) + (n == 1 ? whole % 2 : 0)
        if (slice != want || of != whole || win != block) {
            printf "FAIL %s: rank %d holds a slice of %s of %s and %s of %s, expected " \
                   "%d of %d and %d\n", name, n - 1, slice, of, said, win, want, whole, block
            bad = 1
        }
        params = mb("parameters"); grads = mb("gradients"); state = mb("adamw state")
        p = 4 * (want + nwin * block) / 1e6; g = 4 * (want + block) / 1e6
        if (params < p - 0.006 || params > p + 0.006 || grads < g - 0.006 || grads > g + 0.006 ||
            state < 8 * want / 1e6 - 0.006 || state > 8 * want / 1e6 + 0.006) {
            printf "FAIL %s: rank %d: parameters %.2f, gradients %.2f, AdamW state %.2f MB; " \
                   "expected %.4f, %.4f, %.4f\n", name, n - 1, params, grads, state, p, g,
                   8 * want / 1e6; bad = 1
        }
        total += slice
    }
    END {
        if (n != 2 || total != whole) {
            printf "FAIL %s: %d lines, slices summing to %d of %d\n", name, n, total, whole
            bad = 1
        }
        if (!bad) printf "ok %s: 2 slices of the %d parameters, each with %d window(s) of %d\n",
                         name, whole, nwin, block
        exit bad
    }' "$tmp/$name.mem" || { sed 's/^/  /' "$tmp/$name.mem"; fail=1; }
}
# ZeRO-3 at dp 2: each rank a slice of the whole (the first rank one more where the count is
# odd), a parameter window of the largest layer's range (a block: 12 E^2 + 13 E; the
# embedding table V E is smaller here) and, with parallel.overlap on (the default), a second
# for the next layer's prefetch; the gradients the slice and one window, AdamW's state 8
# bytes per slice element.
zero3 zero3 2
zero3 zero3_one 1 --set parallel.overlap=off
# The prefetch: of the 12 windows a step fills (6 layers with parameters, forward and
# backward), all but the first of each pass are gathered while the layer before runs; none
# with the overlap off.
prefetched() { sed -n 's/.*layer windows filled per step: \([0-9]*\); of them prefetched while the layer before ran: \([0-9]*\);.*/\1 \2/p' "$tmp/$1.out"; }
a=$(prefetched zero3) b=$(prefetched zero3_one)
if [ "$a" = "12 10" ] && [ "$b" = "12 0" ]; then
    echo "ok prefetch: 10 of 12 windows prefetched a step, 0 with parallel.overlap=off"
else
    echo "FAIL prefetch: filled and prefetched per step '$a' (expected 12 10) and '$b' (12 0)"
    grep 'ZeRO-3' "$tmp/zero3.out" "$tmp/zero3_one.out" | sed 's/^/  /'; fail=1
fi
exit $fail
