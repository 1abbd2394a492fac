#!/bin/sh
# cli_obs.sh — where the time goes, from the command line: on 2 ranks with rank 1 slowed
# (--slow-rank 1:30) the phase table names rank 1 as the straggler and as the slowest in the
# data phase, and the metrics file has a "phases" record; --trace writes one JSON file that
# parses, holds a compute and a communication track for both ranks, every step of both
# ranks, and puts them on one clock: data parallelism ends each step with an exchange, so
# the ranks' ends of a step fall within a few milliseconds of each other. The pipeline's
# trace has its bubble and its micro-batches. A ConvNet's backward takes longer per step
# than its forward (each conv layer's backward is two products to forward's one), and the
# phases record says so under its names. A one-process run's table has the phases'
# times alone: no line on communication in flight, no straggler.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
PYTHON=${DT_PYTHON3:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-obs-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
MLP="$SRC/examples/mlp.ini"

has() { # has NAME FILE REGEX
    if grep -Eq "$3" "$2"; then echo "ok $1: $(grep -E "$3" "$2" | head -1)"
    else echo "FAIL $1: no line matches /$3/"; sed 's/^/  /' "$2"; fail=1; fi
}
hasnt() { # hasnt NAME FILE REGEX
    if grep -Eq "$3" "$2"; then echo "FAIL $1: a line matches /$3/:"; sed 's/^/  /' "$2"; fail=1
    else echo "ok $1: no line matches /$3/"; fi
}

"$MPIRUN" -np 2 --oversubscribe "$DTRAIN" train "$MLP" --max-steps 12 --batch 32 --threads 1 \
    --no-progress --slow-rank 1:30 --trace "$tmp/dp.json" --metrics "$tmp/m.jsonl" \
    >"$tmp/dp.out" 2>&1 || { echo "FAIL dp run: exit $?"; sed 's/^/  /' "$tmp/dp.out"; fail=1; }
has straggler "$tmp/dp.out" '^dtrain: straggler: rank 1,'
has data-slowest "$tmp/dp.out" '^  data +[0-9.]+ +[0-9.]+ +rank 1$'
has comm-row "$tmp/dp.out" '^  comm +[0-9.]+ +[0-9.]+ +rank 0$'
has in-flight "$tmp/dp.out" '^  communication in flight [0-9.]+ ms per step, [0-9.]+ ms of it waited for: about [0-9.]+ ms hidden behind computation$'
has metrics-record "$tmp/m.jsonl" '"event":"phases".*"straggler":1'
has trace-written "$tmp/dp.out" 'trace of every rank written to'

# One process: the phases' times alone; nothing in flight, no straggler, no rank columns.
"$DTRAIN" train "$SRC/examples/linreg.ini" --max-steps 8 --threads 1 --no-progress \
    >"$tmp/one.out" 2>&1 || { echo "FAIL one-process run: exit $?"; sed 's/^/  /' "$tmp/one.out"; fail=1; }
has one-table "$tmp/one.out" '^dtrain: time per step by phase over 8 steps \(ms\):$'
has one-row "$tmp/one.out" '^  forward +[0-9.]+$'
hasnt one-in-flight "$tmp/one.out" 'communication in flight'
hasnt one-straggler "$tmp/one.out" 'straggler|slowest|rank 0'

"$MPIRUN" -np 2 --oversubscribe "$DTRAIN" train "$MLP" --max-steps 4 --batch 32 --threads 1 \
    --no-progress --pp 2 --micro-batches 4 --trace "$tmp/pp.json" >"$tmp/pp.out" 2>&1 ||
    { echo "FAIL pp run: exit $?"; sed 's/^/  /' "$tmp/pp.out"; fail=1; }

# 8 steps without the epoch's evaluation: about a second; backward measured 1.4-1.6 times
# forward at batch 32 on one thread (2 shared cores), summed over the steps so that a preemption
# in one step does not decide.
"$DTRAIN" train "$SRC/examples/convnet.ini" --max-steps 8 --threads 1 --set train.eval=off \
    --no-progress --metrics "$tmp/conv.jsonl" >"$tmp/conv.out" 2>&1 ||
    { echo "FAIL convnet run: exit $?"; sed 's/^/  /' "$tmp/conv.out"; fail=1; }
"$PYTHON" - "$tmp/conv.jsonl" <<'PY' || fail=1
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if '"event":"phases"' in l]
r = rec[0]["ranks"][0] if rec else {}
fwd, bwd = r.get("forward_ms", -1), r.get("backward_ms", -1)
ok = fwd > 0 and bwd > fwd
print(("ok" if ok else "FAIL") + " convnet-phases: backward %.1f ms per step, forward %.1f ms "
      "(expected backward > forward > 0)" % (bwd, fwd))
sys.exit(0 if ok else 1)
PY

"$PYTHON" - "$tmp/dp.json" "$tmp/pp.json" <<'PY' || fail=1
import json, sys

def load(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]

bad = 0
def check(name, ok, detail):
    global bad
    print(("ok " if ok else "FAIL ") + name + ": " + detail)
    bad += not ok

ev = load(sys.argv[1])
tracks = {(e["pid"], e["args"]["name"]) for e in ev if e.get("name") == "thread_name"}
check("dp-tracks", tracks == {(0, "compute"), (0, "communication"), (1, "compute"),
                              (1, "communication")}, str(sorted(tracks)))
steps = {}
for e in ev:
    if e.get("cat") == "step":
        steps.setdefault(e["args"]["step"], {})[e["pid"]] = (e["ts"], e["ts"] + e["dur"])
both = sorted(s for s in steps if len(steps[s]) == 2)
check("dp-steps", len(both) == 12, "%d steps on both ranks" % len(both))
# Each step of data parallelism contains an exchange between the ranks, so on one clock the
# two ranks' spans of a step overlap (a clock offset longer than a step would part them).
apart = [s for s in both if max(steps[s][0][0], steps[s][1][0]) >= min(steps[s][0][1], steps[s][1][1])]
ends = sorted(abs(steps[s][0][1] - steps[s][1][1]) for s in both)
check("dp-one-clock", not apart and bool(ends),
      "every step's spans overlap on the two ranks (%s apart); the ends' median gap %.0f us"
      % (apart or "none", ends[len(ends) // 2] if ends else -1))
colls = [e for e in ev if e.get("cat") == "comm" and e["args"]["group"] == "dp"]
check("dp-collectives", any(e["name"] == "allreduce" and e["args"]["bytes"] > 0 for e in colls),
      "%d collectives on the dp group, e.g. %s" % (len(colls), colls[0]["name"] if colls else "-"))
slow = [e["dur"] for e in ev if e.get("cat") == "phase" and e["name"] == "data" and e["pid"] == 1]
check("dp-slow-rank", sum(slow) > 12 * 25000, "rank 1's data phases %.0f ms in all" % (sum(slow) / 1e3))

ev = load(sys.argv[2])
bubbles = [e for e in ev if e.get("cat") == "phase" and e["name"] == "bubble"]
micro = {e["args"]["micro_batch"] for e in ev if e.get("cat") == "phase" and e["name"] == "forward"}
check("pp-bubble", len(bubbles) > 0, "%d bubble spans" % len(bubbles))
check("pp-micro-batches", micro == {0, 1, 2, 3}, "forward micro-batches %s" % sorted(micro))
sends = [e for e in ev if e.get("cat") == "comm" and e["name"] in ("send", "isend", "recv", "irecv")]
check("pp-messages", len(sends) > 0, "%d messages between stages" % len(sends))
sys.exit(1 if bad else 0)
PY
exit $fail
