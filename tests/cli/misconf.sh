#!/bin/sh
# misconf.sh — no silent misconfiguration (docs/USER_GUIDE.md, "Options that change nothing"):
#   - an option or key set explicitly that has no effect in the run's setup is refused with
#     exit status 2 and a message naming it as the user wrote it (option, --set, or
#     file:line) and what it needs: one case per rule, each before any data is read;
#   - the same options where they do have an effect pass that check;
#   - under mpirun the ranks reach the verdict together: 2 ranks with the same command line,
#     and 2 ranks where only one sets the option (no rank is left waiting);
#   - every shipped examples/*.ini runs --max-steps 1 printing no line beyond the usual
#     header, epoch line and phase table;
#   - --resume: a path that does not exist fails naming it (also on 2 ranks, where no
#     message says "rank 0: rank 0:"); an empty directory, one holding only dtrain launch's
#     progress file, and one holding only an incomplete set start from the beginning saying
#     what they found;
#   - --tp 2 --pp 2 on 2 ranks says that tp x pp = 4 ranks exceed the job's 2.
#   - a --checkpoint-dir that cannot be made stops the run before its first step, naming it
#     (on 2 ranks too), where it used to fail at the end of training;
#   - a run whose weights overflowed stops at train.skip_limit's skips in a row.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-misconf-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"
LIN="$SRC/examples/linreg.ini"
# linreg.ini is synthetic: a run that gets past the checks takes milliseconds.
RUN="--max-steps 1 --no-progress"

. "$SRC/tests/support/expect.sh"
# refuse NAME CODE REGEX CMD...: CMD exits with status CODE and prints a line matching REGEX.
refuse() { expect_status "$@"; }

# accept NAME CMD...: CMD exits 0.
accept() {
    name=$1
    shift
    if "$@" >"$tmp/$name.out" 2>&1; then
        echo "ok $name"
    else
        echo "FAIL $name: exit status $?:"; sed 's/^/  /' "$tmp/$name.out" | tail -20; fail=1
    fi
}

# T ARGS...: dtrain train ARGS... (a function, so that refuse and accept run it as a command).
T() { "$DTRAIN" train "$@"; }
NE='has no effect'

# ---- the strategies' options (src/parallel/strategy.c) ------------------------------------
refuse staleness_ddp 2 "^dtrain: config: --staleness $NE under --strategy ddp: it applies to --strategy ps\$" \
    T "$LIN" $RUN --staleness 2
refuse servers_ddp 2 "^dtrain: config: --servers $NE under --strategy ddp: it applies to --strategy ps\$" \
    T "$LIN" $RUN --servers 2
refuse clients_ddp 2 "^dtrain: config: --clients $NE under --strategy ddp: it applies to --strategy fedavg\$" \
    T "$LIN" $RUN --clients 4
refuse rounds_ps 2 "^dtrain: config: --rounds $NE under --strategy ps: it applies to --strategy fedavg\$" \
    T "$LIN" $RUN --strategy ps --rounds 3
refuse partition_ps 2 "^dtrain: config: --partition $NE under --strategy ps: it applies to --strategy fedavg\$" \
    T "$MLP" $RUN --strategy ps --partition iid
refuse overlap_ps 2 "^dtrain: config: parallel\.overlap \(--set\) $NE under --strategy ps: it applies to --strategy ddp \(its gradients are all-reduced in buckets\)\$" \
    T "$LIN" $RUN --strategy ps --set parallel.overlap=on
refuse bucket_zero 2 "^dtrain: config: parallel\.bucket_cap_mb \(--set\) $NE with --zero 1: ZeRO-1 reduce-scatters" \
    T "$LIN" $RUN --zero 1 --set parallel.bucket_cap_mb=10
# ZeRO-3 (src/parallel/zero3.c): what it does not do yet is refused, naming it
refuse zero_2 2 "^dtrain: config: parallel\.zero 2 \(gradients sharded, parameters whole\) is not built: 1 shards the optimizer state, 3 everything\$" \
    T "$LIN" $RUN --zero 2
refuse zero3_bucket 2 "^dtrain: config: parallel\.bucket_cap_mb \(--set\) $NE with --zero 3: ZeRO-3 gathers each layer's parameters" \
    T "$LIN" $RUN --zero 3 --set parallel.bucket_cap_mb=10
