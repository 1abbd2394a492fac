#!/bin/sh
# cli_stop.sh — a run stopped on its signal (--stop-on, train.stop_signal; src/train/stop.c):
#   - one process raising SIGUSR1 after step 3 stops after step 3, writes that checkpoint,
#     exits with status 4, and resumed ends with the uninterrupted run's weights, byte for byte;
#     after the run's last step, the run ends as it would have (exit 0); before its first
#     step (the handler is in place from the config on), it stops after step 1;
#   - on 2 ranks the signal on rank 1 alone after step 3 stops both after step 4 (the ranks
#     agree a step later), one checkpoint, and the resumed run's weights are the
#     uninterrupted ones; likewise a pipeline of 2 stages, and fedavg (stopped after a round,
#     which is evaluated as any finished round is);
#   - a real SIGUSR1 sent to mpirun mid-run (which passes it to the ranks) stops the job
#     with status 4 and a checkpoint of a step before the end;
#   - dtrain launch does not restart a job that exits 4, and exits 4 itself; a SIGTERM to
#     launch is passed on as the train command's --stop-on signal;
#   - ps at staleness 0 stops (its workers end their streams with END) and resumes to the same
#     bytes; --stop-on under ps above staleness 0, and an unknown signal, are refused.
# The watchdog is set to 20 s: ranks that stopped at different steps fail, not hang.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-stop-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"
common="--max-steps 10 --epochs 1 --batch 32 --threads 1 --no-progress --log-every 1 --comm-timeout 20"

ok() { echo "ok $*"; }
bad() { echo "FAIL $*"; fail=1; }
show() { sed 's/^/  /' "$1" | tail -30; }

# run NAME STATUS NP ARGS...: dtrain train (NP 0: without mpirun), expecting exit STATUS.
run() {
    name=$1 want=$2 np=$3
    shift 3
    if [ "$np" = 0 ]; then
        "$DTRAIN" train "$MLP" $common "$@" >"$tmp/$name.out" 2>&1 </dev/null
    else
        "$MPIRUN" -np "$np" --oversubscribe "$DTRAIN" train "$MLP" $common "$@" \
            >"$tmp/$name.out" 2>&1 </dev/null
    fi
    code=$?
    if [ $code -eq "$want" ]; then ok "$name: exit status $code"
    else bad "$name: exit status $code, expected $want"; show "$tmp/$name.out"; fi
}

has() { # has NAME FILE REGEX
    if grep -Eq "$3" "$2"; then ok "$1: $(grep -E "$3" "$2" | head -1)"
    else bad "$1: no line matches /$3/"; show "$2"; fi
}

sets() { # sets NAME DIR EXPECTED: the checkpoint sets in DIR, space-separated
    got=$(ls "$2" 2>/dev/null | grep '^step-' | tr '\n' ' ' | sed 's/ $//')
    if [ "$got" = "$3" ]; then ok "$1: sets '$got'"; else bad "$1: sets '$got', expected '$3'"; fi
}

same_file() { # same_file NAME A B
    if cmp -s "$2" "$3"; then ok "$1: identical bytes"; else bad "$1: $(cmp "$2" "$3" 2>&1 | head -1)"; fi
}

# stop_run NAME NP RANK:STEP ARGS...: dtrain train (NP 0: without mpirun) whose rank RANK
# raises its stop signal after step STEP (DTRAIN_TEST_SIGNAL); it must exit 4.
stop_run() {
    name=$1 np=$2 sig=$3
    shift 3
    if [ "$np" = 0 ]; then
        DTRAIN_TEST_SIGNAL=$sig "$DTRAIN" train "$MLP" $common "$@" >"$tmp/$name.out" 2>&1 </dev/null
    else
        "$MPIRUN" -np "$np" --oversubscribe -x DTRAIN_TEST_SIGNAL="$sig" "$DTRAIN" train "$MLP" \
            $common "$@" >"$tmp/$name.out" 2>&1 </dev/null
    fi
    code=$?
    if [ $code -eq 4 ]; then ok "$name: exit status 4"
    else bad "$name: exit status $code, expected 4"; show "$tmp/$name.out"; fi
}

