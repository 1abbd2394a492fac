#!/bin/sh
# launch_args.sh — `dtrain launch` with a fake launcher in place of mpirun: usage errors
# exit 2 naming the option; a job that fails is restarted from the newest checkpoint (the
# set `dtrain train --resume` takes: the newest whose manifest and files all check out,
# whatever the digits of its step; `dtrain inspect DIR`, the same finder, names it too),
# the cause naming mpirun's
# status and the rank its stderr named, the step reached (the progress file) and the
# checkpoint resumed from; a restart that fails again before a new checkpoint runs on one
# rank fewer down to --min-ranks, with --global-batch G from the checkpoint's manifest (or
# the train arguments when there is none yet); --max-restarts exhausted exits 1; SIGTERM is
# passed on to the launcher and ends the supervision.
#
# The fake launcher is `sh fake.sh`: it logs its arguments and environment, counts its
# calls, and does what word N of $FAKE_PLAN says on call N (comma-separated actions):
#   ckS[:G]  a valid checkpoint set of step S (global batch G, default 32): config.ini, then
#            the manifest with every CRC-32 right (mkset.py)
#   crcS     the same, then config.ini overwritten with other bytes of its size: its
#            CRC-32 no longer matches the manifest's (a corrupt set)
#   partS    a step directory without manifest (a checkpoint cut short)
#   badS     a step directory whose manifest.json is not JSON
#   pS       rank 0's progress: step S, space-padded, into $DTRAIN_PROGRESS_FILE
#   ompiR    Open MPI's line naming rank R on stderr; dtrR: dtrain's "rank R:" line
#   abtR     Open MPI's "Process name: [[1,1],R]" (a rank's non-zero exit); err: dtrain's
#            error line without a rank (a one-rank run's), after a warning line
#   lostH    Open MPI's report of a lost daemon on node H (a host gone)
#   fail     exit 1;  exitN: exit N;  kill: SIGKILL itself;  ok: exit 0 (also when the plan
#            has no word N)
#   hang     wait for SIGTERM, note it, exit 143
# A probe (launch's "-n 1 --host H EXE --version" after a failure) is not a call: it is
# logged in $state/probes and fails for a host in $FAKE_DEAD, hangs for one in $FAKE_HANG.
# Nor is launch's "--version" (which launcher is it?): the fake answers as Open MPI's mpirun,
# or with FAKE_HYDRA set as MPICH's mpiexec (Hydra), whose options launch then uses:
# -genvlist VAR for -x VAR, a hostfile of NAME:N lines; with FAKE_OTHER as neither.
set -eu
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
PYTHON=${1:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-launch-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
exe=$(readlink -f "$DTRAIN")

# mkset.py DIR STEP GLOBAL_BATCH: a checkpoint set as docs/checkpoint-format.md specifies
# it, with one file (config.ini) and the manifest written last.
cat >"$tmp/mkset.py" <<'PY'
import json, os, sys, zlib
d, step, gb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(d, exist_ok=True)
cfg = b"# a fake run's config (tests/launch/launch_args.sh)\n"
with open(os.path.join(d, "config.ini"), "wb") as f:
    f.write(cfg)
body = json.dumps({"format": "dtrain-checkpoint", "version": 1, "step": step, "epoch": 0,
                   "epoch_step": step, "skipped": 0, "global_batch": gb, "seed": "1",
                   "input_mean": 0.5, "input_std": 0.25, "optimizer": "sgd",
                   "layout": {"dp": 1, "tp": 1, "pp": 1, "zero": 0},
                   "files": [{"name": "config.ini", "bytes": len(cfg),
                              "crc32": "%08x" % zlib.crc32(cfg)}]},
                  separators=(",", ":")).encode()
with open(os.path.join(d, "manifest.json"), "wb") as f:
    f.write(b'{"crc32":"%08x","manifest":' % zlib.crc32(body) + body + b"}\n")
PY
export MKSET="$PYTHON $tmp/mkset.py"

cat >"$tmp/fake.sh" <<'FAKE'
state=${FAKE_STATE:?}
if [ "${1-}" = "--version" ] && [ $# -eq 1 ]; then
    echo "$*" >>"$state/versions"
    if [ -n "${FAKE_HYDRA-}" ]; then echo "HYDRA build details:"
    elif [ -n "${FAKE_OTHER-}" ]; then echo "slurm 23.02.6"
    else echo "mpirun (Open MPI) 4.1.4"; fi
    exit 0
fi
if [ "${3-}" = "--host" ] && [ "${6-}" = "--version" ]; then
    echo "$*" >>"$state/probes"
    case " ${FAKE_DEAD-} " in *" $4 "*) exit 1 ;; esac
    case " ${FAKE_HANG-} " in *" $4 "*) exec sleep 30 ;; esac
    exit 0