refuse zero3_topk 2 "^dtrain: config: parallel\.compress: topk:0\.1 compresses the gradients of plain data parallelism .*not yet with ZeRO-3" \
    T "$LIN" $RUN --zero 3 --compress topk:0.1
refuse zero3_powersgd 2 "^dtrain: config: parallel\.compress: powersgd:2 compresses the gradients of plain data parallelism .*not yet with ZeRO-3" \
    T "$LIN" $RUN --zero 3 --compress powersgd:2
refuse zero3_replicas 2 "^dtrain: --check-replicas $NE with --zero 3: every parameter is held once" \
    T "$LIN" $RUN --zero 3 --check-replicas
refuse micro_fedavg 2 "^dtrain: config: --micro-batches $NE under --strategy fedavg: it applies to --strategy ddp, ps and localsgd \(fedavg's clients take local steps of --batch samples\)\$" \
    T "$LIN" $RUN --strategy fedavg --micro-batches 2
refuse dp_fedavg 2 "^dtrain: config: --dp $NE under --strategy fedavg: its clients are spread over every rank" \
    T "$LIN" $RUN --strategy fedavg --dp 2
refuse local_epochs_steps 2 "^dtrain: config: --local-epochs $NE with fedavg\.local_steps 3: " \
    T "$LIN" $RUN --strategy fedavg --local-epochs 2 --local-steps 3
refuse warmup_none 2 "^dtrain: config: --compress-warmup $NE without --compress: " \
    T "$LIN" $RUN --compress-warmup 3
refuse feedback_fp16 2 "^dtrain: config: parallel\.error_feedback \(--set\) $NE with --compress fp16: it applies to topk:R and powersgd:K" \
    T "$LIN" $RUN --compress fp16 --set parallel.error_feedback=off
refuse tp_min_weights 2 "^dtrain: config: parallel\.tp_min_weights \(--set\) $NE without tensor parallelism: it applies to --tp 2 or more\$" \
    T "$LIN" $RUN --set parallel.tp_min_weights=0
refuse recompute_block 2 "^dtrain: config: --recompute $NE on a model without block layers: 'block' re-runs each transformer block's inside" \
    T "$LIN" $RUN --recompute block
refuse slow_rank_absent 2 "^dtrain: --slow-rank: rank 5 is not in this job of 1 rank\$" \
    T "$LIN" $RUN --slow-rank 5:10
refuse slow_rank_inf 2 "^dtrain: --slow-rank: '0:inf' is not RANK:MILLISECONDS \(0 to 1e6 ms\)\$" \
    T "$LIN" $RUN --slow-rank 0:inf
refuse slow_rank_overflow 2 "^dtrain: --slow-rank: '4294967296:5' is not RANK:MILLISECONDS \(0 to 1e6 ms\)\$" \
    T "$LIN" $RUN --slow-rank 4294967296:5
# A value longer than any buffer of the command line's: judged whole (it was cut at 1 KiB,
# and the message gave the cut length).
long=$(awk 'BEGIN { s = "/tmp/"; for (i = 0; i < 5000; i++) s = s "a"; print s }')
refuse long_value 2 "^dtrain: config: --checkpoint-dir: the value of checkpoint\.dir is longer than 2047 bytes\$" \
    T "$LIN" $RUN --checkpoint-dir "$long"
refuse trace_events_overflow 2 "^dtrain: --trace-events: '99999999999999999999' is not a count from 1 to 2\^32\$" \
    T "$LIN" $RUN --trace "$tmp/never.json" --trace-events 99999999999999999999
refuse pp_schedule 2 "^dtrain: config: --pp-schedule $NE without a pipeline: it applies to --pp 2 or more\$" \
    T "$LIN" $RUN --pp-schedule gpipe

# ---- the config's other keys (src/train/config_inert.c) -----------------------------------
refuse pp_split 2 "^dtrain: config: --pp-split $NE without a pipeline: it applies to --pp 2 or more\$" \
    T "$LIN" $RUN --pp-split round_robin
refuse ckpt_every 2 "^dtrain: config: --checkpoint-every $NE without --checkpoint-dir \(checkpoint\.dir\): no checkpoint is written\$" \
    T "$LIN" $RUN --checkpoint-every 5