# stop_case NAME NP RANK:STEP SIGNAL WORD STOP ARGS...: the run never stopped, the run that
# stops on SIGNAL (usr1, usr2) raised by RANK after STEP, which must say it stopped after
# WORD (step, round) STOP and leave that set alone, and the resumed run, which must say it
# began at STOP and end with the first run's bytes.
stop_case() {
    # Names of their own: run and stop_run set name, np and sig (sh has no locals).
    cn=$1 cnp=$2 csig=$3 csignal=$4 cword=$5 cat=$6
    shift 6
    run "full$cn" 0 "$cnp" "$@" --save-weights "$tmp/full$cn.st"
    stop_run "stop$cn" "$cnp" "$csig" "$@" --stop-on "$csignal" --checkpoint-dir "$tmp/ck$cn"
    has "stop${cn}_said" "$tmp/stop$cn.out" \
        "^dtrain: stopped on SIG$(echo "$csignal" | tr a-z A-Z) after $cword $cat "
    sets "stop${cn}_sets" "$tmp/ck$cn" "$(printf 'step-%09d' "$cat")"
    run "resume$cn" 0 "$cnp" "$@" --checkpoint-dir "$tmp/ck$cn" --resume "$tmp/ck$cn" \
        --save-weights "$tmp/resume$cn.st"
    has "resume${cn}_from" "$tmp/resume$cn.out" "^dtrain: resumed from the checkpoint of step $cat "
    same_file "resume${cn}_weights" "$tmp/full$cn.st" "$tmp/resume$cn.st"
}

# ---- one process ---------------------------------------------------------------------------
run full1 0 0 --save-weights "$tmp/full1.st"
stop_run stop1 0 0:3 --stop-on usr1 --checkpoint-dir "$tmp/ck1" --metrics "$tmp/stop1.jsonl"
has stop1_said "$tmp/stop1.out" "^dtrain: stopped on SIGUSR1 after step 3 \(train\.stop_signal\): --resume $tmp/ck1 goes on from its checkpoint\$"
sets stop1_sets "$tmp/ck1" "step-000000003"
has stop1_record "$tmp/stop1.jsonl" "^\{\"event\":\"stopped\",\"step\":3,\"signal\":\"SIGUSR1\",\"checkpoint_dir\":\"$tmp/ck1\"\}\$"
if grep -q "^epoch 1 step 4/" "$tmp/stop1.out"; then bad "stop1: a step after the stop"; show "$tmp/stop1.out"; fi
run resume1 0 0 --stop-on usr1 --checkpoint-dir "$tmp/ck1" --resume "$tmp/ck1" --save-weights "$tmp/resume1.st"
has resume1_from "$tmp/resume1.out" "^dtrain: resumed from the checkpoint of step 3 "
same_file resume1_weights "$tmp/full1.st" "$tmp/resume1.st"

# The signal after the run's last step: the run ends as it would have (exit 0, no stop line).
DTRAIN_TEST_SIGNAL=0:10 "$DTRAIN" train "$MLP" $common --stop-on usr1 --checkpoint-dir "$tmp/cklast" \
    >"$tmp/last1.out" 2>&1 </dev/null || { bad "last1: exit status $?, expected 0"; show "$tmp/last1.out"; }
if grep -q "stopped on" "$tmp/last1.out"; then bad "last1: a stop said at the run's end"; show "$tmp/last1.out"; fi
sets last1_sets "$tmp/cklast" "step-000000010"

# The signal before training starts (here while the process stalls before building the
# trainer): the handler is in place from the config on, and the run stops after step 1.
DTRAIN_TEST_STALL=0:20 "$DTRAIN" train "$MLP" $common --stop-on usr1 --checkpoint-dir "$tmp/ckearly" \
    >"$tmp/early.out" 2>&1 </dev/null &
pid=$!
sleep 1
kill -USR1 $pid
wait $pid
code=$?
if [ $code -eq 4 ]; then ok "early: exit status 4"; else bad "early: exit status $code, expected 4"; show "$tmp/early.out"; fi
has early_said "$tmp/early.out" "^dtrain: stopped on SIGUSR1 after step 1 "
sets early_sets "$tmp/ckearly" "step-000000001"

# ---- 2 ranks: the signal on one rank ---------------------------------------------------------
stop_case 2 2 1:3 usr1 step 4

# ---- a pipeline of 2 stages: the signal on the last stage ----------------------------------
stop_case pp 2 1:6 usr2 step 7 --pp 2 --micro-batches 2

# ---- fedavg: a round is the step, and a finished round is still evaluated -------------------
stop_case fed 2 0:2 usr1 round 3 --strategy fedavg --clients 4 --clients-per-round 2 --rounds 5
has stopfed_evaluated "$tmp/stopfed.out" "^round 3: train loss [0-9.]+  test loss"

# ---- a real signal to mpirun, and to dtrain launch ----------------------------------------------
# MPICH's mpiexec, once it has passed a signal on, may exit 0 where the ranks exited 4: then
# the run's own line must say it stopped (dtrain launch reads it so).
hydra=0
"$MPIRUN" --version 2>&1 | grep -qi hydra && hydra=1

# wait_step FILE: until the progress FILE says step 2 or later (30 s at most).
wait_step() {
    n=0
    while [ $n -lt 300 ]; do
        step=$(tr -d ' ' 2>/dev/null <"$1")
        [ -n "$step" ] && [ "$step" -ge 2 ] 2>/dev/null && return
        sleep 0.1
        n=$((n + 1))
    done
}

