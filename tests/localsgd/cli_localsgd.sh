#!/bin/sh
# cli_localsgd.sh PYTHON — `dtrain train --strategy localsgd` on 2 ranks, the MLP on
# Fashion-MNIST with plain SGD (docs/USER_GUIDE.md):
#   - --sync-every 1: the weights file after 20 steps is ddp's within max |dtheta| <= 1e-6
#     (averaging parameters after one step is averaging gradients);
#   - --localsgd-warmup 5: after 5 steps the weights file is ddp's, byte for byte (two
#     replicas' gradient sums are exact whatever the algorithm);
#   - --sync-every 4: the metrics' bytes per step are the parameter bytes (counted from the
#     weights file) / 4, rounded down, and the averages are counted as the period says (with
#     a warm-up of 2 in 20 steps: after steps 6, 10, 14, 18 and the last, 20); the end-of-run
#     line says the same;
#   - refusals (exit status 2, naming the option): --sync-every and --localsgd-warmup under
#     ddp and ps, --zero 1, --compress and --checkpoint-dir under localsgd, --sync-every 0;
#     on 2 ranks too, where the job ends.
set -u
PY=${1:?usage: cli_localsgd.sh PYTHON}
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-localsgd-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$SRC/tests/support/expect.sh"
MLP="$SRC/examples/mlp.ini"
LIN="$SRC/examples/linreg.ini"
CMP="$SRC/tests/cli/st_compare.py"
SGD="--set optim.kind=sgd --lr 0.1 --threads 1 --no-progress"

# train NAME STEPS ARGS...: 2 ranks, the weights into $tmp/NAME.st, metrics into
# $tmp/NAME.jsonl.
train() {
    name=$1 steps=$2
    shift 2
    expect_ok "$name" "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $SGD --max-steps "$steps" \
        --save-weights "$tmp/$name.st" --metrics "$tmp/$name.jsonl" "$@"
}

# ---- H = 1 is ddp ------------------------------------------------------------------------
train ddp20 20
train h1 20 --strategy localsgd --sync-every 1
if "$PY" "$CMP" "$tmp/h1.st" "$tmp/ddp20.st" --atol 1e-6 >"$tmp/h1.cmp" 2>&1; then
    echo "ok h1_equals_ddp: $(grep -c 'max |a-b|' "$tmp/h1.cmp") tensors within 1e-6"
else
    echo "FAIL h1_equals_ddp: --sync-every 1 after 20 steps is not ddp's within 1e-6:"
    sed 's/^/  /' "$tmp/h1.cmp"; fail=1
fi

# ---- the warm-up is ddp ------------------------------------------------------------------
train ddp5 5
train warm5 5 --strategy localsgd --sync-every 4 --localsgd-warmup 5
if "$PY" "$CMP" "$tmp/warm5.st" "$tmp/ddp5.st" >"$tmp/warm.cmp" 2>&1; then
    echo "ok warmup_is_ddp: the same bytes after 5 warm-up steps"
else
    echo "FAIL warmup_is_ddp: --localsgd-warmup 5 after 5 steps is not ddp's, bit for bit:"
    sed 's/^/  /' "$tmp/warm.cmp"; fail=1
fi

# ---- bytes per step and the averages counted ----------------------------------------------
train h4 20 --strategy localsgd --sync-every 4 --localsgd-warmup 2
"$PY" - "$tmp/h4.st" "$tmp/h4.jsonl" "$tmp/h4.out" <<'EOF' || fail=1
import json, struct, sys
st, metrics, out = sys.argv[1:]
with open(st, "rb") as f:
    (hlen,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(hlen))
params = 0
for name, e in header.items():
    if name != "__metadata__":
        n = 1
        for d in e["shape"]:
            n *= d
        params += n
want = params * 4 // 4
comm = [json.loads(l) for l in open(metrics) if '"event":"comm"' in l]
if len(comm) != 1:
    sys.exit(f"FAIL bytes: {len(comm)} comm records in the metrics, expected 1")
c = comm[0]
bad = []
for key, expect in (("wire_bytes_per_step", want), ("dense_bytes_per_step", want),
                    ("syncs", 5), ("strategy", "localsgd"), ("steps", 20)):
    if c.get(key) != expect:
        bad.append(f"{key} {c.get(key)!r}, expected {expect!r}")
line = f"parameters averaged every 4 steps after 2 synchronous steps (5 averages), {want / 1e6:.4f} MB per step per rank"
if not any(line in l for l in open(out)):
    bad.append(f"no end-of-run line holding '{line}'")
if bad:
    sys.exit("FAIL bytes: " + "; ".join(bad) + f" ({params} parameters)")
print(f"ok bytes: {want} bytes per step ({params} parameters x 4 bytes / 4), 5 averages")
EOF

# ---- refusals ----------------------------------------------------------------------------
T() { "$DTRAIN" train "$@"; }
RUN="--max-steps 1 --no-progress"
NE='has no effect'
expect_status sync_ddp 2 "^dtrain: config: --sync-every $NE under --strategy ddp: it applies to --strategy localsgd\$" \
    T "$LIN" $RUN --sync-every 4
expect_status warmup_ps 2 "^dtrain: config: --localsgd-warmup $NE under --strategy ps: it applies to --strategy localsgd\$" \
    T "$LIN" $RUN --strategy ps --localsgd-warmup 3
expect_status zero 2 "^dtrain: config: parallel\.zero \(--zero\) 1: refused under --strategy localsgd: " \
    T "$LIN" $RUN --strategy localsgd --zero 1
expect_status compress 2 "^dtrain: config: parallel\.compress \(--compress\) topk:0\.1: refused under --strategy localsgd: " \
    T "$LIN" $RUN --strategy localsgd --compress topk:0.1
expect_status checkpoint 2 "^dtrain: config: --checkpoint-dir: checkpoints are not built for parallel\.strategy localsgd yet" \
    T "$LIN" $RUN --strategy localsgd --checkpoint-dir "$tmp/ck"
expect_status sync_zero 2 "localsgd\.sync_every" T "$LIN" $RUN --strategy localsgd --sync-every 0
expect_status ranks 2 "^dtrain: config: parallel\.compress \(--compress\) fp16: refused under --strategy localsgd" \
    "$MPIRUN" -np 2 "$DTRAIN" train "$LIN" $RUN --strategy localsgd --compress fp16

[ $fail -eq 0 ] && echo "cli_localsgd: all checks passed"
exit $fail
