#!/bin/sh
# cli_fedavg.sh PYTHON — federated averaging end to end (docs/FEDAVG.md):
#   - FedAvg's identity: every client taking part, one local step each on its whole
#     partition, plain SGD: one round equals one step of one process over all the samples
#     (max |dtheta| <= 1e-5). The clients' sizes differ by a factor of 2.5, so the identity
#     also needs the average to be weighted by sample counts (an unweighted mean of the
#     clients' models misses it by about 3e-4 at this rate: checked by breaking the code);
#   - the same rounds on 1, 2 and 3 ranks write the same bytes (the MLP with dropout, a
#     Dirichlet partition, 3 of 12 clients per round); a client whose update holds a NaN is
#     dropped from its round alike on 2 and 3 ranks, and a round whose every client does is
#     skipped; --on-nonfinite stop names the client and the rank that simulated it;
#   - optim.clip_norm clips each client's local gradient: one client, one local step over
#     every sample is one process's clipped step;
#   - the round's clients follow the seed; a checkpoint resumes to the same bytes;
#   - the partition is reported (line and metrics record), and bad settings are refused;
#   - compressed client updates: top-k of ratio 1 equals no compression, compressed rounds
#     give the same bytes on 1 and 3 ranks, and the wire's bytes are what the mode says.
set -u
PY=${1:?usage: cli_fedavg.sh PYTHON}
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-fed-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
. "$SRC/tests/support/expect.sh"
LIN="$SRC/examples/linreg.ini"
MLP="$SRC/examples/mlp.ini"
SGD="--set optim.kind=sgd --lr 0.5 --set schedule.kind=constant --set schedule.warmup_steps=0"

# The MLP without dropout (its masks are keyed differently in the two runs), 4 clients of a
# Dirichlet split (9,865 to 24,420 samples), local batch 60000 (each client's whole
# partition), against one process with the whole training set as its batch.
expect_ok large_batch "$DTRAIN" train "$MLP" $SGD --set "model.layers=flatten, linear 128, relu, linear 10" \
    --batch 60000 --max-steps 1 --no-progress --save-weights "$tmp/large.st"
expect_ok one_round "$DTRAIN" train "$MLP" $SGD --set "model.layers=flatten, linear 128, relu, linear 10" \
    --strategy fedavg --clients 4 --clients-per-round 4 --partition dirichlet:0.5 \
    --local-steps 1 --batch 60000 --rounds 1 --no-progress --save-weights "$tmp/round.st"
if "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/large.st" "$tmp/round.st" --atol 1e-5 \
    >"$tmp/cmp.out" 2>&1; then
    echo "ok fedavg_identity: $(grep 'max |a-b|' "$tmp/cmp.out" | tr -s ' ' | tr '\n' ';')"
else
    echo "FAIL fedavg_identity:"; sed 's/^/  /' "$tmp/cmp.out"; fail=1
fi

# Clipping: each local step clips the client's gradient by its own norm. One client holding
# every sample, one local step: one process's clipped step (max |dtheta| <= 1e-5), and not
# the unclipped one (clip_norm 0.1 is below the first gradient's norm).
CLIP="--set optim.clip_norm=0.1"
expect_ok large_clip "$DTRAIN" train "$MLP" $SGD $CLIP --set "model.layers=flatten, linear 128, relu, linear 10" \
    --batch 60000 --max-steps 1 --no-progress --save-weights "$tmp/large_clip.st"
expect_ok client_clip "$DTRAIN" train "$MLP" $SGD $CLIP --set "model.layers=flatten, linear 128, relu, linear 10" \
    --strategy fedavg --clients 1 --clients-per-round 1 --local-steps 1 --batch 60000 \
    --rounds 1 --no-progress --save-weights "$tmp/client_clip.st"
if "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/large_clip.st" "$tmp/client_clip.st" --atol 1e-5 \
    >"$tmp/cmp_clip.out" 2>&1 &&
    ! "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/large.st" "$tmp/large_clip.st" --atol 1e-5 \
        >/dev/null 2>&1; then
    echo "ok fedavg_clip: $(grep 'max |a-b|' "$tmp/cmp_clip.out" | tr -s ' ' | tr '\n' ';')"
else
    echo "FAIL fedavg_clip (or clip_norm 0.1 did not clip):"; sed 's/^/  /' "$tmp/cmp_clip.out"
    fail=1
fi

FED="--strategy fedavg --clients 12 --clients-per-round 3 --rounds 3 --partition dirichlet:0.5"
for np in 1 2 3; do
    expect_ok "ranks_$np" "$MPIRUN" -np $np "$DTRAIN" train "$MLP" $FED --no-progress \
        --metrics "$tmp/m$np.jsonl" --save-weights "$tmp/w$np.st"
done
expect_same ranks_1_2 "$tmp/w1.st" "$tmp/w2.st"
expect_same ranks_1_3 "$tmp/w1.st" "$tmp/w3.st"

