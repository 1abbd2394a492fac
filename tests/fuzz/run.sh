#!/bin/sh
# run.sh — runs the libFuzzer targets of a DT_FUZZ=ON build; `make fuzz` calls it.
#
#     tests/fuzz/run.sh BUILD_DIR SECONDS READER...      (READER: idx csv config safetensors manifest)
#
# Each reader's fuzzer runs for SECONDS from a scratch corpus, BUILD_DIR/fuzz/<reader>/corpus,
# seeded with tests/fuzz/corpus/<reader>: the committed corpus stays as it is, and the
# scratch one keeps what each run finds for the next. FUZZ_ARGS adds libFuzzer options.
# A crash, sanitizer report, leak, timeout or out-of-memory fails the run: the report's
# tail and the reproducer's path are printed. Copy the reproducer to
# tests/fuzz/corpus/<reader>/crash-<what> and ctest replays it (fuzz_<reader>_replay).
set -u
if [ $# -lt 3 ]; then
    echo "usage: $0 BUILD_DIR SECONDS READER..." >&2
    exit 2
fi
build=$1
seconds=$2
shift 2
src=$(cd "$(dirname "$0")" && pwd)

# The harnesses write their inputs to files (the safetensors one writes back and fsyncs):
# tmpfs keeps that cheap.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    export TMPDIR=/dev/shm
fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=""
for r in "$@"; do
    fuzzer=$build/tests/fuzz_$r
    work=$build/fuzz/$r
    if [ ! -x "$fuzzer" ]; then
        echo "fuzz_$r: $fuzzer is not built (configure with -DDT_FUZZ=ON)" >&2
        failed="$failed $r"
        continue
    fi
    mkdir -p "$work/corpus" "$work/artifacts"
    cp "$src/corpus/$r"/* "$work/corpus/"
    # -malloc_limit_mb: a single allocation beyond it is reported (a header that asks
    # for gigabytes); -timeout: seconds one input may take.
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of options
    "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 \
        -artifact_prefix="$work/artifacts/" -print_final_stats=1 ${FUZZ_ARGS:-} \
        "$work/corpus" >"$work/log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n 1)
    cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -n 1)
    if [ "$rc" -eq 0 ]; then
        echo "fuzz_$r: ok, ${runs:-?} runs (limit ${seconds} s, ${rate:-?}/s), ${cov:-cov: ?}," \
            "corpus $(find "$work/corpus" -type f | wc -l) inputs"
        continue
    fi
    failed="$failed $r"
    echo "fuzz_$r: FAILED (exit $rc) after ${runs:-?} runs; the report's tail ($work/log):"
    tail -n 60 "$work/log" | sed 's/^/    /'
    unit=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$work/log" | tail -n 1)
    echo "fuzz_$r: reproducer: ${unit:-none written (see the log)}"
    [ -n "$unit" ] && echo "fuzz_$r: replay it with: $build/tests/fuzz_$r $unit"
    for known in "$src/corpus/$r"/crash-*; do
        if [ -n "$unit" ] && [ -f "$known" ] && cmp -s "$known" "$unit"; then
            echo "fuzz_$r: it is the committed $known: not fixed yet"
        fi
    done
done
if [ -n "$failed" ]; then
    echo "fuzz: failed:$failed"
    exit 1
fi
echo "fuzz: no crash in $*"
