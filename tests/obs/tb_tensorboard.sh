#!/bin/sh
# tb_tensorboard.sh — optional: TensorBoard's own reader (EventAccumulator, from the
# tensorboard package on PyPI, in bench/.venv) loads the scalars of `--tensorboard`. Skipped
# (exit 77) with the reason where that package is not installed: make test needs no PyPI.
set -u
DTRAIN=${DTRAIN:?ctest sets DTRAIN}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
PY="$SRC/bench/.venv/bin/python"
[ -x "$PY" ] && "$PY" -c 'import tensorboard' 2>/dev/null ||
    { echo "SKIP: no tensorboard package in bench/.venv (bench/.venv/bin/pip install tensorboard)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-tbr-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
"$DTRAIN" train "$SRC/examples/mlp.ini" --epochs 1 --max-steps 12 --batch 256 --threads 1 \
    --no-progress --tensorboard "$tmp/tb" >"$tmp/train.out" 2>&1 ||
    { echo "FAIL train: exit $?"; sed 's/^/  /' "$tmp/train.out"; exit 1; }
"$PY" - "$tmp/tb" <<'PY'
import sys
import tensorboard
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
ea = EventAccumulator(sys.argv[1])
ea.Reload()
tags = ea.Tags()["scalars"]
want = {"train/loss", "train/learning_rate", "test/accuracy", "phases/forward_ms"}
loss = ea.Scalars("train/loss") if "train/loss" in tags else []
ok = want <= set(tags) and [e.step for e in loss] == list(range(1, 13))
print(("ok" if ok else "FAIL") + " tensorboard %s reads %d scalar tags, %d loss points"
      % (tensorboard.__version__, len(tags), len(loss)))
sys.exit(0 if ok else 1)
PY
