#!/bin/sh
# cli_ps.sh — the ps strategy end to end under mpirun (docs/PARAMETER_SERVER.md):
#   - bulk-synchronous (staleness 0) with one worker writes the single process's weights
#     byte for byte, and with N workers those of N-rank ddp with the same global batch
#     (ddp under comm.deterministic: the same rank-order sum as the servers');
#   - staleness 2 with one worker slowed: no worker is ever more than 2 steps ahead of the
#     slowest (each worker's report), the bound is reached, and one epoch still trains the
#     MLP below a stated test loss; unbounded staleness runs further ahead;
#   - a checkpoint written under ps resumes byte for byte, under ps and under ddp;
#   - a NaN pushed by one worker is skipped by the servers and counted; workers whose every
#     push holds one end the job at train.skip_limit;
#   - compressed pushes: top-k keeping everything is the plain push, fp16 halves the bytes;
#     PowerSGD: gradients of rank <= K (4 samples per worker) arrive whole, a matrix cut
#     between two servers trains as on one, the bytes are the factors', the residual and
#     each worker's own Q survive a checkpoint, and one epoch trains;
#   - --jitter slows the workers, not the server;
#   - clipping: at staleness 0 the step's sum clipped by its norm over every server's shard
#     (ddp's bytes with 3 workers and 2 servers), at staleness > 0 each push by its own;
#   - refusals: train.on_nonfinite stop; clipping at staleness > 0 with compression.
set -u
PY=${1:?usage: cli_ps.sh PYTHON}
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-ps-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"
. "$SRC/tests/support/expect.sh"
# A protocol mistake must fail the run within the test's time, not hang it.
PS="--strategy ps --comm-timeout 30"

# SGD without momentum, as the equivalences are stated; 20 steps.
SGD="--set optim.kind=sgd --set optim.lr=0.05 --max-steps 20 --no-progress"
expect_ok single "$DTRAIN" train "$MLP" $SGD --save-weights "$tmp/single.st"
expect_ok ps_1w "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $SGD $PS \
    --save-weights "$tmp/ps_1w.st"
expect_same ps_1w_equals_single "$tmp/single.st" "$tmp/ps_1w.st"

# 3 workers and 1 server against 3-rank ddp: global batch 192 either way.
expect_ok ddp_3 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $SGD --set comm.deterministic=on \
    --save-weights "$tmp/ddp_3.st"
expect_ok ps_3w "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $SGD $PS \
    --save-weights "$tmp/ps_3w.st"
expect_same ps_3w_equals_ddp_3 "$tmp/ddp_3.st" "$tmp/ps_3w.st"
# Two servers: the shards split the layers' tensors; the same bytes again.
expect_ok ps_2s "$MPIRUN" -np 5 "$DTRAIN" train "$MLP" $SGD $PS --servers 2 \
    --save-weights "$tmp/ps_2s.st"
expect_same ps_2servers_equals_ddp_3 "$tmp/ddp_3.st" "$tmp/ps_2s.st"

# Compressed pushes: top-k keeping every entry is the uncompressed push; fp16 trains.
expect_ok ps_topk1 "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $SGD $PS --compress topk:1 \
    --save-weights "$tmp/ps_topk1.st"
expect_same ps_topk_ratio_1_equals_uncompressed "$tmp/ps_3w.st" "$tmp/ps_topk1.st"
expect_ok ps_fp16 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $SGD $PS --compress fp16
if grep -q 'ps worker, rank 0: .*pushed per step: 0.2036 MB; pushed per step in float32: 0.4071' \
    "$tmp/ps_fp16.out"; then
    echo "ok ps_fp16_bytes: half the 0.407 MB of float32 gradients pushed per step"
else
    echo "FAIL ps_fp16_bytes:"; grep 'ps worker' "$tmp/ps_fp16.out" | sed 's/^/  /'; fail=1
fi

# PowerSGD (each worker's own rank-4 factors). One step at 4 samples per worker: every
# weight gradient has rank <= 4, so the factors carry it whole, and 3 workers land within
# float rounding of 3-rank ddp uncompressed.
ONE="--set optim.kind=sgd --set optim.lr=0.05 --max-steps 1 --batch 4 --no-progress"
expect_ok ddp_3_b4 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $ONE --save-weights "$tmp/ddp_b4.st"
expect_ok ps_psgd_b4 "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $ONE $PS --compress powersgd:4 \
    --save-weights "$tmp/psgd_b4.st"
