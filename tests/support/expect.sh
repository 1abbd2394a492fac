# expect.sh — shell helpers of the CLI tests, sourced after $tmp and fail=0 are set.

# expect_fail NAME REGEX CMD...: CMD must exit non-zero and print a line matching REGEX.
expect_fail() {
    name=$1 regex=$2
    shift 2
    "$@" >"$tmp/$name.out" 2>&1
    code=$?
    if [ $code -eq 0 ]; then
        echo "FAIL $name: exit status 0, expected a failure"; fail=1
    elif ! grep -Eq "$regex" "$tmp/$name.out"; then
        echo "FAIL $name: no line matches /$regex/ in:"; sed 's/^/  /' "$tmp/$name.out"; fail=1
    else
        echo "ok $name (exit $code): $(grep -E "$regex" "$tmp/$name.out" | head -1)"
    fi
}

# expect_status NAME CODE REGEX CMD...: CMD must exit with status CODE and print a line
# matching the extended regular expression REGEX.
expect_status() {
    name=$1 want=$2 regex=$3
    shift 3
    "$@" >"$tmp/$name.out" 2>&1
    code=$?
    if [ "$code" -ne "$want" ]; then
        echo "FAIL $name: exit status $code, expected $want:"; sed 's/^/  /' "$tmp/$name.out"
        fail=1
    elif ! grep -Eq -e "$regex" "$tmp/$name.out"; then
        echo "FAIL $name: no line matches /$regex/ in:"; sed 's/^/  /' "$tmp/$name.out"; fail=1
    else
        echo "ok $name (exit $code): $(grep -E -e "$regex" "$tmp/$name.out" | head -1)"
    fi
}

# expect_ok NAME CMD...: CMD must exit 0; its output is kept in $tmp/NAME.out.
expect_ok() {
    name=$1
    shift
    "$@" >"$tmp/$name.out" 2>&1
    code=$?
    if [ $code -eq 0 ]; then
        echo "ok $name"
        return 0
    fi
    echo "FAIL $name: exit status $code:"; sed 's/^/  /' "$tmp/$name.out" | tail -20; fail=1
    return 1
}

# expect_same NAME A B: files A and B hold the same bytes.
expect_same() {
    if cmp -s "$2" "$3"; then
        echo "ok $1: $(basename "$2") and $(basename "$3") are identical"
    else
        echo "FAIL $1: $2 and $3 differ ($(cmp "$2" "$3" 2>&1 | head -1))"; fail=1
    fi
}
