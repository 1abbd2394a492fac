# runner.sh — sourced by the CLI test scripts that run dtrain successfully (weights, metrics):
# `run NAME ARGS...` runs $DTRAIN ARGS with stdout and stderr in $tmp/NAME.out and
# $tmp/NAME.err, echoes both indented for the test log, and ends the script with status 1
# unless dtrain exited 0 (what follows would only report the same failure again).
# Needs $DTRAIN and $tmp set by the caller.
# shellcheck shell=sh
run() {
    name=$1
    shift
    echo "\$ dtrain $*"
    "$DTRAIN" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    code=$?
    sed 's/^/  /' "$tmp/$name.out" "$tmp/$name.err"
    if [ $code -ne 0 ]; then
        echo "FAIL: exit status $code, expected 0"
        exit 1
    fi
}
