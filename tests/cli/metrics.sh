#!/bin/sh
# metrics.sh PYTHON — `--metrics FILE` writes one JSON object per line: a step record every
# --log-every steps and an epoch record with epoch, train_loss, test_loss, test_accuracy
# (a fraction) and samples_per_s, and at the end a phases record (each rank's time per step
# in each phase, and the straggler) and a comm record (bytes per step). A short MLP run on Fashion-MNIST (5 steps) and a short
# linear regression (no accuracy: null) are parsed with Python's json module, and the
# epoch record is checked against the log line dtrain prints for the same epoch.
set -u
PY=${1:?usage: metrics.sh PYTHON}
DTRAIN=${DTRAIN:?DTRAIN must name the dtrain binary (ctest sets it)}
SRC=${DT_SOURCE_DIR:?DT_SOURCE_DIR must name the source tree (ctest sets it)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-cli-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0

. "$SRC/tests/cli/runner.sh"

run mlp train "$SRC/examples/mlp.ini" --max-steps 5 --log-every 2 --no-progress \
    --metrics "$tmp/mlp.jsonl"
run linreg train "$SRC/examples/linreg.ini" --max-steps 3 --log-every 1 --no-progress \
    --metrics "$tmp/linreg.jsonl"

"$PY" - "$tmp/mlp.jsonl" "$tmp/mlp.out" "$tmp/linreg.jsonl" <<'EOF' || fail=1
import json, math, re, sys

def records(path):
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                o = json.loads(line)
            except ValueError as e:
                sys.exit(f"FAIL: {path}:{n}: not JSON ({e}): {line!r}")
            if not isinstance(o, dict):
                sys.exit(f"FAIL: {path}:{n}: not a JSON object: {line!r}")
            out.append(o)
    return out

def need(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)

def number(o, key):
    v = o.get(key)
    need(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
         f"{key} is {v!r} in {o}, expected a finite number")
    return v

mlp = records(sys.argv[1])
steps = [o for o in mlp if o.get("event") == "step"]
epochs = [o for o in mlp if o.get("event") == "epoch"]
phases = [o for o in mlp if o.get("event") == "phases"]
comm = [o for o in mlp if o.get("event") == "comm"]
need(len(steps) + len(epochs) + len(phases) + len(comm) == len(mlp),
     f"records of unknown kind in {mlp}")
need(len(phases) == 1 and mlp[-2] is phases[0], f"{len(phases)} phases records, expected 1")
# The last record: what crossed the network per step (nothing, in one process).
need(len(comm) == 1 and mlp[-1] is comm[0], f"{len(comm)} comm records, expected 1, last")
c = comm[0]
need(c.get("strategy") == "ddp" and c.get("compress") == "none" and c.get("steps") == 5
     and c.get("wire_bytes_per_step") == 0 and c.get("dense_bytes_per_step") == 0,
     f"comm record {c}: ddp, none, 5 steps, no bytes in one process")
p = phases[0]
need(number(p, "steps") == 5 and p.get("straggler") == 0 and len(p.get("ranks", [])) == 1,
     f"phases record {p}")
for k in ("data_ms", "forward_ms", "backward_ms", "comm_ms", "optimizer_ms", "bubble_ms"):
    need(number(p["ranks"][0], k) >= 0, f"phases record: {k}")
need(p["ranks"][0]["forward_ms"] > 0 and p["ranks"][0]["bubble_ms"] == 0,
     f"phases record {p}: forward timed, no bubble in one process")
# --log-every 2 over 5 steps: records after steps 2 and 4.
need([o.get("step") for o in steps] == [2, 4], f"step records {steps}, expected steps 2 and 4")
for o in steps:
    need(number(o, "epoch") == 1 and number(o, "samples") == 64, f"step record {o}")
    # examples/mlp.ini: cosine decay from 2e-3 to 0 over the run's 5 steps; step s (from 1)
    # trains at 2e-3 * (1 + cos(pi * (s - 1) / 5)) / 2.
    want_lr = 2e-3 * (1 + math.cos(math.pi * (o["step"] - 1) / 5)) / 2
    need(number(o, "loss") > 0 and abs(number(o, "lr") - want_lr) <= 1e-15,
         f"step record {o}: expected lr {want_lr!r}")
need(len(epochs) == 1, f"{len(epochs)} epoch records, expected 1")
e = epochs[0]
need(number(e, "epoch") == 1 and number(e, "steps") == 5, f"epoch record {e}")
for k in ("train_loss", "test_loss"):
    need(0 < number(e, k) < 10, f"{k} {e[k]} out of range")
acc = number(e, "test_accuracy")
need(0 <= acc <= 1, f"test_accuracy {acc} is not a fraction")
# The fraction of 10,000 test images: a whole number of them.
need(abs(acc * 10000 - round(acc * 10000)) < 1e-6, f"test_accuracy {acc} is not k/10000")
need(number(e, "samples_per_s") > 0, f"samples_per_s {e['samples_per_s']}")
# The log line dtrain printed for the epoch shows the same figures, rounded.
text = open(sys.argv[2]).read()
m = re.search(r"epoch 1: train loss ([0-9.]+)  test loss ([0-9.]+)  test accuracy ([0-9.]+)", text)
need(m is not None, "no 'epoch 1: train loss ... test loss ... test accuracy ...' line")
for got, key in zip(m.groups(), ("train_loss", "test_loss", "test_accuracy")):
    need(abs(float(got) - e[key]) <= 5e-5, f"log line says {key} {got}, metrics {e[key]}")
print(f"mlp: {len(steps)} step records, epoch record {e}")

lin = records(sys.argv[3])
need([o.get("step") for o in lin if o.get("event") == "step"] == [1, 2, 3],
     f"linreg step records {lin}")
le = [o for o in lin if o.get("event") == "epoch"]
need(len(le) == 1, f"linreg: {len(le)} epoch records")
need("test_accuracy" in le[0] and le[0]["test_accuracy"] is None,
     f"linreg: test_accuracy {le[0].get('test_accuracy')!r}, expected null for regression")
need(number(le[0], "test_loss") > 0, "linreg test_loss")
print(f"linreg: epoch record {le[0]}")
EOF

[ $fail -eq 0 ] && echo "ok: metrics"
exit $fail
