#!/bin/sh
# help.sh — `dtrain --help` and `dtrain train --help` exit 0, print to stdout only, and show
# the real defaults: each shorthand names its config key and default, and every config
# key is listed with a default. The defaults checked here are the ones the examples and
# the issue state (2 epochs, batch 32, a cosine schedule, Adam at 1e-3, Fashion-MNIST, the seeds' ConvNet).
set -u
DTRAIN=${DTRAIN:?DTRAIN must name the dtrain binary (ctest sets it)}
SRC=${DT_SOURCE_DIR:?DT_SOURCE_DIR must name the source tree (ctest sets it)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect_line FILE REGEX: FILE has a line matching the extended regex.
expect_line() {
    if ! grep -Eq -- "$2" "$1"; then
        echo "FAIL: $(basename "$1") has no line matching: $2"
        fail=1
    fi
}

# run_help NAME ARGS...: runs dtrain ARGS, keeps stdout in $tmp/NAME, checks status 0 and
# an empty stderr.
run_help() {
    name=$1
    shift
    "$DTRAIN" "$@" >"$tmp/$name" 2>"$tmp/$name.err"
    code=$?
    echo "\$ dtrain $*: exit status $code, $(wc -l <"$tmp/$name") lines on stdout"
    if [ $code -ne 0 ]; then
        echo "FAIL: exit status $code, expected 0"
        fail=1
    fi
    if [ -s "$tmp/$name.err" ]; then
        echo "FAIL: help wrote to stderr:"
        sed 's/^/  /' "$tmp/$name.err"
        fail=1
    fi
}

run_help top --help
expect_line "$tmp/top" '^usage: dtrain <command>'
expect_line "$tmp/top" '^  train +train a model'

run_help train train --help
run_help train_h train -h
if ! cmp -s "$tmp/train" "$tmp/train_h"; then
    echo "FAIL: 'dtrain train -h' differs from 'dtrain train --help'"
    fail=1
fi
t="$tmp/train"
expect_line "$t" '^usage: dtrain train \[CONFIG\] \[options\]'
expect_line "$t" '^  --epochs N .*\(train\.epochs; default 2\)$'
expect_line "$t" '^  --batch N .*\(train\.batch; default 32\)$'
expect_line "$t" '^  --lr X .*\(optim\.lr; default 0\.001\)$'
expect_line "$t" '^  --seed N .*\(train\.seed; default 1\)$'
expect_line "$t" '^  --data DIR .*\(data\.dir; default /usr/share/datasets/fashion-mnist\)$'
expect_line "$t" '^  --shuffle on\|off .*\(data\.shuffle; default on\)$'
expect_line "$t" '^  --max-steps N '
expect_line "$t" '^  --init-weights FILE '
expect_line "$t" '^  --save-weights FILE '
expect_line "$t" '^  --metrics FILE '
expect_line "$t" '^  --set KEY=VALUE '
expect_line "$t" '\(x/255 - data\.mean\) / data\.std'
expect_line "$t" '^  optim\.kind '
expect_line "$t" 'default: conv1: conv2d 32 3, relu, conv2: conv2d 64 3, relu, maxpool2d 2, dropout 0\.25, flatten, fc1: linear 128, relu, dropout 0\.5, fc2: linear 10, log_softmax$'

# Every config key line is followed by its default line.
keys=$(grep -cE '^  [a-z]+\.[a-z_0-9]+ ' "$t")
defaults=$(grep -cE '^ +default: ' "$t")
echo "config keys listed: $keys, default lines: $defaults"
if [ "$keys" -lt 40 ] || [ "$keys" -ne "$defaults" ]; then
    echo "FAIL: expected every config key (at least 40) with one default line each"
    fail=1
fi

# --help after a config and options still prints the help and trains nothing.
run_help train_late train "$SRC/examples/mlp.ini" --epochs 3 --help
if ! cmp -s "$tmp/train" "$tmp/train_late"; then
    echo "FAIL: 'dtrain train examples/mlp.ini --epochs 3 --help' does not print the same help"
    fail=1
fi

# The registry's strategies and their options: --help lists each (from the registry), and
# the man page names each, so a strategy added with its row cannot go undocumented.
man="$SRC/docs/dtrain.1"
strategies=$(sed -n '/^strategies /,/^$/p' "$t" | awk 'NR > 1 && NF { print $1 }')
echo "strategies listed: $(echo $strategies)"
for s in ddp ps fedavg; do
    if ! echo " $(echo $strategies) " | grep -q " $s "; then
        echo "FAIL: --help's 'strategies:' section does not list $s"
        fail=1
    fi
done
for s in $strategies; do
    if ! grep -qF -- "\-\-strategy $s" "$man"; then
        echo "FAIL: docs/dtrain.1 does not describe --strategy $s (as \\-\\-strategy $s)"
        fail=1
    fi
done
for o in $(sed -n '/^options:/,/^$/p' "$t" | awk '{ print $1 }' | grep '^--'); do
    pat=$(printf '%s' "$o" | sed 's/-/\\-/g')
    if ! grep -qF -- "$pat" "$man"; then
        echo "FAIL: docs/dtrain.1 does not describe $o"
        fail=1
    fi
done

# generate's and export's options: each in --help and in the man page.
run_help generate generate --help
expect_line "$tmp/generate" '^usage: dtrain generate SOURCE '
expect_line "$tmp/generate" 'rebuilt from the last block_size - 1 bytes'
run_help export export --help
expect_line "$tmp/export" '^  --format safetensors\|hf '
for cmd in generate export; do
    for o in $(sed -n '/^options:/,/^$/p' "$tmp/$cmd" | awk '{ print $1 }' | grep '^--'); do
        pat=$(printf '%s' "$o" | sed 's/-/\\-/g')
        if ! grep -qF -- "$pat" "$man"; then
            echo "FAIL: docs/dtrain.1 does not describe $cmd's $o"
            fail=1
        fi
    done
done

[ $fail -eq 0 ] && echo "ok: help"
exit $fail