if "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/ddp_b4.st" "$tmp/psgd_b4.st" --atol 1e-6 \
    >"$tmp/psgd_b4.cmp" 2>&1; then
    echo "ok ps_psgd_low_rank_whole: $(grep -c 'max |a-b|' "$tmp/psgd_b4.cmp") tensors within 1e-6"
else
    echo "FAIL ps_psgd_low_rank_whole:"; sed 's/^/  /' "$tmp/psgd_b4.cmp"; fail=1
fi
# 20 steps at 64 per worker: a server that holds half of the first weight matrix rebuilds
# its rows from the same factors; two servers give one server's bytes.
expect_ok ps_psgd_1s "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $SGD $PS --compress powersgd:4 \
    --metrics "$tmp/psgd.jsonl" --save-weights "$tmp/psgd_1s.st"
expect_ok ps_psgd_2s "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $SGD $PS --compress powersgd:4 \
    --servers 2 --save-weights "$tmp/psgd_2s.st"
expect_same ps_psgd_2servers_equals_1 "$tmp/psgd_1s.st" "$tmp/psgd_2s.st"
# The bytes, by hand: W1 (128 x 784) as (128 + 784) x 4 floats, W2 (10 x 128) as
# (10 + 128) x 4, the biases whole (138 floats), and one 32-byte header: 17,384 bytes, of
# 101,770 x 4 + 32 = 407,112 in float32.
if grep -q '"wire_bytes_per_step":17384,"dense_bytes_per_step":407112' "$tmp/psgd.jsonl" &&
    grep -q 'ps worker, rank 0: .*pushed per step: 0.01738 MB; pushed per step in float32: 0.4071' \
        "$tmp/ps_psgd_1s.out"; then
    echo "ok ps_psgd_bytes: 17384 of 407112 bytes per push"
else
    echo "FAIL ps_psgd_bytes: expected 17384 of 407112 bytes per push:"
    grep '"comm"' "$tmp/psgd.jsonl" | sed 's/^/  /'; grep 'ps worker' "$tmp/ps_psgd_1s.out"; fail=1
fi
# Rank 0's figures in the record, each once: a worker's, as ps names them.
"$PY" - "$tmp/psgd.jsonl" <<'EOF' || fail=1
import json, sys

def once(pairs):
    keys = [k for k, _ in pairs]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        sys.exit("FAIL ps_record: keys given twice: %s" % twice)
    return dict(pairs)

c = [r for r in (json.loads(l, object_pairs_hook=once) for l in open(sys.argv[1]))
     if r.get("event") == "comm"][0]
want = {"strategy": "ps", "compress": "powersgd:4", "steps": 20, "sync_steps": 20, "dp": 2,
        "ps_servers": 1, "ps_workers": 2, "ps_server": 0, "ps_staleness": 0,
        "ps_staleness_max": 0, "ps_stale_hist_0": 20, "ps_push_bytes": 17384}
bad = ["%s: %r, expected %r" % (k, c.get(k), v) for k, v in want.items() if c.get(k) != v]
if not (isinstance(c.get("ps_wait_s"), float) and c["ps_wait_s"] > 0):
    bad.append("ps_wait_s: %r, expected a time > 0" % c.get("ps_wait_s"))
if bad:
    sys.exit("FAIL ps_record: %s\n  in %s" % ("; ".join(bad), c))
print("ok ps_record: %s" % ", ".join("%s %s" % kv for kv in want.items()))
EOF
# The residual and each worker's Q go into the checkpoint: resumed at step 6, the same bytes.
PCK="--max-steps 12 --no-progress --compress powersgd:4 $PS"
expect_ok psgd_ck_full "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $PCK --checkpoint-dir "$tmp/pck" \
    --checkpoint-every 6 --save-weights "$tmp/psgd_ck_full.st"
expect_ok psgd_ck_resume "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $PCK \
    --resume "$tmp/pck/step-000000006" --save-weights "$tmp/psgd_ck_res.st"
expect_same psgd_ck_resume "$tmp/psgd_ck_full.st" "$tmp/psgd_ck_res.st"
# On 3 workers: each takes a third of the 2 saved residuals' sum, worker 2 (no saved Q of its
# own) replica 0's Q; the run goes on from step 6.
expect_ok psgd_ck_reshard "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $PCK --global-batch 128 \
    --resume "$tmp/pck/step-000000006"