fi
n=$(($(cat "$state/count" 2>/dev/null || echo 0) + 1))
echo "$n" >"$state/count"
echo "$*" >>"$state/args"
echo "${DTRAIN_PROGRESS_FILE-unset}" >>"$state/env"
# -n N first, --resume DIR and launch's own --global-batch G after the train arguments.
np=- dir= gb=-
while [ $# -gt 0 ]; do
    case $1 in
    -n) [ -n "$dir" ] || np=$2; shift ;;
    --resume) dir=$2; shift ;;
    --global-batch) [ -z "$dir" ] || gb=$2; shift ;;
    esac
    shift
done
echo "$np $gb" >>"$state/ranks"
step_dir() { printf '%s/step-%09d' "$dir" "$1"; }
plan=$(echo "$FAKE_PLAN" | awk -v n="$n" '{ print $n }')
for act in $(echo "${plan:-ok}" | tr ',' ' '); do
    case $act in
    ck*|crc*)
        s=${act#ck} s=${s#crc} g=32
        case $s in *:*) g=${s#*:} s=${s%%:*} ;; esac
        d=$(step_dir "$s")
        $MKSET "$d" "$s" "$g" || exit 99
        case $act in crc*) sed 's/fake/FAKE/' "$d/config.ini" >"$d/x" && mv "$d/x" "$d/config.ini" ;; esac ;;
    part*) mkdir -p "$(step_dir "${act#part}")" ;;
    bad*)
        d=$(step_dir "${act#bad}")
        mkdir -p "$d"
        echo '{"crc32":"00000000","manifest":{"step":' >"$d/manifest.json" ;;
    ompi*)
        echo "mpirun noticed that process rank ${act#ompi} with PID 4242 on node fake exited on signal 9 (Killed)." >&2 ;;
    dtr*) echo "dtrain: rank ${act#dtr}: comm: a fake failure" >&2 ;;
    abt*) echo "  Process name: [[1,1],${act#abt}]" >&2 ;;
    err)
        echo "dtrain: warning: a fake warning" >&2
        echo "dtrain: step 12: a fake NaN" >&2 ;;
    exit*) exit "${act#exit}" ;;
    lost*)
        printf 'ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[6352,0],0] on node host0\n  Remote daemon: [[6352,0],1] on node %s\n' \
            "${act#lost}" >&2 ;;
    p*) printf '%12d' "${act#p}" >"$DTRAIN_PROGRESS_FILE" ;;
    fail) exit 1 ;;
    kill) kill -KILL $$ ;;
    ok) exit 0 ;;
    hang)
        trap 'echo TERM >"$state/got"; kill $! 2>/dev/null; exit 143' TERM
        sleep 30 >/dev/null 2>&1 &
        echo started >"$state/started"
        wait $! ;;
    esac
done
exit 0
FAKE

# launch NAME CODE ARGS...: runs dtrain launch ARGS with $tmp/NAME as the fake's state
# (FAKE_PLAN from the caller's environment); stdout in $tmp/NAME.out, stderr in .err; the
# exit status must be CODE.
launch() {
    name=$1 want=$2
    shift 2
    mkdir -p "$tmp/$name"
    code=0
    FAKE_STATE="$tmp/$name" "$DTRAIN" launch "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        code=$?
    if [ "$code" -ne "$want" ]; then
        echo "FAIL $name: exit status $code, expected $want; stdout and stderr:"
        sed 's/^/  /' "$tmp/$name.out" "$tmp/$name.err"
        fail=1
    else
        echo "ok $name: exit status $code"
    fi
}

# expect NAME FILE REGEX: a line of FILE matches the extended regular expression.
expect() {
    if ! grep -Eq -- "$3" "$2"; then
        echo "FAIL $1: no line of $(basename "$2") matches /$3/ in:"
        sed 's/^/  /' "$2"
        fail=1
    fi
}

