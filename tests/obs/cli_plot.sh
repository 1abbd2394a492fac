#!/bin/sh
# cli_plot.sh — dtrain plot turns each kind of output into an SVG a person can read: a
# metrics file (three charts: loss with its three series, test accuracy, throughput), a trace
# (one stacked bar per rank, one part per phase) and bench-comm's JSON lines (a chart per
# operation, a curve per algorithm); each SVG parses as XML and holds those parts, and its
# axes' ticks are round and readable (svg_ticks.py). A file of none of these kinds is
# refused with a message; a line that is not JSON is left out and named.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
MPIRUN=${MPIRUN:?ctest sets MPIRUN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
PYTHON=${DT_PYTHON3:-python3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-plot-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

"$MPIRUN" -np 2 --oversubscribe "$DTRAIN" train "$SRC/examples/mlp.ini" --epochs 2 \
    --max-steps 40 --batch 512 --log-every 5 --threads 1 --no-progress \
    --metrics "$tmp/m.jsonl" --trace "$tmp/t.json" >"$tmp/train.out" 2>&1 ||
    { echo "FAIL train: exit $?"; sed 's/^/  /' "$tmp/train.out"; fail=1; }
"$MPIRUN" -np 2 --oversubscribe "$DTRAIN" bench-comm --max-bytes 64K --iters 3 \
    --ops allreduce,bcast --json "$tmp/c.jsonl" >"$tmp/comm.out" 2>&1 ||
    { echo "FAIL bench-comm: exit $?"; sed 's/^/  /' "$tmp/comm.out"; fail=1; }
for k in m.jsonl:metrics t.json:trace c.jsonl:comm; do
    "$DTRAIN" plot "$tmp/${k%%:*}" -o "$tmp/${k#*:}.svg" >"$tmp/plot.out" 2>&1 ||
        { echo "FAIL plot ${k#*:}: exit $?"; sed 's/^/  /' "$tmp/plot.out"; fail=1; }
done
printf 'not a thing dtrain wrote\n' >"$tmp/other.txt"
if "$DTRAIN" plot "$tmp/other.txt" -o "$tmp/other.svg" >"$tmp/other.out" 2>&1; then
    echo "FAIL refuse: a file of no known kind was plotted"; fail=1
elif grep -q 'neither a metrics file, a trace nor bench-comm JSON lines' "$tmp/other.out"; then
    echo "ok refuse: $(cat "$tmp/other.out")"
else
    echo "FAIL refuse: message"; sed 's/^/  /' "$tmp/other.out"; fail=1
fi
# A metrics file whose line is not JSON (a run killed while writing cuts its last line) is
# drawn from the rest, the line named on stderr.
{ head -3 "$tmp/m.jsonl"; printf '{"event": "st\n'; tail -n +4 "$tmp/m.jsonl"; } >"$tmp/cut.jsonl"
if "$DTRAIN" plot "$tmp/cut.jsonl" -o "$tmp/cut.svg" >"$tmp/cut.out" 2>&1 &&
    grep -q "^dtrain plot: warning: $tmp/cut.jsonl:4: not a JSON object (left out)\$" "$tmp/cut.out"; then
    echo "ok cut_line: $(grep warning "$tmp/cut.out")"
else
    echo "FAIL cut_line:"; sed 's/^/  /' "$tmp/cut.out"; fail=1
fi

"$PYTHON" - "$tmp" <<'PY' || fail=1
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
bad = 0
def check(name, ok, detail):
    global bad
    print(("ok " if ok else "FAIL ") + name + ": " + detail)
    bad += not ok

def load(kind):
    root = ET.parse("%s/%s.svg" % (sys.argv[1], kind)).getroot()
    texts = [t.text or "" for t in root.iter(NS + "text")]
    return root, texts

root, texts = load("metrics")
lines = list(root.iter(NS + "polyline"))
check("metrics-charts", all(t in texts for t in ("Loss", "Test accuracy", "Throughput")),
      "titles %s" % [t for t in texts if t in ("Loss", "Test accuracy", "Throughput")])
check("metrics-series", len(lines) == 5 and "test loss" in texts
      and "train loss (logged steps)" in texts, "%d curves" % len(lines))
logged = [p for p in lines[0].get("points").split() if p]
check("metrics-steps", len(logged) == 8, "%d logged steps on the loss curve (40 steps, every 5)"
      % len(logged))

root, texts = load("trace")
bars = [r for r in root.iter(NS + "rect") if r.find(NS + "title") is not None]
ranks = {r.find(NS + "title").text.split(" ")[0] + " " + r.find(NS + "title").text.split(" ")[1]
         for r in bars}
check("trace-bars", ranks == {"rank 0", "rank 1"} and len(bars) == 12,
      "%d parts over %s" % (len(bars), sorted(ranks)))
check("trace-legend", all(p in texts for p in ("data", "forward", "backward", "comm")),
      "phases named")

root, texts = load("comm")
titles = [t for t in texts if "bus bandwidth on 2 ranks" in t]
check("comm-panels", len(titles) == 2, "%s" % titles)
check("comm-curves", len(list(root.iter(NS + "polyline"))) >= 5, "%d curves"
      % len(list(root.iter(NS + "polyline"))))
sys.exit(1 if bad else 0)
PY
# The ticks of a real run's charts (tests/obs/svg_ticks.py; plot_ticks.sh has more cases).
"$PYTHON" "$SRC/tests/obs/svg_ticks.py" "$tmp/metrics.svg" "$tmp/m.jsonl" || fail=1
"$PYTHON" "$SRC/tests/obs/svg_ticks.py" "$tmp/comm.svg" || fail=1
exit $fail