if grep -q 'resumed from the checkpoint of step 6' "$tmp/psgd_ck_reshard.out" &&
    grep -q 'ps worker, rank 2: .*; steps at staleness 0: 6;' "$tmp/psgd_ck_reshard.out"; then
    echo "ok psgd_ck_reshard: 2 workers' state resumed on 3"
else
    echo "FAIL psgd_ck_reshard:"; grep 'resumed\|ps worker' "$tmp/psgd_ck_reshard.out"; fail=1
fi
# --compress-warmup: the first steps push float32 (5 of 5: ps's uncompressed bytes).
expect_ok ps_none5 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $PS --max-steps 5 --no-progress \
    --save-weights "$tmp/ps_none5.st"
expect_ok ps_warm5 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $PS --max-steps 5 --no-progress \
    --compress powersgd:4 --compress-warmup 5 --save-weights "$tmp/ps_warm5.st"
expect_same ps_warmup_uncompressed "$tmp/ps_none5.st" "$tmp/ps_warm5.st"
# One epoch (2 workers, Adam): the compressed pushes still train.
expect_ok psgd_epoch "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --epochs 1 --no-progress $PS \
    --compress powersgd:4
loss=$(sed -n 's/^epoch 1: .*test loss \([0-9.]*\).*/\1/p' "$tmp/psgd_epoch.out")
if awk -v l="${loss:-9}" 'BEGIN { exit !(l < 0.60) }'; then
    echo "ok psgd_epoch: test loss $loss after one epoch < 0.60"
else
    echo "FAIL psgd_epoch: test loss '${loss}' after one epoch, expected < 0.60"; fail=1
fi

# check_staleness NAME BOUND: every worker's largest staleness is within BOUND, and at least
# one worker reached it (the slowed worker held the other back).
check_staleness() {
    out=$tmp/$1.out
    lines=$(grep -c 'ps worker, rank' "$out")
    over=$(sed -n 's/.*staleness max: \([0-9]*\); staleness bound.*/\1/p' "$out" |
        awk -v b="$2" '$1 > b' | wc -l)
    top=$(sed -n 's/.*staleness max: \([0-9]*\); staleness bound.*/\1/p' "$out" | sort -n | tail -1)
    if [ "$lines" -ne 2 ] || [ "$over" -ne 0 ] || [ "${top:-0}" -ne "$2" ]; then
        echo "FAIL $1: expected 2 worker reports, each with staleness max <= $2 and one at $2:"
        grep 'ps worker' "$out" | sed 's/^/  /'; fail=1
    else
        echo "ok $1: $(grep 'ps worker' "$out" |
            sed 's/.*\(rank [0-9]*: staleness max: [0-9]*\).*/\1/' | tr '\n' ' ')"
    fi
}

# Staleness 2, worker rank 1 slowed by 4 ms a step: one epoch of the MLP (Adam).
expect_ok ssp "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --epochs 1 $PS --staleness 2 \
    --slow-rank 1:4 --no-progress
check_staleness ssp 2
if grep -q 'straggler: rank 1,' "$tmp/ssp.out"; then
    echo "ok ssp_straggler: the slowed worker is named, not the server"
else
    echo "FAIL ssp_straggler:"; grep 'straggler' "$tmp/ssp.out" | sed 's/^/  /'; fail=1
fi
loss=$(sed -n 's/^epoch 1: .*test loss \([0-9.]*\).*/\1/p' "$tmp/ssp.out")
if awk -v l="${loss:-9}" 'BEGIN { exit !(l < 0.60) }'; then
    echo "ok ssp_converges: test loss $loss after one epoch (469 steps) < 0.60"
else
    echo "FAIL ssp_converges: test loss '${loss}' after one epoch, expected < 0.60"; fail=1
fi
# Unbounded: the fast worker runs further ahead than any bound above.
expect_ok asp "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --max-steps 200 $PS \
    --staleness inf --slow-rank 1:4 --no-progress
top=$(sed -n 's/.*staleness max: \([0-9]*\); staleness bound: inf;.*/\1/p' "$tmp/asp.out" |
    sort -n | tail -1)
if [ "${top:-0}" -gt 2 ]; then
    echo "ok asp_unbounded: staleness max $top under --staleness inf"
else
    echo "FAIL asp_unbounded: staleness max '${top}' under --staleness inf, expected > 2"; fail=1