# same NAME WHAT EXPECTED ACTUAL
same() {
    if [ "$3" != "$4" ]; then
        echo "FAIL $1: $2: expected"
        echo "$3" | sed 's/^/  /'
        echo "  but got"
        echo "$4" | sed 's/^/  /'
        fail=1
    fi
}

fake="sh $tmp/fake.sh"

# ---- usage errors: exit 2 and a message naming the option; the launcher never runs ----
export FAKE_PLAN=ok
launch no_ckdir 2 -n 2 --mpirun "$fake" -- examples/mlp.ini --epochs 1
expect no_ckdir "$tmp/no_ckdir.err" '^dtrain launch: the train arguments have no --checkpoint-dir DIR'
launch no_n 2 --mpirun "$fake" -- --checkpoint-dir "$tmp/d"
expect no_n "$tmp/no_n.err" '^dtrain launch: -n N is required'
launch min_ranks 2 -n 2 --min-ranks 3 --mpirun "$fake" -- --checkpoint-dir "$tmp/d"
expect min_ranks "$tmp/min_ranks.err" '^dtrain launch: --min-ranks 3 is more than -n 2$'
# Options that act on restarts only, with none to run, are refused (they changed nothing).
launch min_no_restart 2 -n 2 --max-restarts 0 --min-ranks 1 --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/d"
expect min_no_restart "$tmp/min_no_restart.err" \
    '^dtrain launch: --min-ranks has no effect with --max-restarts 0: it acts on a restart, and none will run$'
launch probe_no_restart 2 -n 2 --max-restarts 0 --probe-timeout 3 --hostfile "$tmp/hosts2" \
    --mpirun "$fake" -- --checkpoint-dir "$tmp/d"
expect probe_no_restart "$tmp/probe_no_restart.err" \
    '^dtrain launch: --probe-timeout has no effect with --max-restarts 0'
launch bad_n 2 -n 0 --mpirun "$fake" -- --checkpoint-dir "$tmp/d"
expect bad_n "$tmp/bad_n.err" "^dtrain launch: -n '0' is not a valid count$"
launch no_dashes 2 -n 2 --mpirun "$fake" --checkpoint-dir "$tmp/d"
expect no_dashes "$tmp/no_dashes.err" "^dtrain launch: unknown option '--checkpoint-dir'"
launch needs_value 2 -n
expect needs_value "$tmp/needs_value.err" '^dtrain launch: option -n needs a value \(N\)$'
for name in no_ckdir no_n min_ranks bad_n no_dashes; do
    [ ! -e "$tmp/$name/count" ] || { echo "FAIL $name: the launcher ran"; fail=1; }
done
launch help 0 --help
expect help "$tmp/help.out" '^usage: dtrain launch -n N \[options\] -- '
expect help "$tmp/help.out" '^  --min-ranks M '
[ ! -s "$tmp/help.err" ] || { echo "FAIL help: it wrote to stderr"; fail=1; }
# A launcher that cannot start is not a failed job: no restarts.
launch no_launcher 1 -n 2 --mpirun "$tmp/no-such-mpirun -v" -- --checkpoint-dir "$tmp/d"
expect no_launcher "$tmp/no_launcher.err" "^dtrain launch: cannot run '$tmp/no-such-mpirun': No such file or directory$"
if grep -q 'restart' "$tmp/no_launcher.err"; then
    echo "FAIL no_launcher: it restarted"; fail=1
fi

# ---- restarts from the newest checkpoint, same ranks ----
# Call 1 leaves step 20 as the newest complete checkpoint (30 has no manifest, 40 a broken
# one) and dies at step 27; call 2 adds step 35 and is killed at step 38; call 3 succeeds.
D="$tmp/restart/ck"
: >"$tmp/hosts"
FAKE_PLAN="ck10,ck20,part30,bad40,p27,ompi1,fail ck35,p38,dtr2,kill ok" \
    launch restart 0 -n 3 --hostfile "$tmp/hosts" --mpirun "$fake" -- \
    --checkpoint-dir="$D" --epochs 1
