#!/bin/sh
# netns.sh — dtrain across "hosts" made of Linux network namespaces, as a user runs it across
# machines: two namespaces joined by a veth pair rate-limited with tc's token bucket (1 Gbit/s,
# 0.1 ms latency each way), each with its own hostname (a UTS namespace), Open MPI over TCP
# between them, started from a hostfile with a launch agent that enters the namespace (in
# place of ssh). Checked:
#   - data parallelism on one rank per host writes the weights of the same run on one host,
#     byte for byte (2 ranks sum in either order to the same bits);
#   - the ring all-reduce across the hosts, and the startup line naming each rank's host;
#   - dtrain launch over the hostfile restarts a job whose rank on host1 was killed, from its
#     checkpoint, and ends with the uninterrupted run's weights, byte for byte;
#   - a host killed mid-run (every process in its namespace, SIGKILL) ends the job within 30 s
#     with a non-zero status. Whether Open MPI names the host depends on its message (its
#     "Remote daemon ... on node H", which dtrain launch turns into its restart's cause:
#     tests/launch/launch_args.sh); the test prints which it was;
#   - under dtrain launch, a host that dies and stays unreachable (its processes killed, then
#     its link down) is named by launch's probe, left out, and the job finishes from its
#     checkpoint on the host left, on 1 rank with the global batch kept.
# Needs root and the ip, tc and unshare tools; without them it is skipped (exit 77, which
# ctest reports as skipped) with the reason, never passed.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
MLP="$SRC/examples/mlp.ini"

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
for tool in ip tc unshare; do
    command -v "$tool" >/dev/null 2>&1 || skip "no '$tool' command"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-netns-XXXXXX") || exit 1
