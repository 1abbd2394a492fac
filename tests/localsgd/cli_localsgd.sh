#!/bin/sh
# cli_localsgd.sh PYTHON — `dtrain train --strategy localsgd` on 2 ranks, the MLP on
# Fashion-MNIST with plain SGD (docs/USER_GUIDE.md):
#   - --sync-every 1: the weights file after 20 steps is ddp's within max |dtheta| <= 1e-6
#     (averaging parameters after one step is averaging gradients);
#   - --localsgd-warmup 5: after 5 steps the weights file is ddp's, byte for byte (two
#     replicas' gradient sums are exact whatever the algorithm);
#   - --sync-every 4: the metrics' bytes per step are the parameter bytes (counted from the
#     weights file) / 4, rounded down, and the averages are counted as the period says (with
#     a warm-up of 2 in 20 steps: after steps 6, 10, 14, 18 and the last, 20);
#   - checkpoints: a set written mid-period holds both replicas' parameters and optimizer
#     state (different) and their mean under the plain names (exactly); a run killed after
#     it and resumed on 2 ranks ends with the uninterrupted run's weights, byte for byte; on
#     1 rank it resumes from the mean and says so;
#   - refusals (exit status 2, naming the option): --sync-every and --localsgd-warmup under
#     ddp and ps, --zero 1 and --compress under localsgd, --sync-every 0; on 2 ranks too,
#     where the job ends.
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
if bad:
    sys.exit("FAIL bytes: " + "; ".join(bad) + f" ({params} parameters)")
print(f"ok bytes: {want} bytes per step ({params} parameters x 4 bytes / 4), 5 averages")
EOF

# ---- checkpoints -------------------------------------------------------------------------
# 20 steps of H = 4: averages after steps 4, 8, 12, 16 and 20; the set of step 6 is
# mid-period. The killed run's rank 1 dies after step 9.
CK="--strategy localsgd --sync-every 4 --checkpoint-every 6"
train full 20 $CK --checkpoint-dir "$tmp/cfull"
DTRAIN_TEST_KILL=1:9 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $SGD --max-steps 20 $CK \
    --checkpoint-dir "$tmp/ck" >"$tmp/killed.out" 2>&1 && {
    echo "FAIL killed: the run DTRAIN_TEST_KILL stops ended with status 0"; fail=1; }
"$PY" - "$tmp/ck/step-000000006/part-00000.safetensors" <<'EOF' || fail=1
import json, struct, sys
data = open(sys.argv[1], "rb").read()
(hlen,) = struct.unpack("<Q", data[:8])
header = json.loads(data[8:8 + hlen])
def tensor(name):
    lo, hi = header[name]["data_offsets"]
    raw = data[8 + hlen + lo:8 + hlen + hi]
    return struct.unpack(f"<{len(raw) // 4}f", raw)
plain = [n for n in header if n != "__metadata__" and not n.startswith(("replica.", "compress."))]
differ = 0
for n in plain:
    a, b, m = tensor("replica.0." + n), tensor("replica.1." + n), tensor(n)
    differ += a != b
    # (a + b) / 2 in float32: the double sum of two floats is exact, halving is exact.
    want = [struct.unpack("<f", struct.pack("<f", (x + y) / 2))[0] for x, y in zip(a, b)]
    if list(m) != want:
        sys.exit(f"FAIL ckpt_mean: {n} is not the replicas' mean")
if differ == 0:
    sys.exit("FAIL ckpt_replicas: the two replicas' tensors are equal mid-period")
print(f"ok ckpt_mean: {len(plain)} tensors (parameters and state) the replicas' mean; "
      f"{differ} differ between the replicas at step 6")
EOF
cp -r "$tmp/ck/step-000000006" "$tmp/six" # the resumed run's keep = 3 prunes it
expect_ok resumed "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $SGD --max-steps 20 $CK \
    --checkpoint-dir "$tmp/ck" --resume "$tmp/ck" --save-weights "$tmp/resumed.st"
if grep -q "resumed from the checkpoint of step 6" "$tmp/resumed.out" &&
    cmp -s "$tmp/full.st" "$tmp/resumed.st"; then
    echo "ok resume_mid_period: from step 6, the uninterrupted run's weights byte for byte"
else
    echo "FAIL resume_mid_period: not resumed from step 6, or weights differ from the uninterrupted run's"
    grep "resumed" "$tmp/resumed.out" | sed 's/^/  /'; fail=1
fi
expect_ok resumed1 "$DTRAIN" train "$MLP" $SGD --max-steps 8 --global-batch 128 --strategy localsgd --sync-every 4 \
    --resume "$tmp/six"
if grep -q "warning: resume: localsgd: the checkpoint holds 2 replicas, this run has 1: every replica starts from their mean" "$tmp/resumed1.out"; then
    echo "ok resume_other_dp: on 1 rank from the replicas' mean, said"
else
    echo "FAIL resume_other_dp: no warning that the run starts from the replicas' mean"
    sed 's/^/  /' "$tmp/resumed1.out"; fail=1
fi

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
expect_status sync_zero 2 "localsgd\.sync_every" T "$LIN" $RUN --strategy localsgd --sync-every 0
expect_status ranks 2 "^dtrain: config: parallel\.compress \(--compress\) fp16: refused under --strategy localsgd" \
    "$MPIRUN" -np 2 "$DTRAIN" train "$LIN" $RUN --strategy localsgd --compress fp16

[ $fail -eq 0 ] && echo "cli_localsgd: all checks passed"
exit $fail