fi

# Checkpoints: Adam's state lives on the servers; a set written at step 6 resumes to the
# uninterrupted run's weights, under ps and under 2-rank ddp (the same sum of 2).
CK="--max-steps 12 --no-progress --checkpoint-dir $tmp/ck --checkpoint-every 6"
expect_ok ck_full "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $CK $PS \
    --save-weights "$tmp/ck_full.st"
expect_ok ck_resume_ps "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --max-steps 12 --no-progress \
    $PS --resume "$tmp/ck/step-000000006" --save-weights "$tmp/ck_ps.st"
expect_same ck_resume_ps "$tmp/ck_full.st" "$tmp/ck_ps.st"
expect_ok ck_resume_ddp "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 12 --no-progress \
    --resume "$tmp/ck/step-000000006" --save-weights "$tmp/ck_ddp.st"
expect_same ck_resume_ddp "$tmp/ck_full.st" "$tmp/ck_ddp.st"

# A NaN in worker 0's gradient at step 3: skipped by the server, counted, the run goes on.
for S in 0 2; do
    expect_ok nan_s$S env DTRAIN_TEST_NAN=0:3 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" \
        --max-steps 6 $PS --staleness $S --no-progress
    if grep -q 'ps server, rank 2: .*; skipped (NaN or Inf): 1;' "$tmp/nan_s$S.out"; then
        echo "ok nan_s$S: $(grep 'ps server' "$tmp/nan_s$S.out")"
    else
        echo "FAIL nan_s$S: the server should report 1 push skipped:"
        grep 'ps ' "$tmp/nan_s$S.out" | sed 's/^/  /'; fail=1
    fi
done

# The same NaN under PowerSGD pushes at S = 2: skipped, and the worker's factors and residual
# start afresh where the NaN reached them (the run's last loss is a number).
expect_ok nan_psgd env DTRAIN_TEST_NAN=0:3 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" \
    --max-steps 8 $PS --staleness 2 --compress powersgd:4 --no-progress
if grep -q 'ps server, rank 2: .*; skipped (NaN or Inf): 1;' "$tmp/nan_psgd.out" &&
    grep -q '^epoch 1: train loss [0-9]' "$tmp/nan_psgd.out"; then
    echo "ok nan_psgd: $(grep 'ps server' "$tmp/nan_psgd.out")"
else
    echo "FAIL nan_psgd: expected 1 push skipped and a finite loss:"
    grep 'ps \|^epoch' "$tmp/nan_psgd.out" | sed 's/^/  /'; fail=1
fi

# --jitter 3: the two workers sleep an exponential time of mean 3 ms before each step (60
# draws each: a mean below 1.5 ms has probability ~1e-5), the server does not (its data phase
# stays under 0.5 ms); a bad value is refused.
expect_ok jitter "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --max-steps 60 $PS --staleness 2 \
    --jitter 3 --no-progress --metrics "$tmp/jitter.jsonl"
data=$(grep '"event":"phases"' "$tmp/jitter.jsonl" | grep -o '"rank":[0-9]*,"data_ms":[0-9.e-]*' |
    sed 's/"rank":\([0-9]*\),"data_ms":\(.*\)/\1 \2/')
if echo "$data" | awk '$1 < 2 && $2 < 1.5 { bad = 1 } $1 == 2 && $2 >= 0.5 { bad = 1 }
                       END { exit bad || NR != 3 }'; then
    echo "ok jitter: data ms per step by rank: $(echo "$data" | tr '\n' ';')"
else
    echo "FAIL jitter: data ms per step by rank (workers >= 1.5, the server < 0.5):"
    echo "$data" | sed 's/^/  /'; fail=1
fi
expect_fail jitter_bad "jitter: '-1' is not a number of milliseconds" \
    "$DTRAIN" train "$MLP" --max-steps 1 --jitter -1