refuse ckpt_keep 2 "^dtrain: config: --keep-checkpoints $NE without --checkpoint-dir" \
    T "$LIN" $RUN --keep-checkpoints 2
refuse ckpt_on_error 2 "^dtrain: config: --checkpoint-on-error $NE without --checkpoint-dir" \
    T "$LIN" $RUN --checkpoint-on-error continue
refuse momentum_adam 2 "^dtrain: config: optim\.momentum \(--set\) $NE with optim\.kind adam: it applies to sgd\$" \
    T "$LIN" $RUN --set optim.momentum=0.9
refuse beta1_sgd 2 "^dtrain: config: optim\.beta1 \(--set\) $NE with optim\.kind sgd: it applies to adam and adamw\$" \
    T "$LIN" $RUN --set optim.kind=sgd --set optim.beta1=0.8
refuse gamma_cosine 2 "^dtrain: config: schedule\.gamma \(--set\) $NE with schedule\.kind cosine: it applies to step\$" \
    T "$LIN" $RUN --set schedule.gamma=0.5
refuse skip_limit_stop 2 "^dtrain: config: --skip-limit $NE with train\.on_nonfinite stop: the first NaN or Inf ends the run\$" \
    T "$LIN" $RUN --skip-limit 3 --on-nonfinite stop
# A learning rate of 1e30 sends the weights past float's range within two updates, so
# every later step gives a NaN. Under --max-steps alone (which counts steps taken) such a
# run used to skip for ever; train.skip_limit ends it, at the limit-th skip in a row, with
# exit status 3 (a non-finite stop, which dtrain launch does not restart).
refuse skip_limit_hit 3 "^dtrain: step 12: 10 steps in a row with a NaN or Inf, the limit \(train\.skip_limit\); the last: a NaN or Inf in the loss on rank 0" \
    T "$LIN" --no-progress --epochs 0 --max-steps 30 --lr 1e30
refuse skip_limit_3 3 "^dtrain: step 5: 3 steps in a row" \
    T "$LIN" --no-progress --epochs 0 --max-steps 30 --lr 1e30 \
    --skip-limit 3
refuse total_steps_constant 2 "^dtrain: config: schedule\.total_steps \(--set\) $NE with schedule\.kind constant: it applies to cosine\$" \
    T "$LIN" $RUN --set schedule.kind=constant --set schedule.total_steps=5
refuse warmup_start 2 "^dtrain: config: schedule\.warmup_start \(--set\) $NE without a warm-up" \
    T "$MLP" $RUN --set schedule.warmup_start=0.5
refuse synth_idx 2 "^dtrain: config: data\.synth_noise \(--set\) $NE with data\.kind idx: it applies to data\.kind synthetic\$" \
    T "$MLP" $RUN --set data.synth_noise=0.2
refuse mean_synthetic 2 "^dtrain: config: data\.mean \(--set\) $NE with data\.kind synthetic: it scales data\.kind idx's uint8 pixels\$" \
    T "$LIN" $RUN --set data.mean=0.1
refuse dir_synthetic 2 "^dtrain: config: --data $NE with data\.kind synthetic: " \
    T "$LIN" $RUN --data /tmp
# A text run without validation bytes has nothing to evaluate on (examples/gpt.ini sets
# train.eval_every at line 51); 0 (after each epoch) stays allowed.
GPT="$SRC/examples/gpt.ini"
refuse eval_every_noval 2 "^dtrain: config: train\.eval_every \(.*/gpt\.ini:[0-9]*\) $NE with data\.val_fraction 0: " \
    T "$GPT" $RUN --set data.val_fraction=0
refuse eval_noval 2 "^dtrain: config: train\.eval \(--set\) $NE with data\.val_fraction 0: " \
    T "$GPT" $RUN --set data.val_fraction=0 --eval-every 0 --set train.eval=on
# Text windows are drawn at random whatever data.shuffle says; val_fraction splits text only.
refuse shuffle_text 2 "^dtrain: config: --shuffle $NE with data\.kind text: " \
    T "$GPT" $RUN --shuffle off
refuse val_fraction_idx 2 "^dtrain: config: data\.val_fraction \(--set\) $NE with data\.kind idx: " \
    T "$MLP" $RUN --set data.val_fraction=0.2
