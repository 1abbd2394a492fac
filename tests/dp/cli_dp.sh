#!/bin/sh
# cli_dp.sh — `mpirun -np 2 dtrain train` end to end: a data-parallel run writes its metrics
# and weights once (rank 0), says it ran on 2 ranks, and reports its figures (ddp's, as the
# strategy names them) alike in its last lines and its metrics file; a model that differs on
# one rank, a layout that does not fit the job and a strategy's unsupported layout each end
# the job with a non-zero status and a message naming the problem, within the test's timeout
# (no hang).
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
PY=${1:?usage: cli_dp.sh PYTHON3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-dp-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"

. "$SRC/tests/support/expect.sh"

# A data-parallel run.
"$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 6 --log-every 3 --no-progress \
    --metrics "$tmp/m.jsonl" --save-weights "$tmp/w.safetensors" >"$tmp/run.out" 2>&1
code=$?
sed 's/^/  /' "$tmp/run.out"
[ $code -eq 0 ] || { echo "FAIL run: exit status $code"; fail=1; }
grep -q "2 ranks" "$tmp/run.out" || { echo "FAIL run: no '2 ranks' in the output"; fail=1; }
[ "$(grep -c '^epoch 1:' "$tmp/run.out")" -eq 1 ] ||
    { echo "FAIL run: the epoch line must be printed once (rank 0 only)"; fail=1; }
[ "$(grep -c '"event":"epoch"' "$tmp/m.jsonl")" -eq 1 ] ||
    { echo "FAIL run: one epoch record expected in the metrics file"; fail=1; }
[ "$(grep -c '"event":"step"' "$tmp/m.jsonl")" -eq 2 ] ||
    { echo "FAIL run: two step records expected (steps 3 and 6)"; fail=1; }
[ -s "$tmp/w.safetensors" ] || { echo "FAIL run: no weights written"; fail=1; }

# The run's figures: the comm record holds every one ddp names, once, with the MLP's 101,770
# float32 gradients (407,080 bytes) per step and Adam's two moments; the report's
# data-parallel line prints the same figures in its words, the exposed wait per step the
# record's exposed_s over its 6 steps, compared with the all-reduce timed alone.
"$PY" - "$tmp/m.jsonl" "$tmp/run.out" <<'EOF' || fail=1
import json, re, sys

def once(pairs):
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        sys.exit("FAIL comm_record: keys given twice: %s" % twice)
    return dict(pairs)

recs = [json.loads(line, object_pairs_hook=once) for line in open(sys.argv[1])]
comm = [r for r in recs if r.get("event") == "comm"]
if len(comm) != 1:
    sys.exit("FAIL comm_record: %d comm records, expected 1" % len(comm))
c = comm[0]
want = {"strategy": "ddp", "compress": "none", "compress_warmup_steps": 0, "steps": 6,
        "sync_steps": 6, "dp": 2, "tp": 1, "pp": 1, "buckets": 1,
        "wire_bytes_per_step": 407080, "dense_bytes_per_step": 407080,
        "optim_state_bytes": 2 * 407080}
bad = ["%s: %r, expected %r" % (k, c.get(k), v) for k, v in want.items() if c.get(k) != v]
exposed, wait = c.get("exposed_s"), c.get("wait_s")
if not (isinstance(exposed, float) and isinstance(wait, float) and 0 <= exposed <= wait):
    bad.append("exposed_s %r, wait_s %r: expected 0 <= exposed_s <= wait_s" % (exposed, wait))
if bad:
    sys.exit("FAIL comm_record: %s\n  in %s" % ("; ".join(bad), c))
print("ok comm_record: %d keys, %s" % (len(c), ", ".join("%s %s" % kv for kv in want.items())))

lines = [l.rstrip("\n") for l in open(sys.argv[2]) if l.startswith("dtrain: data-parallel")]
rx = (r"dtrain: data-parallel, rank 0: ranks: 2; gradients per step: 0\.4071 MB; "
      r"waited per step for communication after backward by the last rank to end it: "
      r"([0-9.e+-]+) ms \(alone: ([0-9.e+-]+) ms, hidden: ([0-9]+)%\); "
      r"waited per step by this rank: [0-9.e+-]+ m?s; buckets: 1; "
      r"optimizer state per rank: 0\.8142 MB$")
m = re.match(rx, lines[0]) if len(lines) == 1 else None
if m is None:
    sys.exit("FAIL report_line: expected one line matching\n  /%s/\n  got %s" % (rx, lines))
shown, alone, hidden = float(m.group(1)), float(m.group(2)), int(m.group(3))
per_step = "%.4g" % (exposed / 6 * 1e3)
if m.group(1) != per_step:
    sys.exit("FAIL report_line: exposed wait %s ms per step printed; the record's %s s over 6 "
             "steps is %s ms" % (m.group(1), exposed, per_step))
if not alone > 0:
    sys.exit("FAIL report_line: the all-reduce alone took %s ms, expected > 0" % m.group(2))
expect = 100 * (1 - min(shown / alone, 1))
if abs(hidden - expect) > 1:
    sys.exit("FAIL report_line: %d%% hidden printed, %.1f%% from %s ms of %s ms alone"
             % (hidden, expect, shown, alone))
print("ok report_line: " + lines[0])
EOF

# Rank 1 has another learning rate, or another seed (MPMD launch): every rank refuses to
# start, naming the keys and who holds which value.
expect_fail lr_differs 'rank 0: config: the ranks disagree on optim\.lr \(rank 0: 0\.1; rank 1: 0\.2\)$' \
    "$MPIRUN" -np 1 "$DTRAIN" train "$MLP" --max-steps 2 --lr 0.1 : \
    -np 1 "$DTRAIN" train "$MLP" --max-steps 2 --lr 0.2
grep -q 'rank 1: config: the ranks disagree on optim.lr' "$tmp/lr_differs.out" ||
    { echo "FAIL lr_differs: rank 1 does not report it"; fail=1; }
expect_fail seed_differs 'config: the ranks disagree on train\.seed \(rank 0: 3; rank 1: 4\)$' \
    "$MPIRUN" -np 1 "$DTRAIN" train "$MLP" --max-steps 2 --seed 3 : \
    -np 1 "$DTRAIN" train "$MLP" --max-steps 2 --seed 4
# Buckets close in backward order at the first layer boundary past their cap: the first at
# parallel.first_bucket_mb (0.001 MiB: the last layer's 1,290 floats close it), the others at
# parallel.bucket_cap_mb (1 MiB: the first layer's 100,480 floats fill one).
"$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 1 --no-progress \
    --set parallel.first_bucket_mb=0.001 --set parallel.bucket_cap_mb=1 \
    </dev/null >"$tmp/buckets.out" 2>&1
if grep -q '^dtrain: data-parallel, rank 0: .*; buckets: 2; ' "$tmp/buckets.out"; then
    echo "ok buckets: a first bucket of 0.001 MiB and one of 1 MiB give 2"
else
    echo "FAIL buckets: expected 2 buckets in:"; sed 's/^/  /' "$tmp/buckets.out"; fail=1
fi

# The same data path, other bytes behind it on one rank (a working directory each; the test
# labels raw, one label changed: the same size): every rank refuses, naming the file and
# each rank's size and CRC-32.
DATA=$(sed -n 's/^dir *= *//p' "$MLP")
for d in da db; do
    mkdir -p "$tmp/$d"
    for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz; do
        ln -s "$DATA/$f" "$tmp/$d/$f"
    done
done
"$PY" - "$DATA/t10k-labels-idx1-ubyte.gz" "$tmp/da/t10k-labels-idx1-ubyte" \
    "$tmp/db/t10k-labels-idx1-ubyte" <<'PYEOF'
import gzip, sys
raw = gzip.open(sys.argv[1]).read()
open(sys.argv[2], "wb").write(raw)
other = bytearray(raw)
other[8] = (other[8] + 1) % 10
open(sys.argv[3], "wb").write(bytes(other))
PYEOF
expect_fail data_differs 'config: the ranks disagree on the data file \./t10k-labels-idx1-ubyte \(rank 0: 10008 bytes, crc32 [0-9a-f]{8}; rank 1: 10008 bytes, crc32 [0-9a-f]{8}\)$' \
    "$MPIRUN" -np 1 -wdir "$tmp/da" "$DTRAIN" train "$MLP" --max-steps 1 --data . : \
    -np 1 -wdir "$tmp/db" "$DTRAIN" train "$MLP" --max-steps 1 --data .
# Threads may differ: they are the rank's own.
"$MPIRUN" -np 1 "$DTRAIN" train "$MLP" --max-steps 2 --threads 1 --no-progress : \
    -np 1 "$DTRAIN" train "$MLP" --max-steps 2 --threads 2 --no-progress >"$tmp/threads.out" 2>&1 ||
    { echo "FAIL threads: different --threads refused:"; sed 's/^/  /' "$tmp/threads.out"; fail=1; }

# Rank 1 stalls for a minute where the job starts (a test hook: as if stopped while loading
# its data): rank 0 reports it within --comm-timeout, naming rank 1, and the job ends.
t0=$(date +%s)
expect_fail stall 'never arrived: rank 1' \
    env DTRAIN_TEST_STALL=1:60 "$MPIRUN" -np 2 -x DTRAIN_TEST_STALL "$DTRAIN" train "$MLP" \
    --max-steps 2 --comm-timeout 2
took=$(($(date +%s) - t0))
[ $took -le 20 ] || { echo "FAIL stall: the job took $took s to end"; fail=1; }

# Rank 1 builds a different model (MPMD launch): both ranks stop, rank 1 is named (by the
# settings check; test_dp covers the model check behind it for programs on the library).
expect_fail mismatch 'disagree on model\.layers \(rank 0: flatten, linear 128, .*; rank 1: flatten, linear 64, ' \
    "$MPIRUN" -np 1 "$DTRAIN" train "$MLP" --max-steps 2 : \
    -np 1 "$DTRAIN" train "$MLP" --max-steps 2 \
    --set "model.layers=flatten, linear 64, relu, dropout 0.2, linear 10"

# A layout that does not fit the job, and a strategy that is not built.
expect_fail layout 'dp 3 x tp 1 x pp 1 = 3 does not match the 2 ranks' \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 2 --dp 3
expect_fail fedavg_tp 'parallel.strategy fedavg: runs without tensor or pipeline' \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 2 --strategy fedavg --tp 2
expect_fail ps_servers 'parallel.servers: 2 servers in a job of 2 ranks' \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 2 --strategy ps --servers 2

exit $fail
