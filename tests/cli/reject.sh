#!/bin/sh
# reject.sh CASE CODE REGEX — builds the malformed input of CASE in a fresh temporary
# directory, runs dtrain on it, and checks that dtrain refuses it the way a user must see
# it: exit status CODE (1 a failure, 2 a usage error) and a message on stderr that matches
# the extended regular expression REGEX (tests/cli/cli.cmake holds each case's REGEX).
#
# The exit status of this script is the verdict. ctest ignores a test's exit status once a
# PASS_REGULAR_EXPRESSION is set, and dtrain's message would match even if dtrain exited 0
# or crashed after printing it, so the status and the message are both checked here.
set -u

if [ $# -ne 3 ]; then
    echo "usage: reject.sh CASE CODE REGEX" >&2
    exit 2
fi
case_name=$1
want_code=$2
want_re=$3
DTRAIN=${DTRAIN:?DTRAIN must name the dtrain binary (ctest sets it)}
SRC=${DT_SOURCE_DIR:?DT_SOURCE_DIR must name the source tree (ctest sets it)}
. "$SRC/tests/cli/inputs.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# A small data directory of valid IDX files: 3 training and 2 test images of 28x28.
# Each case then spoils one file.
good_idx_dir() {
    mkdir -p "$1"
    idx_labels "$1/train-labels-idx1-ubyte" 0x00000801 3 "0 9 4"
    idx_images "$1/train-images-idx3-ubyte" 0x00000803 3 28 28 2352
    idx_labels "$1/t10k-labels-idx1-ubyte" 0x00000801 2 "1 2"
    idx_images "$1/t10k-images-idx3-ubyte" 0x00000803 2 28 28 1568
}
mlp="$SRC/examples/mlp.ini"
linreg="$SRC/examples/linreg.ini"

# Each case sets the command line in "$@".
case $case_name in
idx_truncated)
    # The header promises 3 x 28 x 28 pixels; the file ends after 1000 of them.
    good_idx_dir "$tmp/d"
    idx_images "$tmp/d/train-images-idx3-ubyte" 0x00000803 3 28 28 1000
    set -- train "$mlp" --data "$tmp/d" ;;
idx_truncated_header)
    # Six bytes: the magic and half of the count.
    good_idx_dir "$tmp/d"
    be32 0x00000801 >"$tmp/d/train-labels-idx1-ubyte"
    printf '\000\000' >>"$tmp/d/train-labels-idx1-ubyte"
    set -- train "$mlp" --data "$tmp/d" ;;
idx_truncated_gzip)
    # A gzip file cut in the middle of its deflate stream.
    good_idx_dir "$tmp/d"
    gzip -c "$tmp/d/train-images-idx3-ubyte" | head -c 40 >"$tmp/d/train-images-idx3-ubyte.gz"
    rm "$tmp/d/train-images-idx3-ubyte"
    set -- train "$mlp" --data "$tmp/d" ;;
idx_bad_magic)
    # Not an IDX file at all: a PNG signature where the magic belongs.
    good_idx_dir "$tmp/d"
    printf '\211PNG\r\n\032\n' >"$tmp/d/t10k-images-idx3-ubyte"
    head -c 2000 /dev/zero >>"$tmp/d/t10k-images-idx3-ubyte"
    set -- train "$mlp" --data "$tmp/d" ;;
idx_wrong_type)
    # Data type 0x0d (float) instead of unsigned byte.
    good_idx_dir "$tmp/d"
    idx_images "$tmp/d/train-images-idx3-ubyte" 0x00000d03 3 28 28 2352
    set -- train "$mlp" --data "$tmp/d" ;;
idx_wrong_ndim)
    # An image file with 2 dimensions (3 images of 784 pixels, flattened): magic 0x802.
    good_idx_dir "$tmp/d"
    { be32 0x00000802; be32 3; be32 784; head -c 2352 /dev/zero; } >"$tmp/d/train-images-idx3-ubyte"
    set -- train "$mlp" --data "$tmp/d" ;;
idx_zero_dim)
    good_idx_dir "$tmp/d"
    idx_images "$tmp/d/t10k-images-idx3-ubyte" 0x00000803 2 0 28 0
    set -- train "$mlp" --data "$tmp/d" ;;
idx_count_mismatch)
    # 3 images but only 2 labels.
    good_idx_dir "$tmp/d"
    idx_labels "$tmp/d/train-labels-idx1-ubyte" 0x00000801 2 "0 1"
    set -- train "$mlp" --data "$tmp/d" ;;
idx_trailing)
    # One byte more than the header promises.
    good_idx_dir "$tmp/d"
    idx_images "$tmp/d/train-images-idx3-ubyte" 0x00000803 3 28 28 2353
    set -- train "$mlp" --data "$tmp/d" ;;