# stopped NAME CODE OUT DIR: exit 4 (or 0 with the stop line under Hydra), the stop line, and
# a checkpoint of a step before the run's end (400).
stopped() {
    if [ "$2" -eq 4 ] || { [ "$2" -eq 0 ] && [ $hydra = 1 ] && grep -q "^dtrain: stopped on" "$3"; }
    then ok "$1: exit status $2 after the signal at step ${step:-?}"
    else bad "$1: exit status $2, expected 4"; show "$3"; fi
    has "$1_said" "$3" "^dtrain: stopped on SIGUSR1 after step [0-9]+ "
    got=$(ls "$4" 2>/dev/null | grep '^step-' | tail -1 | sed 's/^step-0*//')
    if [ -n "$got" ] && [ "$got" -ge 2 ] && [ "$got" -lt 400 ]; then ok "$1: checkpoint of step $got"
    else bad "$1: checkpoint '${got}', expected a step from 2 to 399"; ls "$4"; show "$3"; fi
}

# 20 ms a step on rank 0 (--slow-rank): 400 steps take 8 s or more, the signal comes at step 2.
slow="--max-steps 400 --epochs 1 --batch 32 --threads 1 --no-progress --log-every 50 \
    --comm-timeout 20 --slow-rank 0:20 --stop-on usr1"
DTRAIN_PROGRESS_FILE="$tmp/progress" "$MPIRUN" -np 2 --oversubscribe -x DTRAIN_PROGRESS_FILE \
    "$DTRAIN" train "$MLP" $slow --checkpoint-dir "$tmp/ckr" >"$tmp/real.out" 2>&1 </dev/null &
pid=$!
wait_step "$tmp/progress"
kill -USR1 $pid
wait $pid
stopped real $? "$tmp/real.out" "$tmp/ckr"

# signal_launch NAME SIGNAL: dtrain launch of the slow run, sent SIGNAL at step 2; launch
# itself must exit 4, and the run must have stopped (stopped, above).
signal_launch() {
    "$DTRAIN" launch -n 2 --mpirun "$MPIRUN --oversubscribe" -- "$MLP" $slow \
        --checkpoint-dir "$tmp/ck$1" >"$tmp/$1.out" 2>&1 </dev/null &
    pid=$!
    wait_step "$tmp/ck$1/.progress"
    kill "-$2" $pid
    wait $pid
    code=$?
    if [ $code -eq 4 ]; then ok "$1: exit status 4"; else bad "$1: exit status $code, expected 4"; show "$tmp/$1.out"; fi
    stopped "$1" $code "$tmp/$1.out" "$tmp/ck$1"
}

# dtrain launch passes SIGUSR1 on to mpirun and exits 4 without restarting.
signal_launch real_launch USR1
has real_launch_said "$tmp/real_launch.out" "^dtrain launch: not restarting: the run stopped on its --stop-on signal"

# A scheduler's SIGTERM to dtrain launch: passed on as the train command's --stop-on usr1
# (mpirun would kill the ranks about a second after passing SIGTERM on).
signal_launch term_launch TERM

# ---- dtrain launch passes the status on and does not restart ---------------------------------
DTRAIN_TEST_SIGNAL=0:3 "$DTRAIN" launch -n 2 --mpirun "$MPIRUN --oversubscribe" -- "$MLP" $common \
    --stop-on usr1 --checkpoint-dir "$tmp/ckl" >"$tmp/launch.out" 2>&1 </dev/null
code=$?
if [ $code -eq 4 ]; then ok "launch: exit status 4"; else bad "launch: exit status $code, expected 4"; show "$tmp/launch.out"; fi
has launch_said "$tmp/launch.out" "^dtrain launch: not restarting: the run stopped on its --stop-on signal"
if grep -q "restart 1" "$tmp/launch.out"; then bad "launch: restarted"; show "$tmp/launch.out"; fi
sets launch_sets "$tmp/ckl" "step-000000004"

# ---- ps at staleness 0: the workers end their streams with END ------------------------------
stop_case ps 3 1:3 usr1 step 4 --strategy ps --staleness 0

# ---- refused ---------------------------------------------------------------------------------
run refuse_ps 2 3 --strategy ps --staleness 2 --stop-on usr1
has refuse_ps_said "$tmp/refuse_ps.out" "train\.stop_signal \(--stop-on\) does not apply under parallel\.strategy ps: at parallel\.staleness above 0 its workers run steps apart"
run refuse_hup 2 0 --stop-on hup
has refuse_hup_said "$tmp/refuse_hup.out" "stop_signal"

[ $fail -eq 0 ] && echo "cli_stop: all passed"
exit $fail
