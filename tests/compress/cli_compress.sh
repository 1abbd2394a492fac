#!/bin/sh
# cli_compress.sh — `dtrain train --compress` under mpirun (docs/COMPRESSION.md): top-k
# keeping every entry writes the uncompressed run's weights byte for byte; every mode trains
# and reports what it sent; a warm-up (--compress-warmup) exchanges float32 gradients for its
# steps, counted over resumes; fp16 and bf16 compress each stage's and tp rank's exchange
# under pp and tp (dp 2 x pp 2 writes dp 2's bytes, dp 2 x tp 2 is within 2e-5 of them)
# and ZeRO-1's and ZeRO-3's reduce-scatters (ddp's bytes at 2 and 3 ranks);
# bad modes and unsupported combinations are refused by name.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-compress-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"
. "$SRC/tests/support/expect.sh"

RUN="--max-steps 20 --no-progress --comm-timeout 30"
expect_ok none "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN --save-weights "$tmp/none.st"
expect_ok topk1 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN --compress topk:1 \
    --save-weights "$tmp/topk1.st"
expect_same topk_ratio_1_equals_uncompressed "$tmp/none.st" "$tmp/topk1.st"

# Each mode trains, and says what it sent against the 0.4071 MB of the MLP's gradients.
for mode in fp16 bf16 topk:0.01 powersgd:4; do
    expect_ok "run_$mode" "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN --compress "$mode" \
        --metrics "$tmp/$mode.jsonl"
    said="gradients compressed ($mode), rank 0: .*sent per step per rank: [0-9.e-]* MB; "
    if grep -q "${said}in float32: 0.4071 MB" "$tmp/run_$mode.out" &&
        grep -q '"event":"comm".*"wire_bytes_per_step"' "$tmp/$mode.jsonl"
    then
        echo "ok report_$mode: $(grep 'gradients compressed' "$tmp/run_$mode.out" | cut -c1-120)"
    else
        echo "FAIL report_$mode: no compression line or comm record:"
        grep 'dtrain:' "$tmp/run_$mode.out" | sed 's/^/  /'; fail=1
    fi
done

# The error-feedback state survives a checkpoint: resumed at step 6 on the same layout, the
# run ends with the uninterrupted run's weights byte for byte (top-k's residuals, PowerSGD's
# residuals and factors).
for mode in topk:0.1 powersgd:2; do
    d=$tmp/ck_$(echo "$mode" | tr ':.' '__')
    expect_ok "ck_full_$mode" "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 12 --no-progress \
        --compress "$mode" --checkpoint-dir "$d" --checkpoint-every 6 --save-weights "$d.full.st"
    expect_ok "ck_resume_$mode" "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 12 \
        --no-progress --compress "$mode" --resume "$d/step-000000006" --save-weights "$d.res.st"
    expect_same "ck_resume_$mode" "$d.full.st" "$d.res.st"
done
# On another layout the residuals are resharded (each of 3 ranks takes a third of the 2
# saved residuals' sum; test_ckpt_mpi checks the values): the run goes on, and its own
# checkpoint holds 3.
d=$tmp/ck_topk_0_1
expect_ok ck_reshard "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" --max-steps 12 --no-progress \
    --compress topk:0.1 --global-batch 128 --resume "$d/step-000000006" \
    --checkpoint-dir "$tmp/ck3" --checkpoint-every 6
if "$DTRAIN" inspect "$tmp/ck3" 2>&1 | grep -q 'compress.residual.2.4.bias' &&
    ! "$DTRAIN" inspect "$tmp/ck3" 2>&1 | grep -q 'compress.residual.3.'; then
    echo "ok ck_reshard_written: the 3-rank set holds 3 replicas' residuals"
else
    echo "FAIL ck_reshard_written:"; "$DTRAIN" inspect "$tmp/ck3" 2>&1 | sed 's/^/  /' | head; fail=1
fi
# A NaN on one rank: the step is skipped everywhere and the residual forgets it (the final
# checkpoint, which refuses NaN and Inf, is written).
expect_ok nan_topk env DTRAIN_TEST_NAN=0:3 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN \
    --compress topk:0.01 --checkpoint-dir "$tmp/cknan"
if grep -q '1 step skipped' "$tmp/nan_topk.out" && grep -q 'checkpoint of step 20 written' \
    "$tmp/nan_topk.out"; then
    echo "ok nan_topk_forgotten"
else
    echo "FAIL nan_topk_forgotten:"; grep 'dtrain' "$tmp/nan_topk.out" | sed 's/^/  /'; fail=1
fi

# --compress-warmup N: the first N steps are the uncompressed run's, to the byte (5 of 5);
# the warm-up counts the run's optimizer steps, so a resume at step 6 inside an 8-step
# warm-up ends as the uninterrupted run does; fedavg refuses it.
expect_ok none5 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 5 --no-progress \
    --save-weights "$tmp/none5.st"