idx_label_range)
    # Label 10 among 10 classes (0..9).
    good_idx_dir "$tmp/d"
    idx_labels "$tmp/d/t10k-labels-idx1-ubyte" 0x00000801 2 "3 10"
    set -- train "$mlp" --data "$tmp/d" ;;
idx_missing_dir)
    set -- train "$mlp" --data "$tmp/nowhere" ;;
idx_shape_pair)
    # Training images of 2x2 and test images of 28x28 in one directory: the model is planned
    # for 2x2 samples, and evaluation once wrote 784 floats per sample into room for 4.
    good_idx_dir "$tmp/d"
    idx_images "$tmp/d/train-images-idx3-ubyte" 0x00000803 3 2 2 12
    set -- train "$mlp" --data "$tmp/d" --set model.layers="flatten, linear 10" ;;
idx_shape_pair_close)
    # 27x28 against 28x28: once exited 0 with an accuracy computed from garbage.
    good_idx_dir "$tmp/d"
    idx_images "$tmp/d/train-images-idx3-ubyte" 0x00000803 3 27 28 2268
    set -- train "$mlp" --data "$tmp/d" ;;
csv_columns_pair)
    # A training file of 1 feature and a test file of 50: the test rows overflowed the
    # model's input buffer.
    printf '1.0,2.0\n2.0,4.0\n3.0,6.0\n' >"$tmp/train.csv"
    row=""; i=0
    while [ $i -lt 50 ]; do row="$row$i.5,"; i=$((i + 1)); done
    printf '%s1.0\n%s2.0\n' "$row" "$row" >"$tmp/test.csv"
    set -- train --set data.kind=csv --set data.train_file="$tmp/train.csv" \
        --set data.test_file="$tmp/test.csv" --set model.layers="linear 1" --set loss.kind=mse ;;
csv_test_label_range)
    # The training file has classes 0..2; the test file's line 2 holds a 5. The message
    # names the test file and its line when it is read, not at the first evaluation.
    printf '0.5,0.25,1\n0.1,0.2,2\n0.3,0.4,0\n' >"$tmp/train.csv"
    printf '0.5,0.25,1\n0.1,0.2,5\n' >"$tmp/test.csv"
    set -- train --set data.kind=csv --set data.train_file="$tmp/train.csv" \
        --set data.test_file="$tmp/test.csv" --set data.csv_labels=on \
        --set data.num_classes=0 --set model.layers="linear 3" --set loss.kind=cross_entropy ;;
csv_bad_field)
    printf 'x1,x2,y\n1.0,2.0,3.0\n4.0,4.5e,6.0\n' >"$tmp/train.csv"
    set -- train --set data.kind=csv --set data.train_file="$tmp/train.csv" \
        --set data.test_samples=1 --set model.layers="linear 1" --set loss.kind=mse ;;
csv_ragged)
    printf '1,2,3\n4,5,6\n7,8\n10,11,12\n' >"$tmp/train.csv"
    set -- train --set data.kind=csv --set data.train_file="$tmp/train.csv" \
        --set data.test_samples=1 --set model.layers="linear 1" --set loss.kind=mse ;;
csv_label_range)
    # A class label of 3 where data.num_classes says 3 classes (0..2).
    printf '0.5,0.25,1\n0.1,0.2,3\n0.3,0.4,0\n' >"$tmp/train.csv"
    set -- train --set data.kind=csv --set data.train_file="$tmp/train.csv" \
        --set data.csv_labels=on --set data.num_classes=3 --set data.test_samples=1 \
        --set model.layers="linear 3" --set loss.kind=cross_entropy ;;
config_unknown_key)
    printf '# a config with a misspelt key on line 4\n[train]\nepochs = 1\nepochz = 2\n' >"$tmp/c.ini"
    set -- train "$tmp/c.ini" ;;
config_unknown_section)
    printf '[training]\nepochs = 1\n' >"$tmp/c.ini"
    set -- train "$tmp/c.ini" ;;
config_bad_value)
    printf '[train]\nepochs = 1\n\n[optim]\nlr = fast\n' >"$tmp/c.ini"
    set -- train "$tmp/c.ini" ;;
config_bad_layer)
    printf '[model]\nlayers = flatten, linear 128, relu, lstm 10\n' >"$tmp/c.ini"
    set -- train "$tmp/c.ini" ;;
config_syntax)
    printf '[train]\nepochs = 1\nthis line has no equals sign\n' >"$tmp/c.ini"
    set -- train "$tmp/c.ini" ;;
config_missing)
    set -- train "$tmp/no-such-config.ini" ;;
set_unknown_key)
    set -- train "$mlp" --set train.epoch=3 ;;