# A CSV run with its own test file holds no samples out.
printf '1.0,2.0\n2.0,4.0\n3.0,6.0\n' >"$tmp/train.csv"
printf '4.0,8.0\n' >"$tmp/test.csv"
refuse test_samples_csv 2 "^dtrain: config: data\.test_samples \(--set\) $NE with data\.test_file set: " \
    T --set data.kind=csv --set data.train_file="$tmp/train.csv" --set data.test_file="$tmp/test.csv" \
    --set model.layers="linear 1" --set loss.kind=mse --set data.test_samples=1 $RUN
accept test_samples_csv_one_file T --set data.kind=csv --set data.train_file="$tmp/train.csv" \
    --set model.layers="linear 1" --set loss.kind=mse --set data.test_samples=1 --set train.batch=2 \
    $RUN

# A config file's key is named with its file and line.
cat >"$tmp/ps.ini" <<'EOF'
[train]
epochs = 1
[parallel]
staleness = 2
EOF
refuse file_line 2 "^dtrain: config: parallel\.staleness \(.*/ps\.ini:4\) $NE under --strategy ddp: it applies to --strategy ps\$" \
    T "$tmp/ps.ini" $RUN

# ---- the command line's own options (src/cli/cmd_train.c) and the other commands ----------
refuse trace_events 2 "^dtrain: --trace-events $NE without --trace" \
    T "$LIN" $RUN --trace-events 100
refuse progress_both 2 "^dtrain: --no-progress $NE with --progress" \
    T "$LIN" --max-steps 1 --progress --no-progress
refuse plan_servers 2 "^dtrain plan: config: --servers $NE under --strategy ddp" \
    "$DTRAIN" plan "$LIN" --ranks 2 --bandwidth 1 --latency 1 --servers 2
refuse launch_probe 2 "^dtrain launch: --probe-timeout $NE without --hostfile" \
    "$DTRAIN" launch -n 2 --probe-timeout 3 -- "$LIN" --checkpoint-dir "$tmp/never"

# ---- where they have an effect, the same options pass the check ---------------------------
accept ps_options T "$LIN" --strategy ps --servers 1 --staleness 2 --explain-layout
accept fedavg_options T "$LIN" --strategy fedavg --clients 4 --clients-per-round 2 \
    --local-steps 3 --partition iid --explain-layout
accept tp_options T "$LIN" --tp 2 --set parallel.tp_min_weights=0 --explain-layout
accept pp_options T "$MLP" --pp 2 --pp-schedule gpipe --pp-split 2 --explain-layout
# optim.momentum before optim.kind: the verdict is the final config's.
accept sgd_momentum T "$LIN" $RUN --set optim.momentum=0.9 --set optim.kind=sgd
accept checkpoint_dir T "$LIN" $RUN --checkpoint-dir "$tmp/ck" --checkpoint-every 1 \
    --keep-checkpoints 1

# ---- 2 ranks: one verdict, no rank left waiting ------------------------------------------
refuse ranks_same 2 "^dtrain: config: --staleness $NE under --strategy ddp" \
    "$MPIRUN" -np 2 "$DTRAIN" train "$LIN" $RUN --staleness 2
# Only rank 0 sets it: rank 0 stops before MPI starts, and mpirun ends the job.
"$MPIRUN" -np 1 "$DTRAIN" train "$LIN" $RUN --staleness 2 : -np 1 "$DTRAIN" train "$LIN" $RUN >"$tmp/mpmd.out" 2>&1
code=$?
if [ $code -ne 0 ] && grep -q "config: --staleness $NE" "$tmp/mpmd.out"; then
    echo "ok ranks_differ (exit $code)"
else
    echo "FAIL ranks_differ: exit $code:"; sed 's/^/  /' "$tmp/mpmd.out"; fail=1
fi
refuse tp_pp_exceed 1 "parallel\.tp x parallel\.pp: tp 2 x pp 2 = 4 ranks exceed the job's 2\$" \
    "$MPIRUN" -np 2 "$DTRAIN" train "$MLP" $RUN --tp 2 --pp 2

# ---- a checkpoint directory that cannot be made, before any training -----------------------
: >"$tmp/afile"
refuse ckpt_dir_bad 1 "^dtrain: checkpoint: cannot create $tmp/afile/ck: Not a directory \(checkpoint.dir, checked before the first step\)\$" \
    T "$LIN" --max-steps 3 --no-progress --log-every 1 --checkpoint-dir "$tmp/afile/ck"