expect_ok warm5 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 5 --no-progress \
    --compress topk:0.01 --compress-warmup 5 --metrics "$tmp/warm5.jsonl" \
    --save-weights "$tmp/warm5.st"
expect_same warmup_steps_uncompressed "$tmp/none5.st" "$tmp/warm5.st"
if grep -q '"compress_warmup_steps":5' "$tmp/warm5.jsonl" &&
    grep -q 'gradients compressed (topk:0.01, after 5 uncompressed steps)' "$tmp/warm5.out"; then
    echo "ok warmup_reported"
else
    echo "FAIL warmup_reported:"; grep 'compressed' "$tmp/warm5.out"; grep '"comm"' "$tmp/warm5.jsonl"
    fail=1
fi
W="--max-steps 12 --no-progress --compress powersgd:2 --compress-warmup 8"
expect_ok warm_full "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $W --checkpoint-dir "$tmp/ckw" \
    --checkpoint-every 6 --save-weights "$tmp/warm_full.st"
expect_ok warm_resume "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $W \
    --resume "$tmp/ckw/step-000000006" --save-weights "$tmp/warm_res.st"
expect_same warmup_counts_over_resume "$tmp/warm_full.st" "$tmp/warm_res.st"
expect_ok warm_none "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" --max-steps 12 --no-progress \
    --save-weights "$tmp/warm_none.st"
if cmp -s "$tmp/warm_none.st" "$tmp/warm_full.st"; then
    echo "FAIL warmup_ends: steps 9-12 should have been compressed"; fail=1
else
    echo "ok warmup_ends: steps 9-12 compressed, the weights differ from uncompressed"
fi
expect_fail warm_fedavg 'config: --compress-warmup has no effect under --strategy fedavg: it applies to --strategy ddp and ps' \
    "$DTRAIN" train "$MLP" --max-steps 1 --strategy fedavg --compress fp16 --compress-warmup 2

expect_fail bad_ratio "parallel.compress: 'topk:0': topk's ratio must be in \(0, 1\]" \
    "$DTRAIN" train "$MLP" $RUN --compress topk:0
expect_fail bad_mode "parallel.compress: 'gzip'" "$DTRAIN" train "$MLP" $RUN --compress gzip
expect_fail with_zero 'parallel\.compress: topk:0\.1 compresses the gradients of plain data parallelism \(fp16 and bf16 also with tp, pp, ZeRO-1 and ZeRO-3\), not yet with ZeRO-1$' \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN --compress topk:0.1 --zero 1
# The refusal names only what the run set (it once read "tp 2, pp 1 or ZeRO 0").
expect_fail with_tp 'parallel\.compress: topk:0\.1 compresses .*, not yet with tp 2$' \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN --compress topk:0.1 --tp 2
expect_fail with_pp 'parallel\.compress: powersgd:2 compresses .*, not yet with pp 2$' \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN --compress powersgd:2 --pp 2

# fp16 and bf16 with tp and pp: each tp rank's and each stage's data-parallel exchange is
# compressed as plain ddp's is (elementwise, no state). A pipeline cuts nothing of it:
# dp 2 x pp 2 writes dp 2's bytes; tp sums its products in another order, so dp 2 x tp 2
# is within 2e-5 of dp 2's run, where fp16 itself moves the weights by more than 1e-4
# from the uncompressed run. Every copy bitwise equal (--check-replicas).
H="--max-steps 10 --batch 16 --threads 1 --no-progress --set comm.deterministic=on"
for m in none fp16; do
    expect_ok "half_dp2_$m" "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $H --compress $m \
        --save-weights "$tmp/h_dp2_$m.st"
done
expect_ok half_pp "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $H --compress fp16 --dp 2 --pp 2 \
    --check-replicas --save-weights "$tmp/h_pp.st"
expect_same half_pp_is_dp "$tmp/h_dp2_fp16.st" "$tmp/h_pp.st"
expect_ok half_tp "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $H --compress bf16 --dp 2 --tp 2 \
    --check-replicas --save-weights "$tmp/h_tp.st"
expect_ok half_dp2_bf16 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $H --compress bf16 \
    --save-weights "$tmp/h_dp2_bf16.st"
# ZeRO-1 reduce-scatters the same 16-bit values that ddp all-reduces: the same bytes on 2
# ranks (and on 3, folded in rank order), with half the float32 bytes said sent.
expect_ok half_zero2 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $H --compress fp16 --zero 1 \
    --save-weights "$tmp/h_zero2.st"
expect_same half_zero_is_dp2 "$tmp/h_dp2_fp16.st" "$tmp/h_zero2.st"
grep -q 'gradients compressed (fp16), rank 0: ranks: 2; sent per step per rank: 0.2035 MB; in float32: 0.4071 MB' \
    "$tmp/half_zero2.out" && echo "ok half_zero_said" ||
    { echo "FAIL half_zero_said:"; grep 'data-parallel' "$tmp/half_zero2.out"; fail=1; }