set_bad_value)
    set -- train "$mlp" --set data.shuffle=sometimes ;;
set_no_equals)
    set -- train "$mlp" --set train.epochs ;;
shorthand_bad_value)
    set -- train "$mlp" --batch -4 ;;
unknown_option)
    set -- train "$mlp" --epoch 3 ;;
option_needs_value)
    set -- train "$mlp" --epochs ;;
unknown_command)
    set -- fit "$mlp" ;;
st_bad_offsets)
    # linreg's model is one linear layer from 16 features to 4 targets: 0.weight (4, 16)
    # and 0.bias (4). The file claims 0.weight's 256 bytes end at 272, but its data region
    # holds only 100 bytes.
    st_file "$tmp/w.safetensors" 100 \
        '{"0.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"0.weight":{"dtype":"F32","shape":[4,16],"data_offsets":[16,272]}}'
    set -- train "$linreg" --max-steps 1 --init-weights "$tmp/w.safetensors" ;;
st_bad_header_len)
    # The 8-byte header length points past the end of the file.
    { printf '\377\377\000\000\000\000\000\000'; printf '{}'; } >"$tmp/w.safetensors"
    set -- train "$linreg" --max-steps 1 --init-weights "$tmp/w.safetensors" ;;
st_wrong_shape)
    # A well-formed file whose 0.weight is stored transposed, (16, 4).
    st_file "$tmp/w.safetensors" 272 \
        '{"0.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"0.weight":{"dtype":"F32","shape":[16,4],"data_offsets":[16,272]}}'
    set -- train "$linreg" --max-steps 1 --init-weights "$tmp/w.safetensors" ;;
st_wrong_model)
    # PyTorch's MLP weights (hidden width 128) offered to an MLP of width 64.
    set -- train "$mlp" --max-steps 1 --set model.layers="flatten, linear 64, relu, linear 10" \
        --init-weights "$SRC/tests/e2e/mlp_init.safetensors" ;;
st_missing_tensor)
    st_file "$tmp/w.safetensors" 16 \
        '{"0.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}'
    set -- train "$linreg" --max-steps 1 --init-weights "$tmp/w.safetensors" ;;
st_wrong_dtype)
    # Well-formed, but in double precision: dtrain's parameters are F32.
    st_file "$tmp/w.safetensors" 544 \
        '{"0.bias":{"dtype":"F64","shape":[4],"data_offsets":[0,32]},"0.weight":{"dtype":"F64","shape":[4,16],"data_offsets":[32,544]}}'
    set -- train "$linreg" --max-steps 1 --init-weights "$tmp/w.safetensors" ;;
st_extra_tensor)
    # The model's two tensors and one it does not have.
    st_file "$tmp/w.safetensors" 288 \
        '{"0.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"0.weight":{"dtype":"F32","shape":[4,16],"data_offsets":[16,272]},"1.weight":{"dtype":"F32","shape":[4],"data_offsets":[272,288]}}'
    set -- train "$linreg" --max-steps 1 --init-weights "$tmp/w.safetensors" ;;
st_nan)
    # linreg's tensors, well-formed, with a NaN as element 5 of 0.weight.
    h='{"0.bias":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"0.weight":{"dtype":"F32","shape":[4,16],"data_offsets":[16,272]}}'
    {
        le64 ${#h}
        printf '%s' "$h"
        head -c 36 /dev/zero
        printf '\000\000\300\177'
        head -c 232 /dev/zero
    } >"$tmp/w.safetensors"
    set -- train "$linreg" --max-steps 1 --init-weights "$tmp/w.safetensors" ;;
batch_too_large)
    # 3 training samples, batch 64: once trained 3-sample steps while claiming 64.
    good_idx_dir "$tmp/d"
    set -- train "$mlp" --data "$tmp/d" --batch 64 ;;
*)
    echo "reject.sh: unknown case '$case_name'" >&2
    exit 2 ;;
esac

"$DTRAIN" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
code=$?
echo "\$ dtrain $*"
echo "exit status: $code (expected $want_code)"
echo "stderr:"
sed 's/^/  /' "$tmp/stderr"
fail=0
if [ "$code" -ne "$want_code" ]; then
    echo "FAIL: exit status $code, expected $want_code"
    fail=1
fi
if ! grep -Eq -- "$want_re" "$tmp/stderr"; then
    echo "FAIL: stderr does not match: $want_re"
    fail=1
fi
# One clear message: a crash report, an assertion or a sanitizer finding is not one.
if grep -Eq 'Assertion|AddressSanitizer|runtime error|Segmentation' "$tmp/stderr"; then
    echo "FAIL: stderr holds a crash report"
    fail=1
fi
if [ $fail -eq 0 ]; then
    echo "ok: $case_name refused with status $code"
fi
exit $fail