e="$tmp/restart.err" o="$tmp/restart.out"
same restart calls 3 "$(cat "$tmp/restart/count")"
same restart "the launcher's arguments" \
    "-n 3 -x DTRAIN_PROGRESS_FILE --hostfile $tmp/hosts $exe train --checkpoint-dir=$D --epochs 1 --resume $D" \
    "$(sed -n 1p "$tmp/restart/args")"
same restart "ranks and --global-batch of each call" "$(printf '3 -\n3 -\n3 -')" \
    "$(cat "$tmp/restart/ranks")"
same restart "DTRAIN_PROGRESS_FILE of each call" "$(printf '%s\n%s\n%s' "$D/.progress" \
    "$D/.progress" "$D/.progress")" "$(cat "$tmp/restart/env")"
# The launcher's stderr passes through unchanged.
expect restart "$e" '^mpirun noticed that process rank 1 with PID 4242 on node fake exited on signal 9 \(Killed\)\.$'
expect restart "$e" '^dtrain: rank 2: comm: a fake failure$'
expect restart "$e" '^dtrain launch: restart 1 of 3: mpirun exited with status 1; rank 1: "mpirun noticed that process rank 1 with PID 4242 .*"; reached step 27; resuming from step-000000020 \(step 20\) on 3 ranks$'
expect restart "$e" '^dtrain launch: restart 2 of 3: mpirun was killed by signal 9 \(Killed\); rank 2: "dtrain: rank 2: comm: a fake failure"; reached step 38; resuming from step-000000035 \(step 35\) on 3 ranks$'
if grep -q 'dropping' "$e"; then
    echo "FAIL restart: it dropped ranks without --min-ranks"; fail=1
fi
expect restart "$o" '^dtrain launch: done after 2 restarts$'
expect restart "$o" '^dtrain launch: restarts: 2$'
expect restart "$o" '^dtrain launch: ranks at the end: 3 \(of 3\)$'
expect restart "$o" '^dtrain launch: steps recomputed: 10$'

# ---- the set train takes: a corrupt newer set is passed over, a 10-digit step is a step ----
# The newest set (step 30) is corrupt: launch names step 20 and why 30 was skipped, and
# `dtrain inspect DIR`, which finds the set as `dtrain train --resume DIR` does, agrees.
D="$tmp/corrupt/ck"
FAKE_PLAN="ck10,ck20,crc30,p33,fail ok" launch corrupt 0 -n 2 --mpirun "$fake" -- \
    --checkpoint-dir "$D"
expect corrupt "$tmp/corrupt.err" '^dtrain launch: restart 1 of 3: mpirun exited with status 1; reached step 33; resuming from step-000000020 \(step 20\) on 2 ranks$'
expect corrupt "$tmp/corrupt.err" "^dtrain launch: skipping $D/step-000000030: checkpoint: $D/step-000000030/config.ini: corrupt"
"$DTRAIN" inspect "$D" >"$tmp/corrupt.inspect" 2>&1
expect corrupt "$tmp/corrupt.inspect" "^checkpoint $D/step-000000020: format version 1, verified$"
# Past step 999999999 the set's name has 10 digits: it is still the newest.
D="$tmp/digits/ck"
FAKE_PLAN="ck999999999,ck1000000000:48,p1000000002,fail ok" launch digits 0 -n 3 \
    --mpirun "$fake" -- --checkpoint-dir "$D"
expect digits "$tmp/digits.err" '^dtrain launch: restart 1 of 3: mpirun exited with status 1; reached step 1000000002; resuming from step-1000000000 \(step 1000000000\) on 3 ranks$'
expect digits "$tmp/digits.out" '^dtrain launch: steps recomputed: 2$'
"$DTRAIN" inspect "$D" >"$tmp/digits.inspect" 2>&1
expect digits "$tmp/digits.inspect" "^checkpoint $D/step-1000000000: format version 1, verified$"

# ---- a host gone: Open MPI names the node of the daemon it lost, and so does the cause ----
FAKE_PLAN="ck5,p7,lost10.1.2.3,fail ok" \
    launch host_lost 0 -n 2 --mpirun "$fake" -- --checkpoint-dir "$tmp/host_lost/ck"
expect host_lost "$tmp/host_lost.err" '^dtrain launch: restart 1 of 3: mpirun exited with status 1; host 10\.1\.2\.3 lost \(its daemon stopped answering\); reached step 7; resuming from step-000000005'

