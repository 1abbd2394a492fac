#!/bin/sh
# startup.sh BENCH_TRAIN PYTHON — the start-up figures bench/run.py divides up come from one
# process and one clock: bench_train's JSON line has setup_s (launch to the start of
# training) and load_s (the part of it spent reading the data, dt_trainer_data_load_s), with
# 0 < load_s <= setup_s <= first_step_s, so the start-up beyond loading the data
# (setup_s - load_s, docs/BENCHMARKS.md "Start-up") is never negative. A few steps of the
# synthetic linear regression: no data files, milliseconds.
set -u
BENCH=${1:?the bench_train executable}
PYTHON=${2:-python3}
SRC=${DT_SOURCE_DIR:?ctest sets DT_SOURCE_DIR}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-startup-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
BENCH_T0=$("$PYTHON" -c 'import time; print("%.9f" % time.monotonic())') \
    OPENBLAS_NUM_THREADS=1 "$BENCH" "$SRC/examples/linreg.ini" --steps 3 --warmup 1 \
    >"$tmp/out" 2>&1 || { echo "FAIL: bench_train exit $?"; sed 's/^/  /' "$tmp/out"; exit 1; }
"$PYTHON" - "$tmp/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read())
got = {k: r.get(k) for k in ("load_s", "setup_s", "first_step_s")}
if None in got.values():
    print("FAIL: expected load_s, setup_s and first_step_s in bench_train's line, got %s" % got)
    sys.exit(1)
if not 0 < got["load_s"] <= got["setup_s"] <= got["first_step_s"]:
    print("FAIL: expected 0 < load_s <= setup_s <= first_step_s, got %s" % got)
    sys.exit(1)
print("ok: load_s %.4f <= setup_s %.4f <= first_step_s %.4f: %.1f ms of start-up beyond "
      "loading" % (got["load_s"], got["setup_s"], got["first_step_s"],
                   (got["setup_s"] - got["load_s"]) * 1e3))
PY