# Clipping (optim.clip_norm 0.5, active: the weights differ from the unclipped run's): what
# the servers apply is clipped by its global norm. At S = 0 the step's sum, its norm summed
# over 2 servers' shards: 3 workers write 3-rank ddp's bytes, 1 worker the single
# process's. At S > 0 each push, which its worker clips: 1 worker at staleness 2 writes
# the single process's bytes, and with 2 workers worker 0's first norm is that of its own
# samples' gradient (workers x its push), the one a single process with its batch logs. At
# staleness 2 a server answers a pull with the parameters it holds then: worker 1 sleeps
# 1 s before its step, so that its push cannot reach the servers before worker 0's first pull
# (on a loaded machine it did, and worker 0's gradient was another model's).
CLIP="--set optim.clip_norm=0.5"
expect_ok clip_single "$DTRAIN" train "$MLP" $SGD $CLIP --save-weights "$tmp/clip_single.st"
expect_ok clip_ps_1w "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $SGD $CLIP $PS \
    --save-weights "$tmp/clip_ps_1w.st"
expect_ok clip_ps_1w_s2 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $SGD $CLIP $PS --staleness 2 \
    --save-weights "$tmp/clip_ps_1w_s2.st"
expect_ok clip_ddp_3 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $SGD $CLIP \
    --set comm.deterministic=on --save-weights "$tmp/clip_ddp_3.st"
expect_ok clip_ps_3w "$MPIRUN" -np 5 "$DTRAIN" train "$MLP" $SGD $CLIP $PS --servers 2 \
    --save-weights "$tmp/clip_ps_3w.st"
expect_same clip_ps_1w_equals_single "$tmp/clip_single.st" "$tmp/clip_ps_1w.st"
expect_same clip_ps_1w_s2_equals_single "$tmp/clip_single.st" "$tmp/clip_ps_1w_s2.st"
expect_same clip_ps_3w_equals_ddp_3 "$tmp/clip_ddp_3.st" "$tmp/clip_ps_3w.st"
if cmp -s "$tmp/single.st" "$tmp/clip_single.st"; then
    echo "FAIL clip_active: clip_norm 0.5 left the single process's weights as they were"; fail=1
fi
ONE="--set optim.kind=sgd --set optim.lr=0.05 --max-steps 1 --no-progress --log-every 1 $CLIP"
expect_ok clip_norm_single "$DTRAIN" train "$MLP" $ONE --batch 64 --metrics "$tmp/cn1.jsonl"
expect_ok clip_norm_ps "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $ONE --batch 64 $PS \
    --staleness 2 --slow-rank 1:1000 --metrics "$tmp/cn2.jsonl"
n1=$(sed -n 's/.*"event":"step".*"grad_norm":\([0-9.e+-]*\).*/\1/p' "$tmp/cn1.jsonl")
n2=$(sed -n 's/.*"event":"step".*"grad_norm":\([0-9.e+-]*\).*/\1/p' "$tmp/cn2.jsonl")
if [ -n "$n1" ] && [ "$n1" = "$n2" ]; then
    echo "ok clip_push_norm: worker 0's first push norm $n2, a single process's with its batch"
else
    echo "FAIL clip_push_norm: worker 0's first norm '$n2', expected '$n1'"; fail=1
fi
expect_fail clip_stale_compressed 'clipping under --strategy ps with staleness 2 and --compress is not supported' \
    "$DTRAIN" train "$MLP" $SGD $CLIP $PS --staleness 2 --compress fp16

# Weights sent past float's range (learning rate 1e30): every later push holds a NaN. The
# servers skip each; the workers count theirs in a row and end the job at train.skip_limit
# (exit 3), where it used to train to its end on skipped pushes; --skip-limit 0 still does.
expect_status diverged 3 '^dtrain: rank [01]: step 11: 10 steps in a row with a NaN or Inf on this rank, the limit \(train\.skip_limit\); the last in its loss \(ps: its servers skip a push' \
    "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --lr 1e30 --epochs 0 --max-steps 30 $PS --no-progress
expect_ok diverged_nolimit "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --lr 1e30 --epochs 0 \
    --max-steps 30 $PS --no-progress --skip-limit 0
if grep -q 'ps server, rank 2: .*; skipped (NaN or Inf): 29;' "$tmp/diverged_nolimit.out"; then
    echo "ok diverged_nolimit: $(grep 'ps server' "$tmp/diverged_nolimit.out")"
else
    echo "FAIL diverged_nolimit: the server should report 29 pushes skipped:"
    grep 'ps ' "$tmp/diverged_nolimit.out" | sed 's/^/  /'; fail=1
fi

expect_fail nonfinite_stop 'on_nonfinite stop does not apply under parallel.strategy ps' \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 2 $PS --on-nonfinite stop

[ $fail -eq 0 ] && echo "cli_ps: all checks passed"
exit $fail