refuse ckpt_dir_bad_ranks 1 "^dtrain: rank 0: checkpoint: cannot create $tmp/afile/ck: Not a directory" \
    "$MPIRUN" -np 2 "$DTRAIN" train "$LIN" --max-steps 3 --no-progress --log-every 1 --checkpoint-dir "$tmp/afile/ck"
for n in ckpt_dir_bad ckpt_dir_bad_ranks; do
    if grep -q '^epoch 1 step 1/' "$tmp/$n.out"; then
        echo "FAIL ${n}_first: a step ran before the checkpoint directory was refused:"
        sed 's/^/  /' "$tmp/$n.out"; fail=1
    else
        echo "ok ${n}_first: refused before step 1"
    fi
done

# ---- the shipped examples print nothing new ------------------------------------------------
for ini in "$SRC"/examples/*.ini; do
    name=example_$(basename "$ini" .ini)
    T "$ini" $RUN >"$tmp/$name.out" 2>&1
    code=$?
    if [ $code -ne 0 ]; then
        echo "FAIL $name: exit status $code:"; sed 's/^/  /' "$tmp/$name.out"; fail=1
        continue
    fi
    # The header, a GPT's memory line, the epoch line (and train.eval_every's evaluation
    # lines) and the phase table, nothing else.
    extra=$(grep -Ev -e '^dtrain: .*\.ini, 1 rank, ' -e '^dtrain: memory planned[ :]' \
        -e '^epoch 1: train loss ' \
        -e '^step [0-9]+: train loss ' \
        -e '^dtrain: time per step by phase ' -e '^  ' "$tmp/$name.out")
    if [ -n "$extra" ]; then
        echo "FAIL $name: lines beyond a plain run's:"; echo "$extra" | sed 's/^/  /'; fail=1
    else
        echo "ok $name: $(wc -l <"$tmp/$name.out") lines, none new"
    fi
done

# ---- --resume -----------------------------------------------------------------------------
refuse resume_missing 1 "^dtrain: resume: $tmp/no/such/path does not exist: there is nothing to resume from\$" \
    T "$LIN" $RUN --resume "$tmp/no/such/path"
refuse resume_missing_ranks 1 "^dtrain: rank 0: resume: $tmp/no/such/path does not exist" \
    "$MPIRUN" -np 2 "$DTRAIN" train "$LIN" $RUN --resume "$tmp/no/such/path"
if ! grep -q 'rank 0: resume:' "$tmp/resume_missing_ranks.out" ||
    grep -q 'rank 0: rank 0:' "$tmp/resume_missing_ranks.out"; then
    echo "FAIL resume_one_prefix: expected 'rank 0: resume:', never 'rank 0: rank 0:', in:"
    sed 's/^/  /' "$tmp/resume_missing_ranks.out"
    fail=1
else
    echo "ok resume_one_prefix"
fi
mkdir -p "$tmp/empty" "$tmp/progress" "$tmp/incomplete/step-000000004"
: >"$tmp/progress/.progress"
: >"$tmp/incomplete/step-000000004/part-00000.safetensors"
refuse resume_empty 0 "^dtrain: resume: $tmp/empty is empty: training starts from the beginning\$" \
    T "$LIN" $RUN --resume "$tmp/empty"
refuse resume_progress 0 "^dtrain: resume: $tmp/progress holds only dtrain launch's progress file \(\.progress\), no checkpoint yet: training starts from the beginning\$" \
    T "$LIN" $RUN --resume "$tmp/progress"
refuse resume_incomplete 0 "^dtrain: warning: resume: $tmp/incomplete holds no complete checkpoint: 1 incomplete or corrupt set \(step-000000004\): training starts from the beginning\$" \
    T "$LIN" $RUN --resume "$tmp/incomplete"
grep -q "skipping $tmp/incomplete/step-000000004: .*incomplete" "$tmp/resume_incomplete.out" &&
    echo "ok resume_incomplete_named" ||
    { echo "FAIL resume_incomplete_named:"; sed 's/^/  /' "$tmp/resume_incomplete.out"; fail=1; }

[ $fail -eq 0 ] && echo "misconf: all checks passed"
exit $fail