ns0="" ns1="" tmp_hosts=""
cleanup() {
    [ -n "$ns0" ] && hosts_down
    rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
. "$(dirname "$0")/hosts.sh"
RATE=1gbit
hosts_up 2>"$tmp/why" || skip "$(cat "$tmp/why")"
echo "hosts: $net.1 (namespace $ns0, host0) and $net.2 ($ns1, host1), $RATE"

# trains ARGS...: dtrain train across the hosts.
trains() { across "$DTRAIN" train "$MLP" --threads 1 --no-progress "$@"; }

common="--max-steps 20 --epochs 1"
trains $common --save-weights "$tmp/across.st" >"$tmp/across.out" 2>&1 ||
    { echo "FAIL across: exit $?"; sed 's/^/  /' "$tmp/across.out"; fail=1; }
"$MPIRUN" -np 2 --oversubscribe "$DTRAIN" train "$MLP" --threads 1 --no-progress $common \
    --save-weights "$tmp/local.st" >"$tmp/local.out" 2>&1 ||
    { echo "FAIL local: exit $?"; sed 's/^/  /' "$tmp/local.out"; fail=1; }
if cmp -s "$tmp/across.st" "$tmp/local.st"; then
    echo "ok across-hosts: the weights of the same run on one host, byte for byte"
else
    echo "FAIL across-hosts: weights differ from the one-host run"; fail=1
fi
if grep -q 'dtrain: 2 ranks on 2 hosts: rank 0 on host0, rank 1 on host1' "$tmp/across.out"; then
    echo "ok host-map: $(grep 'ranks on 2 hosts' "$tmp/across.out")"
else
    echo "FAIL host-map: no line naming each rank's host"; sed 's/^/  /' "$tmp/across.out"; fail=1
fi

trains $common --comm-algorithm ring >"$tmp/ring.out" 2>&1 &&
    echo "ok ring: $(grep 'data-parallel, rank 0' "$tmp/ring.out")" ||
    { echo "FAIL ring: exit $?"; sed 's/^/  /' "$tmp/ring.out"; fail=1; }

# dtrain launch across the hosts: rank 1 (on host1) kills itself after step 7, once; launch
# restarts the job from the checkpoint of step 6, and it ends with the weights of the
# uninterrupted run across the hosts, byte for byte.
DTRAIN_TEST_KILL="1:7:$tmp/killed-once" "$DTRAIN" launch -n 2 --hostfile "$tmp_hosts/hosts" \
    --mpirun "$tmp_hosts/mpirun" -- "$MLP" --threads 1 --no-progress $common \
    --checkpoint-dir "$tmp/ck" --checkpoint-every 3 --save-weights "$tmp/launch.st" \
    </dev/null >"$tmp/launch.out" 2>&1
code=$?
if [ $code -eq 0 ] && grep -q 'restarts: 1$' "$tmp/launch.out" &&
    cmp -s "$tmp/across.st" "$tmp/launch.st"; then
    echo "ok launch-across-hosts: $(grep 'restart 1 of' "$tmp/launch.out" | cut -c1-150)..."
else
    echo "FAIL launch-across-hosts: exit $code, or not one restart, or other weights"
    sed 's/^/  /' "$tmp/launch.out"; fail=1
fi

# host1 dies after a few steps: every process in its namespace killed.
trains --max-steps 100000 --epochs 100 --comm-timeout 10 >"$tmp/kill.out" 2>&1 &
job=$!
for i in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(ip netns pids "$ns1" | wc -l)" -gt 1 ] && grep -q 'ranks on 2 hosts' "$tmp/kill.out" && break
    sleep 1
done
sleep 1
t0=$(date +%s)
ip netns pids "$ns1" | xargs -r kill -9
( sleep 30; kill -9 $job 2>/dev/null ) >/dev/null 2>&1 &  # not holding ctest's output open
guard=$!
wait $job
code=$?
took=$(($(date +%s) - t0))
kill $guard 2>/dev/null
if [ $code -ne 0 ] && [ $took -lt 30 ]; then
    echo "ok host-killed: the job ended in ${took} s with status $code"
    # Which message Open MPI prints depends on when the host goes: "lost communication with a
    # remote daemon" names its node, "unable to reliably start one or more daemons" does not.
    named=$(grep "on node $net.2" "$tmp/kill.out" | sed 's/^ *//')
    echo "   host named by Open MPI: ${named:-no (it printed another message this time)}"
else
    echo "FAIL host-killed: status $code after ${took} s (a hang is killed at 30 s)"
    sed 's/^/  /' "$tmp/kill.out"; fail=1
fi

# Under dtrain launch, host1 dies for good: its processes are killed, then its link goes down.
# Launch's probe of host1 cannot start a process there: host1 is named and left out, and
# the job resumes on host0 alone from the newest checkpoint.
"$DTRAIN" launch -n 2 --min-ranks 1 --probe-timeout 5 --hostfile "$tmp_hosts/hosts" \
    --mpirun "$tmp_hosts/mpirun" -- "$MLP" --threads 1 --no-progress --max-steps 400 --slow-rank 0:5 \
    --epochs 1 --checkpoint-dir "$tmp/ck_dead" --checkpoint-every 5 \
    </dev/null >"$tmp/dead.out" 2>&1 &
job=$!
for i in $(seq 1 100); do
    ls -d "$tmp/ck_dead"/step-* >/dev/null 2>&1 && break
    sleep 0.2
done
ip netns pids "$ns1" | xargs -r kill -9
ip -n "$ns1" link set "dtv${tag}b" down
( sleep 120; kill -9 $job 2>/dev/null ) >/dev/null 2>&1 &  # not holding ctest's output open
guard=$!
wait $job
code=$?
kill $guard 2>/dev/null
if [ $code -eq 0 ] && grep -q "host $net.2 did not answer the probe" "$tmp/dead.out" &&
    grep -q 'ranks at the end: 1 (of 2)' "$tmp/dead.out"; then
    echo "ok host-dead-launch: $(grep 'restart 1 of' "$tmp/dead.out" | cut -c1-200)"
else
    echo "FAIL host-dead-launch: exit $code, host1 not named, or not finished on 1 rank"
    sed 's/^/  /' "$tmp/dead.out"; fail=1
fi
exit $fail
