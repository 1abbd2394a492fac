#!/bin/sh
# outputs.sh — no run is lost to an output path: an unwritable --save-weights or --metrics
# is refused before the data loads (no epoch line, exit 1, the path named), one process and
# under mpirun; and when the weights cannot be written at the end after all (the directory
# removed during training), they are kept in a fallback file that the message names.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-out-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
LINREG="$SRC/examples/linreg.ini"

# refused NAME REGEX CMD...: CMD exits 1 before training with a line matching REGEX.
refused() {
    name=$1 regex=$2
    shift 2
    "$@" >"$tmp/$name.out" 2>&1
    code=$?
    if [ $code -ne 1 ]; then
        echo "FAIL $name: exit status $code, expected 1"; sed 's/^/  /' "$tmp/$name.out"; fail=1
    elif grep -q '^epoch' "$tmp/$name.out"; then
        echo "FAIL $name: it trained before refusing:"; sed 's/^/  /' "$tmp/$name.out"; fail=1
    elif ! grep -Eq "$regex" "$tmp/$name.out"; then
        echo "FAIL $name: no line matches /$regex/ in:"; sed 's/^/  /' "$tmp/$name.out"; fail=1
    else
        echo "ok $name: $(grep -E "$regex" "$tmp/$name.out" | head -1)"
    fi
}

# A directory that does not exist, a directory given as the file, a file as a directory
# (root ignores permission bits, so these are the unwritable paths every user has).
refused save_nodir "^dtrain: save-weights: $tmp/nowhere/w\.safetensors: cannot be written: No such file" \
    "$DTRAIN" train "$LINREG" --save-weights "$tmp/nowhere/w.safetensors"
refused save_isdir "^dtrain: save-weights: $tmp: is a directory" \
    "$DTRAIN" train "$LINREG" --save-weights "$tmp"
: >"$tmp/afile"
refused save_notdir "^dtrain: save-weights: $tmp/afile/w\.safetensors: cannot be written: Not a directory" \
    "$DTRAIN" train "$LINREG" --save-weights "$tmp/afile/w.safetensors"
refused metrics_nodir "^dtrain: metrics: $tmp/nowhere/m\.jsonl: cannot be opened for writing: No such file" \
    "$DTRAIN" train "$LINREG" --metrics "$tmp/nowhere/m.jsonl"
# Empty paths are named as such.
refused save_empty "^dtrain: save-weights: the output path is empty" \
    "$DTRAIN" train "$LINREG" --save-weights ""
refused metrics_empty "^dtrain: metrics: the output path is empty" \
    "$DTRAIN" train "$LINREG" --metrics ""
refused tensorboard_empty "^dtrain: tensorboard: the output directory is empty" \
    "$DTRAIN" train "$LINREG" --tensorboard ""
refused save_mpi "save-weights: $tmp/nowhere/w\.safetensors: cannot be written" \
    "$MPIRUN" -np 2 "$DTRAIN" train "$LINREG" --save-weights "$tmp/nowhere/w.safetensors"

# The directory disappears while training: stdout goes to a reader that removes it after
# the first line and only then drains the rest, so the run (300 KB of step lines, more
# than a pipe holds) blocks until the directory is gone.
mkdir "$tmp/gone"
(cd "$tmp" && "$DTRAIN" train "$LINREG" --epochs 100 --log-every 1 --no-progress \
    --save-weights "$tmp/gone/w.safetensors" 2>"$tmp/late.err"; echo $? >"$tmp/late.rc") |
    { read -r first; rm -rf "$tmp/gone"; cat >/dev/null; }
code=$(cat "$tmp/late.rc")
fallback=$(sed -n 's/.*the trained weights are in \(.*\) instead$/\1/p' "$tmp/late.err")
if [ "$code" -ne 1 ]; then
    echo "FAIL late: exit status $code, expected 1"; cat "$tmp/late.err"; fail=1
elif [ -z "$fallback" ]; then
    echo "FAIL late: the message names no fallback file:"; cat "$tmp/late.err"; fail=1
else
    case $fallback in /*) ;; *) fallback="$tmp/$fallback" ;; esac
    if [ ! -s "$fallback" ]; then
        echo "FAIL late: $fallback is not there"; fail=1
    elif ! "$DTRAIN" train "$LINREG" --epochs 0 --init-weights "$fallback" >"$tmp/eval.out" 2>&1; then
        echo "FAIL late: the fallback file does not load:"; cat "$tmp/eval.out"; fail=1
    else
        echo "ok late: $(cat "$tmp/late.err")"
    fi
fi
exit $fail
