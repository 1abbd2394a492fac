#!/bin/sh
# weights_convnet.sh PYTHON — the seeds' ConvNet's weights out and back in through the CLI.
#
# examples/convnet.ini trained 2 steps of 4 samples on a small IDX directory (8 training and
# 4 test images written here, so the test takes well under a second) and saved
# (--save-weights); the file's header gives conv weights PyTorch's (C_out, C_in, kH, kW)
# and linear weights (out, in); loaded into a run that trains nothing (--init-weights,
# --epochs 0 --max-steps 0), it gives the same test loss and accuracy, bit for bit, and
# saves a byte-identical file. tests/unit/test_weights_convnet.c checks the same through
# the library, and PyTorch's own file.
set -u
PY=${1:?usage: weights_convnet.sh PYTHON}
DTRAIN=${DTRAIN:?DTRAIN must name the dtrain binary (ctest sets it)}
SRC=${DT_SOURCE_DIR:?DT_SOURCE_DIR must name the source tree (ctest sets it)}
. "$SRC/tests/cli/inputs.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$SRC/tests/cli/runner.sh"

d="$tmp/data"
mkdir -p "$d"
idx_labels "$d/train-labels-idx1-ubyte" 0x00000801 8 "0 9 4 1 7 3 3 5"
idx_images "$d/train-images-idx3-ubyte" 0x00000803 8 28 28 6272
idx_labels "$d/t10k-labels-idx1-ubyte" 0x00000801 4 "1 2 8 0"
idx_images "$d/t10k-images-idx3-ubyte" 0x00000803 4 28 28 3136
convnet="$SRC/examples/convnet.ini"
common="--data $d --threads 1 --no-progress --batch 4"

# shellcheck disable=SC2086 # common is a list of words
run a train "$convnet" $common --max-steps 2 \
    --save-weights "$tmp/a.safetensors" --metrics "$tmp/a.jsonl"
# shellcheck disable=SC2086
run b train "$convnet" $common --epochs 0 --max-steps 0 --log-every 1 \
    --init-weights "$tmp/a.safetensors" --save-weights "$tmp/b.safetensors" \
    --metrics "$tmp/b.jsonl"
"$PY" - "$tmp/a.safetensors" "$tmp/a.jsonl" "$tmp/b.jsonl" <<'PYEOF' || fail=1
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
want = {"conv1.weight": [32, 1, 3, 3], "conv1.bias": [32], "conv2.weight": [64, 32, 3, 3],
        "conv2.bias": [64], "fc1.weight": [128, 9216], "fc1.bias": [128],
        "fc2.weight": [10, 128], "fc2.bias": [10]}
header.pop("__metadata__", None)
got = {k: v["shape"] for k, v in header.items()}
if got != want:
    sys.exit(f"FAIL: the saved header's shapes {got}, expected PyTorch's {want}")
print("header shapes are PyTorch's: conv (C_out, C_in, kH, kW), linear (out, in)")
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[2:4])
ea = [o for o in a if o["event"] == "epoch"][-1]
eb = [o for o in b if o["event"] == "epoch"][-1]
if [o for o in b if o["event"] == "step"]:
    sys.exit("FAIL: the loading run took a training step")
print(f"saved after 2 steps: test loss {ea['test_loss']!r}, accuracy {ea['test_accuracy']!r}")
print(f"loaded:              test loss {eb['test_loss']!r}, accuracy {eb['test_accuracy']!r}")
if (ea["test_loss"], ea["test_accuracy"]) != (eb["test_loss"], eb["test_accuracy"]):
    sys.exit("FAIL: the loaded weights do not give the saved run's test loss and accuracy")
PYEOF
if ! cmp "$tmp/a.safetensors" "$tmp/b.safetensors"; then
    echo "FAIL: the file saved after loading differs from the file loaded"
    fail=1
fi

[ $fail -eq 0 ] && echo "ok: ConvNet weights round trip"
exit $fail