# ---- a host that does not answer the probe: named, left out, the ranks cut to its slots ----
printf 'hostA slots=2 # rack 1\n\n# hostC is not here\nhostB  slots=2\n' >"$tmp/hosts2"
# The host kept is an IPv6 address: its colons are not Hydra's NAME:N.
printf 'fe80::a slots=2 # rack 1\n\n# hostC is not here\nhostB  slots=2\n' >"$tmp/hosts_v6"
D="$tmp/silent/ck"
FAKE_PLAN="ck5:64,p7,fail ok" FAKE_DEAD=hostB \
    launch silent 0 -n 4 --min-ranks 2 --hostfile "$tmp/hosts_v6" --mpirun "$fake" -- \
    --checkpoint-dir "$D"
e="$tmp/silent.err"
# hostB's probe fails at once: it is tried once more (a launcher still tearing down the
# failed job can refuse a live host), then counted dead; fe80::a answers the first time.
same silent probes "$(printf '%s\n%s\n%s' "-n 1 --host fe80::a $exe --version" \
    "-n 1 --host hostB $exe --version" "-n 1 --host hostB $exe --version")" \
    "$(sort "$tmp/silent/probes")"
expect silent "$e" '^dtrain launch: dropping to 2 ranks: the hosts left have 2 slots; --global-batch 64 \(the checkpoint.s\)'
expect silent "$e" '^dtrain launch: restart 1 of 3: mpirun exited with status 1; host hostB did not answer the probe; reached step 7; resuming from step-000000005 \(step 5\) on 2 ranks$'
same silent "the restart's arguments" \
    "-n 2 -x DTRAIN_PROGRESS_FILE --hostfile $D/.hostfile $exe train --checkpoint-dir $D --resume $D --global-batch 64" \
    "$(sed -n 2p "$tmp/silent/args")"
same silent "the hosts left" "fe80::a slots=2" "$(cat "$D/.hostfile")"
# The same under Hydra (MPICH's mpiexec): its hostfile's NAME:N read and written, the
# progress file's variable passed with -genvlist; the launcher asked once what it is.
printf 'hostA:2\nhostB:2 # rack 2\n' >"$tmp/hosts_hydra"
D="$tmp/hydra/ck"
FAKE_PLAN="ck5:64,p7,fail ok" FAKE_DEAD=hostB FAKE_HYDRA=1 \
    launch hydra 0 -n 4 --min-ranks 2 --hostfile "$tmp/hosts_hydra" --mpirun "$fake" -- \
    --checkpoint-dir "$D"
same hydra "the first run's arguments" \
    "-n 4 -genvlist DTRAIN_PROGRESS_FILE --hostfile $tmp/hosts_hydra $exe train --checkpoint-dir $D --resume $D" \
    "$(sed -n 1p "$tmp/hydra/args")"
same hydra "the restart's arguments" \
    "-n 2 -genvlist DTRAIN_PROGRESS_FILE --hostfile $D/.hostfile $exe train --checkpoint-dir $D --resume $D --global-batch 64" \
    "$(sed -n 2p "$tmp/hydra/args")"
same hydra "the hosts left" "hostA:2" "$(cat "$D/.hostfile")"
same hydra "questions of the launcher" "--version" "$(cat "$tmp/hydra/versions")"
# A launcher that is neither: said, and Open MPI's options used.
D="$tmp/other/ck"
FAKE_PLAN="ok" FAKE_OTHER=1 launch other 0 -n 2 --mpirun "$fake" -- --checkpoint-dir "$D"
expect other "$tmp/other.err" "^dtrain launch: '$fake --version' names neither Open MPI nor MPICH's Hydra: passing Open MPI's options"
same other "the run's arguments" "-n 2 -x DTRAIN_PROGRESS_FILE $exe train --checkpoint-dir $D --resume $D" \
    "$(sed -n 1p "$tmp/other/args")"
# A probe that hangs is a silent host too (--probe-timeout); none left: no restart.
FAKE_PLAN="fail ok" FAKE_HANG=hostA FAKE_DEAD=hostB \
    launch none_left 1 -n 2 --probe-timeout 1 --hostfile "$tmp/hosts2" --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/none_left/ck"