# The non-finite guard: a NaN in round 2's local gradient on one rank (every client that
# rank simulates; one local step, so the update holds it and the loss does not). With a
# client of the round left, the round drops the bad ones and averages the rest: 2 ranks
# (rank 1 simulates slot 2) and 3 ranks (rank 2 does) drop slot 2's client alike and write
# the same bytes, different from the run without the NaN. On 1 rank all three clients are
# bad: the round is skipped on every rank, the parameters staying w_2 (bytes different
# again; round 3 trains from them, not from a client's NaN, and its loss is finite). With --on-nonfinite stop the run ends naming the client and rank.
expect_ok nan_0 "$DTRAIN" train "$MLP" $FED --local-steps 1 --no-progress \
    --save-weights "$tmp/nan0.st"
expect_ok nan_1 env DTRAIN_TEST_NAN=0:2 "$DTRAIN" train "$MLP" $FED --local-steps 1 \
    --no-progress --save-weights "$tmp/nan1.st"
expect_ok nan_2 env DTRAIN_TEST_NAN=1:2 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $FED \
    --local-steps 1 --no-progress --save-weights "$tmp/nan2.st"
expect_ok nan_3 env DTRAIN_TEST_NAN=2:2 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $FED \
    --local-steps 1 --no-progress --save-weights "$tmp/nan3.st"
expect_same nan_dropped_2_3 "$tmp/nan2.st" "$tmp/nan3.st"
if cmp -s "$tmp/nan0.st" "$tmp/nan3.st" || cmp -s "$tmp/nan1.st" "$tmp/nan3.st" ||
    cmp -s "$tmp/nan0.st" "$tmp/nan1.st"; then
    echo "FAIL nan_distinct: two of the runs without a NaN, with slot 2 dropped and with round 2"
    echo "  skipped wrote the same bytes"; fail=1
else
    echo "ok nan_distinct: no NaN, one client dropped and the round skipped differ"
fi
if grep -q '^dtrain: warning: round 2: 1 of its 3 clients dropped for a NaN or Inf in the loss or update: client [0-9]* (slot 2, simulated on rank 2); the others averaged$' \
    "$tmp/nan_3.out" && grep -q '(slot 2, simulated on rank 1); the others averaged$' "$tmp/nan_2.out" &&
    ! grep -q 'skipped' "$tmp/nan_3.out" && grep -Eq '^round 2: train loss [0-9]' "$tmp/nan_3.out" &&
    grep -q '^dtrain: 1 round dropped clients for a NaN or Inf and averaged the others' "$tmp/nan_3.out"; then
    echo "ok nan_dropped: $(grep 'round 2: 1 of' "$tmp/nan_3.out")"
else
    echo "FAIL nan_dropped:"; grep 'dtrain\|round' "$tmp/nan_3.out" | sed 's/^/  /'; fail=1
fi
if grep -q '^dtrain: warning: round 2 skipped on every rank: a NaN or Inf in the loss or update of client [0-9]* (slot 0, simulated on rank 0; 3 clients of the round in all)$' \
    "$tmp/nan_1.out" && grep -q '^dtrain: 1 step skipped' "$tmp/nan_1.out" &&
    grep -q '^round 2: train loss nan' "$tmp/nan_1.out" &&
    grep -Eq '^round 3: train loss [0-9]' "$tmp/nan_1.out"; then
    echo "ok nan_skipped: $(grep 'round 2 skipped' "$tmp/nan_1.out")"
else
    echo "FAIL nan_skipped:"; grep 'dtrain\|round' "$tmp/nan_1.out" | sed 's/^/  /'; fail=1
fi
expect_fail nan_stop '^dtrain: rank 0: step 2: a NaN or Inf in the loss or update of client [0-9]* \(slot 1, simulated on rank 1; 1 client of the round in all\)$' \
    env DTRAIN_TEST_NAN=1:2 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $FED --local-steps 1 \
    --no-progress --on-nonfinite stop

# The report: the partition line, the rounds, the metrics' partition record and rounds.
if grep -q 'fedavg partition dirichlet:0.5 over 12 clients' "$tmp/ranks_2.out" &&
    grep -q '^round 3: ' "$tmp/ranks_2.out" &&
    "$PY" - "$tmp/m2.jsonl" <<'PYEOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
part = [r for r in recs if r.get("event") == "partition"]
rounds = [r for r in recs if r.get("event") == "epoch"]
assert len(part) == 1, part
h = part[0]["histogram"]
assert len(h) == 12 and all(len(row) == 10 for row in h), h
assert sum(map(sum, h)) == 60000, sum(map(sum, h))
assert [r["round"] for r in rounds] == [1, 2, 3], rounds
assert [len(r["clients"]) for r in rounds] == [3, 3, 3], rounds
# samples/s counts the round's clients' local samples: one local epoch of each.
for r in rounds:
    want = sum(sum(h[c]) for c in r["clients"])
    got = r["samples_per_s"] * r["epoch_s"]
    assert abs(got - want) <= 1e-6 * want + 1e-3, (r, want)
PYEOF
then
    echo "ok report: partition line and record (12 x 10 histogram of 60000), 3 rounds"