for z in 0 1; do
    expect_ok "half3_zero$z" "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $H --compress fp16 --zero $z \
        --save-weights "$tmp/h3_$z.st"
done
expect_same half_zero_is_dp3 "$tmp/h3_0.st" "$tmp/h3_1.st"
# ZeRO-3 reduce-scatters each layer's gradients in 16 bits (FSDP's reduce_dtype) and gathers
# the parameters in float32: on the MLP the same 16-bit sums as ZeRO-1's, so the same bytes
# at 2 and 3 ranks and through a pipeline; bf16 over tp within 2e-5 of dp 2's; a warm-up as
# long as the run is the uncompressed run to the byte; the report and the plan say half the
# reduce-scatter's bytes.
expect_ok half_zero3 "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $H --compress fp16 --zero 3 \
    --save-weights "$tmp/h_z3.st"
expect_same half_zero3_is_zero1 "$tmp/h_zero2.st" "$tmp/h_z3.st"
grep -q 'ZeRO-3, gradients reduce-scattered in fp16, rank 0: .*parameters gathered per step: 0.8142 MB; gradients reduce-scattered per step: 0.2035 MB' \
    "$tmp/half_zero3.out" && echo "ok half_zero3_said" ||
    { echo "FAIL half_zero3_said:"; grep 'data-parallel' "$tmp/half_zero3.out"; fail=1; }
expect_ok half3_zero3 "$MPIRUN" -np 3 "$DTRAIN" train "$MLP" $H --compress fp16 --zero 3 \
    --save-weights "$tmp/h3_3.st"
expect_same half_zero3_is_zero1_3 "$tmp/h3_1.st" "$tmp/h3_3.st"
expect_ok half_zero3_pp "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $H --compress fp16 --zero 3 \
    --dp 2 --pp 2 --save-weights "$tmp/h_z3pp.st"
expect_same half_zero3_pp_is_dp "$tmp/h_dp2_fp16.st" "$tmp/h_z3pp.st"
expect_ok half_zero3_tp "$MPIRUN" -np 4 "$DTRAIN" train "$MLP" $H --compress bf16 --zero 3 \
    --dp 2 --tp 2 --save-weights "$tmp/h_z3tp.st"
expect_ok half_zero3_warm "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $H --compress fp16 --zero 3 \
    --compress-warmup 10 --save-weights "$tmp/h_z3warm.st"
expect_same half_zero3_warm_is_none "$tmp/h_dp2_none.st" "$tmp/h_z3warm.st"
if "$DTRAIN" plan "$MLP" --ranks 2 --zero 3 --compress fp16 --batch 16 --bandwidth 5 \
    --latency 2 2>&1 | grep -q "dp fp16 reduce-scatter of each layer's gradients after its backward (ZeRO-3) *0.204 MB"; then
    echo "ok half_zero3_planned"
else
    echo "FAIL half_zero3_planned:"
    "$DTRAIN" plan "$MLP" --ranks 2 --zero 3 --compress fp16 --bandwidth 5 --latency 2 2>&1 |
        sed 's/^/  /'
    fail=1
fi
PY=${DT_PYTHON3:-python3}
if "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/h_tp.st" "$tmp/h_dp2_bf16.st" --atol 2e-5 \
    >"$tmp/h_cmp.out" 2>&1 &&
    "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/h_z3tp.st" "$tmp/h_dp2_bf16.st" --atol 2e-5 \
        >>"$tmp/h_cmp.out" 2>&1 &&
    ! "$PY" "$SRC/tests/cli/st_compare.py" "$tmp/h_dp2_bf16.st" "$tmp/h_dp2_none.st" --atol 1e-4 \
        >/dev/null 2>&1 &&
    grep -q 'replicas: every copy bitwise equal' "$tmp/half_tp.out" &&
    grep -q 'replicas: every copy bitwise equal' "$tmp/half_pp.out"; then
    echo "ok half_tp_is_dp: $(grep 'max |a-b|' "$tmp/h_cmp.out" | tr -s ' ' | tr '\n' ';' | cut -c1-160)"
else
    echo "FAIL half_tp_is_dp:"; sed 's/^/  /' "$tmp/h_cmp.out"
    grep 'replicas' "$tmp/half_tp.out" "$tmp/half_pp.out"; fail=1
fi
expect_ok one_rank "$DTRAIN" train "$MLP" $RUN --compress fp16
if grep -q 'warning: --compress .* changes nothing' "$tmp/one_rank.out"; then
    echo "ok one_rank_warns"
else
    echo "FAIL one_rank_warns: no warning that one replica exchanges nothing"; fail=1
fi

[ $fail -eq 0 ] && echo "cli_compress: all checks passed"
exit $fail
