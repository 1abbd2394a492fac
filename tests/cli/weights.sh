#!/bin/sh
# weights.sh PYTHON CASE — weights in and out through the CLI.
#
#   roundtrip  an MLP trained 5 steps and saved (--save-weights), then loaded into a fresh
#              run (--init-weights), gives the same test loss and accuracy, bit for bit,
#              and saves a byte-identical file.
#   fixed      PyTorch's initial MLP weights (tests/e2e/mlp_init.safetensors) loaded and
#              saved unchanged: the file holds the same tensors, names, shapes and bytes as
#              PyTorch's, and matches the committed tests/cli/mlp_init_saved.safetensors
#              byte for byte (header order, metadata, offsets: the format does not drift).
#
# A run that must leave the weights as loaded trains nothing: --epochs 0 --max-steps 0
# evaluates (and saves) the parameters as they are; it must log no step.
#
# The reference was written by dtrain with the `fixed` run below; after a deliberate
# format change, rewrite it with that command line and check it with st_compare.py.
set -u
PY=${1:?usage: weights.sh PYTHON CASE}
CASE=${2:?usage: weights.sh PYTHON CASE}
DTRAIN=${DTRAIN:?DTRAIN must name the dtrain binary (ctest sets it)}
SRC=${DT_SOURCE_DIR:?DT_SOURCE_DIR must name the source tree (ctest sets it)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$SRC/tests/cli/runner.sh"

mlp="$SRC/examples/mlp.ini"
no_step="--epochs 0 --max-steps 0 --log-every 1"
names=1.weight,1.bias,4.weight,4.bias

case $CASE in
roundtrip)
    run a train "$mlp" --threads 1 --no-progress --max-steps 5 \
        --save-weights "$tmp/a.safetensors" --metrics "$tmp/a.jsonl"
    # shellcheck disable=SC2086 # no_step is a list of words
    run b train "$mlp" --threads 1 --no-progress $no_step \
        --init-weights "$tmp/a.safetensors" --save-weights "$tmp/b.safetensors" \
        --metrics "$tmp/b.jsonl"
    "$PY" - "$tmp/a.jsonl" "$tmp/b.jsonl" <<'EOF' || fail=1
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
ea = [o for o in a if o["event"] == "epoch"][-1]
eb = [o for o in b if o["event"] == "epoch"][-1]
sb = [o for o in b if o["event"] == "step"]
if sb:
    sys.exit(f"FAIL: the loading run's step records {sb}: expected no training step")
print(f"saved after 5 steps: test loss {ea['test_loss']!r}, accuracy {ea['test_accuracy']!r}")
print(f"loaded:              test loss {eb['test_loss']!r}, accuracy {eb['test_accuracy']!r}")
if (ea["test_loss"], ea["test_accuracy"]) != (eb["test_loss"], eb["test_accuracy"]):
    sys.exit("FAIL: the loaded weights do not give the saved run's test loss and accuracy")
EOF
    "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/b.safetensors" "$tmp/a.safetensors" \
        --names "$names" || fail=1
    if ! cmp "$tmp/a.safetensors" "$tmp/b.safetensors"; then
        echo "FAIL: the file saved after loading differs from the file loaded"
        fail=1
    fi
    ;;
fixed)
    # shellcheck disable=SC2086 # no_step is a list of words
    run w train "$mlp" --threads 1 --no-progress $no_step --set train.eval=off \
        --init-weights "$SRC/tests/e2e/mlp_init.safetensors" \
        --save-weights "$tmp/w.safetensors"
    if grep -q ' step ' "$tmp/w.out"; then
        echo "FAIL: the saving run took a training step"
        fail=1
    fi
    "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/w.safetensors" \
        "$SRC/tests/e2e/mlp_init.safetensors" --names "$names" || fail=1
    if ! cmp "$tmp/w.safetensors" "$SRC/tests/cli/mlp_init_saved.safetensors"; then
        echo "FAIL: dtrain's file differs from tests/cli/mlp_init_saved.safetensors"
        fail=1
    fi
    ;;
*)
    echo "weights.sh: unknown case '$CASE'" >&2
    exit 2
    ;;
esac

[ $fail -eq 0 ] && echo "ok: weights $CASE"
exit $fail