else
    echo "FAIL report:"; grep 'dtrain\|round' "$tmp/ranks_2.out" | sed 's/^/  /'; fail=1
fi
# Another seed samples other clients (the same seed: the same, on every rank by the above).
expect_ok seed2 "$DTRAIN" train "$MLP" $FED --seed 2 --no-progress --metrics "$tmp/s2.jsonl"
c1=$(grep '"event":"epoch"' "$tmp/m1.jsonl" | sed 's/.*"clients":\(\[[^]]*\]\).*/\1/' | tr '\n' ' ')
c2=$(grep '"event":"epoch"' "$tmp/s2.jsonl" | sed 's/.*"clients":\(\[[^]]*\]\).*/\1/' | tr '\n' ' ')
if [ -n "$c1" ] && [ "$c1" != "$c2" ]; then
    echo "ok sampling_follows_seed: seed 1 $c1/ seed 2 $c2"
else
    echo "FAIL sampling_follows_seed: seed 1 '$c1', seed 2 '$c2'"; fail=1
fi

# Checkpoints: resumed after round 2 of 4, the same bytes as the uninterrupted run.
CK="--strategy fedavg --clients 12 --clients-per-round 3 --partition shards:2 --no-progress"
expect_ok ck_full "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $CK --rounds 4 \
    --checkpoint-dir "$tmp/ck" --checkpoint-every 2 --save-weights "$tmp/ck_full.st"
expect_ok ck_resume "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $CK --rounds 4 \
    --resume "$tmp/ck/step-000000002" --save-weights "$tmp/ck_res.st"
expect_same ck_resume "$tmp/ck_full.st" "$tmp/ck_res.st"

# Compressed client updates (--compress): top-k of ratio 1 sends every entry, so the bytes
# equal uncompressed training's; top-k and fp16 at 1 and 3 ranks give the same bytes (every
# rank decodes, weighs and sums the slots in slot order); the metrics' comm record says
# what went on the wire: fp16 half, top-k:0.05 8 bytes per kept entry (ceil(0.05 x 101,770)
# = 5,089 of them per client).
expect_ok topk_one "$DTRAIN" train "$MLP" $FED --compress topk:1 --no-progress \
    --save-weights "$tmp/tk1.st"
expect_same topk_one_is_none "$tmp/w1.st" "$tmp/tk1.st"
for c in topk:0.05 fp16; do
    for np in 1 3; do
        expect_ok "c_${c%%:*}_$np" "$MPIRUN" -np $np "$DTRAIN" train "$MLP" $FED --compress "$c" \
            --no-progress --metrics "$tmp/c_${c%%:*}_$np.jsonl" --save-weights "$tmp/c_${c%%:*}_$np.st"
    done
    expect_same "compressed_${c%%:*}_ranks_1_3" "$tmp/c_${c%%:*}_1.st" "$tmp/c_${c%%:*}_3.st"
done
if "$PY" - "$tmp/c_topk_1.jsonl" "$tmp/c_fp16_1.jsonl" "$tmp/c_topk_3.jsonl" <<'PYEOF'
import json, sys
def comm(path):
    return [json.loads(l) for l in open(path) if '"comm"' in l][0]
tk, fp, tk3 = comm(sys.argv[1]), comm(sys.argv[2]), comm(sys.argv[3])
dense = 3 * 101770 * 4  # one rank simulates the round's 3 clients
assert tk["dense_bytes_per_step"] == dense and fp["dense_bytes_per_step"] == dense, (tk, fp)
assert fp["wire_bytes_per_step"] == dense // 2, fp
assert tk["wire_bytes_per_step"] == 3 * 5089 * 8, tk
assert tk3["wire_bytes_per_step"] == 5089 * 8, tk3  # rank 0 of 3 simulates one client
assert tk["compress"] == "topk:0.05", tk
PYEOF
then
    echo "ok compressed_bytes: fp16 half of 1,221,240 bytes per round, topk:0.05 5,089 pairs per client"
else
    echo "FAIL compressed_bytes"; fail=1
fi
grep -q 'client updates compressed (topk:0.05, no error feedback' "$tmp/c_topk_1.out" ||
    { echo "FAIL compressed_report: no line on the compressed updates"; fail=1; }
expect_fail powersgd 'powersgd is built for ddp and ps; fedavg' \
    "$DTRAIN" train "$MLP" --strategy fedavg --compress powersgd:2 --rounds 1

expect_fail too_many 'fedavg.clients_per_round: 5 of 3 clients' \
    "$DTRAIN" train "$MLP" --strategy fedavg --clients 3 --clients-per-round 5 --rounds 1
expect_fail no_labels 'needs class labels' \
    "$DTRAIN" train "$LIN" --strategy fedavg --partition shards:2 --rounds 1
expect_fail bad_partition 'fedavg.partition: .*"random" is not one of iid' \
    "$DTRAIN" train "$MLP" --strategy fedavg --partition random --rounds 1

[ $fail -eq 0 ] && echo "cli_fedavg: all checks passed"
exit $fail