expect none_left "$tmp/none_left.err" '^dtrain launch: not restarting: mpirun exited with status 1; hosts hostA, hostB did not answer the probe; no host of the hostfile answers$'
same none_left calls 1 "$(cat "$tmp/none_left/count")"
printf 'hostA slots=two\n' >"$tmp/hosts_bad"
launch bad_hostfile 2 -n 2 --hostfile "$tmp/hosts_bad" --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/bad_hostfile/ck"
expect bad_hostfile "$tmp/bad_hostfile.err" "^dtrain launch: --hostfile $tmp/hosts_bad line 1: "
# A word the rewritten hostfile would drop (Open MPI's max_slots) is refused, not lost, on
# its line: the comments before it (a line of its own, and after a host) are not words.
printf '# two hosts\nhostA slots=2 # the first\nhostB slots=2 max_slots=4\n' >"$tmp/hosts_max"
launch max_slots 2 -n 2 --hostfile "$tmp/hosts_max" --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/max_slots/ck"
expect max_slots "$tmp/max_slots.err" "^dtrain launch: --hostfile $tmp/hosts_max line 3: 'max_slots=4' is not understood: a line holds a host and slots=N \(Open MPI\) or NAME:N \(MPICH\), nothing else\$"

# ---- fewer ranks: restarts that fail before a new checkpoint ----
# Call 1 checkpoints step 10 (global batch 64) and fails at 13; call 2 (a restart) fails at
# 11 with no new checkpoint: call 3 runs on 3 ranks with --global-batch 64, fails likewise:
# call 4 on 2 ranks, the floor, fails likewise and stays there; call 5 checkpoints step 20,
# fails at 21 (not before a new checkpoint: no drop); call 6 succeeds.
D="$tmp/shrink/ck"
FAKE_PLAN="ck10:64,p13,ompi3,fail p11,ompi3,fail fail ompi1,fail ck20:64,p21,fail ok" \
    launch shrink 0 -n 4 --min-ranks 2 --max-restarts=5 --mpirun="$fake" -- \
    --checkpoint-dir "$D" --max-steps 100
e="$tmp/shrink.err" o="$tmp/shrink.out"
same shrink "ranks and --global-batch of each call" \
    "$(printf '4 -\n4 -\n3 64\n2 64\n2 64\n2 64')" "$(cat "$tmp/shrink/ranks")"
same shrink "the third call's arguments" \
    "-n 3 -x DTRAIN_PROGRESS_FILE $exe train --checkpoint-dir $D --max-steps 100 --resume $D --global-batch 64" \
    "$(sed -n 3p "$tmp/shrink/args")"
expect shrink "$e" '^dtrain launch: dropping to 3 ranks: .*--global-batch 64'
expect shrink "$e" '^dtrain launch: dropping to 2 ranks: '
expect shrink "$e" '^dtrain launch: staying at 2 ranks \(--min-ranks 2\)$'
expect shrink "$e" '^dtrain launch: restart 2 of 5: mpirun exited with status 1; rank 3: .*; reached step 11; resuming from step-000000010 \(step 10\) on 3 ranks$'
expect shrink "$e" '^dtrain launch: restart 3 of 5: mpirun exited with status 1; reached an unknown step \(no progress file\); resuming from step-000000010 \(step 10\) on 2 ranks$'
expect shrink "$e" '^dtrain launch: restart 5 of 5: .*reached step 21; resuming from step-000000020 \(step 20\) on 2 ranks$'
same shrink "'staying' lines" 1 "$(grep -c 'staying at' "$e")"
expect shrink "$o" '^dtrain launch: restarts: 5$'
expect shrink "$o" '^dtrain launch: ranks at the end: 2 \(of 4\)$'
expect shrink "$o" '^dtrain launch: steps recomputed: 5$'

# No checkpoint yet: the global batch comes from the train arguments (the last one given).
FAKE_PLAN="fail fail ok" launch shrink_args 0 -n 3 --min-ranks 2 --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/shrink_args/ck" --global-batch 40 --set parallel.global_batch=48
same shrink_args "ranks and --global-batch of each call" "$(printf '3 -\n3 -\n2 48')" \
    "$(cat "$tmp/shrink_args/ranks")"
