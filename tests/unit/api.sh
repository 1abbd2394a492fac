#!/bin/sh
# api.sh SRC BUILD CC MPI_INCLUDES — the public API is the public API:
#   1. libdtrain.so exports only functions declared in include/dtrain/ (nothing of the
#      config parser's dt_cfg_*, the comm engines' dt_cx_*, kernels or packers), and every
#      function declared there is exported (a declaration without DT_API links nowhere);
#   2. every public header compiles on its own, as C11 with -Wpedantic;
#   3. examples/train_linreg.c, a program outside the library, compiles against
#      <dtrain/dtrain.h> and the shared library alone, and trains.
set -u
src=$1 build=$2 cc=$3 mpi_inc=$4
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-api-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
lib="$build/libdtrain.so"

nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }' | sort >"$tmp/exported"
n=$(wc -l <"$tmp/exported")
cat "$src"/include/dtrain/*.h >"$tmp/headers"
while read -r sym; do
    grep -q "\\b$sym(" "$tmp/headers" || { echo "FAIL: $sym is exported but not declared in include/dtrain"; fail=1; }
done <"$tmp/exported"
leaked=$(grep -E '^dt_(cx|cfg|pack|pool|im2col|col2im)' "$tmp/exported" | head -5)
[ -z "$leaked" ] || { echo "FAIL: internals exported: $leaked"; fail=1; }
# Declared: a line of a header that starts with DT_API names a function before its "(".
sed -n 's/^DT_API[^(]*[ *]\(dt_[a-z0-9_]*\)(.*/\1/p' "$src"/include/dtrain/*.h | sort -u >"$tmp/declared"
while read -r sym; do
    grep -qx "$sym" "$tmp/exported" || { echo "FAIL: $sym is declared in include/dtrain but not exported"; fail=1; }
done <"$tmp/declared"
grep -hE '^[a-zA-Z_][a-zA-Z0-9_ ]*[ *]dt_[a-z0-9_]+\(' "$src"/include/dtrain/*.h |
    grep -v '^DT_API' | grep -v '^static' >"$tmp/bare" &&
    { echo "FAIL: declared without DT_API (hidden in the library):"; cat "$tmp/bare"; fail=1; }
echo "exported: $n functions, $(wc -l <"$tmp/declared") declared"

for h in "$src"/include/dtrain/*.h; do
    name=$(basename "$h")
    flags="-std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I$src/include"
    [ "$name" = comm_mpi.h ] && for d in $mpi_inc; do flags="$flags -I$d"; done
    # shellcheck disable=SC2086
    printf '#include "dtrain/%s"\n' "$name" | "$cc" $flags -x c - 2>"$tmp/h.err" ||
        { echo "FAIL: $name does not compile on its own:"; cat "$tmp/h.err"; fail=1; }
done

"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -I"$src/include" \
    "$src/examples/train_linreg.c" -L"$build" -ldtrain -Wl,-rpath,"$build" \
    -o "$tmp/train_linreg" 2>"$tmp/ex.err" ||
    { echo "FAIL: examples/train_linreg.c does not build against the public API:"; cat "$tmp/ex.err"; exit 1; }
"$tmp/train_linreg" >"$tmp/ex.out" 2>&1 || { echo "FAIL: train_linreg failed:"; cat "$tmp/ex.out"; fail=1; }
grep -q '^final test loss' "$tmp/ex.out" || { echo "FAIL: train_linreg printed no final loss"; fail=1; }
cat "$tmp/ex.out"
exit $fail