expect shrink_args "$tmp/shrink_args.err" '^dtrain launch: restart 2 of 3: mpirun exited with status 1; reached an unknown step \(no progress file\); resuming from the start \(no checkpoint yet\) on 2 ranks$'
expect shrink_args "$tmp/shrink_args.out" '^dtrain launch: steps recomputed: 0$'

# ---- no global batch to keep: no drop; restarts exhausted: exit 1 ----
# The launcher named by $DTRAIN_MPIRUN this time.
FAKE_PLAN="ompi0,fail fail fail fail" DTRAIN_MPIRUN="$fake" \
    launch exhausted 1 -n 3 --min-ranks 1 --max-restarts 2 -- --checkpoint-dir "$tmp/exhausted/ck"
e="$tmp/exhausted.err" o="$tmp/exhausted.out"
same exhausted calls 3 "$(cat "$tmp/exhausted/count")"
same exhausted "ranks of each call" "$(printf '3 -\n3 -\n3 -')" "$(cat "$tmp/exhausted/ranks")"
expect exhausted "$e" '^dtrain launch: not dropping to 2 ranks: no checkpoint yet .*no --global-batch in the train arguments'
expect exhausted "$e" '^dtrain launch: giving up after 2 restarts: mpirun exited with status 1$'
expect exhausted "$o" '^dtrain launch: failed$'
expect exhausted "$o" '^dtrain launch: restarts: 2$'

# ---- the train command's own verdicts, which a restart would reach again: no restart ----
# exit 2 (its arguments refused) and exit 3 (stopped on a NaN or Inf); the cause is dtrain's
# own line, not Open MPI's "Process name" beside it (a rank killed still comes first).
FAKE_PLAN="abt0,err,exit3 ok" launch nan_stop 1 -n 1 --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/nan_stop/ck"
same nan_stop calls 1 "$(cat "$tmp/nan_stop/count")"
expect nan_stop "$tmp/nan_stop.err" '^dtrain launch: not restarting: mpirun exited with status 3; rank 0: "dtrain: step 12: a fake NaN"; the run stopped on a NaN or Inf \(exit status 3: train.on_nonfinite stop, or train.skip_limit\), which a restart from the checkpoint would compute again$'
expect nan_stop "$tmp/nan_stop.out" '^dtrain launch: failed$'
FAKE_PLAN="err,exit2 ok" launch refused 1 -n 2 --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/refused/ck"
same refused calls 1 "$(cat "$tmp/refused/count")"
expect refused "$tmp/refused.err" '^dtrain launch: not restarting: mpirun exited with status 2; "dtrain: step 12: a fake NaN"; the train command refused its arguments \(exit status 2\), as it would on every restart$'
FAKE_PLAN="ompi1,exit3 ok" launch exit3_killed 0 -n 2 --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/exit3_killed/ck"
same exit3_killed "calls (exit 3 with a rank killed and no message of dtrain's: restarted)" 2 \
    "$(cat "$tmp/exit3_killed/count")"
FAKE_PLAN="err,ompi1,abt0,exit1 ok" launch killed_first 0 -n 2 --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/killed_first/ck"
expect killed_first "$tmp/killed_first.err" '^dtrain launch: restart 1 of 3: mpirun exited with status 1; rank 1: "mpirun noticed that process rank 1 '

# ---- SIGTERM: passed on to the launcher; no restart ----
mkdir -p "$tmp/term"
FAKE_STATE="$tmp/term" FAKE_PLAN="hang" "$DTRAIN" launch -n 2 --mpirun "$fake" -- \
    --checkpoint-dir "$tmp/term/ck" >"$tmp/term.out" 2>"$tmp/term.err" &
pid=$!
waited=0
while [ ! -e "$tmp/term/started" ] && [ $waited -lt 100 ]; do
    sleep 0.1
    waited=$((waited + 1))
done
kill -TERM "$pid"
code=0
wait "$pid" || code=$?
same term "exit status" 1 "$code"
same term "what the launcher received" TERM "$(cat "$tmp/term/got" 2>/dev/null || echo nothing)"
same term calls 1 "$(cat "$tmp/term/count")"
expect term "$tmp/term.err" '^dtrain launch: stopped by signal 15 \(Terminated\), not restarting: mpirun exited with status 143$'
expect term "$tmp/term.out" '^dtrain launch: stopped$'

[ $fail -eq 0 ] && echo "ok: launch"
exit $fail
